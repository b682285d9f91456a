//! omniprof's trace model and everything that only reads or writes it.
//!
//! A [`Trace`] is what a profiling session produces and what the reader rebuilds from any
//! Kineto-compatible trace file (omniprof's or PyTorch's). Every writer and every analysis
//! reads the same model. This crate has no recorder, no device backends and no dynamic
//! loading: offline tools (`omniprof summary`) depend on it alone. Modules, in the order data
//! flows:
//!
//! - [`activity`]: activity types, classes and the [`Activity`] record;
//! - [`value`]: typed `args` and metadata values;
//! - [`trace`]: the trace model ([`Trace`], its capture [`Window`], rows, spans);
//! - [`counter`]: counter series, the one model of sampled numbers a trace carries;
//! - [`keys`]: the arg and metadata keys writers and readers share;
//! - [`report`]: the session report, what a session says about its trace (drops, backends'
//!   contributions, failures), typed;
//! - [`export`]: writers (Kineto-compatible Chrome JSON, native Perfetto) and the save that
//!   picks one by extension;
//! - [`import`]: the reader of Kineto Chrome JSON traces, plain or gzip;
//! - [`analysis`]: what a trace says (the key-averages summary);
//! - [`hash`]: the fast hasher of the small internal tables;
//! - [`sync`]: locking that ignores poisoning, for every omniprof crate;
//! - [`text`]: text cut to a size on a character boundary.
//!
//! ```
//! use omniprof_trace::{Activity, ActivityType, Trace};
//!
//! let mut trace = Trace::new(0, 2_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 100, 900));
//! assert_eq!(trace.window.duration_ns(), 2_000);
//! ```

pub mod activity;
pub mod analysis;
pub mod counter;
pub mod export;
pub mod hash;
pub mod import;
pub mod keys;
mod lane_tid;
pub mod report;
pub mod sync;
pub mod text;
pub mod trace;
pub mod value;

#[cfg(test)]
mod test_data;

pub use activity::{Activity, ActivityClass, ActivitySet, ActivityType, Flow, FlowKind};
pub use counter::{CounterSample, CounterSeries, CounterTrack, CounterValues, Counters};
pub use report::SessionReport;
pub use trace::{Trace, Window};
pub use value::Value;
