//! omniprof's trace reader: it rebuilds a [`Trace`](omniprof_trace::Trace) from a
//! Kineto-compatible Chrome JSON trace: omniprof's own or PyTorch's, plain or gzip (detected by its magic bytes), or from
//! a Perfetto protobuf trace (told by its first bytes; see `pftrace` for how it maps). One
//! [`TraceReader`], with its options, reads a path or any [`Read`](std::io::Read), whole or
//! streamed into a sink.
//!
//! Reading streams: the file is read in windows of some megabytes and each event is parsed on
//! its own, so memory stays bounded by a window or the largest single event (a streamed read
//! holds no trace at all); an event or a header larger than the reader's [`Limits`](omniprof_trace::Limits) stops the
//! read at its offset, so that no input makes memory grow with the file. The events of a large file are parsed on every core, and a gzip
//! file is decompressed on a helper thread, with the same items, in the same order, and the
//! same errors as reading on one thread; the sink is only ever called on the calling thread.
//! Times are converted exactly from the text of `ts` and `dur` to nanoseconds since the Unix
//! epoch (`baseTimeNanoseconds` + `ts`). Events the model has no place for are skipped and
//! counted in [`ReadStats`]; malformed or truncated input is a [`ReadError`] that says where,
//! and what was read before it is still available ([`ReadOutcome`]).
//!
//! ```
//! use omniprof_read::{ArgFilter, TraceReader};
//! use omniprof_trace::TraceItem;
//!
//! let json = r#"{"baseTimeNanoseconds": 1000000000, "traceEvents": [
//!   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7,
//!    "ts": 1.5, "dur": 2.25, "args": {"External id": 3}},
//!   {"ph": "X", "cat": "not_a_type", "name": "?", "pid": 7, "tid": 7, "ts": 2, "dur": 1}
//! ]}"#;
//! // Whole (`read_path("x.pt.trace.json")` for a file); `into_result` also gives the stats.
//! let trace = TraceReader::new().read(json.as_bytes()).into_trace()?;
//! let op = &trace.activities[0];
//! assert_eq!((op.start_ns, op.end_ns, op.correlation), (1_000_001_500, 1_000_003_750, 3));
//!
//! // The same, streamed (`stream_path` for a file): nothing is kept but what the closure
//! // keeps, and here only the args it names are converted.
//! let mut busy_ns = 0;
//! let stats = TraceReader::new()
//!     .args(ArgFilter::Only(vec!["Input Dims".into()]))
//!     .stream(json.as_bytes(), |item| {
//!         if let TraceItem::Activity(a) = item {
//!             busy_ns += a.duration_ns();
//!         }
//!     })?;
//! assert_eq!((busy_ns, stats.events, stats.unknown_category), (2_250, 2, 1));
//! # Ok::<(), omniprof_read::ReadError>(())
//! ```
//!
//! How events map to the model (`docs/trace-format.md` describes the format):
//! - `X` → an [`Activity`](omniprof_trace::Activity) of the type named by `cat`; `cat` `Trace` → a
//!   [`Span`](omniprof_trace::Span);
//! - `i` → an instant activity (start = end), except `Record Window End` (the window's end);
//! - `C` → a sample of the counter series `(cat, pid, tid, name)` in
//!   [`Trace::counters`](omniprof_trace::Trace::counters): its numeric `args` are the values (others
//!   are dropped and counted in [`ReadStats::dropped_counter_values`]);
//! - `M` → process and thread rows, merged per pid and per (pid, tid);
//! - `s` / `f` → the [`Flow`](omniprof_trace::Flow) of the activity of the same row that starts at the
//!   event's time, written before or after it within 4,096 events (one end per activity; a
//!   flow id may have several `f` ends, each on its own activity);
//! - `args`: `External id` and `correlation` become
//!   [`Activity::correlation`](omniprof_trace::Activity::correlation) and
//!   [`Activity::linked_correlation`](omniprof_trace::Activity::linked_correlation) (which one depends
//!   on the type, as the writer decides); the rest stay in
//!   [`Activity::args`](omniprof_trace::Activity::args) in file order.
//! - The `Spans` sort row and `Iteration Start` markers are dropped: writers regenerate them
//!   from the spans.
//!
//! Args, metadata (`distributedInfo` included) and `deviceProperties` entries are typed
//! [`Value`](omniprof_trace::Value)s, as `Value`'s `Deserialize` reads any JSON: an integer that fits
//! `i64` is an `Int`, one that fits only `u64` a `UInt`, any other number the nearest `Float`
//! (a number beyond `f64`'s range is an error), `null` is `Null`, an object a `Map` in file
//! order. What the writer writes reads back equal
//! (`Value`'s equality compares numbers by value).
//!
//! An event the reader maps must have `pid`, `tid` and (except on row events) `ts`; a
//! missing `dur` is 0. Error offsets count bytes of the decompressed text.

mod document;
mod error;
mod event;
mod inflate;
mod mapper;
mod one_pass;
mod parallel;
mod pftrace;
mod reader;
mod scan;
mod stats;

pub use error::{Location, Position, ReadError, ReadErrorKind};
pub use event::ArgFilter;
pub use pftrace::{
    ENDED_HELD, FLOWS_HELD, INTERNED_BYTES_HELD, INTERNED_ENTRY_BYTES, OPEN_HELD, SEQUENCES_HELD,
    TRACKS_HELD,
};
pub use reader::{ReadOutcome, TraceReader};
pub use stats::ReadStats;

#[cfg(test)]
mod tests;
