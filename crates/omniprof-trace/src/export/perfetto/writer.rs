//! The whole-trace writer, and the machinery the streamed one shares: the layout a first
//! pass finds (rows, lanes, tracks, flows), track uuids, and the packet writer.

use std::io::{self, Write};
use std::sync::Arc;

use super::counter_tracks::{CounterTracks, CounterTracksFound};
use super::ends::PendingEnds;
use super::flows::FlowIds;
use super::proto::{
    self, annotation, clock, defaults, event, interned, packet, track, Buf, Room, SliceEnd,
};

use crate::activity::{Activity, ActivityType, FlowKind};
use crate::counter::CounterTrack;
use crate::export::json;
use crate::export::lanes::{row_tid, written_span, Lanes, RowId, WrittenOrder};
use crate::export::WriteStats;
use crate::hash::{cache_slot, FastMap};
use crate::keys::arg;
use crate::layout::{header, DEVICE_PID_BASE};
use crate::trace::{ThreadRow, Trace};
use crate::value::Value;

/// The sequences: the activities (interned, incremental times), spans (absolute times),
/// counter samples (incremental times).
const EVENTS_SEQUENCE: u64 = 1;
const ABSOLUTE_SEQUENCE: u64 = 2;
const COUNTERS_SEQUENCE: u64 = 3;
/// Where rows have sequences of their own ([`Layout::per_row`]), row `r`'s is this plus `r`.
const FIRST_ROW_SEQUENCE: u64 = 4;
/// The events sequence's clock: incremental, each timestamp the delta from the last.
const INCREMENTAL_CLOCK: u64 = clock::FIRST_SEQUENCE_CLOCK;
const FLUSH_AT: usize = 1 << 16;
/// Room for a run of an event's fixed fields (see [`proto::Room`]): the largest, an
/// event's name, category and `External id` annotation, takes at most 46 bytes.
const EVENT_ROOM: usize = 64;
/// The name of the track spans and the window's end are written on (the Chrome writer's
/// `Spans` process).
const SPANS_TRACK: &str = "Spans";
/// The `cat` of span slices.
const SPAN_CATEGORY: &str = "Trace";
const WINDOW_END: &str = "Record Window End";

/// Writes `trace` as a Perfetto protobuf trace to `out`. Files are written with
/// [`export::save`](crate::export::save()) (`.pftrace`).
pub fn write_perfetto<W: Write>(trace: &Trace, out: W) -> io::Result<WriteStats> {
    let plan = Plan::new(trace);
    let layout = &plan.layout;
    let mut w = Writer::start(out, trace, layout)?;
    let mut tracks = plan.track_of.iter().enumerate();
    plan.order.try_for_each(|a| {
        let (index, &track) = tracks.next().expect("the plan has every activity's track");
        w.activity(a, layout, index, track)
    })?;
    let mut samples = Vec::new();
    for series in trace.counters.series() {
        for sample in &series.samples {
            layout.counters.samples(&series.track, sample, &mut samples);
        }
    }
    w.finish(trace, layout, samples)
}

/// Track uuids. Row tracks, which every slice names twice, get small numbers (a byte for
/// lane 0 of the first 127 rows); the others, named once per descriptor or per sample, live
/// in ranges above them.
pub(super) mod uuid {
    use super::*;

    const PROCESS: u64 = 1 << 63;
    const SPANS: u64 = 1 << 44;

    /// Lane `lane` of the row with index `row` (see [`Lanes::row`]), packed.
    #[inline]
    pub(in crate::export::perfetto) fn row_track(row: usize, lane: u32) -> u32 {
        (row as u32) << 7 | lane
    }

    /// The row index of a packed row track.
    #[inline]
    pub(in crate::export::perfetto) fn row_of(track: u32) -> usize {
        (track >> 7) as usize
    }

    /// The lane of a packed row track.
    #[inline]
    pub(in crate::export::perfetto) fn lane_of(track: u32) -> u32 {
        track & 0x7f
    }

    /// The uuid of a packed row track, lane by lane: lane 0 of every row first.
    #[inline]
    pub(in crate::export::perfetto) fn row(track: u32, rows: u32) -> u64 {
        let (row, lane) = (row_of(track) as u32, lane_of(track));
        u64::from(lane) * u64::from(rows) + u64::from(row) + 1
    }

    /// The process track of a pid: the pid mixed (SplitMix64's finalizer, a bijection), with
    /// the top bit set to keep it apart from the ranges below.
    pub(in crate::export::perfetto) fn process(pid: i64) -> u64 {
        let mut z = pid as u64;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) | PROCESS
    }

    /// Counter tracks follow the row tracks (at most 128 lanes per row).
    pub(in crate::export::perfetto) fn counter(index: u32, rows: u32) -> u64 {
        u64::from(rows) * 128 + 1 + u64::from(index)
    }

    /// The `Spans` track (`None`) or the track of the spans with this name (its index).
    pub(in crate::export::perfetto) fn spans(index: Option<usize>) -> u64 {
        SPANS + index.map_or(0, |i| i as u64 + 1)
    }

    /// A flow id, namespaced by the flow's kind.
    #[inline]
    pub(in crate::export::perfetto) fn flow(kind: FlowKind, id: u64) -> u64 {
        id ^ (kind as u64) << 62
    }
}

/// What the writer must know before its first packet: the rows and how many lanes each
/// needs, the devices, the flows' ends, the counter tracks, and how events are sequenced.
/// The whole-trace writer finds it in a first pass over the trace, the streamed one in a
/// first read of the input ([`PerfettoSurvey`](crate::PerfettoSurvey)).
pub(super) struct Layout {
    /// The rows, thread rows first, and how many lanes each used (row indices are
    /// positions here).
    pub(super) rows: Vec<(RowId, u32)>,
    /// X events moved to a sibling lane.
    pub(super) spilled: u64,
    /// The Perfetto ids of the flow ends.
    pub(super) flows: FlowIds,
    /// Pids that device activities or device counters use.
    pub(super) device_pids: Vec<i64>,
    /// Counter tracks; a track's uuid follows from its index.
    pub(super) counters: CounterTracks,
    /// Whether each row has a packet sequence of its own, for activities that come in
    /// order on each row but not across rows; else one sequence holds every row's events,
    /// which must come in written order.
    pub(super) per_row: bool,
}

/// Where an activity goes, as it comes in written order on its row: its row and lane,
/// packed ([`uuid::row_track`]). Instants stay on lane 0 (they cannot overlap).
#[inline]
pub(super) fn place_on_row(lanes: &mut Lanes, a: &Activity) -> u32 {
    let row = lanes.row((a.device, row_tid(a.resource)));
    let lane = if a.kind == ActivityType::CpuInstantEvent {
        0
    } else {
        let (start, end) = written_span(a);
        lanes.assign_in(row, start, end)
    };
    uuid::row_track(row, lane)
}

/// The first pass's findings over activities in written order.
pub(super) struct Placement {
    pub(super) lanes: Lanes,
    pub(super) flows: FlowIds,
    pub(super) device_pids: Vec<i64>,
    /// Activities placed so far: the next one's written index.
    placed: usize,
}

impl Placement {
    /// Placement with `threads`' rows numbered first, in their order, for `activities`
    /// activities if known (else 0; see [`FlowIds::for_activities`]).
    pub(super) fn new(threads: &[ThreadRow], activities: usize) -> Self {
        let mut lanes = Lanes::default();
        for t in threads {
            lanes.row((t.pid, row_tid(t.tid)));
        }
        Self {
            lanes,
            flows: FlowIds::for_activities(activities),
            device_pids: Vec::new(),
            placed: 0,
        }
    }

    /// Places the next activity; returns its row track.
    #[inline]
    pub(super) fn place(&mut self, a: &Activity) -> u32 {
        if a.kind.is_device() && !self.device_pids.contains(&a.device) {
            self.device_pids.push(a.device);
        }
        if let Some(flow) = a.flow.filter(|f| f.id > 0) {
            self.flows.place(self.placed, flow);
        }
        self.placed += 1;
        place_on_row(&mut self.lanes, a)
    }

    /// Notes a counter series' device, if it is one.
    pub(super) fn counter_series(&mut self, track: &CounterTrack) {
        if track.kind.is_device() && !self.device_pids.contains(&track.device) {
            self.device_pids.push(track.device);
        }
    }
}

/// The whole-trace writer's first pass: the layout, and the activities' order and tracks.
struct Plan<'a> {
    /// The activities in the order they are written.
    order: WrittenOrder<'a>,
    /// The row track of each activity, in written order.
    track_of: Vec<u32>,
    layout: Layout,
}

impl<'a> Plan<'a> {
    pub(super) fn new(trace: &'a Trace) -> Self {
        let activities = trace.activities.len();
        let fresh = || (Placement::new(&trace.threads, activities), Vec::new());
        let mut placed = fresh();
        placed.1.reserve(trace.activities.len());
        let order = WrittenOrder::visit(
            &trace.activities,
            &mut placed,
            |placed| *placed = fresh(),
            |(placement, track_of), a| track_of.push(placement.place(a)),
        );
        let (mut placement, track_of) = placed;
        let mut counters = CounterTracksFound::default();
        for series in trace.counters.series() {
            placement.counter_series(&series.track);
            for sample in &series.samples {
                counters.add(&series.track, sample);
            }
        }
        let layout = Layout {
            rows: placement.lanes.rows().collect(),
            spilled: placement.lanes.spilled,
            flows: placement.flows,
            device_pids: placement.device_pids,
            counters: counters.finish(),
            per_row: false,
        };
        Plan {
            order,
            track_of,
            layout,
        }
    }
}

impl Layout {
    fn row_count(&self) -> u32 {
        self.rows.len() as u32
    }

    fn is_device(&self, pid: i64) -> bool {
        self.device_pids.contains(&pid)
    }

    /// The index of the sequence a row track's events go on.
    #[inline]
    pub(super) fn sequence(&self, track: u32) -> usize {
        if self.per_row {
            uuid::row_of(track)
        } else {
            0
        }
    }

    /// Every track descriptor: processes, then rows and their sibling lanes, then counters
    /// and spans. `trace` gives the rows' names and the spans (its activities and counters
    /// are not read).
    fn descriptors(&self, trace: &Trace, b: &mut Buf) {
        let mut pids: Vec<i64> = trace.processes.iter().map(|p| p.pid).collect();
        let row_pids = self.rows.iter().map(|(row, _)| row.0);
        for pid in row_pids.chain(self.counters.devices()) {
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        for pid in pids {
            let row = trace.processes.iter().find(|p| p.pid == pid);
            let d = descriptor(b, uuid::process(pid));
            let p = b.open(track::PROCESS);
            // A device's index moves to the pids no OS gives (which the reader moves back);
            // one outside them is written as it is, all 64 bits (see `docs/perfetto.md`).
            let os_pid = if self.is_device(pid) && (0..DEVICE_PID_BASE).contains(&pid) {
                DEVICE_PID_BASE + pid
            } else {
                pid
            };
            b.int(track::process::PID, os_pid);
            if let Some(row) = row {
                b.str(track::process::PROCESS_NAME, &row.name);
                if !row.label.is_empty() {
                    b.str(track::process::PROCESS_LABELS, &row.label);
                }
                b.int(track::process::LEGACY_SORT_INDEX, row.sort_index);
            }
            b.close(p);
            end_descriptor(b, d);
        }
        let rows = self.row_count();
        for (index, &((pid, tid), lanes)) in self.rows.iter().enumerate() {
            let named = trace
                .threads
                .iter()
                .find(|t| t.pid == pid && row_tid(t.tid) == tid);
            let name = match named {
                Some(t) => t.name.clone(),
                None if self.is_device(pid) => format!("stream {tid}"),
                None => format!("thread {tid}"),
            };
            let track = |lane| uuid::row(uuid::row_track(index, lane), rows);
            let first_sibling = if self.is_device(pid) {
                0
            } else {
                let d = descriptor(b, track(0));
                let t = b.open(track::THREAD);
                b.int(track::thread::PID, pid);
                b.int(track::thread::TID, tid);
                b.str(track::thread::THREAD_NAME, &name);
                if let Some(row) = named {
                    b.int(track::thread::LEGACY_SORT_INDEX, row.sort_index);
                }
                b.close(t);
                end_descriptor(b, d);
                1
            };
            // Thread tracks are root tracks, one per thread: a thread's sibling lanes, and a
            // device's streams, are tracks of the row's name under the process.
            for lane in first_sibling..lanes {
                custom_track(b, track(lane), uuid::process(pid), &name, Some(tid));
            }
        }
        for (index, counter) in self.counters.tracks.iter().enumerate() {
            let series = &counter.series;
            let d = descriptor(b, uuid::counter(index as u32, rows));
            b.uint(track::PARENT_UUID, uuid::process(series.device));
            b.str(track::NAME, &counter.name);
            b.int(track::SIBLING_ORDER_RANK, series.resource);
            // The series' type and name, for the reader (Perfetto shows them as the
            // counter's categories).
            let c = b.open(track::COUNTER);
            b.str(track::counter::CATEGORIES, series.kind.name());
            b.str(track::counter::CATEGORIES, &series.name);
            b.close(c);
            end_descriptor(b, d);
        }
        let spans = uuid::spans(None);
        let d = descriptor(b, spans);
        b.str(track::NAME, SPANS_TRACK);
        end_descriptor(b, d);
        for (index, name) in span_names(trace).into_iter().enumerate() {
            custom_track(b, uuid::spans(Some(index)), spans, name, None);
        }
    }
}

/// The distinct span names, in order of first appearance: one track each.
fn span_names(trace: &Trace) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for s in &trace.spans {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    names
}

/// Opens a track-descriptor packet with the track's uuid; [`end_descriptor`] closes it.
fn descriptor(b: &mut Buf, uuid: u64) -> (proto::Open, proto::Open) {
    let p = b.open(proto::trace::PACKET);
    b.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, EVENTS_SEQUENCE);
    let d = b.open(packet::TRACK_DESCRIPTOR);
    b.uint(track::UUID, uuid);
    (p, d)
}

fn end_descriptor(b: &mut Buf, (p, d): (proto::Open, proto::Open)) {
    b.close(d);
    b.close(p);
}

/// A track under `parent`; a row's track carries the row's tid as its sibling rank (which
/// orders a device's streams by id, and tells the reader the row).
fn custom_track(b: &mut Buf, uuid: u64, parent: u64, name: &str, tid: Option<i64>) {
    let d = descriptor(b, uuid);
    b.uint(track::PARENT_UUID, parent);
    b.str(track::NAME, name);
    if let Some(tid) = tid {
        b.int(track::SIBLING_ORDER_RANK, tid);
    }
    end_descriptor(b, d);
}

/// Strings numbered on first use, per kind (iids start at 1: 0 is invalid).
///
/// Looked up by address: names are shared `Arc<str>`s (the recorder and the reader intern
/// them), so a lookup compares two words, first in a small direct-mapped cache, then in a
/// map. The interner holds a reference to every string whose address it knows, so that no
/// other string can take that address while it does (a streamed trace's activities are
/// dropped as soon as they are written). A string seen at a new address is looked up by its
/// text, so equal names still share one iid.
struct Interner {
    cache: [(usize, usize, u64); CACHE_SLOTS],
    by_address: FastMap<(usize, usize), (u64, Arc<str>)>,
    by_text: FastMap<Arc<str>, u64>,
}

const CACHE_SLOTS: usize = 64;

impl Default for Interner {
    fn default() -> Self {
        Self {
            cache: [(0, 0, 0); CACHE_SLOTS],
            by_address: FastMap::default(),
            by_text: FastMap::default(),
        }
    }
}

impl Interner {
    /// The iid of `s`; a new one is noted in `new`, as a string of the interned-data field
    /// `table`, to be sent in this packet's interned data.
    #[inline]
    fn id(&mut self, s: &Arc<str>, table: u32, new: &mut Vec<NewInterned>) -> u64 {
        let address = (s.as_ptr() as usize, s.len());
        // The trace's names are 8-aligned allocations, but arg keys may be string constants
        // packed side by side, which the low bits alone would put in one slot.
        let slot = cache_slot::<CACHE_SLOTS>(address.0 as u64);
        let cached = self.cache[slot];
        if (cached.0, cached.1) == address && cached.2 != 0 {
            return cached.2;
        }
        self.slow_id(s, address, slot, table, new)
    }

    #[cold]
    fn slow_id(
        &mut self,
        s: &Arc<str>,
        address: (usize, usize),
        slot: usize,
        table: u32,
        new: &mut Vec<NewInterned>,
    ) -> u64 {
        let id = match self.by_address.get(&address) {
            Some(&(id, _)) => id,
            None => {
                let next = self.by_text.len() as u64 + 1;
                let id = match self.by_text.get(&**s) {
                    Some(&id) => id,
                    None => {
                        self.by_text.insert(Arc::clone(s), next);
                        next
                    }
                };
                self.by_address.insert(address, (id, Arc::clone(s)));
                if id == next {
                    new.push((table, id, Arc::clone(s)));
                }
                id
            }
        };
        self.cache[slot] = (address.0, address.1, id);
        id
    }
}

/// An interned string to send with the current packet: (`InternedData` field, iid, text).
type NewInterned = (u32, u64, Arc<str>);

/// A packet sequence that activities are written on: its incremental clock, its interned
/// strings, and its slice ends not written yet.
pub(super) struct Sequence {
    id: u64,
    /// The last timestamp written (the sequence's clock counts from it).
    pub(super) last_ts: u64,
    names: Interner,
    /// The iid of each type's category (by [`ActivityType::index`]; 0: none yet), and the
    /// next one to give.
    categories: [u64; ActivityType::ALL.len()],
    next_category: u64,
    arg_names: Interner,
    /// The iid of the `External id` arg name, which most activities carry (0: none yet).
    external_id_iid: u64,
    /// Slice ends not written yet.
    ends: PendingEnds,
}

impl Sequence {
    pub(super) fn new(id: u64) -> Self {
        Self {
            id,
            last_ts: 0,
            names: Interner::default(),
            categories: [0; ActivityType::ALL.len()],
            next_category: 1,
            arg_names: Interner::default(),
            external_id_iid: 0,
            ends: PendingEnds::default(),
        }
    }

    /// The timestamp of an event at `ts` on this sequence: the time since the event before.
    #[inline]
    fn next_delta(&mut self, ts: i64) -> u64 {
        let ts = timestamp(ts);
        let delta = ts - self.last_ts;
        self.last_ts = ts;
        delta
    }

    #[inline]
    fn intern_category(&mut self, kind: ActivityType, new: &mut Vec<NewInterned>) -> u64 {
        let iid = &mut self.categories[kind.index()];
        if *iid == 0 {
            *iid = self.next_category;
            self.next_category += 1;
            new.push((interned::EVENT_CATEGORIES, *iid, Arc::from(kind.name())));
        }
        *iid
    }

    #[inline]
    fn intern_external_id(&mut self, key: &Arc<str>, new: &mut Vec<NewInterned>) -> u64 {
        if self.external_id_iid == 0 {
            self.external_id_iid = self
                .arg_names
                .id(key, interned::DEBUG_ANNOTATION_NAMES, new);
        }
        self.external_id_iid
    }
}

pub(super) struct Writer<W> {
    out: W,
    buf: Buf,
    stats: WriteStats,
    /// The activities' sequences: one, or one per row ([`Layout::per_row`]).
    pub(super) sequences: Vec<Sequence>,
    new_interned: Vec<NewInterned>,
    /// The iids of the current activity's arg names.
    arg_iids: Vec<u64>,
    /// The name kernels named `kernel` are written with (as the Chrome writer does).
    kernel_name: Arc<str>,
    external_id_name: Arc<str>,
}

/// A packet's first fields on an events sequence: the sequence, and the time since the
/// event before.
#[inline(always)]
fn packet_header(r: &mut Room<'_>, sequence: u64, delta: u64) -> proto::Open {
    let p = r.open(proto::trace::PACKET);
    r.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, sequence);
    r.uint(packet::TIMESTAMP, delta);
    p
}

/// A track event's first fields: its type and track.
#[inline(always)]
fn event_header(r: &mut Room<'_>, kind: u64, track: u64) -> proto::Open {
    let e = r.open(packet::TRACK_EVENT);
    r.uint(event::TYPE, kind);
    r.uint(event::TRACK_UUID, track);
    e
}

/// Nanoseconds as a packet timestamp (the model's times are never before the epoch).
#[inline]
pub(super) fn timestamp(ns: i64) -> u64 {
    ns.max(0) as u64
}

impl<W: Write> Writer<W> {
    /// A writer that has written everything before the first activity: the events
    /// sequence's start, every track descriptor (names and spans from `trace`), and the
    /// start of each row's sequence where rows have their own.
    pub(super) fn start(out: W, trace: &Trace, layout: &Layout) -> io::Result<Self> {
        let sequences = match layout.per_row {
            true => (0..layout.rows.len() as u64)
                .map(|row| Sequence::new(FIRST_ROW_SEQUENCE + row))
                .collect(),
            false => vec![Sequence::new(EVENTS_SEQUENCE)],
        };
        let mut w = Writer {
            out,
            buf: Buf::default(),
            stats: WriteStats::default(),
            sequences,
            new_interned: Vec::new(),
            arg_iids: Vec::new(),
            kernel_name: Arc::from("Kernel"),
            external_id_name: Arc::from(arg::EXTERNAL_ID),
        };
        w.start_incremental_sequence(EVENTS_SEQUENCE);
        layout.descriptors(trace, &mut w.buf);
        if layout.per_row {
            for row in 0..w.sequences.len() {
                w.start_incremental_sequence(w.sequences[row].id);
                w.flush_if_full()?;
            }
        }
        w.flush()?;
        Ok(w)
    }

    /// Writes what follows the activities: the slice ends held back, the counter
    /// `samples` (time, track index, value), the spans and the window's end from `trace`.
    pub(super) fn finish(
        mut self,
        trace: &Trace,
        layout: &Layout,
        samples: Vec<(i64, u32, f64)>,
    ) -> io::Result<WriteStats> {
        for sequence in 0..self.sequences.len() {
            self.end_slices_until(sequence, i64::MAX)?;
        }
        self.counters(layout, samples)?;
        self.start_absolute_sequence();
        self.spans(trace)?;
        self.stats.spilled = layout.spilled;
        self.flush()?;
        self.out.flush()?;
        Ok(self.stats)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stats.bytes += self.buf.bytes.len() as u64;
        self.out.write_all(&self.buf.bytes)?;
        self.buf.bytes.clear();
        Ok(())
    }

    #[inline]
    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.buf.bytes.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    /// A sequence's first packet: it clears the incremental state (the interning tables).
    fn start_sequence(&mut self, sequence: u64) -> proto::Open {
        let b = &mut self.buf;
        let p = b.open(proto::trace::PACKET);
        b.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, sequence);
        b.uint(packet::FIRST_PACKET_ON_SEQUENCE, 1);
        b.uint(
            packet::SEQUENCE_FLAGS,
            packet::SEQ_INCREMENTAL_STATE_CLEARED | packet::SEQ_NEEDS_INCREMENTAL_STATE,
        );
        p
    }

    /// The first packet of a sequence with an incremental clock defines it: at 0 when
    /// BOOTTIME (the trace clock) is at 0, so the times it adds up are the model's own.
    fn start_incremental_sequence(&mut self, sequence: u64) {
        let p = self.start_sequence(sequence);
        let b = &mut self.buf;
        let d = b.open(packet::TRACE_PACKET_DEFAULTS);
        b.uint(defaults::TIMESTAMP_CLOCK_ID, INCREMENTAL_CLOCK);
        b.close(d);
        let snapshot = b.open(packet::CLOCK_SNAPSHOT);
        let c = b.open(clock::CLOCKS);
        b.uint(clock::CLOCK_ID, INCREMENTAL_CLOCK);
        b.uint(clock::TIMESTAMP, 0);
        b.uint(clock::IS_INCREMENTAL, 1);
        b.close(c);
        let c = b.open(clock::CLOCKS);
        b.uint(clock::CLOCK_ID, clock::BOOTTIME);
        b.uint(clock::TIMESTAMP, 0);
        b.close(c);
        b.close(snapshot);
        b.close(p);
    }

    /// Opens a packet of the sequence with index `sequence` at `ts` carrying a track event
    /// of `kind` on `track`, with the strings interned since the last one; returns both to
    /// close.
    #[inline]
    fn open_event(
        &mut self,
        sequence: usize,
        ts: i64,
        kind: u64,
        track: u64,
    ) -> (proto::Open, proto::Open) {
        let s = &mut self.sequences[sequence];
        let (id, delta) = (s.id, s.next_delta(ts));
        self.stats.events += 1;
        let b = &mut self.buf;
        let p = b.room(EVENT_ROOM, |r| packet_header(r, id, delta));
        // Only packets that add interned data say they need the sequence's state: it is
        // never invalid (one writer, nothing dropped), so the flag would only cost bytes.
        if !self.new_interned.is_empty() {
            let d = b.open(packet::INTERNED_DATA);
            for (field, iid, text) in self.new_interned.drain(..) {
                let e = b.open(field);
                b.uint(interned::IID, iid);
                b.str(interned::NAME, &text);
                b.close(e);
            }
            b.close(d);
            b.uint(packet::SEQUENCE_FLAGS, packet::SEQ_NEEDS_INCREMENTAL_STATE);
        }
        let e = b.room(EVENT_ROOM, |r| event_header(r, kind, track));
        (p, e)
    }

    #[inline]
    fn close_event(&mut self, (p, e): (proto::Open, proto::Open)) {
        self.buf.close(e);
        self.buf.close(p);
    }

    /// Writes the ends of the held-back slices of the sequence with index `sequence` that
    /// end at or before `t`.
    fn end_slices_until(&mut self, sequence: usize, t: i64) -> io::Result<()> {
        let s = &mut self.sequences[sequence];
        while let Some((end, event)) = s.ends.pop_until(t) {
            // A slice's end carries no interned data: its whole packet fits in one room.
            let (id, delta) = (s.id, s.next_delta(end));
            self.stats.events += 1;
            self.buf.room(EVENT_ROOM, |r| {
                let p = packet_header(r, id, delta);
                r.slice_end(event);
                r.close(p);
            });
        }
        self.flush_if_full()
    }

    /// Writes the activity written `index`-th, on its row track `track`.
    pub(super) fn activity(
        &mut self,
        a: &Activity,
        layout: &Layout,
        index: usize,
        track: u32,
    ) -> io::Result<()> {
        let (start, end) = written_span(a);
        let sequence = layout.sequence(track);
        self.end_slices_until(sequence, start)?;
        let mut args = Args::of(a);
        let s = &mut self.sequences[sequence];
        let new = &mut self.new_interned;
        let name = if &*a.name == "kernel" {
            &self.kernel_name
        } else {
            &a.name
        };
        let name_iid = s.names.id(name, interned::EVENT_NAMES, new);
        let category_iid = s.intern_category(a.kind, new);
        let external_iid = args
            .external_id
            .map(|_| s.intern_external_id(&self.external_id_name, new));
        self.arg_iids.clear();
        for (key, _) in &a.args {
            if &**key == arg::CORRELATION {
                args.correlation = None;
            }
            let iid = s.arg_names.id(key, interned::DEBUG_ANNOTATION_NAMES, new);
            self.arg_iids.push(iid);
        }
        let instant = a.kind == ActivityType::CpuInstantEvent;
        let kind = if instant {
            event::TYPE_INSTANT
        } else {
            event::TYPE_SLICE_BEGIN
        };
        let track = uuid::row(track, layout.row_count());
        let e = self.open_event(sequence, start, kind, track);
        let b = &mut self.buf;
        b.room(EVENT_ROOM, |r| {
            r.uint(event::NAME_IID, name_iid);
            r.uint(event::CATEGORY_IIDS, category_iid);
            if let (Some(iid), Some(id)) = (external_iid, args.external_id) {
                let d = r.open(event::DEBUG_ANNOTATIONS);
                r.uint(annotation::NAME_IID, iid);
                r.uint(annotation::UINT_VALUE, id);
                r.close(d);
            }
        });
        for ((_, value), &iid) in a.args.iter().zip(&self.arg_iids) {
            // A number (most args) is one annotation of bounded size: one room.
            let number = match *value {
                Value::Int(v) => Some((annotation::INT_VALUE, v as u64)),
                Value::UInt(v) => Some((annotation::UINT_VALUE, v)),
                _ => None,
            };
            if let Some((field, v)) = number {
                b.room(EVENT_ROOM, |r| {
                    let d = r.open(event::DEBUG_ANNOTATIONS);
                    r.uint(annotation::NAME_IID, iid);
                    r.uint(field, v);
                    r.close(d);
                });
                continue;
            }
            let d = b.open(event::DEBUG_ANNOTATIONS);
            b.uint(annotation::NAME_IID, iid);
            write_value(b, value);
            b.close(d);
        }
        b.room(EVENT_ROOM, |r| {
            if let Some(id) = args.correlation {
                r.uint(event::CORRELATION_ID, id);
            }
            if let Some(flow) = a.flow.filter(|f| f.id > 0) {
                if flow.start {
                    r.fixed64(event::FLOW_IDS, uuid::flow(flow.kind, flow.id));
                } else {
                    let id = layout.flows.own_end(index);
                    let id = id.unwrap_or(uuid::flow(flow.kind, flow.id));
                    r.fixed64(event::TERMINATING_FLOW_IDS, id);
                }
            }
        });
        if a.flow.is_some_and(|f| f.start) {
            for &id in layout.flows.more_starts(index) {
                b.fixed64(event::FLOW_IDS, id);
            }
        }
        self.close_event(e);
        if !instant {
            self.sequences[sequence].ends.push(end, SliceEnd::on(track));
        }
        self.flush_if_full()
    }

    /// The second sequence: counter samples, spans and the window's end, with absolute
    /// times (the trace keeps counters apart from the activities, and spans overlap
    /// everything, so they cannot join the time-ordered events).
    fn start_absolute_sequence(&mut self) {
        let p = self.start_sequence(ABSOLUTE_SEQUENCE);
        self.buf.close(p);
    }

    /// Every counter sample (time, track index, value), in time order, on a sequence of
    /// its own with an incremental clock (as the events'). The values sampled at one time
    /// share a packet: the first is the event's own, the others ride along as its extra
    /// counter values (Perfetto's way to snapshot several counters at once), a few bytes
    /// each instead of a packet each.
    fn counters(&mut self, layout: &Layout, mut samples: Vec<(i64, u32, f64)>) -> io::Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        samples.sort_by_key(|&(ts, index, _)| (ts, index));
        self.start_incremental_sequence(COUNTERS_SEQUENCE);
        let mut last = 0;
        let rows = layout.row_count();
        for at_once in samples.chunk_by(|a, b| a.0 == b.0) {
            self.stats.events += at_once.len() as u64;
            let ts = timestamp(at_once[0].0);
            let track = |index: u32| uuid::counter(index, rows);
            let b = &mut self.buf;
            let p = b.open(proto::trace::PACKET);
            b.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, COUNTERS_SEQUENCE);
            b.uint(packet::TIMESTAMP, ts - last);
            last = ts;
            let e = b.open(packet::TRACK_EVENT);
            b.uint(event::TYPE, event::TYPE_COUNTER);
            let (_, first, value) = at_once[0];
            b.uint(event::TRACK_UUID, track(first));
            match exact_count(value) {
                // Most samples are counts (bytes, zeros): a varint of a few bytes, not 8.
                Some(count) => b.uint(event::COUNTER_VALUE, count),
                None => b.double(event::DOUBLE_COUNTER_VALUE, value),
            }
            for &(_, index, value) in &at_once[1..] {
                match exact_count(value) {
                    Some(count) => {
                        b.uint(event::EXTRA_COUNTER_TRACK_UUIDS, track(index));
                        b.uint(event::EXTRA_COUNTER_VALUES, count);
                    }
                    None => {
                        b.uint(event::EXTRA_DOUBLE_COUNTER_TRACK_UUIDS, track(index));
                        b.double(event::EXTRA_DOUBLE_COUNTER_VALUES, value);
                    }
                }
            }
            b.close(e);
            b.close(p);
            self.flush_if_full()?;
        }
        Ok(())
    }

    /// The spans and the window's end.
    fn spans(&mut self, trace: &Trace) -> io::Result<()> {
        let names = span_names(trace);
        let mut spans: Vec<_> = trace.spans.iter().collect();
        spans.sort_by_key(|s| s.start_ns);
        for s in spans {
            let index = names.iter().position(|n| *n == s.name);
            let track = uuid::spans(index);
            let name = format!("{}{} ({})", s.prefix, s.name, s.iteration);
            self.absolute_event(s.start_ns, event::TYPE_SLICE_BEGIN, track, |b| {
                b.str(event::NAME, &name);
                b.str(event::CATEGORIES, SPAN_CATEGORY);
                let d = b.open(event::DEBUG_ANNOTATIONS);
                b.str(annotation::NAME, arg::OP_COUNT);
                b.uint(annotation::UINT_VALUE, s.op_count);
                b.close(d);
            });
            let marker = format!("Iteration Start: {}", s.name);
            self.absolute_event(s.start_ns, event::TYPE_INSTANT, track, |b| {
                b.str(event::NAME, &marker)
            });
            let end = s.end_ns.max(s.start_ns);
            self.absolute_event(end, event::TYPE_SLICE_END, track, |_| {});
        }
        let end = trace.window.end_ns;
        self.absolute_event(end, event::TYPE_INSTANT, uuid::spans(None), |b| {
            b.str(event::NAME, WINDOW_END);
            header_annotations(b, trace);
        });
        self.flush_if_full()
    }

    /// An event on the absolute sequence, its names written in full (few, not worth
    /// interning).
    fn absolute_event(&mut self, ts: i64, kind: u64, track: u64, fields: impl FnOnce(&mut Buf)) {
        self.stats.events += 1;
        let b = &mut self.buf;
        let p = b.open(proto::trace::PACKET);
        b.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, ABSOLUTE_SEQUENCE);
        b.uint(packet::TIMESTAMP, timestamp(ts));
        let e = b.open(packet::TRACK_EVENT);
        b.uint(event::TYPE, kind);
        b.uint(event::TRACK_UUID, track);
        fields(b);
        b.close(e);
        b.close(p);
    }
}

/// The trace's header as the window's end marker's annotations, named as the JSON's
/// top-level keys (the reader takes them back; Perfetto shows them as the marker's args).
fn header_annotations(b: &mut Buf, trace: &Trace) {
    let entry = |b: &mut Buf, key: &str, value: &Value| {
        let d = b.open(event::DEBUG_ANNOTATIONS);
        b.str(annotation::NAME, key);
        write_value(b, value);
        b.close(d);
    };
    entry(b, header::BASE_TIME, &Value::Int(trace.base_time_ns));
    entry(b, header::WINDOW_START, &Value::Int(trace.window.start_ns));
    if let Some(name) = &trace.trace_name {
        entry(b, header::TRACE_NAME, &Value::from(name.as_str()));
    }
    if !trace.device_properties.is_empty() {
        let devices = Value::List(trace.device_properties.clone());
        entry(b, header::DEVICE_PROPERTIES, &devices);
    }
    for (key, value) in &trace.metadata {
        entry(b, &header::escaped(key), value);
    }
    // The session health, under the keys the JSON header has, so that a `.pftrace` keeps
    // what was dropped and which backend failed as the JSON does.
    for (key, value) in trace.health.entries() {
        entry(b, key, &value);
    }
}

/// The ids written around an activity's own args, exactly as the Chrome writer decides
/// them: `External id` (a debug annotation, first) and `correlation` (Perfetto's own
/// `correlation_id`, which groups a launch with its device work).
struct Args {
    external_id: Option<u64>,
    /// Unless an arg has that name, which the writer finds as it interns the args' names
    /// (rather than look over them once more here).
    correlation: Option<u64>,
}

impl Args {
    #[inline]
    fn of(a: &Activity) -> Self {
        let own = a.kind.has_own_external_id();
        Self {
            external_id: a.external_id(),
            correlation: (!own && a.correlation != 0).then_some(a.correlation),
        }
    }
}

/// Writes a list holding only numbers, booleans, strings and such lists as JSON without
/// the writer's spaces after separators; returns false, having written part of it, for
/// any other list (a null, which trace processor cannot take as JSON, a map, a non-finite
/// number).
fn write_plain_json_list(out: &mut Vec<u8>, items: &[Value]) -> bool {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match item {
            Value::Null | Value::Map(_) => return false,
            Value::Float(f) if !f.is_finite() => return false,
            Value::List(inner) => {
                if !write_plain_json_list(out, inner) {
                    return false;
                }
            }
            scalar => json::write_value(out, scalar),
        }
    }
    out.push(b']');
    true
}

/// A value as the fields of a `DebugAnnotation` (its name already written).
#[inline]
fn write_value(b: &mut Buf, v: &Value) {
    match v {
        // A debug annotation has no null: a name without a value stands for it (trace
        // processor crashes on the JSON `null`). Nor has it an empty list or map: their JSON
        // says them.
        Value::Null => {}
        Value::Int(i) => b.int(annotation::INT_VALUE, *i),
        Value::UInt(u) => b.uint(annotation::UINT_VALUE, *u),
        Value::Float(f) => b.double(annotation::DOUBLE_VALUE, *f),
        Value::Bool(x) => b.uint(annotation::BOOL_VALUE, (*x).into()),
        Value::Str(s) => b.str(annotation::STRING_VALUE, s),
        // A list of plain values (shapes, grid sizes) as compact JSON: a third of the bytes
        // of one annotation per item, and trace processor reads it into the same args. It
        // is written in place, and taken back if the list turns out not to be plain.
        Value::List(items) => {
            let mark = b.bytes.len();
            let json = b.open(annotation::LEGACY_JSON_VALUE);
            if write_plain_json_list(&mut b.bytes, items) {
                b.close(json);
            } else {
                b.bytes.truncate(mark);
                for item in items {
                    let d = b.open(annotation::ARRAY_VALUES);
                    write_value(b, item);
                    b.close(d);
                }
            }
        }
        Value::Map(entries) if entries.is_empty() => b.str(annotation::LEGACY_JSON_VALUE, "{}"),
        Value::Map(entries) => {
            for (key, value) in entries {
                let d = b.open(annotation::DICT_ENTRIES);
                b.str(annotation::NAME, key);
                write_value(b, value);
                b.close(d);
            }
        }
    }
}

/// `value` as a non-negative integer when it is exactly one (and a double can say so): such
/// a sample is written as `counter_value`, a varint.
fn exact_count(value: f64) -> Option<u64> {
    const EXACT: f64 = (1u64 << 53) as f64;
    ((0.0..EXACT).contains(&value) && value.fract() == 0.0).then_some(value as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel with correlation 5 and `arg`, written.
    fn kernel_with(arg: Option<(&str, i64)>) -> Vec<u8> {
        let mut t = Trace::new(0, 10_000);
        let mut a = Activity::new(ActivityType::ConcurrentKernel, "k", 0, 7, 1_000, 2_000);
        a.correlation = 5;
        a.args
            .extend(arg.map(|(key, value)| (key.into(), Value::Int(value))));
        t.activities.push(a);
        let mut out = Vec::new();
        write_perfetto(&t, &mut out).unwrap();
        out
    }

    #[test]
    fn an_arg_named_correlation_stands_in_for_the_correlation_id() {
        // `correlation_id` (field 52, a varint) = 5.
        let correlation_5 = |bytes: &[u8]| bytes.windows(3).any(|w| w == [0xa0, 0x03, 5]);
        assert!(correlation_5(&kernel_with(None)));
        assert!(correlation_5(&kernel_with(Some(("stream", 7)))));
        assert!(!correlation_5(&kernel_with(Some(("correlation", 9)))));
    }
}
