//! The check of the links a backend draws to host ops: a runtime or driver call runs inside
//! the op that made it, on its thread, so one linked to an op it lies outside of proves the
//! link wrong (a backend passing its own ids off as the host's). The capture window is the
//! exception: an op open at the stop ends at the window's end, and one begun before the
//! start begins at it, so a call of theirs may stick out past that edge through no one's
//! error. Such a link is kept and counted apart, quietly.

use super::host_index::HostView;
use crate::backend::HostOps;
use crate::keys::{arg, name};
use crate::FastMap;
use crate::{Activity, ActivityClass, Window};

/// How far a runtime call may seem to stick out of the host op that made it: the host's
/// times are converted from the recording clock, the backend's read from the wall clock.
const LINK_SLACK_NS: i64 = 5_000;

/// What the check of one backend's links found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Checked {
    /// Events unlinked: every event linked to an op that one of the backend's runtime or
    /// driver events lies outside of.
    pub(super) refused: u64,
    /// Runtime or driver events that stick out of their op only past an edge of `window`
    /// that cut the op; their links are kept.
    pub(super) window_cut: u64,
}

/// Where a runtime or driver event lies against the host op it is linked to.
#[derive(PartialEq)]
enum Placement {
    Inside,
    /// Outside only past an edge of the window that cut the op.
    CutByWindow,
    Outside,
}

/// Where `a` lies against `op`, in a trace captured over `window` by host process
/// `host_pid`.
fn placement(a: &Activity, op: &Activity, window: Window, host_pid: i64) -> Placement {
    if a.device == host_pid && a.resource != op.resource {
        return Placement::Outside;
    }
    let before = a.start_ns < op.start_ns - LINK_SLACK_NS;
    let after = a.end_ns > op.end_ns + LINK_SLACK_NS;
    if !before && !after {
        return Placement::Inside;
    }
    // The recorder clamps an op begun before the window to its start and ends one open at
    // the stop at its end.
    let cut_before = op.start_ns <= window.start_ns;
    let cut_after = op.end_ns >= window.end_ns;
    if (!before || cut_before) && (!after || cut_after) {
        Placement::CutByWindow
    } else {
        Placement::Outside
    }
}

/// Unlinks one backend's events from host ops they cannot belong to (see [`Checked`]).
pub(super) fn refuse_foreign_links(
    activities: &mut [Activity],
    host: &HostView<'_>,
    host_pid: i64,
    window: Window,
) -> Checked {
    let mut checked = Checked::default();
    let mut refused: FastMap<u64, ()> = FastMap::default();
    let calls = activities.iter().filter(|a| {
        matches!(
            a.kind.class(),
            Some(ActivityClass::Runtime | ActivityClass::Driver)
        )
    });
    for a in calls {
        let Some((id, op)) = a
            .linked_correlation
            .and_then(|id| Some((id, host.get(id)?)))
        else {
            continue;
        };
        match placement(a, op, window, host_pid) {
            Placement::Inside => {}
            Placement::CutByWindow => checked.window_cut += 1,
            Placement::Outside => {
                refused.insert(id, ());
            }
        }
    }
    if refused.is_empty() {
        return checked;
    }
    for a in activities {
        if a.linked_correlation
            .is_some_and(|id| refused.contains_key(&id))
        {
            a.linked_correlation = None;
            checked.refused += 1;
        }
    }
    checked
}

/// Copies each collective's fields from its `record_param_comms` op onto the activities
/// linked to it, after their own args, in Kineto's order (those the op has): what Kineto
/// writes on a collective's kernel and on the runtime call that launched it. `host_has_one`:
/// whether any host op is a `record_param_comms` (none: nothing to look up).
pub(super) fn copy_collective_fields(
    activities: &mut [Activity],
    host: &HostView<'_>,
    host_has_one: bool,
) {
    if !host_has_one {
        return;
    }
    for a in activities {
        let Some(op) = a.linked_correlation.and_then(|id| host.get(id)) else {
            continue;
        };
        if &*op.name != name::RECORD_PARAM_COMMS {
            continue;
        }
        for key in arg::COLLECTIVE_FIELDS {
            if let Some((k, v)) = op.args.iter().find(|(k, _)| &**k == key) {
                a.args.push((k.clone(), v.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ActivityType;

    const PID: i64 = 10;
    const WINDOW: Window = Window {
        start_ns: 1_000_000,
        end_ns: 2_000_000,
    };

    fn op(start_ns: i64, end_ns: i64) -> Activity {
        Activity::new(ActivityType::CpuOp, "aten::item", PID, 1, start_ns, end_ns)
    }

    fn call(start_ns: i64, end_ns: i64) -> Activity {
        Activity::new(
            ActivityType::PrivateUse1Runtime,
            "orSync",
            PID,
            1,
            start_ns,
            end_ns,
        )
    }

    fn place(a: &Activity, op: &Activity) -> &'static str {
        match placement(a, op, WINDOW, PID) {
            Placement::Inside => "inside",
            Placement::CutByWindow => "cut by the window",
            Placement::Outside => "outside",
        }
    }

    #[test]
    fn a_call_past_an_op_the_window_cut_is_the_windows_cut() {
        // Open at the stop: the op ends at the window's end, its call after it.
        let open_at_stop = op(1_900_000, WINDOW.end_ns);
        assert_eq!(
            place(&call(1_950_000, 2_100_000), &open_at_stop),
            "cut by the window"
        );
        assert_eq!(
            place(&call(2_100_000, 2_200_000), &open_at_stop),
            "cut by the window"
        );
        // Begun before the start: the op begins at the window's start.
        let begun_before = op(WINDOW.start_ns, 1_100_000);
        assert_eq!(
            place(&call(900_000, 1_050_000), &begun_before),
            "cut by the window"
        );
        // But a call past the edge the window did not cut is outside.
        assert_eq!(place(&call(1_950_000, 2_100_000), &begun_before), "outside");
        assert_eq!(place(&call(900_000, 1_050_000), &open_at_stop), "outside");
    }

    #[test]
    fn a_call_outside_an_op_inside_the_window_is_outside() {
        let whole = op(1_200_000, 1_300_000);
        assert_eq!(place(&call(1_250_000, 1_260_000), &whole), "inside");
        assert_eq!(place(&call(1_296_000, 1_304_000), &whole), "inside");
        assert_eq!(place(&call(1_400_000, 1_410_000), &whole), "outside");
        assert_eq!(place(&call(1_100_000, 1_210_000), &whole), "outside");
        let mut elsewhere = call(1_250_000, 1_260_000);
        elsewhere.resource = 2;
        assert_eq!(place(&elsewhere, &whole), "outside");
    }

    #[test]
    fn a_collectives_fields_are_copied_onto_what_is_linked_to_its_op_in_kinetos_order() {
        use super::super::host_index::HostIndex;
        use crate::Value;
        let mut comms = op(1_100_000, 1_200_000);
        comms.name = name::RECORD_PARAM_COMMS.into();
        comms.correlation = 7;
        // As PyTorch's map gives them: in no particular order, among other args.
        comms.args = vec![
            ("Group size".into(), Value::Int(2)),
            ("Input Dims".into(), Value::List(Vec::new())),
            ("Collective name".into(), Value::from("allreduce")),
            ("In msg nelems".into(), Value::Int(5)),
        ];
        let mut other = op(1_300_000, 1_400_000);
        other.correlation = 8;
        let host = [comms, other];
        let index = HostIndex::new(&host, Vec::new());
        let linked = |id| {
            let mut a = call(1_150_000, 1_160_000);
            a.linked_correlation = Some(id);
            a.args.push(("cbid".into(), Value::Int(211)));
            a
        };
        let mut activities = [linked(7), linked(8)];
        copy_collective_fields(&mut activities, &index.view(&host), true);
        let keys = |a: &Activity| {
            a.args
                .iter()
                .map(|(k, _)| k.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&activities[0]),
            ["cbid", "Collective name", "In msg nelems", "Group size"]
        );
        assert_eq!(keys(&activities[1]), ["cbid"]);
        // No record_param_comms in the host recording: nothing looked up.
        let mut untouched = [linked(7)];
        copy_collective_fields(&mut untouched, &index.view(&host), false);
        assert_eq!(keys(&untouched[0]), ["cbid"]);
    }
}
