//! The host ops and user ranges of a trace by correlation id and by thread and time: the
//! side tables the merge builds once over the host recording and hands to every backend (as
//! [`HostOps`]) and to the link check, so that none of them scans the recording.

use std::cell::OnceCell;

use super::host_ranges::HostRanges;
use crate::backend::{Enclosing, HostOps};
use crate::Activity;
use crate::FastMap;

/// Host ops and user ranges by correlation id (their index in the trace's activities) and
/// by thread and time.
#[derive(Default)]
pub(super) struct HostIndex {
    pub(super) by_correlation: FastMap<u64, usize>,
    /// The ops and user ranges the selection left out of the trace.
    left_out: Vec<Activity>,
    /// Built at the first question by thread and time: most backends never ask.
    ranges: OnceCell<HostRanges>,
}

impl HostIndex {
    /// The index of `host`, the trace's activities before any backend's are added, and of
    /// `left_out`, the ops and user ranges the selection removed from them.
    pub(super) fn new(host: &[Activity], left_out: Vec<Activity>) -> Self {
        let by_correlation = host
            .iter()
            .enumerate()
            .filter(|(_, a)| a.correlation != 0)
            .map(|(i, a)| (a.correlation, i))
            .collect();
        Self {
            by_correlation,
            left_out,
            ranges: OnceCell::new(),
        }
    }

    /// The index over the activities it was built from.
    pub(super) fn view<'a>(&'a self, host: &'a [Activity]) -> HostView<'a> {
        HostView { index: self, host }
    }
}

/// A [`HostIndex`] with the activities it indexes: what backends look host ops up in.
pub(super) struct HostView<'a> {
    index: &'a HostIndex,
    host: &'a [Activity],
}

impl HostOps for HostView<'_> {
    fn get(&self, correlation: u64) -> Option<&Activity> {
        self.index
            .by_correlation
            .get(&correlation)
            .map(|&i| &self.host[i])
    }

    fn enclosing(&self, thread: i64, start_ns: i64, end_ns: i64) -> Enclosing {
        self.index
            .ranges
            .get_or_init(|| HostRanges::new(self.host.iter().chain(&self.index.left_out)))
            .enclosing(thread, start_ns, end_ns)
    }
}
