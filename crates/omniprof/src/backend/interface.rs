//! The interface a backend implements: the long-lived [`ActivityProfiler`], its
//! per-trace [`ProfilerSession`], what the engine hands a session ([`ActivitySink`],
//! [`HostOps`]) and the rows and errors a backend reports.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::record::CorrelationListener;
use crate::Value;
use crate::Window;
use crate::{Activity, ActivitySet, SessionHealth};
use crate::{CounterTrack, CounterValues};

/// What a backend reports as having gone wrong; the engine logs it, writes it into the trace
/// metadata (`backend_errors`) and goes on without that backend.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

impl BackendError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// A device's process row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The `pid` its activities use.
    pub id: i64,
    /// Where the row sorts among processes.
    pub sort_index: i64,
    /// The row's name.
    pub name: String,
    /// The row's label.
    pub label: String,
}

impl DeviceInfo {
    /// Where device rows sort: after the host's, as Kineto's do.
    pub const SORT_OFFSET: i64 = 5_000_000;

    /// Device `id`'s row, sorted after the host's by its id.
    pub fn new(id: i64, name: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            id,
            sort_index: id + Self::SORT_OFFSET,
            name: name.into(),
            label: label.into(),
        }
    }
}

/// A stream's (or other resource's) thread row on a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// The device whose row it is on.
    pub device_id: i64,
    /// The `tid` its activities use.
    pub id: i64,
    /// Where the row sorts among its device's.
    pub sort_index: i64,
    /// The row's name.
    pub name: String,
}

impl ResourceInfo {
    /// Stream `stream`'s row on device `device`, named and sorted as Kineto does
    /// (`stream 7 `, with Kineto's trailing space).
    pub fn stream(device: i64, stream: i64) -> Self {
        Self {
            device_id: device,
            id: stream,
            sort_index: stream,
            name: format!("stream {stream} "),
        }
    }
}

/// A long-lived backend: named, with the activity types it can record, configured once per
/// trace.
///
/// Accelerator backends: the Rust form of Kineto's child-profiler interface
/// (`docs/lifecycle.md`, section 5).
///
/// A backend is a long-lived [`ActivityProfiler`] (a factory) that, for each trace, may hand the
/// engine a [`ProfilerSession`]. The engine starts and stops the sessions with the capture
/// window and, at the end, asks each for its activities through an [`ActivitySink`]. Backends
/// never see a writer: the engine links device work to the host ops that launched it, draws
/// the flows, projects user ranges onto the device, filters to the capture window and builds
/// the rows.
///
/// A session prepared ahead of its window (on-demand traces, `Profiler::prepare`, a schedule's
/// warm-up) is started at the warm-up, so device start-up costs are paid before the window, and
/// is told when the window opens ([`ProfilerSession::window_opened`]): Kineto's contract, which
/// discards the warm-up's device records (`flushWarmupBuffers`) and starts its child
/// profilers at the window. A bounded backend drops what the
/// warm-up produced there, so its budget holds the window; the engine's own budget
/// (`OMNIPROF_MAX_EVENTS_PER_BACKEND`) never counts a warm-up activity: it is dropped as it is
/// delivered and counted in the trace's `warmup_events`.
///
/// ```
/// use omniprof::backends::{ActivityProfiler, ActivitySink, BackendError, HostOps, ProfilerSession};
/// use omniprof::trace::{Activity, ActivitySet, ActivityType, Window};
/// use omniprof::Config;
///
/// #[derive(Default)]
/// struct Clock;
///
/// struct ClockSession;
///
/// impl ActivityProfiler for Clock {
///     fn name(&self) -> &str {
///         "clock"
///     }
///     fn available_activities(&self) -> ActivitySet {
///         [ActivityType::ConcurrentKernel].into_iter().collect()
///     }
///     fn configure(&self, _: ActivitySet, _: &Config) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
///         Ok(Some(Box::new(ClockSession)))
///     }
/// }
///
/// impl ProfilerSession for ClockSession {
///     fn process_trace(&mut self, sink: &mut dyn ActivitySink, _: &dyn HostOps, w: Window) -> Result<(), BackendError> {
///         sink.add(Activity::new(ActivityType::ConcurrentKernel, "tick", 0, 1, w.start_ns, w.start_ns + 1));
///         Ok(())
///     }
/// }
///
/// omniprof::register_profiler!(Clock);
/// ```
pub trait ActivityProfiler: Send + Sync {
    /// The backend's name, in messages and metadata.
    fn name(&self) -> &str;

    /// The types this backend can produce.
    fn available_activities(&self) -> ActivitySet;

    /// A session for one trace that records `activities` (already intersected with
    /// [`available_activities`](Self::available_activities)), or `None` to sit this trace
    /// out. A registered backend is asked only when it can record a selected type; a backend
    /// given to the session builder is always asked (it may live on the host ranges alone, as
    /// the profiler stubs do), and its error fails the session's `prepare`.
    fn configure(
        &self,
        activities: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError>;

    /// The per-kernel hardware metrics this backend's scope profiler offers (the
    /// `scope_profiler` activity type): a backend that lists some here and supports
    /// [`ActivityType::XpuScopeProfiler`](crate::ActivityType::XpuScopeProfiler) reports
    /// values with [`ActivitySink::add_kernel_metrics`]. `SCOPE_PROFILER_METRICS` naming a
    /// metric no backend offers fails the session, listing these.
    fn scope_metrics(&self) -> Vec<ScopeMetric> {
        Vec::new()
    }
}

/// A per-kernel metric a device's scope profiler offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeMetric {
    /// The name `SCOPE_PROFILER_METRICS` selects it by, and its key in the kernel's `args`.
    pub name: String,
    /// The group it is drawn in: one counter track per (kernel stream, group), holding the
    /// selected metrics of the group.
    pub group: String,
}

impl ScopeMetric {
    /// A metric called `name` in `group`.
    pub fn new(name: impl Into<String>, group: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            group: group.into(),
        }
    }
}

/// One trace's worth of a backend.
pub trait ProfilerSession: Send {
    /// Recording begins: at the warm-up when the session is prepared ahead of its window
    /// (then [`window_opened`](Self::window_opened) follows when the window opens), else
    /// with the window.
    fn start(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    /// The capture window opened: called once per trace, after [`start`](Self::start),
    /// whether that ran at the warm-up or just now. A backend that records ahead of the
    /// window drops what it recorded so far here (Kineto's `flushWarmupBuffers`) and resets
    /// its budget, so a store filled during the warm-up does not cost the window its records.
    fn window_opened(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    /// Collection of the types in `off` is switched off, and of every other type on, from
    /// now (PyTorch's `toggle_collection_dynamic`): called when a switch changes what is off
    /// while the session runs, and after [`start`](Self::start) when something is off
    /// already (it stays off into a schedule's next trace). Whatever a backend does, the
    /// engine leaves out of the trace what begins while its type is off; a backend may also
    /// stop collecting those types meanwhile, so that they cost what PyTorch's collection
    /// then costs: nothing. The default does nothing.
    fn collection_switched(&mut self, off: ActivitySet) -> Result<(), BackendError> {
        let _ = off;
        Ok(())
    }

    /// The capture window closed.
    fn stop(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    /// Hands every recorded activity to `sink`. `host_ops` finds the host op a device record
    /// was launched from, by the correlation id the backend was pushed.
    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        host_ops: &dyn HostOps,
        window: Window,
    ) -> Result<(), BackendError>;

    /// Asked once by a flight recorder, after configure and before [`start`](Self::start):
    /// switch to recording for the recorder's life, keeping in bounded memory at least the
    /// activities of the last `window`, and say so (true). The default cannot (false): the
    /// session is dropped and its backend named in each dump (`flight_sitting_out`) and in a
    /// warning. A session that answers true is started, stopped and told of a window as any
    /// session, and in between asked for windows with
    /// [`process_window`](Self::process_window).
    ///
    /// ```
    /// use std::collections::VecDeque;
    /// use std::time::Duration;
    /// use omniprof::backends::{ActivitySink, BackendError, HostOps, ProfilerSession};
    /// use omniprof::trace::{Activity, Window};
    ///
    /// /// Keeps its newest 1024 activities, whatever the window.
    /// struct Ring(VecDeque<Activity>);
    ///
    /// impl ProfilerSession for Ring {
    ///     fn record_continuously(&mut self, _window: Duration) -> bool {
    ///         true
    ///     }
    ///     fn process_window(&mut self, sink: &mut dyn ActivitySink, _: &dyn HostOps, w: Window) -> Result<(), BackendError> {
    ///         let inside = |a: &&Activity| a.start_ns >= w.start_ns && a.end_ns <= w.end_ns;
    ///         self.0.iter().filter(inside).for_each(|a| sink.add(a.clone()));
    ///         Ok(())
    ///     }
    ///     fn process_trace(&mut self, sink: &mut dyn ActivitySink, _: &dyn HostOps, _: Window) -> Result<(), BackendError> {
    ///         self.0.drain(..).for_each(|a| sink.add(a));
    ///         Ok(())
    ///     }
    /// }
    /// # assert!(Ring(VecDeque::new()).record_continuously(Duration::from_secs(30)));
    /// ```
    fn record_continuously(&mut self, window: Duration) -> bool {
        let _ = window;
        false
    }

    /// Hands `sink` the activities that lie wholly within `window`, which ends about now,
    /// and goes on recording: a flight recorder's dump. Called only on a session that
    /// agreed to [`record_continuously`](Self::record_continuously), from the recorder's
    /// thread while the application goes on, any number of times; the engine links the
    /// activities to the window's host ops as for [`process_trace`](Self::process_trace),
    /// and asks for rows, metadata, errors and warnings after each call.
    fn process_window(
        &mut self,
        sink: &mut dyn ActivitySink,
        host_ops: &dyn HostOps,
        window: Window,
    ) -> Result<(), BackendError> {
        let _ = (sink, host_ops, window);
        Err(BackendError::new("this backend cannot record continuously"))
    }

    /// Process rows for the devices this session recorded on.
    fn device_info(&self) -> Vec<DeviceInfo> {
        Vec::new()
    }

    /// Thread rows for the streams (or other resources) this session recorded on.
    fn resource_infos(&self) -> Vec<ResourceInfo> {
        Vec::new()
    }

    /// Problems the session ran into; they go into the trace metadata.
    fn errors(&self) -> Vec<String> {
        Vec::new()
    }

    /// Doubts about what the session delivered that cost the trace nothing (e.g. event ids
    /// that match no id the host pushed): the trace's `backend_warnings`, logged as warnings.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Trace metadata entries (e.g. a runtime version).
    fn metadata(&self) -> Vec<(String, Value)> {
        Vec::new()
    }

    /// Fills the fields of the trace's session health that are the session's own, typed
    /// (the profiler stubs' `stub_errors`, the host perf counters'
    /// `unavailable_perf_events`); the engine fills the rest. Called once per trace, after
    /// [`process_trace`](Self::process_trace), as [`metadata`](Self::metadata) is; a panic
    /// leaves the report as it was.
    fn report(&self, _report: &mut SessionHealth) {}

    /// One JSON object per device for `deviceProperties`.
    fn device_properties(&self) -> Vec<Value> {
        Vec::new()
    }

    /// The object to push correlation ids to around every host op and user range
    /// (Kineto's `pushCorrelationId` / `pushUserCorrelationId` and their pops). It is a
    /// separate, shareable object because application threads call it concurrently while
    /// the session itself belongs to the engine.
    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        None
    }
}

/// Where a session delivers its activities.
pub trait ActivitySink {
    /// An activity as recorded (device work, runtime calls, counters, ...).
    fn add(&mut self, activity: Activity);

    /// Device work launched inside the user range with this correlation id, so the engine
    /// can project that range onto the device (`gpu_user_annotation`).
    fn add_in_user_range(&mut self, activity: Activity, user_correlation: u64);

    /// An arg for the host op or user range with this correlation id (e.g. the device time
    /// measured around it); dropped when the trace does not keep that range.
    fn add_host_arg(&mut self, correlation: u64, key: &str, value: Value);

    /// A counter sample on `track` at `ts_ns` with its named values: the one way a backend
    /// emits counters. Values that are not finite numbers are dropped and counted; a sample
    /// left with none is not kept; a sample outside the capture window is dropped and
    /// counted like any activity.
    fn add_counter(&mut self, track: &CounterTrack, ts_ns: i64, values: CounterValues);

    /// The scope profiler's metric values for the kernel added just before (see
    /// [`ActivityProfiler::scope_metrics`]). The engine keeps the selected metrics, writes
    /// them into the kernel's `args` and draws them as counters; a call with no kernel
    /// before it is ignored.
    fn add_kernel_metrics(&mut self, values: CounterValues);
}

/// Looks up the host ops and user ranges the recorder recorded: by correlation id, and by
/// the thread and time of a call made inside them.
pub trait HostOps {
    /// The host op or user range with this correlation id, if recorded.
    fn get(&self, correlation: u64) -> Option<&Activity>;

    /// The innermost host op and the innermost user range that were open on recorder thread
    /// `thread` (the `tid` host ops carry) over all of `start_ns..=end_ns`, with how far that
    /// span lies from the nearest begin or end of any op or range of the thread: what a
    /// device runtime would have tagged a call made there with, had the ranges' correlation
    /// ids been pushed to it ([`CorrelationListener`]), for a backend that links launches by
    /// their thread and time instead. Ops and ranges left out of the trace by its activity
    /// selection count; Python frames, which are never pushed, do not.
    ///
    /// ```
    /// use omniprof::backends::{Enclosing, HostOps};
    /// # use omniprof::trace::Activity;
    /// # struct Ops;
    /// # impl HostOps for Ops {
    /// #     fn get(&self, _: u64) -> Option<&Activity> { None }
    /// #     fn enclosing(&self, _: i64, start_ns: i64, end_ns: i64) -> Enclosing {
    /// #         Enclosing { op: Some(7), user_range: None, clearance_ns: (start_ns - 100).min(200 - end_ns) }
    /// #     }
    /// # }
    /// # let host_ops = Ops;
    /// // A call from 120 to 150 ns on thread 42, inside op 7 (100 to 200 ns).
    /// let found = host_ops.enclosing(42, 120, 150);
    /// assert_eq!((found.op, found.user_range), (Some(7), None));
    /// // 20 ns from the op's begin: decided only by clocks known to agree better than that.
    /// assert_eq!(found.clearance_ns, 20);
    /// ```
    fn enclosing(&self, thread: i64, start_ns: i64, end_ns: i64) -> Enclosing;
}

/// What was open on a thread over a span of time ([`HostOps::enclosing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enclosing {
    /// The correlation id of the innermost host op open over the whole span.
    pub op: Option<u64>,
    /// The correlation id of the innermost user range open over the whole span.
    pub user_range: Option<u64>,
    /// The distance in nanoseconds from the span to the nearest begin or end of an op or
    /// user range of the thread: 0 where one lies inside the span, `i64::MAX` where the
    /// thread recorded none. A caller whose times may be off by `e` can trust `op` and
    /// `user_range` only where this exceeds `e`.
    pub clearance_ns: i64,
}
