//! [`RankIds`] and [`IdShift`]: the ids omniprof numbers (slices, instants, ops) kept unique
//! within a rank that has several traces (a `tensorboard_trace_handler` directory holds one
//! per profiling cycle, all of one rank). Each trace numbers its own from 0; a later trace
//! of the rank has them moved past the earlier ones', so that the joins on `(rank, id)` hold
//! across a rank's part files and the queries written for one trace per rank stay right.

/// Where a trace's ids start within its rank: after a trace, past its last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RankIds {
    slice: i64,
    instant: i64,
    /// Per band of op ids ([`OP_BANDS`]).
    op: [u64; 3],
}

/// Where the summary's op ids start: ops from 0, `[memory]` events outside every op from
/// 2^62, `[OutOfMemory]` events from 2^63. Each band moves on its own, so that an id keeps
/// its band (and the docs' "2^62 or more" holds in every part).
const OP_BANDS: [u64; 3] = [0, 1 << 62, 1 << 63];

/// The index in [`OP_BANDS`] of the band `id` is in.
fn band(id: u64) -> usize {
    OP_BANDS.iter().rposition(|&b| id >= b).unwrap_or(0)
}

/// One trace's ids moved by where they start in its rank, with what it used.
#[derive(Debug, Default)]
pub(crate) struct IdShift {
    start: RankIds,
    /// How many of each the trace numbered (ops: past the largest in each band).
    used: RankIds,
    /// An id was given out: the start can no longer change.
    fixed: bool,
}

impl IdShift {
    /// Ids from `start`, fixed now (the trace's rank is known before it is read).
    pub(crate) fn from(start: RankIds) -> Self {
        Self {
            start,
            used: RankIds::default(),
            fixed: true,
        }
    }

    /// Sets where the ids start, when no id was given out yet: the rank came before the
    /// trace's events. Else the start stays (the caller reads the trace again).
    pub(crate) fn start_at(&mut self, start: RankIds) {
        if !self.fixed {
            self.start = start;
        }
    }

    /// Where the ids started.
    pub(crate) fn start(&self) -> RankIds {
        self.start
    }

    /// The rank's slice id of the trace's slice `n`.
    pub(crate) fn slice(&mut self, n: i64) -> i64 {
        self.fixed = true;
        self.used.slice = self.used.slice.max(n + 1);
        self.start.slice.wrapping_add(n)
    }

    /// The rank's instant id of the trace's instant `n`.
    pub(crate) fn instant(&mut self, n: i64) -> i64 {
        self.fixed = true;
        self.used.instant = self.used.instant.max(n + 1);
        self.start.instant.wrapping_add(n)
    }

    /// The rank's op id of the summary's id `id` (of this trace), as Parquet's INT64: ids
    /// past `i64::MAX` (the `[OutOfMemory]` band) wrap.
    pub(crate) fn op(&mut self, id: u64) -> i64 {
        self.fixed = true;
        let b = band(id);
        let n = id - OP_BANDS[b];
        self.used.op[b] = self.used.op[b].max(n + 1);
        id.wrapping_add(self.start.op[b]) as i64
    }

    /// Where the rank's next trace's ids start.
    pub(crate) fn next(&self) -> RankIds {
        let (s, u) = (self.start, self.used);
        RankIds {
            slice: s.slice.wrapping_add(u.slice),
            instant: s.instant.wrapping_add(u.instant),
            op: [0, 1, 2].map(|b| s.op[b].wrapping_add(u.op[b])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_trace_numbers_each_kind_and_op_band_past_the_first() {
        let mut first = IdShift::default();
        assert_eq!(first.slice(0), 0);
        assert_eq!(first.slice(2), 2);
        assert_eq!(first.op(4), 4);
        assert_eq!(first.op((1 << 62) + 1), (1 << 62) + 1);
        let mut second = IdShift::from(first.next());
        assert_eq!(second.slice(0), 3);
        assert_eq!(second.instant(0), 0);
        assert_eq!(second.op(0), 5);
        assert_eq!(second.op(1 << 62), (1 << 62) + 2);
        assert_eq!(second.op(1 << 63), (1u64 << 63) as i64);
    }

    #[test]
    fn the_start_changes_only_until_an_id_is_given_out() {
        let later = IdShift::from({
            let mut s = IdShift::default();
            s.slice(9);
            s.next()
        })
        .start();
        let mut shift = IdShift::default();
        shift.start_at(later);
        assert_eq!(shift.slice(0), 10);
        let mut shift = IdShift::default();
        assert_eq!(shift.slice(0), 0);
        shift.start_at(later);
        assert_eq!(shift.start(), RankIds::default());
    }
}
