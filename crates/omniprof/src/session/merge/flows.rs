//! The flows between a backend's launches and the work they launched: the launch with
//! correlation id `c` starts an arrow, the device work with `c` ends it, and the arrow's id
//! is `c`, as Kineto writes it (so a kernel's `correlation` names its flow). Two sources
//! that count correlation ids alike would draw arrows into each other's work, so an id a
//! backend shares with an earlier source moves into that backend's namespace, and only
//! such an id: [`Taken`] knows the ids so far.

use std::collections::hash_map::Entry;

use crate::FastMap;
use crate::{Activity, ActivityClass, ActivityType, Flow, FlowKind};

/// An id that backend `k` shares with an earlier source becomes
/// `(k + 1) << FLOW_NAMESPACE_SHIFT | id`: unique for correlation ids below 2^44 (CUPTI's
/// are 32-bit), and below 2^53, exact in a JSON double.
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

/// The flow ids the trace's sources used so far, by kind (the writers keep kinds apart).
#[derive(Default)]
pub(super) struct Taken(FastMap<(FlowKind, u64), ()>);

impl Taken {
    /// The ids of the flows `activities` (the host recording) hold.
    pub(super) fn of(activities: &[Activity]) -> Self {
        let mut taken = Self::default();
        for flow in activities.iter().filter_map(|a| a.flow) {
            taken.0.insert((flow.kind, flow.id), ());
        }
        taken
    }
}

/// What drawing one backend's flows found.
#[derive(Default)]
pub(super) struct Drawn {
    /// Launches that shared a correlation id with an earlier one (no second arrow is drawn).
    pub(super) duplicate_starts: u64,
    /// Flow ids the backend shared with an earlier source, moved into its namespace.
    pub(super) renumbered: u64,
}

/// Draws the flows of backend number `backend` between its kept activities (`keep[i]`
/// for `activities[i]`), keeping their ids (the correlation id, or the id a flow the backend
/// brought has) unless an earlier source in `taken` used one, and adds its ids to `taken`.
pub(super) fn draw(
    activities: &mut [Activity],
    keep: &[bool],
    backend: u64,
    taken: &mut Taken,
) -> Drawn {
    let mut drawn = Drawn::default();
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
                Entry::Occupied(_) => drawn.duplicate_starts += 1,
            }
        } else if is_launched_work(a.kind) {
            has_work.insert(a.correlation, ());
        }
    }
    let mut own: FastMap<(FlowKind, u64), ()> = FastMap::default();
    for (i, a) in activities.iter_mut().enumerate() {
        if keep[i] && a.flow.is_none() {
            let c = a.correlation;
            let starts =
                is_launch(a.kind) && launches.get(&c) == Some(&i) && has_work.contains_key(&c);
            let ends = is_launched_work(a.kind) && launches.contains_key(&c);
            if starts || ends {
                a.flow = Some(Flow {
                    id: c,
                    kind: FlowKind::Ac2g,
                    start: starts,
                });
            }
        }
        if let Some(flow) = a.flow.filter(|_| keep[i]) {
            own.insert((flow.kind, flow.id), ());
        }
    }
    // Each id the backend shares with an earlier source, and the id it takes instead.
    let mut moved: FastMap<(FlowKind, u64), u64> = FastMap::default();
    for &key in own.keys() {
        if taken.0.contains_key(&key) {
            let id = free_id(key, backend, |k| {
                taken.0.contains_key(&k) || own.contains_key(&k)
            });
            taken.0.insert((key.0, id), ());
            moved.insert(key, id);
        }
    }
    drawn.renumbered = moved.len() as u64;
    if !moved.is_empty() {
        for (i, a) in activities.iter_mut().enumerate() {
            if let Some(flow) = a.flow.as_mut().filter(|_| keep[i]) {
                if let Some(&id) = moved.get(&(flow.kind, flow.id)) {
                    flow.id = id;
                }
            }
        }
    }
    taken.0.extend(own.into_keys().map(|k| (k, ())));
    drawn
}

/// The id `key`'s flows take in backend `backend`'s namespace, or, should `used` say that
/// one is used too (only ids of 2^44 and above can make it so), in the next free one.
fn free_id(
    (kind, id): (FlowKind, u64),
    backend: u64,
    used: impl Fn((FlowKind, u64)) -> bool,
) -> u64 {
    let low = id & ((1 << FLOW_NAMESPACE_SHIFT) - 1);
    (backend + 1..1 << (64 - FLOW_NAMESPACE_SHIFT))
        .map(|n| (n << FLOW_NAMESPACE_SHIFT) | low)
        .chain(1..)
        .find(|&candidate| !used((kind, candidate)))
        .expect("fewer flow ids than u64 values")
}
