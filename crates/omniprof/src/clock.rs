//! The recording clock and its calibration to wall time; documented on [`ClockSource`].

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// Which counter [`ticks`] reads.
///
/// The recording clock and its conversion to Unix-epoch nanoseconds.
///
/// The hot path reads a raw counter ([`ticks`]): the TSC on x86-64 when it is invariant
/// (`constant_tsc` and `nonstop_tsc`), the virtual counter `cntvct_el0` on aarch64, and
/// `CLOCK_MONOTONIC` in nanoseconds everywhere else. Ticks become wall time only when buffers
/// are drained, through a [`TickConverter`] calibrated from samples taken at session start
/// *and* at stop, so the scale is measured over the whole session instead of one short burst
/// (Kineto's approach, which drifts on long traces).
///
/// ```
/// use omniprof::clock::{CalibrationSample, TickConverter};
///
/// let start = CalibrationSample::take();
/// let t = omniprof::clock::ticks();
/// std::thread::sleep(std::time::Duration::from_millis(2));
/// let stop = CalibrationSample::take();
/// let conv = TickConverter::new(start, stop);
/// let ns = conv.to_unix_ns(t);
/// // Read between the two samples, `t` maps between their wall times (however long the
/// // thread waited in between), give or take the conversion's rounding.
/// assert!(start.wall_ns - 1_000 <= ns && ns <= stop.wall_ns + 1_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// x86-64 `rdtsc` (invariant TSC).
    Tsc,
    /// aarch64 `cntvct_el0`.
    CounterRegister,
    /// `clock_gettime(CLOCK_MONOTONIC)`, in nanoseconds.
    Monotonic,
}

impl ClockSource {
    /// The name written in trace metadata (`tsc`, `monotonic`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tsc => "tsc",
            Self::CounterRegister => "cntvct_el0",
            Self::Monotonic => "clock_monotonic",
        }
    }
}

const UNDECIDED: u8 = 0;
const FAST: u8 = 1;
const MONOTONIC: u8 = 2;
static SOURCE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The source [`ticks`] uses, decided once per process.
pub fn clock_source() -> ClockSource {
    if SOURCE.load(Ordering::Relaxed) == UNDECIDED {
        let fast = fast_counter_usable();
        SOURCE.store(if fast { FAST } else { MONOTONIC }, Ordering::Relaxed);
    }
    match SOURCE.load(Ordering::Relaxed) {
        FAST if cfg!(target_arch = "x86_64") => ClockSource::Tsc,
        FAST => ClockSource::CounterRegister,
        _ => ClockSource::Monotonic,
    }
}

/// Reads the recording clock. Call [`clock_source`] once before relying on it; until then (and
/// wherever no fast counter is usable) it reads `CLOCK_MONOTONIC`.
#[inline(always)]
pub fn ticks() -> u64 {
    if SOURCE.load(Ordering::Relaxed) == FAST {
        fast_ticks()
    } else {
        monotonic_ns()
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn fast_ticks() -> u64 {
    // SAFETY: `rdtsc` has no preconditions on x86-64; it only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn fast_ticks() -> u64 {
    let v: u64;
    // SAFETY: reading `cntvct_el0` is permitted at EL0 on Linux and has no side effects.
    unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
    v
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
fn fast_ticks() -> u64 {
    monotonic_ns()
}

#[cfg(target_arch = "x86_64")]
fn fast_counter_usable() -> bool {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has = |flag: &str| {
        flags
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|w| w == flag))
    };
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(target_arch = "aarch64")]
fn fast_counter_usable() -> bool {
    true
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn fast_counter_usable() -> bool {
    false
}

fn read_clock(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and both clock ids exist on every Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// `CLOCK_MONOTONIC` in nanoseconds.
fn monotonic_ns() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC) as u64
}

/// The wall clock (`CLOCK_REALTIME`) in nanoseconds since the Unix epoch.
pub fn wall_now_ns() -> i64 {
    read_clock(libc::CLOCK_REALTIME)
}

/// A moment as a UTC calendar date and time of day, for names and messages (a run's
/// directory, the time an on-demand trace was scheduled for).
///
/// ```
/// use omniprof::clock::UtcTime;
///
/// let t = UtcTime::from_unix_ms(1_796_544_123_456);
/// assert_eq!((t.year, t.month, t.day), (2026, 12, 6));
/// assert_eq!((t.hour, t.minute, t.second, t.millisecond), (8, 2, 3, 456));
/// assert_eq!(UtcTime::from_unix_ms(-1).year, 1969);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtcTime {
    /// The year (before 1970 too).
    pub year: i64,
    /// The month, 1 to 12.
    pub month: u32,
    /// The day of the month, 1 to 31.
    pub day: u32,
    /// The hour, 0 to 23.
    pub hour: u32,
    /// The minute, 0 to 59.
    pub minute: u32,
    /// The second, 0 to 59.
    pub second: u32,
    /// The millisecond, 0 to 999.
    pub millisecond: u32,
}

impl UtcTime {
    /// The UTC date and time `ms` milliseconds after the Unix epoch (before it, negative).
    pub fn from_unix_ms(ms: i64) -> Self {
        let days = ms.div_euclid(86_400_000);
        let in_day = ms.rem_euclid(86_400_000) as u32;
        // The civil date of a day count from 1970-01-01, by Howard Hinnant's algorithm: days
        // from 0000-03-01, split into 400-year eras of 146,097 days, then years of March to
        // February (so a leap day ends its year).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        Self {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: in_day / 3_600_000,
            minute: in_day / 60_000 % 60,
            second: in_day / 1000 % 60,
            millisecond: in_day % 1000,
        }
    }
}

/// Pairs taken per calibration sample.
const PAIRS: usize = 101;

/// One (wall ns, tick) pair: the tick is the midpoint of two counter reads around one wall read,
/// and of many such pairs the one with the narrowest bracket is kept ([`tightest_pair`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CalibrationSample {
    /// The wall clock, ns since the Unix epoch.
    pub wall_ns: i64,
    /// The tick at that moment.
    pub tick: u64,
}

impl CalibrationSample {
    /// Takes a sample now.
    pub fn take() -> Self {
        clock_source();
        for _ in 0..5 {
            ticks();
            wall_now_ns();
        }
        let (tick, wall_ns) = tightest_pair(PAIRS, ticks, wall_now_ns);
        // The process's baseline starts at its first sample (a session's start), so that a
        // later session too short to measure the scale over can use it.
        baseline();
        Self { wall_ns, tick }
    }
}

/// Reads one clock (`read_b`) between two reads of another (`read_a`), `reads` times (at
/// least once), and keeps the read whose `a` bracket was narrowest, as the bracket's
/// midpoint and the `b` read: the pair of simultaneous times with the least scheduling noise
/// between them. Of brackets equally narrow the first is kept; one whose clock went back (a
/// wall clock stepped mid-read) is kept only where every one did.
///
/// ```
/// use std::cell::Cell;
/// use omniprof::clock::tightest_pair;
///
/// // A counter that advances 10, then 2, then 6 across each read of the other clock, which
/// // reads 100, 200, 300.
/// let counter = Cell::new(0u64);
/// let reads = Cell::new(0usize);
/// let read_b = || {
///     let n = reads.get();
///     counter.set(counter.get() + [10, 2, 6][n]);
///     reads.set(n + 1);
///     (n as i64 + 1) * 100
/// };
/// // The second read, whose bracket ran from 10 to 12.
/// assert_eq!(tightest_pair(3, || counter.get(), read_b), (11, 200));
/// ```
pub fn tightest_pair<A, B>(
    reads: usize,
    mut read_a: impl FnMut() -> A,
    mut read_b: impl FnMut() -> B,
) -> (A, B)
where
    A: Copy + Into<i128> + TryFrom<i128>,
{
    let mut read = || {
        let before = read_a();
        let b = read_b();
        let width = read_a().into() - before.into();
        // Between two values of `A`, the midpoint is one too.
        let mid = A::try_from(before.into() + width / 2).unwrap_or(before);
        ((width < 0, width.unsigned_abs()), mid, b)
    };
    let mut best = read();
    for _ in 1..reads {
        let next = read();
        if next.0 < best.0 {
            best = next;
        }
    }
    (best.1, best.2)
}

/// Converts ticks to Unix-epoch nanoseconds with a scale measured between two samples.
#[derive(Clone, Copy, Debug)]
pub struct TickConverter {
    origin: CalibrationSample,
    ns_per_tick: f64,
}

impl TickConverter {
    /// A converter from samples taken at start and stop. Between samples under 1 ms apart,
    /// the scale is measured against `CLOCK_MONOTONIC` since the process's first sample
    /// instead, so that converting never waits to measure it.
    pub fn new(start: CalibrationSample, stop: CalibrationSample) -> Self {
        let dt = stop.tick.wrapping_sub(start.tick);
        let dns = stop.wall_ns - start.wall_ns;
        let ns_per_tick = if dns >= MIN_BASELINE_NS && dt > 0 {
            dns as f64 / dt as f64
        } else {
            ns_per_tick()
        };
        Self {
            origin: start,
            ns_per_tick,
        }
    }

    /// The Unix-epoch time of a tick; ticks before the origin are extrapolated backwards.
    #[inline]
    pub fn to_unix_ns(&self, tick: u64) -> i64 {
        let delta = tick.wrapping_sub(self.origin.tick) as i64;
        self.origin.wall_ns + (delta as f64 * self.ns_per_tick).round() as i64
    }
}

/// Ticks per second of the recording clock ([`ns_per_tick`]).
pub(crate) fn ticks_per_second() -> f64 {
    1e9 / ns_per_tick()
}

/// The shortest span a scale is measured over.
const MIN_BASELINE_NS: i64 = 1_000_000;

/// A tick and `CLOCK_MONOTONIC` read together ([`tightest_pair`]): the monotonic clock, not
/// the wall clock, so that a wall clock stepped since the process's first sample cannot skew
/// a scale measured over the process's life.
#[derive(Clone, Copy)]
struct MonotonicPair {
    tick: u64,
    ns: i64,
}

impl MonotonicPair {
    fn take() -> Self {
        let (tick, ns) = tightest_pair(PAIRS, ticks, || monotonic_ns() as i64);
        Self { tick, ns }
    }

    /// Nanoseconds per tick from `from` to this pair; `None` under [`MIN_BASELINE_NS`].
    fn ns_per_tick_since(self, from: Self) -> Option<f64> {
        let (dns, dt) = (self.ns - from.ns, self.tick.wrapping_sub(from.tick));
        (dns >= MIN_BASELINE_NS && dt > 0).then(|| dns as f64 / dt as f64)
    }
}

/// The process's first calibration pair, the start of the span [`ns_per_tick`] measures over.
fn baseline() -> MonotonicPair {
    static BASELINE: OnceLock<MonotonicPair> = OnceLock::new();
    *BASELINE.get_or_init(MonotonicPair::take)
}

/// Nanoseconds per tick, for a session too short to measure its own scale: measured from the
/// process's first calibration sample to now. Only where that too is under a millisecond (a
/// process's first session, that short) is the scale measured over a 10 ms sleep, once per
/// process: a short session's stop used to sleep that long every time.
pub(crate) fn ns_per_tick() -> f64 {
    if clock_source() == ClockSource::Monotonic {
        return 1.0;
    }
    if let Some(scale) = MonotonicPair::take().ns_per_tick_since(baseline()) {
        return scale;
    }
    static SLEPT: OnceLock<f64> = OnceLock::new();
    *SLEPT.get_or_init(|| {
        SLEEPS.fetch_add(1, Ordering::Relaxed);
        let from = MonotonicPair::take();
        std::thread::sleep(std::time::Duration::from_millis(10));
        // A counter that did not advance over the sleep has no scale to measure.
        MonotonicPair::take().ns_per_tick_since(from).unwrap_or(1.0)
    })
}

/// How often [`ns_per_tick`] slept to measure the scale (at most once), for the tests.
static SLEEPS: AtomicU8 = AtomicU8::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_fall_on_their_calendar_days_across_leap_years_and_the_epoch() {
        let at = |ms: i64| {
            let t = UtcTime::from_unix_ms(ms);
            (
                t.year,
                t.month,
                t.day,
                t.hour,
                t.minute,
                t.second,
                t.millisecond,
            )
        };
        const DAY: i64 = 86_400_000;
        assert_eq!(at(0), (1970, 1, 1, 0, 0, 0, 0));
        assert_eq!(at(-1), (1969, 12, 31, 23, 59, 59, 999));
        // 2000 is a leap year (divisible by 400), 2100 is not (by 100).
        assert_eq!(at(11_016 * DAY), (2000, 2, 29, 0, 0, 0, 0));
        assert_eq!(at(11_017 * DAY), (2000, 3, 1, 0, 0, 0, 0));
        assert_eq!(at(47_540 * DAY), (2100, 2, 28, 0, 0, 0, 0));
        assert_eq!(at(47_541 * DAY), (2100, 3, 1, 0, 0, 0, 0));
        assert_eq!(at(19_782 * DAY + 1), (2024, 2, 29, 0, 0, 0, 1));
    }

    #[test]
    fn source_is_decided_and_ticks_advance() {
        let s = clock_source();
        if cfg!(target_arch = "x86_64") {
            assert!(matches!(s, ClockSource::Tsc | ClockSource::Monotonic));
        }
        let a = ticks();
        let b = ticks();
        assert!(b >= a);
    }

    #[test]
    fn conversion_agrees_with_the_wall_clock_over_a_session() {
        let start = CalibrationSample::take();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mid_wall = wall_now_ns();
        let mid_tick = ticks();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let stop = CalibrationSample::take();
        let conv = TickConverter::new(start, stop);
        let err = (conv.to_unix_ns(mid_tick) - mid_wall).abs();
        assert!(err < 200_000, "conversion off by {err} ns");
        assert!(conv.ns_per_tick > 0.0);
    }

    #[test]
    fn a_read_whose_clock_went_back_is_kept_only_where_every_one_did() {
        // Brackets of `a` per read: 5 wide, then back by 1 (a stepped clock), then 3 wide.
        let scripted = |steps: &'static [i64]| {
            let (a, read) = (std::cell::Cell::new(100i64), std::cell::Cell::new(0usize));
            let pair = tightest_pair(
                steps.len(),
                || a.get(),
                || {
                    let n = read.get();
                    read.set(n + 1);
                    a.set(a.get() + steps[n]);
                    n
                },
            );
            (pair, a.get())
        };
        assert_eq!(scripted(&[5, -1, 3]), ((105, 2), 107));
        // Where every clock went back, the least step back is kept.
        assert_eq!(scripted(&[-4, -1]), ((96, 1), 95));
    }

    #[test]
    fn a_session_under_a_millisecond_takes_the_processs_scale_without_sleeping() {
        let first = CalibrationSample::take();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let sleeps = SLEEPS.load(Ordering::Relaxed);
        // Two samples under a millisecond apart (a busy machine may preempt one pair).
        let (start, stop) = (0..100)
            .map(|_| (CalibrationSample::take(), CalibrationSample::take()))
            .find(|(start, stop)| stop.wall_ns - start.wall_ns < MIN_BASELINE_NS)
            .unwrap();
        let short = TickConverter::new(start, stop);
        assert_eq!(SLEEPS.load(Ordering::Relaxed), sleeps);
        // The same scale as one measured over the 20 ms, to within scheduling noise.
        let long = TickConverter::new(first, stop);
        let off = (short.ns_per_tick / long.ns_per_tick - 1.0).abs();
        assert!(
            off < 2e-3,
            "scales {} and {}",
            short.ns_per_tick,
            long.ns_per_tick
        );
    }

    #[test]
    fn ticks_before_the_origin_extrapolate() {
        // Decided first, as a session does: until then `ticks` reads the monotonic clock.
        clock_source();
        let before = ticks();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let start = CalibrationSample::take();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let stop = CalibrationSample::take();
        let conv = TickConverter::new(start, stop);
        let t = conv.to_unix_ns(before);
        assert!(t < start.wall_ns && t > start.wall_ns - 1_000_000_000);
    }
}
