//! CUPTI's timestamps on omniprof's clock.
//!
//! CUPTI stamps records with its own nanosecond clock (`cuptiGetTimestamp`). The session
//! pairs it with the wall clock omniprof's host timestamps end up on
//! ([`omniprof::clock::wall_now_ns`]) at start and at stop, each pair the tightest of a few
//! bracketed reads, and maps a CUPTI time by the offset interpolated between the two pairs.
//! The offset's change from start to stop is the drift the trace reports.

use omniprof::clock::wall_now_ns;

/// A CUPTI time and the wall time read at the same moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    /// CUPTI's clock, in nanoseconds.
    pub cupti_ns: u64,
    /// Unix-epoch nanoseconds.
    pub wall_ns: i64,
}

impl Pair {
    /// The wall time minus the CUPTI time.
    pub fn offset(self) -> i64 {
        self.wall_ns.wrapping_sub(self.cupti_ns as i64)
    }

    /// Reads both clocks `tries` times and keeps the read whose wall brackets were closest,
    /// taking the brackets' midpoint.
    pub fn take(tries: usize, cupti_now: impl Fn() -> u64) -> Self {
        let mut best = (
            i64::MAX,
            Pair {
                cupti_ns: 0,
                wall_ns: 0,
            },
        );
        for _ in 0..tries.max(1) {
            let before = wall_now_ns();
            let cupti_ns = cupti_now();
            let after = wall_now_ns();
            let gap = after - before;
            if gap < best.0 {
                best = (
                    gap,
                    Pair {
                        cupti_ns,
                        wall_ns: before + gap / 2,
                    },
                );
            }
        }
        best.1
    }
}

/// Maps CUPTI times to Unix-epoch nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockMap {
    start: Pair,
    stop: Pair,
}

impl ClockMap {
    /// A map from the pairs read at start and at stop.
    pub fn new(start: Pair, stop: Pair) -> Self {
        Self { start, stop }
    }

    /// The offset (wall − CUPTI) at start.
    pub fn offset_ns(&self) -> i64 {
        self.start.offset()
    }

    /// How much the offset changed between start and stop.
    pub fn drift_ns(&self) -> i64 {
        self.stop.offset() - self.start.offset()
    }

    /// `cupti_ns` on the wall clock, the offset interpolated linearly between start and
    /// stop (and held at either end outside them).
    pub fn to_unix_ns(&self, cupti_ns: u64) -> i64 {
        let span = self.stop.cupti_ns.saturating_sub(self.start.cupti_ns);
        let into = cupti_ns.saturating_sub(self.start.cupti_ns).min(span);
        let drift = if span == 0 {
            0
        } else {
            (self.drift_ns() as i128 * into as i128 / span as i128) as i64
        };
        (cupti_ns as i64)
            .wrapping_add(self.start.offset())
            .wrapping_add(drift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_map_by_the_offset_interpolated_between_start_and_stop() {
        let map = ClockMap::new(
            Pair {
                cupti_ns: 1_000,
                wall_ns: 10_000,
            },
            Pair {
                cupti_ns: 2_000,
                wall_ns: 11_100,
            },
        );
        assert_eq!(map.offset_ns(), 9_000);
        assert_eq!(map.drift_ns(), 100);
        assert_eq!(map.to_unix_ns(1_000), 10_000);
        assert_eq!(map.to_unix_ns(1_500), 10_550);
        assert_eq!(map.to_unix_ns(2_000), 11_100);
        // Outside the session the drift is held, not extrapolated.
        assert_eq!(map.to_unix_ns(500), 9_500);
        assert_eq!(map.to_unix_ns(3_000), 12_100);
    }

    #[test]
    fn a_pair_reads_the_clock_between_its_wall_brackets() {
        let pair = Pair::take(5, || 42);
        assert_eq!(pair.cupti_ns, 42);
        assert!((wall_now_ns() - pair.wall_ns).abs() < 1_000_000_000);
    }
}
