//! Host ops folded into their rows while the trace streams in: [`Folder`] holds what can
//! still change, not every op ([`KeyAverages`](crate::KeyAverages#what-the-summary-holds) says what
//! that comes to).
//!
//! It computes what [`summarize_thread`], [`attribute_launches`] and
//! [`MemoryIndex`](super::memory::MemoryIndex) compute over a whole thread, bottom-up
//! instead of top-down, and adds the events to their rows in PyTorch's order (by start,
//! longer first, then input order), on which the rows' float sums depend:
//!
//! - Per thread, ops are *placed* in that order: the ops that start at the thread's latest
//!   start wait (their order depends on their ends), and are placed when a later op of the
//!   thread arrives or when the horizon passes them. Placing an op closes the ops it starts
//!   after, then makes it a child of the innermost open op, or async when it ends after it.
//! - The *horizon* is the time before which no host op or memory record can come any more:
//!   the latest start so far while every host op and memory record came in time order, else
//!   the earliest of each thread's latest start. An item that starts before it, or before
//!   the last op its thread placed, stops the folding ([`OutOfOrder`]).
//! - An op is *final* once it is closed, it ends before the horizon (every memory record
//!   inside it has come), the device work that `ac2g` flows announce for it has come, and
//!   its children are final. Then its times are computed as [`summarize_thread`] does, its
//!   totals go to its parent, and its event to its row. A first child with its parent's
//!   name waits for the parent: if it stays the only child it is removed (the parent takes
//!   its device time and its children), as in PyTorch.
//! - An event is added to its row once it starts before the horizon and no op of its row
//!   that is not final yet comes before it.
//! - Nesting is bounded by [`MAX_STACK_DEPTH`], the flame graph's bound: an op that starts
//!   while that many ops of its thread are open around it or start with it before it (in
//!   PyTorch's order) is left out, counted in [`Folder::too_deep`] (its time stays its
//!   parent's self time), so that what a thread holds is bounded whatever the input (a file
//!   of millions of identical events nests them all).
//! - Device work reaches its op through the builder's [`DeviceSums`], read when the op is
//!   final. Device work for an op already final, or a host op reusing the correlation id of
//!   one, stops the folding; the ids of the ops seen are kept as ranges.
//!
//! [`summarize_thread`]: super::tree::summarize_thread
//! [`attribute_launches`]: super::tree::attribute_launches

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;

use super::containers::{trim, Few, Ids, MinQueue, Parked, RangeSet};
use super::memory::MemoryKind;
use super::tree::{order_key, relative_us, HostOp};
use super::types::{DeviceTime, Emitted, Fate, Key, OpTimes, PyTorchTimes, NO_PARENT};
use crate::attribution::Receivers;
use crate::frame_tree::MAX_STACK_DEPTH;
use omniprof_trace::FastMap;

const NONE: u32 = u32::MAX;

/// Why folding stopped: an item that would change what was already added to the rows. The
/// builder then asks for the trace to be read again ([`super::ReadAgain`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutOfOrder {
    /// A host op or memory record that starts before the horizon (`after_ns`), or an op that
    /// starts no later than one its thread already placed (`after_ns`, that op's start).
    Late {
        /// What came late (`a host op`, `a memory record`).
        what: &'static str,
        /// Its start, ns.
        start_ns: i64,
        /// What it should have come after, ns.
        after_ns: i64,
    },
    /// Device work for an op whose times were already added to its row.
    LateDeviceWork {
        /// The op's correlation id.
        correlation: u64,
    },
    /// A host op with the correlation id of an op already added to its row.
    ReusedCorrelation(u64),
    /// The origin host times count from moved (the profiler's span came after ops were
    /// added to their rows).
    OriginMoved,
    /// An unfinished op before the capture window (whose end it runs to) was known.
    UnfinishedBeforeWindow,
    /// `baseTimeNanoseconds` after events were folded.
    Rebased,
}

impl fmt::Display for OutOfOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Late {
                what,
                start_ns,
                after_ns,
            } => write!(
                f,
                "a {what} starting at {start_ns} ns came after the summary had moved on to \
                 {after_ns} ns"
            ),
            Self::LateDeviceWork { correlation } => write!(
                f,
                "device work for correlation {correlation} came after its op was summed"
            ),
            Self::ReusedCorrelation(c) => {
                write!(f, "correlation id {c} came again after its op was summed")
            }
            Self::OriginMoved => f.write_str(
                "the profiler's span, where host times count from, came after ops were summed",
            ),
            Self::UnfinishedBeforeWindow => {
                f.write_str("an unfinished op came before the capture window")
            }
            Self::Rebased => f.write_str("baseTimeNanoseconds came after the events"),
        }
    }
}

/// Device time by the correlation id that leads to its host op, summed as it arrives.
#[derive(Default)]
pub(super) struct DeviceSums {
    /// Per `External id` of the host op it was launched from, with the live ops of that id
    /// when folding: one entry, looked up once when an op is placed, when it is final and
    /// when device work comes.
    pub linked: FastMap<u64, Linked>,
    /// Per runtime correlation id of the call that launched it, for work without an
    /// `External id`.
    pub launched: FastMap<u64, DeviceTime>,
}

/// The device time summed for `c`, taken out of `sums` by its `last` reader.
fn read_sum(sums: &mut FastMap<u64, DeviceTime>, c: u64, last: bool) -> Option<DeviceTime> {
    if last {
        sums.remove(&c)
    } else {
        sums.get(&c).copied()
    }
}

/// The device work linked to an `External id`, and the live ops with that id.
#[derive(Debug, Default)]
pub(super) struct Linked {
    /// The device time summed (`None`: no device work came).
    pub time: Option<DeviceTime>,
    /// Live ops (nodes) with this correlation id, while folding.
    live: Ids,
}

impl Linked {
    /// Whether some live op has this correlation id.
    pub(super) fn has_live_op(&self) -> bool {
        !self.live.is_empty()
    }
}

impl DeviceSums {
    /// Gives back the room of tables that once held far more than they do now.
    fn trim(&mut self) {
        trim(&mut self.linked);
        trim(&mut self.launched);
    }
}

/// A host op as it arrives.
#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    /// `end_ns` is already extended to the window's end for an unfinished op.
    pub op: HostOp,
    /// The end as recorded (before that extension), which launches are matched against.
    pub recorded_end: i64,
    /// The op's `External id` when it is linked to another (a runtime call's op).
    pub linked: u64,
    /// The id of the `ac2g` flow the op starts (a launch whose device work will come).
    pub flow: Option<u64>,
}

#[derive(Default)]
struct Thread {
    /// The latest start of an op or record of the thread.
    latest: i64,
    /// The start of the last op placed.
    placed: Option<i64>,
    /// Ops starting at `latest`, not yet placed.
    tie: Vec<Arrival>,
    /// The open ops, innermost last.
    stack: Vec<u32>,
    /// The ops that receive the work of the calls inside them (by recorded end), as in
    /// [`attribute_launches`](super::tree::attribute_launches).
    receivers: Receivers<u32>,
    /// The earliest deadline the thread has in `deadlines` (`i64::MAX`: none).
    wake: i64,
}

/// What a child adds to its parent (the sums
/// [`summarize_thread`](super::tree::summarize_thread) keeps per parent), but for its
/// memory usage, which goes to the parent's [`Usage`].
#[derive(Clone, Debug, Default)]
struct Sums {
    cpu_ns: i64,
    device_ns: i64,
    /// Children's float CPU and device totals, with their places: summed in that order
    /// (children may become final out of it), as PyTorch and
    /// [`summarize_thread`](super::tree::summarize_thread) sum them.
    floats: Vec<(Key, f64, f64)>,
}

impl Sums {
    /// Back to no child, keeping the vector's room.
    fn clear(&mut self) {
        self.cpu_ns = 0;
        self.device_ns = 0;
        self.floats.clear();
    }
}

#[derive(Debug)]
struct Node {
    op: HostOp,
    parent: u32,
    /// Children placed (after adopting a removed child's).
    children: u32,
    /// Children not final yet.
    open_children: u32,
    /// Announced device work not yet arrived.
    pending: u32,
    /// The first child, while it has this op's name and may be removed into it.
    held_child: u32,
    /// This op is its parent's `held_child`.
    held: bool,
    closed: bool,
    sums: Sums,
    /// Runtime correlation ids of the calls whose device work this op receives, in order.
    /// (Inline: an op encloses few launching calls, and nodes are many while a long op
    /// keeps the horizon back.)
    launches: Few<u64>,
    /// Final, but held for the parent's decision (a child that may yet be removed into
    /// it): the slot of its event in [`Parked`], its own device time in `op` and its
    /// children's sums in `sums`, which its parent takes if it removes it; [`NONE`]: not.
    done: u32,
    /// Host ops of its thread it nests in, as placed (an absorbed child still counts).
    depth: u32,
    generation: u32,
    alive: bool,
    /// In `by_end`: final but for the horizon, which has not passed its end.
    awaits_horizon: bool,
}

impl Node {
    fn new(op: HostOp) -> Self {
        Self {
            op,
            parent: NONE,
            children: 0,
            open_children: 0,
            pending: 0,
            held_child: NONE,
            held: false,
            closed: false,
            sums: Sums::default(),
            launches: Few::None,
            done: NONE,
            depth: 0,
            generation: 0,
            alive: true,
            awaits_horizon: false,
        }
    }

    /// The retired node holds `op` now: a new generation, field by field (not a new node
    /// moved in), keeping its vectors' room.
    fn reuse(&mut self, op: HostOp) {
        self.op = op;
        self.parent = NONE;
        self.children = 0;
        self.open_children = 0;
        self.pending = 0;
        self.held_child = NONE;
        self.held = false;
        self.closed = false;
        // `retire` emptied the sums; `finalize` the launches (an op never final is never
        // retired).
        self.launches.clear();
        self.depth = 0;
        self.generation = self.generation.wrapping_add(1);
        self.alive = true;
        self.awaits_horizon = false;
    }
}

/// An op's memory usage so far (i128: as [`super::memory::MemoryIndex`] sums, then clamps),
/// and its final children's (the [`Sums`] of memory).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Usage {
    cpu: i128,
    device: i128,
    children_cpu: i64,
    children_device: i64,
}

/// Node `n`'s usage, its slot made when the side table is shorter.
fn usage_of(usage: &mut Vec<Usage>, n: u32) -> &mut Usage {
    if usage.len() <= n as usize {
        usage.resize(n as usize + 1, Usage::default());
    }
    &mut usage[n as usize]
}

/// A memory record after the horizon.
struct Record {
    bytes: i64,
    kind: MemoryKind,
    covered: bool,
}

/// The ops of a row not yet in it, and its events waiting for them.
#[derive(Default)]
struct RowState {
    /// (place, node, generation) of the row's placed ops not yet added to it, and of some
    /// that were since (skipped when met).
    live: MinQueue<(Key, u32, u32)>,
    live_count: usize,
    /// (place, slot in [`Parked`]) of the row's final events waiting for an earlier one:
    /// the queue moves these small entries, not the events.
    waiting: MinQueue<(Key, u32)>,
}

/// The folding state; see the [module docs](self).
pub(super) struct Folder {
    threads: Vec<Thread>,
    thread_index: FastMap<(i64, i64), u32>,
    /// The last thread an item came from, tried before `thread_index`: a trace's events
    /// mostly come in runs of one thread's.
    last_thread: Option<((i64, i64), u32)>,
    /// (latest start, thread) of the thread whose latest start is the earliest, once items
    /// came out of time order.
    slowest: Option<(i64, u32)>,
    /// Every host op and memory record so far came in time order.
    in_order: bool,
    max_start: i64,
    horizon: i64,
    finishing: bool,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// (end, node, generation): ops that wait only for the horizon to pass their end (the
    /// others are looked at again when what they wait for comes).
    by_end: MinQueue<(i64, u32, u32)>,
    /// (deadline, thread): when the horizon may make a thread place or close ops (some
    /// deadlines passed since; a thread with an earlier one is not pushed again).
    deadlines: BinaryHeap<Reverse<(i64, u32)>>,
    /// (node, generation) of placed ops not final, which memory records may fall in
    /// (some already final): kept from the first memory record on, when they are found
    /// among the nodes (most traces hold no memory record).
    live: Option<Vec<(u32, u32)>>,
    /// `live`'s length that makes it drop its final ops.
    live_limit: usize,
    records: BTreeMap<(i64, u32), Record>,
    /// The memory usage of the ops, by node, up to the last node some memory record fell in
    /// (none in most traces): kept out of [`Node`] (48 bytes of what would be 232), of
    /// which an op that keeps the horizon back makes many.
    usage: Vec<Usage>,
    /// How many live ops receive launched device work, by runtime correlation id.
    launch_refs: FastMap<u64, u32>,
    seen_linked: RangeSet,
    seen_launch: RangeSet,
    /// Ops waiting for the device work of a flow, by flow id.
    flow_targets: FastMap<u64, Ids>,
    /// Flows whose device work came before the launch.
    early_flow_ends: FastMap<u64, ()>,
    /// By row index.
    rows: Vec<RowState>,
    parked: Parked<Emitted>,
    waiting_count: usize,
    /// (start of the earliest waiting event, row): rows waiting for the horizon.
    due: BinaryHeap<Reverse<(i64, u32)>>,
    /// The start each row is in `due` with.
    due_at: FastMap<u32, i64>,
    worklist: Vec<u32>,
    window_end: Option<i64>,
    /// Where host times count from; set by the builder.
    pub origin: i64,
    /// Some event's float times were computed (with `origin`).
    pub computed: bool,
    /// The slots in `parked` of the events for their rows, in the order to add them (the
    /// builder takes them with [`Self::take_ready`]): an event the horizon lets through
    /// stays where it waited, so that a step's events are not held twice when they all go
    /// at once.
    ready: Vec<u32>,
    /// Memory records inside no host op, in no particular order.
    pub uncovered: Vec<(i64, i64, u32, MemoryKind)>,
    /// What became of same-named first children, and what device work ops received, since
    /// the builder last took them (only when it lists events: `list_fates`).
    pub fates: Vec<Fate>,
    pub list_fates: bool,
    /// The most ops, waiting events and records held at once.
    pub high_water: usize,
    tie_count: usize,
    /// An empty vector with room, for a thread's next waiting ops.
    spare: Vec<Arrival>,
    /// Host ops left out because they would nest deeper than [`MAX_STACK_DEPTH`].
    pub too_deep: u64,
}

impl Folder {
    /// `in_order`: the items held before came in time order.
    pub(super) fn new(origin: i64, window_end: Option<i64>, in_order: bool) -> Self {
        Self {
            threads: Vec::new(),
            thread_index: FastMap::default(),
            last_thread: None,
            slowest: None,
            in_order,
            max_start: i64::MIN,
            horizon: i64::MIN,
            finishing: false,
            nodes: Vec::new(),
            free: Vec::new(),
            by_end: MinQueue::default(),
            deadlines: BinaryHeap::new(),
            live: None,
            live_limit: 64,
            records: BTreeMap::new(),
            usage: Vec::new(),
            launch_refs: FastMap::default(),
            seen_linked: RangeSet::default(),
            seen_launch: RangeSet::default(),
            flow_targets: FastMap::default(),
            early_flow_ends: FastMap::default(),
            rows: Vec::new(),
            parked: Parked::default(),
            waiting_count: 0,
            due: BinaryHeap::new(),
            due_at: FastMap::default(),
            worklist: Vec::new(),
            window_end,
            origin,
            computed: false,
            ready: Vec::new(),
            uncovered: Vec::new(),
            fates: Vec::new(),
            list_fates: false,
            high_water: 0,
            tie_count: 0,
            spare: Vec::new(),
            too_deep: 0,
        }
    }

    pub(super) fn set_window_end(&mut self, end_ns: i64) {
        self.window_end = Some(end_ns);
    }

    /// Whether some event is ready for its row ([`Self::take_ready`]).
    pub(super) fn any_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Gives the events ready for their rows to `add`, in the order to add them.
    pub(super) fn take_ready(&mut self, mut add: impl FnMut(&Emitted)) {
        for &slot in &self.ready {
            add(&self.parked.take(slot));
        }
        self.ready.clear();
    }

    /// Whether no final event waits for an earlier one of its row: every event final so far
    /// was given out through [`Self::take_ready`].
    pub(super) fn none_waiting(&self) -> bool {
        self.waiting_count == 0
    }

    /// Ops, waiting events and memory records held now.
    fn held(&self) -> usize {
        (self.nodes.len() - self.free.len())
            + self.tie_count
            + self.waiting_count
            + self.records.len()
    }

    fn note_held(&mut self) {
        self.high_water = self.high_water.max(self.held());
    }

    /// A flow whose launch was held before folding started.
    pub(super) fn early_flow_end(&mut self, flow: u64) {
        self.early_flow_ends.insert(flow, ());
    }

    fn thread(&mut self, id: (i64, i64), start: i64) -> u32 {
        if let Some((last, t)) = self.last_thread {
            if last == id {
                return t;
            }
        }
        if let Some(&t) = self.thread_index.get(&id) {
            self.last_thread = Some((id, t));
            return t;
        }
        let t = self.threads.len() as u32;
        self.threads.push(Thread {
            latest: start,
            wake: i64::MAX,
            ..Thread::default()
        });
        self.thread_index.insert(id, t);
        if !self.in_order && self.slowest.is_none_or(|s| (start, t) < s) {
            self.slowest = Some((start, t));
        }
        t
    }

    /// Checks an item's start against the horizon and moves its thread's latest start.
    fn arrive(
        &mut self,
        thread: (i64, i64),
        start: i64,
        what: &'static str,
    ) -> Result<u32, OutOfOrder> {
        if start < self.horizon {
            return Err(OutOfOrder::Late {
                what,
                start_ns: start,
                after_ns: self.horizon,
            });
        }
        if start < self.max_start && self.in_order {
            self.in_order = false;
            // From now on the horizon is the slowest thread's latest start.
            self.find_slowest();
        }
        self.max_start = self.max_start.max(start);
        Ok(self.thread(thread, start))
    }

    /// The horizon the items so far allow (see the [module docs](self)).
    fn bound(&self) -> i64 {
        if self.in_order {
            self.max_start
        } else {
            self.slowest.map_or(i64::MIN, |(l, _)| l)
        }
    }

    fn find_slowest(&mut self) {
        self.slowest = (0..self.threads.len() as u32)
            .map(|t| (self.threads[t as usize].latest, t))
            .min();
    }

    fn set_latest(&mut self, t: u32, start: i64) {
        let th = &mut self.threads[t as usize];
        if start > th.latest {
            th.latest = start;
            // Only the slowest thread moving moves the horizon: the others are not looked at
            // (threads that take turns look at them once a turn).
            if !self.in_order && self.slowest.is_some_and(|(_, s)| s == t) {
                self.find_slowest();
            }
        }
    }

    pub(super) fn host_op(
        &mut self,
        thread: (i64, i64),
        arrival: Arrival,
        sums: &mut DeviceSums,
    ) -> Result<(), OutOfOrder> {
        let start = arrival.op.start_ns;
        let t = self.arrive(thread, start, "host op")?;
        let th = &self.threads[t as usize];
        if let Some(placed) = th.placed.filter(|&p| start <= p) {
            return Err(OutOfOrder::Late {
                what: "host op",
                start_ns: start,
                after_ns: placed,
            });
        }
        match th.tie.first().map(|a| a.op.start_ns) {
            Some(tie) if start < tie => {
                // Earlier than the ops waiting at the thread's latest start, but after the
                // last op placed: it is next in order.
                self.place(t, &mut [arrival], sums)?;
            }
            Some(tie) => {
                if start > tie {
                    self.flush_tie(t, sums)?;
                }
                self.threads[t as usize].tie.push(arrival);
                self.tie_count += 1;
                self.bound_tie(t);
            }
            None => {
                self.threads[t as usize].tie.push(arrival);
                self.tie_count += 1;
            }
        }
        self.set_latest(t, start);
        self.schedule(t);
        self.note_held();
        self.advance(sums)
    }

    pub(super) fn memory_record(
        &mut self,
        thread: (i64, i64),
        time_ns: i64,
        bytes: i64,
        ordinal: u32,
        kind: MemoryKind,
        sums: &mut DeviceSums,
    ) -> Result<(), OutOfOrder> {
        let t = self.arrive(thread, time_ns, "memory record")?;
        self.set_latest(t, time_ns);
        let (cpu, device) = kind.split(bytes);
        let mut covered = false;
        if self.live.is_some() {
            self.prune_live();
        } else {
            let nodes = &self.nodes;
            let live = (0..nodes.len() as u32).filter_map(|n| {
                let node = &nodes[n as usize];
                (node.alive && node.done == NONE && !node.op.out_of_memory)
                    .then_some((n, node.generation))
            });
            self.live = Some(live.collect());
        }
        if self.usage.len() < self.nodes.len() {
            self.usage.resize(self.nodes.len(), Usage::default());
        }
        for &(n, _) in self.live.iter().flatten() {
            let op = &self.nodes[n as usize].op;
            if op.start_ns <= time_ns && time_ns <= op.end_ns {
                let usage = &mut self.usage[n as usize];
                usage.cpu += i128::from(cpu);
                usage.device += i128::from(device);
                covered = true;
            }
        }
        self.records.insert(
            (time_ns, ordinal),
            Record {
                bytes,
                kind,
                covered,
            },
        );
        self.note_held();
        self.advance(sums)
    }

    /// Device work (not a GPU user annotation) arrived: `linked` is its `External id` and
    /// whether a live op has it ([`Linked::has_live_op`]), `correlation` its runtime
    /// correlation id, `flow_end` the `ac2g` flow it ends. The builder has already added it
    /// to its sums.
    pub(super) fn device_work(
        &mut self,
        linked: Option<(u64, bool)>,
        correlation: u64,
        flow_end: Option<u64>,
        sums: &mut DeviceSums,
    ) -> Result<(), OutOfOrder> {
        let late = match linked {
            Some((c, live)) => (!live && self.seen_linked.contains(c)).then_some(c),
            None => (correlation != 0
                && self.seen_launch.contains(correlation)
                && !self.launch_refs.contains_key(&correlation))
            .then_some(correlation),
        };
        if let Some(correlation) = late {
            return Err(OutOfOrder::LateDeviceWork { correlation });
        }
        if let Some(f) = flow_end {
            match self.flow_targets.remove(&f) {
                Some(targets) => {
                    for &n in targets.as_slice() {
                        let node = &mut self.nodes[n as usize];
                        node.pending -= 1;
                        self.worklist.push(n);
                    }
                    self.run(sums)?;
                }
                None => {
                    self.early_flow_ends.insert(f, ());
                }
            }
        }
        Ok(())
    }

    /// Drops the ops that became final from `live`.
    fn prune_live(&mut self) {
        let nodes = &self.nodes;
        let Some(live) = &mut self.live else {
            return;
        };
        live.retain(|&(n, generation)| {
            let node = &nodes[n as usize];
            node.alive && node.generation == generation && node.done == NONE
        });
    }

    /// Keeps a thread's waiting ops under twice [`MAX_STACK_DEPTH`]: past that, the
    /// innermost of them (in the order they are placed) beyond [`MAX_STACK_DEPTH`] are left
    /// out, as [`Self::place`] would leave them out. (Sorting once per [`MAX_STACK_DEPTH`]
    /// ops keeps a tie of millions cheap.)
    fn bound_tie(&mut self, t: u32) {
        let tie = &mut self.threads[t as usize].tie;
        if tie.len() < 2 * MAX_STACK_DEPTH {
            return;
        }
        tie.sort_by_key(|a| (Reverse(a.op.end_ns), a.op.seq));
        let cut = tie.len() - MAX_STACK_DEPTH;
        tie.truncate(MAX_STACK_DEPTH);
        self.tie_count -= cut;
        self.too_deep += cut as u64;
    }

    /// Places the thread's ops waiting at its latest start.
    fn flush_tie(&mut self, t: u32, sums: &mut DeviceSums) -> Result<(), OutOfOrder> {
        let spare = std::mem::take(&mut self.spare);
        let mut tie = std::mem::replace(&mut self.threads[t as usize].tie, spare);
        self.tie_count -= tie.len();
        let placed = self.place(t, &mut tie, sums);
        tie.clear();
        self.spare = tie;
        placed
    }

    /// Places ops that share a start (or one op) in PyTorch's order.
    fn place(
        &mut self,
        t: u32,
        ops: &mut [Arrival],
        sums: &mut DeviceSums,
    ) -> Result<(), OutOfOrder> {
        let Some(first) = ops.first() else {
            return Ok(());
        };
        let start = first.op.start_ns;
        self.threads[t as usize].placed = Some(start);
        // The ops that end by their start close first (as `nest` closes them), so that the
        // stack holds the ops open around them.
        self.pop_ended(t, start);
        // Ops that start together nest in the order sorted below: those past the room the
        // open ops leave are left out (as `tree::leave_out_too_deep` leaves them out).
        let room = MAX_STACK_DEPTH.saturating_sub(self.threads[t as usize].stack.len());
        if ops.len() > room {
            self.too_deep += (ops.len() - room) as u64;
        }
        if let [a] = ops {
            if room == 0 {
                return self.run(sums);
            }
            let id = self.new_node(a, sums)?;
            self.enclose(t, a, id, sums);
            self.nest(t, a, id);
            return self.run(sums);
        }
        ops.sort_unstable_by_key(|a| (Reverse(a.op.end_ns), a.op.seq));
        let ops = &ops[..ops.len().min(room)];
        let ids: Vec<u32> = ops
            .iter()
            .map(|a| self.new_node(a, sums))
            .collect::<Result<_, _>>()?;
        // Launches first, in the order `attribute_launches` sorts ops: by recorded end.
        let mut by_recorded: Vec<usize> = (0..ops.len()).collect();
        by_recorded.sort_unstable_by_key(|&i| (Reverse(ops[i].recorded_end), ops[i].op.seq));
        for i in by_recorded {
            self.enclose(t, &ops[i], ids[i], sums);
        }
        for (a, &id) in ops.iter().zip(&ids) {
            self.nest(t, a, id);
        }
        self.run(sums)
    }

    fn new_node(&mut self, a: &Arrival, sums: &mut DeviceSums) -> Result<u32, OutOfOrder> {
        let op = a.op;
        let c = op.correlation;
        // The op's entry among the live ops with its correlation id, looked up once.
        let live = if c != 0 && !op.call {
            let live = sums.linked.entry(c);
            let has_live = matches!(&live, Entry::Occupied(l) if l.get().has_live_op());
            // (A reused id stops the folding: what the set then holds does not matter.)
            if !self.seen_linked.insert_new(c) && !has_live {
                return Err(OutOfOrder::ReusedCorrelation(c));
            }
            Some(live)
        } else {
            None
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize].reuse(op);
                id
            }
            None => {
                self.nodes.push(Node::new(op));
                (self.nodes.len() - 1) as u32
            }
        };
        if let Some(live) = live {
            live.or_default().live.push(id);
        }
        // (An `[OutOfMemory]` record's usage is its own, in `op`.)
        let mut usage = Usage::default();
        // (Most traces hold no memory record: their nodes have no usage slot.)
        if !op.out_of_memory && !self.records.is_empty() {
            for (_, r) in self
                .records
                .range_mut((op.start_ns, 0)..=(op.end_ns, u32::MAX))
            {
                let (rc, rd) = r.kind.split(r.bytes);
                usage.cpu += i128::from(rc);
                usage.device += i128::from(rd);
                r.covered = true;
            }
        }
        // The slot is cleared of the node's last op's usage.
        if usage != Usage::default() || (id as usize) < self.usage.len() {
            *usage_of(&mut self.usage, id) = usage;
        }
        if let (false, Some(live)) = (op.out_of_memory, &mut self.live) {
            live.push((id, self.nodes[id as usize].generation));
            if live.len() >= self.live_limit {
                self.prune_live();
                self.live_limit = (2 * self.live.as_ref().map_or(0, Vec::len)).max(64);
            }
        }
        let generation = self.nodes[id as usize].generation;
        let row = row_state(&mut self.rows, op.key);
        row.live
            .push((order_key(op.start_ns, op.end_ns, op.seq), id, generation));
        row.live_count += 1;
        // Entries of ops gone are skipped when met; they are dropped when too many.
        if row.live.len() > 2 * row.live_count + 32 {
            let nodes = &self.nodes;
            row.live.retain(|(_, n, g)| {
                let node = &nodes[*n as usize];
                node.alive && node.generation == *g
            });
        }
        Ok(id)
    }

    /// [`attribute_launches`](super::tree::attribute_launches) for one op: a call's device
    /// work goes to the innermost non-call op around it; and the ops whose device work a
    /// flow announces wait for it.
    fn enclose(&mut self, t: u32, a: &Arrival, id: u32, sums: &DeviceSums) {
        let op = a.op;
        let receivers = &mut self.threads[t as usize].receivers;
        let receiver = receivers.take(id, op.start_ns, a.recorded_end, op.call);
        if let (Some(r), c) = (receiver, op.correlation) {
            if c != 0 {
                self.nodes[r as usize].launches.push(c);
                *self.launch_refs.entry(c).or_default() += 1;
                self.seen_launch.insert(c);
            }
        }
        let Some(flow) = a.flow else {
            return;
        };
        // (Device work nearly always comes after its launch: the table is mostly empty.)
        if !self.early_flow_ends.is_empty() && self.early_flow_ends.remove(&flow).is_some() {
            return;
        }
        let mut targets = Ids::default();
        if let Some(r) = receiver {
            targets.push(r);
        }
        let own = if op.call { a.linked } else { op.correlation };
        if own != 0 {
            let live = sums.linked.get(&own).map(|l| l.live.as_slice());
            for &n in live.unwrap_or_default() {
                if !targets.as_slice().contains(&n) {
                    targets.push(n);
                }
            }
        }
        for &n in targets.as_slice() {
            self.nodes[n as usize].pending += 1;
        }
        match self.flow_targets.entry(flow) {
            Entry::Vacant(v) => {
                v.insert(targets);
            }
            Entry::Occupied(mut o) => {
                for &n in targets.as_slice() {
                    o.get_mut().push(n);
                }
            }
        }
    }

    /// The op tree: pops what the op starts after, then nests it in the top or makes it
    /// async.
    fn nest(&mut self, t: u32, a: &Arrival, id: u32) {
        let (start, end) = (a.op.start_ns, a.op.end_ns);
        self.pop_ended(t, start);
        // An open op it ends after contains it no more than what follows: closed, as PyTorch
        // drops it from its stack.
        while let Some(&top) = self.threads[t as usize].stack.last() {
            if end <= self.nodes[top as usize].op.end_ns {
                break;
            }
            self.threads[t as usize].stack.pop();
            self.close(top);
        }
        let top = self.threads[t as usize].stack.last().copied();
        if let Some(p) = top {
            let depth = self.nodes[p as usize].depth + 1;
            let node = &mut self.nodes[id as usize];
            node.parent = p;
            node.depth = depth;
            let same_name = self.nodes[p as usize].op.name == a.op.name;
            let parent = &mut self.nodes[p as usize];
            parent.children += 1;
            parent.open_children += 1;
            if parent.children == 1 && same_name {
                parent.held_child = id;
                self.nodes[id as usize].held = true;
                if self.list_fates {
                    self.fates.push(Fate::Held(a.op.seq));
                }
            } else if parent.held_child != NONE {
                let held = parent.held_child;
                parent.held_child = NONE;
                self.release(held, p);
            }
        }
        self.threads[t as usize].stack.push(id);
    }

    /// Closes the thread's open ops that end by `start`.
    fn pop_ended(&mut self, t: u32, start: i64) {
        while let Some(&top) = self.threads[t as usize].stack.last() {
            if self.nodes[top as usize].op.end_ns > start {
                break;
            }
            self.threads[t as usize].stack.pop();
            self.close(top);
        }
    }

    fn close(&mut self, n: u32) {
        self.nodes[n as usize].closed = true;
        self.worklist.push(n);
    }

    /// The thread's next deadline: when the horizon passes its waiting ops' start or its
    /// top's end.
    fn schedule(&mut self, t: u32) {
        let th = &mut self.threads[t as usize];
        let tie = th
            .tie
            .first()
            .map_or(i64::MAX, |a| a.op.start_ns.saturating_add(1));
        let top = th
            .stack
            .last()
            .map_or(i64::MAX, |&n| self.nodes[n as usize].op.end_ns);
        let deadline = tie.min(top);
        if deadline < th.wake {
            th.wake = deadline;
            self.deadlines.push(Reverse((deadline, t)));
        }
    }

    /// Moves the horizon to what the items allow, and folds what that makes final.
    fn advance(&mut self, sums: &mut DeviceSums) -> Result<(), OutOfOrder> {
        let bound = self.bound();
        if bound <= self.horizon {
            return Ok(());
        }
        self.horizon = bound;
        while let Some(&Reverse((deadline, t))) = self.deadlines.peek() {
            if deadline > self.horizon {
                break;
            }
            self.deadlines.pop();
            let th = &mut self.threads[t as usize];
            if th.wake == deadline {
                th.wake = i64::MAX;
            }
            self.pass_horizon(t, sums)?;
            self.schedule(t);
        }
        while let Some((end, n, generation)) = self.by_end.peek() {
            if end >= self.horizon {
                break;
            }
            self.by_end.pop();
            let node = &mut self.nodes[n as usize];
            if node.alive && node.generation == generation {
                node.awaits_horizon = false;
                self.worklist.push(n);
            }
        }
        self.run(sums)?;
        self.trim(sums);
        self.drop_records(self.horizon);
        while let Some(&Reverse((start, row))) = self.due.peek() {
            if start >= self.horizon {
                break;
            }
            self.due.pop();
            if self.due_at.get(&row) == Some(&start) {
                self.due_at.remove(&row);
            }
            self.recheck(row);
        }
        Ok(())
    }

    /// Gives back the room of the tables of live ops that once held far more.
    fn trim(&mut self, sums: &mut DeviceSums) {
        trim(&mut self.launch_refs);
        trim(&mut self.flow_targets);
        sums.trim();
    }

    /// The horizon passed the thread's waiting ops or its top's end.
    fn pass_horizon(&mut self, t: u32, sums: &mut DeviceSums) -> Result<(), OutOfOrder> {
        let th = &self.threads[t as usize];
        if th.tie.first().is_some_and(|a| a.op.start_ns < self.horizon) || self.finishing {
            self.flush_tie(t, sums)?;
        }
        while let Some(&top) = self.threads[t as usize].stack.last() {
            if self.nodes[top as usize].op.end_ns > self.horizon && !self.finishing {
                break;
            }
            self.threads[t as usize].stack.pop();
            self.close(top);
        }
        self.run(sums)
    }

    fn drop_records(&mut self, before: i64) {
        while let Some(entry) = self.records.first_entry() {
            let &(time, ordinal) = entry.key();
            if time >= before && !self.finishing {
                break;
            }
            let r = entry.remove();
            if !r.covered {
                self.uncovered.push((time, r.bytes, ordinal, r.kind));
            }
        }
    }

    fn run(&mut self, sums: &mut DeviceSums) -> Result<(), OutOfOrder> {
        while let Some(n) = self.worklist.pop() {
            self.try_finalize(n, sums)?;
        }
        Ok(())
    }

    fn try_finalize(&mut self, n: u32, sums: &mut DeviceSums) -> Result<(), OutOfOrder> {
        let node = &mut self.nodes[n as usize];
        if !node.alive
            || node.done != NONE
            || !node.closed
            || node.pending > 0
            || node.open_children > 0
        {
            return Ok(());
        }
        if node.op.end_ns >= self.horizon && !self.finishing {
            if !node.awaits_horizon {
                node.awaits_horizon = true;
                self.by_end.push((node.op.end_ns, n, node.generation));
            }
            return Ok(());
        }
        self.finalize(n, sums);
        Ok(())
    }

    /// The op's times, as [`summarize_thread`](super::tree::summarize_thread) computes
    /// them; its totals go to its parent and its event to its row (or it waits, when its
    /// parent may remove it).
    fn finalize(&mut self, n: u32, sums: &mut DeviceSums) {
        let (mut own, mut receives) = self.own_device_time(n, sums);
        let op = self.nodes[n as usize].op;
        let (cpu_memory, device_memory) = self.memory_usage(n, &op);
        let cpu_total_ns = op.end_ns.saturating_sub(op.start_ns);
        // A zero-length op's float time is 0 from any origin.
        self.computed |= op.end_ns != op.start_ns;
        let cpu_total_us =
            relative_us(op.end_ns, self.origin) - relative_us(op.start_ns, self.origin);
        let first = order_key(op.start_ns, op.end_ns, op.seq);
        let held = self.nodes[n as usize].held_child;
        let mut child_sums = std::mem::take(&mut self.nodes[n as usize].sums);
        // A held child is final before its parent (the parent waits for its children).
        if held != NONE && self.nodes[n as usize].children == 1 {
            self.absorb(n, held, &mut own, &mut child_sums);
            if let Some(Fate::Receives { counted, .. }) = &mut receives {
                *counted = false;
            }
        }
        self.fates.extend(receives);
        let (children_cpu_memory, children_device_memory) = self
            .usage
            .get(n as usize)
            .map_or((0, 0), |u| (u.children_cpu, u.children_device));
        let children_device = child_sums.device_ns;
        let (children_cpu_us, children_device_us) = children_us(&mut child_sums);
        let (device_total_ns, device_total_us) = if op.legacy {
            (own.ns, own.us)
        } else {
            (
                own.ns.saturating_add(children_device),
                own.us + children_device_us,
            )
        };
        let parent = self.nodes[n as usize].parent;
        let event = Emitted {
            first,
            key: op.key,
            times: OpTimes {
                self_cpu_ns: cpu_total_ns - child_sums.cpu_ns,
                cpu_total_ns,
                self_device_ns: device_total_ns - children_device,
                device_total_ns,
                cpu_memory,
                self_cpu_memory: cpu_memory.saturating_sub(children_cpu_memory),
                device_memory,
                self_device_memory: device_memory.saturating_sub(children_device_memory),
            },
            float: PyTorchTimes {
                cpu_total_us,
                device_total_us,
                self_cpu_us: cpu_total_us - children_cpu_us,
                self_device_us: device_total_us - children_device_us,
            },
            parent_seq: if parent == NONE {
                NO_PARENT
            } else {
                self.nodes[parent as usize].op.seq
            },
            depth: Some(self.nodes[n as usize].depth),
            parent_open: parent != NONE && self.nodes[parent as usize].held,
        };
        self.hand_over(n, parent, event, own, child_sums);
    }

    /// The device time `n` receives itself (not its children's): its own records', then the
    /// work launched by the calls it encloses, then the work linked to its correlation id,
    /// summed in that order; and, when listing, which work that was.
    fn own_device_time(&mut self, n: u32, sums: &mut DeviceSums) -> (DeviceTime, Option<Fate>) {
        let mut own = {
            let node = &self.nodes[n as usize];
            DeviceTime {
                ns: node.op.device_ns,
                us: node.op.device_us,
            }
        };
        let mut received = Vec::new();
        // (Most ops enclose no launching call.)
        if !self.nodes[n as usize].launches.is_empty() {
            self.receive_launches(n, sums, &mut own, &mut received);
        }
        let op = self.nodes[n as usize].op;
        let mut linked = None;
        if op.correlation != 0 && !op.call {
            let c = op.correlation;
            // The last live op with the id takes its entry, device time and all.
            let time = match sums.linked.entry(c) {
                Entry::Occupied(mut entry) => match &mut entry.get_mut().live {
                    Ids::Many(many) => {
                        many.retain(|&x| x != n);
                        if many.is_empty() {
                            entry.remove().time
                        } else {
                            entry.get().time
                        }
                    }
                    Ids::None | Ids::One(_) => entry.remove().time,
                },
                Entry::Vacant(_) => None,
            };
            if let Some(time) = time {
                own.add(time.ns, time.us);
                // Only the device work that came (each id with some has a sum).
                linked = self.list_fates.then_some(c);
            }
        }
        let receives = (linked.is_some() || !received.is_empty()).then_some(Fate::Receives {
            op: op.seq,
            linked,
            launches: received,
            counted: true,
        });
        (own, receives)
    }

    /// The CPU and device memory allocated during the op: an `[OutOfMemory]` record's own,
    /// else the records that fell inside it, clamped as [`MemoryIndex`] clamps them.
    ///
    /// [`MemoryIndex`]: super::memory::MemoryIndex
    fn memory_usage(&self, n: u32, op: &HostOp) -> (i64, i64) {
        let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        if op.out_of_memory {
            (op.cpu_memory, op.device_memory)
        } else {
            let usage = self.usage.get(n as usize).copied().unwrap_or_default();
            (clamp(usage.cpu), clamp(usage.device))
        }
    }

    /// PyTorch's collapse: `held` stayed `n`'s only child, with its name, and is removed.
    /// `n` takes its device time (in place of its own) and its children's sums.
    fn absorb(&mut self, n: u32, held: u32, own: &mut DeviceTime, child_sums: &mut Sums) {
        let child = &mut self.nodes[held as usize];
        let row = child.op.key;
        *own = DeviceTime {
            ns: child.op.device_ns,
            us: child.op.device_us,
        };
        std::mem::swap(child_sums, &mut child.sums);
        let slot = std::mem::replace(&mut child.done, NONE);
        self.parked.take(slot);
        // Its children's memory too, as their other sums above.
        let adopted = self
            .usage
            .get(held as usize)
            .map_or((0, 0), |u| (u.children_cpu, u.children_device));
        if adopted != (0, 0) || (n as usize) < self.usage.len() {
            let usage = usage_of(&mut self.usage, n);
            (usage.children_cpu, usage.children_device) = adopted;
        }
        if self.list_fates {
            self.fates.push(Fate::Absorbed {
                op: self.nodes[held as usize].op.seq,
                into: self.nodes[n as usize].op.seq,
            });
        }
        self.retire(held);
        self.gone(row);
        self.recheck(row);
    }

    /// The final op's event goes to its parent's sums and its row; or, when the parent may
    /// yet remove the op, it waits, parked, with what the parent would take (`own`, its
    /// device time, and `child_sums`).
    fn hand_over(
        &mut self,
        n: u32,
        parent: u32,
        event: Emitted,
        own: DeviceTime,
        mut child_sums: Sums,
    ) {
        if parent != NONE {
            self.nodes[parent as usize].open_children -= 1;
            self.worklist.push(parent);
        }
        if self.nodes[n as usize].held {
            // Kept for the parent, which decides whether it stays.
            let slot = self.parked.park(event);
            let node = &mut self.nodes[n as usize];
            (node.op.device_ns, node.op.device_us) = (own.ns, own.us);
            node.sums = child_sums;
            node.done = slot;
            return;
        }
        if parent != NONE {
            let sums = &mut self.nodes[parent as usize].sums;
            add_child(sums, &mut self.usage, parent, &event);
        }
        // The vector goes back with its room, for the op that takes this node next.
        child_sums.floats.clear();
        self.nodes[n as usize].sums.floats = child_sums.floats;
        let row = event.key;
        self.retire(n);
        self.gone(row);
        self.emit(event);
    }

    /// The device work launched by the calls `n` encloses: added to its own time, and each
    /// call that had some to `received` (when listing).
    fn receive_launches(
        &mut self,
        n: u32,
        sums: &mut DeviceSums,
        own: &mut DeviceTime,
        received: &mut Vec<u64>,
    ) {
        let mut launches = std::mem::take(&mut self.nodes[n as usize].launches);
        for &c in launches.as_slice() {
            let last = match self.launch_refs.entry(c) {
                Entry::Occupied(mut refs) => {
                    *refs.get_mut() -= 1;
                    if *refs.get() == 0 {
                        refs.remove();
                        true
                    } else {
                        false
                    }
                }
                Entry::Vacant(_) => false,
            };
            if let Some(time) = read_sum(&mut sums.launched, c, last) {
                own.add(time.ns, time.us);
                if self.list_fates {
                    received.push(c);
                }
            }
        }
        launches.clear();
        self.nodes[n as usize].launches = launches;
    }

    /// The parent got a second child: its first child stays.
    fn release(&mut self, child: u32, parent: u32) {
        let node = &mut self.nodes[child as usize];
        node.held = false;
        if self.list_fates {
            self.fates.push(Fate::Kept(node.op.seq));
        }
        if node.done != NONE {
            let event = self.parked.take(std::mem::replace(&mut node.done, NONE));
            let sums = &mut self.nodes[parent as usize].sums;
            add_child(sums, &mut self.usage, parent, &event);
            self.retire(child);
            self.gone(event.key);
            self.emit(event);
        }
    }

    fn retire(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        node.alive = false;
        node.sums.clear();
        node.done = NONE;
        self.free.push(n);
    }

    /// An op of the row was added to it (or removed).
    fn gone(&mut self, row: u32) {
        if let Some(state) = self.rows.get_mut(row as usize) {
            state.live_count -= 1;
            if state.live_count == 0 {
                state.live.clear();
            }
        }
    }

    /// Whether an op of the row not yet added to it comes before `key`.
    fn blocked(nodes: &[Node], state: &mut RowState, key: Key) -> bool {
        Self::first_live(nodes, state).is_some_and(|first| first < key)
    }

    /// The place of the row's first op not yet added to it (dropping the entries of ops
    /// gone before it).
    fn first_live(nodes: &[Node], state: &mut RowState) -> Option<Key> {
        if state.live_count == 0 {
            return None;
        }
        while let Some((first, n, generation)) = state.live.peek() {
            let node = &nodes[n as usize];
            if node.alive && node.generation == generation {
                return Some(first);
            }
            state.live.pop();
        }
        None
    }

    fn emit(&mut self, event: Emitted) {
        let row = event.key;
        let first = event.first;
        let slot = self.parked.park(event);
        let state = row_state(&mut self.rows, row);
        if !state.waiting.is_empty() {
            // It may come before the events waiting, and the op of the row just added to it
            // (`gone`) may have let them through.
            state.waiting.push((first, slot));
            self.waiting_count += 1;
            self.recheck(row);
            return;
        }
        // The row's only event waiting, if it waits: what `recheck` would find, found once.
        if first.0 >= self.horizon && !self.finishing {
            due_later(&mut self.due, &mut self.due_at, row, first.0);
        } else if !Self::blocked(&self.nodes, state, first) {
            self.ready.push(slot);
            return;
        }
        state.waiting.push((first, slot));
        self.waiting_count += 1;
    }

    /// Adds the row's waiting events that no earlier event can precede any more.
    fn recheck(&mut self, row: u32) {
        let Some(state) = self.rows.get_mut(row as usize) else {
            return;
        };
        // No op is added to the row meanwhile: its first one not added stays.
        let first_live = Self::first_live(&self.nodes, state);
        while let Some((first, slot)) = state.waiting.peek() {
            if first.0 >= self.horizon && !self.finishing {
                due_later(&mut self.due, &mut self.due_at, row, first.0);
                break;
            }
            if first_live.is_some_and(|live| live < first) {
                break;
            }
            state.waiting.pop();
            self.waiting_count -= 1;
            self.ready.push(slot);
        }
    }

    /// Everything has arrived: every op is final.
    pub(super) fn finish(&mut self, sums: &mut DeviceSums) -> Result<(), OutOfOrder> {
        self.finishing = true;
        self.horizon = i64::MAX;
        for t in 0..self.threads.len() as u32 {
            self.pass_horizon(t, sums)?;
        }
        for (_, targets) in std::mem::take(&mut self.flow_targets) {
            for &n in targets.as_slice() {
                self.nodes[n as usize].pending -= 1;
            }
        }
        let live: Vec<u32> = (0..self.nodes.len() as u32)
            .filter(|&n| self.nodes[n as usize].alive)
            .collect();
        self.worklist.extend(live);
        self.run(sums)?;
        self.drop_records(i64::MAX);
        for row in 0..self.rows.len() as u32 {
            self.recheck(row);
        }
        Ok(())
    }
}

/// The state of a row, by index.
fn row_state(rows: &mut Vec<RowState>, row: u32) -> &mut RowState {
    let row = row as usize;
    if rows.len() <= row {
        rows.resize_with(row + 1, RowState::default);
    }
    &mut rows[row]
}

/// The row's first waiting event starts at `start`, which the horizon has not passed: the
/// row is looked at again when it does.
fn due_later(
    due: &mut BinaryHeap<Reverse<(i64, u32)>>,
    due_at: &mut FastMap<u32, i64>,
    row: u32,
    start: i64,
) {
    if due_at.insert(row, start) != Some(start) {
        due.push(Reverse((start, row)));
    }
}

/// The children's float CPU and device totals, each summed in PyTorch's order.
fn children_us(child_sums: &mut Sums) -> (f64, f64) {
    // (Children mostly become final in order: then the sort only checks it.)
    child_sums.floats.sort_unstable_by_key(|a| a.0);
    child_sums
        .floats
        .iter()
        .fold((0.0, 0.0), |(cpu, device), &(_, c, d)| {
            (cpu + c, device + d)
        })
}

/// What a final child adds to its parent `p` (its `sums`, and its `usage`).
fn add_child(sums: &mut Sums, usage: &mut Vec<Usage>, p: u32, event: &Emitted) {
    let t = &event.times;
    sums.cpu_ns = sums.cpu_ns.saturating_add(t.cpu_total_ns);
    sums.device_ns = sums.device_ns.saturating_add(t.device_total_ns);
    let f = &event.float;
    sums.floats
        .push((event.first, f.cpu_total_us, f.device_total_us));
    // (Adding 0 changes nothing: most traces make no usage slot.)
    if t.cpu_memory != 0 || t.device_memory != 0 {
        let usage = usage_of(usage, p);
        usage.children_cpu = usage.children_cpu.saturating_add(t.cpu_memory);
        usage.children_device = usage.children_device.saturating_add(t.device_memory);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fold holds a node per live op and an event per op waiting for its row: a step's
    /// worth of each when a long op keeps the horizon back.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_node_takes_184_bytes_and_an_event_144() {
        assert_eq!(std::mem::size_of::<Node>(), 184);
        assert_eq!(std::mem::size_of::<Emitted>(), 144);
    }
}
