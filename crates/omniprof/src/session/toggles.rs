//! Collection switched off and on while a session runs (PyTorch's
//! `toggle_collection_dynamic`): an activity of a type that was switched off when it began
//! is left out of the trace, as PyTorch leaves out the ops that begin while their collection
//! is off (an op begun before keeps its end). The host recorder goes on recording meanwhile,
//! so that ops open across a switch pair their ends on every thread without its hot path
//! checking a second flag; the backends are told what is off and may stop collecting it
//! (the PyTorch op observer removes its callbacks, as PyTorch does), and the trace is as
//! asked either way.
//!
//! The switches are timed by the recorder's clock and turned into nanoseconds with the
//! session's own conversion, so they fall exactly where its records do. What is off stays off
//! into the next trace of a schedule, as in PyTorch.

use crate::clock::{self, TickConverter};
use crate::{ActivitySet, ActivityType, Trace};

/// The switches of one session: what is off now, and each change since the last trace.
#[derive(Debug, Default)]
pub(crate) struct Toggles {
    /// The types off now.
    off: ActivitySet,
    /// What was off when the trace being recorded began.
    off_at_start: ActivitySet,
    /// Each change since: its tick and what was off from then on.
    changes: Vec<(u64, ActivitySet)>,
}

impl Toggles {
    /// The types off now.
    pub(crate) fn off(&self) -> ActivitySet {
        self.off
    }

    /// Switches collection of `types` on (`enable`) or off, from now; returns whether what
    /// is off changed.
    pub(crate) fn switch(&mut self, enable: bool, types: ActivitySet) -> bool {
        let mut off = self.off;
        for t in types.iter() {
            if enable {
                off.remove(t);
            } else {
                off.insert(t);
            }
        }
        if off == self.off {
            return false;
        }
        self.off = off;
        self.changes.push((clock::ticks(), off));
        true
    }

    /// What the trace recorded since the last call leaves out, its changes timed by `conv`;
    /// the next trace begins with what is off now.
    pub(crate) fn take(&mut self, conv: &TickConverter) -> Switched {
        let changes = std::mem::take(&mut self.changes)
            .into_iter()
            .map(|(tick, off)| (conv.to_unix_ns(tick), off))
            .collect();
        let switched = Switched {
            off_at_start: self.off_at_start,
            changes,
        };
        self.off_at_start = self.off;
        switched
    }
}

/// One trace's switches, in nanoseconds (none: nothing was switched off).
#[derive(Clone, Debug, Default)]
pub(crate) struct Switched {
    off_at_start: ActivitySet,
    changes: Vec<(i64, ActivitySet)>,
}

impl Switched {
    /// Nothing was off at any time.
    fn is_empty(&self) -> bool {
        self.off_at_start.is_empty() && self.changes.iter().all(|(_, off)| off.is_empty())
    }

    /// Whether an activity of type `kind` beginning at `ns` is left out: its type was off.
    pub(crate) fn leaves_out(&self, kind: ActivityType, ns: i64) -> bool {
        !self.is_empty() && self.off_at(ns).contains(kind)
    }

    /// What was off at `ns`.
    fn off_at(&self, ns: i64) -> ActivitySet {
        let after = self.changes.partition_point(|&(at, _)| at <= ns);
        match after {
            0 => self.off_at_start,
            n => self.changes[n - 1].1,
        }
    }

    /// Leaves out of `trace` each activity of a type that was off when it began, and the
    /// flow ends whose other end it left out. Returns how many activities it left out. (The
    /// merge leaves out the backends' activities as it takes them, so that each backend's
    /// count of what the trace kept is right; this leaves out the host's.)
    pub(crate) fn leave_out(&self, trace: &mut Trace) -> usize {
        if self.is_empty() {
            return 0;
        }
        let before = trace.activities.len();
        let mut cut_flows = Vec::new();
        trace.activities.retain(|a| {
            let keep = !self.leaves_out(a.kind, a.start_ns);
            if let (false, Some(flow)) = (keep, a.flow) {
                cut_flows.push((flow.id, flow.kind));
            }
            keep
        });
        if !cut_flows.is_empty() {
            for a in &mut trace.activities {
                if a.flow.is_some_and(|f| cut_flows.contains(&(f.id, f.kind))) {
                    a.flow = None;
                }
            }
        }
        before - trace.activities.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::CalibrationSample;
    use crate::{Activity, ActivityType, Flow, FlowKind};

    fn set(types: &[ActivityType]) -> ActivitySet {
        types.iter().copied().collect()
    }

    #[test]
    fn what_begins_while_its_type_is_off_is_left_out_with_its_flows() {
        let ops = set(&[ActivityType::CpuOp, ActivityType::UserAnnotation]);
        let switched = Switched {
            off_at_start: ActivitySet::empty(),
            changes: vec![(100, ops), (200, ActivitySet::empty())],
        };
        let mut trace = Trace::new(0, 1_000);
        let op = |name: &str, start: i64, end: i64| {
            Activity::new(ActivityType::CpuOp, name, 1, 1, start, end)
        };
        let mut launched = op("launched_before", 50, 150);
        launched.flow = Some(Flow {
            id: 7,
            kind: FlowKind::Ac2g,
            start: true,
        });
        let mut forward = op("forward_while_off", 120, 130);
        forward.flow = Some(Flow {
            id: 9,
            kind: FlowKind::FwdBwd,
            start: true,
        });
        let mut backward = op("backward_after", 300, 310);
        backward.flow = Some(Flow {
            id: 9,
            kind: FlowKind::FwdBwd,
            start: false,
        });
        let kernel = Activity::new(ActivityType::ConcurrentKernel, "k", 0, 7, 140, 160);
        trace.activities = vec![
            launched,
            forward,
            op("spans_the_switch_on", 150, 250),
            op("at_the_switch_on", 200, 210),
            kernel,
            backward,
        ];
        assert_eq!(switched.leave_out(&mut trace), 2);
        let names: Vec<&str> = trace.activities.iter().map(|a| &*a.name).collect();
        assert_eq!(
            names,
            ["launched_before", "at_the_switch_on", "k", "backward_after"]
        );
        // The flow whose start was left out is cut at its end too; the other stays.
        assert_eq!(trace.activities[3].flow, None);
        assert_eq!(trace.activities[0].flow.map(|f| f.id), Some(7));
    }

    #[test]
    fn what_is_off_at_a_traces_end_is_off_at_the_next_ones_start() {
        let mut toggles = Toggles::default();
        let kernels = set(&[ActivityType::ConcurrentKernel]);
        toggles.switch(false, kernels);
        // Switching off what is off already changes nothing.
        toggles.switch(false, kernels);
        let sample = CalibrationSample::take();
        let conv = TickConverter::new(sample, sample);
        let first = toggles.take(&conv);
        assert_eq!(
            (first.off_at_start, first.changes.len()),
            (ActivitySet::empty(), 1)
        );
        let second = toggles.take(&conv);
        assert_eq!((second.off_at_start, second.changes.len()), (kernels, 0));
        let mut trace = Trace::new(0, 1_000);
        trace.activities = vec![Activity::new(
            ActivityType::ConcurrentKernel,
            "k",
            0,
            7,
            5,
            9,
        )];
        assert_eq!(second.leave_out(&mut trace), 1);
        toggles.switch(true, kernels);
        assert!(toggles.take(&conv).changes[0].1.is_empty());
    }
}
