//! Readers that rebuild a [`Trace`] from a Kineto-compatible Chrome JSON trace: omniprof's own
//! or PyTorch's, plain or gzip (detected by its magic bytes).
//!
//! Reading streams: the file is read in windows of some megabytes and each event is parsed on
//! its own, so memory stays bounded by a window or the largest single event ([`read_events`]
//! holds no trace at all). The events of a large file are parsed on every core, and a gzip
//! file is decompressed on a helper thread, with the same items, in the same order, and the
//! same errors as reading on one thread; the sink is only ever called on the calling thread.
//! Times are converted exactly from the text of `ts` and `dur` to nanoseconds since the Unix
//! epoch (`baseTimeNanoseconds` + `ts`). Events the model has no place for are skipped and
//! counted in [`ReadStats`]; malformed or truncated input is a [`ReadError`] that says where,
//! and what was read before it is still available ([`read_trace_partial`]).
//!
//! ```
//! use omniprof_trace::import::{read_events, read_trace_from, TraceItem};
//!
//! let json = r#"{"baseTimeNanoseconds": 1000000000, "traceEvents": [
//!   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7,
//!    "ts": 1.5, "dur": 2.25, "args": {"External id": 3}},
//!   {"ph": "X", "cat": "not_a_type", "name": "?", "pid": 7, "tid": 7, "ts": 2, "dur": 1}
//! ]}"#;
//! let trace = read_trace_from(json.as_bytes())?;
//! let op = &trace.activities[0];
//! assert_eq!((op.start_ns, op.end_ns, op.correlation), (1_000_001_500, 1_000_003_750, 3));
//!
//! // The same, streamed: nothing is kept but what the closure keeps.
//! let mut busy_ns = 0;
//! let stats = read_events(json.as_bytes(), |item| {
//!     if let TraceItem::Activity(a) = item {
//!         busy_ns += a.duration_ns();
//!     }
//! })?;
//! assert_eq!((busy_ns, stats.events, stats.unknown_category), (2_250, 2, 1));
//! # Ok::<(), omniprof_trace::import::ReadError>(())
//! ```
//!
//! How events map to the model (`reference/trace-format.md` describes the format):
//! - `X` → an [`Activity`] of the type named by `cat`; `cat` `Trace` → a [`Span`];
//! - `i` → an instant activity (start = end), except `Record Window End` (the window's end);
//! - `C` → a counter sample: numeric `args` become [`Activity::counters`];
//! - `M` → process and thread rows, merged per pid and per (pid, tid);
//! - `s` / `f` → the [`Flow`](crate::Flow) of the activity written just before on the same row
//!   and time;
//! - `args`: `External id` and `correlation` become [`Activity::correlation`] and
//!   [`Activity::linked_correlation`] (which one depends on the type, as the writer decides);
//!   the rest stay in [`Activity::args`] in file order.
//! - The `Spans` sort row and `Iteration Start` markers are dropped: writers regenerate them
//!   from the spans.
//!
//! Args, metadata (`distributedInfo` included) and `deviceProperties` entries are typed
//! [`Value`]s, as `Value`'s `Deserialize` reads any JSON: an integer that fits `i64` is an
//! `Int`, one that fits only `u64` a `UInt`, any other number the nearest `Float` (a number
//! beyond `f64`'s range is an error), `null` is `Null`, an object a `Map` in file order. The
//! reader never produces `Value::Json`. What the writer writes reads back equal (`Value`'s
//! equality compares numbers by value).
//!
//! An event the reader maps must have `pid`, `tid` and (except on row events) `ts`; a
//! missing `dur` is 0. Error offsets count bytes of the decompressed text.

mod document;
mod error;
mod event;
mod inflate;
mod mapper;
mod parallel;
mod scan;

use std::fs::File;
use std::io::Read;
use std::path::Path;

pub use error::{Location, Position, ReadError, ReadErrorKind};

use crate::activity::Activity;
use crate::trace::{ProcessRow, Span, ThreadRow, Trace, Window};
use crate::value::Value;

/// One piece of a trace, in the order the reader completes it.
///
/// Times are absolute nanoseconds: `baseTimeNanoseconds` plus the event's `ts`. Kineto and
/// omniprof write the base before `traceEvents`; should a file put it after, the items read
/// before [`TraceItem::BaseTime`] were computed with a base of 0, and the consumer adds the
/// base to them (as [`read_trace`] does).
#[derive(Clone, Debug, PartialEq)]
pub enum TraceItem {
    /// `baseTimeNanoseconds`.
    BaseTime(i64),
    /// `deviceProperties`: one value (a JSON object) per device.
    DeviceProperties(Vec<Value>),
    /// Any other top-level key (`trace_id`, `distributedInfo`, ...) with its value, in file
    /// order. `schemaVersion` and `displayTimeUnit` are not reported.
    Metadata(String, Value),
    /// `traceName`.
    TraceName(String),
    Activity(Activity),
    Span(Span),
    /// The rows come after the last event (their pieces may be spread over the file).
    Process(ProcessRow),
    Thread(ThreadRow),
    /// The capture window, last after the events: from the earliest row event (else the
    /// earliest activity) to `Record Window End` (else the latest activity end).
    Window(Window),
}

/// What was read, and what was skipped by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Elements of `traceEvents` read.
    pub events: u64,
    /// Synthetic events that writers regenerate from the spans (`Iteration Start` markers,
    /// the `Spans` sort row): dropped by design, not counted as skipped.
    pub regenerated: u64,
    /// Skipped: a `ph` other than `X`, `i`, `C`, `M`, `s`, `f`.
    pub unknown_phase: u64,
    /// Skipped: an `X`, `i` or `C` event whose `cat` is not an activity type.
    pub unknown_category: u64,
    /// Skipped: an `M` event that is not a process or thread row, or whose value has the
    /// wrong type.
    pub unknown_metadata: u64,
    /// Skipped: a `pid` or `tid` that is not an integer where the event needs one.
    pub unsupported_id: u64,
    /// Skipped: a flow event with no activity just before it on the same row and time, an
    /// unknown flow `cat`, or an `id` that is not a non-negative integer.
    pub unmatched_flow: u64,
}

impl ReadStats {
    /// Events skipped, all reasons together.
    pub fn skipped(&self) -> u64 {
        self.unknown_phase
            + self.unknown_category
            + self.unknown_metadata
            + self.unsupported_id
            + self.unmatched_flow
    }
}

/// The result of [`read_trace_partial`]: the trace built from everything read, and the error
/// that stopped reading, if any.
#[derive(Debug)]
pub struct PartialTrace {
    pub trace: Trace,
    pub stats: ReadStats,
    pub error: Option<ReadError>,
}

impl PartialTrace {
    /// The trace and its stats when reading completed.
    pub fn into_result(self) -> Result<(Trace, ReadStats), ReadError> {
        match self.error {
            None => Ok((self.trace, self.stats)),
            Some(e) => Err(e),
        }
    }
}

/// Reads a trace file (plain or gzip).
pub fn read_trace(path: &Path) -> Result<Trace, ReadError> {
    read_trace_with_stats(path).map(|(trace, _)| trace)
}

/// Reads a trace file, with what was skipped.
pub fn read_trace_with_stats(path: &Path) -> Result<(Trace, ReadStats), ReadError> {
    read_trace_partial(path).into_result()
}

/// Reads a trace file as far as it can: on error, the trace holds everything before it.
pub fn read_trace_partial(path: &Path) -> PartialTrace {
    let mut builder = TraceBuilder::default();
    let (stats, error) = match File::open(path) {
        Ok(file) => {
            document::read_document(file, &ReadOptions::default(), &mut |item| builder.add(item))
        }
        Err(e) => (ReadStats::default(), Some(ReadError::new(e.into()))),
    };
    PartialTrace {
        trace: builder.finish(),
        stats,
        error: error.map(|e| with_path(e, path)),
    }
}

/// Reads a trace (plain or gzip) from any reader; see [`read_trace`].
pub fn read_trace_from<R: Read>(reader: R) -> Result<Trace, ReadError> {
    let mut builder = TraceBuilder::default();
    match document::read_document(reader, &ReadOptions::default(), &mut |item| {
        builder.add(item)
    }) {
        (_, None) => Ok(builder.finish()),
        (_, Some(e)) => Err(e),
    }
}

/// Streams a trace (plain or gzip) into `sink`, one [`TraceItem`] at a time, without holding
/// it. On error, everything read before has already reached `sink`, including the rows and
/// window when the error is inside `traceEvents`.
pub fn read_events<R: Read>(
    reader: R,
    sink: impl FnMut(TraceItem),
) -> Result<ReadStats, ReadError> {
    read_events_with(reader, &ReadOptions::default(), sink)
}

/// [`read_events`] with [options](ReadOptions): e.g. only the args the consumer uses, which
/// saves most of the time spent on an event.
///
/// ```
/// use omniprof_trace::import::{read_events_with, ArgFilter, ReadOptions, TraceItem};
///
/// let json = r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
///   "pid": 7, "tid": 7, "ts": 1, "dur": 2,
///   "args": {"External id": 3, "Input Dims": [[2, 2]], "Input type": ["float"]}}]}"#;
/// let options = ReadOptions { args: ArgFilter::Only(vec!["Input Dims".into()]) };
/// read_events_with(json.as_bytes(), &options, |item| {
///     if let TraceItem::Activity(a) = item {
///         assert_eq!(a.correlation, 3);
///         assert_eq!(a.args.len(), 1);
///         assert!(a.arg("Input Dims").is_some());
///     }
/// })?;
/// # Ok::<(), omniprof_trace::import::ReadError>(())
/// ```
pub fn read_events_with<R: Read>(
    reader: R,
    options: &ReadOptions,
    mut sink: impl FnMut(TraceItem),
) -> Result<ReadStats, ReadError> {
    match document::read_document(reader, options, &mut sink) {
        (stats, None) => Ok(stats),
        (_, Some(e)) => Err(e),
    }
}

/// How to read a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Which `args` activities keep.
    pub args: ArgFilter,
}

/// Which `args` the reader keeps in [`Activity::args`]. `External id` and `correlation` are
/// always read (into [`Activity::correlation`] and [`Activity::linked_correlation`]), and
/// counter events keep every arg (their numbers are the samples).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ArgFilter {
    /// Every arg.
    #[default]
    All,
    /// Only these keys; the values of the others are skipped without being converted.
    Only(Vec<String>),
}

impl ArgFilter {
    /// Whether an arg with this key is kept.
    pub fn keeps(&self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(keys) => keys.iter().any(|k| k == key),
        }
    }
}

/// [`read_events`] on a file; errors name the file.
pub fn read_events_from_path(
    path: &Path,
    sink: impl FnMut(TraceItem),
) -> Result<ReadStats, ReadError> {
    let file = File::open(path).map_err(|e| with_path(ReadError::new(e.into()), path))?;
    read_events(file, sink).map_err(|e| with_path(e, path))
}

fn with_path(mut e: ReadError, path: &Path) -> ReadError {
    e.location.path = Some(path.to_path_buf());
    e
}

/// Collects [`TraceItem`]s into a [`Trace`].
struct TraceBuilder {
    trace: Trace,
    window: Option<Window>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        Self {
            // A file without `baseTimeNanoseconds` has base 0, not this process's base.
            trace: Trace {
                base_time_ns: 0,
                ..Trace::new(0, 0)
            },
            window: None,
        }
    }
}

impl TraceBuilder {
    fn add(&mut self, item: TraceItem) {
        let trace = &mut self.trace;
        match item {
            TraceItem::BaseTime(base) => {
                // Anything already here was timed with a base of 0 (the base came late).
                for a in &mut trace.activities {
                    a.start_ns = a.start_ns.saturating_add(base);
                    a.end_ns = a.end_ns.saturating_add(base);
                }
                for s in &mut trace.spans {
                    s.start_ns = s.start_ns.saturating_add(base);
                    s.end_ns = s.end_ns.saturating_add(base);
                }
                if let Some(window) = &mut self.window {
                    window.start_ns = window.start_ns.saturating_add(base);
                    window.end_ns = window.end_ns.saturating_add(base);
                }
                trace.base_time_ns = base;
            }
            TraceItem::DeviceProperties(devices) => trace.device_properties = devices,
            TraceItem::Metadata(key, value) => trace.set_metadata(key, value),
            TraceItem::TraceName(name) => trace.trace_name = Some(name),
            TraceItem::Activity(a) => trace.activities.push(a),
            TraceItem::Span(s) => trace.spans.push(s),
            TraceItem::Process(row) => trace.processes.push(row),
            TraceItem::Thread(row) => trace.threads.push(row),
            TraceItem::Window(window) => self.window = Some(window),
        }
    }

    fn finish(mut self) -> Trace {
        let base = self.trace.base_time_ns;
        self.trace.window = self.window.unwrap_or(Window::new(base, base));
        self.trace
    }
}

#[cfg(test)]
mod tests;
