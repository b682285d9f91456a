//! CUPTI's timestamps on omniprof's clock.
//!
//! CUPTI stamps records with its own clock (`cuptiGetTimestamp`): nanoseconds by default,
//! but whatever a timestamp callback returns once a profiler registered one, and
//! torch.profiler's Kineto registers one that counts TSC ticks, for the rest of the process.
//! So the session pairs CUPTI's clock with the wall clock omniprof's host timestamps end up
//! on ([`omniprof::clock::wall_now_ns`]) at start and at stop, each pair the tightest of a
//! few bracketed reads, and maps a CUPTI time by the line through the two pairs: the offset
//! and the rate are both measured. The offset's change from start to stop is the drift the
//! trace reports, with the rate. How far a mapped time may be off is measured too: the
//! pairs' brackets ([`ClockMap::uncertainty_ns`]), which decide how close to a host op's edge
//! a runtime call can be placed by its time.

use omniprof::clock::{tightest_pair, wall_now_ns};

/// A CUPTI time and the wall time read at the same moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    /// CUPTI's clock, in nanoseconds.
    pub cupti_ns: u64,
    /// Unix-epoch nanoseconds.
    pub wall_ns: i64,
    /// How far `wall_ns` may be from the wall time at `cupti_ns`: half the width of the
    /// wall reads' bracket around the CUPTI read (`i64::MAX` where the wall clock went back
    /// in every bracket).
    pub uncertainty_ns: i64,
}

impl Pair {
    /// The wall time minus the CUPTI time.
    pub fn offset(self) -> i64 {
        self.wall_ns.wrapping_sub(self.cupti_ns as i64)
    }

    /// Reads CUPTI's clock between two wall reads `tries` times and keeps the read whose wall
    /// brackets were closest, taking the brackets' midpoint ([`tightest_pair`]).
    pub fn take(tries: usize, cupti_now: impl Fn() -> u64) -> Self {
        let mut walls = Vec::with_capacity(2 * tries.max(1));
        let wall = || {
            let t = wall_now_ns();
            walls.push(t);
            t
        };
        let (wall_ns, cupti_ns) = tightest_pair(tries, wall, cupti_now);
        // The kept read's bracket is the narrowest that did not go back (tightest_pair's
        // rule); the wall reads come in (before, after) twos.
        let narrowest = walls
            .chunks_exact(2)
            .map(|w| w[1] - w[0])
            .filter(|&width| width >= 0)
            .min();
        Pair {
            cupti_ns,
            wall_ns,
            uncertainty_ns: narrowest.map_or(i64::MAX, |w| (w + 1) / 2),
        }
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

    /// How far a mapped time may be from the wall time it stands for, as far as the pairs'
    /// reads tell: the larger of their uncertainties (the line between them is off by no
    /// more than its ends, where both clocks run at steady rates).
    pub fn uncertainty_ns(&self) -> i64 {
        self.start.uncertainty_ns.max(self.stop.uncertainty_ns)
    }

    /// How much the offset changed between start and stop.
    pub fn drift_ns(&self) -> i64 {
        self.stop.offset() - self.start.offset()
    }

    /// Wall nanoseconds per CUPTI clock unit between start and stop (1 where they were
    /// read at the same CUPTI time).
    pub fn scale(&self) -> f64 {
        let cupti = self.stop.cupti_ns as i128 - self.start.cupti_ns as i128;
        let wall = self.stop.wall_ns as i128 - self.start.wall_ns as i128;
        if cupti > 0 {
            wall as f64 / cupti as f64
        } else {
            1.0
        }
    }

    /// `cupti_ns` on the wall clock: on the line through the start and stop pairs
    /// (extended beyond them). The arithmetic is on differences from the start pair, which
    /// a double holds exactly for any session length.
    pub fn to_unix_ns(&self, cupti_ns: u64) -> i64 {
        let since = cupti_ns as i128 - self.start.cupti_ns as i128;
        self.start.wall_ns + (since as f64 * self.scale()).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_map_on_the_line_through_the_start_and_stop_pairs() {
        let map = ClockMap::new(
            Pair {
                cupti_ns: 1_000,
                wall_ns: 10_000,
                uncertainty_ns: 20,
            },
            Pair {
                cupti_ns: 2_000,
                wall_ns: 11_100,
                uncertainty_ns: 35,
            },
        );
        assert_eq!(map.uncertainty_ns(), 35);
        assert_eq!(map.offset_ns(), 9_000);
        assert_eq!(map.drift_ns(), 100);
        assert_eq!(map.scale(), 1.1);
        assert_eq!(map.to_unix_ns(1_000), 10_000);
        assert_eq!(map.to_unix_ns(1_500), 10_550);
        assert_eq!(map.to_unix_ns(2_000), 11_100);
        assert_eq!(map.to_unix_ns(500), 9_450);
        assert_eq!(map.to_unix_ns(3_000), 12_200);
    }

    #[test]
    fn a_cupti_clock_counting_ticks_maps_at_its_own_rate() {
        // After torch.profiler, CUPTI may count 2.5 ticks per nanosecond from a small origin.
        let wall = 1_790_000_000_000_000_000i64;
        let map = ClockMap::new(
            Pair {
                cupti_ns: 4_000_000_000,
                wall_ns: wall,
                uncertainty_ns: 0,
            },
            Pair {
                cupti_ns: 4_250_000_000,
                wall_ns: wall + 100_000_000,
                uncertainty_ns: 0,
            },
        );
        assert_eq!(map.scale(), 0.4);
        assert_eq!(map.to_unix_ns(4_000_002_500), wall + 1_000);
        assert_eq!(map.to_unix_ns(4_125_000_000), wall + 50_000_000);
    }

    #[test]
    fn a_pair_reads_the_clock_between_its_wall_brackets() {
        let pair = Pair::take(5, || 42);
        assert_eq!(pair.cupti_ns, 42);
        assert!((wall_now_ns() - pair.wall_ns).abs() < 1_000_000_000);
        // Two wall reads in a row are less than a second apart.
        assert!((0..500_000_000).contains(&pair.uncertainty_ns), "{pair:?}");
    }
}
