//! The host ops and user ranges of each recorder thread as sorted intervals, to find the
//! innermost open over a span of time ([`HostOps::enclosing`](crate::backend::HostOps)):
//! what a backend that links launches by thread and time asks once per runtime call, so
//! each question is a binary search and a short walk up the nesting, not a scan.
//!
//! Built from the whole host recording, what the activity selection filters out included: a
//! device runtime fed the correlation ids would have seen every op and range, kept or not.

use crate::backend::Enclosing;
use crate::FastMap;
use crate::{Activity, ActivityType};

/// No enclosing interval.
const NONE: u32 = u32::MAX;

/// One op or user range on its thread.
#[derive(Clone, Copy, Debug)]
struct Interval {
    start_ns: i64,
    end_ns: i64,
    correlation: u64,
    /// The innermost interval of the same list that contains this one, or [`NONE`].
    parent: u32,
}

/// One thread's intervals of one kind, by start (an enclosing interval before what it
/// encloses), each with its parent.
#[derive(Default)]
struct Nested(Vec<Interval>);

impl Nested {
    /// Sorts the intervals and links each to the innermost one containing it. Ranges on a
    /// thread nest; one that overlaps another without nesting (an async range ended out of
    /// order) is given the innermost one that does contain it, and the clearance of a span
    /// near it counts only the edges on the found interval's chain and its neighbours by
    /// start.
    fn link(&mut self) {
        let list = &mut self.0;
        // Stable and adaptive: the recording is already in this order within a thread.
        list.sort_by_key(|i| (i.start_ns, std::cmp::Reverse(i.end_ns)));
        let mut open: Vec<u32> = Vec::new();
        for k in 0..list.len() {
            let (start, end) = (list[k].start_ns, list[k].end_ns);
            while let Some(&top) = open.last() {
                let t = list[top as usize];
                if t.start_ns <= start && end <= t.end_ns {
                    break;
                }
                open.pop();
            }
            list[k].parent = open.last().copied().unwrap_or(NONE);
            open.push(k as u32);
        }
    }

    /// The innermost interval containing `start..=end`, and the distance from that span to
    /// the nearest edge of any interval of the list.
    fn enclosing(&self, start: i64, end: i64) -> (Option<u64>, i64) {
        let list = &self.0;
        // The last interval to begin at or before `start`: the innermost containing the span
        // is it or one of its ancestors.
        let after = list.partition_point(|i| i.start_ns <= start);
        let mut clearance = i64::MAX;
        let mut gap = |edge: i64| {
            let d = if edge < start {
                start - edge
            } else if edge > end {
                edge - end
            } else {
                0
            };
            clearance = clearance.min(d);
        };
        if let Some(next) = list.get(after) {
            gap(next.start_ns);
        }
        let mut found = None;
        let mut k = after.checked_sub(1).map_or(NONE, |k| k as u32);
        if let Some(last) = list.get(k as usize) {
            gap(last.start_ns);
        }
        while let Some(i) = list.get(k as usize) {
            // Intervals below the enclosing one ended before its end; the latest of those
            // ends is the last met on the way up.
            gap(i.end_ns);
            if end <= i.end_ns {
                gap(i.start_ns);
                found = Some(i.correlation);
                break;
            }
            k = i.parent;
        }
        (found, clearance)
    }
}

/// A thread's host ops and user ranges.
#[derive(Default)]
struct ThreadLists {
    ops: Nested,
    user_ranges: Nested,
}

/// The host ops and user ranges of every recorder thread, by thread id.
#[derive(Default)]
pub(super) struct HostRanges {
    threads: FastMap<i64, ThreadLists>,
}

/// Whether `a` is a host op or user range a device runtime would have been pushed: one with
/// a correlation id (Python frames have none).
pub(super) fn is_range(a: &Activity) -> bool {
    a.correlation != 0 && matches!(a.kind, ActivityType::CpuOp | ActivityType::UserAnnotation)
}

impl HostRanges {
    /// The ranges among `host`, the host recording: every op and user range with a
    /// correlation id, on its thread (`resource`).
    pub(super) fn new<'a>(host: impl IntoIterator<Item = &'a Activity>) -> Self {
        let mut threads: FastMap<i64, ThreadLists> = FastMap::default();
        for a in host.into_iter().filter(|a| is_range(a)) {
            let lists = threads.entry(a.resource).or_default();
            let list = if a.kind == ActivityType::CpuOp {
                &mut lists.ops
            } else {
                &mut lists.user_ranges
            };
            list.0.push(Interval {
                start_ns: a.start_ns,
                end_ns: a.end_ns,
                correlation: a.correlation,
                parent: NONE,
            });
        }
        for lists in threads.values_mut() {
            lists.ops.link();
            lists.user_ranges.link();
        }
        Self { threads }
    }

    /// See [`HostOps::enclosing`](crate::backend::HostOps::enclosing).
    pub(super) fn enclosing(&self, thread: i64, start_ns: i64, end_ns: i64) -> Enclosing {
        let Some(lists) = self.threads.get(&thread) else {
            return Enclosing {
                op: None,
                user_range: None,
                clearance_ns: i64::MAX,
            };
        };
        let (op, op_clearance) = lists.ops.enclosing(start_ns, end_ns);
        let (user_range, user_clearance) = lists.user_ranges.enclosing(start_ns, end_ns);
        Enclosing {
            op,
            user_range,
            clearance_ns: op_clearance.min(user_clearance),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TID: i64 = 42;

    fn range(kind: ActivityType, correlation: u64, start_ns: i64, end_ns: i64) -> Activity {
        let mut a = Activity::new(kind, "r", 1, TID, start_ns, end_ns);
        a.correlation = correlation;
        a
    }

    fn op(correlation: u64, start_ns: i64, end_ns: i64) -> Activity {
        range(ActivityType::CpuOp, correlation, start_ns, end_ns)
    }

    /// Op 1 (0–1000) holds op 2 (100–400), which holds op 3 (200–300), and op 4
    /// (500–900); op 5 (2000–3000) follows; user range 9 (50–950) spans the first.
    fn ranges() -> HostRanges {
        HostRanges::new(&[
            op(1, 0, 1000),
            op(2, 100, 400),
            op(3, 200, 300),
            op(4, 500, 900),
            op(5, 2000, 3000),
            range(ActivityType::UserAnnotation, 9, 50, 950),
        ])
    }

    fn found(ranges: &HostRanges, start: i64, end: i64) -> (Option<u64>, Option<u64>, i64) {
        let e = ranges.enclosing(TID, start, end);
        (e.op, e.user_range, e.clearance_ns)
    }

    #[test]
    fn the_innermost_op_and_user_range_open_over_a_span_are_found() {
        let r = ranges();
        assert_eq!(found(&r, 240, 260), (Some(3), Some(9), 40));
        assert_eq!(found(&r, 120, 150), (Some(2), Some(9), 20));
        // After op 3 ended, inside op 2 again: op 3's end is the nearest edge.
        assert_eq!(found(&r, 330, 350), (Some(2), Some(9), 30));
        assert_eq!(found(&r, 600, 700), (Some(4), Some(9), 100));
        // Between op 4 and the end of op 1, outside the user range.
        assert_eq!(found(&r, 960, 970), (Some(1), None, 10));
        assert_eq!(found(&r, 2500, 2600), (Some(5), None, 400));
    }

    #[test]
    fn a_span_outside_every_op_finds_none_and_its_distance_to_the_nearest() {
        let r = ranges();
        assert_eq!(found(&r, 1200, 1300), (None, None, 200));
        assert_eq!(found(&r, -500, -400), (None, None, 400));
        assert_eq!(found(&r, 3100, 3200), (None, None, 100));
        let other = r.enclosing(TID + 1, 0, 10);
        assert_eq!(
            (other.op, other.user_range, other.clearance_ns),
            (None, None, i64::MAX)
        );
    }

    #[test]
    fn a_span_across_an_edge_is_enclosed_by_what_holds_it_whole_with_no_clearance() {
        let r = ranges();
        // Across op 3's end: op 2 holds it whole.
        assert_eq!(found(&r, 290, 310), (Some(2), Some(9), 0));
        // Across op 1's end.
        assert_eq!(found(&r, 990, 1010), (None, None, 0));
    }

    #[test]
    fn python_frames_instants_and_ranges_without_ids_are_not_intervals() {
        let mut frame = range(ActivityType::PythonFunction, 7, 0, 100);
        frame.correlation = 0;
        let r = HostRanges::new(&[
            frame,
            range(ActivityType::CpuInstantEvent, 8, 10, 10),
            op(0, 0, 100),
        ]);
        assert_eq!(found(&r, 40, 50), (None, None, i64::MAX));
    }

    #[test]
    fn ranges_recorded_out_of_order_are_sorted_before_they_are_linked() {
        let r = HostRanges::new(&[op(3, 200, 300), op(1, 0, 1000), op(2, 100, 400)]);
        assert_eq!(found(&r, 240, 260), (Some(3), None, 40));
        assert_eq!(found(&r, 320, 330), (Some(2), None, 20));
    }

    #[test]
    fn a_range_overlapping_another_without_nesting_falls_to_the_one_that_holds_it() {
        // Op 2 (100–600) outlives op 3 (50–300)'s end: op 2's parent is op 1. Op 3's end
        // is off op 2's chain, so the clearance counts op 2's end.
        let r = HostRanges::new(&[op(1, 0, 1000), op(3, 50, 300), op(2, 100, 600)]);
        assert_eq!(found(&r, 400, 410), (Some(2), None, 190));
        assert_eq!(found(&r, 700, 710), (Some(1), None, 100));
    }
}
