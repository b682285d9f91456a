//! omniprof: a device-agnostic activity profiler, the in-process half.
//!
//! Application threads record ops and named ranges into per-thread buffers; a [`Profiler`]
//! session configures, starts and stops the accelerator backends around that recording and
//! merges everything into one [`trace::Trace`]. The trace model and its writers are the
//! `omniprof-trace` crate, here as the module [`trace`]; the reader (`omniprof-read`), the
//! analyses (`omniprof-analysis`) and the HTML report (`omniprof-report`) are crates of their
//! own, which a profiled program need not build.
//!
//! The root holds what a profiled program calls:
//!
//! - **Recording**: [`record_function`], [`record_op`], [`scope!`] and [`instant`] record
//!   ranges and instants on the calling thread; [`step`] counts the application's iterations;
//!   [`set_thread_name`] names the thread's row.
//! - **Sessions**: a [`Profiler`] ([`ProfilerBuilder`]) prepares, starts and stops the
//!   backends, fault-isolated ([`SessionError`]), or follows a [`Schedule`] ([`ScheduleArgs`],
//!   [`ProfilerAction`]) driven by [`Profiler::step`], handing each trace to a callback such as
//!   [`tensorboard_trace_handler`]'s ([`TraceDirHandler`]).
//! - **Flight recorder**: a [`FlightRecorder`] ([`FlightRecorderBuilder`]) keeps the last
//!   seconds of recording in bounded memory and writes them out ([`Dump`]) when a step is
//!   slow, the job hangs or fails ([`DumpReason`]), or on request.
//! - **Configuration**: a [`Config`] is Kineto's `KEY=VALUE` text; bad text is a
//!   [`ConfigError`] ([`ConfigErrorReason`]), a line not fully applied a [`ConfigWarning`].
//! - **Backends**: [`register_profiler!`] and [`register_stubs!`] register a backend before
//!   `main` runs.
//!
//! The rest sits in named modules, each item at one path:
//!
//! - [`trace`]: the trace model ([`trace::Trace`], [`trace::Activity`], ...) and its
//!   writers ([`trace::save`], ...).
//! - [`recording`]: the guard and name types of the recording calls, and the calls a
//!   framework's observers make (ops pushed and popped, Python frames, memory events).
//! - [`clock`]: the recording clock and its calibration to wall time.
//! - [`backends`]: the trait every source of device data implements, its registry, the legacy
//!   profiler stubs and the host's perf counters.
//! - [`plugins`]: dynamic `.so` backends with Kineto's plugin C ABI.
//! - [`config_keys`]: the names of the keys a [`Config`] reads.
//! - [`on_demand`]: tracing a running process on request, and the socket that triggers it.
//!
//! ```
//! use omniprof::{record_function, Profiler};
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! {
//!     let _step = record_function("step");
//!     omniprof::scope!("inner");
//! }
//! let trace = profiler.stop().unwrap();
//! assert!(trace.activities.iter().any(|a| &*a.name == "step"));
//! # let dir = tempfile::tempdir().unwrap();
//! omniprof::trace::save(&trace, dir.path().join("step.pt.trace.json")).unwrap();
//! ```

// The implementation, private: the public face is the root's `pub use` list and the named
// modules below (facades re-exporting from these, and the clock, public as it is).
mod backend;
mod config;
#[cfg(target_os = "linux")]
mod dynolog;
mod flight;
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

// Recording.
pub use iteration::step;
pub use record::{instant, record_function, record_op, set_thread_name};

// Sessions.
pub use session::{
    tensorboard_trace_handler, Profiler, ProfilerAction, ProfilerBuilder, Schedule, ScheduleArgs,
    ScheduleError, SessionError, TraceDirHandler,
};

// The flight recorder.
pub use flight::{
    Dump, DumpReason, FlightError, FlightRecorder, FlightRecorderBuilder, FlightStats,
};

// Configuration.
pub use config::{Config, ConfigError, ConfigErrorReason, ConfigWarning};

/// The trace model, its writers, and the helpers every omniprof crate shares: the
/// `omniprof-trace` crate.
pub use omniprof_trace as trace;

// The crate's own modules name the trace model's items at the root (`crate::Trace`), as they
// did when the root re-exported them; private, so nothing is exported twice.
use omniprof_trace::*;

pub mod recording {
    //! The recorder below the root's calls: the guard and name types that
    //! [`record_function`](crate::record_function) and its kin return and take, the current
    //! [`iteration`], and the calls a framework's observers make (the op observer's
    //! [`push_op`] / [`pop_op`], the Python tracer's [`PythonFrame`], the allocator's
    //! [`record_memory`]).

    pub use crate::iteration::iteration;
    pub use crate::record::python::PythonFrame;
    pub use crate::record::{
        pop_op, pop_op_with_autograd, push_op, push_op_packed, record_memory, record_out_of_memory,
        Autograd, InstantGuard, IntoName, MemoryUsage, Name, OwnedRange, PushedOp, RangeGuard,
        StaticName, UnpackArgs,
    };
}

pub mod clock;

pub mod backends {
    //! The sources of device data. Each implements [`ActivityProfiler`] (its sessions
    //! [`ProfilerSession`], writing into an [`ActivitySink`]) and is registered with
    //! [`register_profiler!`](crate::register_profiler) or [`register_profiler_factory`];
    //! backends listen on the host's correlation ids through a [`CorrelationListener`]. The
    //! legacy [`ProfilerStubs`] ([`register_stubs!`](crate::register_stubs)) and the host's perf
    //! counters ([`PerfEvent`]) are adapted to the same trait.

    pub use crate::backend::{
        profilers_present, register_profiler_factory, ActivityProfiler, ActivitySink, BackendError,
        DeviceInfo, Enclosing, HostOps, ProfilerFactory, ProfilerSession, ResourceInfo,
        ScopeMetric,
    };
    pub use crate::perf::PerfEvent;
    pub use crate::record::CorrelationListener;
    pub use crate::stubs::{
        register_stubs, registered_stubs, timing_session, ProfilerStubs, RecordOut, StubError,
        StubEvent,
    };
}

pub mod plugins {
    //! Dynamic backends: `.so` libraries with Kineto's plugin C ABI, found in the plugin
    //! directories ([`plugin_dirs`], [`DIR_VARIABLES`]) or loaded by path ([`load_plugin`]),
    //! validated call by call, their misbehaviour reported ([`Problem`]) instead of trusted.

    pub use crate::plugin::{
        env_plugin_rejections, late_plugin_calls, load_entry_point, load_plugin,
        load_plugins_from_env, plugin_dirs, plugin_files, plugin_rejections, EntryPointProfiler,
        HostTraceBuilder, LastCall, LoadedPlugin, PluginError, Problem, ProblemKind,
        RegisteredProfiler, DIR_VARIABLES,
    };
}

pub mod config_keys {
    //! The keys a [`Config`](crate::Config) reads, for code that writes config text.

    // The keys that code outside the parser writes into config text (the `trigger` and
    // `plugins check` commands, the Python package's `record_shapes`).
    pub use crate::config::keys::{
        ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS, ACTIVITIES_LOG_FILE,
        ACTIVITIES_WARMUP_PERIOD_SECS, ACTIVITY_TYPES, OMNIPROF_CAPTURE_OVERLOAD_NAMES,
        OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS, OMNIPROF_PRIVATEUSE1_PROFILER,
        OMNIPROF_PRIVATEUSE1_STUBS, OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS, PROFILE_PROFILE_MEMORY,
        PROFILE_REPORT_INPUT_SHAPES, PROFILE_START_ITERATION, PROFILE_START_ITERATION_ROUNDUP,
        PROFILE_START_TIME, PROFILE_WITH_FLOPS, PROFILE_WITH_MODULES, PROFILE_WITH_STACK,
    };
}

pub mod on_demand {
    //! Tracing a running process on request ([`request_on_demand`]), through the same session
    //! engine, driven by time or by [`step`](crate::step); on Unix, [`serve_triggers`] lets
    //! `omniprof trigger` ask for one through a socket ([`send_trigger`], [`TriggerServer`]).
    //! On Linux, [`poll_kineto_daemon`] makes the process a client of dynolog's IPC fabric
    //! (as PyTorch's Kineto is with `KINETO_USE_DAEMON=1`; [`FabricMessage`] and
    //! [`FabricSocket`] are its wire), so a dynolog or `omniprof daemon` triggers it.

    pub use crate::config::{
        check_on_demand_log_file, on_demand_trace_dir, LogFileRefused, MAX_START_AHEAD_ITERATIONS,
        MAX_START_AHEAD_MS, ONDEMAND_ENV,
    };
    #[cfg(target_os = "linux")]
    pub use crate::dynolog::{
        kineto_daemon_opted_in, ConfigPoll, Datagram, FabricAddr, FabricError, FabricMessage,
        FabricSocket, GpuContext, KinetoFabric, SenderCredentials, CONFIG_ACTIVITIES,
        CONFIG_EVENTS, DAEMON_ENDPOINT, DAEMON_POLL_INTERVAL, FABRIC_HEADER_LEN,
        FABRIC_MAX_DATAGRAM, KIND_CONTEXT, KIND_POLL, KINETO_IPC_SOCKET_DIR_ENV,
        KINETO_USE_DAEMON_ENV, OMNIPROF_CLIENT_PREFIX,
    };
    #[cfg(target_os = "linux")]
    pub use crate::ondemand::poll_kineto_daemon;
    pub use crate::ondemand::{
        cancel_on_demand, cancel_on_demand_request, enable_on_demand_from_env, on_demand_opted_in,
        on_demand_status, request_on_demand, serve_triggers, stop_serving_triggers,
        BaseConfigError, CancelledRequest, NotCancelled, OnDemandState, OnDemandStatus,
        OnDemandTrigger, Refused, RequestSummary, Ticket, TraceFailed, NOTES_METADATA,
    };
    #[cfg(unix)]
    pub use crate::trigger::{
        cancel_trigger, check_trigger_config, listen_for_triggers, request_flight_dump,
        send_trigger, send_trigger_traced, Listening, RuntimeDir, ServerOptions, Traced,
        TriggerError, TriggerHandler, TriggerRefused, TriggerServer, TRIGGER_MAX_BODY,
    };
}

/// Hooks into the backend registry for omniprof's own tests; not part of the API.
#[doc(hidden)]
pub mod __test {
    pub use crate::backend::{
        has_factory, init_engine, is_registered_with_engine, registered_profilers,
    };
}

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

#[doc = include_str!("../../../docs/flight-recorder.md")]
#[cfg(doctest)]
pub struct FlightGuideDoctests;
