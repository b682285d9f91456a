//! [`TraceReader`]: the one way in, whole or streamed, from a path or any reader.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::document::read_document;
use super::error::ReadError;
use super::event::ArgFilter;
use super::item::{ReadStats, TraceItem};
use super::limits::Limits;
use crate::report::{MalformedEntry, SessionReport};
use crate::trace::{Trace, Window};

/// Reads Kineto Chrome JSON traces, plain or gzip: whole into a [`Trace`]
/// ([`read_path`](Self::read_path), [`read`](Self::read)) or streamed into a sink, one
/// [`TraceItem`] at a time, holding no trace ([`stream_path`](Self::stream_path),
/// [`stream`](Self::stream)). Reading from a path names the file in errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceReader {
    args: ArgFilter,
    limits: Limits,
}

/// What a whole read produced: the trace built from everything read, its stats, and the
/// error that stopped reading, if any (the trace then holds everything before it).
#[derive(Debug)]
#[must_use = "reading can fail: see `error`, or use `into_trace`"]
pub struct ReadOutcome {
    /// The trace built from everything read.
    pub trace: Trace,
    /// What was read and skipped.
    pub stats: ReadStats,
    /// What stopped the read, if anything.
    pub error: Option<ReadError>,
    /// Session report entries of the wrong shape (a foreign trace's), left out of
    /// [`Trace::report`] and logged as warnings; the read went on.
    pub report_problems: Vec<MalformedEntry>,
}

impl ReadOutcome {
    /// The trace when reading completed.
    pub fn into_trace(self) -> Result<Trace, ReadError> {
        self.into_result().map(|(trace, _)| trace)
    }

    /// The trace and its stats when reading completed.
    pub fn into_result(self) -> Result<(Trace, ReadStats), ReadError> {
        match self.error {
            None => Ok((self.trace, self.stats)),
            Some(e) => Err(e),
        }
    }
}

impl TraceReader {
    /// A reader that keeps every arg.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps only the args `filter` accepts: converting args is most of the time spent on an
    /// event, so a consumer that needs few reads several times faster.
    pub fn args(mut self, filter: ArgFilter) -> Self {
        self.args = filter;
        self
    }

    /// Reads with these [`Limits`] on one event and the header (by default
    /// [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Reads a trace file whole.
    pub fn read_path(&self, path: impl AsRef<Path>) -> ReadOutcome {
        let path = path.as_ref();
        let mut outcome = match File::open(path) {
            Ok(file) => self.read(file),
            Err(e) => ReadOutcome {
                trace: TraceAssembler::default().finish(),
                stats: ReadStats::default(),
                error: Some(ReadError::new(e.into())),
                report_problems: Vec::new(),
            },
        };
        outcome.error = outcome.error.map(|e| with_path(e, path));
        outcome
    }

    /// Reads a trace whole from `input`.
    pub fn read(&self, input: impl Read) -> ReadOutcome {
        let mut builder = TraceAssembler::default();
        let (stats, error) = read_document(input, &self.args, self.limits, &mut |item| {
            builder.add(item)
        });
        builder
            .trace
            .counters
            .count_dropped(stats.dropped_counter_values);
        let report_problems = std::mem::take(&mut builder.report_problems);
        ReadOutcome {
            trace: builder.finish(),
            stats,
            error,
            report_problems,
        }
    }

    /// Streams a trace file into `sink`; see [`stream`](Self::stream).
    pub fn stream_path(
        &self,
        path: impl AsRef<Path>,
        sink: impl FnMut(TraceItem),
    ) -> Result<ReadStats, ReadError> {
        let path = path.as_ref();
        File::open(path)
            .map_err(|e| ReadError::new(e.into()))
            .and_then(|file| self.stream(file, sink))
            .map_err(|e| with_path(e, path))
    }

    /// Streams a trace from `input` into `sink`, one [`TraceItem`] at a time, without holding
    /// it. On error, everything read before has already reached `sink`, including the rows
    /// and window when the error is inside `traceEvents`.
    pub fn stream(
        &self,
        input: impl Read,
        mut sink: impl FnMut(TraceItem),
    ) -> Result<ReadStats, ReadError> {
        match read_document(input, &self.args, self.limits, &mut sink) {
            (stats, None) => Ok(stats),
            (_, Some(e)) => Err(e),
        }
    }
}

fn with_path(mut e: ReadError, path: &Path) -> ReadError {
    e.location.path = Some(path.to_path_buf());
    e
}

/// Collects [`TraceItem`]s into a [`Trace`]. The streamed Perfetto writer collects a trace's
/// header, rows and spans with it, as a whole read would.
pub(crate) struct TraceAssembler {
    trace: Trace,
    window: Option<Window>,
    /// The session report's entries that were refused.
    report_problems: Vec<MalformedEntry>,
}

impl Default for TraceAssembler {
    fn default() -> Self {
        Self {
            // A file without `baseTimeNanoseconds` has base 0, not this process's base.
            trace: Trace {
                base_time_ns: 0,
                ..Trace::new(0, 0)
            },
            window: None,
            report_problems: Vec::new(),
        }
    }
}

impl TraceAssembler {
    pub(crate) fn add(&mut self, item: TraceItem) {
        let trace = &mut self.trace;
        match item {
            TraceItem::BaseTime(base) => {
                // Anything already here was timed with a base of 0 (the base came late).
                for a in &mut trace.activities {
                    a.start_ns = a.start_ns.saturating_add(base);
                    a.end_ns = a.end_ns.saturating_add(base);
                }
                trace.counters.shift(base);
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
            TraceItem::Metadata(key, value) if SessionReport::is_key(&key) => {
                if let Err(e) = trace.report.set(&key, &value) {
                    log::warn!("omniprof: {e}");
                    self.report_problems.push(e);
                }
            }
            TraceItem::Metadata(key, value) => trace.set_metadata(key, value),
            TraceItem::TraceName(name) => trace.trace_name = Some(name),
            TraceItem::Activity(a) => trace.activities.push(a),
            TraceItem::Counter(track, sample) => {
                trace.counters.add(&track, sample.ts_ns, sample.values);
            }
            TraceItem::Span(s) => trace.spans.push(s),
            TraceItem::Process(row) => trace.processes.push(row),
            TraceItem::Thread(row) => trace.threads.push(row),
            TraceItem::Window(window) => self.window = Some(window),
        }
    }

    pub(crate) fn finish(mut self) -> Trace {
        let base = self.trace.base_time_ns;
        self.trace.window = self.window.unwrap_or(Window::new(base, base));
        self.trace
    }
}
