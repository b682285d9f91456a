//! Turns parsed events into [`TraceItem`]s: rows merged per pid / (pid, tid), flows attached
//! to their activity, spans rebuilt, `args` lifted into fields, the capture window derived.
//!
//! The work is split in two so that events can be converted on several threads: the
//! [`Converter`] turns one event into a [`Mapped`] on its own, from nothing but the event
//! (and the base time and the [`ArgFilter`]); the [`EventMapper`] applies the `Mapped` in
//! file order, which is where everything that depends on the events before lies: the flow
//! attached to its activity, the rows merged, the window, the counts.
//!
//! A flow end (`s` or `f`) belongs to an activity of its row as Perfetto binds it
//! ([`Binding`]): an `s`, or an `f` with `"bp": "e"`, to the innermost activity enclosing its
//! time (Kineto's start at it: older Kineto's and other tools' lie inside it), another `f` to
//! the next activity that begins after it. Kineto writes it right after that activity, but
//! other writers and tools that rewrite traces put it anywhere nearby, before or after (even
//! after another activity of the same row). So the mapper holds the last [`FLOW_WINDOW`]
//! items back (in file order, which is kept), and a flow end that finds its activity in none
//! of them waits as long for it to come: memory stays bounded by the window, and a flow end
//! farther than that from its activity is counted in
//! [`ReadStats::unmatched_flow`](super::ReadStats::unmatched_flow).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use super::event::{ArgFilter, Args, Id, KeptArgs, Micros, RawEvent};
use super::stats::ReadStats;
use omniprof_trace::keys::arg;
use omniprof_trace::layout::lane_row;
use omniprof_trace::TraceItem;
use omniprof_trace::Value;
use omniprof_trace::{cache_slot, FastHasher};
use omniprof_trace::{Activity, ActivityType, Flow, FlowKind};
use omniprof_trace::{CounterSample, CounterTrack};
use omniprof_trace::{ProcessRow, Span, ThreadRow, Window};

/// What an event needs to be usable but lacks; becomes [`ReadErrorKind::Invalid`](super::ReadErrorKind::Invalid).
pub(super) type EventError = String;

/// One event, converted: everything about it that does not depend on the events before.
pub(super) enum Mapped {
    /// An activity, and how many of its args were skipped for nesting too deep.
    Activity(Activity, u64),
    Span(Span),
    /// A counter sample, and how many of its values were not numbers.
    Counter {
        track: CounterTrack,
        sample: CounterSample,
        dropped: u64,
    },
    /// One end of a flow, for its activity.
    Flow(FlowEnd),
    /// A piece of a process or thread row; `ts` (when the event has one) is a candidate
    /// window start.
    Row {
        row: RowEvent,
        ts: Option<i64>,
    },
    /// `Record Window End`.
    WindowEnd(i64),
    /// An event the model has no place for.
    Skipped(Skip),
}

/// Why an event was skipped: the [`ReadStats`] count it goes to.
pub(super) enum Skip {
    Regenerated,
    UnknownPhase,
    UnknownCategory,
    UnknownMetadata,
    UnsupportedId,
}

/// How many events apart a flow end and its activity may be: the activities held back for
/// the flow ends that follow them, and the events a flow end waits for its activity.
pub(super) const FLOW_WINDOW: usize = 4096;

/// Which activity of its row a flow end binds to, as Perfetto's trace processor binds it
/// (the slice at the top of its thread's stack, or the next slice to begin there).
#[derive(Clone, Copy, PartialEq)]
enum Binding {
    /// The innermost activity enclosing the flow end's time: an `s`, an `f` with
    /// `"bp": "e"`.
    Enclosing,
    /// The first activity to begin after the flow end: an `f` without `"bp": "e"`.
    Next,
}

/// An `s` or `f` event: what it takes to match it to its activity.
pub(super) struct FlowEnd {
    kind: Option<FlowKind>,
    id: Option<u64>,
    device: Option<i64>,
    resource: Option<i64>,
    ts: i64,
    start: bool,
    binding: Binding,
}

impl FlowEnd {
    /// The flow, when its kind and id are known.
    fn as_flow(&self) -> Option<Flow> {
        Some(Flow {
            id: self.id?,
            kind: self.kind?,
            start: self.start,
        })
    }

    /// Whether `a` is an activity of this end's row.
    fn on_row(&self, a: &Activity) -> bool {
        Some(a.device) == self.device && Some(a.resource) == self.resource
    }

    /// Whether this end surely belongs to `a`, an activity of its row with no flow yet: `a`
    /// starts at its time (nothing nested deeper can enclose it then, for an enclosing end),
    /// or, for a flow end bound to the next activity, `a` comes after it in the file and
    /// begins at or after its time.
    fn belongs_to(&self, a: &Activity, a_after: bool) -> bool {
        a.flow.is_none()
            && self.on_row(a)
            && match self.binding {
                Binding::Enclosing => a.start_ns == self.ts,
                Binding::Next => a_after && a.start_ns >= self.ts,
            }
    }

    /// Whether `a`, of its row, could take this end but another could be the better: it
    /// encloses the end's time (a deeper one may too), or begins after it (an earlier one
    /// may too).
    fn could_take(&self, a: &Activity) -> bool {
        match self.binding {
            Binding::Enclosing => a.start_ns <= self.ts && self.ts <= a.end_ns,
            Binding::Next => a.start_ns > self.ts,
        }
    }

    /// Whether an activity spanning `a` (start, end) is a better match than one spanning
    /// `b` (both [`Self::could_take`] this end): deeper (it starts later, or as late and ends
    /// sooner) for an enclosing end, earlier for an end bound to the next activity.
    fn better(&self, a: (i64, i64), b: (i64, i64)) -> bool {
        match self.binding {
            Binding::Enclosing => (a.0, -a.1) > (b.0, -b.1),
            Binding::Next => a.0 < b.0,
        }
    }
}

/// A flow end given to an activity that [`FlowEnd::could_take`] it, which a later activity
/// of the file may take from it for the next [`FLOW_WINDOW`] events, being a better match
/// (a flow event that comes before its slice, and after a slice enclosing that one).
struct Provisional {
    /// The flow event's number ([`ReadStats::events`] then).
    at: u64,
    /// The holder's number among the items ever held.
    holder: u64,
    /// The holder's start and end.
    span: (i64, i64),
    flow: FlowEnd,
}

/// What one row event sets.
pub(super) enum RowEvent {
    ProcessName(i64, String),
    ProcessLabel(i64, String),
    ProcessSortIndex(i64, i64),
    ThreadName((i64, i64), String),
    ThreadSortIndex((i64, i64), i64),
}

pub(super) fn as_u64(value: &Value) -> Option<u64> {
    match *value {
        Value::Int(v) => u64::try_from(v).ok(),
        Value::UInt(v) => Some(v),
        _ => None,
    }
}

/// The flow kind of a flow event's `cat`: the model's names, and the names Kineto wrote
/// before them (`async_gpu` for `ac2g` in older traces, as `cat` or `name`, and
/// `async_cpu_to_gpu`; `fwd_bwd` and `forward_backward` for `fwdbwd`).
fn flow_kind(cat: &str) -> Option<FlowKind> {
    FlowKind::from_name(cat).or(match cat {
        "async_gpu" | "async_cpu_to_gpu" => Some(FlowKind::Ac2g),
        "fwd_bwd" | "forward_backward" => Some(FlowKind::FwdBwd),
        _ => None,
    })
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
pub(super) fn split_span_name(event_name: &str, span_name: &str) -> (String, i64) {
    let (head, iteration) = event_name
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once(" ("))
        .and_then(|(head, n)| Some((head, n.parse().ok()?)))
        .unwrap_or((event_name, 0));
    let prefix = head.strip_suffix(span_name).unwrap_or_default();
    (prefix.to_string(), iteration)
}

/// An [`EventError`] saying `message`: made out of line, so that the per-event code that may
/// fail stays small enough to inline.
#[cold]
#[inline(never)]
fn event_error(message: &str) -> EventError {
    message.to_string()
}

/// The [`EventError`] for a missing `field`, made out of line as [`event_error`] is.
#[cold]
#[inline(never)]
fn missing(field: &str) -> EventError {
    format!("missing field `{field}`")
}

/// Converts events one at a time, each on its own. One per reading thread.
#[derive(Clone)]
pub(super) struct Converter {
    /// `baseTimeNanoseconds` as far as known (0 until it is read).
    pub base_ns: i64,
    /// Which other args activities keep.
    pub args: KeptArgs,
    /// The longest event read ([`Limits::event_bytes`](omniprof_trace::Limits::event_bytes)); the
    /// parallel reader leaves a longer one to the sequential one, which reports it.
    pub max_event_bytes: usize,
    names: HashSet<Arc<str>, BuildHasherDefault<FastHasher>>,
    /// The names interned last, each in the slot of its [`name_key`]: most events repeat
    /// a recent name, found here with one comparison instead of hashing the whole name for
    /// `names`.
    recent: Box<[Option<Arc<str>>; RECENT_NAMES]>,
}

/// The slots of [`Converter::recent`].
const RECENT_NAMES: usize = 256;

/// A key for a name's slot in [`Converter::recent`], from its length and its first and last
/// 8 bytes (which tell apart the names that share a long prefix, such as kernels').
fn name_key(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let (head, tail) = match (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
        (Some(head), Some(tail)) => (u64::from_le_bytes(*head), u64::from_le_bytes(*tail)),
        _ => (bytes.iter().fold(0, |w, &b| w << 8 | u64::from(b)), 0),
    };
    head ^ tail.rotate_left(23) ^ (bytes.len() as u64).rotate_right(8)
}

impl Converter {
    pub(super) fn new(args: ArgFilter) -> Self {
        Self {
            base_ns: 0,
            args: KeptArgs::new(args),
            max_event_bytes: usize::MAX,
            names: HashSet::default(),
            recent: Box::new([const { None }; RECENT_NAMES]),
        }
    }

    /// One shared `Arc` per distinct name or arg key, so repeated ones cost one allocation
    /// (per converter). Arg values are not interned: they are far more varied, and the set
    /// only grows.
    fn intern(&mut self, s: &str) -> Arc<str> {
        let slot = &mut self.recent[cache_slot::<RECENT_NAMES>(name_key(s))];
        if let Some(name) = slot.as_ref().filter(|name| ***name == *s) {
            return Arc::clone(name);
        }
        let name = match self.names.get(s) {
            Some(name) => Arc::clone(name),
            None => {
                let name: Arc<str> = Arc::from(s);
                self.names.insert(Arc::clone(&name));
                name
            }
        };
        *slot = Some(Arc::clone(&name));
        name
    }

    /// The microseconds of `field` (`ts` or `dur`) in nanoseconds.
    ///
    /// This and the other helpers run for every event: inlined, with their errors made out of
    /// line, so that the event's fields stay in registers.
    #[inline]
    fn micros(micros: Micros, field: &str) -> Result<i64, EventError> {
        micros.ns().ok_or_else(|| Self::not_micros(micros.0, field))
    }

    /// The error for `raw`, which is not a number of microseconds, in `field`.
    #[cold]
    #[inline(never)]
    fn not_micros(raw: &str, field: &str) -> EventError {
        // The value may be anything, a whole object included: quote only its start.
        let end = raw.char_indices().nth(40).map_or(raw.len(), |(i, _)| i);
        let more = if end < raw.len() { "..." } else { "" };
        format!(
            "`{field}`: expected a number of microseconds, found {}{more}",
            &raw[..end]
        )
    }

    #[inline]
    fn start_ns(&self, ev: &RawEvent) -> Result<i64, EventError> {
        let ts = ev.ts.ok_or_else(|| missing("ts"))?;
        Self::micros(ts, "ts")?
            .checked_add(self.base_ns)
            .ok_or_else(|| event_error("`ts` is out of range"))
    }

    /// `start` plus the event's `dur` (0 when absent).
    #[inline]
    fn end_ns(start: i64, ev: &RawEvent) -> Result<i64, EventError> {
        let dur = ev.dur.map_or(Ok(0), |dur| Self::micros(dur, "dur"))?;
        start
            .checked_add(dur)
            .ok_or_else(|| event_error("`dur` is out of range"))
    }

    #[inline]
    fn id<'e, 'a>(id: &'e Option<Id<'a>>, field: &str) -> Result<&'e Id<'a>, EventError> {
        id.as_ref().ok_or_else(|| missing(field))
    }

    /// The event's `pid` and `tid` when both are integers.
    #[inline]
    fn int_ids(ev: &RawEvent) -> Result<Option<(i64, i64)>, EventError> {
        let pid = Self::id(&ev.pid, "pid")?.as_int();
        Ok(pid.zip(Self::id(&ev.tid, "tid")?.as_int()))
    }

    /// Converts one event; an error is an event the mapper cannot use. The event is taken
    /// by reference: it is large, and moving it at each call cost a copy.
    pub(super) fn convert(&mut self, ev: &mut RawEvent) -> Result<Mapped, EventError> {
        match ev.ph.as_deref() {
            Some("X") => self.complete(ev),
            Some("i") => self.instant(ev),
            Some("C") => self.counter(ev),
            Some("M") => self.row(ev),
            Some("s") => self.flow(ev, true),
            Some("f") => self.flow(ev, false),
            _ => Ok(Mapped::Skipped(Skip::UnknownPhase)),
        }
    }

    fn complete(&mut self, ev: &mut RawEvent) -> Result<Mapped, EventError> {
        let cat = ev.cat.as_deref().unwrap_or_default();
        if cat == "Trace" {
            return self.span(ev);
        }
        let Some(kind) = ev.activity_type() else {
            return Ok(Mapped::Skipped(Skip::UnknownCategory));
        };
        let Some((device, resource)) = Self::int_ids(ev)? else {
            return Ok(Mapped::Skipped(Skip::UnsupportedId));
        };
        let mut start = self.start_ns(ev)?;
        let mut end = Self::end_ns(start, ev)?;
        if kind == ActivityType::GpuUserAnnotation && end - start >= 2 {
            // Undo the writer's widening (1 ns on each side).
            (start, end) = (start + 1, end - 1);
        }
        let (activity, too_deep) =
            self.activity(kind, ev, device, lane_row(resource), start, end)?;
        Ok(Mapped::Activity(activity, too_deep))
    }

    fn instant(&mut self, ev: &mut RawEvent) -> Result<Mapped, EventError> {
        if ev.name.as_deref() == Some("Record Window End") {
            return Ok(Mapped::WindowEnd(self.start_ns(ev)?));
        }
        if matches!(&ev.pid, Some(Id::Str(pid)) if &**pid == "Traces") {
            // `Iteration Start` markers; the writer regenerates them from the spans.
            return Ok(Mapped::Skipped(Skip::Regenerated));
        }
        let Some(kind) = ev.activity_type() else {
            return Ok(Mapped::Skipped(Skip::UnknownCategory));
        };
        let Some((device, resource)) = Self::int_ids(ev)? else {
            return Ok(Mapped::Skipped(Skip::UnsupportedId));
        };
        let start = self.start_ns(ev)?;
        let (activity, too_deep) = self.activity(kind, ev, device, resource, start, start)?;
        Ok(Mapped::Activity(activity, too_deep))
    }

    fn counter(&mut self, ev: &mut RawEvent) -> Result<Mapped, EventError> {
        let Some(kind) = ev.activity_type() else {
            return Ok(Mapped::Skipped(Skip::UnknownCategory));
        };
        let (Some(device), Some(resource)) = (
            counter_device(Self::id(&ev.pid, "pid")?),
            Self::id(&ev.tid, "tid")?.as_int(),
        ) else {
            return Ok(Mapped::Skipped(Skip::UnsupportedId));
        };
        let ts_ns = self.start_ns(ev)?;
        // Counter values are never filtered: they are the sample.
        let args = ev.args(&ArgFilter::All)?;
        let name = self.intern(ev.name.as_deref().unwrap_or_default());
        let mut values = Vec::with_capacity(args.kept.len());
        // An arg nested too deep to read is not a number either.
        let mut dropped = args.too_deep;
        for (key, value) in args.kept {
            match value.as_f64().filter(|v| v.is_finite()) {
                // `hardware_counters` writes one metric per event as `{"": value}`, the
                // metric being the event name.
                Some(v) if key.is_empty() => values.push((Arc::clone(&name), v)),
                Some(v) => values.push((self.intern(&key), v)),
                None => dropped += 1,
            }
        }
        Ok(Mapped::Counter {
            track: CounterTrack {
                kind,
                device,
                resource,
                name,
            },
            sample: CounterSample { ts_ns, values },
            dropped,
        })
    }

    /// An activity with the event's name and `args`, `External id` and `correlation` lifted
    /// into fields, and the number of args skipped for nesting too deep.
    fn activity(
        &mut self,
        kind: ActivityType,
        ev: &mut RawEvent,
        device: i64,
        resource: i64,
        start_ns: i64,
        end_ns: i64,
    ) -> Result<(Activity, u64), EventError> {
        // The args are used where they lie in the event: moving them out costs a copy.
        ev.keep_args(&self.args.filter)?;
        let name = self.intern(ev.name.as_deref().unwrap_or_default());
        let args = ev.read_args.get_or_insert_with(Args::default);
        let mut activity = Activity::new(kind, name, device, resource, start_ns, end_ns);
        let linked = !kind.has_own_external_id();
        // No room reserved: most args are lifted or filtered out, and an activity that
        // keeps none should cost no allocation (they are made on one thread and freed on
        // another, which makes the allocator take fresh memory for them).
        for (key, value) in args.kept.drain(..) {
            match (&*key, as_u64(&value)) {
                (arg::EXTERNAL_ID, Some(id)) if linked => activity.linked_correlation = Some(id),
                (arg::EXTERNAL_ID, Some(id)) => activity.correlation = id,
                (arg::CORRELATION, Some(id)) if linked => activity.correlation = id,
                _ => {
                    let key = self.intern(&key);
                    activity.args.push((key, value));
                }
            }
        }
        activity.unlink_own_external_id();
        Ok((activity, args.too_deep))
    }

    fn flow(&mut self, ev: &mut RawEvent, start: bool) -> Result<Mapped, EventError> {
        let kind = ev.cat.as_deref().and_then(flow_kind);
        let binding = if start || ev.bp.as_deref() == Some("e") {
            Binding::Enclosing
        } else {
            Binding::Next
        };
        let id = ev
            .id
            .as_ref()
            .and_then(Id::as_int)
            .and_then(|id| u64::try_from(id).ok());
        let device = Self::id(&ev.pid, "pid")?.as_int();
        let resource = Self::id(&ev.tid, "tid")?.as_int().map(lane_row);
        let ts = self.start_ns(ev)?;
        Ok(Mapped::Flow(FlowEnd {
            kind,
            id,
            device,
            resource,
            ts,
            start,
            binding,
        }))
    }

    fn span(&mut self, ev: &mut RawEvent) -> Result<Mapped, EventError> {
        let name = Self::id(&ev.tid, "tid")?.to_text();
        let start_ns = self.start_ns(ev)?;
        let end_ns = Self::end_ns(start_ns, ev)?;
        let (prefix, iteration) = split_span_name(ev.name.as_deref().unwrap_or_default(), &name);
        let args = ev.args(&self.args.filter)?;
        let op_count = args.get(arg::OP_COUNT).and_then(as_u64).unwrap_or(0);
        Ok(Mapped::Span(Span {
            name,
            prefix,
            iteration,
            start_ns,
            end_ns,
            op_count,
        }))
    }

    /// A process or thread row event: what it sets in the row of its pid or (pid, tid).
    fn row(&mut self, ev: &mut RawEvent) -> Result<Mapped, EventError> {
        let args = ev.args(&self.args.filter)?;
        let text = |key| args.get(key).and_then(Value::as_str).map(str::to_string);
        let int = |key| args.get(key).and_then(Value::as_i64);
        /// What the row event sets, before its pid and tid are known.
        enum Field {
            ProcessName(String),
            ProcessLabel(String),
            ProcessSortIndex(i64),
            ThreadName(String),
            ThreadSortIndex(i64),
        }
        let field = match ev.name.as_deref() {
            Some("process_name") => text("name").map(Field::ProcessName),
            Some("process_labels") => text("labels").map(Field::ProcessLabel),
            Some("process_sort_index") => int("sort_index").map(Field::ProcessSortIndex),
            Some("thread_name") => text("name").map(Field::ThreadName),
            Some("thread_sort_index") => int("sort_index").map(Field::ThreadSortIndex),
            _ => None,
        };
        let Some(field) = field else {
            return Ok(Mapped::Skipped(Skip::UnknownMetadata));
        };
        let pid = Self::id(&ev.pid, "pid")?;
        let Some(pid) = pid.as_int() else {
            return Ok(Mapped::Skipped(match pid {
                // The spans' sort row; the writer regenerates it.
                Id::Str(s) if &**s == "Spans" => Skip::Regenerated,
                _ => Skip::UnsupportedId,
            }));
        };
        let tid = match field {
            Field::ThreadName(_) | Field::ThreadSortIndex(_) => Self::id(&ev.tid, "tid")?.as_int(),
            _ => Some(0),
        };
        let Some(tid) = tid else {
            return Ok(Mapped::Skipped(Skip::UnsupportedId));
        };
        if tid != lane_row(tid) {
            // A sibling row the writer made for overlapping events; its events come back to
            // their own row.
            return Ok(Mapped::Skipped(Skip::Regenerated));
        }
        let ts = match ev.ts {
            Some(_) => Some(self.start_ns(ev)?),
            None => None,
        };
        let row = match field {
            Field::ProcessName(name) => RowEvent::ProcessName(pid, name),
            Field::ProcessLabel(label) => RowEvent::ProcessLabel(pid, label),
            Field::ProcessSortIndex(index) => RowEvent::ProcessSortIndex(pid, index),
            Field::ThreadName(name) => RowEvent::ThreadName((pid, tid), name),
            Field::ThreadSortIndex(index) => RowEvent::ThreadSortIndex((pid, tid), index),
        };
        Ok(Mapped::Row { row, ts })
    }
}

/// Applies converted events in file order, delivering what is complete.
pub(super) struct EventMapper {
    /// Converts the events read on the mapper's own thread.
    pub converter: Converter,
    pub stats: ReadStats,
    /// The last [`FLOW_WINDOW`] items, oldest first, held back for the flow events that
    /// follow their activities.
    held: VecDeque<TraceItem>,
    /// Flow ends that came before their activity, oldest first, each with the number of the
    /// event it was ([`ReadStats::events`] then).
    early_flows: VecDeque<(u64, FlowEnd)>,
    /// Flow ends a better activity may still take, oldest first.
    provisional: VecDeque<Provisional>,
    /// How many items were ever held: the number of the next.
    held_count: u64,
    processes: Vec<ProcessRow>,
    process_index: HashMap<i64, usize>,
    threads: Vec<ThreadRow>,
    thread_index: HashMap<(i64, i64), usize>,
    rows_start: Option<i64>,
    activities_start: Option<i64>,
    activities_end: Option<i64>,
    window_end: Option<i64>,
}

impl EventMapper {
    pub(super) fn new(args: ArgFilter) -> Self {
        Self {
            converter: Converter::new(args),
            stats: ReadStats::default(),
            // The window and the one item that comes before the oldest leaves: grown by
            // doubling, the ring would take room for twice as many. Memory not yet held is
            // not touched, so a small trace costs no more.
            held: VecDeque::with_capacity(FLOW_WINDOW + 1),
            early_flows: VecDeque::new(),
            provisional: VecDeque::new(),
            held_count: 0,
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

    /// Converts and applies one event.
    pub(super) fn event(
        &mut self,
        mut ev: RawEvent,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(), EventError> {
        match self.converter.convert(&mut ev) {
            Ok(mapped) => {
                self.apply(mapped, sink);
                Ok(())
            }
            Err(e) => {
                self.stats.events += 1;
                Err(e)
            }
        }
    }

    /// Applies the next event of the file, delivering what is complete to `sink`.
    pub(super) fn apply(&mut self, mapped: Mapped, sink: &mut impl FnMut(TraceItem)) {
        self.stats.events += 1;
        match mapped {
            Mapped::Activity(activity, too_deep) => {
                self.stats.too_deep_args += too_deep;
                // Only an `X` event's `dur` can make it end before it starts.
                self.stats.negative_durations += u64::from(activity.end_ns < activity.start_ns);
                self.push(activity, sink);
            }
            Mapped::Span(span) => self.hold(TraceItem::Span(span), sink),
            Mapped::Flow(flow) => self.flow(flow),
            Mapped::Counter {
                track,
                sample,
                dropped,
            } => {
                self.stats.dropped_counter_values += dropped;
                if !sample.values.is_empty() {
                    self.hold(TraceItem::Counter(track, sample), sink);
                }
            }
            Mapped::Row { row, ts } => self.row(row, ts),
            Mapped::WindowEnd(ts) => self.window_end = Some(ts),
            Mapped::Skipped(why) => {
                let stats = &mut self.stats;
                *match why {
                    Skip::Regenerated => &mut stats.regenerated,
                    Skip::UnknownPhase => &mut stats.unknown_phase,
                    Skip::UnknownCategory => &mut stats.unknown_category,
                    Skip::UnknownMetadata => &mut stats.unknown_metadata,
                    Skip::UnsupportedId => &mut stats.unsupported_id,
                } += 1;
            }
        }
    }

    /// Holds `activity` back for its flow events, giving it the flow end that came before it
    /// if one did, and delivers the activity that leaves the window.
    fn push(&mut self, mut activity: Activity, sink: &mut impl FnMut(TraceItem)) {
        self.activities_start = Some(
            self.activities_start
                .map_or(activity.start_ns, |t| t.min(activity.start_ns)),
        );
        self.activities_end = Some(
            self.activities_end
                .map_or(activity.end_ns, |t| t.max(activity.end_ns)),
        );
        self.expire_early_flows();
        self.expire_provisional();
        let this = self.held_count;
        let span = (activity.start_ns, activity.end_ns);
        // The first that could take a waiting end takes it, for now.
        let could_take =
            |flow: &FlowEnd, a: &Activity| a.flow.is_none() && flow.on_row(a) && flow.could_take(a);
        let waiting = self
            .early_flows
            .iter()
            .position(|(_, flow)| flow.belongs_to(&activity, true) || could_take(flow, &activity));
        if let Some(at) = waiting {
            let (flow_at, flow) = self.early_flows.remove(at).expect("a found position");
            let sure = flow.belongs_to(&activity, true);
            activity.flow = flow.as_flow();
            if !sure {
                self.provisional.push_back(Provisional {
                    at: flow_at,
                    holder: this,
                    span,
                    flow,
                });
            }
        } else if let Some(p) = self
            .provisional
            .iter_mut()
            .find(|p| could_take(&p.flow, &activity) && p.flow.better(span, p.span))
        {
            // A better match than the one given the end: it moves here, if its holder is
            // still held.
            let front = self.held_count - self.held.len() as u64;
            if let Some(TraceItem::Activity(holder)) = p
                .holder
                .checked_sub(front)
                .and_then(|i| self.held.get_mut(i as usize))
            {
                activity.flow = holder.flow.take();
                p.holder = this;
                p.span = span;
            }
        }
        self.hold(TraceItem::Activity(activity), sink);
    }

    /// Drops the provisional flow ends no later activity may take any more.
    fn expire_provisional(&mut self) {
        if self.provisional.is_empty() {
            return;
        }
        let front = (self.held_count + 1).saturating_sub(FLOW_WINDOW as u64);
        let events = self.stats.events;
        self.provisional
            .retain(|p| events - p.at <= FLOW_WINDOW as u64 && p.holder >= front);
    }

    /// Holds `item` back, and delivers the item that leaves the window.
    fn hold(&mut self, item: TraceItem, sink: &mut impl FnMut(TraceItem)) {
        self.held.push_back(item);
        self.held_count += 1;
        if self.held.len() > FLOW_WINDOW {
            sink(self.held.pop_front().expect("a full window"));
        }
    }

    /// Counts as unmatched the flow ends that waited [`FLOW_WINDOW`] events for their
    /// activity.
    fn expire_early_flows(&mut self) {
        while let Some(&(at, _)) = self.early_flows.front() {
            if self.stats.events - at <= FLOW_WINDOW as u64 {
                break;
            }
            self.early_flows.pop_front();
            self.stats.unmatched_flow += 1;
        }
    }

    /// Attaches a flow end to the held activity it binds to, or keeps it waiting for that
    /// activity.
    fn flow(&mut self, flow: FlowEnd) {
        if flow.as_flow().is_none() {
            self.stats.unmatched_flow += 1;
            return;
        }
        // The newest first: Kineto writes the flow event right after its activity, at its
        // start, so the search mostly ends at the first item.
        // (its index in `held`, its span, whether it surely takes the end)
        let mut best: Option<(usize, (i64, i64), bool)> = None;
        for (i, item) in self.held.iter().enumerate().rev() {
            let TraceItem::Activity(a) = item else {
                continue;
            };
            let span = (a.start_ns, a.end_ns);
            if flow.belongs_to(a, false) {
                best = Some((i, span, true));
                break;
            }
            if flow.on_row(a)
                && flow.could_take(a)
                && best.is_none_or(|(_, b, _)| flow.better(span, b))
            {
                best = Some((i, span, false));
            }
        }
        // The activity it binds to may have a flow already: the model keeps one per
        // activity, so the end waits, and is counted unmatched if nothing else takes it.
        let front = self.held_count - self.held.len() as u64;
        let free = best.and_then(|(i, span, sure)| match &mut self.held[i] {
            TraceItem::Activity(a) if a.flow.is_none() => Some((i, a, span, sure)),
            _ => None,
        });
        match free {
            Some((i, a, span, sure)) => {
                a.flow = flow.as_flow();
                if !sure {
                    self.provisional.push_back(Provisional {
                        at: self.stats.events,
                        holder: front + i as u64,
                        span,
                        flow,
                    });
                }
            }
            None => {
                self.expire_early_flows();
                self.early_flows.push_back((self.stats.events, flow));
            }
        }
    }

    /// Merges a row event into the row of its pid or (pid, tid).
    fn row(&mut self, row: RowEvent, ts: Option<i64>) {
        if let Some(ts) = ts {
            self.rows_start = Some(self.rows_start.map_or(ts, |t| t.min(ts)));
        }
        match row {
            RowEvent::ProcessName(pid, name) => self.process(pid).name = name,
            RowEvent::ProcessLabel(pid, label) => self.process(pid).label = label,
            RowEvent::ProcessSortIndex(pid, index) => self.process(pid).sort_index = index,
            RowEvent::ThreadName((pid, tid), name) => self.thread(pid, tid).name = name,
            RowEvent::ThreadSortIndex((pid, tid), index) => {
                self.thread(pid, tid).sort_index = index;
            }
        }
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
    pub(super) fn finish(&mut self, sink: &mut impl FnMut(TraceItem)) {
        for item in self.held.drain(..) {
            sink(item);
        }
        // Their activity never came.
        self.stats.unmatched_flow += self.early_flows.len() as u64;
        self.early_flows.clear();
        self.provisional.clear();
        for row in self.processes.drain(..) {
            sink(TraceItem::Process(row));
        }
        for row in self.threads.drain(..) {
            sink(TraceItem::Thread(row));
        }
        let start_ns = self
            .rows_start
            .or(self.activities_start)
            .unwrap_or(self.converter.base_ns);
        let end_ns = self.window_end.or(self.activities_end).unwrap_or(start_ns);
        sink(TraceItem::Window(Window::new(start_ns, end_ns)));
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
    fn a_repeated_name_is_one_shared_allocation() {
        let mut converter = Converter::new(ArgFilter::All);
        // More names than recent slots, some short, some sharing their first and last
        // bytes: names evict each other from the slots and come back from the set.
        let names: Vec<String> = (0..2000)
            .map(|i| match i % 3 {
                0 => format!("aten::op_{i}"),
                1 => format!("{i}"),
                _ => format!("void kernel<{i}, float>(float*)"),
            })
            .collect();
        let first: Vec<Arc<str>> = names.iter().map(|n| converter.intern(n)).collect();
        for round in 0..2 {
            for (name, first) in names.iter().zip(&first).rev() {
                let again = converter.intern(name);
                assert_eq!(&*again, name.as_str());
                assert!(Arc::ptr_eq(&again, first), "{name} in round {round}");
            }
        }
        assert_eq!(converter.names.len(), names.len());
    }

    #[test]
    fn counter_rows_name_their_device() {
        let dev = |t: &str| counter_device(&serde_json::from_str::<Id>(t).unwrap());
        assert_eq!(dev("\"GPU 3 Counters\""), Some(3));
        assert_eq!(dev("2"), Some(2));
        assert_eq!(dev("\"GPU x Counters\""), None);
    }
}
