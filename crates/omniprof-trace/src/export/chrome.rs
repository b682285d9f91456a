//! The Kineto-compatible Chrome trace JSON writer (`reference/trace-format.md`).
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
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("t.pt.trace.json");
//! let stats = chrome::save(&trace, &path).unwrap();
//! assert_eq!(stats.events, 2); // the op and the `Record Window End` marker
//! ```

use std::io::{self, Write};
use std::path::Path;

use crate::activity::{Activity, ActivityType, FlowKind};
use crate::export::json::{write_float, write_i64, write_str, write_u64, write_us, write_value};
use crate::export::save::save_with;
use crate::hash::FastMap;
use crate::keys::arg;
use crate::trace::Trace;

/// Sort index of the `Spans` process (0x20000000).
const SPANS_SORT_INDEX: i64 = 536_870_912;
/// Sibling rows for overlapping events get `tid + lane × LANE_STRIDE`: above any OS thread
/// id (Linux caps them at 2^22) or stream id, and below 2^31, because Perfetto folds larger
/// tids into the process's main thread.
pub(crate) const LANE_STRIDE: i64 = 1 << 24;
/// Lanes past this share the last one (their events may then overlap).
pub(crate) const MAX_LANE: usize = 127;
/// Viewer limits worth a warning (`reference/performance-anchors.md`, section 5).
const CHROME_TRACING_LIMIT: u64 = 256 << 20;
const PERFETTO_UI_LIMIT: u64 = 1 << 30;
const FLUSH_AT: usize = 1 << 16;

/// What a write produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Entries of `traceEvents`.
    pub events: u64,
    /// Bytes of JSON (before compression).
    pub bytes: u64,
    /// X events moved to a sibling row because they partly overlapped another.
    pub spilled: u64,
}

pub use crate::export::save::WriteError;

/// Saves `trace` to `path`, gzip-compressed when the path ends in `.gz`, through
/// [`save_with`]: the path ends up holding the whole trace or what it held before, and a
/// link, FIFO or device there is written through, never replaced.
pub fn save(trace: &Trace, path: impl AsRef<Path>) -> Result<WriteStats, WriteError> {
    let path = path.as_ref();
    let trace_name = trace
        .trace_name
        .clone()
        .unwrap_or_else(|| path.to_string_lossy().into_owned());
    let gz = path.extension().is_some_and(|e| e == "gz");
    let stats = save_with(path, |out| {
        if gz {
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(5));
            let stats = write(trace, &trace_name, &mut enc)?;
            enc.finish()?;
            Ok(stats)
        } else {
            write(trace, &trace_name, out)
        }
    })?;
    if stats.bytes > PERFETTO_UI_LIMIT {
        log::warn!(
            "{}: {} MB of JSON is more than the Perfetto UI loads comfortably (~1 GB); \
             consider .json.gz or a shorter capture",
            path.display(),
            stats.bytes >> 20
        );
    } else if stats.bytes > CHROME_TRACING_LIMIT {
        log::warn!(
            "{}: {} MB of JSON is more than chrome://tracing opens (~256 MB); use ui.perfetto.dev",
            path.display(),
            stats.bytes >> 20
        );
    }
    Ok(stats)
}

/// Writes `trace` as Chrome JSON to `out`, with `trace_name` as the `traceName`.
pub fn write<W: Write>(trace: &Trace, trace_name: &str, out: W) -> io::Result<WriteStats> {
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(FLUSH_AT * 2),
        base: trace.base_time_ns,
        stats: WriteStats::default(),
    };
    w.header(trace)?;
    w.rows(trace)?;
    let mut lanes = Lanes::default();
    let acts = &trace.activities;
    let key = |a: &Activity| {
        let (s, e) = written_span(a);
        (s, std::cmp::Reverse(e))
    };
    // Sessions and the reader hand over sorted traces; only sort what is not.
    if acts.windows(2).all(|p| key(&p[0]) <= key(&p[1])) {
        for a in acts {
            w.activity(a, &mut lanes)?;
        }
    } else {
        let mut order: Vec<&Activity> = acts.iter().collect();
        order.sort_by_key(|a| key(a));
        for a in order {
            w.activity(a, &mut lanes)?;
        }
    }
    w.stats.spilled = lanes.spilled;
    w.counters(trace)?;
    w.sibling_rows(trace, lanes)?;
    w.spans(trace)?;
    w.footer(trace, trace_name)?;
    Ok(w.stats)
}

/// A row: (pid, tid).
type RowId = (i64, i64);

/// Assigns X events, taken in time order, to lanes of their (pid, tid) row so that every
/// lane nests strictly: lane 0 is the row itself, lane k > 0 a sibling row.
#[derive(Default)]
struct Lanes {
    row_of: FastMap<RowId, usize>,
    /// Per row: its id and, per lane, the ends of the open events (a stack).
    rows: Vec<(RowId, Vec<Vec<i64>>)>,
    spilled: u64,
}

impl Lanes {
    fn assign(&mut self, row_id: RowId, start: i64, end: i64) -> u32 {
        let rows = &mut self.rows;
        let row = *self.row_of.entry(row_id).or_insert_with(|| {
            rows.push((row_id, vec![Vec::new()]));
            rows.len() - 1
        });
        let stacks = &mut rows[row].1;
        let lane = (0..=MAX_LANE)
            .find(|&lane| {
                if lane == stacks.len() {
                    stacks.push(Vec::new());
                }
                let stack = &mut stacks[lane];
                while stack.last().is_some_and(|&top| top <= start) {
                    stack.pop();
                }
                stack.last().is_none_or(|&top| end <= top)
            })
            .unwrap_or(MAX_LANE);
        stacks[lane].push(end);
        self.spilled += (lane > 0) as u64;
        lane as u32
    }

    /// Rows that needed lanes beyond the first: (pid, tid) and how many more.
    fn extra_rows(self) -> Vec<(RowId, u32)> {
        let mut extra: Vec<_> = self
            .rows
            .into_iter()
            .filter(|(_, lanes)| lanes.len() > 1)
            .map(|(id, lanes)| (id, lanes.len() as u32 - 1))
            .collect();
        extra.sort_unstable();
        extra
    }
}

/// The (start, end) an X event is written with: GPU user annotations are widened by 1 ns on
/// each side so they enclose the kernels they were built from.
#[inline]
fn written_span(a: &Activity) -> (i64, i64) {
    let end = a.start_ns + a.duration_ns();
    if a.kind == ActivityType::GpuUserAnnotation {
        (a.start_ns - 1, end + 1)
    } else {
        (a.start_ns, end)
    }
}

fn row_tid(resource: i64) -> i64 {
    resource.checked_abs().unwrap_or(0)
}

struct Writer<W> {
    out: W,
    buf: Vec<u8>,
    base: i64,
    stats: WriteStats,
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
        self.stats.bytes += self.buf.len() as u64;
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Starts an event object; every event but the first is preceded by a comma.
    #[inline(always)]
    fn event(&mut self, ph: &[u8]) {
        if self.stats.events > 0 {
            self.raw(b",\n  ");
        } else {
            self.raw(b"\n  ");
        }
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

    fn header(&mut self, trace: &Trace) -> io::Result<()> {
        self.raw(b"{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
        for (i, p) in trace.device_properties.iter().enumerate() {
            self.raw(if i == 0 { b"\n    " } else { b",\n    " });
            write_value(&mut self.buf, p);
        }
        self.raw(b"\n  ],\n");
        for (key, value) in &trace.metadata {
            self.raw(b"  ");
            write_str(&mut self.buf, key);
            self.raw(b": ");
            write_value(&mut self.buf, value);
            self.raw(b",\n");
        }
        self.raw(b"  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
        write_i64(&mut self.buf, self.base);
        self.raw(b",\n  \"traceEvents\": [");
        self.flush()
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
