//! The check of the links a backend draws to host ops: a runtime or driver call runs inside
//! the op that made it, on its thread, so one linked to an op it lies outside of proves the
//! link wrong (a backend passing its own ids off as the host's).

use super::host_index::HostView;
use crate::backend::HostOps;
use crate::FastMap;
use crate::{Activity, ActivityClass};

/// How far a runtime call may seem to stick out of the host op that made it: the host's
/// times are converted from the recording clock, the backend's read from the wall clock.
const LINK_SLACK_NS: i64 = 5_000;

/// Unlinks one backend's events from host ops they cannot belong to, and returns how many
/// it unlinked: every event of this backend linked to an op that one of its runtime or
/// driver events lies outside of.
pub(super) fn refuse_foreign_links(
    activities: &mut [Activity],
    host: &HostView<'_>,
    host_pid: i64,
) -> u64 {
    let inside = |a: &Activity, op: &Activity| {
        op.start_ns - LINK_SLACK_NS <= a.start_ns
            && a.end_ns <= op.end_ns + LINK_SLACK_NS
            && (a.device != host_pid || a.resource == op.resource)
    };
    let refused: FastMap<u64, ()> = activities
        .iter()
        .filter(|a| {
            matches!(
                a.kind.class(),
                Some(ActivityClass::Runtime | ActivityClass::Driver)
            )
        })
        .filter_map(|a| {
            let id = a.linked_correlation?;
            let op = host.get(id)?;
            (!inside(a, op)).then_some((id, ()))
        })
        .collect();
    if refused.is_empty() {
        return 0;
    }
    let mut count = 0;
    for a in activities {
        if a.linked_correlation
            .is_some_and(|id| refused.contains_key(&id))
        {
            a.linked_correlation = None;
            count += 1;
        }
    }
    count
}
