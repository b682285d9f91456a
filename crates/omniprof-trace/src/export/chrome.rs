//! The Kineto-compatible Chrome trace JSON writer (`docs/trace-format.md`).
//!
//! The document has Kineto's key order, `baseTimeNanoseconds`, `µs.nnn` relative times, rows
//! first, the span rows and `Record Window End` last. Every string is escaped, so the file is
//! valid JSON whatever the names hold. X events are laid out so that each (pid, tid) row
//! nests strictly: an event that would partly overlap another on its row moves to a sibling
//! row, instead of being dropped by Perfetto. Counter samples ([`Trace::counters`]) follow
//! the activities as `C` events.
//!
//! ```
//! use omniprof_trace::{Activity, ActivityType, Trace};
//! use omniprof_trace::write_chrome;
//!
//! let mut trace = Trace::new(1_000_000, 2_000_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 7, 7, 1_100_000, 1_500_000));
//! let mut json = Vec::new();
//! let stats = write_chrome(&trace, "t.pt.trace.json", &mut json).unwrap();
//! assert_eq!(stats.events, 2); // the op and the `Record Window End` marker
//! assert!(String::from_utf8(json).unwrap().contains(r#""name": "aten::mm""#));
//! ```
//!
//! What this writes, the reader reads back with its default [`Limits`]: in the header
//! (every top-level key and value but `traceEvents`), `deviceProperties` is written without
//! spaces and the metadata with Kineto's (`"rank": 0`, which HTA looks for), or without any
//! when that would not fit [`Limits::header_bytes`]; floats never take more than twice
//! their shortest form ([`write_float`]). A header that does not fit even so, or
//! an event larger than [`Limits::event_bytes`], fails the write with
//! [`io::ErrorKind::InvalidData`], naming it, rather than leave a file omniprof cannot open.
//!
//! Files are written with [`export::save`](crate::export::save()).
//!
//! [`ChromeStream`] writes the same document from a trace delivered item by item, as the
//! reader streams it, holding only the lanes' open events and the rows: `omniprof convert`
//! writes JSON this way.

use std::io::{self, Write};

use std::cmp::Reverse;

use crate::activity::{Activity, ActivityType, FlowKind};
use crate::counter::{CounterSample, CounterTrack};
use crate::export::json::{
    room, write_float, write_i64, write_str, write_str_rest, write_us, write_value,
    write_value_compact, HighDigits, Room, NUMBER_ROOM,
};
use crate::export::lanes::{row_tid, written_span, Lanes, RowId, WrittenOrder};
use crate::export::{NeedsWholeTrace, WriteStats};
use crate::hash::FastMap;
use crate::item::TraceItem;
use crate::keys::arg;
use crate::layout::lane_tid;
use crate::limits::Limits;
use crate::trace::{ProcessRow, Span, ThreadRow, Trace};
use crate::value::Value;

/// Sort index of the `Spans` process (0x20000000).
const SPANS_SORT_INDEX: i64 = 536_870_912;
const FLUSH_AT: usize = 1 << 16;
/// Room for a run of up to `n` numeric fields (`, "key": ` and a number each, keys of up to
/// 16 bytes), and a few bytes of punctuation around them.
const fn numeric_fields(n: usize) -> usize {
    n * (KEY_ROOM + NUMBER_ROOM) + KEY_ROOM
}
const KEY_ROOM: usize = 16;
/// What comes between two events.
const EVENT_SEPARATOR: &str = ",\n  ";

/// The text that starts an event of phase `$ph`, after the one before it (its
/// [`EVENT_SEPARATOR`], then the object's first field): one literal, so
/// that it is appended at once (the writer appends a few dozen pieces per event, and each
/// append checks and updates the buffer's length).
macro_rules! event {
    ($ph:literal) => {
        concat!(",\n  {\"ph\": \"", $ph, "\"").as_bytes()
    };
}

/// The end of a flow event of kind `$name`, after its `ts`: its `cat`, `name` and `$bp`
/// (the binding point of an end), as one literal (see [`event!`]).
macro_rules! flow_rest {
    ($name:literal, $bp:literal) => {
        concat!(
            ", \"cat\": \"",
            $name,
            "\", \"name\": \"",
            $name,
            "\"",
            $bp,
            "}"
        )
        .as_bytes()
    };
}

/// `, "$key": `, the text before a field's value, as one literal (see [`event!`]).
macro_rules! key {
    ($key:literal) => {
        concat!(", \"", $key, "\": ").as_bytes()
    };
}

/// Writes `trace` as Chrome JSON to `out`, with `trace_name` as the `traceName`.
pub fn write_chrome<W: Write>(trace: &Trace, trace_name: &str, out: W) -> io::Result<WriteStats> {
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(FLUSH_AT * 2),
        base: written_base(trace.base_time_ns, earliest_ns(trace)),
        stats: WriteStats::default(),
        event_start: 0,
        oversized: None,
        ts_digits: HighDigits::default(),
        heads: Heads::default(),
    };
    w.header(trace, trace_name)?;
    w.rows(trace)?;
    let mut lanes = Lanes::default();
    WrittenOrder::of(&trace.activities).try_for_each(|a| w.activity(a, &mut lanes))?;
    w.stats.spilled = lanes.spilled;
    w.counters(trace)?;
    w.sibling_rows(&trace.threads, trace.window.start_ns, lanes)?;
    w.spans(trace)?;
    w.footer(trace.window.end_ns, trace_name)?;
    Ok(w.stats)
}

/// The granularity of the base time chosen for a trace that has none.
const REBASE_QUANTUM_NS: i64 = 3_600 * 1_000_000_000;

/// The base time the `ts` values are written relative to: the trace's own, or for a trace
/// without one (read from a file of absolute `ts`), the hour before the one its earliest
/// event falls in. Perfetto reads `ts` as a double: absolute microseconds (about 1.7e15)
/// keep a quarter of a microsecond, which makes events nested to the nanosecond overlap
/// there (and Perfetto drops one of each such pair); times of hours keep every nanosecond.
fn written_base(base: i64, earliest_ns: i64) -> i64 {
    if base != 0 || earliest_ns < 2 * REBASE_QUANTUM_NS {
        return base;
    }
    (earliest_ns / REBASE_QUANTUM_NS - 1) * REBASE_QUANTUM_NS
}

/// The earliest time the writer writes: the window's start, an activity's, a counter
/// sample's or a span's.
fn earliest_ns(trace: &Trace) -> i64 {
    let activities = trace.activities.iter().map(|a| written_span(a).0);
    let samples = trace
        .counters
        .series()
        .iter()
        .flat_map(|s| s.samples.iter().map(|sample| sample.ts_ns));
    let spans = trace.spans.iter().map(|s| s.start_ns);
    activities
        .chain(samples)
        .chain(spans)
        .fold(trace.window.start_ns, i64::min)
}

/// The time an item is written at, if it is an event.
fn item_ns(item: &TraceItem) -> Option<i64> {
    match item {
        TraceItem::Activity(a) => Some(written_span(a).0),
        TraceItem::Counter(_, sample) => Some(sample.ts_ns),
        TraceItem::Span(s) => Some(s.start_ns),
        _ => None,
    }
}

/// Writes Chrome JSON from [`TraceItem`]s delivered one at a time, in the order the reader
/// delivers them (`TraceReader::stream` in `omniprof-read`): the header
/// once the first event comes, each activity, counter sample and span as it comes, the rows
/// and the window's end last. Each row's activities must come in written order (by start,
/// the longer first), as omniprof and Kineto write them; otherwise the write stops with
/// [`NeedsWholeTrace`] (an [`io::Error`] whose source it is).
///
/// ```
/// use omniprof_trace::{Activity, ActivityType, ChromeStream, TraceItem, Window};
///
/// let mut out = Vec::new();
/// let mut stream = ChromeStream::new(&mut out, "t.json");
/// stream.add(TraceItem::BaseTime(1_000));
/// let op = Activity::new(ActivityType::CpuOp, "aten::mm", 7, 7, 2_500, 4_500);
/// stream.add(TraceItem::Activity(op));
/// stream.add(TraceItem::Window(Window::new(2_500, 4_500)));
/// let stats = stream.finish()?;
/// assert_eq!(stats.events, 2); // the op and the `Record Window End` marker
/// assert!(String::from_utf8(out)?.contains("aten::mm"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ChromeStream<W: Write> {
    w: Writer<W>,
    /// The header items, until the first event.
    header: Option<Trace>,
    trace_name: Option<String>,
    default_name: String,
    lanes: Lanes,
    last: FastMap<RowId, (i64, Reverse<i64>)>,
    processes: Vec<ProcessRow>,
    threads: Vec<ThreadRow>,
    window_end_ns: i64,
    window_start_ns: i64,
    error: Option<io::Error>,
}

impl<W: Write> ChromeStream<W> {
    /// A stream writing to `out`; `trace_name` is the `traceName` unless the trace names
    /// itself.
    pub fn new(out: W, trace_name: &str) -> Self {
        Self {
            w: Writer {
                out,
                buf: Vec::with_capacity(FLUSH_AT * 2),
                base: 0,
                stats: WriteStats::default(),
                event_start: 0,
                oversized: None,
                ts_digits: HighDigits::default(),
                heads: Heads::default(),
            },
            header: Some(Trace {
                base_time_ns: 0,
                ..Trace::new(0, 0)
            }),
            trace_name: None,
            default_name: trace_name.to_string(),
            lanes: Lanes::default(),
            last: FastMap::default(),
            processes: Vec::new(),
            threads: Vec::new(),
            window_end_ns: 0,
            window_start_ns: 0,
            error: None,
        }
    }

    /// Writes one item; after an error, the items are ignored and [`finish`](Self::finish)
    /// returns it.
    pub fn add(&mut self, item: TraceItem) {
        if self.error.is_none() {
            if let Err(e) = self.item(item) {
                self.error = Some(e);
            }
        }
    }

    fn item(&mut self, item: TraceItem) -> io::Result<()> {
        if let Some(header) = &mut self.header {
            match item {
                TraceItem::BaseTime(base) => {
                    header.base_time_ns = base;
                    return Ok(());
                }
                TraceItem::DeviceProperties(devices) => {
                    header.device_properties = devices;
                    return Ok(());
                }
                TraceItem::Metadata(key, value) => {
                    header.set_metadata(key, value);
                    return Ok(());
                }
                TraceItem::TraceName(name) => {
                    self.trace_name = Some(name);
                    return Ok(());
                }
                _ => self.start(item_ns(&item))?,
            }
        }
        if item_ns(&item).is_some_and(|t| t < self.w.base) {
            return Err(io::Error::other(NeedsWholeTrace::new(
                "an event comes before the base time chosen at the first event",
            )));
        }
        match item {
            TraceItem::Activity(a) => {
                let row = (a.device, row_tid(a.resource));
                let (start, end) = written_span(&a);
                let key = (start, Reverse(end));
                if a.kind != ActivityType::CpuInstantEvent {
                    let last = self.last.entry(row).or_insert(key);
                    if key < *last {
                        return Err(io::Error::other(NeedsWholeTrace::new(
                            "an activity comes before one that starts later on its row",
                        )));
                    }
                    *last = key;
                }
                self.w.activity(&a, &mut self.lanes)
            }
            TraceItem::Counter(track, sample) => self.w.sample(&track, &sample),
            TraceItem::Span(s) => {
                self.w.span(&s);
                self.w.flush_if_full()
            }
            TraceItem::Process(row) => {
                self.processes.push(row);
                Ok(())
            }
            TraceItem::Thread(row) => {
                self.threads.push(row);
                Ok(())
            }
            TraceItem::Window(window) => {
                (self.window_start_ns, self.window_end_ns) = (window.start_ns, window.end_ns);
                Ok(())
            }
            TraceItem::TraceName(name) => {
                // After the events, as a whole read allows.
                self.trace_name = Some(name);
                Ok(())
            }
            TraceItem::BaseTime(_) => Err(io::Error::other(NeedsWholeTrace::new(
                "the base time comes after the events",
            ))),
            TraceItem::DeviceProperties(_) | TraceItem::Metadata(..) => Err(io::Error::other(
                NeedsWholeTrace::new("header keys come after the events"),
            )),
        }
    }

    /// Writes the header, at the first event (at `first_ns`, if it has a time).
    fn start(&mut self, first_ns: Option<i64>) -> io::Result<()> {
        let header = self.header.take().expect("the header is not written yet");
        self.w.base = written_base(header.base_time_ns, first_ns.unwrap_or(0));
        let name = self
            .trace_name
            .clone()
            .unwrap_or_else(|| self.default_name.clone());
        self.w.header(&header, &name)
    }

    /// Writes the rows, the sibling lanes' rows and the window's end, and returns what was
    /// written (or the first error).
    pub fn finish(mut self) -> io::Result<WriteStats> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.header.is_some() {
            self.start(None)?;
        }
        let ts = self.window_start_ns;
        if ts < self.w.base {
            return Err(io::Error::other(NeedsWholeTrace::new(
                "the window starts before the base time chosen at the first event",
            )));
        }
        self.w.rows_of(&self.processes, &self.threads, ts)?;
        self.w.stats.spilled = self.lanes.spilled;
        let lanes = std::mem::take(&mut self.lanes);
        self.w.sibling_rows(&self.threads, ts, lanes)?;
        let name = self
            .trace_name
            .clone()
            .unwrap_or_else(|| self.default_name.clone());
        self.w.footer(self.window_end_ns, &name)?;
        Ok(self.w.stats)
    }
}

struct Writer<W> {
    out: W,
    buf: Vec<u8>,
    base: i64,
    stats: WriteStats,
    /// Where the last event started, counted from the start of the file.
    event_start: u64,
    /// The first event larger than the reader's limit: its index and size.
    oversized: Option<(u64, u64)>,
    /// The high digits of the last `ts`, which the next one most likely shares.
    ts_digits: HighDigits,
    heads: Heads,
}

/// Per activity type, the text of an X event from its `cat` to its name's opening quote
/// (`, "cat": "cpu_op", "name": "`), made at the type's first event: one append, where the
/// pieces took four.
struct Heads(Vec<Vec<u8>>);

impl Default for Heads {
    fn default() -> Self {
        Self(vec![Vec::new(); ActivityType::ALL.len()])
    }
}

impl Heads {
    #[inline]
    fn of(&mut self, kind: ActivityType) -> &[u8] {
        let head = &mut self.0[kind.index()];
        if head.is_empty() {
            // Type names need no escaping.
            head.extend_from_slice(b", \"cat\": \"");
            head.extend_from_slice(kind.name().as_bytes());
            head.extend_from_slice(b"\", \"name\": \"");
        }
        head
    }
}

impl<W: Write> Writer<W> {
    #[inline(always)]
    fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some((index, bytes)) = self.oversized {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "traceEvents[{index}] would take {bytes} bytes, more than the {} bytes \
                     the reader reads of one event (import::Limits::event_bytes): it would \
                     not read back",
                    Limits::default().event_bytes
                ),
            ));
        }
        self.stats.bytes += self.buf.len() as u64;
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Where the next byte goes, counted from the start of the file.
    #[inline(always)]
    fn position(&self) -> u64 {
        self.stats.bytes + self.buf.len() as u64
    }

    /// Notes the event written last when it is larger than the reader reads by default;
    /// the next flush fails with it.
    #[inline(always)]
    fn check_last_event(&mut self) {
        let bytes = self.position() - self.event_start;
        if self.stats.events > 0
            && bytes > Limits::default().event_bytes as u64
            && self.oversized.is_none()
        {
            self.oversized = Some((self.stats.events - 1, bytes));
        }
    }

    /// Starts an event object with `start` (an [`event!`]); every event but the first is
    /// preceded by its comma.
    #[inline(always)]
    fn event(&mut self, start: &'static [u8]) {
        debug_assert!(start.starts_with(EVENT_SEPARATOR.as_bytes()));
        self.check_last_event();
        if self.stats.events > 0 {
            self.raw(start);
        } else {
            self.raw(&start[1..]);
        }
        // The event's object starts after `,\n  `.
        self.event_start = self.position() - (start.len() - EVENT_SEPARATOR.len()) as u64;
        self.stats.events += 1;
    }

    #[inline(always)]
    fn ts(&mut self, key: &[u8], ns: i64) {
        self.raw(key);
        let (high, us) = (&mut self.ts_digits, ns - self.base);
        room::<NUMBER_ROOM, _>(&mut self.buf, |r| r.us_after(high, us));
    }

    /// A `cat` from the fixed set of type names, which need no escaping.
    #[inline(always)]
    fn cat(&mut self, name: &'static str) {
        self.raw(b", \"cat\": \"");
        self.raw(name.as_bytes());
        self.raw(b"\"");
    }

    #[inline(always)]
    fn int(&mut self, key: &[u8], v: i64) {
        self.raw(key);
        write_i64(&mut self.buf, v);
    }

    #[inline(always)]
    fn str(&mut self, key: &[u8], v: &str) {
        self.raw(key);
        write_str(&mut self.buf, v);
    }

    /// The header, up to `"traceEvents": [`. Its size, with the `traceName` the footer
    /// adds, is what the reader counts against [`Limits::header_bytes`] (and a little more:
    /// the spaces between top-level items, which the reader does not count).
    fn header(&mut self, trace: &Trace, trace_name: &str) -> io::Result<()> {
        let limit = Limits::default().header_bytes;
        // `"traceName": "<name>"`, escaped.
        let mut name = Vec::new();
        write_str(&mut name, trace_name);
        let footer = name.len() + 16;
        self.header_with(trace, write_value);
        if self.buf.len() + footer > limit {
            self.buf.clear();
            self.header_with(trace, write_value_compact);
        }
        let bytes = self.buf.len() + footer;
        if bytes > limit {
            self.buf.clear();
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the trace's header (deviceProperties and metadata) would take {bytes} \
                     bytes, more than the {limit} bytes the reader reads of a header \
                     (import::Limits::header_bytes): it would not read back"
                ),
            ));
        }
        self.flush()
    }

    /// The header with each metadata value written by `value`.
    fn header_with(&mut self, trace: &Trace, value: fn(&mut Vec<u8>, &Value)) {
        self.raw(b"{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
        // Compact: a device's properties can be many (HTA and Perfetto parse them as JSON;
        // nothing reads their spacing).
        for (i, p) in trace.device_properties.iter().enumerate() {
            self.raw(if i == 0 { b"\n    " } else { b",\n    " });
            write_value_compact(&mut self.buf, p);
        }
        self.raw(b"\n  ],\n");
        let report = trace.health.entries();
        let report = report.iter().map(|(key, v)| (*key, v));
        for (key, v) in trace
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .chain(report)
        {
            self.raw(b"  ");
            write_str(&mut self.buf, key);
            self.raw(b": ");
            value(&mut self.buf, v);
            self.raw(b",\n");
        }
        self.raw(b"  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
        write_i64(&mut self.buf, self.base);
        self.raw(b",\n  \"traceEvents\": [");
    }

    fn meta(&mut self, name: &str, pid: i64, tid: i64, ts: i64, key: &str, value: MetaArg) {
        self.event(event!("M"));
        self.str(key!("name"), name);
        self.ts(key!("ts"), ts);
        self.int(key!("pid"), pid);
        self.int(key!("tid"), tid);
        self.raw(b", \"args\": {");
        write_str(&mut self.buf, key);
        self.raw(b": ");
        match value {
            MetaArg::Str(s) => write_str(&mut self.buf, s),
            MetaArg::Int(i) => write_i64(&mut self.buf, i),
        }
        self.raw(b"}}");
    }

    fn rows(&mut self, trace: &Trace) -> io::Result<()> {
        self.rows_of(&trace.processes, &trace.threads, trace.window.start_ns)
    }

    /// The process and thread rows, their events at `ts`.
    fn rows_of(
        &mut self,
        processes: &[ProcessRow],
        threads: &[ThreadRow],
        ts: i64,
    ) -> io::Result<()> {
        for p in processes {
            self.meta("process_name", p.pid, 0, ts, "name", MetaArg::Str(&p.name));
            // A row without a label writes none, as Kineto's `CUPTI Overhead` row.
            if !p.label.is_empty() {
                self.meta(
                    "process_labels",
                    p.pid,
                    0,
                    ts,
                    "labels",
                    MetaArg::Str(&p.label),
                );
            }
            let sort = MetaArg::Int(p.sort_index);
            self.meta("process_sort_index", p.pid, 0, ts, "sort_index", sort);
        }
        for t in threads {
            let tid = row_tid(t.tid);
            self.meta("thread_name", t.pid, tid, ts, "name", MetaArg::Str(&t.name));
            let sort = MetaArg::Int(t.sort_index);
            self.meta("thread_sort_index", t.pid, tid, ts, "sort_index", sort);
        }
        self.flush_if_full()
    }

    /// Rows for the sibling lanes of overlapping events. They are the only rows written
    /// after events, because they are known only once every event has been placed.
    fn sibling_rows(&mut self, threads: &[ThreadRow], ts: i64, lanes: Lanes) -> io::Result<()> {
        for &((pid, tid), extra) in &lanes.extra_rows() {
            let base = threads.iter().find(|t| t.pid == pid && t.tid == tid);
            let (name, sort) =
                base.map_or((format!("{tid}"), tid), |t| (t.name.clone(), t.sort_index));
            for lane in 1..=extra as i64 {
                let name = format!("{name} (overlap {lane})");
                let lane_tid = lane_tid(tid, lane);
                self.meta(
                    "thread_name",
                    pid,
                    lane_tid,
                    ts,
                    "name",
                    MetaArg::Str(&name),
                );
                let sort = MetaArg::Int(sort.saturating_add(lane));
                self.meta("thread_sort_index", pid, lane_tid, ts, "sort_index", sort);
            }
        }
        self.flush_if_full()
    }

    fn activity(&mut self, a: &Activity, lanes: &mut Lanes) -> io::Result<()> {
        match a.kind {
            ActivityType::CpuInstantEvent => {
                self.event(event!("i"));
                self.cat(a.kind.name());
                self.raw(b", \"s\": \"t\"");
                self.str(key!("name"), &a.name);
                self.int(key!("pid"), a.device);
                self.int(key!("tid"), row_tid(a.resource));
                self.ts(key!("ts"), a.start_ns);
                self.args(a);
            }
            kind => {
                let (start, end) = written_span(a);
                let lane = lanes.assign((a.device, row_tid(a.resource)), start, end);
                let tid = lane_tid(row_tid(a.resource), lane as i64);
                self.event(event!("X"));
                self.buf.extend_from_slice(self.heads.of(kind));
                let name: &str = if &*a.name == "kernel" {
                    "Kernel"
                } else {
                    &a.name
                };
                write_str_rest(&mut self.buf, name);
                let fields_at = self.buf.len();
                let ts = room::<{ numeric_fields(4) }, _>(&mut self.buf, |r| {
                    r.raw(key!("pid"));
                    r.i64(a.device);
                    r.raw(key!("tid"));
                    r.i64(tid);
                    r.raw(key!("ts"));
                    let ts_at = r.len();
                    r.us_after(&mut self.ts_digits, start - self.base);
                    let ts = fields_at + ts_at..fields_at + r.len();
                    r.raw(key!("dur"));
                    r.us(end - start);
                    ts
                });
                self.args(a);
                if let Some(flow) = a.flow.filter(|f| f.id > 0) {
                    self.event(if flow.start { event!("s") } else { event!("f") });
                    room::<{ numeric_fields(4) }, _>(&mut self.buf, |r| {
                        r.raw(key!("id"));
                        r.u64(flow.id);
                        r.raw(key!("pid"));
                        r.i64(a.device);
                        r.raw(key!("tid"));
                        r.i64(tid);
                        r.raw(key!("ts"));
                    });
                    // The flow sits at its event's `ts`: copy the digits, don't redo them.
                    self.buf.extend_from_within(ts);
                    self.raw(match (flow.kind, flow.start) {
                        (FlowKind::Ac2g, true) => flow_rest!("ac2g", ""),
                        (FlowKind::Ac2g, false) => flow_rest!("ac2g", r#", "bp": "e""#),
                        (FlowKind::FwdBwd, true) => flow_rest!("fwdbwd", ""),
                        (FlowKind::FwdBwd, false) => flow_rest!("fwdbwd", r#", "bp": "e""#),
                    });
                }
            }
        }
        self.flush_if_full()
    }

    /// One `C` event per sample, series by series (viewers order events by `ts`
    /// themselves).
    fn counters(&mut self, trace: &Trace) -> io::Result<()> {
        for series in trace.counters.series() {
            for sample in &series.samples {
                self.sample(&series.track, sample)?;
            }
        }
        Ok(())
    }

    /// One counter sample; `hardware_counters` as Kineto writes them: one event per value,
    /// named after it, on the `"GPU <n> Counters"` row.
    fn sample(&mut self, track: &CounterTrack, sample: &CounterSample) -> io::Result<()> {
        let tid = row_tid(track.resource);
        if track.kind == ActivityType::HardwareCounters {
            let pid = format!("GPU {} Counters", track.device);
            for (metric, value) in &sample.values {
                self.event(event!("C"));
                self.cat(track.kind.name());
                self.str(key!("name"), metric);
                self.str(key!("pid"), &pid);
                self.int(key!("tid"), tid);
                self.ts(key!("ts"), sample.ts_ns);
                self.raw(b", \"args\": {\"\": ");
                write_float(&mut self.buf, *value);
                self.raw(b"}}");
            }
            return self.flush_if_full();
        }
        self.event(event!("C"));
        self.cat(track.kind.name());
        self.str(key!("name"), &track.name);
        self.int(key!("pid"), track.device);
        self.int(key!("tid"), tid);
        self.ts(key!("ts"), sample.ts_ns);
        self.raw(b", \"args\": {");
        for (i, (key, value)) in sample.values.iter().enumerate() {
            if i > 0 {
                self.raw(b", ");
            }
            write_str(&mut self.buf, key);
            self.raw(b": ");
            write_float(&mut self.buf, *value);
        }
        self.raw(b"}}");
        self.flush_if_full()
    }

    /// `args`: the `External id`, the activity's own args, then its `correlation` for the
    /// types that carry one; the closing brace of the event too.
    fn args(&mut self, a: &Activity) {
        let external_id = a.external_id();
        // Unless an arg of that name says it (found as the args are written).
        let mut correlation =
            (!a.kind.has_own_external_id() && a.correlation != 0).then_some(a.correlation);
        if external_id.is_none() && a.args.is_empty() && correlation.is_none() {
            self.raw(b"}");
            return;
        }
        room::<{ numeric_fields(2) }, _>(&mut self.buf, |r| {
            r.raw(b", \"args\": {");
            if let Some(id) = external_id {
                plain_key(r, arg::EXTERNAL_ID);
                r.u64(id);
            }
        });
        let mut first = external_id.is_none();
        for (key, value) in &a.args {
            if !std::mem::take(&mut first) {
                self.raw(b", ");
            }
            if &**key == arg::CORRELATION {
                correlation = None;
            }
            write_str(&mut self.buf, key);
            self.raw(b": ");
            // Most args are numbers: written here, not through the general writer's call.
            match *value {
                Value::Int(v) => room::<NUMBER_ROOM, _>(&mut self.buf, |r| r.i64(v)),
                Value::UInt(v) => room::<NUMBER_ROOM, _>(&mut self.buf, |r| r.u64(v)),
                _ => write_value(&mut self.buf, value),
            }
        }
        room::<{ numeric_fields(1) }, _>(&mut self.buf, |r| {
            if let Some(id) = correlation {
                if !first {
                    r.raw(b", ");
                }
                plain_key(r, arg::CORRELATION);
                r.u64(id);
            }
            r.raw(b"}}");
        });
    }

    fn spans(&mut self, trace: &Trace) -> io::Result<()> {
        for s in &trace.spans {
            self.span(s);
        }
        self.flush_if_full()
    }

    /// A span: its `X` on the `Spans` row, that row's sort index, its `Iteration Start`.
    fn span(&mut self, s: &Span) {
        self.event(event!("X"));
        self.str(key!("cat"), "Trace");
        let name = format!("{}{} ({})", s.prefix, s.name, s.iteration);
        self.str(key!("name"), &name);
        self.str(key!("pid"), "Spans");
        self.str(key!("tid"), &s.name);
        self.ts(key!("ts"), s.start_ns);
        self.raw(key!("dur"));
        write_us(&mut self.buf, (s.end_ns - s.start_ns).max(0));
        room::<{ numeric_fields(1) }, _>(&mut self.buf, |r| {
            r.raw(b", \"args\": {");
            plain_key(r, arg::OP_COUNT);
            r.u64(s.op_count);
            r.raw(b"}}");
        });
        self.event(event!("M"));
        self.str(key!("name"), "process_sort_index");
        self.ts(key!("ts"), s.start_ns);
        self.str(key!("pid"), "Spans");
        self.int(key!("tid"), 0);
        self.raw(b", \"args\": {\"sort_index\": ");
        write_i64(&mut self.buf, SPANS_SORT_INDEX);
        self.raw(b"}}");
        self.event(event!("i"));
        self.str(key!("s"), "g");
        self.str(key!("name"), &format!("Iteration Start: {}", s.name));
        self.str(key!("pid"), "Traces");
        self.str(key!("tid"), &format!("Trace {}", s.name));
        self.ts(key!("ts"), s.start_ns);
        self.raw(b"}");
    }

    fn footer(&mut self, window_end_ns: i64, trace_name: &str) -> io::Result<()> {
        self.event(event!("i"));
        self.str(key!("s"), "g");
        self.str(key!("name"), "Record Window End");
        self.str(key!("pid"), "");
        self.str(key!("tid"), "");
        self.ts(key!("ts"), window_end_ns);
        self.raw(b"}\n  ],\n  \"traceName\": ");
        write_str(&mut self.buf, trace_name);
        self.raw(b"\n}\n");
        self.flush()?;
        self.out.flush()
    }
}

enum MetaArg<'a> {
    Str(&'a str),
    Int(i64),
}
/// Appends `"key": ` for a key that needs no escaping (one of [`crate::keys`]).
#[inline(always)]
fn plain_key(r: &mut Room<'_>, key: &str) {
    r.raw(b"\"");
    r.raw(key.as_bytes());
    r.raw(b"\": ");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::Flow;

    #[test]
    fn an_arg_named_correlation_stands_in_for_the_activitys_own() {
        let mut t = Trace::new(0, 10_000);
        for (i, args) in [vec![], vec![("correlation", 9)], vec![("stream", 7)]]
            .into_iter()
            .enumerate()
        {
            let start = i as i64 * 1_000;
            let mut a = Activity::new(ActivityType::ConcurrentKernel, "k", 0, 7, start, start + 10);
            a.correlation = 5;
            for (key, value) in args {
                a.args.push((key.into(), crate::value::Value::Int(value)));
            }
            t.activities.push(a);
        }
        let mut out = Vec::new();
        write_chrome(&t, "t", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""args": {"correlation": 5}}"#), "{text}");
        assert!(text.contains(r#""args": {"correlation": 9}}"#), "{text}");
        assert!(
            text.contains(r#""args": {"stream": 7, "correlation": 5}}"#),
            "{text}"
        );
    }

    #[test]
    fn the_widest_numbers_fit_their_rooms_and_read_back() {
        let mut t = Trace::new(0, i64::MAX);
        t.base_time_ns = 1;
        let mut a = Activity::new(
            ActivityType::ConcurrentKernel,
            "k",
            i64::MIN,
            i64::MIN + 1,
            i64::MAX - 1,
            i64::MAX,
        );
        a.correlation = u64::MAX;
        a.linked_correlation = Some(u64::MAX - 1);
        a.flow = Some(Flow {
            id: u64::MAX,
            kind: FlowKind::Ac2g,
            start: false,
        });
        t.activities.push(a);
        let mut out = Vec::new();
        write_chrome(&t, "t", &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let x = &doc["traceEvents"][0];
        assert_eq!(x["pid"], i64::MIN);
        assert_eq!(x["tid"], i64::MAX);
        assert_eq!(x["dur"].to_string(), "0.001");
        assert_eq!(x["args"]["External id"], u64::MAX - 1);
        assert_eq!(x["args"]["correlation"], u64::MAX);
        let f = &doc["traceEvents"][1];
        assert_eq!((&f["ph"], &f["id"]), (&"f".into(), &u64::MAX.into()));
        // Both at the kernel's start, i64::MAX - 2 ns after the base time.
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches(r#""ts": 9223372036854775.805, "#).count(), 2);
    }

    #[test]
    fn a_process_row_without_a_label_writes_its_name_and_sort_index_only() {
        let mut t = Trace::new(0, 1_000);
        t.add_process(ProcessRow {
            pid: -1,
            name: "CUPTI Overhead".into(),
            label: String::new(),
            sort_index: 0x10_0000,
        });
        let mut out = Vec::new();
        write_chrome(&t, "t", &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let rows: Vec<_> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| (e["name"].clone(), e["pid"].clone(), e["args"].clone()))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "process_name".into(),
                    (-1).into(),
                    serde_json::json!({"name": "CUPTI Overhead"})
                ),
                (
                    "process_sort_index".into(),
                    (-1).into(),
                    serde_json::json!({"sort_index": 1_048_576})
                ),
            ]
        );
    }
}
