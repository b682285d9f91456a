//! Reading `traceEvents` on several threads, with the same result as reading it on one.
//!
//! Parsing the events is nearly all of a read, and each event parses on its own, so the
//! reader shares them out. It takes a *window* of the input (megabytes; the next window is
//! read meanwhile, so memory stays bounded however large the file), cuts it into *pieces*
//! where an event seems to start, and has every thread parse and [convert](Converter) whole
//! pieces, claiming them in order. The calling thread applies the pieces' events to the
//! [`EventMapper`] in file order (flows, rows, the window and the counts depend on the
//! order) and delivers the items, so the sink is only ever called there; while the next
//! piece in order is not ready, it parses pieces too.
//!
//! # Why the result is the sequential reader's
//!
//! A cut is only a guess: the text there looks like the start of an event (a `{` after a
//! `,`), but it may lie inside a string or inside an `args` list of objects. So a piece is
//! used only if the pieces before it, read in order, ended *exactly* where it starts. The
//! first piece starts at the start of an event; a piece that starts at one reads event after
//! event from there, exactly as the sequential reader would, so where it ends is the start
//! of an event again; by induction, every piece used starts at one and holds the events the
//! sequential reader would have read there. When the pieces before ended elsewhere (they
//! read past the cut, inside one event), the cut was wrong: the piece's work is dropped and
//! the calling thread reads its text again from where they ended.
//!
//! A piece stops short at anything but a well-formed, usable event followed by a comma: an
//! event that does not parse or convert, the end of the array, an event cut off by the end of
//! the window. The window's reading stops there, and the sequential reader takes the event
//! that stopped it, with the whole of its error handling. So errors, their places and the
//! partial results before them are the sequential reader's own; an event that runs past the
//! window is read once the next window has been joined to this one.
//!
//! The items and their order are the sequential reader's; the one difference is that names
//! and arg keys are shared (one allocation per distinct string) per reading thread rather
//! than per read. The pieces also count the newlines they consume, so that the scanner can
//! place later errors by line without going over the window again.

use std::io::Read;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread;

use super::event::RawEvent;
use super::mapper::{Converter, EventMapper, Mapped};
use super::one_pass::{after_whitespace, read_event};
use super::scan::{count_newlines, ReadAhead};
use omniprof_trace::lock;
use omniprof_trace::TraceItem;

/// How the events are shared out.
#[derive(Clone, Debug)]
pub(super) struct Tuning {
    /// Reading threads, the calling one included; 1 reads sequentially.
    pub threads: usize,
    /// The bytes read at once: a window is parsed in parallel, then the next one is read.
    pub window: usize,
    /// The length a window is cut into, about; a window shorter than two pieces is read
    /// sequentially.
    pub piece: usize,
}

impl Default for Tuning {
    /// One thread per core. An 8 MiB window (some 35 000 events) is parsed in a few tens of
    /// milliseconds, while the next one is read; two windows of text and about one of
    /// converted events are held at a time. 512 KiB pieces share a window out evenly, at one
    /// channel message and one checked cut each. (16 MiB windows cost the same CPU on the
    /// 2.2M-event benchmark trace and 21 MB more memory.)
    fn default() -> Self {
        Self {
            threads: thread::available_parallelism().map_or(1, NonZeroUsize::get),
            window: 8 << 20,
            piece: 512 << 10,
        }
    }
}

/// What [`Parallel::read_window`] read.
pub(super) struct WindowRead {
    /// Events delivered to the mapper.
    pub events: u64,
    /// Bytes of the window consumed: the delivered events, each with the comma and
    /// whitespace after it, so that the rest starts with an event.
    pub consumed: usize,
    /// The consumed bytes' newlines (counted here, on every thread), and where the last one
    /// is.
    pub newlines: u64,
    pub last_newline: Option<usize>,
    /// Whether reading stopped short, before the last piece, at an event it could not use.
    pub stopped_early: bool,
}

/// Reads windows of events on several threads; kept from window to window.
pub(super) struct Parallel {
    pub tuning: Tuning,
    /// One converter per helper thread, kept for its names.
    helpers: Vec<Converter>,
    /// Emptied event lists, for the next pieces: a new list per piece would be new memory
    /// each time (pieces' lists are too large for the allocator to keep), paid in page
    /// faults.
    lists: Mutex<Vec<Vec<Mapped>>>,
}

impl Parallel {
    /// Reads as `tuning` says, converting as `converter` does.
    pub(super) fn new(tuning: Tuning, converter: &Converter) -> Self {
        Self {
            helpers: vec![converter.clone(); tuning.threads.saturating_sub(1)],
            tuning,
            lists: Mutex::new(Vec::new()),
        }
    }

    /// Reads the events at the start of `text`, which starts with an event of
    /// `traceEvents`, on [`Tuning::threads`] threads, and applies them to `mapper` in file
    /// order. Stops before the first event that any thread could not use, and at the last
    /// event that lies whole in `text` and is followed by a comma.
    ///
    /// Meanwhile, the calling thread reads the next window with `ahead`.
    pub(super) fn read_window(
        &mut self,
        text: &str,
        ahead: ReadAhead<'_, impl Read>,
        mapper: &mut EventMapper,
        sink: &mut impl FnMut(TraceItem),
    ) -> WindowRead {
        let starts = cut(text.as_bytes(), self.tuning.piece);
        let stop = |i: usize| starts.get(i + 1).copied().unwrap_or(text.len());
        // Pieces are claimed in order by whichever thread is free; a claim past the end
        // means nothing is left (or reading stopped, which moves the counter to the end).
        let next = AtomicUsize::new(0);
        let claim = || {
            let i = next.fetch_add(1, Ordering::Relaxed);
            (i < starts.len()).then_some(i)
        };
        let lists = &self.lists;
        let read = |i: usize, start: usize, converter: &mut Converter| {
            let list = lock(lists).pop().unwrap_or_default();
            read_piece(text, start, stop(i), converter, list)
        };
        for helper in &mut self.helpers {
            helper.base_ns = mapper.converter.base_ns;
        }
        thread::scope(|scope| {
            let (done, results) = mpsc::channel();
            for converter in self.helpers.iter_mut().take(starts.len() - 1) {
                let done = done.clone();
                let (claim, read, starts) = (&claim, &read, &starts);
                scope.spawn(move || {
                    while let Some(i) = claim() {
                        if done.send((i, read(i, starts[i], converter))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(done);
            ahead.read(self.tuning.window);

            let mut ready: Vec<Option<Piece>> = starts.iter().map(|_| None).collect();
            let mut outcome = WindowRead {
                events: 0,
                consumed: 0,
                newlines: 0,
                last_newline: None,
                stopped_early: false,
            };
            for i in 0..starts.len() {
                let piece = loop {
                    if let Some(piece) = ready[i].take() {
                        break piece;
                    }
                    if let Some(j) = claim() {
                        ready[j] = Some(read(j, starts[j], &mut mapper.converter));
                    } else {
                        let (j, piece) = results
                            .recv()
                            .expect("a reading thread ended without its piece: it panicked");
                        ready[j] = Some(piece);
                    }
                };
                // The check that makes the cut: the pieces before must have ended where
                // this one starts. If they ran past its end, it is covered already.
                let mut piece = if piece.start == outcome.consumed {
                    piece
                } else if outcome.consumed >= stop(i) {
                    continue;
                } else {
                    read(i, outcome.consumed, &mut mapper.converter)
                };
                outcome.events += piece.events.len() as u64;
                outcome.newlines += piece.newlines;
                outcome.last_newline = piece.last_newline.or(outcome.last_newline);
                for mapped in piece.events.drain(..) {
                    mapper.apply(mapped, sink);
                }
                lock(lists).push(piece.events);
                outcome.consumed = piece.end;
                if piece.end < stop(i) {
                    outcome.stopped_early = i + 1 < starts.len();
                    next.store(starts.len(), Ordering::Relaxed);
                    break;
                }
            }
            outcome
        })
    }
}

/// The converted events of one piece of a window.
struct Piece {
    /// Where the piece's first event starts in the window.
    start: usize,
    events: Vec<Mapped>,
    /// Where the event after the last one starts; short of the piece's end when reading
    /// stopped at an event it could not use.
    end: usize,
    /// Newlines in `start..end`, and where the last one is.
    newlines: u64,
    last_newline: Option<usize>,
}

/// Reads the events that start in `text[start..stop]` (the last one may end after `stop`)
/// into `events` (empty), stopping short at anything but a usable event followed by a
/// comma.
fn read_piece(
    text: &str,
    start: usize,
    stop: usize,
    converter: &mut Converter,
    mut events: Vec<Mapped>,
) -> Piece {
    let bytes = text.as_bytes();
    let mut pos = start;
    while pos < stop {
        // `pos` is on a character boundary: it follows an ASCII byte (or is a cut's `{`).
        let mut event = RawEvent::default();
        let Some(len) = read_event(&text[pos..], &converter.args, &mut event) else {
            break;
        };
        if len > converter.max_event_bytes {
            break;
        }
        let after = after_whitespace(bytes, pos + len);
        if bytes.get(after) != Some(&b',') {
            // The end of the array or of the window (or an error): the sequential reader
            // takes this event again, and what follows it.
            break;
        }
        let Ok(mapped) = converter.convert(&mut event) else {
            break;
        };
        events.push(mapped);
        pos = after_whitespace(bytes, after + 1);
    }
    let read = &bytes[start..pos];
    Piece {
        start,
        events,
        end: pos,
        newlines: count_newlines(read),
        last_newline: read.iter().rposition(|&b| b == b'\n').map(|i| start + i),
    }
}

/// Where the pieces of a window start: at 0, then at the first place that looks like the
/// start of an event ([`event_start`]) every `piece` bytes or so.
fn cut(bytes: &[u8], piece: usize) -> Vec<usize> {
    let mut starts = vec![0];
    let mut from = piece;
    while from < bytes.len() {
        let Some(start) = event_start(bytes, from) else {
            break;
        };
        starts.push(start);
        from = start + piece;
    }
    starts
}

/// The first `{` that follows a `,` at or after `from` and whitespace, as an event in the
/// array does (and as some text inside an event may).
fn event_start(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let comma = from + bytes.get(from..)?.iter().position(|&b| b == b',')?;
        let brace = after_whitespace(bytes, comma + 1);
        if bytes.get(brace) == Some(&b'{') {
            return Some(brace);
        }
        from = comma + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_braces_after_commas() {
        let text = br#"{"a": 1}, {"b": [{"c": 1}, {"d": "x, {"}]},  {"e": 2}"#;
        assert_eq!(event_start(text, 0), Some(10));
        // Inside an args list, then inside a string: cuts the reader will find wrong.
        assert_eq!(event_start(text, 11), Some(27));
        assert_eq!(event_start(text, 28), Some(37));
        assert_eq!(event_start(text, 38), Some(45));
        assert_eq!(event_start(text, 46), None);
        assert_eq!(cut(text, 10), [0, 27, 45]);
        assert_eq!(cut(text, 20), [0, 27]);
        assert_eq!(cut(text, 100), [0]);
        assert_eq!(cut(b"", 1), [0]);
    }
}
