//! The session engine: the synchronous path of `reference/lifecycle.md` (prepare → start →
//! stop → [`Trace`]).
//!
//! This module is the lifecycle: which phase a session is in and what each call does to the
//! recorder and the backends. The work of each phase lives beside it: `backends` drives the
//! backend sessions (fault-isolated), `merge` turns what the recorder and the backends
//! produced into the trace. Every source of device data (a registered backend, a plugin, the
//! profiler stubs, the markers) is a backend here: the engine has no modes.
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

mod backends;
mod merge;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::activity::ActivitySet;
use crate::backend::{self, ActivityProfiler, BackendError};
use crate::clock::{self, CalibrationSample, TickConverter};
use crate::config::Config;
use crate::record;
use crate::record::correlation;
use crate::stubs::StubsProfiler;
use crate::trace::{Trace, Window};
use backends::Backends;

pub use merge::{Contribution, SPAN_NAME};

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
    /// A backend the session was built with (e.g. [`ProfilerBuilder::stubs`]) could not take
    /// part.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Set while a session holds the process-wide recorder; only a [`Claim`] sets and clears it.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether a session holds the process-wide recorder.
pub(crate) fn recorder_claimed() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// A session's hold on the process-wide recorder, from prepare until its recording is
/// drained. Released when dropped, so no path (an error in prepare, a panic, a profiler
/// dropped mid-recording) leaves the recorder claimed; the release also clears the session's
/// correlation listeners, so none outlives it.
#[derive(Debug)]
struct Claim(());

impl Claim {
    fn take() -> Result<Self, SessionError> {
        ACTIVE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Self(()))
            .map_err(|_| SessionError::Busy)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        correlation::set_session_listeners(Vec::new());
        ACTIVE.store(false, Ordering::Release);
    }
}

#[derive(Debug)]
enum Phase {
    Built,
    Prepared(Claim),
    Recording {
        host: record::HostSession,
        claim: Claim,
    },
    /// Recording ended, not yet processed (see [`Profiler::end_recording`]).
    Ended {
        host: record::HostSession,
        claim: Claim,
        window: Window,
    },
    Stopped,
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Self::Built => "not prepared",
            Self::Prepared(_) => "prepared",
            Self::Recording { .. } => "recording",
            Self::Ended { .. } => "ended",
            Self::Stopped => "stopped",
        }
    }
}

/// An empty selection means the default set, as Kineto's validate() has it.
fn or_default(selection: ActivitySet) -> ActivitySet {
    if selection.is_empty() {
        ActivitySet::default_set()
    } else {
        selection
    }
}

/// Builds a [`Profiler`].
#[derive(Clone, Default)]
pub struct ProfilerBuilder {
    activities: Option<ActivitySet>,
    config: Config,
    /// The backends this session drives instead of the registered ones.
    backends: Option<Vec<Arc<dyn ActivityProfiler>>>,
    /// Driven by the on-demand engine, so it must not preempt itself at prepare.
    on_demand: bool,
}

impl std::fmt::Debug for ProfilerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backends = self
            .backends
            .as_ref()
            .map(|b| b.iter().map(|p| p.name().to_owned()).collect::<Vec<_>>());
        f.debug_struct("ProfilerBuilder")
            .field("activities", &self.activities)
            .field("config", &self.config)
            .field("backends", &backends)
            .finish()
    }
}

impl ProfilerBuilder {
    /// The activity types to record; overrides the config's `ACTIVITY_TYPES` (as PyTorch's
    /// API activity set does). Default: the config's selection.
    pub fn activities(mut self, activities: ActivitySet) -> Self {
        self.activities = Some(or_default(activities));
        self
    }

    /// The configuration (Kineto keys).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Stubs mode: instead of the registered backends, time every host op and user range on
    /// `device` through its registered [profiler stubs](crate::stubs); each range gets its
    /// device time as `"device_time_us"` in its args. A device without enabled stubs fails
    /// `prepare` with `"<device> used in profiler but not enabled."`.
    pub fn stubs(self, device: &str) -> Self {
        self.backend(StubsProfiler::timer(device))
    }

    /// Marker-only mode: instead of the registered backends, forward ranges and instants to
    /// `device`'s stubs markers (`range_push`/`range_pop`/`mark`, the NVTX-style path), and
    /// select no activity type: the trace keeps nothing.
    pub fn markers(mut self, device: &str) -> Self {
        self.activities = Some(ActivitySet::empty());
        self.backend(StubsProfiler::markers(device))
    }

    /// Marks the session as the on-demand engine's own.
    pub(crate) fn on_demand(mut self) -> Self {
        self.on_demand = true;
        self
    }

    /// Drives `profiler` (with any others given) instead of the registered backends.
    fn backend(mut self, profiler: impl ActivityProfiler + 'static) -> Self {
        self.backends
            .get_or_insert_with(Vec::new)
            .push(Arc::new(profiler));
        self
    }

    pub fn build(self) -> Result<Profiler, SessionError> {
        let activities = self
            .activities
            .unwrap_or_else(|| or_default(self.config.activity_types()));
        Ok(Profiler {
            config: self.config,
            activities,
            phase: Phase::Built,
            start_sample: None,
            window_start_ns: 0,
            backends: Backends::default(),
            requested: self.backends,
            on_demand: self.on_demand,
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
    /// The backends the builder was given, driven instead of the registered ones.
    requested: Option<Vec<Arc<dyn ActivityProfiler>>>,
    on_demand: bool,
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

    /// Claims the recorder, configures the backends and warms up (clock source, pre-faulted
    /// buffers), so `start` is cheap. Called by `start` when skipped.
    ///
    /// A synchronous session preempts an on-demand trace that is pending or running
    /// ([`crate::ondemand`]): that trace is cancelled and writes no file.
    pub fn prepare(&mut self) -> Result<(), SessionError> {
        if !matches!(self.phase, Phase::Built) {
            return Err(self.out_of_order("prepare"));
        }
        if !self.on_demand {
            crate::ondemand::preempt();
        }
        let claim = Claim::take()?;
        clock::source();
        record::warm_up();
        crate::plugin::load_env_once();
        backend::init_engine();
        self.backends =
            Backends::configure(self.activities, &self.config, self.requested.as_deref())?;
        correlation::set_session_listeners(self.backends.listeners());
        self.phase = Phase::Prepared(claim);
        Ok(())
    }

    /// Opens the capture window and starts recording.
    pub fn start(&mut self) -> Result<(), SessionError> {
        if matches!(self.phase, Phase::Built) {
            self.prepare()?;
        }
        let claim = match std::mem::replace(&mut self.phase, Phase::Stopped) {
            Phase::Prepared(claim) => claim,
            other => {
                self.phase = other;
                return Err(self.out_of_order("start"));
            }
        };
        self.start_sample = Some(CalibrationSample::take());
        self.window_start_ns = clock::wall_now_ns();
        let host = record::start_session(self.config.max_host_records_per_thread());
        self.backends.start();
        self.phase = Phase::Recording { host, claim };
        Ok(())
    }

    /// True between `start` and `stop`.
    pub fn is_recording(&self) -> bool {
        matches!(self.phase, Phase::Recording { .. })
    }

    /// Closes the capture window, stops recording and returns the trace.
    pub fn stop(&mut self) -> Result<Trace, SessionError> {
        self.end_recording()?;
        self.finish()
    }

    /// The cheap first half of `stop`: closes the capture window and stops the host
    /// recording, without touching the backends or processing anything. The on-demand engine
    /// calls it inside the application's `step()`, which must not block; [`Profiler::finish`]
    /// does the rest on its own thread.
    pub(crate) fn end_recording(&mut self) -> Result<(), SessionError> {
        let (mut host, claim) = match std::mem::replace(&mut self.phase, Phase::Stopped) {
            Phase::Recording { host, claim } => (host, claim),
            other => {
                self.phase = other;
                return Err(self.out_of_order("stop"));
            }
        };
        record::stop_session(&mut host);
        let window = Window {
            start_ns: self.window_start_ns,
            end_ns: clock::wall_now_ns(),
        };
        self.phase = Phase::Ended {
            host,
            claim,
            window,
        };
        Ok(())
    }

    /// The second half of `stop`: stops the backends and merges everything into the trace.
    pub(crate) fn finish(&mut self) -> Result<Trace, SessionError> {
        let (host, claim, window) = match std::mem::replace(&mut self.phase, Phase::Stopped) {
            Phase::Ended {
                host,
                claim,
                window,
            } => (host, claim, window),
            other => {
                self.phase = other;
                return Err(self.out_of_order("stop"));
            }
        };
        self.backends.stop();
        let stop_sample = CalibrationSample::take();
        let start_sample = self.start_sample.unwrap_or(stop_sample);
        let conv = TickConverter::new(start_sample, stop_sample);
        let pid = std::process::id() as i64;
        let host = record::collect(host, pid, &conv, window);
        // Drained: another session may claim the recorder while this one merges.
        drop(claim);
        let recorded = merge::Recorded {
            host,
            pid,
            window,
            selection: self.activities,
            config: &self.config,
        };
        Ok(merge::trace(recorded, std::mem::take(&mut self.backends)))
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
        match &mut self.phase {
            Phase::Recording { host, .. } => {
                record::stop_session(host);
                self.backends.stop();
            }
            Phase::Ended { .. } => self.backends.stop(),
            Phase::Built | Phase::Prepared(_) | Phase::Stopped => {}
        }
    }
}

#[cfg(test)]
mod tests;
