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
//! use omniprof_trace::export::chrome;
//!
//! let mut trace = Trace::new(1_000_000, 2_000_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 7, 7, 1_100_000, 1_500_000));
//! let mut json = Vec::new();
//! let stats = chrome::write(&trace, "t.pt.trace.json", &mut json).unwrap();
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

use std::io::{self, Write};

use crate::activity::{Activity, ActivityType, FlowKind};
use crate::export::json::{
    write_float, write_i64, write_str, write_u64, write_us, write_value, write_value_compact,
};
use crate::export::lanes::{row_tid, written_span, Lanes, WrittenOrder, LANE_STRIDE};
use crate::export::WriteStats;
use crate::import::Limits;
use crate::keys::arg;
use crate::trace::Trace;
use crate::value::Value;

/// Sort index of the `Spans` process (0x20000000).
const SPANS_SORT_INDEX: i64 = 536_870_912;
const FLUSH_AT: usize = 1 << 16;

/// Writes `trace` as Chrome JSON to `out`, with `trace_name` as the `traceName`.
pub fn write<W: Write>(trace: &Trace, trace_name: &str, out: W) -> io::Result<WriteStats> {
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(FLUSH_AT * 2),
        base: trace.base_time_ns,
        stats: WriteStats::default(),
        event_start: 0,
        oversized: None,
    };
    w.header(trace, trace_name)?;
    w.rows(trace)?;
    let mut lanes = Lanes::default();
    WrittenOrder::of(&trace.activities).try_for_each(|a| w.activity(a, &mut lanes))?;
    w.stats.spilled = lanes.spilled;
    w.counters(trace)?;
    w.sibling_rows(trace, lanes)?;
    w.spans(trace)?;
    w.footer(trace, trace_name)?;
    Ok(w.stats)
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

    /// Starts an event object; every event but the first is preceded by a comma.
    #[inline(always)]
    fn event(&mut self, ph: &[u8]) {
        self.check_last_event();
        if self.stats.events > 0 {
            self.raw(b",\n  ");
        } else {
            self.raw(b"\n  ");
        }
        self.event_start = self.position();
        self.stats.events += 1;
        self.raw(b"{\"ph\": \"");
        self.raw(ph);
        self.raw(b"\"");
    }

    #[inline(always)]
    fn key(&mut self, key: &[u8]) {
        self.raw(b", \"");
        self.raw(key);
        self.raw(b"\": ");
    }

    #[inline(always)]
    fn ts(&mut self, key: &[u8], ns: i64) {
        self.key(key);
        write_us(&mut self.buf, ns - self.base);
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
        self.key(key);
        write_i64(&mut self.buf, v);
    }

    #[inline(always)]
    fn str(&mut self, key: &[u8], v: &str) {
        self.key(key);
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
        let report = trace.report.entries();
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
        self.event(b"M");
        self.str(b"name", name);
        self.ts(b"ts", ts);
        self.int(b"pid", pid);
        self.int(b"tid", tid);
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
        let ts = trace.window.start_ns;
        for p in &trace.processes {
            self.meta("process_name", p.pid, 0, ts, "name", MetaArg::Str(&p.name));
            self.meta(
                "process_labels",
                p.pid,
                0,
                ts,
                "labels",
                MetaArg::Str(&p.label),
            );
            let sort = MetaArg::Int(p.sort_index);
            self.meta("process_sort_index", p.pid, 0, ts, "sort_index", sort);
        }
        for t in &trace.threads {
            let tid = row_tid(t.tid);
            self.meta("thread_name", t.pid, tid, ts, "name", MetaArg::Str(&t.name));
            let sort = MetaArg::Int(t.sort_index);
            self.meta("thread_sort_index", t.pid, tid, ts, "sort_index", sort);
        }
        self.flush_if_full()
    }

    /// Rows for the sibling lanes of overlapping events. They are the only rows written
    /// after events, because they are known only once every event has been placed.
    fn sibling_rows(&mut self, trace: &Trace, lanes: Lanes) -> io::Result<()> {
        let ts = trace.window.start_ns;
        for &((pid, tid), extra) in &lanes.extra_rows() {
            let base = trace.threads.iter().find(|t| t.pid == pid && t.tid == tid);
            let (name, sort) =
                base.map_or((format!("{tid}"), tid), |t| (t.name.clone(), t.sort_index));
            for lane in 1..=extra as i64 {
                let name = format!("{name} (overlap {lane})");
                let lane_tid = tid + lane * LANE_STRIDE;
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
                self.event(b"i");
                self.cat(a.kind.name());
                self.raw(b", \"s\": \"t\"");
                self.str(b"name", &a.name);
                self.int(b"pid", a.device);
                self.int(b"tid", row_tid(a.resource));
                self.ts(b"ts", a.start_ns);
                self.args(a);
            }
            kind => {
                let (start, end) = written_span(a);
                let lane = lanes.assign((a.device, row_tid(a.resource)), start, end);
                let tid = row_tid(a.resource) + lane as i64 * LANE_STRIDE;
                self.event(b"X");
                self.cat(kind.name());
                let name: &str = if &*a.name == "kernel" {
                    "Kernel"
                } else {
                    &a.name
                };
                self.str(b"name", name);
                self.int(b"pid", a.device);
                self.int(b"tid", tid);
                self.key(b"ts");
                let ts_at = self.buf.len();
                write_us(&mut self.buf, start - self.base);
                let ts_bytes = ts_at..self.buf.len();
                self.key(b"dur");
                write_us(&mut self.buf, end - start);
                self.args(a);
                if let Some(flow) = a.flow.filter(|f| f.id > 0) {
                    self.event(if flow.start { b"s" } else { b"f" });
                    self.key(b"id");
                    write_u64(&mut self.buf, flow.id);
                    self.int(b"pid", a.device);
                    self.int(b"tid", tid);
                    // The flow sits at its event's `ts`: copy the digits, don't redo them.
                    self.key(b"ts");
                    self.buf.extend_from_within(ts_bytes);
                    self.raw(match flow.kind {
                        FlowKind::Ac2g => b", \"cat\": \"ac2g\", \"name\": \"ac2g\"",
                        FlowKind::FwdBwd => b", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"",
                    });
                    if !flow.start {
                        self.raw(b", \"bp\": \"e\"");
                    }
                    self.raw(b"}");
                }
            }
        }
        self.flush_if_full()
    }

    /// One `C` event per sample, series by series (viewers order events by `ts`
    /// themselves); `hardware_counters` as Kineto writes them: one event per value, named
    /// after it, on the `"GPU <n> Counters"` row.
    fn counters(&mut self, trace: &Trace) -> io::Result<()> {
        for series in trace.counters.series() {
            let track = &series.track;
            let tid = row_tid(track.resource);
            if track.kind == ActivityType::HardwareCounters {
                let pid = format!("GPU {} Counters", track.device);
                for sample in &series.samples {
                    for (metric, value) in &sample.values {
                        self.event(b"C");
                        self.cat(track.kind.name());
                        self.str(b"name", metric);
                        self.str(b"pid", &pid);
                        self.int(b"tid", tid);
                        self.ts(b"ts", sample.ts_ns);
                        self.raw(b", \"args\": {\"\": ");
                        write_float(&mut self.buf, *value);
                        self.raw(b"}}");
                    }
                    self.flush_if_full()?;
                }
                continue;
            }
            for sample in &series.samples {
                self.event(b"C");
                self.cat(track.kind.name());
                self.str(b"name", &track.name);
                self.int(b"pid", track.device);
                self.int(b"tid", tid);
                self.ts(b"ts", sample.ts_ns);
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
                self.flush_if_full()?;
            }
        }
        Ok(())
    }

    /// `args`: the `External id`, the activity's own args, then its `correlation` for the
    /// types that carry one; the closing brace of the event too.
    fn args(&mut self, a: &Activity) {
        let external_id = a
            .linked_correlation
            .or((a.kind.has_own_external_id() && a.correlation != 0).then_some(a.correlation))
            .filter(|&id| id != 0);
        let correlation = (!a.kind.has_own_external_id()
            && a.correlation != 0
            && a.arg(arg::CORRELATION).is_none())
        .then_some(a.correlation);
        if external_id.is_none() && a.args.is_empty() && correlation.is_none() {
            self.raw(b"}");
            return;
        }
        self.raw(b", \"args\": {");
        let mut first = true;
        let mut sep = |buf: &mut Vec<u8>| {
            if !std::mem::take(&mut first) {
                buf.extend_from_slice(b", ");
            }
        };
        if let Some(id) = external_id {
            sep(&mut self.buf);
            plain_key(&mut self.buf, arg::EXTERNAL_ID);
            write_u64(&mut self.buf, id);
        }
        for (key, value) in &a.args {
            sep(&mut self.buf);
            write_str(&mut self.buf, key);
            self.buf.extend_from_slice(b": ");
            write_value(&mut self.buf, value);
        }
        if let Some(id) = correlation {
            sep(&mut self.buf);
            plain_key(&mut self.buf, arg::CORRELATION);
            write_u64(&mut self.buf, id);
        }
        self.raw(b"}}");
    }

    fn spans(&mut self, trace: &Trace) -> io::Result<()> {
        for s in &trace.spans {
            self.event(b"X");
            self.str(b"cat", "Trace");
            let name = format!("{}{} ({})", s.prefix, s.name, s.iteration);
            self.str(b"name", &name);
            self.str(b"pid", "Spans");
            self.str(b"tid", &s.name);
            self.ts(b"ts", s.start_ns);
            self.key(b"dur");
            write_us(&mut self.buf, (s.end_ns - s.start_ns).max(0));
            self.raw(b", \"args\": {");
            plain_key(&mut self.buf, arg::OP_COUNT);
            write_u64(&mut self.buf, s.op_count);
            self.raw(b"}}");
            self.event(b"M");
            self.str(b"name", "process_sort_index");
            self.ts(b"ts", s.start_ns);
            self.str(b"pid", "Spans");
            self.int(b"tid", 0);
            self.raw(b", \"args\": {\"sort_index\": ");
            write_i64(&mut self.buf, SPANS_SORT_INDEX);
            self.raw(b"}}");
            self.event(b"i");
            self.str(b"s", "g");
            self.str(b"name", &format!("Iteration Start: {}", s.name));
            self.str(b"pid", "Traces");
            self.str(b"tid", &format!("Trace {}", s.name));
            self.ts(b"ts", s.start_ns);
            self.raw(b"}");
        }
        self.flush_if_full()
    }

    fn footer(&mut self, trace: &Trace, trace_name: &str) -> io::Result<()> {
        self.event(b"i");
        self.str(b"s", "g");
        self.str(b"name", "Record Window End");
        self.str(b"pid", "");
        self.str(b"tid", "");
        self.ts(b"ts", trace.window.end_ns);
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
fn plain_key(buf: &mut Vec<u8>, key: &str) {
    buf.push(b'"');
    buf.extend_from_slice(key.as_bytes());
    buf.extend_from_slice(b"\": ");
}
