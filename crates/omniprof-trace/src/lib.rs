//! omniprof's trace model and its writers: what a profiling session needs to produce and
//! save a trace.
//!
//! A [`Trace`] is what a profiling session produces and what the reader (`omniprof-read`)
//! rebuilds from any Kineto-compatible trace file (omniprof's or PyTorch's). Every writer and
//! every analysis (`omniprof-analysis`) reads the same model. This crate has no recorder, no
//! device backends, no reader and no analysis. Its items, in the order data flows:
//!
//! **The model.** A [`Trace`] holds its capture [`Window`], the [`Activity`] records (each of
//! an [`ActivityType`], grouped by [`ActivityClass`] and chosen by [`ActivitySet`], linked by
//! [`Flow`]s), process and thread rows ([`ProcessRow`], [`ThreadRow`]), [`Span`]s, typed
//! [`Value`] args and metadata, and [`Counters`] (series of [`CounterSample`]s on a
//! [`CounterTrack`]). [`process_base_time_ns`] is the time base a trace's timestamps count
//! from. The arg and metadata names writers and readers share are the constants of [`keys`];
//! how a format lays out what it has no place for (lanes, Perfetto's device pids) is
//! [`layout`]'s. A trace also comes item by item ([`TraceItem`]), as a reader delivers it and
//! a streaming writer takes it; a [`TraceAssembler`] collects the items into a [`Trace`].
//!
//! **The session health.** [`SessionHealth`] is what a session says about its trace: drops,
//! each backend's [`Contribution`], [`BackendFailure`]s and [`BackendWarning`]s, the
//! [`UnavailablePerfEvent`]s and the [`ScopeProfiling`], typed, and written in the header
//! under the keys it always had.
//!
//! **Writing.** [`save()`] writes the format a path's extension names ([`Format`]): Chrome JSON
//! ([`write_chrome`], or [`ChromeStream`] to write while recording) or Perfetto protobuf
//! ([`write_perfetto`]), through [`save_with`], which neither corrupts nor clobbers what is
//! at the path; [`WriteStats`] says what was written, [`WriteError`] what went wrong. What
//! the JSON writers write stays within the reader's default [`Limits`].
//!
//! **Shared helpers.** [`lock`] and its siblings lock while ignoring poisoning, for every
//! omniprof crate; [`prefix_within`] cuts text on a character boundary; [`FastMap`] is the
//! fast map of the small internal tables.
//!
//! ```
//! use omniprof_trace::{Activity, ActivityType, Trace};
//!
//! let mut trace = Trace::new(0, 2_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 100, 900));
//! assert_eq!(trace.window.duration_ns(), 2_000);
//! ```

#![warn(unnameable_types)]

mod activity;
mod counter;
mod export;
mod hash;
mod health;
mod item;
pub mod keys;
pub mod layout;
mod limits;
mod sync;
mod text;
mod trace;
mod value;

// The model.
pub use activity::{
    Activity, ActivityClass, ActivitySet, ActivityType, Flow, FlowKind, UnknownActivityType,
};
pub use counter::{CounterSample, CounterSeries, CounterTrack, CounterValues, Counters};
pub use trace::{process_base_time_ns, ProcessRow, Span, ThreadRow, Trace, Window};
pub use value::{BoundedValue, FromJsonError, Value, MAX_VALUE_DEPTH};

// The session health.
pub use health::{
    BackendCall, BackendFailure, BackendWarning, Contribution, FailureKind, MalformedEntry,
    ScopeProfiling, SessionHealth, UnavailablePerfEvent, WarningKind, MAX_EVENTS_KEY,
};

// Writing.
pub use export::chrome::{write_chrome, ChromeStream};
pub use export::perfetto::{write_perfetto, PerfettoLayout, PerfettoStream, PerfettoSurvey};
#[cfg(unix)]
pub use export::save::save_in_with;
pub use export::save::{check_output_dir, save_with, WriteError};
#[cfg(unix)]
pub use export::save_in;
pub use export::{
    save, save_as, save_perfetto_streamed, save_streamed, Format, NeedsWholeTrace, UnknownFormat,
    WriteStats,
};

// Item by item.
pub use item::{TraceAssembler, TraceItem};
pub use limits::Limits;

// Helpers every omniprof crate shares.
pub use hash::{cache_slot, FastHasher, FastMap};
pub use sync::{lock, read_lock, wait, wait_timeout, wait_timeout_while, wait_while, write_lock};
pub use text::prefix_within;
