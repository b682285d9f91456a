//! The built-in backend that counts the host's perf events; documented on
//! [`PerfEventsProfiler`].

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::backend::{ActivityProfiler, ActivitySink, BackendError, HostOps, ProfilerSession};
use crate::clock;
use crate::config::Config;
use crate::Window;
use crate::{lock, wait_timeout};
use crate::{ActivitySet, ActivityType};
use crate::{CounterTrack, CounterValues};
use crate::{SessionHealth, UnavailablePerfEvent};

pub(crate) use crate::perf_event::perf_event_by_name;
pub use crate::perf_event::PerfEvent;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER0`: all this backend sets.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 5 `exclude_kernel`, bit 6 `exclude_hv`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const EXCLUDE_KERNEL_AND_HV: u64 = (1 << 5) | (1 << 6);
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// A counter of one event on one thread; closed when dropped.
struct Counter {
    fd: libc::c_int,
}

impl Counter {
    /// Counts `event` on thread `tid` from now on; the error is the OS's reason.
    fn open(event: PerfEvent, tid: i64) -> Result<Self, std::io::Error> {
        let mut attr = PerfEventAttr {
            kind: event.kind(),
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: event.config(),
            flags: EXCLUDE_KERNEL_AND_HV,
            ..PerfEventAttr::default()
        };
        // SAFETY: `attr` is a valid, initialized perf_event_attr of the size it declares;
        // the syscall only reads it and returns a new descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &mut attr as *mut PerfEventAttr,
                tid as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            fd: fd as libc::c_int,
        })
    }

    fn read(&self) -> Option<u64> {
        let mut value = 0u64;
        // SAFETY: reads at most 8 bytes into `value`, which is 8 bytes; `fd` is open.
        let n = unsafe { libc::read(self.fd, (&mut value as *mut u64).cast(), 8) };
        (n == 8).then_some(value)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: `fd` is a descriptor this counter owns and closes once.
        unsafe { libc::close(self.fd) };
    }
}

/// The backend: part of the engine (asked for every trace), it takes part when
/// `PERF_EVENTS` names an event.
///
/// Host counters through Linux `perf_event_open`: a built-in backend that counts the events
/// `PERF_EVENTS` names (`cycles`, `instructions`, `cache-misses`, `task-clock`,
/// `page-faults`, `context-switches`, ...) per recording thread, and samples them every
/// `OMNIPROF_PERF_EVENTS_PERIOD_USECS` on a thread of its own, so the recording threads pay
/// nothing. Each recording thread gets a counter series `perf (thread <tid>)` on its host row
/// (type `host_counters`) whose values are the counts since the sampler first saw the thread
/// in the session (at a tick after its first recorded range): they only grow. The last
/// reading, taken when the backend stops just after the window closed, is placed at the
/// window's end.
///
/// Where an event cannot be counted — no hardware PMU in a VM or container,
/// `perf_event_paranoid`, a seccomp filter — the event is named once in a warning and in the
/// trace's report ([`SessionHealth::unavailable_perf_events`]), and the others go on: the
/// session never fails for it. Hardware events are opened for user space only
/// (`exclude_kernel`), which is what `perf_event_paranoid` = 2 allows an unprivileged process.
///
/// ```
/// use omniprof::trace::ActivityType;
/// use omniprof::{Config, Profiler};
///
/// let config = Config::parse("PERF_EVENTS = task-clock, context-switches").unwrap();
/// let mut profiler = Profiler::builder().config(config).build().unwrap();
/// profiler.start().unwrap();
/// {
///     omniprof::scope!("busy");
///     let mut x = 0u64;
///     for i in 0..1_000_000 {
///         x = x.wrapping_add(std::hint::black_box(i));
///     }
///     std::hint::black_box(x);
///     std::thread::sleep(std::time::Duration::from_millis(5));
/// }
/// // Counting never fails the session. How many series it has depends on the machine: none
/// // for a thread the sampler (every 1 ms, on a thread of its own) did not look at while
/// // the thread recorded, as on a loaded machine that did not run it within these 5 ms;
/// // none where no event can be counted (each is then named in the trace's
/// // `report.unavailable_perf_events`). What a series holds does not depend on it.
/// let trace = profiler.stop().unwrap();
/// for series in trace.counters.series() {
///     assert_eq!(series.track.kind, ActivityType::HostCounters);
///     assert_eq!(series.track.device, i64::from(std::process::id()));
///     assert_eq!(&*series.track.name, format!("perf (thread {})", series.track.resource));
///     let clock: Vec<f64> = series.samples.iter().filter_map(|s| s.value("task-clock")).collect();
///     assert!(clock.windows(2).all(|pair| pair[0] <= pair[1]), "{clock:?}");
/// }
/// assert!(Config::parse("PERF_EVENTS = cycels").is_err());
/// ```
#[derive(Default)]
pub(crate) struct PerfEventsProfiler;

impl ActivityProfiler for PerfEventsProfiler {
    fn name(&self) -> &str {
        "perf_events"
    }

    fn available_activities(&self) -> ActivitySet {
        [ActivityType::HostCounters].into_iter().collect()
    }

    fn configure(
        &self,
        _activities: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let events: Vec<PerfEvent> = config
            .perf_events()
            .iter()
            .filter_map(|name| perf_event_by_name(name))
            .collect();
        if events.is_empty() {
            return Ok(None);
        }
        let period = Duration::from_micros(config.perf_events_period_us().max(1));
        Ok(Some(Box::new(PerfSession {
            events,
            period,
            sampler: None,
            samples: Vec::new(),
            unavailable: Vec::new(),
        })))
    }
}

/// One sample: a thread's counts (in event order, `None` where unreadable) at a time.
struct Sample {
    tid: i64,
    ts_ns: i64,
    counts: Vec<Option<u64>>,
    /// Taken when the backend stopped.
    last: bool,
}

/// What the sampling thread hands back.
#[derive(Default)]
struct Sampled {
    samples: Vec<Sample>,
    /// Events that could not be opened, with the first reason.
    unavailable: Vec<(&'static str, String)>,
}

type StopSignal = Arc<(Mutex<bool>, Condvar)>;

struct PerfSession {
    events: Vec<PerfEvent>,
    period: Duration,
    sampler: Option<(StopSignal, JoinHandle<Sampled>)>,
    samples: Vec<Sample>,
    unavailable: Vec<(&'static str, String)>,
}

impl ProfilerSession for PerfSession {
    fn start(&mut self) -> Result<(), BackendError> {
        let stop: StopSignal = Arc::default();
        let events = self.events.clone();
        let period = self.period;
        let signal = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("omniprof-perf".into())
            .spawn(move || sample(&events, period, &signal))
            .map_err(|e| BackendError::new(format!("cannot start the perf sampler: {e}")))?;
        self.sampler = Some((stop, thread));
        Ok(())
    }

    fn stop(&mut self) -> Result<(), BackendError> {
        if let Some((stop, thread)) = self.sampler.take() {
            *lock(&stop.0) = true;
            stop.1.notify_all();
            let sampled = thread
                .join()
                .map_err(|_| BackendError::new("the perf sampler panicked"))?;
            self.samples = sampled.samples;
            self.unavailable = sampled.unavailable;
        }
        for (name, why) in &self.unavailable {
            log::warn!("omniprof: perf event {name} is unavailable here ({why}); not counted");
        }
        Ok(())
    }

    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        _host_ops: &dyn HostOps,
        window: Window,
    ) -> Result<(), BackendError> {
        let pid = i64::from(std::process::id());
        let mut tracks: HashMap<i64, CounterTrack> = HashMap::new();
        for s in &self.samples {
            let track = tracks.entry(s.tid).or_insert_with(|| {
                CounterTrack::new(
                    ActivityType::HostCounters,
                    format!("perf (thread {})", s.tid),
                    pid,
                    s.tid,
                )
            });
            let values: CounterValues = self
                .events
                .iter()
                .zip(&s.counts)
                .filter_map(|(e, c)| Some((e.name.into(), (*c)? as f64)))
                .collect();
            let ts_ns = if s.last {
                s.ts_ns.min(window.end_ns)
            } else {
                s.ts_ns
            };
            sink.add_counter(track, ts_ns, values);
        }
        Ok(())
    }

    fn report(&self, report: &mut SessionHealth) {
        report.unavailable_perf_events = self
            .unavailable
            .iter()
            .map(|(name, why)| UnavailablePerfEvent {
                name: (*name).to_owned(),
                reason: why.clone(),
            })
            .collect();
    }
}

/// The sampling loop: follows the recording threads, opening their counters as they appear,
/// and reads every counter each period, a last time when told to stop.
fn sample(events: &[PerfEvent], period: Duration, stop: &StopSignal) -> Sampled {
    let mut out = Sampled::default();
    // Per thread seen: its counters, in event order (`None`: that event did not open).
    let mut threads: HashMap<i64, Vec<Option<Counter>>> = HashMap::new();
    let mut stopped = lock(&stop.0);
    loop {
        let last = *stopped;
        // A thread first seen at the last reading would only count from then: not worth a
        // series.
        let found = if last {
            Vec::new()
        } else {
            crate::record::recording_threads()
        };
        for tid in found {
            threads.entry(tid).or_insert_with(|| {
                events
                    .iter()
                    .map(|&e| match Counter::open(e, tid) {
                        Ok(c) => Some(c),
                        Err(why) => {
                            // A thread that exited is no reason to call the event unavailable.
                            if why.raw_os_error() != Some(libc::ESRCH)
                                && !out.unavailable.iter().any(|(n, _)| *n == e.name)
                            {
                                out.unavailable.push((e.name, why.to_string()));
                            }
                            None
                        }
                    })
                    .collect()
            });
        }
        let ts_ns = clock::wall_now_ns();
        for (&tid, counters) in &threads {
            if counters.iter().all(Option::is_none) {
                continue;
            }
            let counts = counters
                .iter()
                .map(|c| c.as_ref().and_then(Counter::read))
                .collect();
            out.samples.push(Sample {
                tid,
                ts_ns,
                counts,
                last,
            });
        }
        if last {
            return out;
        }
        stopped = wait_timeout(&stop.1, stopped, period).0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attr_has_version_0_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 64);
    }

    #[test]
    fn software_counters_grow_across_a_busy_loop() {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        // A sandbox may forbid perf_event_open altogether (a seccomp filter).
        let task_clock = match Counter::open(perf_event_by_name("task-clock").unwrap(), tid) {
            Ok(c) => c,
            Err(e) => {
                let why = format!("perf_event_open is refused here: {e}");
                let needs = omniprof_test_support::skip::Needs::PerfEvents;
                return omniprof_test_support::skip::skip("software perf counters", needs, &why);
            }
        };
        let faults = Counter::open(perf_event_by_name("page-faults").unwrap(), tid).unwrap();
        let mut last = (0, 0);
        for round in 0..5 {
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
            }
            std::hint::black_box(x);
            // Fresh pages fault on first touch.
            let pages = vec![1u8; 1 << 20];
            std::hint::black_box(&pages);
            let now = (task_clock.read().unwrap(), faults.read().unwrap());
            assert!(
                now.0 > last.0,
                "round {round}: task-clock {now:?} after {last:?}"
            );
            assert!(
                now.1 >= last.1,
                "round {round}: page-faults {now:?} after {last:?}"
            );
            last = now;
        }
        assert!(last.1 > 0);
    }
}
