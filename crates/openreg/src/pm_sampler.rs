//! The PM (performance monitor) sampler: each device sampled on a grid of fixed intervals by
//! a thread of its own, reporting what really happened in each interval — the fraction of it
//! during which the device's streams were running work, the bytes they copied host to device
//! and device to host, and the device memory in use at its end ([`crate::device_usage`]).
//!
//! Like a hardware monitor, which samples into a buffer that its host thread reads now and
//! then, the device logs every change of these numbers while it is sampled, and the thread
//! wakes every [`DRAIN_INTERVAL`] (or every period, if longer) to replay the log onto the
//! grid: intervals are exactly one period long however late the thread runs, and a 1 ms
//! period costs the workload ten wakeups a second, not a thousand. The thread runs at the
//! lowest priority, so it never preempts the workload it measures.
//!
//! A sample describes the interval that *starts* at its timestamp (a counter holds its value
//! until the next sample), so a trace draws each interval's numbers where they happened. The
//! last sample, taken at [`PmSampler::stop`], covers the partial interval before it, so the
//! copied bytes of all samples add up to everything copied while the sampler ran.
//!
//! ```
//! use std::time::Duration;
//! use openreg::PmSampler;
//!
//! let sampler = PmSampler::start(&[0], Duration::from_millis(1)).unwrap();
//! std::thread::sleep(Duration::from_millis(5));
//! let samples = sampler.stop();
//! assert!(samples.len() >= 2);
//! assert!(samples.iter().all(|s| (0.0..=1.0).contains(&s.busy_fraction)));
//! ```

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::device::device_count;
use crate::device_usage::{self, Usage, UsageMonitor};
use crate::error::{OrError, Result};
use crate::lock::{lock, wait_timeout};
use crate::sys::now_ns;

/// The value name of [`PmSample::busy_fraction`] in traces.
pub const BUSY_FRACTION: &str = "busy_fraction";
/// The value name of [`PmSample::host_to_device_bytes`] in traces.
pub const HOST_TO_DEVICE_BYTES: &str = "host_to_device_bytes";
/// The value name of [`PmSample::device_to_host_bytes`] in traces.
pub const DEVICE_TO_HOST_BYTES: &str = "device_to_host_bytes";
/// The value name of [`PmSample::memory_used_bytes`] in traces.
pub const MEMORY_USED_BYTES: &str = "memory_used_bytes";

/// One device's numbers for one interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PmSample {
    /// The device sampled.
    pub device: usize,
    /// The interval's start (`CLOCK_REALTIME`, ns).
    pub ts_ns: i64,
    /// The interval's length.
    pub interval_ns: i64,
    /// Busy time over the interval, in [0, 1].
    pub busy_fraction: f64,
    /// Bytes the device's streams copied host to device in the interval.
    pub host_to_device_bytes: u64,
    /// Bytes the device's streams copied device to host in the interval.
    pub device_to_host_bytes: u64,
    /// Device memory in use at the interval's end.
    pub memory_used_bytes: u64,
}

impl PmSample {
    /// The sample's values, named as traces show them.
    pub fn values(&self) -> [(&'static str, f64); 4] {
        [
            (BUSY_FRACTION, self.busy_fraction),
            (HOST_TO_DEVICE_BYTES, self.host_to_device_bytes as f64),
            (DEVICE_TO_HOST_BYTES, self.device_to_host_bytes as f64),
            (MEMORY_USED_BYTES, self.memory_used_bytes as f64),
        ]
    }
}

/// What the sampling threads and their owner share: how many threads have taken their first
/// reading, and whether to stop. One condition variable serves both.
#[derive(Default)]
struct Control {
    state: Mutex<ControlState>,
    changed: Condvar,
}

#[derive(Default)]
struct ControlState {
    ready: usize,
    stop: bool,
}

/// How long [`PmSampler::start`] waits for its threads' first readings at most (a thread the
/// system is slow to run only loses its first interval's start).
const READY_TIMEOUT: Duration = Duration::from_secs(1);

/// How often a sampling thread wakes to replay its device's log into samples, at most: each
/// wakeup disturbs the workload measured, however little the thread then does.
pub(crate) const DRAIN_INTERVAL: Duration = Duration::from_millis(10);

/// The nice value of the sampling threads (the lowest priority).
const LOWEST_PRIORITY: libc::c_int = 19;

/// Sampling threads, one per device, until [`stop`](PmSampler::stop).
pub struct PmSampler {
    control: Arc<Control>,
    threads: Vec<JoinHandle<Vec<PmSample>>>,
}

impl PmSampler {
    /// Starts sampling `devices` every `period` (at least 1 µs); the first intervals begin
    /// now. Returns once every thread runs, so their start-up does not overlap what the
    /// caller runs next (on a busy machine, threads starting next to a workload's disturb how
    /// its threads are placed for much longer than they run). Fails for a device that
    /// another sampler samples.
    pub fn start(devices: &[usize], period: Duration) -> Result<Self> {
        let count = device_count();
        let period = period.max(Duration::from_micros(1));
        let mut sampler = Self {
            control: Arc::default(),
            threads: Vec::new(),
        };
        for &device in devices {
            if device >= count {
                return Err(OrError::InvalidDevice { device, count });
            }
            let start = device_usage::watch_usage(device)?;
            let at_ns = now_ns();
            let control = Arc::clone(&sampler.control);
            let thread = std::thread::Builder::new()
                .name(format!("openreg-pm{device}"))
                .spawn(move || sample(device, period, start, at_ns, &control))
                .map_err(|e| {
                    device_usage::unwatch_usage(device);
                    OrError::ThreadSpawn(e)
                })?;
            sampler.threads.push(thread);
        }
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        let mut state = lock(&sampler.control.state);
        while state.ready < sampler.threads.len() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            state = wait_timeout(&sampler.control.changed, state, left);
        }
        drop(state);
        Ok(sampler)
    }

    /// Stops every thread after a last sample and returns all samples, device by device.
    pub fn stop(mut self) -> Vec<PmSample> {
        self.signal();
        std::mem::take(&mut self.threads)
            .into_iter()
            .flat_map(|t| t.join().unwrap_or_default())
            .collect()
    }

    fn signal(&self) {
        lock(&self.control.state).stop = true;
        self.control.changed.notify_all();
    }
}

impl Drop for PmSampler {
    fn drop(&mut self) {
        self.signal();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One device's sampling loop, from `start`, its numbers at `at_ns`.
fn sample(
    device: usize,
    period: Duration,
    start: UsageMonitor,
    at_ns: i64,
    control: &Control,
) -> Vec<PmSample> {
    // The lowest priority: a sampler must not preempt the workload it measures (on a machine
    // whose CPUs the workload keeps busy, each preemption moved the workload's threads around
    // for far longer than the sampler ran); the log waits for it. On Linux a nice value
    // belongs to the thread (`who` 0: the calling one); raising it always works.
    // SAFETY: plain syscall on the calling thread, no pointers.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LOWEST_PRIORITY) };
    let period_ns = period.as_nanos() as i64;
    let drain_ns = period_ns.max(DRAIN_INTERVAL.as_nanos() as i64);
    let mut monitor = start;
    let mut previous = monitor.at(at_ns);
    // The end of the interval being filled, and the time the replay has reached.
    let (mut next, mut clock) = (at_ns + period_ns, at_ns);
    let mut samples = Vec::new();
    let mut changes = Vec::new();
    let mut state = lock(&control.state);
    state.ready += 1;
    control.changed.notify_all();
    let mut wake = at_ns + drain_ns;
    loop {
        while !state.stop {
            let left = wake - now_ns();
            if left <= 0 {
                break;
            }
            state = wait_timeout(&control.changed, state, Duration::from_nanos(left as u64));
        }
        let last = state.stop;
        device_usage::drain_usage(device, &mut changes);
        // Every change drained was logged by now (its time was read before it was logged).
        let now = now_ns();
        let mut close_intervals_to = |until: i64, monitor: &UsageMonitor, samples: &mut Vec<_>| {
            while next <= until {
                let current = monitor.at(next);
                samples.push(between(device, &previous, &current));
                previous = current;
                next += period_ns;
            }
        };
        for &(changed_ns, change) in &changes {
            // Times are read before the log's lock is taken, so neighbours may be out of
            // order by the time it takes to take it.
            clock = clock.max(changed_ns);
            close_intervals_to(clock, &monitor, &mut samples);
            monitor.apply(clock, change);
        }
        let now = now.max(clock);
        close_intervals_to(now, &monitor, &mut samples);
        if last {
            if now > previous.at_ns {
                samples.push(between(device, &previous, &monitor.at(now)));
            }
            device_usage::unwatch_usage(device);
            return samples;
        }
        wake = now + drain_ns;
    }
}

fn between(device: usize, from: &Usage, to: &Usage) -> PmSample {
    let interval_ns = (to.at_ns - from.at_ns).max(1);
    let busy_ns = (to.busy_ns - from.busy_ns).clamp(0, interval_ns);
    PmSample {
        device,
        ts_ns: from.at_ns,
        interval_ns,
        busy_fraction: busy_ns as f64 / interval_ns as f64,
        host_to_device_bytes: to.host_to_device_bytes - from.host_to_device_bytes,
        device_to_host_bytes: to.device_to_host_bytes - from.device_to_host_bytes,
        memory_used_bytes: to.memory_used_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_the_period_exactly_and_follow_one_another() {
        let period = Duration::from_micros(500);
        let sampler = PmSampler::start(&[0], period).unwrap();
        std::thread::sleep(Duration::from_millis(25));
        let samples = sampler.stop();
        // 25 ms at 0.5 ms, replayed from the log at least twice (every 10 ms). (Other tests
        // use the devices meanwhile: the values are checked in tests/counters.rs.)
        assert!(samples.len() >= 50, "{}", samples.len());
        for pair in samples.windows(2) {
            assert_eq!(pair[1].ts_ns, pair[0].ts_ns + pair[0].interval_ns);
        }
        let (last, whole) = samples.split_last().unwrap();
        assert!(whole.iter().all(|s| s.interval_ns == 500_000));
        assert!(last.interval_ns <= 500_000);
    }

    #[test]
    fn a_device_is_sampled_by_one_sampler_at_a_time() {
        let period = Duration::from_millis(1);
        let first = PmSampler::start(&[1], period).unwrap();
        let second = PmSampler::start(&[1], period).map(drop).unwrap_err();
        assert!(
            matches!(second, OrError::AlreadySampled { device: 1 }),
            "{second}"
        );
        first.stop();
        PmSampler::start(&[1], period).unwrap().stop();
    }
}
