//! Perfetto's flow ids for the model's flow ends. A Chrome JSON flow id may have several `f`
//! ends, each linked from the latest `s` of that id before it (Perfetto counts one flow per
//! end). In a `.pftrace`, a start lists ids in `flow_ids` and an end closes one in
//! `terminating_flow_ids`, which ends that id for good: a second end of the same id would
//! find it closed and be dropped. So every end after the first of its start gets an id of its
//! own, which its start lists beside the first.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
    open: OpenFlows,
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
    /// Ids for a trace of `activities` activities. Room for as many flows as they make
    /// pairs is made at the first flow, for a table grown step by step would be rehashed at
    /// each step, into memory not touched before (most of writing a large trace's flows).
    pub(super) fn for_activities(activities: usize) -> Self {
        Self {
            open: OpenFlows {
                room: activities / 2,
                ..OpenFlows::default()
            },
            ..Self::default()
        }
    }

    /// Takes the flow end of the activity written `index`-th.
    #[inline]
    pub(super) fn place(&mut self, index: usize, flow: Flow) {
        if flow.start {
            self.reused |= self.open.start(flow, index);
            return;
        }
        let Some((start, ends)) = self.open.get_mut(flow) else {
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
            self.more_starts.entry(start).or_default().push(id);
            self.own_end.insert(index, id);
        }
    }

    /// Whether an id started twice, a start had several ends or an end none.
    pub(super) fn reused(&self) -> bool {
        self.reused
    }

    /// Drops what only placing needs (the starts still open), once every end is placed.
    pub(super) fn placed(mut self) -> Self {
        self.open = OpenFlows::default();
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

/// The latest start of each flow id (its written index) and how many ends followed it.
///
/// Correlation ids count up, so the ids of a kind from the first one on are kept in a
/// table indexed by id, where a lookup is an index and a comparison, not a hash and a
/// probe (this table was a third of placing the activities); ids before the first, or too
/// far past the flows seen so far to keep a table that large, are kept in a hash map.
#[derive(Default)]
struct OpenFlows {
    /// Per kind ([`run`]): the first id, and per id from it the written index of its latest
    /// start plus 1 (0: none yet) and how many ends followed it.
    runs: [(u64, Vec<(usize, u32)>); 2],
    others: HashMap<(FlowKind, u64), (usize, u32), BuildHasherDefault<FlowIdHasher>>,
    /// How many flows to make room for at the first (see [`FlowIds::for_activities`]).
    room: usize,
    /// Starts placed so far.
    starts: usize,
}

/// The index of a kind's run in [`OpenFlows::runs`].
#[inline]
fn run(kind: FlowKind) -> usize {
    match kind {
        FlowKind::FwdBwd => 0,
        FlowKind::Ac2g => 1,
    }
}

impl OpenFlows {
    /// Notes a start at `index`; returns whether its id had started before.
    #[inline]
    fn start(&mut self, flow: Flow, index: usize) -> bool {
        self.starts += 1;
        // A run spans at most four ids per start seen, and what the trace's size promises.
        let limit = (self.starts * 4).max(self.room) as u64 + 4096;
        let room = self.room;
        let (first, run) = &mut self.runs[run(flow.kind)];
        if run.is_empty() {
            *first = flow.id;
            run.reserve(room);
        }
        let offset = flow.id.wrapping_sub(*first);
        if offset < limit {
            let at = offset as usize;
            if at >= run.len() {
                // Grown to twice at least, so that ids that skip ahead cost no more than ids
                // that do not.
                let len = (at + 1).max(run.len() * 2).min(limit as usize);
                run.resize(len, (0, 0));
            }
            let entry = &mut run[at];
            // A start kept in the map while the run was shorter moves here.
            let before =
                !self.others.is_empty() && self.others.remove(&(flow.kind, flow.id)).is_some();
            let again = entry.0 != 0 || before;
            *entry = (index + 1, 0);
            return again;
        }
        if self.others.is_empty() {
            self.others.reserve(64);
        }
        self.others
            .insert((flow.kind, flow.id), (index, 0))
            .is_some()
    }

    /// The latest start of `flow`'s id and how many ends followed it, if it started.
    #[inline]
    fn get_mut(&mut self, flow: Flow) -> Option<(usize, &mut u32)> {
        let (first, run) = &mut self.runs[run(flow.kind)];
        let at = flow.id.wrapping_sub(*first);
        if let Some((start, ends)) = run.get_mut(at as usize).filter(|(start, _)| *start != 0) {
            return Some((*start - 1, ends));
        }
        self.others
            .get_mut(&(flow.kind, flow.id))
            .map(|(start, ends)| (*start, ends))
    }
}

/// Hashes flow keys so that ids that count up, as correlation ids do, take neighboring
/// buckets: a flow's end is looked up soon after its start was added, and in the table of
/// a large trace (megabytes) a hash that scatters them costs a cache miss at each. Runs of
/// 64 ids stay together; the runs, and the top bits that hashbrown compares first, are
/// mixed by a multiply, so ids far apart or with a stride spread as with [`FastMap`]'s.
#[derive(Default)]
struct FlowIdHasher(u64);

impl FlowIdHasher {
    const RUN: u64 = 63;
    const TAG: u64 = 0x7f << 57;
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
}

impl Hasher for FlowIdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let key = self.0;
        let run = (key >> 6).wrapping_mul(Self::MIX) << 6;
        let tag = key.wrapping_mul(Self::MIX) & Self::TAG;
        (run | key & Self::RUN) & !Self::TAG | tag
    }

    /// The words of the key (its kind, then its id) fold into one, the last written in
    /// the low bits.
    #[inline]
    fn write_u64(&mut self, word: u64) {
        self.0 = self.0.rotate_left(32) ^ word;
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_isize(&mut self, word: isize) {
        self.write_u64(word as u64);
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
    fn ids_that_count_up_take_neighboring_buckets_with_mixed_tags() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash =
            |id: u64| BuildHasherDefault::<FlowIdHasher>::default().hash_one((FlowKind::Ac2g, id));
        let run: Vec<u64> = (6400..6464).map(hash).collect();
        let bucket = |h: u64| h & !FlowIdHasher::TAG;
        for (offset, &h) in run.iter().enumerate() {
            assert_eq!(bucket(h), bucket(run[0]) + offset as u64);
        }
        let tags: std::collections::HashSet<u64> = run.iter().map(|h| h >> 57).collect();
        assert!(tags.len() > 32, "{} tags", tags.len());
        // The next run lands elsewhere, and the other kind's ids apart from these.
        assert!(bucket(hash(6464)).abs_diff(bucket(run[0])) > 1 << 20);
        let fwd = BuildHasherDefault::<FlowIdHasher>::default().hash_one((FlowKind::FwdBwd, 6400));
        assert_ne!(bucket(fwd), bucket(run[0]));
    }

    #[test]
    fn ids_far_from_the_first_and_before_it_are_placed_as_ids_near_it() {
        // From the first id on, ids far past it (kept in the map) and one before it.
        let far = 1_000_000_000;
        let mut ids = FlowIds::default();
        for (index, (id, start)) in [
            (100, true),
            (far, true),
            (7, true),
            (100, false),
            (far, false),
            (far, false),
            (7, false),
            (7, false),
        ]
        .into_iter()
        .enumerate()
        {
            ids.place(index, flow(id, start));
        }
        assert_eq!(ids.own_end(3), None);
        assert_eq!(ids.own_end(5), Some(OWN_IDS));
        assert_eq!(ids.own_end(7), Some(OWN_IDS + 1));
        assert_eq!(ids.more_starts(1), &[OWN_IDS]);
        assert_eq!(ids.more_starts(2), &[OWN_IDS + 1]);
        assert!(ids.reused());
    }

    #[test]
    fn an_id_started_in_the_map_and_again_once_the_table_reaches_it_counts_as_started_twice() {
        let mut ids = FlowIds::default();
        ids.place(0, flow(1, true));
        // Past the table's reach with one start seen; within it after a few thousand.
        ids.place(1, flow(6_000, true));
        assert!(!ids.reused());
        for i in 0..2_000 {
            ids.place(2 + i, flow(2 + i as u64, true));
        }
        assert!(!ids.reused());
        ids.place(3_000, flow(6_000, true));
        assert!(ids.reused());
        // The end follows the later start.
        ids.place(3_001, flow(6_000, false));
        assert_eq!(
            (ids.own_end(3_001), ids.more_starts(3_000)),
            (None, &[][..])
        );
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
