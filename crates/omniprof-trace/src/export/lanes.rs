//! What every writer lays out the same way: the order activities are written in, the span an
//! X event is written with, and the lanes that keep each (pid, tid) row strictly nested.
//!
//! Viewers drop (Perfetto) or mis-draw slices that partly overlap on one row, so an event
//! that would partly overlap another moves to a sibling lane of its row: the Chrome writer
//! writes lane k as the row [`lane_tid`](crate::layout::lane_tid) numbers, the Perfetto writer
//! as a sibling track.

use std::cmp::Reverse;

use crate::activity::{Activity, ActivityType};
use crate::hash::{cache_slot, FastMap};
use crate::layout::MAX_LANE;

/// How many recently used rows [`Lanes`] keeps at hand.
const RECENT_ROWS: usize = 16;

/// A row: (pid, tid).
pub(crate) type RowId = (i64, i64);

/// The activities in written order: by start, longer first, then input order. Sessions
/// hand over sorted traces, so only a trace that is not (one read from a file, say) gets an
/// order of its own; a writer that goes over the activities twice computes it once.
pub(crate) enum WrittenOrder<'a> {
    AsGiven(&'a [Activity]),
    Sorted(Vec<&'a Activity>),
}

/// What activities are ordered by: start, then the longer first.
#[inline]
fn written_key(a: &Activity) -> (i64, Reverse<i64>) {
    let (start, end) = written_span(a);
    (start, Reverse(end))
}

impl<'a> WrittenOrder<'a> {
    pub(crate) fn of(acts: &'a [Activity]) -> Self {
        if acts.is_sorted_by_key(written_key) {
            Self::AsGiven(acts)
        } else {
            Self::sorted(acts)
        }
    }

    /// [`of`](Self::of) and a first pass over the activities in that order, in one go
    /// where they are in written order already: `each` takes them as they are checked, and
    /// should one be out of order, `state` is `reset` and `each` takes them again, sorted.
    pub(crate) fn visit<S>(
        acts: &'a [Activity],
        state: &mut S,
        reset: impl FnOnce(&mut S),
        mut each: impl FnMut(&mut S, &'a Activity),
    ) -> Self {
        let mut last = (i64::MIN, Reverse(i64::MAX));
        for a in acts {
            let key = written_key(a);
            if key < last {
                reset(state);
                let order = Self::sorted(acts);
                let _ = order.try_for_each::<()>(|a| {
                    each(state, a);
                    Ok(())
                });
                return order;
            }
            last = key;
            each(state, a);
        }
        Self::AsGiven(acts)
    }

    fn sorted(acts: &'a [Activity]) -> Self {
        let mut order: Vec<&'a Activity> = acts.iter().collect();
        // Each key once, and a stable result: the keys are sorted with their indices.
        order.sort_by_cached_key(|a| written_key(a));
        Self::Sorted(order)
    }

    /// Calls `each` with the activities in this order, stopping at its first error.
    pub(crate) fn try_for_each<E>(
        &self,
        each: impl FnMut(&'a Activity) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Self::AsGiven(acts) => acts.iter().try_for_each(each),
            Self::Sorted(order) => order.iter().copied().try_for_each(each),
        }
    }
}

/// The (start, end) an X event is written with: GPU user annotations are widened by 1 ns on
/// each side so they enclose the kernels they were built from.
#[inline]
pub(crate) fn written_span(a: &Activity) -> (i64, i64) {
    // Start plus duration, without overflow: a crafted trace's times reach i64's ends.
    let end = a.end_ns.max(a.start_ns);
    if a.kind == ActivityType::GpuUserAnnotation {
        (a.start_ns.saturating_sub(1), end.saturating_add(1))
    } else {
        (a.start_ns, end)
    }
}

/// The row an activity's `resource` is written on (a negative id has no row of its own).
#[inline]
pub(crate) fn row_tid(resource: i64) -> i64 {
    resource.checked_abs().unwrap_or(0)
}

/// Assigns X events, taken in written order, to lanes of their (pid, tid) row so that every
/// lane nests strictly: lane 0 is the row itself, lane k > 0 a sibling.
#[derive(Default)]
pub(crate) struct Lanes {
    row_of: FastMap<RowId, usize>,
    /// Rows looked up lately, in a slot picked by a hash of their id: events come from a
    /// few rows at a time, and a hit is one comparison where the map hashes and probes.
    recent: [Option<(RowId, usize)>; RECENT_ROWS],
    /// Per row: its id and, per lane, the ends of the open events (a stack).
    rows: Vec<(RowId, Vec<Vec<i64>>)>,
    pub spilled: u64,
}

impl Lanes {
    #[inline]
    pub(crate) fn assign(&mut self, row_id: RowId, start: i64, end: i64) -> u32 {
        let row = self.row(row_id);
        self.assign_in(row, start, end)
    }

    /// The index of a row (rows are numbered in order of first use).
    #[inline]
    pub(crate) fn row(&mut self, row_id: RowId) -> usize {
        let slot = cache_slot::<RECENT_ROWS>(row_id.0 as u64 ^ (row_id.1 as u64).rotate_left(32));
        match self.recent[slot] {
            Some((id, row)) if id == row_id => row,
            _ => {
                let row = self.row_in_map(row_id);
                self.recent[slot] = Some((row_id, row));
                row
            }
        }
    }

    fn row_in_map(&mut self, row_id: RowId) -> usize {
        let rows = &mut self.rows;
        *self.row_of.entry(row_id).or_insert_with(|| {
            rows.push((row_id, vec![Vec::new()]));
            rows.len() - 1
        })
    }

    /// [`assign`](Self::assign) for the row with this index.
    #[inline]
    pub(crate) fn assign_in(&mut self, row: usize, start: i64, end: i64) -> u32 {
        let stacks = &mut self.rows[row].1;
        let mut lane = 0;
        loop {
            if lane == stacks.len() {
                stacks.push(Vec::new());
            }
            let stack = &mut stacks[lane];
            while stack.last().is_some_and(|&top| top <= start) {
                stack.pop();
            }
            if lane == MAX_LANE || stack.last().is_none_or(|&top| end <= top) {
                stack.push(end);
                break;
            }
            lane += 1;
        }
        self.spilled += (lane > 0) as u64;
        lane as u32
    }

    /// Every row in index order, with how many lanes it used.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (RowId, u32)> + '_ {
        self.rows
            .iter()
            .map(|(id, lanes)| (*id, lanes.len() as u32))
    }

    /// Rows that needed lanes beyond the first: (pid, tid) and how many more, sorted.
    pub(crate) fn extra_rows(&self) -> Vec<(RowId, u32)> {
        let mut extra: Vec<_> = self
            .rows
            .iter()
            .filter(|(_, lanes)| lanes.len() > 1)
            .map(|(id, lanes)| (*id, lanes.len() as u32 - 1))
            .collect();
        extra.sort_unstable();
        extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_at_the_ends_of_i64_saturates() {
        let mut a = Activity::new(
            ActivityType::GpuUserAnnotation,
            "a",
            0,
            1,
            i64::MIN,
            i64::MAX,
        );
        assert_eq!(written_span(&a), (i64::MIN, i64::MAX));
        a.kind = ActivityType::ConcurrentKernel;
        (a.start_ns, a.end_ns) = (-5, i64::MAX);
        assert_eq!(written_span(&a), (-5, i64::MAX));
    }

    #[test]
    fn overlapping_events_move_to_sibling_lanes_and_nested_ones_stay() {
        let mut lanes = Lanes::default();
        let row = (1, 1);
        assert_eq!(lanes.assign(row, 0, 100), 0);
        assert_eq!(lanes.assign(row, 10, 50), 0, "nested");
        assert_eq!(lanes.assign(row, 40, 150), 1, "partly overlaps both");
        assert_eq!(
            lanes.assign(row, 100, 120),
            0,
            "starts where the first ended"
        );
        assert_eq!(lanes.spilled, 1);
        assert_eq!(lanes.extra_rows(), vec![(row, 1)]);
    }
}
