//! omniprof: a device-agnostic activity profiler, the in-process half.
//!
//! Application threads record ops and named ranges into per-thread buffers; a [`Profiler`]
//! session configures, starts and stops the accelerator backends around that recording and
//! merges everything into one [`Trace`]. The trace model and everything that only reads or
//! writes it live in the `omniprof-trace` crate, whose items are re-exported here ([`Trace`],
//! [`save`], [`TraceReader`], [`key_averages`], ...), so one dependency gives a program the
//! whole API. Modules,
//! in the order data flows:
//!
//! - [`clock`]: the recording clock (TSC or monotonic) and its calibration to wall time;
//! - [`record`]: the host recorder (`record_function`, `scope!`, instants) and the
//!   correlation hooks backends listen on;
//! - [`config`]: Kineto `KEY=VALUE` configuration, each key declared once;
//! - [`backend`]: the [`ActivityProfiler`](backend::ActivityProfiler) trait every source of
//!   device data implements, and the registry `register_profiler!` fills;
//! - [`plugin`]: dynamic `.so` plugins with Kineto's plugin C ABI, adapted to that trait;
//! - [`stubs`]: the legacy profiler stubs, adapted to that trait;
//! - [`session`]: the lifecycle (prepare → start → stop, or a [`Schedule`] driven by
//!   `step`), the backends' fault-isolated driving, and the merge of the host recording and
//!   every backend's output into the trace;
//! - [`perf`]: the built-in backend that counts the host's perf events (`PERF_EVENTS`) per
//!   recording thread;
//! - [`ondemand`]: the asynchronous engine: on-demand traces of a running process, driven
//!   by time or by [`step`], through the same session engine;
//! - `trigger` (Unix): the socket through which `omniprof trigger` asks a running process
//!   for an on-demand trace;
//! - re-exported from `omniprof-trace`: the trace model ([`Trace`], [`Activity`], [`Value`],
//!   [`keys`], [`Counters`]), the writers ([`save`]), the reader ([`TraceReader`]), the
//!   analyses ([`key_averages`]), and the helpers every omniprof crate shares ([`lock`],
//!   locking that ignores poisoning, and [`prefix_within`], cutting text on a character
//!   boundary).
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

pub mod backend;
pub mod clock;
pub mod config;
mod iteration;
pub mod ondemand;
pub mod perf;
mod perf_event;
pub mod plugin;
pub mod record;
pub mod session;
pub mod stubs;
#[cfg(unix)]
pub mod trigger;

// The trace model, its writers, reader and analyses, and the helpers every omniprof crate
// shares: one dependency gives a program the whole API.
pub use omniprof_trace::*;

pub use config::Config;
pub use iteration::step;
pub use record::{instant, record_function, record_op, Name, OwnedRange, RangeGuard};
pub use session::{
    tensorboard_trace_handler, Profiler, ProfilerAction, ProfilerBuilder, Schedule, ScheduleArgs,
    ScheduleError, SessionError, TraceDirHandler,
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
