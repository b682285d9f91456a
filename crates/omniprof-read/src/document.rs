//! The outer structure of a trace: gzip detection, the top-level object, its header keys and
//! the `traceEvents` array, walked with the [`Scanner`] so that nothing larger than one value
//! (or, for the events, one [window](super::parallel) of them) is ever parsed at once.

use std::io::{self, Cursor, Read};
use std::thread;

use flate2::read::MultiGzDecoder;
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::error::{Position, ReadError, ReadErrorKind};
use super::event::{ArgFilter, RawEvent, Str};
use super::inflate::Inflating;
use super::mapper::{EventError, EventMapper};
use super::one_pass::read_event;
use super::parallel::{Parallel, Tuning};
use super::pftrace;
use super::scan::{Limit, Scanner};
use super::stats::ReadStats;
use omniprof_trace::Limits;
use omniprof_trace::TraceItem;
use omniprof_trace::Value;

/// Reads a whole document into `sink`. On error the items read so far have been delivered,
/// including the rows and window when the error is inside `traceEvents`.
pub(super) fn read_document<R: Read>(
    input: R,
    args: &ArgFilter,
    limits: Limits,
    sink: &mut impl FnMut(TraceItem),
) -> (ReadStats, Option<ReadError>) {
    read_document_tuned(input, args, limits, &Tuning::default(), sink)
}

/// [`read_document`], sharing the events out as `tuning` says (and decompressing on a
/// helper thread when it allows more than one).
pub(super) fn read_document_tuned<R: Read>(
    input: R,
    args: &ArgFilter,
    limits: Limits,
    tuning: &Tuning,
    sink: &mut impl FnMut(TraceItem),
) -> (ReadStats, Option<ReadError>) {
    // Enough to tell JSON from a Perfetto trace (see `pftrace::is_pftrace`).
    let (first, input) = match peek(input, 64) {
        Ok(peeked) => peeked,
        Err(e) => return (ReadStats::default(), Some(ReadError::new(e.into()))),
    };
    if !first.starts_with(&[0x1f, 0x8b]) {
        read_any(&first, input, args, limits, tuning, sink)
    } else if tuning.threads > 1 {
        thread::scope(|scope| {
            read_inflated(Inflating::start(scope, input), args, limits, tuning, sink)
        })
    } else {
        // `MultiGzDecoder` (as the helper thread's) because a `.gz` file may hold several
        // concatenated members.
        read_inflated(MultiGzDecoder::new(input), args, limits, tuning, sink)
    }
}

/// Reads a decompressed input, peeking at its start as a first read of the text would read
/// it (so that an input failing after a few bytes fails at the same byte either way).
fn read_inflated(
    input: impl Read,
    args: &ArgFilter,
    limits: Limits,
    tuning: &Tuning,
    sink: &mut impl FnMut(TraceItem),
) -> (ReadStats, Option<ReadError>) {
    match peek(input, 1 << 16) {
        Ok((first, input)) => read_any(&first, input, args, limits, tuning, sink),
        Err(e) => {
            let start = Position {
                offset: 0,
                line: 1,
                column: 1,
            };
            (ReadStats::default(), Some(ReadError::at(start, e.into())))
        }
    }
}

/// Reads an input whose first bytes are `first`: a Perfetto protobuf trace, told by them
/// ([`pftrace::is_pftrace`]), or else JSON text.
fn read_any(
    first: &[u8],
    input: impl Read,
    args: &ArgFilter,
    limits: Limits,
    tuning: &Tuning,
    sink: &mut impl FnMut(TraceItem),
) -> (ReadStats, Option<ReadError>) {
    if first.is_empty() {
        // Said plainly: neither reader's "expected ..." fits a file with nothing in it.
        let start = Position {
            offset: 0,
            line: 1,
            column: 1,
        };
        let why = "the input is empty: neither a JSON nor a Perfetto trace".to_string();
        let e = ReadError::at(start, ReadErrorKind::Invalid(why));
        (ReadStats::default(), Some(e))
    } else if pftrace::is_pftrace(first) {
        pftrace::read_pftrace(input, args, limits, sink)
    } else {
        read_text(input, args, limits, tuning, sink)
    }
}

/// The input with the bytes read to detect its kind put back in front.
type Restored<R> = io::Chain<Cursor<Vec<u8>>, R>;

/// The input's first bytes, and the whole input: at least 2 (unless it is shorter), read in
/// as few reads as that takes, into room for `room`.
fn peek<R: Read>(mut input: R, room: usize) -> io::Result<(Vec<u8>, Restored<R>)> {
    let mut first = vec![0u8; room.max(2)];
    let mut len = 0;
    while len < 2 {
        match input.read(&mut first[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // What was read is the text's; the reader meets the error again after it.
            Err(_) if len > 0 => break,
            Err(e) => return Err(e),
        }
    }
    first.truncate(len);
    Ok((first.clone(), Cursor::new(first).chain(input)))
}

/// Reads the document's text.
fn read_text(
    text: impl Read,
    args: &ArgFilter,
    limits: Limits,
    tuning: &Tuning,
    sink: &mut impl FnMut(TraceItem),
) -> (ReadStats, Option<ReadError>) {
    let mut mapper = EventMapper::new(args.clone());
    mapper.converter.max_event_bytes = limits.event_bytes;
    let parallel = (tuning.threads > 1).then(|| Parallel::new(tuning.clone(), &mapper.converter));
    let mut doc = Document {
        scan: Scanner::new(text),
        mapper,
        parallel,
        parallel_from: 0,
        key: None,
        event: None,
        event_limit: Limit {
            bytes: limits.event_bytes,
            total: limits.event_bytes,
            of: "one event",
        },
        header_limit: limits.header_bytes,
        header_left: limits.header_bytes,
        seen_base: false,
        seen_events: false,
    };
    let error = doc.document(sink).err().map(|mut e| {
        if doc.event.is_some() {
            doc.mapper.finish(sink);
        }
        e.location.key = doc.key.take();
        e.location.event = doc.event;
        e
    });
    (doc.mapper.stats, error)
}

/// Whether an events array must end with `]`: in a trace object it must; a bare array may
/// stop after any event, as the format allows (a tracer appends to it until it is killed).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    Required,
    Optional,
}

struct Document<R> {
    scan: Scanner<R>,
    mapper: EventMapper,
    /// Set when events are read on several threads.
    parallel: Option<Parallel>,
    /// The input offset before which events are read sequentially: the end of a window
    /// whose parallel reading stopped early, at an event only the sequential reader could
    /// read, so that a run of such events does not start threads for each one.
    parallel_from: u64,
    /// The key whose value is being read, and the event index inside `traceEvents`: the
    /// context added to errors.
    key: Option<String>,
    event: Option<u64>,
    event_limit: Limit,
    /// What the header may take, and what it may still take.
    header_limit: usize,
    header_left: usize,
    seen_base: bool,
    seen_events: bool,
}

/// Where in a parsed slice serde_json failed, and why.
struct SliceError {
    offset: usize,
    kind: ReadErrorKind,
}

/// Parses one complete value. serde_json reports a line and column within the slice; they
/// are turned back into an offset so the caller can place the error in the file.
fn parse<'a, T: Deserialize<'a>>(text: &'a [u8]) -> Result<T, SliceError> {
    serde_json::from_slice(text).map_err(|e| {
        let line_start = match e.line() {
            0 | 1 => 0,
            line => text
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'\n')
                .nth(line - 2)
                .map_or(text.len(), |(i, _)| i + 1),
        };
        let offset = (line_start + e.column().saturating_sub(1)).min(text.len());
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = message
            .strip_suffix(&suffix)
            .unwrap_or(&message)
            .to_string();
        let kind = match e.classify() {
            serde_json::error::Category::Data => ReadErrorKind::Invalid(message),
            _ => ReadErrorKind::Syntax(message),
        };
        SliceError { offset, kind }
    })
}

impl<R: Read> Document<R> {
    fn located(&self, offset: u64, e: SliceError) -> ReadError {
        ReadError::at(self.scan.position(offset + e.offset as u64), e.kind)
    }

    /// The next top-level key or value, counted against the header's limit.
    fn header_text(&mut self, expected: &str) -> Result<(u64, &[u8]), ReadError> {
        let limit = Limit {
            bytes: self.header_left,
            total: self.header_limit,
            of: "the header",
        };
        let (offset, text) = self.scan.value(expected, limit)?;
        self.header_left -= text.len();
        Ok((offset, text))
    }

    fn document(&mut self, sink: &mut impl FnMut(TraceItem)) -> Result<(), ReadError> {
        if self.scan.peek()? == Some(b'[') {
            // The Chrome trace format's other form: the events alone, in a bare array.
            self.key = Some("traceEvents".to_owned());
            self.seen_events = true;
            self.events(sink, Close::Optional)?;
            self.key = None;
            return self.end();
        }
        self.scan.expect(b'{', "`{` or `[` opening the trace")?;
        if self.scan.peek()? == Some(b'}') {
            self.scan.bump();
        } else {
            loop {
                self.entry(sink)?;
                match self.scan.peek()? {
                    Some(b',') => self.scan.bump(),
                    Some(b'}') => {
                        self.scan.bump();
                        break;
                    }
                    Some(other) => return Err(self.scan.unexpected(other, "`,` or `}`")),
                    None => return Err(self.scan.truncated("`,` or `}`")),
                }
            }
        }
        self.end()
    }

    /// Nothing but whitespace may follow the trace.
    fn end(&mut self) -> Result<(), ReadError> {
        match self.scan.peek()? {
            None => Ok(()),
            Some(other) => Err(self.scan.unexpected(other, "the end of the input")),
        }
    }

    /// One `"key": value` of the top-level object.
    fn entry(&mut self, sink: &mut impl FnMut(TraceItem)) -> Result<(), ReadError> {
        match self.scan.peek()? {
            Some(b'"') => {}
            Some(other) => return Err(self.scan.unexpected(other, "a key")),
            None => return Err(self.scan.truncated("a key")),
        }
        let (offset, text) = self.header_text("a key")?;
        let key = match parse::<Str>(text) {
            Ok(key) => key.to_string(),
            Err(e) => return Err(self.located(offset, e)),
        };
        self.scan.expect(b':', "`:`")?;
        self.key = Some(key);
        self.header_value(sink)?;
        self.key = None;
        Ok(())
    }

    fn duplicate(&self, key: &str) -> ReadError {
        ReadError::at(
            self.scan.position(self.scan.offset()),
            ReadErrorKind::Invalid(format!("duplicate key {key:?}")),
        )
    }

    /// The value of the current key, delivered as its item.
    fn header_value(&mut self, sink: &mut impl FnMut(TraceItem)) -> Result<(), ReadError> {
        let key = self.key.as_deref().unwrap_or_default();
        match key {
            "traceEvents" if self.seen_events => Err(self.duplicate(key)),
            "traceEvents" => {
                self.seen_events = true;
                self.events(sink, Close::Required)
            }
            "baseTimeNanoseconds" if self.seen_base => Err(self.duplicate(key)),
            "baseTimeNanoseconds" => {
                self.seen_base = true;
                let (offset, text) = self.header_text("a value")?;
                let base = parse::<i64>(text).map_err(|e| self.located(offset, e))?;
                self.mapper.converter.base_ns = base;
                sink(TraceItem::BaseTime(base));
                Ok(())
            }
            "traceName" => {
                let (offset, text) = self.header_text("a value")?;
                let name = parse::<String>(text).map_err(|e| self.located(offset, e))?;
                sink(TraceItem::TraceName(name));
                Ok(())
            }
            "deviceProperties" => {
                let (offset, text) = self.header_text("a value")?;
                let devices = parse::<Vec<Value>>(text).map_err(|e| self.located(offset, e))?;
                sink(TraceItem::DeviceProperties(devices));
                Ok(())
            }
            // Constants of the format, rewritten by every writer.
            "schemaVersion" | "displayTimeUnit" => {
                let (offset, text) = self.header_text("a value")?;
                parse::<IgnoredAny>(text).map_err(|e| self.located(offset, e))?;
                Ok(())
            }
            _ => {
                let key = key.to_string();
                let (offset, text) = self.header_text("a value")?;
                let value = parse::<Value>(text).map_err(|e| self.located(offset, e))?;
                sink(TraceItem::Metadata(key, value));
                Ok(())
            }
        }
    }

    /// Parses one event and maps it; returns the event's offset and what the mapper made of
    /// it (an error there is an event it cannot use).
    fn event(
        &mut self,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(u64, Result<(), EventError>), ReadError> {
        // Fast path: an event that is complete in the buffer is parsed where it lies, in one
        // pass. One that runs past the buffer's end fails here (as does a malformed one) and
        // is read again below after its extent is known.
        if self.scan.peek()? == Some(b'{') {
            let offset = self.scan.offset();
            // Parsed as `str`: the scanner validated the UTF-8 once for all strings.
            let text = self.scan.unread_str();
            // The event borrows the scanner's text: it is gone before the scanner moves on.
            let applied = {
                let mut event = RawEvent::default();
                match read_event(text, &self.mapper.converter.args, &mut event) {
                    Some(len) if len <= self.event_limit.bytes => {
                        Some((self.mapper.event(event, sink), len))
                    }
                    _ => None,
                }
            };
            if let Some((mapped, len)) = applied {
                self.scan.consume(len);
                return Ok((offset, mapped));
            }
        }
        let (offset, text) = self.scan.value("an event", self.event_limit)?;
        parse::<RawEvent>(text)
            .map(|event| (offset, self.mapper.event(event, sink)))
            .map_err(|e| self.located(offset, e))
    }

    /// The `traceEvents` array, one event at a time.
    fn events(&mut self, sink: &mut impl FnMut(TraceItem), close: Close) -> Result<(), ReadError> {
        self.scan.expect(b'[', "`[` opening traceEvents")?;
        let open_ended = |scan: &mut Scanner<R>| -> Result<bool, ReadError> {
            Ok(close == Close::Optional && scan.peek()?.is_none())
        };
        if self.scan.peek()? == Some(b']') {
            self.scan.bump();
        } else if !open_ended(&mut self.scan)? {
            let mut index = 0;
            loop {
                self.event = Some(index);
                index += self.parallel_events(sink)?;
                self.event = Some(index);
                let (offset, mapped) = self.event(sink)?;
                if let Err(message) = mapped {
                    let at = self.scan.position(offset);
                    return Err(ReadError::at(at, ReadErrorKind::Invalid(message)));
                }
                match self.scan.peek()? {
                    Some(b',') => {
                        self.scan.bump();
                        // A writer still appending leaves `,` last.
                        if open_ended(&mut self.scan)? {
                            break;
                        }
                    }
                    Some(b']') => {
                        self.scan.bump();
                        break;
                    }
                    Some(other) => return Err(self.scan.unexpected(other, "`,` or `]`")),
                    None if close == Close::Optional => break,
                    None => return Err(self.scan.truncated("`,` or `]`")),
                }
                index += 1;
            }
        }
        self.event = None;
        self.mapper.finish(sink);
        Ok(())
    }

    /// Reads a window of events on several threads (see [`super::parallel`]), when reading
    /// in parallel and enough input is left to share out. Called at the start of an event;
    /// leaves the scanner at the start of the event it stopped at, and returns the number of
    /// events read.
    fn parallel_events(&mut self, sink: &mut impl FnMut(TraceItem)) -> Result<u64, ReadError> {
        let Some(parallel) = &mut self.parallel else {
            return Ok(0);
        };
        if self.scan.offset() < self.parallel_from || self.scan.peek()?.is_none() {
            return Ok(0);
        }
        let tuning = &parallel.tuning;
        self.scan.fill_window(tuning.window);
        let start = self.scan.offset();
        // More may have been read: a window is what is shared out at once, which bounds
        // the memory its events take.
        let (text, ahead) = self.scan.window(tuning.window);
        if text.len() < 2 * tuning.piece {
            return Ok(0);
        }
        let window_end = start + text.len() as u64;
        let read = parallel.read_window(text, ahead, &mut self.mapper, sink);
        if read.stopped_early {
            self.parallel_from = window_end;
        }
        self.scan
            .consume_counted(read.consumed, read.newlines, read.last_newline);
        Ok(read.events)
    }
}
