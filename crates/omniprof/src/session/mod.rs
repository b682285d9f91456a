//! The session engine: the synchronous path of `reference/lifecycle.md` (prepare → start →
//! stop → [`Trace`]).
//!
//! Only one session records at a time in a process, because the host recorder is
//! process-wide; a second one is refused with [`SessionError::Busy`].
//!
//! ```
//! use omniprof::{ActivitySet, ActivityType, Profiler};
//!
//! let mut profiler = Profiler::builder()
//!     .activities([ActivityType::CpuOp, ActivityType::UserAnnotation].into_iter().collect())
//!     .build()
//!     .unwrap();
//! profiler.prepare().unwrap(); // optional: warm-up ahead of start
//! profiler.start().unwrap();
//! drop(omniprof::record_op("aten::add"));
//! let trace = profiler.stop().unwrap();
//! assert_eq!(trace.activities.len(), 1);
//! ```

use crate::trace::Window;
use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

mod backends;

use crate::activity::ActivitySet;
use crate::backend;
use crate::clock::{self, CalibrationSample, TickConverter};
use crate::config::Config;
use crate::record;
use crate::record::correlation;
use crate::record::CorrelationListener;
use crate::stubs::{self, Markers, StubError, StubTimer, DEVICE_TIME_ARG};
use crate::trace::{ProcessRow, Span, Trace};
use crate::value::Value;
use backends::Backends;
use std::sync::Arc;

/// The span every host recording is written under (PyTorch writes `PyTorch Profiler`).
pub const SPAN_NAME: &str = "omniprof";

/// Errors of the session engine.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("another profiling session is already active in this process")]
    Busy,
    #[error("cannot {call}: the session is {phase}")]
    OutOfOrder {
        call: &'static str,
        phase: &'static str,
    },
    #[error(transparent)]
    Stubs(#[from] StubError),
}

/// What a session does besides recording host ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Mode {
    /// Drive the registered backends for a device timeline.
    #[default]
    Timeline,
    /// Time every range on this device through its profiler stubs.
    Stubs(String),
    /// Forward ranges and instants to this device's stubs markers; keep nothing.
    Markers(String),
}

/// Set while a session holds the process-wide recorder.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Traces produced so far in this process: the span's iteration number.
static ITERATION: AtomicI64 = AtomicI64::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Built,
    Prepared,
    Recording { host: record::HostSession },
    Stopped,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Self::Built => "not prepared",
            Self::Prepared => "prepared",
            Self::Recording { .. } => "recording",
            Self::Stopped => "stopped",
        }
    }
}

/// Builds a [`Profiler`].
#[derive(Clone, Debug, Default)]
pub struct ProfilerBuilder {
    activities: Option<ActivitySet>,
    config: Config,
    mode: Mode,
}

impl ProfilerBuilder {
    /// The activity types to record; overrides the config's `ACTIVITY_TYPES` (as PyTorch's
    /// API activity set does). Default: the config's selection.
    pub fn activities(mut self, activities: ActivitySet) -> Self {
        self.activities = Some(activities);
        self
    }

    /// The configuration (Kineto keys).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Stubs mode: instead of driving backends, time every host op and user range on
    /// `device` through its registered [profiler stubs](crate::stubs); each range gets its
    /// device time as `"device_time_us"` in its args.
    pub fn stubs(mut self, device: &str) -> Self {
        self.mode = Mode::Stubs(device.to_owned());
        self
    }

    /// Marker-only mode: forward ranges and instants to `device`'s stubs markers
    /// (`range_push`/`range_pop`/`mark`, the NVTX-style path); the trace keeps nothing.
    pub fn markers(mut self, device: &str) -> Self {
        self.mode = Mode::Markers(device.to_owned());
        self
    }

    pub fn build(self) -> Result<Profiler, SessionError> {
        // An empty selection means the default set, as Kineto's validate() has it.
        let activities = Some(
            self.activities
                .unwrap_or_else(|| self.config.activity_types()),
        )
        .filter(|a| !a.is_empty())
        .unwrap_or_else(ActivitySet::default_set);
        Ok(Profiler {
            config: self.config,
            activities,
            phase: Phase::Built,
            start_sample: None,
            window_start_ns: 0,
            backends: Backends::default(),
            mode: self.mode,
            timer: None,
        })
    }
}

/// One profiling session.
pub struct Profiler {
    config: Config,
    activities: ActivitySet,
    phase: Phase,
    start_sample: Option<CalibrationSample>,
    window_start_ns: i64,
    backends: Backends,
    mode: Mode,
    /// The stubs timer of a stubs-mode session.
    timer: Option<Arc<StubTimer>>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("activities", &self.activities)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl Profiler {
    pub fn builder() -> ProfilerBuilder {
        ProfilerBuilder::default()
    }

    /// The selected activity types.
    pub fn activities(&self) -> ActivitySet {
        self.activities
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Claims the recorder, configures the backends that support a selected type and warms
    /// up (clock source, pre-faulted buffers), so `start` is cheap. Called by `start` when
    /// skipped.
    pub fn prepare(&mut self) -> Result<(), SessionError> {
        if self.phase != Phase::Built {
            return Err(self.out_of_order("prepare"));
        }
        if ACTIVE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(SessionError::Busy);
        }
        clock::source();
        record::warm_up();
        crate::plugin::load_env_once();
        backend::init_engine();
        let listeners: Vec<Arc<dyn CorrelationListener>> = match &self.mode {
            Mode::Timeline => {
                self.backends = Backends::configure(self.activities, &self.config);
                self.backends.listeners()
            }
            Mode::Stubs(device) => {
                let timer = Arc::new(StubTimer::new(stubs::stubs(device).inspect_err(|_| {
                    ACTIVE.store(false, Ordering::Release);
                })?));
                self.timer = Some(timer.clone());
                vec![timer]
            }
            Mode::Markers(device) => {
                let stubs = stubs::stubs(device).inspect_err(|_| {
                    ACTIVE.store(false, Ordering::Release);
                })?;
                vec![Arc::new(Markers(stubs))]
            }
        };
        correlation::set_session_listeners(listeners);
        self.phase = Phase::Prepared;
        Ok(())
    }

    /// Opens the capture window and starts recording.
    pub fn start(&mut self) -> Result<(), SessionError> {
        if self.phase == Phase::Built {
            self.prepare()?;
        }
        if self.phase != Phase::Prepared {
            return Err(self.out_of_order("start"));
        }
        self.start_sample = Some(CalibrationSample::take());
        self.window_start_ns = clock::wall_now_ns();
        let host = record::start_session(self.config.max_host_records_per_thread());
        self.backends.start();
        self.phase = Phase::Recording { host };
        Ok(())
    }

    /// True between `start` and `stop`.
    pub fn is_recording(&self) -> bool {
        matches!(self.phase, Phase::Recording { .. })
    }

    /// Closes the capture window, stops recording and returns the trace.
    pub fn stop(&mut self) -> Result<Trace, SessionError> {
        let Phase::Recording { mut host } = self.phase else {
            return Err(self.out_of_order("stop"));
        };
        record::stop_session(&mut host);
        let window = Window {
            start_ns: self.window_start_ns,
            end_ns: clock::wall_now_ns(),
        };
        self.backends.stop();
        correlation::set_session_listeners(Vec::new());
        let stop_sample = CalibrationSample::take();
        let start_sample = self.start_sample.unwrap_or(stop_sample);
        let conv = TickConverter::new(start_sample, stop_sample);
        let pid = std::process::id() as i64;
        let host = record::collect(host, pid, &conv, window);
        self.phase = Phase::Stopped;
        ACTIVE.store(false, Ordering::Release);

        let mut trace = Trace::new(window.start_ns, window.end_ns);
        add_environment_metadata(&mut trace);
        trace.set_metadata(
            "trace_id",
            Value::from(match self.config.trace_id() {
                "" => new_trace_id(),
                id => id.to_owned(),
            }),
        );
        trace.set_metadata("host_name", Value::from(host_name()));
        trace.set_metadata("dropped_events", Value::UInt(host.dropped_events));
        if host.dropped_events > 0 {
            log::warn!(
                "omniprof: {} host events were dropped: a thread reached its cap of {} records \
                 (OMNIPROF_MAX_HOST_RECORDS_PER_THREAD)",
                host.dropped_events,
                self.config.max_host_records_per_thread()
            );
        }
        if host.unfinished_ranges > 0 {
            trace.set_metadata("unfinished_ranges", Value::UInt(host.unfinished_ranges));
        }
        trace.set_metadata("clock_source", Value::from(clock::source().name()));
        trace.add_process(ProcessRow {
            pid,
            name: process_name(),
            label: "CPU".to_owned(),
            sort_index: pid,
        });
        for row in host.threads {
            trace.add_thread(row);
        }
        let activities = self.activities;
        trace.activities = host.activities;
        trace.activities.retain(|a| activities.enabled(a.kind));
        std::mem::take(&mut self.backends).process(&mut trace, activities);
        match &self.mode {
            Mode::Timeline => {}
            Mode::Stubs(device) => {
                trace.set_metadata("device_type", Value::from(device.as_str()));
                if let Some(timer) = self.timer.take() {
                    add_stub_times(&mut trace, &timer);
                }
            }
            Mode::Markers(_) => trace.activities.clear(),
        }
        sort_activities(&mut trace);
        trace.spans.push(Span {
            name: SPAN_NAME.to_owned(),
            prefix: String::new(),
            iteration: ITERATION.fetch_add(1, Ordering::Relaxed),
            start_ns: window.start_ns,
            end_ns: window.end_ns,
            op_count: 0,
        });
        Ok(trace)
    }

    fn out_of_order(&self, call: &'static str) -> SessionError {
        SessionError::OutOfOrder {
            call,
            phase: self.phase.name(),
        }
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        match self.phase {
            Phase::Recording { mut host } => {
                record::stop_session(&mut host);
                self.backends.stop();
                correlation::set_session_listeners(Vec::new());
                ACTIVE.store(false, Ordering::Release);
            }
            Phase::Prepared => {
                correlation::set_session_listeners(Vec::new());
                ACTIVE.store(false, Ordering::Release);
            }
            Phase::Built | Phase::Stopped => {}
        }
    }
}

/// Puts each range's stubs device time into its args, and the stubs' errors into metadata.
fn add_stub_times(trace: &mut Trace, timer: &StubTimer) {
    let (times, errors, count) = timer.finish();
    for a in &mut trace.activities {
        if let Some(&us) = times.get(&a.correlation) {
            a.args.push((DEVICE_TIME_ARG.into(), Value::Int(us)));
        }
    }
    if count > 0 {
        log::warn!(
            "omniprof: {count} profiler stub calls failed; first: {:?}",
            errors.first()
        );
        trace.set_metadata("stub_errors", Value::UInt(count));
        let list = errors.into_iter().map(Value::from).collect();
        trace.set_metadata("stub_error_messages", Value::List(list));
    }
}

/// Time order, enclosing ranges before what they enclose (writers and analyses rely on it).
pub(crate) fn sort_activities(trace: &mut Trace) {
    trace
        .activities
        .sort_by_key(|a| (a.start_ns, Reverse(a.end_ns)));
}

/// `PT_PROFILER_JOB_*` first (trace metadata with the same key wins later), then
/// `distributedInfo`, the first place a `"rank"` key appears, as HTA requires.
fn add_environment_metadata(trace: &mut Trace) {
    for key in [
        "PT_PROFILER_JOB_NAME",
        "PT_PROFILER_JOB_VERSION",
        "PT_PROFILER_JOB_ATTEMPT_INDEX",
    ] {
        if let Ok(v) = std::env::var(key) {
            trace.set_metadata(key, Value::from(v));
        }
    }
    trace.set_metadata("distributedInfo", distributed_info());
}

/// Rank and world size from torchrun's `RANK` / `WORLD_SIZE` (rank 0 of 1 otherwise), in the
/// `"rank": <n>` spelling HTA scans for.
fn distributed_info() -> Value {
    let read = |key: &str, default: u64| {
        std::env::var(key)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(default)
    };
    let rank = read("RANK", 0);
    let world_size = read("WORLD_SIZE", 1).max(rank + 1);
    Value::json(format!(
        "{{\"backend\": \"\", \"rank\": {rank}, \"world_size\": {world_size}}}"
    ))
}

fn process_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "omniprof".to_owned())
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `len` bytes; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// 32 upper-case hex digits, as PyTorch writes `trace_id`.
fn new_trace_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hi = std::collections::hash_map::RandomState::new().build_hasher();
    hi.write_i64(clock::wall_now_ns());
    let mut lo = std::collections::hash_map::RandomState::new().build_hasher();
    lo.write_u32(std::process::id());
    format!("{:016X}{:016X}", hi.finish(), lo.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_test_support::lock::serial;

    #[test]
    fn calls_must_come_in_order() {
        let _g = serial();
        let mut p = Profiler::builder().build().unwrap();
        assert!(matches!(
            p.stop(),
            Err(SessionError::OutOfOrder { call: "stop", .. })
        ));
        p.start().unwrap();
        assert!(p.start().is_err());
        let mut other = Profiler::builder().build().unwrap();
        assert!(matches!(other.start(), Err(SessionError::Busy)));
        p.stop().unwrap();
        assert!(p.stop().is_err());
        other.start().unwrap();
        drop(other);
        let mut third = Profiler::builder().build().unwrap();
        third.start().unwrap();
        assert!(record::is_recording());
        drop(third);
        assert!(!record::is_recording());
    }

    #[test]
    fn distributed_info_spells_rank_for_hta() {
        let v = distributed_info().to_json();
        assert!(v.contains("\"rank\": "), "{v}");
        assert!(v.contains("\"world_size\": "), "{v}");
    }

    #[test]
    fn trace_ids_are_32_hex_digits() {
        let id = new_trace_id();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
    }
}
