//! [`KeyAveragesBuilder`]: accumulates a trace, item by item, into what the op trees need,
//! and turns it into [`KeyAverages`] at the end; [`key_averages`] runs it over a whole
//! [`Trace`].

use std::cmp::Reverse;
use std::sync::Arc;

use super::event_listing::{Listing, SummedEvent};
use super::fold::{Arrival, DeviceSums, Folder, OutOfOrder};
use super::memory::{self, MemoryEvent, MemoryIndex, MemoryKind, MemoryRecord};
use super::options::KeyAveragesOptions;
use super::summary::{KeyAverages, Row};
use super::tree::{self, relative_us, HostOp};
use super::types::{
    Emitted, Fate, GroupFlags, OpTimes, PyTorchTimes, MEMORY_SEQ, NO_PARENT, OUT_OF_MEMORY_SEQ,
};
use crate::activity::{self, Role};
use crate::attribution::{self, Launcher};
use crate::stacks::{python_stacks, Stack};
use omniprof_read::{ArgFilter, TraceReader};
use omniprof_trace::keys::{arg, metadata, name as event_name};
use omniprof_trace::FastMap;
use omniprof_trace::TraceItem;
use omniprof_trace::Value;
use omniprof_trace::{Activity, ActivityType, FlowKind};
use omniprof_trace::{Trace, Window};

/// What makes two events the same row (PyTorch's key, less the node id, which traces do not
/// carry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct GroupKey {
    name: u32,
    /// 0 unless grouping by shapes.
    shapes: u32,
    /// 0 (the default overload, `""`) unless grouping by overload name.
    overload: u32,
    /// The first N frames of the stack; 0 (no frame) unless grouping by stack.
    stack: u32,
    /// A `python_function` event: a row only with `include_python_functions`.
    python: bool,
    on_device: bool,
    legacy: bool,
    user_annotation: bool,
}

/// A row in the making.
#[derive(Clone, Debug)]
struct Group {
    key: GroupKey,
    count: u64,
    self_cpu_ns: i64,
    cpu_total_ns: i64,
    self_device_ns: i64,
    device_total_ns: i64,
    /// PyTorch's float sums of the events' totals, which its averages divide.
    cpu_total_us: f64,
    device_total_us: f64,
    self_cpu_us: f64,
    self_device_us: f64,
    cpu_memory: i64,
    self_cpu_memory: i64,
    device_memory: i64,
    self_device_memory: i64,
    flops: u64,
    /// The earliest event, which places the row and says whether it is async and whether
    /// it has a parent.
    first: (i64, Reverse<i64>, u64),
    first_has_parent: bool,
}

/// The rows of a whole [`Trace`].
pub fn key_averages(trace: &Trace, options: &KeyAveragesOptions) -> KeyAverages {
    let mut builder = KeyAveragesBuilder::new(options.clone());
    // At most three reads: the last builder keeps every op, which always finishes.
    loop {
        builder.add_trace(trace);
        match builder.finish() {
            Ok(summary) => return summary,
            Err(again) => builder = again.builder(),
        }
    }
}

/// Distinct strings, numbered in order of first use.
#[derive(Default)]
struct Interner {
    ids: FastMap<Arc<str>, u32>,
    strings: Vec<Arc<str>>,
    /// Activity names seen lately, by their allocation, with their row names' ids (`None`:
    /// dropped): the reader shares one `Arc` per distinct name, so most activities find
    /// theirs here without hashing or comparing it.
    recent: Vec<Option<(Arc<str>, Option<u32>)>>,
}

/// No row in [`KeyAveragesBuilder::recent_group`].
const NO_GROUP: u32 = u32::MAX;

/// Slots of [`Interner::recent`].
const RECENT_NAMES: usize = 256;

impl Interner {
    /// The id of the row name of an activity named `name` ([`activity::row_name`]), or `None`
    /// when its events are dropped.
    fn row_name_id(&mut self, name: &Arc<str>) -> Option<u32> {
        let address = Arc::as_ptr(name).cast::<u8>() as usize;
        // Allocations are 16-byte aligned: the bits above those tell names apart.
        let slot = ((address >> 4) ^ (address >> 12)) % RECENT_NAMES;
        if self.recent.is_empty() {
            self.recent.resize(RECENT_NAMES, None);
        }
        if let Some((recent, id)) = &self.recent[slot] {
            if Arc::ptr_eq(recent, name) {
                return *id;
            }
        }
        let id = activity::row_name(name).map(|row| self.id(row));
        // The slot holds the `Arc`, so that its allocation is not reused by another name.
        self.recent[slot] = Some((Arc::clone(name), id));
        id
    }

    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        let s: Arc<str> = Arc::from(s);
        self.strings.push(Arc::clone(&s));
        self.ids.insert(s, id);
        id
    }
}

/// Builds [`KeyAverages`] from a trace delivered piece by piece. Device work goes to its row
/// as it comes, and its duration to a sum per correlation id, for the host op it is linked
/// to; host ops are folded into their rows as soon as they are final, so that what is held
/// does not grow with the trace (see [what the summary holds](crate::KeyAverages#what-the-summary-holds)).
/// When an item comes too late for what was folded, [`Self::finish`] returns [`ReadAgain`]:
/// the trace must be read again, into the builder it gives.
///
/// ```
/// use omniprof_analysis::{KeyAveragesBuilder, KeyAveragesOptions};
/// use omniprof_trace::{Activity, ActivityType};
///
/// let mut builder = KeyAveragesBuilder::new(KeyAveragesOptions::default());
/// let mut op = Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 10_000);
/// op.correlation = 7;
/// let mut kernel = Activity::new(ActivityType::ConcurrentKernel, "gemm", 0, 7, 2_000, 6_000);
/// kernel.linked_correlation = Some(7);
/// builder.add_activity(&op);
/// builder.add_activity(&kernel);
/// let summary = builder.finish().unwrap();
/// let mm = summary.rows.iter().find(|r| &*r.name == "aten::mm").unwrap();
/// assert_eq!((mm.cpu_time_total_ns, mm.self_device_time_total_ns), (10_000, 4_000));
/// ```
pub struct KeyAveragesBuilder {
    options: KeyAveragesOptions,
    names: Interner,
    shapes: Interner,
    /// The overload names rows group by; the first (id 0) is the default overload's, `""`.
    overloads: Interner,
    /// The stack prefixes rows group by; the first is the empty one.
    stacks: Vec<Stack>,
    stack_ids: FastMap<Stack, u32>,
    scratch: String,
    groups: Vec<Group>,
    group_index: FastMap<GroupKey, u32>,
    /// The row last found for each name (by name id; [`NO_GROUP`]: none yet), tried before
    /// `group_index`: a name's events nearly always share one row.
    recent_group: Vec<u32>,
    /// Host ops per (pid, tid).
    threads: FastMap<(i64, i64), Vec<HostOp>>,
    /// Device time per correlation id that leads to its host op.
    sums: DeviceSums,
    /// The earliest summarized activity's start so far: where host ops' relative times
    /// count from when the trace has no span (PyTorch's count from the profiler's start,
    /// which a PyTorch trace records as its `PyTorch Profiler (0)` span; see
    /// [`Self::host_origin_ns`]), and device work's, as far as known when it comes. The
    /// earliest, not the first, so that the table does not depend on the order of the
    /// trace's events (`convert` writes them by start; PyTorch writes its host ops before
    /// its device work, so the earliest is known by then).
    origin_ns: Option<i64>,
    seq: u64,
    base_ns: i64,
    window: Option<Window>,
    metadata_device: Option<String>,
    runtime_device: Option<&'static str>,
    /// `[memory]` records, sorted at the end.
    memory_records: Vec<MemoryRecord>,
    out_of_memory_count: u64,
    /// Some event carried a `flops` arg, or the header said `with_flops`.
    saw_flops: bool,
    /// The trace held memory or out-of-memory records, or its header said
    /// `profile_memory`.
    memory_seen: bool,
    /// The earliest span's start.
    span_start_ns: Option<i64>,
    /// When listing events ([`crate::function_events()`]): every device event reported.
    pub(super) device_events: Option<Vec<Emitted>>,
    /// How host ops are held: all of them, or folded as they become final.
    holding: Holding,
    /// Host ops and memory records held before folding starts ([`FOLD_AFTER`]).
    pub(crate) fold_after: usize,
    /// The host origin learned by an earlier read ([`ReadAgain`]).
    preset_origin: Option<i64>,
    /// Memory records added so far.
    memory_record_count: u64,
    /// The trace's header lists devices, or says that memory was profiled.
    devices_declared: bool,
    memory_declared: bool,
    /// Some device work or runtime call was added.
    device_seen: bool,
    /// Events are listed ([`Self::list_events`]).
    listing: bool,
    /// Every event added to a row since the last [`Self::drain_events`], when listing them.
    listed: Listing,
    /// Host ops left out of the rows for nesting deeper than [`crate::MAX_STACK_DEPTH`].
    too_deep: u64,
}

/// Host ops and memory records held before folding starts (about 5 MiB): enough to see
/// whether the trace's device work and memory records come along with its ops, and to read
/// smaller traces once whatever their order.
pub(crate) const FOLD_AFTER: usize = 1 << 16;

/// How the builder holds host ops.
enum Holding {
    /// Every op, to the end.
    Every,
    /// Every op so far; folding starts after [`KeyAveragesBuilder::fold_after`] items.
    Warming(Box<Warming>),
    Folding(Box<Folder>),
    /// Folding met an item that changes what it folded: the trace must be read again.
    Stopped(Box<Stopped>),
}

/// What folding needs from the items held before it starts.
#[derive(Default)]
struct Warming {
    /// Host ops and memory records held.
    held: usize,
    /// The `ac2g` flow started by an op (and the op's `External id`), by the op's `seq`,
    /// while its device work has not come.
    flows: FastMap<u64, (u64, u64)>,
    flow_seq: FastMap<u64, u64>,
    /// Flows whose device work came before their launch.
    early_flow_ends: Vec<u64>,
    /// The thread of each memory record.
    record_threads: Vec<(i64, i64)>,
    /// The latest start of a host op or memory record so far.
    latest: Option<i64>,
    /// Some host op or memory record came earlier than one before it.
    out_of_order: bool,
}

impl Warming {
    /// One more host op or memory record, starting at `start_ns`.
    fn hold(&mut self, start_ns: i64) {
        self.held += 1;
        self.out_of_order |= self.latest.is_some_and(|l| start_ns < l);
        self.latest = Some(self.latest.map_or(start_ns, |l| l.max(start_ns)));
    }
}

/// Why folding stopped, and what the rest of the trace showed.
struct Stopped {
    reason: OutOfOrder,
    /// Each thread's latest host item.
    latest: FastMap<(i64, i64), i64>,
    /// Some host item came before an earlier one of its thread (or the base time moved).
    out_of_order: bool,
}

/// A [`KeyAveragesBuilder`] could not finish exactly: an item came that changes what it had
/// already summed ([`Self::reason`]). [`Self::builder`] is the builder to read the trace
/// with again: one that knows where host times count from, when that was the only reason,
/// else one [`keeping_every_op`](KeyAveragesBuilder::keeping_every_op).
pub struct ReadAgain {
    reason: OutOfOrder,
    options: Box<KeyAveragesOptions>,
    fold_after: usize,
    origin: Option<i64>,
    window: Option<Window>,
}

impl ReadAgain {
    /// What came too late.
    pub fn reason(&self) -> &OutOfOrder {
        &self.reason
    }

    /// The builder for the next read.
    pub fn builder(self) -> KeyAveragesBuilder {
        let mut builder = match self.origin {
            Some(origin) => {
                let mut b = KeyAveragesBuilder::new(*self.options);
                b.preset_origin = Some(origin);
                b
            }
            None => KeyAveragesBuilder::keeping_every_op(*self.options),
        };
        builder.fold_after = self.fold_after;
        builder.window = self.window;
        builder
    }
}

impl std::fmt::Display for ReadAgain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; reading the trace again", self.reason)
    }
}

impl std::fmt::Debug for ReadAgain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadAgain({})", self.reason)
    }
}

impl KeyAveragesBuilder {
    /// A builder that sums events into rows as `options` say.
    pub fn new(options: KeyAveragesOptions) -> Self {
        Self {
            options,
            names: Interner::default(),
            shapes: Interner::default(),
            overloads: {
                let mut overloads = Interner::default();
                overloads.id("");
                overloads
            },
            stacks: vec![Stack::from(Vec::new())],
            stack_ids: FastMap::default(),
            scratch: String::new(),
            groups: Vec::new(),
            group_index: FastMap::default(),
            recent_group: Vec::new(),
            threads: FastMap::default(),
            sums: DeviceSums::default(),
            origin_ns: None,
            seq: 0,
            base_ns: 0,
            window: None,
            metadata_device: None,
            runtime_device: None,
            memory_records: Vec::new(),
            out_of_memory_count: 0,
            saw_flops: false,
            memory_seen: false,
            span_start_ns: None,
            device_events: None,
            holding: Holding::Warming(Box::default()),
            // This crate's tests fold from the first item, so that every test trace in time
            // order is summed by folding.
            fold_after: if cfg!(test) { 0 } else { FOLD_AFTER },
            preset_origin: None,
            memory_record_count: 0,
            devices_declared: false,
            memory_declared: false,
            device_seen: false,
            listing: false,
            listed: Listing::default(),
            too_deep: 0,
        }
    }

    /// From now on, also lists every event as it is added to its row, for
    /// [`Self::drain_events`] and [`Self::finish_listing`]. A builder that
    /// [`ReadAgain`] gives does not list: the events a stopped read listed are to be
    /// dropped, and the new builder asked again. Call it before adding items: the parents
    /// and host ops of the events are followed from the first.
    pub fn list_events(&mut self) {
        self.listing = true;
        if let Holding::Folding(f) = &mut self.holding {
            f.list_fates = true;
        }
    }

    /// The events added to rows since the last call (none unless [`Self::list_events`]):
    /// device work as it comes, host ops as they are folded (or all at
    /// [`Self::finish_listing`] when they are held). An op whose parent may yet absorb
    /// into its own parent (a same-named only child) comes once that is decided, so that
    /// its [`SummedEvent::parent`] is listed too.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, SummedEvent> {
        self.listed.drain()
    }

    /// The [`SummedEvent::id`] the next activity gets if the summary takes it: an activity
    /// was taken when adding it moved this on.
    pub fn next_event_id(&self) -> u64 {
        self.seq
    }

    /// A builder that holds every host op to the end (80 bytes each, 24 per memory record):
    /// it takes a trace in any order, in one read.
    pub fn keeping_every_op(options: KeyAveragesOptions) -> Self {
        Self {
            holding: Holding::Every,
            ..Self::new(options)
        }
    }

    /// The most host ops, waiting events and memory records held at once while folding.
    #[cfg(test)]
    pub(crate) fn held_high_water(&self) -> Option<usize> {
        match &self.holding {
            Holding::Folding(f) => Some(f.high_water),
            _ => None,
        }
    }

    /// Where host events' relative times count from: the start of the trace's first span
    /// (`PyTorch Profiler (0)` opens where PyTorch's trace starts, which PyTorch's times count
    /// from) when it is not after the earliest activity, else the earliest activity's start.
    /// (Device work, timed as it streams in, counts from the earliest activity before it.)
    pub(super) fn host_origin_ns(&self) -> i64 {
        if let Some(origin) = self.preset_origin {
            return origin;
        }
        let first = self.origin_ns.unwrap_or(0);
        match self.span_start_ns {
            Some(span) if self.origin_ns.is_some() && span <= first => span,
            _ => first,
        }
    }

    /// The capture window, whose end unfinished ops run to.
    pub(crate) fn set_window(&mut self, window: Window) {
        self.window = Some(window);
        if let Holding::Folding(f) = &mut self.holding {
            f.set_window_end(window.end_ns);
        }
    }

    /// The `seq` the next summarized activity gets (its place in the input).
    pub(super) fn next_seq(&self) -> u64 {
        self.seq
    }

    /// How many memory and out-of-memory records were added so far.
    pub(super) fn memory_counts(&self) -> (usize, u64) {
        (self.memory_records.len(), self.out_of_memory_count)
    }

    /// The options rows are grouped by.
    pub fn options(&self) -> &KeyAveragesOptions {
        &self.options
    }

    /// A reader that delivers only the args the summary reads, which makes reading several
    /// times faster.
    pub fn reader(&self) -> TraceReader {
        TraceReader::new().args(ArgFilter::Only(
            self.arg_keys().into_iter().map(String::from).collect(),
        ))
    }

    /// The args the summary reads (those [`Self::reader`] delivers).
    pub fn arg_keys(&self) -> Vec<&'static str> {
        let mut keys = vec![
            arg::FINISHED,
            arg::DEVICE_TIME_US,
            arg::FLOPS,
            arg::BYTES,
            arg::DEVICE_TYPE,
        ];
        if self.options.group_by_input_shapes || self.options.with_flops {
            keys.push(arg::INPUT_DIMS);
        }
        if self.options.with_flops {
            // What FLOPs are estimated from where an op carries none.
            keys.extend([arg::INPUT_TYPE, arg::CONCRETE_INPUTS]);
        }
        if self.options.group_by_stack_n > 0 {
            keys.extend([arg::CALL_STACK, arg::SEQUENCE_NUMBER]);
        }
        if self.options.group_by_overload_name {
            keys.push(arg::OVERLOAD_NAME);
        }
        keys
    }

    /// Adds everything a [`Trace`] holds, with the events' Python stacks when grouping by
    /// them.
    pub fn add_trace(&mut self, trace: &Trace) {
        for (key, value) in &trace.metadata {
            self.add_metadata(key, value);
        }
        self.devices_declared |= !trace.device_properties.is_empty();
        for span in &trace.spans {
            self.add_span_start(span.start_ns);
        }
        self.set_window(trace.window);
        if self.options.group_by_stack_n > 0 {
            let stacks = python_stacks(trace);
            for (i, a) in trace.activities.iter().enumerate() {
                self.add_activity_with_stack(a, stacks.get(i));
            }
        } else {
            for a in &trace.activities {
                self.add_activity(a);
            }
        }
    }

    /// A span's start: the earliest is where host times count from ([`Self::host_origin_ns`]).
    pub(crate) fn add_span_start(&mut self, start_ns: i64) {
        self.span_start_ns = Some(self.span_start_ns.map_or(start_ns, |s| s.min(start_ns)));
        self.origin_moved();
    }

    /// Host times were computed from another origin than the one the trace now gives.
    fn origin_moved(&mut self) {
        let origin = self.host_origin_ns();
        if let Holding::Folding(f) = &mut self.holding {
            if f.computed && f.origin != origin {
                self.stop(OutOfOrder::OriginMoved);
            } else {
                f.origin = origin;
            }
        }
    }

    /// Adds one item from a streamed read ([`TraceReader::stream`]).
    pub fn add_item(&mut self, item: &TraceItem) {
        match item {
            TraceItem::Activity(a) => self.add_activity(a),
            TraceItem::Metadata(key, value) => self.add_metadata(key, value),
            TraceItem::BaseTime(base) => self.rebase(*base),
            TraceItem::Window(window) => self.set_window(*window),
            TraceItem::Span(span) => self.add_span_start(span.start_ns),
            TraceItem::DeviceProperties(devices) => self.devices_declared |= !devices.is_empty(),
            TraceItem::Counter(..)
            | TraceItem::TraceName(_)
            | TraceItem::Process(_)
            | TraceItem::Thread(_) => {}
        }
    }

    /// Metadata `device_type` names the device (see [`KeyAverages::device_name`]);
    /// `profile_memory` and `with_flops` (PyTorch writes `1`) turn on the memory and FLOPs
    /// columns.
    pub fn add_metadata(&mut self, key: &str, value: &Value) {
        let on = || matches!(value, Value::Bool(true)) || value.as_f64().is_some_and(|v| v != 0.0);
        match key {
            metadata::DEVICE_TYPE => self.metadata_device = activity::metadata_string(value),
            metadata::PROFILE_MEMORY => {
                self.memory_seen |= on();
                self.memory_declared |= on();
            }
            metadata::WITH_FLOPS => self.saw_flops |= on(),
            _ => {}
        }
    }

    /// Adds one activity: a host op to its thread, device work to its row and linked op;
    /// anything else is ignored. Its stack is empty: see
    /// [`add_activity_with_stack`](Self::add_activity_with_stack).
    pub fn add_activity(&mut self, a: &Activity) {
        self.add_activity_with_stack(a, &[]);
    }

    /// [`add_activity`](Self::add_activity) for an activity whose Python stack is `stack`
    /// (innermost first, as [`python_stacks`] gives it), which its row groups by when
    /// grouping by stack.
    pub fn add_activity_with_stack(&mut self, a: &Activity, stack: &[Arc<str>]) {
        if let Holding::Stopped(stopped) = &mut self.holding {
            stopped.observe(a);
            if summarized(a) {
                // Where the next read's host ops count from (`ReadAgain`).
                self.origin_ns = Some(self.origin_ns.map_or(a.start_ns, |o| o.min(a.start_ns)));
            }
            return;
        }
        if let Some(m) = memory::memory_event(a) {
            self.add_memory(a, m);
            return;
        }
        let role = activity::role(a.kind);
        // A device interval carrying `device_time_us` is the stubs' drawing of its host op's
        // time on the device row: that time is counted on the op (stub device time).
        if role == Role::Ignored || (role == Role::Device && activity::stub_device_ns(a) > 0) {
            return;
        }
        if self.runtime_device.is_none() {
            self.runtime_device = activity::runtime_device(a.kind);
        }
        let Some(name) = self.names.row_name_id(&a.name) else {
            return;
        };
        if self.origin_ns.is_none_or(|o| a.start_ns < o) {
            self.origin_ns = Some(a.start_ns);
            self.origin_moved();
        }
        let origin = self.origin_ns.unwrap_or(a.start_ns);
        let seq = self.seq;
        self.seq += 1;
        let shapes = if self.options.group_by_input_shapes {
            activity::write_input_shapes(a, &mut self.scratch);
            self.shapes.id(&self.scratch)
        } else {
            0
        };
        let overload = match a.arg(arg::OVERLOAD_NAME).and_then(Value::as_str) {
            Some(name) if self.options.group_by_overload_name => self.overloads.id(name),
            _ => 0,
        };
        let flops = activity::flops_or_estimate(a, self.options.with_flops);
        if flops.is_some() {
            self.saw_flops = true;
        }
        let n = self.options.group_by_stack_n;
        let stack = if n > 0 {
            self.stack_id(&stack[..n.min(stack.len())])
        } else {
            0
        };
        if role == Role::Device {
            self.device_seen = true;
            let key = self.add_device(a, name, shapes, stack, seq, origin);
            self.add_flops(key, flops);
            return;
        }
        let python = a.kind == ActivityType::PythonFunction;
        let stub_ns = if python {
            0
        } else {
            activity::stub_device_ns(a)
        };
        let key = self.group(GroupKey {
            name,
            shapes,
            overload,
            stack,
            python,
            on_device: false,
            legacy: stub_ns > 0,
            user_annotation: a.kind == ActivityType::UserAnnotation,
        });
        self.add_flops(key, flops);
        // Which ops receive device work, and through which calls: `attribution`.
        let call = attribution::is_call(a);
        self.device_seen |= call;
        let flow = a
            .flow
            .filter(|f| f.kind == FlowKind::Ac2g && f.start && f.id > 0)
            .map(|f| f.id);
        self.add_host_op(
            (a.device, a.resource),
            HostOp {
                start_ns: a.start_ns,
                end_ns: a.end_ns.max(a.start_ns),
                device_ns: stub_ns,
                // Whole microseconds: exact as a float.
                device_us: stub_ns as f64 / 1000.0,
                correlation: if attribution::receives_device_work(a) || call {
                    a.correlation
                } else {
                    0
                },
                seq,
                key,
                name,
                legacy: stub_ns > 0,
                unfinished: activity::is_unfinished(a),
                call,
                out_of_memory: false,
                cpu_memory: 0,
                device_memory: 0,
            },
            a.linked_correlation.unwrap_or(0),
            flow,
        );
    }

    /// A host op (or `[OutOfMemory]` record) of a thread: held, or folded.
    fn add_host_op(&mut self, thread: (i64, i64), op: HostOp, linked: u64, flow: Option<u64>) {
        match &mut self.holding {
            Holding::Every => self.threads.entry(thread).or_default().push(op),
            Holding::Warming(w) => {
                if let Some(flow) = flow {
                    w.flows.insert(op.seq, (flow, linked));
                    w.flow_seq.insert(flow, op.seq);
                }
                w.hold(op.start_ns);
                self.threads.entry(thread).or_default().push(op);
                self.warmed();
            }
            Holding::Folding(f) => {
                let folded = arrival(op, linked, flow, self.window)
                    .and_then(|arrival| f.host_op(thread, arrival, &mut self.sums));
                self.folded(folded);
            }
            Holding::Stopped(_) => {}
        }
    }

    /// After an item added while warming: starts folding once enough items are held.
    fn warmed(&mut self) {
        let Holding::Warming(w) = &self.holding else {
            return;
        };
        if w.held < self.fold_after {
            return;
        }
        let Holding::Warming(w) = std::mem::replace(&mut self.holding, Holding::Every) else {
            return;
        };
        // PyTorch writes its device work and memory records after every host op: folding
        // would only meet them too late.
        if (self.devices_declared && !self.device_seen)
            || (self.memory_declared && self.memory_record_count == 0)
        {
            return;
        }
        let mut folder = Folder::new(
            self.host_origin_ns(),
            self.window.map(|w| w.end_ns),
            !w.out_of_order,
        );
        for flow in &w.early_flow_ends {
            folder.early_flow_end(*flow);
        }
        folder.list_fates = self.listing;
        self.holding = Holding::Folding(Box::new(folder));
        // The held items, in time order (the folder takes any order of threads): sorting
        // (start, seq, thread, index) keys moves 24 bytes an item, not the items, which stay
        // where they were held (a record's thread is `RECORDS`). The (stable) merge sort
        // takes each thread's ops, mostly in order already, as a run and merges the runs,
        // where a quicksort would compare each item some 16 times.
        const RECORDS: u32 = u32::MAX;
        let threads: Vec<((i64, i64), Vec<HostOp>)> =
            std::mem::take(&mut self.threads).into_iter().collect();
        let records = std::mem::take(&mut self.memory_records);
        let mut order: Vec<(i64, u64, u32, u32)> = Vec::with_capacity(w.held);
        for (t, (_, ops)) in threads.iter().enumerate() {
            let ops = ops.iter().enumerate();
            order.extend(ops.map(|(i, op)| (op.start_ns, op.seq, t as u32, i as u32)));
        }
        let records_order = records.iter().enumerate();
        order.extend(
            records_order.map(|(i, r)| (r.time_ns, u64::from(r.ordinal), RECORDS, i as u32)),
        );
        order.sort();
        for (_, _, t, i) in order {
            let Holding::Folding(f) = &mut self.holding else {
                return;
            };
            let folded = if t == RECORDS {
                let r = records[i as usize];
                let thread = w.record_threads[i as usize];
                f.memory_record(
                    thread,
                    r.time_ns,
                    r.bytes,
                    r.ordinal,
                    r.kind,
                    &mut self.sums,
                )
            } else {
                let (thread, ops) = &threads[t as usize];
                let op = ops[i as usize];
                let (flow, linked) = w
                    .flows
                    .get(&op.seq)
                    .map_or((None, 0), |&(flow, linked)| (Some(flow), linked));
                arrival(op, linked, flow, self.window)
                    .and_then(|arrival| f.host_op(*thread, arrival, &mut self.sums))
            };
            self.folded(folded);
        }
    }

    /// After the folder took an item: its final events go to their rows, or, when the item
    /// came too late, folding stops.
    fn folded(&mut self, result: Result<(), OutOfOrder>) {
        if let Err(reason) = result {
            self.stop(reason);
            return;
        }
        let Holding::Folding(f) = &mut self.holding else {
            return;
        };
        if f.fates.is_empty() && !f.any_ready() && f.uncovered.is_empty() {
            // Most items make nothing final.
            if f.none_waiting() {
                self.listed.forget_absorbed();
            }
            return;
        }
        // The folder is taken out (a box) while its events go to their rows.
        let Holding::Folding(mut f) = std::mem::replace(&mut self.holding, Holding::Every) else {
            return;
        };
        // Fates before events: an event's parent was placed, so its fate opened, before it.
        for fate in f.fates.drain(..) {
            if self.listing {
                self.listed.fate(fate);
            }
        }
        f.take_ready(|event| self.record(event));
        let uncovered = std::mem::take(&mut f.uncovered);
        if f.none_waiting() {
            self.listed.forget_absorbed();
        }
        self.holding = Holding::Folding(f);
        if !uncovered.is_empty() {
            let name = self.names.id(event_name::MEMORY);
            let key = self.memory_group(name);
            for (time_ns, bytes, ordinal, kind) in uncovered {
                self.record(&memory_event(key, time_ns, bytes, ordinal, kind));
            }
        }
    }

    fn stop(&mut self, reason: OutOfOrder) {
        self.holding = Holding::Stopped(Box::new(Stopped {
            reason,
            latest: FastMap::default(),
            out_of_order: false,
        }));
    }

    /// The id of a stack prefix, given on first use.
    fn stack_id(&mut self, prefix: &[Arc<str>]) -> u32 {
        if prefix.is_empty() {
            return 0;
        }
        if let Some(&id) = self.stack_ids.get(prefix) {
            return id;
        }
        let id = self.stacks.len() as u32;
        let prefix = Stack::from(prefix);
        self.stacks.push(Arc::clone(&prefix));
        self.stack_ids.insert(prefix, id);
        id
    }

    fn add_flops(&mut self, key: u32, flops: Option<u64>) {
        if let Some(f) = flops {
            let g = &mut self.groups[key as usize];
            g.flops = g.flops.saturating_add(f);
        }
    }

    /// A `[memory]` record is kept for the end; an `[OutOfMemory]` record is a zero-length
    /// host op of its thread with its own bytes as its usage (see [`super::memory`]).
    fn add_memory(&mut self, a: &Activity, m: MemoryEvent) {
        match m {
            MemoryEvent::Record { bytes, kind } => {
                // Ordinals past u32::MAX wrap: they only order records at the same time.
                let ordinal = self.memory_record_count as u32;
                self.memory_record_count += 1;
                let record = MemoryRecord {
                    time_ns: a.start_ns,
                    bytes,
                    ordinal,
                    kind,
                };
                let thread = (a.device, a.resource);
                match &mut self.holding {
                    Holding::Every => self.memory_records.push(record),
                    Holding::Warming(w) => {
                        w.hold(record.time_ns);
                        w.record_threads.push(thread);
                        self.memory_records.push(record);
                        self.warmed();
                    }
                    Holding::Folding(f) => {
                        let folded = f.memory_record(
                            thread,
                            record.time_ns,
                            bytes,
                            ordinal,
                            kind,
                            &mut self.sums,
                        );
                        self.folded(folded);
                    }
                    Holding::Stopped(_) => {}
                }
            }
            MemoryEvent::OutOfMemory { bytes, kind } => {
                let seq = OUT_OF_MEMORY_SEQ + self.out_of_memory_count;
                self.out_of_memory_count += 1;
                let name = self.names.id(event_name::OUT_OF_MEMORY);
                let key = self.memory_group(name);
                let (cpu_memory, device_memory) = kind.split(bytes);
                let op = HostOp {
                    start_ns: a.start_ns,
                    end_ns: a.start_ns,
                    device_ns: 0,
                    device_us: 0.0,
                    correlation: 0,
                    seq,
                    key,
                    name,
                    legacy: false,
                    unfinished: false,
                    call: false,
                    out_of_memory: true,
                    cpu_memory,
                    device_memory,
                };
                self.add_host_op((a.device, a.resource), op, 0, None);
            }
        }
    }

    fn add_device(
        &mut self,
        a: &Activity,
        name: u32,
        shapes: u32,
        stack: u32,
        seq: u64,
        origin: i64,
    ) -> u32 {
        let duration = a.duration_ns();
        let end_ns = a.start_ns.saturating_add(duration);
        let duration_us = relative_us(end_ns, origin) - relative_us(a.start_ns, origin);
        let user_annotation = a.kind == ActivityType::GpuUserAnnotation;
        // A GPU user annotation is the projection of a host range, not work of its own:
        // counting it for the range would count the range's kernels twice.
        if !user_annotation {
            // Without an `External id`, the runtime correlation leads to the launch.
            // (The External id's entry also says whether a live op has it.)
            let mut linked = None;
            match attribution::launcher(a) {
                Some(Launcher::External(c)) => {
                    let entry = self.sums.linked.entry(c).or_default();
                    entry
                        .time
                        .get_or_insert_default()
                        .add(duration, duration_us);
                    linked = Some((c, entry.has_live_op()));
                }
                Some(Launcher::Runtime(launch)) => {
                    let sum = self.sums.launched.entry(launch).or_default();
                    sum.add(duration, duration_us);
                }
                None => {}
            }
            let flow_end = a
                .flow
                .filter(|f| f.kind == FlowKind::Ac2g && !f.start && f.id > 0)
                .map(|f| f.id);
            match &mut self.holding {
                Holding::Folding(f) => {
                    let folded = f.device_work(linked, a.correlation, flow_end, &mut self.sums);
                    self.folded(folded);
                }
                Holding::Warming(w) => {
                    if let Some(flow) = flow_end {
                        match w.flow_seq.remove(&flow) {
                            Some(seq) => {
                                w.flows.remove(&seq);
                            }
                            None => w.early_flow_ends.push(flow),
                        }
                    }
                }
                Holding::Every | Holding::Stopped(_) => {}
            }
        }
        let key = self.group(GroupKey {
            name,
            shapes,
            overload: 0,
            stack,
            python: false,
            on_device: true,
            legacy: false,
            user_annotation,
        });
        let event = Emitted {
            first: tree::order_key(a.start_ns, a.end_ns, seq),
            key,
            times: OpTimes {
                self_device_ns: duration,
                device_total_ns: duration,
                ..OpTimes::default()
            },
            float: PyTorchTimes {
                device_total_us: duration_us,
                self_device_us: duration_us,
                ..PyTorchTimes::default()
            },
            parent_seq: NO_PARENT,
            depth: None,
            parent_open: false,
        };
        if let Some(events) = &mut self.device_events {
            events.push(event);
        }
        if self.listing {
            let (name, flags) = self.key_strings(key);
            let launcher = attribution::launcher(a).filter(|_| !user_annotation);
            self.listed
                .push_device(SummedEvent::new(&event, name, flags), launcher);
        }
        self.add_to_row(&event);
        key
    }

    /// The row of the memory events whose interned name is `name` (`[memory]`,
    /// `[OutOfMemory]`): host events without inputs (`[]` when grouping by shapes).
    fn memory_group(&mut self, name: u32) -> u32 {
        let shapes = if self.options.group_by_input_shapes {
            self.shapes.id("[]")
        } else {
            0
        };
        self.group(GroupKey {
            name,
            shapes,
            overload: 0,
            stack: 0,
            python: false,
            on_device: false,
            legacy: false,
            user_annotation: false,
        })
    }

    /// The index of the row for `key`, created empty on first use.
    fn group(&mut self, key: GroupKey) -> u32 {
        let slot = key.name as usize;
        if let Some(&g) = self.recent_group.get(slot) {
            if g != NO_GROUP && self.groups[g as usize].key == key {
                return g;
            }
        }
        let groups = &mut self.groups;
        let g = *self.group_index.entry(key).or_insert_with(|| {
            groups.push(Group {
                key,
                count: 0,
                self_cpu_ns: 0,
                cpu_total_ns: 0,
                self_device_ns: 0,
                device_total_ns: 0,
                cpu_total_us: 0.0,
                device_total_us: 0.0,
                self_cpu_us: 0.0,
                self_device_us: 0.0,
                cpu_memory: 0,
                self_cpu_memory: 0,
                device_memory: 0,
                self_device_memory: 0,
                flops: 0,
                first: (i64::MAX, Reverse(i64::MIN), u64::MAX),
                first_has_parent: false,
            });
            (groups.len() - 1) as u32
        });
        if self.recent_group.len() <= slot {
            self.recent_group.resize(slot + 1, NO_GROUP);
        }
        self.recent_group[slot] = g;
        g
    }

    fn record(&mut self, event: &Emitted) {
        if self.listing {
            let (name, flags) = self.key_strings(event.key);
            self.listed
                .push(SummedEvent::new(event, name, flags), event.parent_open);
        }
        self.add_to_row(event);
    }

    fn add_to_row(&mut self, event: &Emitted) {
        let Emitted {
            first,
            key: group,
            times,
            float,
            parent_seq,
            ..
        } = *event;
        let g = &mut self.groups[group as usize];
        g.cpu_total_us += float.cpu_total_us;
        g.device_total_us += float.device_total_us;
        g.self_cpu_us += float.self_cpu_us;
        g.self_device_us += float.self_device_us;
        g.count += 1;
        g.self_cpu_ns = g.self_cpu_ns.saturating_add(times.self_cpu_ns);
        g.cpu_total_ns = g.cpu_total_ns.saturating_add(times.cpu_total_ns);
        g.self_device_ns = g.self_device_ns.saturating_add(times.self_device_ns);
        g.device_total_ns = g.device_total_ns.saturating_add(times.device_total_ns);
        g.cpu_memory = g.cpu_memory.saturating_add(times.cpu_memory);
        g.self_cpu_memory = g.self_cpu_memory.saturating_add(times.self_cpu_memory);
        g.device_memory = g.device_memory.saturating_add(times.device_memory);
        g.self_device_memory = g
            .self_device_memory
            .saturating_add(times.self_device_memory);
        if first < g.first {
            g.first = first;
            g.first_has_parent = parent_seq != NO_PARENT;
        }
    }

    /// `baseTimeNanoseconds` came after some events (which the reader then timed from 0).
    fn rebase(&mut self, base: i64) {
        match &mut self.holding {
            Holding::Folding(_) if base != self.base_ns => self.stop(OutOfOrder::Rebased),
            Holding::Stopped(stopped) => stopped.out_of_order |= base != self.base_ns,
            _ => {}
        }
        let shift = base - self.base_ns;
        self.base_ns = base;
        if let Some(origin) = &mut self.origin_ns {
            *origin = origin.saturating_add(shift);
        }
        if let Some(span) = &mut self.span_start_ns {
            *span = span.saturating_add(shift);
        }
        for op in self.threads.values_mut().flatten() {
            op.start_ns = op.start_ns.saturating_add(shift);
            op.end_ns = op.end_ns.saturating_add(shift);
        }
        for g in self.groups.iter_mut().filter(|g| g.count > 0) {
            g.first.0 = g.first.0.saturating_add(shift);
            g.first.1 .0 = g.first.1 .0.saturating_add(shift);
        }
        for r in &mut self.memory_records {
            r.time_ns = r.time_ns.saturating_add(shift);
        }
        for e in self.device_events.iter_mut().flatten() {
            e.first.0 = e.first.0.saturating_add(shift);
            e.first.1 .0 = e.first.1 .0.saturating_add(shift);
        }
    }

    /// The rows, in the order of each row's first event; or, when an item came too late for
    /// the ops already folded, how to read the trace again (never for a builder
    /// [`keeping_every_op`](Self::keeping_every_op)).
    pub fn finish(self) -> Result<KeyAverages, ReadAgain> {
        self.finish_listing().map(|(summary, _)| summary)
    }

    /// [`Self::finish`], with the events added to rows since the last
    /// [`Self::drain_events`] (none unless [`Self::list_events`]).
    pub fn finish_listing(mut self) -> Result<(KeyAverages, Vec<SummedEvent>), ReadAgain> {
        match std::mem::replace(&mut self.holding, Holding::Every) {
            Holding::Every | Holding::Warming(_) => {
                let mut emitted = self.emit_host_events();
                // PyTorch adds events to their rows in the order it lists them (by start,
                // longer first); float sums depend on the order, so the ops are recorded in
                // it.
                emitted.sort_unstable_by_key(|e| e.first);
                for event in &emitted {
                    self.record(event);
                }
            }
            Holding::Folding(mut f) => {
                let origin = self.host_origin_ns();
                let finished = if f.computed && f.origin != origin {
                    Err(OutOfOrder::OriginMoved)
                } else {
                    f.origin = origin;
                    f.finish(&mut self.sums)
                };
                self.too_deep = f.too_deep;
                self.holding = Holding::Folding(f);
                self.folded(finished);
                if let Holding::Stopped(stopped) =
                    std::mem::replace(&mut self.holding, Holding::Every)
                {
                    return Err(self.read_again(*stopped));
                }
                self.memory_seen = self.memory_seen
                    || self.memory_record_count > 0
                    || self.out_of_memory_count > 0;
            }
            Holding::Stopped(stopped) => return Err(self.read_again(*stopped)),
        }
        let events = std::mem::take(&mut self.listed).finish();
        Ok((self.into_rows(), events))
    }

    /// How to read the trace again: knowing its host origin and window when they alone came
    /// too late, else keeping every op.
    fn read_again(&self, stopped: Stopped) -> ReadAgain {
        let late_facts = matches!(
            stopped.reason,
            OutOfOrder::OriginMoved | OutOfOrder::UnfinishedBeforeWindow
        );
        let again = late_facts && !stopped.out_of_order && self.preset_origin.is_none();
        ReadAgain {
            reason: stopped.reason,
            options: Box::new(self.options.clone()),
            fold_after: self.fold_after,
            origin: again.then(|| self.host_origin_ns()),
            window: self.window,
        }
    }

    /// Links device time and memory to the host ops, builds the op trees and reports every
    /// host event (the ops, then the `[memory]` events of records outside them), unsorted.
    pub(super) fn emit_host_events(&mut self) -> Vec<Emitted> {
        let window_end = self.window.map_or(i64::MIN, |w| w.end_ns);
        let origin = self.host_origin_ns();
        let mut memory = MemoryIndex::new(std::mem::take(&mut self.memory_records));
        let mut emitted = Vec::new();
        let mut threads: Vec<_> = std::mem::take(&mut self.threads).into_values().collect();
        // Which device work each op receives, for the listing (by the op's `seq`).
        let mut received: Vec<(u64, Launcher)> = Vec::new();
        let listing = self.listing;
        for ops in &mut threads {
            self.too_deep += tree::leave_out_too_deep(ops, window_end);
            if !self.sums.launched.is_empty() {
                tree::attribute_launches(ops, &self.sums.launched, |op, c| {
                    if listing {
                        received.push((op, Launcher::Runtime(c)));
                    }
                });
            }
            for op in ops.iter_mut() {
                if op.correlation != 0 && !op.call {
                    if listing {
                        received.push((op.seq, Launcher::External(op.correlation)));
                    }
                    let linked = self.sums.linked.get(&op.correlation);
                    let linked = linked.and_then(|l| l.time).unwrap_or_default();
                    op.device_ns = op.device_ns.saturating_add(linked.ns);
                    op.device_us += linked.us;
                }
                if op.unfinished {
                    op.end_ns = op.end_ns.max(window_end);
                }
                if !op.out_of_memory && !memory.is_empty() {
                    (op.cpu_memory, op.device_memory) = memory.attribute(op.start_ns, op.end_ns);
                }
            }
        }
        let mut absorbed = Vec::new();
        for ops in &mut threads {
            absorbed.extend(tree::summarize_thread(
                ops,
                origin,
                |op, times, float, parent, depth| {
                    emitted.push(Emitted {
                        first: tree::order_key(op.start_ns, op.end_ns, op.seq),
                        key: op.key,
                        times,
                        float,
                        parent_seq: parent.unwrap_or(NO_PARENT),
                        depth: Some(depth),
                        parent_open: false,
                    });
                },
            ));
        }
        if listing {
            // An op that an only child was absorbed out of has that child's device time
            // instead of its own.
            let absorbers: FastMap<u64, ()> = absorbed
                .iter()
                .map(|&(_, _, nested_in)| (nested_in, ()))
                .collect();
            for (op, into, _) in absorbed {
                self.listed.fate(Fate::Absorbed { op, into });
            }
            for (op, launcher) in received {
                self.listed
                    .receive(op, launcher, !absorbers.contains_key(&op));
            }
        }
        let uncovered = memory.uncovered();
        if !uncovered.is_empty() {
            let name = self.names.id(event_name::MEMORY);
            let key = self.memory_group(name);
            for r in uncovered {
                emitted.push(memory_event(key, r.time_ns, r.bytes, r.ordinal, r.kind));
            }
        }
        self.memory_seen = self.memory_seen || !memory.is_empty() || self.out_of_memory_count > 0;
        emitted
    }

    /// The device name (see [`KeyAverages::device_name`]), whether the memory and FLOPs
    /// columns print, and the interned names and shapes.
    pub(super) fn labels(&self) -> (String, bool, bool) {
        let device_name = self
            .options
            .device_name
            .clone()
            .or_else(|| self.metadata_device.clone())
            .unwrap_or_else(|| self.runtime_device.unwrap_or("cuda").to_string());
        (
            device_name,
            self.options.profile_memory || self.memory_seen,
            self.options.with_flops || self.saw_flops,
        )
    }

    /// The name and flags of a row.
    pub(super) fn key_strings(&self, key: u32) -> (Arc<str>, GroupFlags) {
        let g = &self.groups[key as usize].key;
        (
            Arc::clone(&self.names.strings[g.name as usize]),
            GroupFlags {
                on_device: g.on_device,
                legacy: g.legacy,
                user_annotation: g.user_annotation,
                python: g.python,
            },
        )
    }

    fn into_rows(self) -> KeyAverages {
        let (device_name, profile_memory, with_flops) = self.labels();
        let python_rows = self.options.include_python_functions;
        let mut groups: Vec<Group> = self
            .groups
            .into_iter()
            .filter(|g| g.count > 0 && (python_rows || !g.key.python))
            .collect();
        groups.sort_by_key(|g| g.first);
        let by_shapes = self.options.group_by_input_shapes;
        let by_stack = self.options.group_by_stack_n > 0;
        let by_overload = self.options.group_by_overload_name;
        let rows = groups
            .into_iter()
            .map(|g| Row {
                name: Arc::clone(&self.names.strings[g.key.name as usize]),
                input_shapes: by_shapes
                    .then(|| Arc::clone(&self.shapes.strings[g.key.shapes as usize])),
                overload_name: by_overload
                    .then(|| Arc::clone(&self.overloads.strings[g.key.overload as usize])),
                stack: by_stack.then(|| Arc::clone(&self.stacks[g.key.stack as usize])),
                count: g.count,
                self_cpu_time_total_ns: g.self_cpu_ns,
                cpu_time_total_ns: g.cpu_total_ns,
                self_device_time_total_ns: g.self_device_ns,
                device_time_total_ns: g.device_total_ns,
                cpu_time_total_us: g.cpu_total_us,
                device_time_total_us: g.device_total_us,
                self_cpu_time_total_us: g.self_cpu_us,
                self_device_time_total_us: g.self_device_us,
                on_device: g.key.on_device,
                is_legacy: g.key.legacy,
                is_user_annotation: g.key.user_annotation,
                is_async: false,
                has_cpu_parent: g.first_has_parent,
                cpu_memory_usage: g.cpu_memory,
                self_cpu_memory_usage: g.self_cpu_memory,
                device_memory_usage: g.device_memory,
                self_device_memory_usage: g.self_device_memory,
                flops: g.flops,
                first_event: None,
            })
            .collect();
        KeyAverages {
            rows,
            device_name,
            profile_memory,
            with_flops,
            too_deep: self.too_deep,
        }
    }
}

impl Stopped {
    /// After folding stopped: notes whether host items still come in time order per thread.
    fn observe(&mut self, a: &Activity) {
        let host = memory::memory_event(a).is_some()
            || (activity::role(a.kind) == Role::Host && activity::row_name(&a.name).is_some());
        if !host {
            return;
        }
        let latest = self
            .latest
            .entry((a.device, a.resource))
            .or_insert(i64::MIN);
        self.out_of_order |= a.start_ns < *latest;
        *latest = (*latest).max(a.start_ns);
    }
}

/// Whether the summary counts activity `a` (a memory record aside), as
/// [`KeyAveragesBuilder::add_activity_with_stack`] decides it.
fn summarized(a: &Activity) -> bool {
    let role = activity::role(a.kind);
    role != Role::Ignored
        && !(role == Role::Device && activity::stub_device_ns(a) > 0)
        && activity::row_name(&a.name).is_some()
}

/// A held op as the folder takes it: an unfinished op runs to the window's end, which must
/// be known by then.
fn arrival(
    mut op: HostOp,
    linked: u64,
    flow: Option<u64>,
    window: Option<Window>,
) -> Result<Arrival, OutOfOrder> {
    let recorded_end = op.end_ns;
    if op.unfinished {
        let window = window.ok_or(OutOfOrder::UnfinishedBeforeWindow)?;
        op.end_ns = op.end_ns.max(window.end_ns);
    }
    Ok(Arrival {
        op,
        recorded_end,
        linked,
        flow,
    })
}

/// A `[memory]` event made of a memory record inside no host event.
fn memory_event(key: u32, time_ns: i64, bytes: i64, ordinal: u32, kind: MemoryKind) -> Emitted {
    let (cpu_memory, device_memory) = kind.split(bytes);
    Emitted {
        first: tree::order_key(time_ns, time_ns, MEMORY_SEQ + u64::from(ordinal)),
        key,
        times: OpTimes {
            cpu_memory,
            self_cpu_memory: cpu_memory,
            device_memory,
            self_device_memory: device_memory,
            ..OpTimes::default()
        },
        float: PyTorchTimes::default(),
        parent_seq: NO_PARENT,
        depth: None,
        parent_open: false,
    }
}
