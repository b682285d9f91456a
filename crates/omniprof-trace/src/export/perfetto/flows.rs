//! Perfetto's flow ids for the model's flow ends. A Chrome JSON flow id may have several `f`
//! ends, each linked from the latest `s` of that id before it (Perfetto counts one flow per
//! end). In a `.pftrace`, a start lists ids in `flow_ids` and an end closes one in
//! `terminating_flow_ids`, which ends that id for good: a second end of the same id would
//! find it closed and be dropped. So every end after the first of its start gets an id of its
//! own, which its start lists beside the first.

use crate::activity::{Flow, FlowKind};
use crate::hash::FastMap;
use crate::layout::OWN_FLOW_IDS;

/// Ids of the ends after the first start from here (see `uuid::flow` for the ids of the
/// model's kinds).
const OWN_IDS: u64 = OWN_FLOW_IDS;

/// The Perfetto ids of every flow end, found in written order.
#[derive(Default)]
pub(super) struct FlowIds {
    /// A flow's latest start (its written index) and how many ends followed it.
    open: FastMap<(FlowKind, u64), (usize, u32)>,
    /// The ids a start lists after its flow's own: one per end after the first.
    more_starts: FastMap<usize, Vec<u64>>,
    /// The id of an end after the first of its start.
    own_end: FastMap<usize, u64>,
    next: u64,
    /// Whether an id started again, a start had several ends or an end had no start:
    /// which start an end follows then depends on the order the ends are placed in.
    reused: bool,
}

impl FlowIds {
    /// Takes the flow end of the activity written `index`-th.
    pub(super) fn place(&mut self, index: usize, flow: Flow) {
        let key = (flow.kind, flow.id);
        if flow.start {
            self.reused |= self.open.insert(key, (index, 0)).is_some();
            return;
        }
        let Some((start, ends)) = self.open.get_mut(&key) else {
            // No start before it: Perfetto drops it as it drops the JSON's. (A start placed
            // later could still precede it in time.)
            self.reused = true;
            return;
        };
        *ends += 1;
        if *ends > 1 {
            self.reused = true;
            let id = OWN_IDS | self.next;
            self.next += 1;
            self.more_starts.entry(*start).or_default().push(id);
            self.own_end.insert(index, id);
        }
    }

    /// Whether an id started twice, a start had several ends or an end none.
    pub(super) fn reused(&self) -> bool {
        self.reused
    }

    /// Drops what only placing needs (the starts still open), once every end is placed.
    pub(super) fn placed(mut self) -> Self {
        self.open = FastMap::default();
        self
    }

    /// The ids a start written `index`-th lists beside its flow's own.
    pub(super) fn more_starts(&self, index: usize) -> &[u64] {
        self.more_starts.get(&index).map_or(&[], Vec::as_slice)
    }

    /// The id an end written `index`-th closes, when not its flow's own.
    pub(super) fn own_end(&self, index: usize) -> Option<u64> {
        self.own_end.get(&index).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: u64, start: bool) -> Flow {
        Flow {
            id,
            kind: FlowKind::Ac2g,
            start,
        }
    }

    #[test]
    fn the_second_and_third_ends_of_a_start_get_ids_of_their_own_that_the_start_lists() {
        let mut ids = FlowIds::default();
        ids.place(0, flow(7, true));
        ids.place(1, flow(7, false));
        ids.place(2, flow(7, false));
        ids.place(3, flow(7, false));
        assert_eq!(ids.own_end(1), None);
        assert_eq!(ids.own_end(2), Some(OWN_IDS));
        assert_eq!(ids.own_end(3), Some(OWN_IDS + 1));
        assert_eq!(ids.more_starts(0), &[OWN_IDS, OWN_IDS + 1]);
    }

    #[test]
    fn a_new_start_of_the_same_id_takes_the_ends_after_it() {
        let mut ids = FlowIds::default();
        ids.place(0, flow(7, true));
        ids.place(1, flow(7, false));
        ids.place(2, flow(7, true));
        ids.place(3, flow(7, false));
        ids.place(4, flow(9, false));
        assert_eq!(
            (ids.own_end(1), ids.own_end(3), ids.own_end(4)),
            (None, None, None)
        );
        assert_eq!((ids.more_starts(0), ids.more_starts(2)), (&[][..], &[][..]));
    }
}
