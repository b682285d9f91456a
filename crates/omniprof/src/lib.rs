//! omniprof: a device-agnostic activity profiler.
//!
//! Host threads record ops and named ranges into per-thread buffers ([`record`]); a
//! [`Profiler`] session drives the recording and turns it into one [`Trace`], which the
//! writers in [`export`] save as Kineto-compatible Chrome JSON and the reader in [`import`]
//! rebuilds from any Kineto trace. Modules, in the order data flows:
//!
//! - [`activity`]: activity types, classes and the [`Activity`] record;
//! - [`config`]: Kineto `KEY=VALUE` configuration;
//! - [`backend`]: the accelerator backend traits and their registry;
//! - [`plugin`]: dynamic `.so` plugins with Kineto's plugin C ABI;
//! - [`stubs`]: the legacy profiler stubs (per-op device time without a timeline), which
//!   reach the engine as a backend;
//! - [`clock`]: the recording clock and its calibration;
//! - [`record`]: the host recorder (`record_function`, `scope!`, instants);
//! - [`session`]: the session engine (prepare → start → stop) and the merge of the host
//!   recording and every backend's output into one trace;
//! - `trigger` (Unix): the socket through which `omniprof trigger` asks a running process
//!   for an on-demand trace;
//! - [`trace`]: the trace model;
//! - [`export`], [`import`]: writers and readers;
//! - [`analysis`]: what a trace says (the key-averages summary).
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
pub mod plugin;
pub mod record;
pub mod session;
pub mod stubs;
#[cfg(unix)]
pub mod trigger;

use omniprof_trace::hash;
pub use omniprof_trace::{activity, analysis, export, import, trace, value};

pub use activity::{Activity, ActivityClass, ActivitySet, ActivityType, Flow, FlowKind};
pub use config::Config;
pub use record::{instant, record_function, record_op, Name, RangeGuard};
pub use session::{Profiler, ProfilerBuilder, SessionError};
pub use trace::{Trace, Window};
pub use value::Value;
