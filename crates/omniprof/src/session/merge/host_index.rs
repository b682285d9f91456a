//! The host ops and user ranges of a trace by correlation id: the side table the merge
//! builds once over the host recording and hands to every backend (as [`HostOps`]) and to
//! the link check, so that none of them scans the recording.

use crate::backend::HostOps;
use crate::Activity;
use crate::FastMap;

/// Host ops and user ranges by correlation id: their index in the trace's activities.
#[derive(Default)]
pub(super) struct HostIndex {
    pub(super) by_correlation: FastMap<u64, usize>,
}

impl HostIndex {
    /// The index of `host`, the trace's activities before any backend's are added.
    pub(super) fn new(host: &[Activity]) -> Self {
        let by_correlation = host
            .iter()
            .enumerate()
            .filter(|(_, a)| a.correlation != 0)
            .map(|(i, a)| (a.correlation, i))
            .collect();
        Self { by_correlation }
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
}
