//! The session lifecycle and the merge of every source into one trace; documented on
//! [`Profiler`].

mod backends;
mod merge;
mod schedule;
mod scope;
mod toggles;
mod trace_dir;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::backend::{self, ActivityProfiler, BackendError};
use crate::clock::{self, CalibrationSample, TickConverter};
use crate::config::Config;
use crate::lock;
use crate::record;
use crate::record::{correlation, OwnedRange};
use crate::stubs::StubsProfiler;
use crate::{ActivitySet, ActivityType};
use crate::{Trace, Window};
pub(crate) use backends::Backends;
use schedule::{Call, Plan};

pub use schedule::{ProfilerAction, Schedule, ScheduleArgs, ScheduleError};
pub use trace_dir::{tensorboard_trace_handler, TraceDirHandler};

/// Errors of the session engine.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("another profiling session is already active in this process")]
    /// Another session holds the recorder.
    Busy,
    #[error("cannot {call}: the session is {phase}")]
    /// A call the session's phase does not allow.
    OutOfOrder {
        /// The call.
        call: &'static str,
        /// The phase.
        phase: &'static str,
    },
    /// A backend the session was built with (e.g. [`ProfilerBuilder::stubs`]) could not take
    /// part.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A call that the schedule makes itself (`prepare`, `stop`) was made on a scheduled
    /// profiler.
    #[error("cannot {call}: the profiler runs a schedule (start, step and finish drive it)")]
    Scheduled {
        /// The call.
        call: &'static str,
    },
    /// A trace has nowhere to go: a schedule, or `finish`, needs an `on_trace_ready`
    /// callback.
    #[error("no on_trace_ready callback to hand traces to (set ProfilerBuilder::on_trace_ready)")]
    NoTraceHandler,
}

/// Set while a session holds the process-wide recorder; only a [`Claim`] sets and clears it.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Cancels a pending or running on-demand trace; installed by the on-demand engine when it
/// is created (before that, there is nothing to preempt), so the session does not depend on
/// it.
static ASYNC_PREEMPT: OnceLock<fn()> = OnceLock::new();

/// Installs what a synchronous `prepare` calls to preempt the on-demand engine.
pub(crate) fn on_prepare_preempt(preempt: fn()) {
    let _ = ASYNC_PREEMPT.set(preempt);
}

/// What claiming the recorder and letting it go do to a flight recorder's backends (lend
/// them to the session, take them back); installed by the flight recorder, so the session
/// does not depend on it.
static CLAIM_HOOKS: OnceLock<ClaimHooks> = OnceLock::new();

struct ClaimHooks {
    lend: fn(),
    give_back: fn(),
}

/// Installs the flight recorder's claim hooks (the first ones installed stay).
pub(crate) fn on_claim(lend: fn(), give_back: fn()) {
    let _ = CLAIM_HOOKS.set(ClaimHooks { lend, give_back });
}

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
        if let Some(hooks) = CLAIM_HOOKS.get() {
            (hooks.give_back)();
        }
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

/// The `on_trace_ready` callback; shared by the clones of a builder.
type TraceReady = Arc<Mutex<dyn FnMut(Trace) + Send>>;

/// Readies the process for a session, each part once per process or cheaply again: the
/// clock source decided, enough record chunks pre-faulted for the threads seen so far, and
/// every backend taken in (plugins loaded, registered factories instantiated).
pub(crate) fn initialize() {
    clock::clock_source();
    record::warm_up();
    backend::take_in_backends();
}

/// Builds a [`Profiler`].
#[derive(Clone, Default)]
pub struct ProfilerBuilder {
    activities: Option<ActivitySet>,
    config: Config,
    /// The backends this session drives instead of the registered ones.
    backends: Option<Vec<Arc<dyn ActivityProfiler>>>,
    schedule: Option<Plan>,
    on_trace_ready: Option<TraceReady>,
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
            .field("schedule", &self.schedule)
            .field("on_trace_ready", &self.on_trace_ready.is_some())
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

    /// The activity types to record, exactly: where [`activities`](Self::activities) takes
    /// an empty set for the default selection, this records no type then (PyTorch's
    /// filter `{ProfilerActivity.CPU: []}`).
    pub fn only_activities(mut self, activities: ActivitySet) -> Self {
        self.activities = Some(activities);
        self
    }

    /// The configuration (Kineto keys).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Stubs mode: instead of the registered backends, time every host op and user range on
    /// `device` through its registered [profiler stubs](crate::backends::ProfilerStubs); each range gets its
    /// device time as `"device_time_us"` in its args. A device without enabled stubs fails
    /// `prepare` with `"<device> used in profiler but not enabled."`.
    pub fn stubs(self, device: &str) -> Self {
        self.backend(StubsProfiler::timer(device))
    }

    /// Marker-only mode: instead of the registered backends, forward ranges and instants to
    /// `device`'s stubs markers (`range_push`/`range_pop`/`mark`, the NVTX-style path), and
    /// select no activity type: the trace keeps nothing.
    pub fn markers(self, device: &str) -> Self {
        self.only_activities(ActivitySet::empty())
            .backend(StubsProfiler::markers(device))
    }

    /// Drives `profiler` (with any others given) instead of the registered backends.
    fn backend(mut self, profiler: impl ActivityProfiler + 'static) -> Self {
        self.backends
            .get_or_insert_with(Vec::new)
            .push(Arc::new(profiler));
        self
    }

    /// Drives the session by `schedule` from [`Profiler::step`] (needs
    /// [`on_trace_ready`](Self::on_trace_ready)): each step is wrapped in a
    /// `ProfilerStep#<n>` user range on the thread calling `step`.
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = Some(Plan::Cycle(schedule));
        self
    }

    /// Drives the session as [`schedule`](Self::schedule) does, by the action `action` gives
    /// each step (PyTorch's `schedule` may be any callable returning a `ProfilerAction`).
    /// It is called once per step, from `start` and [`Profiler::step`], on their thread.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use omniprof::{Profiler, ProfilerAction};
    ///
    /// let traces = Arc::new(Mutex::new(0));
    /// let seen = traces.clone();
    /// // Record steps 1 and 2, then stop.
    /// let mut profiler = Profiler::builder()
    ///     .schedule_fn(|step| match step {
    ///         1 => ProfilerAction::Record,
    ///         2 => ProfilerAction::RecordAndSave,
    ///         _ => ProfilerAction::None,
    ///     })
    ///     .on_trace_ready(move |_| *seen.lock().unwrap() += 1)
    ///     .build()
    ///     .unwrap();
    /// profiler.start().unwrap();
    /// for _ in 0..4 {
    ///     profiler.step().unwrap();
    /// }
    /// profiler.finish().unwrap();
    /// assert_eq!(*traces.lock().unwrap(), 1);
    /// ```
    pub fn schedule_fn(
        mut self,
        action: impl Fn(u64) -> ProfilerAction + Send + Sync + 'static,
    ) -> Self {
        self.schedule = Some(Plan::Custom(Arc::new(action)));
        self
    }

    /// Receives each finished trace: every recorded cycle's with a schedule, the one trace at
    /// [`Profiler::finish`] without. Runs on the thread calling `step` or `finish`. See
    /// [`tensorboard_trace_handler`] for one that writes files.
    pub fn on_trace_ready(mut self, callback: impl FnMut(Trace) + Send + 'static) -> Self {
        self.on_trace_ready = Some(Arc::new(Mutex::new(callback)));
        self
    }

    /// Marks the session as the on-demand engine's own.
    pub(crate) fn on_demand(mut self) -> Self {
        self.on_demand = true;
        self
    }

    /// The profiler, or why it cannot be built (a backend that cannot take part).
    pub fn build(self) -> Result<Profiler, SessionError> {
        if self.schedule.is_some() && self.on_trace_ready.is_none() {
            return Err(SessionError::NoTraceHandler);
        }
        let mut activities = self
            .activities
            .unwrap_or_else(|| or_default(self.config.activity_types()));
        // Naming perf events is what asks for host counters.
        if !self.config.perf_events().is_empty() {
            activities.insert(ActivityType::HostCounters);
        }
        Ok(Profiler {
            config: self.config,
            activities,
            phase: Phase::Built,
            start_sample: None,
            window_start_ns: 0,
            warm_start_ns: None,
            backends: Backends::default(),
            requested: self.backends,
            schedule: self.schedule,
            on_trace_ready: self.on_trace_ready,
            on_demand: self.on_demand,
            toggles: toggles::Toggles::default(),
            run: Run::NotStarted,
            step_num: 0,
            action: ProfilerAction::None,
            step_range: None,
        })
    }
}

/// Where a scheduled profiler is in its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    NotStarted,
    Running,
    Finished,
}

/// The name of step `n`'s user range (PyTorch's).
fn step_range_name(n: u64) -> String {
    format!("ProfilerStep#{n}")
}

/// One profiling session, or with a [`Schedule`] a run of them. `Send`, so an owner may move
/// it between threads (a `ProfilerStep#N` range must still end on the thread it began on).
///
/// The session engine: the synchronous path of `docs/lifecycle.md` (prepare → start →
/// stop → [`Trace`]).
///
/// This module is the lifecycle: which phase a session is in and what each call does to the
/// recorder and the backends. The work of each phase lives beside it: `backends` drives the
/// backend sessions (fault-isolated), `merge` turns what the recorder and the backends
/// produced into the trace. Every source of device data (a registered backend, a plugin, the
/// profiler stubs, the markers) is a backend here: the engine has no modes.
///
/// Only one session records at a time in a process, because the host recorder is
/// process-wide; a second one is refused with [`SessionError::Busy`].
///
/// With a [`Schedule`] (PyTorch's `torch.profiler.schedule`), `start`, [`Profiler::step`] and
/// [`Profiler::finish`] drive the session through cycles of wait, warm-up and recording; each
/// recorded cycle's trace goes to the `on_trace_ready` callback.
///
/// ```
/// use omniprof::{Profiler, Schedule, ScheduleArgs};
/// use omniprof::trace::Trace;
/// use std::sync::mpsc;
///
/// let schedule = Schedule::new(ScheduleArgs { wait: 1, warmup: 1, active: 2, repeat: 1, ..Default::default() })
///     .unwrap();
/// let (tx, traces) = mpsc::channel::<Trace>();
/// let mut profiler = Profiler::builder()
///     .schedule(schedule)
///     .on_trace_ready(move |trace| tx.send(trace).unwrap())
///     .build()
///     .unwrap();
/// profiler.start().unwrap();
/// for _ in 0..6 {
///     omniprof::scope!("train_step");
///     profiler.step().unwrap();
/// }
/// profiler.finish().unwrap();
/// let trace = traces.try_recv().unwrap();
/// let steps: Vec<_> = trace.activities.iter().filter(|a| a.name.starts_with("ProfilerStep#")).map(|a| &*a.name).collect();
/// assert_eq!(steps, ["ProfilerStep#2", "ProfilerStep#3"]);
/// assert!(traces.try_recv().is_err());
/// ```
///
/// ```
/// use omniprof::trace::{ActivitySet, ActivityType};
/// use omniprof::Profiler;
///
/// let mut profiler = Profiler::builder()
///     .activities([ActivityType::CpuOp, ActivityType::UserAnnotation].into_iter().collect())
///     .build()
///     .unwrap();
/// profiler.prepare().unwrap(); // optional: warm-up ahead of start
/// profiler.start().unwrap();
/// drop(omniprof::record_op("aten::add"));
/// let trace = profiler.stop().unwrap();
/// assert_eq!(trace.activities.len(), 1);
/// ```
pub struct Profiler {
    config: Config,
    activities: ActivitySet,
    phase: Phase,
    start_sample: Option<CalibrationSample>,
    window_start_ns: i64,
    /// When the backends started, if they warmed up ahead of the window (see `configure`).
    warm_start_ns: Option<i64>,
    backends: Backends,
    /// The backends the builder was given, driven instead of the registered ones.
    requested: Option<Vec<Arc<dyn ActivityProfiler>>>,
    schedule: Option<Plan>,
    on_trace_ready: Option<TraceReady>,
    run: Run,
    step_num: u64,
    /// The current step's action (with a schedule).
    action: ProfilerAction,
    /// The current step's `ProfilerStep#N` range, while recording.
    step_range: Option<OwnedRange>,
    /// Driven by the on-demand engine (see [`ProfilerBuilder::on_demand`]).
    on_demand: bool,
    /// Collection switched off and on ([`toggle_collection`](Self::toggle_collection)).
    toggles: toggles::Toggles,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("activities", &self.activities)
            .field("phase", &self.phase)
            .field("schedule", &self.schedule)
            .field("step_num", &self.step_num)
            .field("action", &self.action)
            .finish_non_exhaustive()
    }
}

impl Profiler {
    /// A builder with the default config.
    pub fn builder() -> ProfilerBuilder {
        ProfilerBuilder::default()
    }

    /// The selected activity types.
    pub fn activities(&self) -> ActivitySet {
        self.activities
    }

    /// The config the profiler runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Claims the recorder, configures and starts the backends, and warms up (clock source,
    /// pre-faulted buffers), so `start` is cheap and device-side start-up costs are paid
    /// before the window opens. `start` tells the backends the window opened, and they drop
    /// what they recorded until then (see [`ActivityProfiler`]); what still reaches the engine
    /// from the warm-up is dropped from the trace, counted in its `warmup_events` metadata and
    /// never charged to a backend's budget. Called by `start` when skipped (then the backends
    /// start with the window: nothing to drop).
    ///
    /// A synchronous session preempts an on-demand trace that is pending or running
    /// ([`request_on_demand`](crate::on_demand::request_on_demand)): that trace is cancelled and writes no file.
    pub fn prepare(&mut self) -> Result<(), SessionError> {
        if self.schedule.is_some() {
            return Err(SessionError::Scheduled { call: "prepare" });
        }
        if !matches!(self.phase, Phase::Built) {
            return Err(self.out_of_order("prepare"));
        }
        self.configure(true)
    }

    /// Claims the recorder and configures the backends; with `warm`, also starts them
    /// (Kineto's prepare: device tracing runs ahead of the window).
    fn configure(&mut self, warm: bool) -> Result<(), SessionError> {
        if !matches!(self.phase, Phase::Built | Phase::Stopped) {
            return Err(self.out_of_order("prepare"));
        }
        if !self.on_demand {
            if let Some(preempt) = ASYNC_PREEMPT.get() {
                preempt();
            }
        }
        let claim = Claim::take()?;
        // A flight recorder's op observer makes way for the session's.
        if let Some(hooks) = CLAIM_HOOKS.get() {
            (hooks.lend)();
        }
        let unsupported = self.config.unsupported_settings();
        if !unsupported.is_empty() {
            let keys: Vec<String> = unsupported
                .iter()
                .map(|(key, why)| format!("{key} ({why})"))
                .collect();
            log::warn!(
                "omniprof: config keys accepted, not supported by omniprof: {}",
                keys.join(", ")
            );
        }
        initialize();
        self.backends =
            Backends::configure(self.activities, &self.config, self.requested.as_deref())?;
        correlation::set_session_listeners(self.backends.listeners());
        self.warm_start_ns = None;
        if warm {
            // Taken first: everything the backends record is at or after it.
            self.warm_start_ns = Some(clock::wall_now_ns());
            self.start_backends();
        }
        self.phase = Phase::Prepared(claim);
        Ok(())
    }

    /// Opens the capture window and starts recording. With a schedule, starts the run: step
    /// 0 takes its action and its `ProfilerStep#0` range opens.
    pub fn start(&mut self) -> Result<(), SessionError> {
        let Some(schedule) = self.schedule.clone() else {
            if matches!(self.phase, Phase::Built) {
                self.configure(false)?;
            }
            return self.open_window();
        };
        if self.run != Run::NotStarted {
            return Err(self.out_of_order("start"));
        }
        let first = schedule.action_of(0);
        self.transit(ProfilerAction::None, Some(first))?;
        self.action = first;
        self.run = Run::Running;
        self.open_step_range();
        Ok(())
    }

    fn open_window(&mut self) -> Result<(), SessionError> {
        let claim = match std::mem::replace(&mut self.phase, Phase::Stopped) {
            Phase::Prepared(claim) => claim,
            other => {
                self.phase = other;
                return Err(self.out_of_order("start"));
            }
        };
        // A warmed-up backend drops its warm-up just before the window opens, so nothing it
        // records in the window is lost to the flush (what falls between is warm-up).
        let warm = self.warm_start_ns.is_some();
        if warm {
            self.backends.window_opened();
        }
        self.start_sample = Some(CalibrationSample::take());
        self.window_start_ns = clock::wall_now_ns();
        let host = record::start_session(self.config.max_host_records_per_thread());
        if !warm {
            self.start_backends();
            self.backends.window_opened();
        }
        self.phase = Phase::Recording { host, claim };
        Ok(())
    }

    /// Starts the backends' sessions, telling them what is switched off already.
    fn start_backends(&mut self) {
        self.backends.start();
        let off = self.toggles.off();
        if !off.is_empty() {
            self.backends.collection_switched(off);
        }
    }

    /// Switches collection of `types` off (or back on, with `enable`) from now, as PyTorch's
    /// `toggle_collection_dynamic`: an activity of a type that is off when it begins is left
    /// out of the trace (one begun before keeps its end), and flows lose the ends it had.
    /// The host recorder goes on recording meanwhile (the ops open across a switch keep
    /// their ends); each running backend is told what is off
    /// ([`ProfilerSession::collection_switched`](crate::backends::ProfilerSession::collection_switched)),
    /// so one may stop collecting it. What is off stays off into the next trace of a
    /// schedule.
    ///
    /// ```
    /// use omniprof::trace::{ActivitySet, ActivityType};
    /// use omniprof::{record_function, Profiler};
    ///
    /// let mut profiler = Profiler::builder().build().unwrap();
    /// profiler.start().unwrap();
    /// let ranges: ActivitySet = [ActivityType::UserAnnotation].into_iter().collect();
    /// drop(record_function("kept"));
    /// profiler.toggle_collection(false, ranges);
    /// drop(record_function("left_out"));
    /// profiler.toggle_collection(true, ranges);
    /// drop(record_function("kept_too"));
    /// let trace = profiler.stop().unwrap();
    /// let names: Vec<&str> = trace.activities.iter().map(|a| &*a.name).collect();
    /// assert_eq!(names, ["kept", "kept_too"]);
    /// ```
    pub fn toggle_collection(&mut self, enable: bool, types: ActivitySet) {
        if self.toggles.switch(enable, types) && !self.backends.is_empty() {
            self.backends.collection_switched(self.toggles.off());
        }
    }

    /// True between `start` and `stop`.
    pub fn is_recording(&self) -> bool {
        matches!(self.phase, Phase::Recording { .. })
    }

    /// The number of `step` calls so far.
    pub fn step_num(&self) -> u64 {
        self.step_num
    }

    /// The current step's action: with a schedule, the schedule's; without, every step
    /// records.
    pub fn current_action(&self) -> ProfilerAction {
        match self.schedule {
            Some(_) => self.action,
            None => ProfilerAction::Record,
        }
    }

    /// Ends a step (also counting the process-wide [`step`](crate::step) that on-demand
    /// requests are timed by). Without a schedule it only counts. With one: the current
    /// `ProfilerStep#N` range closes, the step number goes up, the schedule's action for it
    /// is taken (PyTorch's transition: warm-up, start, stop, a finished trace handed to
    /// `on_trace_ready`, or a warning for an incorrect schedule), and `ProfilerStep#<n>`
    /// opens on the calling thread.
    ///
    /// An error (another session holds the recorder when a cycle would prepare) leaves this
    /// cycle out; the next step that starts a cycle tries again.
    pub fn step(&mut self) -> Result<(), SessionError> {
        // The process-wide iteration count on-demand requests are timed by.
        crate::iteration::step();
        let Some(schedule) = self.schedule.clone() else {
            self.step_num += 1;
            return Ok(());
        };
        if self.run != Run::Running {
            return Err(self.out_of_order("step"));
        }
        self.close_step_range();
        self.step_num += 1;
        let next = schedule.action_of(self.step_num);
        let prev = std::mem::replace(&mut self.action, next);
        let result = self.transit(prev, Some(next));
        self.open_step_range();
        result
    }

    /// Ends the run: with a schedule, closes the current `ProfilerStep#N` range and takes
    /// the exit transition (a recording cycle's trace goes to `on_trace_ready`); without
    /// one, stops and hands the trace to `on_trace_ready`.
    ///
    /// Dropping a profiler instead stops what runs and discards the cycle in progress (a
    /// destructor does not run user callbacks).
    pub fn finish(&mut self) -> Result<(), SessionError> {
        if self.schedule.is_none() {
            if self.on_trace_ready.is_none() {
                return Err(SessionError::NoTraceHandler);
            }
            let trace = self.close_window()?;
            self.trace_ready(trace);
            return Ok(());
        }
        if self.run != Run::Running {
            return Err(self.out_of_order("finish"));
        }
        self.close_step_range();
        self.run = Run::Finished;
        let prev = std::mem::replace(&mut self.action, ProfilerAction::None);
        self.transit(prev, None)
    }

    /// Runs the engine calls of the change from `prev` to `next` (`None`: exit).
    fn transit(
        &mut self,
        prev: ProfilerAction,
        next: Option<ProfilerAction>,
    ) -> Result<(), SessionError> {
        let mut stopped = None;
        for &call in schedule::transition(prev, next) {
            let done = match call {
                Call::Prepare => self.configure(true),
                Call::Start => self.open_window(),
                Call::Stop => self.close_window().map(|t| stopped = Some(t)),
                Call::TraceReady => {
                    if let Some(trace) = stopped.take() {
                        self.trace_ready(trace);
                    }
                    Ok(())
                }
                Call::Warn(warning) => {
                    log::warn!("{warning}");
                    Ok(())
                }
            };
            if let Err(e) = done {
                // Nothing runs now: the next step starts afresh from NONE.
                self.action = ProfilerAction::None;
                return Err(e);
            }
        }
        // A trace stopped without `TraceReady` (an incorrect schedule) is discarded, as
        // PyTorch does.
        Ok(())
    }

    fn trace_ready(&mut self, trace: Trace) {
        if let Some(callback) = &self.on_trace_ready {
            let mut callback = lock(callback);
            callback(trace);
        }
    }

    fn open_step_range(&mut self) {
        if self.is_recording() {
            self.step_range = OwnedRange::begin(step_range_name(self.step_num));
        }
    }

    fn close_step_range(&mut self) {
        // On any thread; when recording has already stopped, the trace closed it.
        if let Some(range) = self.step_range.take() {
            range.end();
        }
    }

    /// Closes the capture window, stops recording and returns the trace. A scheduled
    /// profiler hands its traces to `on_trace_ready` instead (end it with `finish`).
    pub fn stop(&mut self) -> Result<Trace, SessionError> {
        if self.schedule.is_some() {
            return Err(SessionError::Scheduled { call: "stop" });
        }
        self.close_window()
    }

    fn close_window(&mut self) -> Result<Trace, SessionError> {
        self.end_recording()?;
        self.process()
    }

    /// The cheap first half of `stop`: closes the capture window and stops the host
    /// recording, without touching the backends or processing anything. The on-demand engine
    /// calls it inside the application's `step()`, which must not block;
    /// [`process`](Self::process) does the rest on the engine's thread.
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
    pub(crate) fn process(&mut self) -> Result<Trace, SessionError> {
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
        let switched = self.toggles.take(&conv);
        let pid = std::process::id() as i64;
        let host = record::collect(host, pid, &conv, window);
        // Drained: another session may claim the recorder while this one merges.
        drop(claim);
        let recorded = merge::Recorded {
            host,
            pid,
            window,
            warm_start_ns: self.warm_start_ns,
            selection: self.activities,
            toggled: switched,
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

/// The trace of a flight recorder's window: its host recording merged with the window of
/// each of `backends` that records continuously (they go on recording).
pub(crate) fn window_trace(
    host: record::HostRecording,
    pid: i64,
    window: Window,
    config: &Config,
    backends: &mut Backends,
) -> Trace {
    let recorded = merge::Recorded {
        host,
        pid,
        window,
        warm_start_ns: None,
        selection: ActivitySet::default_set(),
        toggled: toggles::Switched::default(),
        config,
    };
    merge::window_trace(recorded, backends)
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if let Some(range) = self.step_range.take() {
            range.end();
        }
        match &mut self.phase {
            Phase::Recording { host, .. } => {
                record::stop_session(host);
                self.backends.stop();
            }
            Phase::Ended { .. } => self.backends.stop(),
            Phase::Prepared(_) if self.warm_start_ns.is_some() => self.backends.stop(),
            Phase::Built | Phase::Prepared(_) | Phase::Stopped => {}
        }
    }
}

#[cfg(test)]
mod tests;
