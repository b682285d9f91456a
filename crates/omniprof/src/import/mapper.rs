//! Turns parsed events into [`TraceItem`]s: rows merged per pid / (pid, tid), flows attached
//! to their activity, spans rebuilt, `args` lifted into fields, the capture window derived.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::value::RawValue;

use super::event::{micros_to_ns, Id, RawEvent};
use super::{ArgFilter, ReadStats, TraceItem};
use crate::activity::{Activity, ActivityType, Flow, FlowKind};
use crate::export::chrome::{LANE_STRIDE, MAX_LANE};
use crate::trace::{ProcessRow, Span, ThreadRow};
use crate::value::Value;

/// What an event needs to be usable but lacks; becomes [`ReadErrorKind::Invalid`](super::ReadErrorKind::Invalid).
pub(super) type EventError = String;

/// The args read into fields ([`Activity::correlation`], [`Activity::linked_correlation`])
/// whatever the [`ArgFilter`].
const LIFTED_ARGS: [&str; 2] = ["External id", "correlation"];

pub(super) struct EventMapper {
    /// `baseTimeNanoseconds` as far as known (0 until it is read).
    pub base_ns: i64,
    pub stats: ReadStats,
    /// Which other args activities keep.
    args: ArgFilter,
    names: HashSet<Arc<str>>,
    /// The last activity, held back until the next one because the flow event that belongs
    /// to it follows it.
    pending: Option<Activity>,
    processes: Vec<ProcessRow>,
    process_index: HashMap<i64, usize>,
    threads: Vec<ThreadRow>,
    thread_index: HashMap<(i64, i64), usize>,
    rows_start: Option<i64>,
    activities_start: Option<i64>,
    activities_end: Option<i64>,
    window_end: Option<i64>,
}

/// What one row event sets.
enum RowEvent<'e> {
    ProcessName(&'e str),
    ProcessLabel(&'e str),
    ProcessSortIndex(i64),
    ThreadName(&'e str),
    ThreadSortIndex(i64),
}

/// The type of a `cat`: an exact name without allocating, else [`ActivityType::parse`]
/// (case folding, generic names).
fn activity_type(cat: &str) -> Option<ActivityType> {
    ActivityType::ALL
        .iter()
        .copied()
        .find(|t| t.name() == cat)
        .or_else(|| ActivityType::parse(cat).ok())
}

/// The row an event belongs to, for events the writer moved to a sibling row
/// (`tid + lane × LANE_STRIDE`, lanes 1 to `MAX_LANE`). A foreign trace whose own tids fall
/// in that range would be folded too; Linux thread ids and stream ids never do.
fn lane_row(tid: i64) -> i64 {
    let lane = tid / LANE_STRIDE;
    if (1..=MAX_LANE as i64).contains(&lane) {
        tid % LANE_STRIDE
    } else {
        tid
    }
}

fn as_u64(value: &Value) -> Option<u64> {
    match *value {
        Value::Int(v) => u64::try_from(v).ok(),
        Value::UInt(v) => Some(v),
        _ => None,
    }
}

/// The device of a counter row: `"GPU <n> Counters"` (`hardware_counters`) or an integer.
fn counter_device(pid: &Id) -> Option<i64> {
    pid.as_int().or_else(|| match pid {
        Id::Str(s) => s
            .strip_prefix("GPU ")?
            .strip_suffix(" Counters")?
            .parse()
            .ok(),
        Id::Int(_) => None,
    })
}

/// Splits a span's event name `<prefix><span name> (<iteration>)` into prefix and iteration.
fn split_span_name(event_name: &str, span_name: &str) -> (String, i64) {
    let (head, iteration) = event_name
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once(" ("))
        .and_then(|(head, n)| Some((head, n.parse().ok()?)))
        .unwrap_or((event_name, 0));
    let prefix = head.strip_suffix(span_name).unwrap_or_default();
    (prefix.to_string(), iteration)
}

impl EventMapper {
    pub fn new(args: ArgFilter) -> Self {
        Self {
            base_ns: 0,
            stats: ReadStats::default(),
            args,
            names: HashSet::new(),
            pending: None,
            processes: Vec::new(),
            process_index: HashMap::new(),
            threads: Vec::new(),
            thread_index: HashMap::new(),
            rows_start: None,
            activities_start: None,
            activities_end: None,
            window_end: None,
        }
    }

    /// One shared `Arc` per distinct name or arg key, so repeated ones cost one allocation.
    /// (Arg values are not interned: they are far more varied, and the set only grows.)
    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(name) = self.names.get(s) {
            return Arc::clone(name);
        }
        let name: Arc<str> = Arc::from(s);
        self.names.insert(Arc::clone(&name));
        name
    }

    /// The microseconds of `field` (`ts` or `dur`) in nanoseconds.
    fn micros(raw: &RawValue, field: &str) -> Result<i64, EventError> {
        let raw = raw.get();
        micros_to_ns(raw).ok_or_else(|| {
            // The value may be anything, a whole object included: quote only its start.
            let end = raw.char_indices().nth(40).map_or(raw.len(), |(i, _)| i);
            let more = if end < raw.len() { "..." } else { "" };
            format!(
                "`{field}`: expected a number of microseconds, found {}{more}",
                &raw[..end]
            )
        })
    }

    fn start_ns(&self, ev: &RawEvent) -> Result<i64, EventError> {
        let ts = ev.ts.ok_or_else(|| "missing field `ts`".to_string())?;
        Self::micros(ts, "ts")?
            .checked_add(self.base_ns)
            .ok_or_else(|| "`ts` is out of range".to_string())
    }

    /// `start` plus the event's `dur` (0 when absent).
    fn end_ns(start: i64, ev: &RawEvent) -> Result<i64, EventError> {
        let dur = ev.dur.map_or(Ok(0), |dur| Self::micros(dur, "dur"))?;
        start
            .checked_add(dur)
            .ok_or_else(|| "`dur` is out of range".to_string())
    }

    /// Maps one event, delivering what is complete to `sink`.
    pub fn event(
        &mut self,
        ev: RawEvent,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(), EventError> {
        self.stats.events += 1;
        match ev.ph.as_deref() {
            Some("X") => self.complete(ev, sink),
            Some("i") => self.instant(ev, sink),
            Some("C") => self.counter(ev, sink),
            Some("M") => self.row(ev),
            Some("s") => self.flow(ev, true),
            Some("f") => self.flow(ev, false),
            _ => {
                self.stats.unknown_phase += 1;
                Ok(())
            }
        }
    }

    fn complete(
        &mut self,
        ev: RawEvent,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(), EventError> {
        let cat = ev.cat.as_deref().unwrap_or_default();
        if cat == "Trace" {
            return self.span(ev, sink);
        }
        let Some(kind) = activity_type(cat) else {
            self.stats.unknown_category += 1;
            return Ok(());
        };
        let (Some(device), Some(resource)) = (
            Self::id(&ev.pid, "pid")?.as_int(),
            Self::id(&ev.tid, "tid")?.as_int(),
        ) else {
            self.stats.unsupported_id += 1;
            return Ok(());
        };
        let mut start = self.start_ns(&ev)?;
        let mut end = Self::end_ns(start, &ev)?;
        if kind == ActivityType::GpuUserAnnotation && end - start >= 2 {
            // Undo the writer's widening (1 ns on each side).
            (start, end) = (start + 1, end - 1);
        }
        let activity = self.activity(kind, ev, device, lane_row(resource), start, end)?;
        self.push(activity, sink);
        Ok(())
    }

    fn instant(
        &mut self,
        ev: RawEvent,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(), EventError> {
        if ev.name.as_deref() == Some("Record Window End") {
            self.window_end = Some(self.start_ns(&ev)?);
            return Ok(());
        }
        if matches!(&ev.pid, Some(Id::Str(pid)) if &**pid == "Traces") {
            // `Iteration Start` markers; the writer regenerates them from the spans.
            self.stats.regenerated += 1;
            return Ok(());
        }
        let Some(kind) = ev.cat.as_deref().and_then(activity_type) else {
            self.stats.unknown_category += 1;
            return Ok(());
        };
        let (Some(device), Some(resource)) = (
            Self::id(&ev.pid, "pid")?.as_int(),
            Self::id(&ev.tid, "tid")?.as_int(),
        ) else {
            self.stats.unsupported_id += 1;
            return Ok(());
        };
        let start = self.start_ns(&ev)?;
        let activity = self.activity(kind, ev, device, resource, start, start)?;
        self.push(activity, sink);
        Ok(())
    }

    fn counter(
        &mut self,
        ev: RawEvent,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(), EventError> {
        let Some(kind) = ev.cat.as_deref().and_then(activity_type) else {
            self.stats.unknown_category += 1;
            return Ok(());
        };
        let (Some(device), Some(resource)) = (
            counter_device(Self::id(&ev.pid, "pid")?),
            Self::id(&ev.tid, "tid")?.as_int(),
        ) else {
            self.stats.unsupported_id += 1;
            return Ok(());
        };
        let start = self.start_ns(&ev)?;
        let mut activity = self.activity(kind, ev, device, resource, start, start)?;
        // Numbers are the samples; `hardware_counters` writes one metric per event as
        // `{"": value}` with the metric as the event name.
        let mut args = Vec::new();
        for (key, value) in std::mem::take(&mut activity.args) {
            match value.as_f64() {
                Some(v) => {
                    let key = if key.is_empty() {
                        Arc::clone(&activity.name)
                    } else {
                        key
                    };
                    activity.counters.push((key, v));
                }
                None => args.push((key, value)),
            }
        }
        activity.args = args;
        self.push(activity, sink);
        Ok(())
    }

    /// An activity with the event's name and `args`, `External id` and `correlation` lifted
    /// into fields.
    fn activity(
        &mut self,
        kind: ActivityType,
        ev: RawEvent,
        device: i64,
        resource: i64,
        start_ns: i64,
        end_ns: i64,
    ) -> Result<Activity, EventError> {
        let filter = &self.args;
        // Counters keep every arg: their numbers are the samples.
        let args =
            ev.args(|key| kind.is_counter() || LIFTED_ARGS.contains(&key) || filter.keeps(key))?;
        let name = self.intern(ev.name.as_deref().unwrap_or_default());
        let mut activity = Activity::new(kind, name, device, resource, start_ns, end_ns);
        let linked = !kind.has_own_external_id();
        activity.args.reserve(args.0.len());
        for (key, value) in args.0 {
            match (&*key, as_u64(&value)) {
                ("External id", Some(id)) if linked => activity.linked_correlation = Some(id),
                ("External id", Some(id)) => activity.correlation = id,
                ("correlation", Some(id)) if linked => activity.correlation = id,
                _ => {
                    let key = self.intern(&key);
                    activity.args.push((key, value));
                }
            }
        }
        Ok(activity)
    }

    fn id<'e, 'a>(id: &'e Option<Id<'a>>, field: &str) -> Result<&'e Id<'a>, EventError> {
        id.as_ref()
            .ok_or_else(|| format!("missing field `{field}`"))
    }

    /// Holds `activity` back for its flow event and delivers the one held before.
    fn push(&mut self, activity: Activity, sink: &mut impl FnMut(TraceItem)) {
        self.activities_start = Some(
            self.activities_start
                .map_or(activity.start_ns, |t| t.min(activity.start_ns)),
        );
        self.activities_end = Some(
            self.activities_end
                .map_or(activity.end_ns, |t| t.max(activity.end_ns)),
        );
        if let Some(done) = self.pending.replace(activity) {
            sink(TraceItem::Activity(done));
        }
    }

    fn flush(&mut self, sink: &mut impl FnMut(TraceItem)) {
        if let Some(done) = self.pending.take() {
            sink(TraceItem::Activity(done));
        }
    }

    /// Attaches a flow end to the activity just before it on the same row and time.
    fn flow(&mut self, ev: RawEvent, start: bool) -> Result<(), EventError> {
        let kind = ev.cat.as_deref().and_then(FlowKind::from_name);
        let id = ev
            .id
            .as_ref()
            .and_then(Id::as_int)
            .and_then(|id| u64::try_from(id).ok());
        let pid = Self::id(&ev.pid, "pid")?.as_int();
        let tid = Self::id(&ev.tid, "tid")?.as_int().map(lane_row);
        let ts = self.start_ns(&ev)?;
        match (&mut self.pending, kind, id) {
            (Some(a), Some(kind), Some(id))
                if a.flow.is_none()
                    && Some(a.device) == pid
                    && Some(a.resource) == tid
                    && a.start_ns == ts =>
            {
                a.flow = Some(Flow { id, kind, start });
            }
            _ => self.stats.unmatched_flow += 1,
        }
        Ok(())
    }

    fn span(&mut self, ev: RawEvent, sink: &mut impl FnMut(TraceItem)) -> Result<(), EventError> {
        let name = Self::id(&ev.tid, "tid")?.to_text();
        let start_ns = self.start_ns(&ev)?;
        let end_ns = Self::end_ns(start_ns, &ev)?;
        let (prefix, iteration) = split_span_name(ev.name.as_deref().unwrap_or_default(), &name);
        let args = ev.args(|key| key == "Op count")?;
        let op_count = args.get("Op count").and_then(as_u64).unwrap_or(0);
        self.flush(sink);
        sink(TraceItem::Span(Span {
            name,
            prefix,
            iteration,
            start_ns,
            end_ns,
            op_count,
        }));
        Ok(())
    }

    /// A process or thread row event, merged into the row of its pid or (pid, tid).
    fn row(&mut self, ev: RawEvent) -> Result<(), EventError> {
        let args = ev.args(|key| matches!(key, "name" | "labels" | "sort_index"))?;
        let text = |key| args.get(key).and_then(Value::as_str);
        let int = |key| args.get(key).and_then(Value::as_i64);
        let row = match ev.name.as_deref() {
            Some("process_name") => text("name").map(RowEvent::ProcessName),
            Some("process_labels") => text("labels").map(RowEvent::ProcessLabel),
            Some("process_sort_index") => int("sort_index").map(RowEvent::ProcessSortIndex),
            Some("thread_name") => text("name").map(RowEvent::ThreadName),
            Some("thread_sort_index") => int("sort_index").map(RowEvent::ThreadSortIndex),
            _ => None,
        };
        let Some(row) = row else {
            self.stats.unknown_metadata += 1;
            return Ok(());
        };
        let pid = Self::id(&ev.pid, "pid")?;
        let Some(pid) = pid.as_int() else {
            match pid {
                // The spans' sort row; the writer regenerates it.
                Id::Str(s) if &**s == "Spans" => self.stats.regenerated += 1,
                _ => self.stats.unsupported_id += 1,
            }
            return Ok(());
        };
        let tid = match row {
            RowEvent::ThreadName(_) | RowEvent::ThreadSortIndex(_) => {
                Self::id(&ev.tid, "tid")?.as_int()
            }
            _ => Some(0),
        };
        let Some(tid) = tid else {
            self.stats.unsupported_id += 1;
            return Ok(());
        };
        if tid != lane_row(tid) {
            // A sibling row the writer made for overlapping events; its events come back to
            // their own row.
            self.stats.regenerated += 1;
            return Ok(());
        }
        if ev.ts.is_some() {
            let ts = self.start_ns(&ev)?;
            self.rows_start = Some(self.rows_start.map_or(ts, |t| t.min(ts)));
        }
        match row {
            RowEvent::ProcessName(name) => self.process(pid).name = name.to_string(),
            RowEvent::ProcessLabel(label) => self.process(pid).label = label.to_string(),
            RowEvent::ProcessSortIndex(index) => self.process(pid).sort_index = index,
            RowEvent::ThreadName(name) => self.thread(pid, tid).name = name.to_string(),
            RowEvent::ThreadSortIndex(index) => self.thread(pid, tid).sort_index = index,
        }
        Ok(())
    }

    /// The row of `pid`, created with defaults on first use.
    fn process(&mut self, pid: i64) -> &mut ProcessRow {
        let processes = &mut self.processes;
        let index = *self.process_index.entry(pid).or_insert_with(|| {
            processes.push(ProcessRow {
                pid,
                name: String::new(),
                label: String::new(),
                sort_index: pid,
            });
            processes.len() - 1
        });
        &mut processes[index]
    }

    /// The row of (`pid`, `tid`), created with defaults on first use.
    fn thread(&mut self, pid: i64, tid: i64) -> &mut ThreadRow {
        let threads = &mut self.threads;
        let index = *self.thread_index.entry((pid, tid)).or_insert_with(|| {
            threads.push(ThreadRow {
                pid,
                tid,
                name: String::new(),
                sort_index: tid,
            });
            threads.len() - 1
        });
        &mut threads[index]
    }

    /// Delivers the held-back activity, the rows and the window: called once `traceEvents`
    /// ends, or when reading stops inside it.
    pub fn finish(&mut self, sink: &mut impl FnMut(TraceItem)) {
        self.flush(sink);
        for row in self.processes.drain(..) {
            sink(TraceItem::Process(row));
        }
        for row in self.threads.drain(..) {
            sink(TraceItem::Thread(row));
        }
        let start_ns = self
            .rows_start
            .or(self.activities_start)
            .unwrap_or(self.base_ns);
        let end_ns = self.window_end.or(self.activities_end).unwrap_or(start_ns);
        sink(TraceItem::Window { start_ns, end_ns });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_split_into_prefix_and_iteration() {
        let split = |e: &str, n: &str| split_span_name(e, n);
        assert_eq!(
            split("PyTorch Profiler (0)", "PyTorch Profiler"),
            (String::new(), 0)
        );
        assert_eq!(
            split("GPU: omniprof (12)", "omniprof"),
            ("GPU: ".into(), 12)
        );
        assert_eq!(split("omniprof", "omniprof"), (String::new(), 0));
        assert_eq!(split("other (x)", "omniprof"), (String::new(), 0));
    }

    #[test]
    fn counter_rows_name_their_device() {
        let dev = |t: &str| counter_device(&serde_json::from_str::<Id>(t).unwrap());
        assert_eq!(dev("\"GPU 3 Counters\""), Some(3));
        assert_eq!(dev("2"), Some(2));
        assert_eq!(dev("\"GPU x Counters\""), None);
    }

    #[test]
    fn exact_cat_names_and_generic_names_both_parse() {
        assert_eq!(
            activity_type("kernel"),
            Some(ActivityType::ConcurrentKernel)
        );
        assert_eq!(activity_type("Runtime"), Some(ActivityType::CudaRuntime));
        assert_eq!(activity_type("Trace"), None);
    }
}
