//! omniprof's trace model and everything that only reads or writes it.
//!
//! A [`Trace`] is what a profiling session produces and what the reader rebuilds from any
//! Kineto-compatible trace file (omniprof's or PyTorch's). Every writer and every analysis
//! reads the same model. This crate has no recorder, no device backends and no dynamic
//! loading: offline tools (`omniprof summary`) depend on it alone. Its items, in the order
//! data flows:
//!
//! **The model.** A [`Trace`] holds its capture [`Window`], the [`Activity`] records (each of
//! an [`ActivityType`], grouped by [`ActivityClass`] and chosen by [`ActivitySet`], linked by
//! [`Flow`]s), process and thread rows ([`ProcessRow`], [`ThreadRow`]), [`Span`]s, typed
//! [`Value`] args and metadata, and [`Counters`] (series of [`CounterSample`]s on a
//! [`CounterTrack`]). [`process_base_time_ns`] is the time base a trace's timestamps count
//! from. The arg and metadata names writers and readers share are the constants of [`keys`].
//!
//! **The session report.** [`SessionReport`] is what a session says about its trace: drops,
//! each backend's [`Contribution`], [`BackendFailure`]s and [`BackendWarning`]s, typed, and
//! written in the header under the keys it always had.
//!
//! **Writing.** [`save`] writes the format a path's extension names ([`Format`]): Chrome JSON
//! ([`write_chrome`], or [`ChromeStream`] to write while recording) or Perfetto protobuf
//! ([`write_perfetto`]), through [`save_with`], which neither corrupts nor clobbers what is
//! at the path; [`WriteStats`] says what was written, [`WriteError`] what went wrong.
//!
//! **Reading.** A [`TraceReader`] rebuilds a trace from any Kineto-compatible file
//! (omniprof's, PyTorch's; plain, gzip or `.pftrace`), whole or streamed as [`TraceItem`]s,
//! within [`Limits`]; bad input is a [`ReadError`] that says where, and [`ReadStats`] counts
//! what was skipped.
//!
//! **Analyses.** [`key_averages`] is PyTorch's `key_averages()` ([`KeyAverages`], its
//! [`Row`]s and their [`table`](KeyAverages::table), streamed by a [`KeyAveragesBuilder`]),
//! [`function_events`] its events one by one; beside it, [`diff()`] of two summaries,
//! [`folded_stacks`] for flame graphs, [`python_stacks`], [`kernel_metrics`],
//! [`counter_stats`], [`StepTimes`], a [`MemoryCurve`], a job's ranks side by side
//! ([`RanksReport`]) and the HTML report's [`ReportModel`].
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
mod analysis;
mod counter;
mod export;
mod hash;
mod import;
pub mod keys;
mod lane_tid;
mod report;
mod sync;
mod text;
mod trace;
mod value;

#[cfg(test)]
mod test_data;
// `test_data` names this crate's items as the integration tests that include it do.
#[cfg(test)]
extern crate self as omniprof_trace;

// The model.
pub use activity::{
    Activity, ActivityClass, ActivitySet, ActivityType, Flow, FlowKind, UnknownActivityType,
};
pub use counter::{CounterSample, CounterSeries, CounterTrack, CounterValues, Counters};
pub use trace::{process_base_time_ns, ProcessRow, Span, ThreadRow, Trace, Window};
pub use value::{FromJsonError, Value, MAX_VALUE_DEPTH};

// The session report.
pub use report::{
    BackendCall, BackendFailure, BackendWarning, Contribution, FailureKind, MalformedEntry,
    SessionReport, WarningKind, MAX_EVENTS_KEY,
};

// Writing.
pub use export::chrome::{write_chrome, ChromeStream, NeedsWholeTrace};
pub use export::perfetto::{write_perfetto, PerfettoLayout, PerfettoStream, PerfettoSurvey};
#[cfg(unix)]
pub use export::save::save_in_with;
pub use export::save::{save_with, WriteError};
#[cfg(unix)]
pub use export::save_in;
pub use export::{save, save_perfetto_streamed, save_streamed, Format, UnknownFormat, WriteStats};

// Reading.
pub use import::{
    ArgFilter, Limits, Location, Position, ReadError, ReadErrorKind, ReadOutcome, ReadStats,
    TraceItem, TraceReader,
};

// Analyses.
pub use analysis::counters::{counter_stats, CounterStats, CounterSummary};
pub use analysis::diff::{diff, Change, DiffRow, Pair, TraceDiff};
pub use analysis::flamegraph::{folded_stacks, FlameBuilder, FlameTime, FoldedStacks};
pub use analysis::frame_tree::MAX_STACK_DEPTH;
pub use analysis::memory_curve::{MemoryCurve, MemoryCurveBuilder, MemoryPoint};
pub use analysis::metrics::{
    kernel_metrics, KernelMetrics, KernelMetricsBuilder, KernelMetricsRow, MetricStats,
};
pub use analysis::ranks::{
    claimed_rank, Breakdown, RankProfile, RankProfileBuilder, RankTrace, RanksReport, Source, Step,
    StepRow, Straggler, WorkKind,
};
pub use analysis::report::{
    CounterLine, KernelTimes, ReportInput, ReportModel, TraceEntry, TraceParts, TraceReportBuilder,
};
pub use analysis::stacks::{python_stacks, PythonStacks, Stack, StackMetric, UnknownStackMetric};
pub use analysis::step_time::{StepTime, StepTimeBuilder, StepTimes};
pub use analysis::{
    function_events, key_averages, FunctionEvent, FunctionEvents, KeyAverages, KeyAveragesBuilder,
    KeyAveragesOptions, OutOfOrder, ReadAgain, ReportOptions, Row, SortKey, SummedEvent,
    UnknownSortKey,
};

// Helpers every omniprof crate shares.
pub use hash::{FastHasher, FastMap};
pub use sync::{lock, read_lock, wait, wait_timeout, wait_timeout_while, wait_while, write_lock};
pub use text::prefix_within;
