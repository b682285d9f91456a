//! The recording clock and its calibration to wall time; documented on [`ClockSource`].

use std::sync::atomic::{AtomicU8, Ordering};

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
/// use omniprof::{CalibrationSample, TickConverter};
///
/// let start = CalibrationSample::take();
/// let t = omniprof::ticks();
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

/// Pairs taken per calibration sample.
const PAIRS: usize = 101;

/// One (wall ns, tick) pair: the tick is the midpoint of two counter reads around one wall read,
/// and of many such pairs the one with the narrowest bracket is kept.
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
        // The pair with the narrowest bracket carries the least scheduling noise.
        (0..PAIRS)
            .map(|_| {
                let before = ticks();
                let wall_ns = wall_now_ns();
                let after = ticks();
                let width = after.wrapping_sub(before);
                (
                    width,
                    Self {
                        wall_ns,
                        tick: before + width / 2,
                    },
                )
            })
            .min_by_key(|(width, _)| *width)
            .map(|(_, sample)| sample)
            .expect("PAIRS > 0")
    }
}

/// Converts ticks to Unix-epoch nanoseconds with a scale measured between two samples.
#[derive(Clone, Copy, Debug)]
pub struct TickConverter {
    origin: CalibrationSample,
    ns_per_tick: f64,
}

impl TickConverter {
    /// A converter from samples taken at start and stop. With too short a baseline (under
    /// 1 ms), the scale falls back to a 10 ms measurement.
    pub fn new(start: CalibrationSample, stop: CalibrationSample) -> Self {
        let dt = stop.tick.wrapping_sub(start.tick);
        let dns = stop.wall_ns - start.wall_ns;
        let ns_per_tick = if dns >= 1_000_000 && dt > 0 {
            dns as f64 / dt as f64
        } else {
            measured_scale()
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

fn measured_scale() -> f64 {
    if clock_source() == ClockSource::Monotonic {
        return 1.0;
    }
    let a = CalibrationSample::take();
    std::thread::sleep(std::time::Duration::from_millis(10));
    let b = CalibrationSample::take();
    (b.wall_ns - a.wall_ns) as f64 / b.tick.wrapping_sub(a.tick) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn ticks_before_the_origin_extrapolate() {
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
