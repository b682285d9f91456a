//! The general containers the fold is built of, tuned for what it sees: [`Few`] items
//! (nearly always one) without a vector of their own, [`Parked`] values in reused slots,
//! ids as ranges ([`RangeSet`]), a [`MinQueue`] for items that mostly come in order, and
//! [`trim`] for tables that once held far more.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hash::Hash;

use omniprof_trace::FastMap;

/// How far from the run's back an item is still put in its place there.
const NEAR_BACK: usize = 8;

/// A min-priority queue: the smallest first, for items that mostly come in order or in reverse.
///
/// The fold's queues see such items: a row's ops are placed by start, and its events are
/// mostly final in reverse (a parent after its children, and ops whose end the horizon
/// passes all at once, the latest tried first). A run kept sorted at both ends takes them
/// without the sifting of a heap, which holds only the items that fall inside the run: but
/// for an item that falls among the run's last few, which is put in its place there (the
/// ops of threads taking turns are placed a little out of order, as a thread's waiting ops
/// are placed only when its next op comes). Items are taken in the same order as from a
/// heap: the smallest first (equal items, in either order).
#[derive(Debug)]
pub(super) struct MinQueue<T: Ord> {
    /// Sorted, smallest first.
    run: VecDeque<T>,
    /// Items that came between the run's ends.
    rest: BinaryHeap<Reverse<T>>,
}

impl<T: Ord> Default for MinQueue<T> {
    fn default() -> Self {
        Self {
            run: VecDeque::new(),
            rest: BinaryHeap::new(),
        }
    }
}

impl<T: Ord + Copy> MinQueue<T> {
    /// Adds an item.
    pub(super) fn push(&mut self, item: T) {
        // The back first: items mostly come in order.
        match self.run.back() {
            Some(&last) if item < last => match self.run.front() {
                Some(&first) if item <= first => self.run.push_front(item),
                _ => {
                    // (`item` > the front: the run holds two items or more.)
                    let len = self.run.len();
                    if self.run[len.saturating_sub(NEAR_BACK)] <= item {
                        // Pushed, then moved back past the few larger ones.
                        self.run.push_back(item);
                        let mut at = len;
                        while self.run[at - 1] > item {
                            self.run.swap(at - 1, at);
                            at -= 1;
                        }
                    } else {
                        self.rest.push(Reverse(item));
                    }
                }
            },
            _ => self.run.push_back(item),
        }
    }

    /// The smallest item.
    pub(super) fn peek(&self) -> Option<T> {
        match (self.run.front(), self.rest.peek()) {
            (Some(&a), Some(&Reverse(b))) => Some(a.min(b)),
            (a, b) => a.copied().or(b.map(|r| r.0)),
        }
    }

    /// Takes the smallest item.
    pub(super) fn pop(&mut self) -> Option<T> {
        match (self.run.front(), self.rest.peek()) {
            (Some(a), Some(Reverse(b))) if b < a => self.rest.pop().map(|r| r.0),
            (Some(_), _) => self.run.pop_front(),
            (None, _) => self.rest.pop().map(|r| r.0),
        }
    }

    /// How many items it holds.
    pub(super) fn len(&self) -> usize {
        self.run.len() + self.rest.len()
    }

    /// Whether it holds no item.
    pub(super) fn is_empty(&self) -> bool {
        self.run.is_empty() && self.rest.is_empty()
    }

    /// Drops every item.
    pub(super) fn clear(&mut self) {
        self.run.clear();
        self.rest.clear();
    }

    /// Keeps the items `keep` says to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.run.retain(&mut keep);
        self.rest.retain(|r| keep(&r.0));
    }
}

/// Shrinks a table holding less than an eighth of its room. Lookups in a sparse table miss
/// the cache: the ops held before folding starts are placed at once, and leave the tables
/// of live ops about a hundred times larger than the ops live later.
pub(super) fn trim<K: Eq + Hash, V>(map: &mut FastMap<K, V>) {
    if map.capacity() > 1024 && map.capacity() / 8 > map.len() {
        map.shrink_to(2 * map.len());
    }
}

/// Items nearly always one, kept without a vector of their own (24 bytes, where a
/// `SmallVec` holding one inline takes 32): the live ops with a correlation id, the ops
/// waiting for a flow's device work, the calls whose device work an op receives.
#[derive(Debug, Default)]
pub(super) enum Few<T> {
    #[default]
    None,
    One(T),
    Many(Vec<T>),
}

/// Ops (nodes).
pub(super) type Ids = Few<u32>;

impl<T: Copy> Few<T> {
    pub(super) fn as_slice(&self) -> &[T] {
        match self {
            Self::None => &[],
            Self::One(n) => std::slice::from_ref(n),
            Self::Many(v) => v,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    pub(super) fn push(&mut self, n: T) {
        match self {
            Self::None => *self = Self::One(n),
            Self::One(first) => *self = Self::Many(vec![*first, n]),
            Self::Many(v) => v.push(n),
        }
    }

    /// Back to no item, keeping a vector's room.
    pub(super) fn clear(&mut self) {
        match self {
            Self::Many(v) => v.clear(),
            Self::None | Self::One(_) => *self = Self::None,
        }
    }
}

/// Values in reused slots, each taken once: the fold's final events while they wait for an
/// earlier event of their row, for their parent's decision whether it removes them, or for
/// the builder to take them.
pub(super) struct Parked<T> {
    events: Vec<T>,
    free: Vec<u32>,
}

impl<T> Default for Parked<T> {
    fn default() -> Self {
        Self {
            events: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T: Copy> Parked<T> {
    pub(super) fn park(&mut self, event: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.events[slot as usize] = event;
                slot
            }
            None => {
                self.events.push(event);
                (self.events.len() - 1) as u32
            }
        }
    }

    pub(super) fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.events[slot as usize]
    }
}

/// Ids as ranges of consecutive values (first → last).
#[derive(Default)]
pub(super) struct RangeSet {
    ranges: BTreeMap<u64, u64>,
    /// The ranges (first, last) ids go to while they come one after the other (one per
    /// thread that takes its turn, say), the first `recent_len` used; kept out of `ranges`
    /// (one may touch or overlap a range there until it is put in, the least recently grown
    /// first). They are in order and neither overlap nor touch (an id that fills the gap
    /// between two joins them), so that an id's place among them is found by a binary
    /// search, and the ranges it may grow or join are its neighbours there.
    recent: [(u64, u64); RECENT_RANGES],
    recent_len: usize,
    /// When each recent range last grew.
    grown: [u64; RECENT_RANGES],
    /// Inserts so far, which date the recent ranges.
    clock: u64,
    /// Ids (first, last) that the last look-up found no range of `ranges` to hold: the ids
    /// of a thread's turn nearly all fall in one such gap, found once.
    gap: Option<(u64, u64)>,
}

/// Slots of [`RangeSet::recent`].
const RECENT_RANGES: usize = 8;

impl RangeSet {
    pub(super) fn contains(&mut self, v: u64) -> bool {
        let below = self.recent_below(v);
        below.is_some_and(|i| v <= self.recent[i].1) || self.in_ranges(v)
    }

    /// The recent range that starts last at or before `v`.
    fn recent_below(&self, v: u64) -> Option<usize> {
        let starts = self.recent[..self.recent_len].partition_point(|&(first, _)| first <= v);
        starts.checked_sub(1)
    }

    fn in_ranges(&mut self, v: u64) -> bool {
        if self
            .gap
            .is_some_and(|(first, last)| first <= v && v <= last)
        {
            return false;
        }
        let before = match self.ranges.range(..=v).next_back() {
            Some((_, &last)) if last >= v => return true,
            // `last` < `v`: no overflow.
            Some((_, &last)) => last + 1,
            None => 0,
        };
        // A range after `v` starts above it: no underflow.
        let after = self
            .ranges
            .range(v..)
            .next()
            .map_or(u64::MAX, |(&f, _)| f - 1);
        self.gap = Some((before, after));
        false
    }

    pub(super) fn insert(&mut self, v: u64) {
        self.add(v, false);
    }

    /// Inserts `v`; whether it was not in the set before.
    pub(super) fn insert_new(&mut self, v: u64) -> bool {
        self.add(v, true)
    }

    /// Inserts `v`; when `check`, whether it was not in the set before (else true).
    fn add(&mut self, v: u64, check: bool) -> bool {
        self.clock += 1;
        // Only `v`'s neighbours among the recent ranges can hold it, end just before it (it
        // grows) or start just after it (it joins the two, so that the ranges of threads
        // taking turns merge as their gaps fill).
        let below = self.recent_below(v);
        let above = below.map_or(0, |i| i + 1);
        let mut grow = None;
        if let Some(i) = below {
            let last = self.recent[i].1;
            if v <= last {
                return false;
            }
            // `last` < `v`: no overflow.
            grow = (last + 1 == v).then_some(i);
        }
        let join = (above < self.recent_len && v.checked_add(1) == Some(self.recent[above].0))
            .then_some(above);
        let new = !check || !self.in_ranges(v);
        let slot = match (grow, join) {
            (Some(i), Some(j)) => {
                self.recent[i].1 = self.recent[j].1;
                self.remove_recent(j);
                i
            }
            (Some(i), None) => {
                self.recent[i].1 = v;
                i
            }
            (None, Some(j)) => {
                self.recent[j].0 = v;
                j
            }
            (None, None) => {
                let mut at = above;
                if self.recent_len == RECENT_RANGES {
                    let oldest = (0..RECENT_RANGES)
                        .min_by_key(|&i| self.grown[i])
                        .unwrap_or(0);
                    let (first, last) = self.recent[oldest];
                    self.put(first, last);
                    self.remove_recent(oldest);
                    if oldest < at {
                        at -= 1;
                    }
                }
                self.recent.copy_within(at..self.recent_len, at + 1);
                self.grown.copy_within(at..self.recent_len, at + 1);
                self.recent_len += 1;
                self.recent[at] = (v, v);
                at
            }
        };
        self.grown[slot] = self.clock;
        new
    }

    /// Drops recent range `i` (the ranges after it move down).
    fn remove_recent(&mut self, i: usize) {
        self.recent.copy_within(i + 1..self.recent_len, i);
        self.grown.copy_within(i + 1..self.recent_len, i);
        self.recent_len -= 1;
    }

    /// Puts `first..=last` in `ranges`, merged with the ranges it touches or overlaps.
    fn put(&mut self, mut first: u64, mut last: u64) {
        self.gap = None;
        if let Some((&f, &l)) = self.ranges.range(..=first).next_back() {
            if l.checked_add(1).is_some_and(|n| n >= first) || l == u64::MAX {
                first = f;
                last = last.max(l);
                self.ranges.remove(&f);
            }
        }
        loop {
            let bound = last.saturating_add(1);
            let Some((&f, &l)) = self.ranges.range(first..=bound).next() else {
                break;
            };
            last = last.max(l);
            self.ranges.remove(&f);
        }
        self.ranges.insert(first, last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_out_smallest_first_whatever_order_they_went_in() {
        let mut queue = MinQueue::default();
        let mut heap = BinaryHeap::new();
        // Ascending, descending and scattered stretches, with items taken in between.
        let mut state = 7u64;
        let mut taken = (Vec::new(), Vec::new());
        for round in 0..2000u64 {
            let item = match round % 300 {
                0..=99 => round,
                100..=199 => 10_000 - round,
                _ => {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                    state >> 52
                }
            };
            queue.push(item);
            heap.push(Reverse(item));
            if round % 3 == 0 {
                taken.0.push(queue.pop());
                taken.1.push(heap.pop().map(|r| r.0));
            }
            assert_eq!(queue.peek(), heap.peek().map(|r| r.0));
            assert_eq!(queue.len(), heap.len());
        }
        queue.retain(|&x| x % 2 == 0);
        heap.retain(|r| r.0 % 2 == 0);
        while !heap.is_empty() {
            taken.0.push(queue.pop());
            taken.1.push(heap.pop().map(|r| r.0));
        }
        assert!(queue.is_empty());
        assert_eq!(queue.pop(), None);
        assert_eq!(taken.0, taken.1);
    }

    #[test]
    fn items_a_little_out_of_order_come_out_smallest_first() {
        let mut queue = MinQueue::default();
        let mut heap = BinaryHeap::new();
        let mut taken = (Vec::new(), Vec::new());
        // Five threads taking turns, each a few items behind the others, and now and then
        // an item far behind.
        for round in 0..3000u64 {
            let item = match round % 97 {
                0 => round / 2,
                _ => round * 10 + 40 - (round % 5) * 13,
            };
            queue.push(item);
            heap.push(Reverse(item));
            if round % 4 == 0 {
                taken.0.push(queue.pop());
                taken.1.push(heap.pop().map(|r| r.0));
            }
            assert_eq!(queue.peek(), heap.peek().map(|r| r.0));
        }
        while !heap.is_empty() {
            taken.0.push(queue.pop());
            taken.1.push(heap.pop().map(|r| r.0));
        }
        assert!(queue.is_empty());
        assert_eq!(taken.0, taken.1);
    }

    #[test]
    fn ids_merge_into_ranges_of_consecutive_values() {
        let mut ids = RangeSet::default();
        for v in [5, 6, 7, 10, 9, 1, 8, 8, 0, u64::MAX] {
            ids.insert(v);
        }
        let recent = ids.recent;
        for &(first, last) in &recent[..ids.recent_len] {
            ids.put(first, last);
        }
        let ranges: Vec<(u64, u64)> = ids.ranges.iter().map(|(&f, &l)| (f, l)).collect();
        assert_eq!(ranges, [(0, 1), (5, 10), (u64::MAX, u64::MAX)]);
        assert!(ids.contains(7) && ids.contains(0) && ids.contains(u64::MAX));
        assert!(!ids.contains(2) && !ids.contains(11) && !ids.contains(u64::MAX - 1));
    }

    #[test]
    fn the_recent_ranges_of_threads_taking_turns_merge_as_their_gaps_fill() {
        let mut ids = RangeSet::default();
        // Three threads, each given ten consecutive ids, taking turns id by id.
        for i in 0..10 {
            for thread in 0..3 {
                assert!(ids.insert_new(thread * 10 + i));
            }
        }
        assert_eq!(&ids.recent[..ids.recent_len], &[(0, 29)]);
        assert!(ids.ranges.is_empty());
        assert!(!ids.insert_new(17) && !ids.insert_new(0) && !ids.insert_new(29));
        assert!(ids.insert_new(30) && ids.contains(30) && !ids.contains(31));
    }

    #[test]
    fn ids_inserted_in_any_order_are_found_as_a_set_finds_them() {
        let mut ids = RangeSet::default();
        let mut set = std::collections::BTreeSet::new();
        let mut state = 11u64;
        for round in 0..20_000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Runs of ids from a dozen threads taking turns, with gaps and repeats, so that
            // recent ranges grow, join and are put in the map.
            let v = match round % 4 {
                0 => (state >> 60) * 1000 + round / 12,
                1 => state >> 54,
                2 => u64::MAX - (state >> 61),
                _ => (state >> 60) * 1000 + round / 12 + 1,
            };
            let probe = state.rotate_left(17) >> 54;
            assert_eq!(ids.contains(probe), set.contains(&probe), "probe {probe}");
            assert_eq!(ids.insert_new(v), set.insert(v), "insert {v}");
            let recent = &ids.recent[..ids.recent_len];
            assert!(recent.windows(2).all(|w| w[0].1.saturating_add(1) < w[1].0));
        }
    }
}
