//! The flows between a backend's launches and the work they launched: the launch with
//! correlation id `c` starts an arrow, the device work with `c` ends it. Each backend's
//! arrows live in a namespace of their own.

use std::collections::hash_map::Entry;

use crate::FastMap;
use crate::{Activity, ActivityClass, ActivityType, Flow, FlowKind};

/// Flow ids of backend `k` are offset by `(k + 1) << FLOW_NAMESPACE_SHIFT`, so two backends
/// that both count correlation ids from 1 cannot draw arrows into each other's work, nor into
/// the host's own `fwdbwd` arrows (numbered from 1 by the recorder). The result stays below
/// 2^53, exact in a JSON double.
const FLOW_NAMESPACE_SHIFT: u32 = 44;

/// Device-side work a launch can start a flow to.
fn is_launched_work(kind: ActivityType) -> bool {
    matches!(
        kind,
        ActivityType::GpuMemcpy | ActivityType::GpuMemset | ActivityType::CudaSync
    ) || kind.class() == Some(ActivityClass::Kernel)
}

/// A runtime call, which may launch work.
fn is_launch(kind: ActivityType) -> bool {
    kind.class() == Some(ActivityClass::Runtime)
}

/// Draws the flows of backend number `backend` between its kept activities (`keep[i]`
/// for `activities[i]`) and moves the flows it brought into its namespace. Returns the
/// launches that shared a correlation id with an earlier one (no second arrow is drawn).
pub(super) fn draw(activities: &mut [Activity], keep: &[bool], backend: u64) -> u64 {
    let namespace = (backend + 1) << FLOW_NAMESPACE_SHIFT;
    let mut duplicate_starts = 0;
    let mut launches: FastMap<u64, usize> = FastMap::default();
    let mut has_work: FastMap<u64, ()> = FastMap::default();
    for (i, a) in activities.iter().enumerate() {
        // Activities that bring their own flows take no part in drawing them.
        if !keep[i] || a.correlation == 0 || a.flow.is_some() {
            continue;
        }
        if is_launch(a.kind) {
            match launches.entry(a.correlation) {
                Entry::Vacant(v) => {
                    v.insert(i);
                }
                Entry::Occupied(_) => duplicate_starts += 1,
            }
        } else if is_launched_work(a.kind) {
            has_work.insert(a.correlation, ());
        }
    }
    for (i, a) in activities.iter_mut().enumerate() {
        if !keep[i] {
            continue;
        }
        if let Some(flow) = a.flow.as_mut() {
            flow.id |= namespace;
            continue;
        }
        let c = a.correlation;
        let starts = is_launch(a.kind) && launches.get(&c) == Some(&i) && has_work.contains_key(&c);
        let ends = is_launched_work(a.kind) && launches.contains_key(&c);
        if starts || ends {
            a.flow = Some(Flow {
                id: namespace | c,
                kind: FlowKind::Ac2g,
                start: starts,
            });
        }
    }
    duplicate_starts
}
