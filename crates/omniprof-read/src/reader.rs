//! [`TraceReader`]: the one way in, whole or streamed, from a path or any reader.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::document::read_document;
use super::error::ReadError;
use super::event::ArgFilter;
use super::stats::ReadStats;
use omniprof_trace::{Limits, MalformedEntry, Trace, TraceAssembler, TraceItem};

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
    /// Session health entries of the wrong shape (a foreign trace's), left out of
    /// [`Trace::health`] and logged as warnings; the read went on.
    pub health_problems: Vec<MalformedEntry>,
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
    /// [`Limits::default`]); a larger one stops the read with [`ReadErrorKind::TooLarge`](crate::ReadErrorKind::TooLarge) at
    /// the byte offset where it starts.
    ///
    /// ```
    /// use omniprof_read::TraceReader;
    /// use omniprof_trace::Limits;
    ///
    /// let strict = TraceReader::new().limits(Limits { event_bytes: 4096, ..Limits::default() });
    /// let long_name = format!(
    ///     r#"{{"traceEvents": [{{"ph": "i", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": 1, "ts": 0}}]}}"#,
    ///     "x".repeat(5000)
    /// );
    /// let err = strict.read(long_name.as_bytes()).into_trace().unwrap_err();
    /// assert!(err.to_string().contains("larger than the limit of 4096 bytes"), "{err}");
    /// ```
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
                trace: TraceAssembler::default().finish().0,
                stats: ReadStats::default(),
                error: Some(ReadError::new(e.into())),
                health_problems: Vec::new(),
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
        let (mut trace, health_problems) = builder.finish();
        trace.counters.count_dropped(stats.dropped_counter_values);
        ReadOutcome {
            trace,
            stats,
            error,
            health_problems,
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
