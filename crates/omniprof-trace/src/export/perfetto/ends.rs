//! The slice ends the writer holds back until no later-starting event precedes them.

use super::proto::SliceEnd;

/// Pending slice ends, `(end, event)`, the next to write last. Slices are added in written
/// order, so most of them nest inside the open ones and end first: they go on top, and a
/// sorted vector costs a comparison where a heap would sift.
#[derive(Default)]
pub(super) struct PendingEnds(Vec<(i64, SliceEnd)>);

impl PendingEnds {
    /// Holds back the end `event` of a slice that ends at `end`. Of slices that end at the
    /// same time, the one added last (the inner one) is written first.
    #[inline]
    pub(super) fn push(&mut self, end: i64, event: SliceEnd) {
        if self.0.last().is_none_or(|&(top, _)| top >= end) {
            self.0.push((end, event));
        } else {
            let at = self.0.partition_point(|&(e, _)| e >= end);
            self.0.insert(at, (end, event));
        }
    }

    /// Takes the next end if it is at or before `t`.
    #[inline]
    pub(super) fn pop_until(&mut self, t: i64) -> Option<(i64, SliceEnd)> {
        match self.0.last() {
            Some(&(end, _)) if end <= t => self.0.pop(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_come_out_in_time_order_inner_slices_first() {
        let mut ends = PendingEnds::default();
        let on = SliceEnd::on;
        ends.push(100, on(1));
        ends.push(50, on(2));
        ends.push(80, on(3));
        ends.push(50, on(4));
        ends.push(120, on(5));
        let mut order = Vec::new();
        while let Some(end) = ends.pop_until(100) {
            order.push(end);
        }
        assert_eq!(order, [(50, on(4)), (50, on(2)), (80, on(3)), (100, on(1))]);
        assert_eq!(ends.pop_until(i64::MAX), Some((120, on(5))));
        assert_eq!(ends.pop_until(i64::MAX), None);
    }
}
