//! omniprof: a device-agnostic activity profiler, the in-process half.
//!
//! Application threads record ops and named ranges into per-thread buffers; a [`Profiler`]
//! session configures, starts and stops the accelerator backends around that recording and
//! merges everything into one [`Trace`]. The trace model and its writers live in the
//! `omniprof-trace` crate, whose items are re-exported here ([`Trace`], [`save`], ...); the
//! reader (`omniprof-read`), the analyses (`omniprof-analysis`) and the HTML report
//! (`omniprof-report`) are crates of their own, which a profiled program need not build. Its
//! items, in the order data flows:
//!
//! **Recording.** [`record_function`], [`record_op`], [`scope!`] and [`instant`] record ranges
//! and instants on the calling thread ([`RangeGuard`], [`Name`]); [`push_op`] / [`pop_op`]
//! are the op observer's calls, [`PythonFrame`] the Python tracer's, [`record_memory`] the
//! allocator's. Times come from the recording clock ([`ClockSource`], [`ticks`]), calibrated
//! to wall time ([`TickConverter`]). Backends listen on correlation ids through a
//! [`CorrelationListener`].
//!
//! **Configuration.** A [`Config`] is Kineto's `KEY=VALUE` text, each key declared once
//! ([`ACTIVITY_TYPES`], [`PROFILE_START_ITERATION`], ...); bad text is a [`ConfigError`].
//!
//! **Backends.** Every source of device data implements [`ActivityProfiler`] (its sessions
//! [`ProfilerSession`], writing into an [`ActivitySink`]) and is registered with
//! [`register_profiler!`]; dynamic `.so` plugins with Kineto's plugin C ABI
//! ([`load_plugin`], [`PluginError`]), the legacy [`ProfilerStubs`] and the host's perf
//! counters (`PERF_EVENTS`) are adapted to that trait.
//!
//! **Sessions.** A [`Profiler`] ([`ProfilerBuilder`]) prepares, starts and stops the backends,
//! fault-isolated, or follows a [`Schedule`] driven by [`step`], and merges the host
//! recording and every backend's output into one [`Trace`]; [`tensorboard_trace_handler`]
//! saves each trace as PyTorch's does.
//!
//! **On demand.** [`request_on_demand`] traces a running process through the same session
//! engine, driven by time or by [`step`]; on Unix, [`serve_triggers`] lets `omniprof trigger`
//! ask for one through a socket ([`send_trigger`], [`TriggerServer`]).
//!
//! **The trace**, re-exported from `omniprof-trace`: the model ([`Trace`], [`Activity`],
//! [`Value`], [`keys`], [`Counters`]), the writers ([`save`]), and the helpers every omniprof
//! crate shares ([`lock`], locking that ignores poisoning, and [`prefix_within`], cutting text
//! on a character boundary).
//!
//! ```
//! use omniprof::{Profiler, record_function};
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! {
//!     let _step = record_function("step");
//!     omniprof::scope!("inner");
//! }
//! let trace = profiler.stop().unwrap();
//! assert!(trace.activities.iter().any(|a| &*a.name == "step"));
//! ```

mod backend;
mod clock;
mod config;
mod iteration;
mod ondemand;
mod perf;
mod perf_event;
mod plugin;
mod record;
mod session;
mod stubs;
#[cfg(unix)]
mod trigger;

// The trace model, its writers, and the helpers every omniprof crate shares.
pub use omniprof_trace::*;

// Recording.
pub use clock::{
    clock_source, ticks, tightest_pair, wall_now_ns, CalibrationSample, ClockSource, TickConverter,
};
pub use iteration::{iteration, step};
pub use record::python::PythonFrame;
pub use record::{
    instant, pop_op, pop_op_with_autograd, push_op, record_function, record_memory, record_op,
    record_out_of_memory, set_thread_name, Autograd, CorrelationListener, InstantGuard, IntoName,
    MemoryReport, Name, OwnedRange, PushedOp, RangeGuard, StaticName,
};

// Configuration.
pub use config::{
    check_on_demand_log_file, on_demand_trace_dir, Config, ConfigError, ConfigErrorReason,
    ConfigWarning, ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS, ACTIVITIES_LOG_FILE,
    ACTIVITIES_WARMUP_PERIOD_SECS, ACTIVITY_TYPES, MAX_START_AHEAD_ITERATIONS, MAX_START_AHEAD_MS,
    OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS, OMNIPROF_PRIVATEUSE1_PROFILER, OMNIPROF_PRIVATEUSE1_STUBS,
    OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS, ONDEMAND_ENV, PROFILE_PROFILE_MEMORY,
    PROFILE_REPORT_INPUT_SHAPES, PROFILE_START_ITERATION, PROFILE_START_ITERATION_ROUNDUP,
    PROFILE_START_TIME, PROFILE_WITH_FLOPS, PROFILE_WITH_MODULES, PROFILE_WITH_STACK,
};

// Backends: the trait, its registry, plugins, stubs and the host's perf counters.
pub use backend::{
    has_factory, init_engine, is_registered_with_engine, profilers_present,
    register_profiler_factory, registered_profilers, ActivityProfiler, ActivitySink, BackendError,
    DeviceInfo, HostOps, ProfilerFactory, ProfilerSession, ResourceInfo, ScopeMetric,
};
pub use perf::PerfEvent;
pub use plugin::{
    env_plugin_rejections, late_plugin_calls, load_entry_point, load_plugin, load_plugins_from_env,
    plugin_dirs, plugin_files, plugin_rejections, EntryPointProfiler, HostTraceBuilder, LastCall,
    LoadedPlugin, PluginError, Problem, ProblemKind, ProfilerReport, DIR_VARIABLES,
};
pub use stubs::{
    register_stubs, registered_stubs, timing_session, ProfilerStubs, RecordOut, StubError,
    StubEvent,
};

// Sessions.
pub use session::{
    tensorboard_trace_handler, Profiler, ProfilerAction, ProfilerBuilder, Schedule, ScheduleArgs,
    ScheduleError, SessionError, TraceDirHandler,
};

// On-demand traces, and the socket that triggers them.
pub use ondemand::{
    cancel_on_demand, cancel_on_demand_request, enable_on_demand_from_env, on_demand_opted_in,
    on_demand_status, request_on_demand, serve_triggers, stop_serving_triggers, BaseConfigError,
    OnDemandState, OnDemandStatus, OnDemandTrigger, Refused, RequestSummary, Ticket, TraceFailed,
    NOTES_METADATA,
};
#[cfg(unix)]
pub use trigger::{
    cancel_trigger, listen_for_triggers, send_trigger, send_trigger_traced, Listening, RuntimeDir,
    ServerOptions, Traced, TriggerError, TriggerHandler, TriggerServer, TRIGGER_MAX_BODY,
};

// The Rust snippets of the README and of the guides in docs/ compile and run as doc tests,
// so they cannot rot. A guide that gains a Rust block is added here.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[doc = include_str!("../../../docs/rust.md")]
#[cfg(doctest)]
pub struct RustGuideDoctests;

#[doc = include_str!("../../../docs/plugins.md")]
#[cfg(doctest)]
pub struct PluginsGuideDoctests;
