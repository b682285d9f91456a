//! The reader of Perfetto protobuf traces (`.pftrace`): omniprof's own, read back into the
//! same model its Chrome JSON reads into, and a Perfetto trace from elsewhere as far as its
//! packets map onto the model.
//!
//! A hand-written decoder of the few messages involved ([`wire`]), not a protobuf code
//! generator: the reader needs a dozen fields of five messages, which a schema crate would
//! bring in with thousands of generated types and a build step.
//!
//! How packets map (the inverse of `export::perfetto`):
//! - process tracks → [`ProcessRow`]s (a pid at or above
//!   [`DEVICE_PID_BASE`] is device `pid − base`);
//!   thread tracks → rows `(pid, tid)`, and a [`ThreadRow`] where a sort index says the
//!   trace had one; a track under a process → the row `(pid, sibling_order_rank)` (the
//!   writer puts the row's tid there for device streams and sibling lanes);
//! - slices (`SLICE_BEGIN` .. `SLICE_END`) and instants on a row → [`Activity`]s of the type
//!   their category names, with their debug annotations as args (`External id` and
//!   `correlation` lifted as the JSON reader lifts them, `correlation_id` the correlation);
//! - `flow_ids` / `terminating_flow_ids` → the [`Flow`] ends (the ids the writer gives the
//!   second and later ends of a start are mapped back to the start's);
//! - counter tracks (categories: the type and the series name) and their samples →
//!   counter samples;
//! - the `Spans` track's slices → [`Span`]s, its `Record Window End` instant → the window's
//!   end, and that instant's annotations → the header (`traceName`, `deviceProperties`,
//!   metadata, the window's start). Times are absolute: the trace read has base time 0.
//!
//! Activities are delivered in the order their slices began (the order the writer wrote
//! them, as the JSON lists them), so a slice that ended waits for the slices that began
//! before it and are still open: memory is bounded by the open slices, up to [`OPEN_HELD`],
//! and what ended inside the oldest of them, up to [`ENDED_HELD`], past which the oldest is
//! cut (delivered as unfinished). Times: a sequence's incremental clock is summed; any other
//! clock is taken as the trace's nanoseconds. Packets of other kinds (ftrace, process trees, ...),
//! events on tracks never described, and slices whose category is no activity type are
//! skipped and counted in [`ReadStats`]. What is held from one packet to the next (sequences,
//! interned strings, tracks, open slices, activities held back, extra flow ids) is capped
//! ([`caps`]).

mod caps;
mod open_stacks;
mod wire;

pub use caps::{
    ENDED_HELD, FLOWS_HELD, INTERNED_BYTES_HELD, INTERNED_ENTRY_BYTES, OPEN_HELD, SEQUENCES_HELD,
    TRACKS_HELD,
};

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;

use super::error::{ReadError, ReadErrorKind};
use super::event::{activity_type, ArgFilter};
use super::mapper::{as_u64, split_span_name};
use super::stats::ReadStats;
use omniprof_trace::keys::arg;
use omniprof_trace::layout::{header, DEVICE_PID_BASE, OWN_FLOW_IDS};
use omniprof_trace::FastMap;
use omniprof_trace::Limits;
use omniprof_trace::TraceItem;
use omniprof_trace::{Activity, ActivityType, Flow, FlowKind};
use omniprof_trace::{CounterSample, CounterTrack};
use omniprof_trace::{FromJsonError, Value, MAX_VALUE_DEPTH};
use omniprof_trace::{ProcessRow, Span, ThreadRow, Window};
use open_stacks::{Closed, OpenStacks};
use wire::Fields;

/// The field numbers read (`docs/perfetto.md`).
mod field {
    pub(super) const TRACE_PACKET: u32 = 1;
    pub(super) mod packet {
        pub(crate) const CLOCK_SNAPSHOT: u32 = 6;
        pub(crate) const TIMESTAMP: u32 = 8;
        pub(crate) const SEQUENCE_ID: u32 = 10;
        pub(crate) const TRACK_EVENT: u32 = 11;
        pub(crate) const INTERNED_DATA: u32 = 12;
        pub(crate) const SEQUENCE_FLAGS: u32 = 13;
        pub(crate) const TIMESTAMP_CLOCK_ID: u32 = 58;
        pub(crate) const DEFAULTS: u32 = 59;
        pub(crate) const TRACK_DESCRIPTOR: u32 = 60;
        pub(crate) const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
        /// `TracePacketDefaults.timestamp_clock_id`.
        pub(crate) const DEFAULT_CLOCK_ID: u32 = 58;
        pub(crate) const INCREMENTAL_STATE_CLEARED: u64 = 1;
    }
    pub(super) mod clock {
        pub(crate) const CLOCKS: u32 = 1;
        pub(crate) const ID: u32 = 1;
        pub(crate) const IS_INCREMENTAL: u32 = 3;
    }
    pub(super) mod interned {
        pub(crate) const CATEGORIES: u32 = 1;
        pub(crate) const NAMES: u32 = 2;
        pub(crate) const ARG_NAMES: u32 = 3;
        pub(crate) const IID: u32 = 1;
        pub(crate) const NAME: u32 = 2;
    }
    pub(super) mod track {
        pub(crate) const UUID: u32 = 1;
        pub(crate) const NAME: u32 = 2;
        pub(crate) const PROCESS: u32 = 3;
        pub(crate) const THREAD: u32 = 4;
        pub(crate) const PARENT_UUID: u32 = 5;
        pub(crate) const COUNTER: u32 = 8;
        pub(crate) const STATIC_NAME: u32 = 10;
        pub(crate) const SIBLING_ORDER_RANK: u32 = 12;
        pub(crate) const PID: u32 = 1;
        pub(crate) const TID: u32 = 2;
        pub(crate) const SORT_INDEX: u32 = 3;
        pub(crate) const THREAD_NAME: u32 = 5;
        pub(crate) const PROCESS_NAME: u32 = 6;
        pub(crate) const PROCESS_LABELS: u32 = 8;
        pub(crate) const COUNTER_CATEGORIES: u32 = 2;
    }
    pub(super) mod event {
        pub(crate) const CATEGORY_IIDS: u32 = 3;
        pub(crate) const ANNOTATIONS: u32 = 4;
        pub(crate) const TYPE: u32 = 9;
        pub(crate) const NAME_IID: u32 = 10;
        pub(crate) const TRACK_UUID: u32 = 11;
        pub(crate) const EXTRA_COUNTER_VALUES: u32 = 12;
        pub(crate) const CATEGORIES: u32 = 22;
        pub(crate) const NAME: u32 = 23;
        pub(crate) const COUNTER_VALUE: u32 = 30;
        pub(crate) const EXTRA_COUNTER_TRACKS: u32 = 31;
        pub(crate) const DOUBLE_COUNTER_VALUE: u32 = 44;
        pub(crate) const EXTRA_DOUBLE_COUNTER_TRACKS: u32 = 45;
        pub(crate) const EXTRA_DOUBLE_COUNTER_VALUES: u32 = 46;
        pub(crate) const FLOW_IDS: u32 = 47;
        pub(crate) const TERMINATING_FLOW_IDS: u32 = 48;
        pub(crate) const CORRELATION_ID: u32 = 52;
        pub(crate) const SLICE_BEGIN: u64 = 1;
        pub(crate) const SLICE_END: u64 = 2;
        pub(crate) const INSTANT: u64 = 3;
        pub(crate) const COUNTER: u64 = 4;
    }
    pub(super) mod annotation {
        pub(crate) const NAME_IID: u32 = 1;
        pub(crate) const BOOL: u32 = 2;
        pub(crate) const UINT: u32 = 3;
        pub(crate) const INT: u32 = 4;
        pub(crate) const DOUBLE: u32 = 5;
        pub(crate) const STRING: u32 = 6;
        pub(crate) const LEGACY_JSON: u32 = 9;
        pub(crate) const NAME: u32 = 10;
        pub(crate) const DICT: u32 = 11;
        pub(crate) const ARRAY: u32 = 12;
    }
}

/// The names the writer gives the `Spans` track and the window's end marker, and the
/// header's keys among that marker's annotations.
const SPANS_TRACK: &str = "Spans";
const WINDOW_END: &str = "Record Window End";
const ITERATION_START: &str = "Iteration Start: ";
/// Flow ids of the writer's extra ends: top bits `11`.
const KIND_BITS: u64 = OWN_FLOW_IDS;

/// Whether `first` (the input's first bytes) start a protobuf `Trace` rather than JSON text:
/// field 1, length-delimited (`0x0a`, which is also a line feed), then bytes that JSON text
/// does not continue with. JSON is whitespace, then `{` or `[`, then whitespace or what
/// opens (or closes) its first member; a packet's length byte followed by a field key never
/// looks like that (the keys that are `{` and `[` would start groups, which Perfetto does
/// not use).
pub(super) fn is_pftrace(first: &[u8]) -> bool {
    if first.first() != Some(&0x0a) {
        return false;
    }
    let mut rest = first.iter().skip_while(|b| b.is_ascii_whitespace());
    match rest.next() {
        // Whitespace alone: not a trace of either kind; the JSON reader says so.
        None => false,
        Some(b'{') => !matches!(
            rest.next(),
            None | Some(b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'}')
        ),
        Some(b'[') => !matches!(
            rest.next(),
            None | Some(
                b' ' | b'\t' | b'\n' | b'\r' | b'{' | b'[' | b']' | b'"' | b'-' | b'0'..=b'9'
            )
        ),
        Some(_) => true,
    }
}

/// Reads a Perfetto trace into `sink`. On error the items read so far have been delivered,
/// the rows and window included.
pub(super) fn read_pftrace(
    input: impl Read,
    args: &ArgFilter,
    limits: Limits,
    sink: &mut impl FnMut(TraceItem),
) -> (ReadStats, Option<ReadError>) {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut reader = PacketMapper::new(args.clone());
    let mut packet = Vec::new();
    let mut offset = 0u64;
    let mut index = 0u64;
    let error = loop {
        let at = offset;
        let key = match read_varint(&mut input, &mut offset) {
            Ok(None) => break None,
            Ok(Some(key)) => key,
            Err(why) => break Some(error_at(index, at, why)),
        };
        if key >> 3 != u64::from(field::TRACE_PACKET) || key & 7 != 2 {
            break Some(error_at(
                index,
                at,
                ReadErrorKind::Invalid(format!(
                    "expected a packet (field 1, length-delimited), found field {} of wire \
                     type {}",
                    key >> 3,
                    key & 7
                )),
            ));
        }
        let len = match read_varint(&mut input, &mut offset) {
            Ok(Some(len)) => len,
            Ok(None) => break Some(error_at(index, at, truncated("a packet's length"))),
            Err(why) => break Some(error_at(index, at, why)),
        };
        if len > limits.event_bytes as u64 {
            break Some(error_at(
                index,
                at,
                ReadErrorKind::TooLarge {
                    what: format!("a packet of {len} bytes"),
                    limit: limits.event_bytes,
                    of: "one event",
                },
            ));
        }
        packet.clear();
        match (&mut input).take(len).read_to_end(&mut packet) {
            Ok(n) if n as u64 == len => {}
            Ok(_) => break Some(error_at(index, at, truncated("the rest of a packet"))),
            Err(e) => break Some(error_at(index, at, e.into())),
        }
        offset += len;
        if let Err(why) = reader.packet(&packet, sink) {
            break Some(error_at(index, at, ReadErrorKind::Invalid(why)));
        }
        index += 1;
    };
    reader.finish(sink);
    (reader.stats, error)
}

fn truncated(expected: &str) -> ReadErrorKind {
    ReadErrorKind::Truncated {
        expected: expected.to_string(),
    }
}

fn error_at(packet: u64, offset: u64, kind: ReadErrorKind) -> ReadError {
    let mut e = ReadError::new(kind);
    e.location.packet = Some((packet, offset));
    e
}

/// A varint read from the stream; `None` at a clean end of input (before its first byte).
fn read_varint(input: &mut impl BufRead, offset: &mut u64) -> Result<Option<u64>, ReadErrorKind> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = loop {
            match input.fill_buf() {
                Ok([]) if i == 0 => return Ok(None),
                Ok([]) => return Err(truncated("the rest of a varint")),
                Ok(buf) => break buf[0],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        };
        input.consume(1);
        *offset += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some(value));
        }
    }
    Err(ReadErrorKind::Invalid(
        "a varint longer than 10 bytes".to_string(),
    ))
}

/// What a track is to the model.
#[derive(Clone, Debug)]
enum Track {
    Process(i64),
    /// A row: (pid, tid).
    Row(i64, i64),
    /// A counter series and the value name this track holds.
    Counter(CounterTrack, Arc<str>),
    /// The `Spans` track (the window's end marker).
    Spans,
    /// A span name's track.
    SpanName(String),
}

/// Per sequence: its clock and interned strings.
#[derive(Default)]
struct Sequence {
    /// The clock of packets that name none, and whether it is incremental.
    default_clock: Option<u64>,
    incremental_clocks: Vec<u64>,
    last_ts: i64,
    names: FastMap<u64, Arc<str>>,
    categories: FastMap<u64, Arc<str>>,
    arg_names: FastMap<u64, Arc<str>>,
}

/// A slice begun and not yet ended (its place in the order slices began is its order in
/// [`OpenStacks`]): `None` for a slice the model has no place for (still matched with its
/// end).
type OpenSlice = Option<Activity>;

/// A span begun and not yet ended.
struct OpenSpan {
    name: String,
    prefix: String,
    iteration: i64,
    start_ns: i64,
    op_count: u64,
}

impl OpenSpan {
    /// The span, ended at `end_ns`.
    fn end_at(self, end_ns: i64) -> Span {
        Span {
            name: self.name,
            prefix: self.prefix,
            iteration: self.iteration,
            start_ns: self.start_ns,
            end_ns,
            op_count: self.op_count,
        }
    }
}

/// Maps packets, in file order, onto [`TraceItem`]s.
struct PacketMapper {
    args: ArgFilter,
    stats: ReadStats,
    /// The sequences with state; one with none (nothing interned, no clock) is not held.
    sequences: FastMap<u64, Sequence>,
    /// Bytes of interned strings held, all sequences together, as [`INTERNED_BYTES_HELD`]
    /// counts them.
    interned: usize,
    tracks: FastMap<u64, Track>,
    processes: Vec<ProcessRow>,
    threads: Vec<ThreadRow>,
    /// Custom tracks under a process that give no row id: the tid each gets.
    unnamed_rows: u64,
    /// Slices still open, by track, ordered as they began.
    open: OpenStacks<OpenSlice>,
    open_spans: OpenStacks<OpenSpan>,
    /// Ended activities (`None`: skipped) waiting for the slices that began before them.
    ended: BTreeMap<u64, Option<Activity>>,
    /// The next order to give a slice, instant or span.
    next_order: u64,
    /// The latest time read on a row or span track: where a slice cut while open ends.
    latest_ns: Option<i64>,
    /// The writer's extra flow ids → the flow they end.
    extra_flows: FastMap<u64, (FlowKind, u64)>,
    names: HashMap<Box<str>, Arc<str>>,
    window_start: Option<i64>,
    window_end: Option<i64>,
    activities_start: Option<i64>,
    activities_end: Option<i64>,
}

impl PacketMapper {
    fn new(args: ArgFilter) -> Self {
        Self {
            args,
            stats: ReadStats::default(),
            sequences: FastMap::default(),
            interned: 0,
            tracks: FastMap::default(),
            processes: Vec::new(),
            threads: Vec::new(),
            unnamed_rows: 0,
            open: OpenStacks::default(),
            open_spans: OpenStacks::default(),
            ended: BTreeMap::new(),
            next_order: 0,
            latest_ns: None,
            extra_flows: FastMap::default(),
            names: HashMap::new(),
            window_start: None,
            window_end: None,
            activities_start: None,
            activities_end: None,
        }
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(name) = self.names.get(s) {
            return Arc::clone(name);
        }
        let name: Arc<str> = Arc::from(s);
        self.names.insert(s.into(), Arc::clone(&name));
        name
    }

    /// Maps one packet.
    fn packet(&mut self, bytes: &[u8], sink: &mut impl FnMut(TraceItem)) -> Result<(), String> {
        self.stats.events += 1;
        let mut sequence_id = 0;
        let mut timestamp = None;
        let mut clock = None;
        let mut cleared = false;
        let (mut event, mut descriptor, mut interned, mut defaults, mut snapshot) =
            (None, None, None, None, None);
        let mut other = false;
        for f in Fields::new(bytes) {
            let (number, value) =
                f.map_err(|(at, why)| format!("{why} at byte {at} of the packet"))?;
            use field::packet as p;
            match number {
                p::SEQUENCE_ID => sequence_id = value.uint().unwrap_or(0),
                p::TIMESTAMP => timestamp = value.uint(),
                p::TIMESTAMP_CLOCK_ID => clock = value.uint(),
                p::SEQUENCE_FLAGS => {
                    cleared |= value.uint().unwrap_or(0) & p::INCREMENTAL_STATE_CLEARED != 0;
                }
                p::FIRST_PACKET_ON_SEQUENCE => {}
                p::TRACK_EVENT => event = value.bytes(),
                p::TRACK_DESCRIPTOR => descriptor = value.bytes(),
                p::INTERNED_DATA => interned = value.bytes(),
                p::DEFAULTS => defaults = value.bytes(),
                p::CLOCK_SNAPSHOT => snapshot = value.bytes(),
                _ => other = true,
            }
        }
        if !self.sequences.contains_key(&sequence_id) {
            if self.sequences.len() >= SEQUENCES_HELD {
                self.stats.sequence_overflow += 1;
                return Ok(());
            }
            if cleared || defaults.is_some() || snapshot.is_some() || interned.is_some() {
                self.sequences.insert(sequence_id, Sequence::default());
            }
        }
        let mut stateless = Sequence::default();
        let seq = self
            .sequences
            .get_mut(&sequence_id)
            .unwrap_or(&mut stateless);
        if cleared {
            self.interned -= [&seq.names, &seq.categories, &seq.arg_names]
                .iter()
                .flat_map(|table| table.values())
                .map(|s| interned_cost(s))
                .sum::<usize>();
            seq.names.clear();
            seq.categories.clear();
            seq.arg_names.clear();
        }
        if let Some(d) = defaults {
            for f in Fields::new(d).flatten() {
                if f.0 == field::packet::DEFAULT_CLOCK_ID {
                    seq.default_clock = f.1.uint();
                }
            }
        }
        if let Some(s) = snapshot {
            read_snapshot(s, seq)?;
        }
        if let Some(i) = interned {
            read_interned(i, seq, &mut self.interned, &mut self.stats.dropped_interned)?;
        }
        if let Some(d) = descriptor {
            self.descriptor(d)?;
        }
        if let Some(e) = event {
            let seq = self
                .sequences
                .get_mut(&sequence_id)
                .unwrap_or(&mut stateless);
            let clock = clock.or(seq.default_clock);
            let ts = match (timestamp, clock) {
                (Some(t), Some(c)) if seq.incremental_clocks.contains(&c) => {
                    seq.last_ts = seq.last_ts.saturating_add(t as i64);
                    seq.last_ts
                }
                (Some(t), _) => t as i64,
                (None, _) => seq.last_ts,
            };
            self.event(e, sequence_id, ts, sink)?;
        } else if other && descriptor.is_none() && interned.is_none() && snapshot.is_none() {
            self.stats.foreign_packets += 1;
        }
        Ok(())
    }

    /// A track descriptor: what its track is to the model.
    fn descriptor(&mut self, bytes: &[u8]) -> Result<(), String> {
        use field::track as t;
        let (mut uuid, mut name, mut parent, mut rank) = (None, None, None, None);
        let (mut process, mut thread, mut counter) = (None, None, None);
        for f in Fields::new(bytes) {
            let (number, value) =
                f.map_err(|(at, why)| format!("{why} at byte {at} of a track"))?;
            match number {
                t::UUID => uuid = value.uint(),
                t::NAME | t::STATIC_NAME => name = value.str(),
                t::PARENT_UUID => parent = value.uint(),
                t::SIBLING_ORDER_RANK => rank = value.int(),
                t::PROCESS => process = value.bytes(),
                t::THREAD => thread = value.bytes(),
                t::COUNTER => counter = value.bytes(),
                _ => {}
            }
        }
        let Some(uuid) = uuid else {
            return Ok(());
        };
        // Perfetto describes a track again on the same uuid: that adds no row.
        let known = self.tracks.contains_key(&uuid);
        if !known && self.tracks.len() >= TRACKS_HELD {
            self.stats.dropped_tracks += 1;
            return Ok(());
        }
        let parent_pid = match parent.and_then(|p| self.tracks.get(&p)) {
            Some(Track::Process(pid)) => Some(*pid),
            _ => None,
        };
        let track = if let Some(p) = process {
            let (mut pid, mut row) = (
                0,
                ProcessRow {
                    pid: 0,
                    name: String::new(),
                    label: String::new(),
                    sort_index: 0,
                },
            );
            let mut described = false;
            for (number, value) in Fields::new(p).flatten() {
                match number {
                    t::PID => pid = value.int().unwrap_or(0),
                    t::PROCESS_NAME => {
                        (row.name, described) = (value.str().unwrap_or_default(), true)
                    }
                    t::PROCESS_LABELS => {
                        (row.label, described) = (value.str().unwrap_or_default(), true)
                    }
                    t::SORT_INDEX => (row.sort_index, described) = (value.int().unwrap_or(0), true),
                    _ => {}
                }
            }
            if device_pids().contains(&pid) {
                pid -= DEVICE_PID_BASE;
            }
            if described && !known {
                row.pid = pid;
                self.processes.push(row);
            }
            Track::Process(pid)
        } else if let Some(th) = thread {
            let (mut pid, mut tid, mut thread_name, mut sort) = (0, 0, String::new(), None);
            for (number, value) in Fields::new(th).flatten() {
                match number {
                    t::PID => pid = value.int().unwrap_or(0),
                    t::TID => tid = value.int().unwrap_or(0),
                    t::THREAD_NAME => thread_name = value.str().unwrap_or_default(),
                    t::SORT_INDEX => sort = value.int(),
                    _ => {}
                }
            }
            // omniprof writes a sort index exactly for the rows its trace had.
            if let Some(sort_index) = sort.filter(|_| !known) {
                self.threads.push(ThreadRow {
                    pid,
                    tid,
                    name: thread_name,
                    sort_index,
                });
            }
            Track::Row(pid, tid)
        } else if let Some(c) = counter {
            let mut categories = Vec::new();
            for (number, value) in Fields::new(c).flatten() {
                if number == t::COUNTER_CATEGORIES {
                    categories.extend(value.str());
                }
            }
            let name = name.unwrap_or_default();
            let kind = categories.first().and_then(|c| activity_type(c));
            let Some(kind) = kind else {
                // A counter of no type the model knows: its samples are skipped.
                return Ok(());
            };
            let series = categories.get(1).cloned().unwrap_or_else(|| name.clone());
            let key = match name.strip_prefix(&format!("{series} ")) {
                Some(key) if kind != ActivityType::HardwareCounters => key.to_string(),
                _ => name.clone(),
            };
            let track = CounterTrack {
                kind,
                device: parent_pid.unwrap_or(0),
                resource: rank.unwrap_or(0),
                name: self.intern(&series),
            };
            Track::Counter(track, self.intern(&key))
        } else if parent.is_none() && name.as_deref() == Some(SPANS_TRACK) {
            Track::Spans
        } else if let Some(Track::Spans) = parent.and_then(|p| self.tracks.get(&p)) {
            Track::SpanName(name.unwrap_or_default())
        } else {
            let tid = rank.unwrap_or_else(|| {
                // A track from elsewhere: a row of its own, numbered past any OS thread id.
                self.unnamed_rows += 1;
                (1 << 23) + self.unnamed_rows as i64
            });
            Track::Row(parent_pid.unwrap_or(0), tid)
        };
        self.tracks.insert(uuid, track);
        Ok(())
    }

    /// A track event at `ts`.
    fn event(
        &mut self,
        bytes: &[u8],
        sequence: u64,
        ts: i64,
        sink: &mut impl FnMut(TraceItem),
    ) -> Result<(), String> {
        use field::event as e;
        let mut kind = None;
        let mut track = None;
        let mut name: Option<Arc<str>> = None;
        let mut category: Option<Arc<str>> = None;
        let mut annotations = Vec::new();
        let mut correlation = None;
        let (mut flow_ids, mut terminating) = (Vec::new(), Vec::new());
        let mut counter = None;
        let (mut extra_tracks, mut extra_values) = (Vec::new(), Vec::new());
        let (mut extra_double_tracks, mut extra_doubles) = (Vec::new(), Vec::new());
        let stateless = Sequence::default();
        let seq = self.sequences.get(&sequence).unwrap_or(&stateless);
        for f in Fields::new(bytes) {
            let (number, value) =
                f.map_err(|(at, why)| format!("{why} at byte {at} of an event"))?;
            match number {
                e::TYPE => kind = value.uint(),
                e::TRACK_UUID => track = value.uint(),
                e::NAME => name = value.str().map(Arc::from),
                e::NAME_IID => name = value.uint().and_then(|i| seq.names.get(&i).cloned()),
                e::CATEGORIES if category.is_none() => category = value.str().map(Arc::from),
                e::CATEGORY_IIDS if category.is_none() => {
                    category = value
                        .uints()
                        .next()
                        .and_then(|i| seq.categories.get(&i).cloned());
                }
                e::ANNOTATIONS => annotations.extend(value.bytes()),
                e::CORRELATION_ID => correlation = value.uint(),
                e::FLOW_IDS => flow_ids.extend(value.fixed64s()),
                e::TERMINATING_FLOW_IDS => terminating.extend(value.fixed64s()),
                e::COUNTER_VALUE => counter = value.int().map(|v| v as f64),
                e::DOUBLE_COUNTER_VALUE => counter = value.double(),
                e::EXTRA_COUNTER_TRACKS => extra_tracks.extend(value.uints()),
                e::EXTRA_COUNTER_VALUES => {
                    extra_values.extend(value.uints().map(|v| v as i64 as f64))
                }
                e::EXTRA_DOUBLE_COUNTER_TRACKS => extra_double_tracks.extend(value.uints()),
                e::EXTRA_DOUBLE_COUNTER_VALUES => {
                    extra_doubles.extend(value.fixed64s().map(f64::from_bits));
                }
                _ => {}
            }
        }
        let mut args = Vec::with_capacity(annotations.len());
        let (mut too_deep, mut malformed) = (0, 0);
        for a in annotations {
            match annotation(a, seq)? {
                Arg::Kept(key, value) => args.push((key, value)),
                Arg::TooDeep => too_deep += 1,
                Arg::Malformed => malformed += 1,
            }
        }
        self.stats.too_deep_args += too_deep;
        self.stats.malformed_args += malformed;
        let Some(track_info) = track.and_then(|t| self.tracks.get(&t)).cloned() else {
            self.stats.unsupported_id += 1;
            return Ok(());
        };
        let track = track.expect("looked up above");
        match (kind, track_info) {
            (Some(e::COUNTER), Track::Counter(..)) => {
                if let Some(v) = counter {
                    self.sample(track, ts, v, sink);
                }
                for (t, v) in extra_tracks.into_iter().zip(extra_values) {
                    self.sample(t, ts, v, sink);
                }
                for (t, v) in extra_double_tracks.into_iter().zip(extra_doubles) {
                    self.sample(t, ts, v, sink);
                }
            }
            (Some(e::SLICE_BEGIN), Track::Row(pid, tid)) => {
                let activity = self.activity(category, name, (pid, tid), ts, args, correlation);
                let activity = activity.map(|mut a| {
                    a.flow = self
                        .flow_start(&flow_ids)
                        .or_else(|| self.flow_end(&terminating));
                    a
                });
                self.saw(ts);
                let order = self.next_order;
                self.next_order += 1;
                self.open.push(track, order, activity);
                if self.open.len() > OPEN_HELD {
                    self.cut_oldest_slice();
                    self.deliver(sink);
                }
            }
            (Some(e::SLICE_END), Track::Row(..)) => {
                self.saw(ts);
                let (order, activity) = match self.open.pop(track) {
                    Closed::Open(order, activity) => (order, activity),
                    // Delivered when it was cut, and counted then.
                    Closed::Cut => return Ok(()),
                    Closed::Nothing => {
                        self.stats.unsupported_id += 1;
                        return Ok(());
                    }
                };
                let activity = activity.map(|mut a| {
                    a.end_ns = ts.max(a.start_ns);
                    if a.kind == ActivityType::GpuUserAnnotation && a.end_ns - a.start_ns >= 2 {
                        // Undo the writer's widening (1 ns on each side).
                        (a.start_ns, a.end_ns) = (a.start_ns + 1, a.end_ns - 1);
                    }
                    a
                });
                self.ended.insert(order, activity);
                self.deliver(sink);
            }
            (Some(e::INSTANT), Track::Row(pid, tid)) => {
                self.saw(ts);
                let activity = self.activity(category, name, (pid, tid), ts, args, correlation);
                let order = self.next_order;
                self.next_order += 1;
                self.ended.insert(order, activity);
                self.deliver(sink);
            }
            (Some(e::SLICE_BEGIN), Track::SpanName(span_name)) => {
                let event_name = name.as_deref().unwrap_or_default();
                let (prefix, iteration) = split_span_name(event_name, &span_name);
                let op_count = args
                    .iter()
                    .find(|(k, _)| &**k == arg::OP_COUNT)
                    .and_then(|(_, v)| as_u64(v))
                    .unwrap_or(0);
                self.saw(ts);
                let span = OpenSpan {
                    name: span_name,
                    prefix,
                    iteration,
                    start_ns: ts,
                    op_count,
                };
                let order = self.next_order;
                self.next_order += 1;
                self.open_spans.push(track, order, span);
                if self.open_spans.len() > OPEN_HELD {
                    if let Some((_, s)) = self.open_spans.cut_oldest() {
                        self.stats.cut_slices += 1;
                        let end = self.latest_ns.unwrap_or(s.start_ns);
                        sink(TraceItem::Span(s.end_at(end)));
                    }
                }
            }
            (Some(e::SLICE_END), Track::SpanName(_)) => {
                self.saw(ts);
                if let Closed::Open(_, s) = self.open_spans.pop(track) {
                    sink(TraceItem::Span(s.end_at(ts)));
                }
            }
            (Some(e::INSTANT), Track::SpanName(_)) => self.stats.regenerated += 1,
            (Some(e::INSTANT), Track::Spans) if name.as_deref() == Some(WINDOW_END) => {
                self.window_end = Some(ts);
                self.header(args, sink);
            }
            _ => {
                if name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(ITERATION_START))
                {
                    self.stats.regenerated += 1;
                } else {
                    self.stats.unknown_phase += 1;
                }
            }
        }
        Ok(())
    }

    /// The header the writer puts on the window's end marker.
    fn header(&mut self, args: Vec<(Arc<str>, Value)>, sink: &mut impl FnMut(TraceItem)) {
        for (key, value) in args {
            match &*key {
                header::BASE_TIME => {
                    // The times are absolute already, and a base delivered now would be added
                    // to them: the trace read keeps base 0, which changes no time.
                    let _ = value;
                }
                header::TRACE_NAME => {
                    if let Value::Str(name) = value {
                        sink(TraceItem::TraceName(name.to_string()));
                    }
                }
                header::DEVICE_PROPERTIES => {
                    if let Value::List(devices) = value {
                        sink(TraceItem::DeviceProperties(devices));
                    }
                }
                header::WINDOW_START => self.window_start = value.as_i64(),
                _ => {
                    let key = key.strip_prefix(header::METADATA_ESCAPE).unwrap_or(&key);
                    if header::JSON_KEYS.contains(&key) {
                        // Its own key in the JSON written from this trace: it would be there
                        // twice, which readers refuse.
                        self.stats.reserved_header_keys += 1;
                    } else {
                        sink(TraceItem::Metadata(key.to_string(), value));
                    }
                }
            }
        }
    }

    /// One counter sample on counter track `track`.
    fn sample(&mut self, track: u64, ts: i64, value: f64, sink: &mut impl FnMut(TraceItem)) {
        match self.tracks.get(&track) {
            Some(Track::Counter(series, key)) if value.is_finite() => sink(TraceItem::Counter(
                series.clone(),
                CounterSample {
                    ts_ns: ts,
                    values: vec![(Arc::clone(key), value)],
                },
            )),
            Some(Track::Counter(..)) => self.stats.dropped_counter_values += 1,
            _ => self.stats.unsupported_id += 1,
        }
    }

    /// The activity of a slice or instant; `None` (counted) when its category is no
    /// activity type.
    fn activity(
        &mut self,
        category: Option<Arc<str>>,
        name: Option<Arc<str>>,
        (device, resource): (i64, i64),
        ts: i64,
        args: Vec<(Arc<str>, Value)>,
        correlation: Option<u64>,
    ) -> Option<Activity> {
        let Some(kind) = category.as_deref().and_then(activity_type) else {
            self.stats.unknown_category += 1;
            return None;
        };
        let name = name.unwrap_or_else(|| self.intern(""));
        let mut a = Activity::new(kind, name, device, resource, ts, ts);
        let linked = !kind.has_own_external_id();
        if let Some(id) = correlation {
            a.correlation = id;
        }
        for (key, value) in args {
            match (&*key, as_u64(&value)) {
                (arg::EXTERNAL_ID, Some(id)) if linked => a.linked_correlation = Some(id),
                (arg::EXTERNAL_ID, Some(id)) => a.correlation = id,
                (arg::CORRELATION, Some(id)) if linked => a.correlation = id,
                _ if self.args.keeps(&key) => a.args.push((key, value)),
                _ => {}
            }
        }
        a.unlink_own_external_id();
        self.activities_start = Some(self.activities_start.map_or(ts, |t| t.min(ts)));
        Some(a)
    }

    /// The start of a flow, from a slice's `flow_ids`: the first names the flow, the others
    /// are the writer's ids for its later ends.
    fn flow_start(&mut self, ids: &[u64]) -> Option<Flow> {
        let (&first, rest) = ids.split_first()?;
        let flow = model_flow(first, true);
        match flow {
            Some(f) => {
                for &extra in rest {
                    // Past the cap, this end has no partner, nor will the one it names.
                    if self.extra_flows.len() < FLOWS_HELD {
                        self.extra_flows.insert(extra, (f.kind, f.id));
                    } else {
                        self.stats.unmatched_flow += 1;
                    }
                }
            }
            None => self.stats.unmatched_flow += ids.len() as u64,
        }
        flow
    }

    /// The end of a flow, from a slice's `terminating_flow_ids`.
    fn flow_end(&mut self, ids: &[u64]) -> Option<Flow> {
        let &id = ids.first()?;
        let flow = if id & KIND_BITS == KIND_BITS {
            self.extra_flows.remove(&id).map(|(kind, id)| Flow {
                id,
                kind,
                start: false,
            })
        } else {
            model_flow(id, false)
        };
        if flow.is_none() {
            self.stats.unmatched_flow += 1;
        }
        flow
    }

    /// Notes a time read on a row or span track.
    fn saw(&mut self, ts: i64) {
        self.latest_ns = Some(self.latest_ns.map_or(ts, |t| t.max(ts)));
    }

    /// Delivers the ended activities that no open slice began before; while more than
    /// [`ENDED_HELD`] wait, cuts the open slice that holds them back.
    fn deliver(&mut self, sink: &mut impl FnMut(TraceItem)) {
        loop {
            let oldest_open = self.open.oldest().unwrap_or(u64::MAX);
            while let Some(entry) = self.ended.first_entry() {
                if *entry.key() > oldest_open {
                    break;
                }
                if let Some(a) = entry.remove() {
                    self.emit(a, sink);
                }
            }
            if self.ended.len() <= ENDED_HELD || !self.cut_oldest_slice() {
                return;
            }
        }
    }

    /// Cuts the oldest open slice ([`OPEN_HELD`]): it ends at the latest time read, marked
    /// unfinished, and waits in `ended` for [`Self::deliver`]. False when none is open.
    fn cut_oldest_slice(&mut self) -> bool {
        let Some((order, activity)) = self.open.cut_oldest() else {
            return false;
        };
        self.stats.cut_slices += 1;
        let end = self.latest_ns;
        let keep_mark = self.args.keeps(arg::FINISHED);
        let activity = activity.map(|mut a| {
            a.end_ns = end.unwrap_or(a.start_ns).max(a.start_ns);
            if keep_mark {
                a.args.push((Arc::from(arg::FINISHED), Value::Bool(false)));
            }
            a
        });
        self.ended.insert(order, activity);
        true
    }

    /// Delivers activity `a`, noting where the activities end.
    fn emit(&mut self, a: Activity, sink: &mut impl FnMut(TraceItem)) {
        self.activities_end = Some(self.activities_end.map_or(a.end_ns, |t| t.max(a.end_ns)));
        sink(TraceItem::Activity(a));
    }

    /// Delivers what is held, the rows and the window: at the end of the input, or where
    /// reading stopped.
    fn finish(&mut self, sink: &mut impl FnMut(TraceItem)) {
        // Slices never ended end where the trace does (as an unfinished op does).
        let end = self.window_end.or(self.latest_ns);
        for (order, activity) in self.open.drain() {
            let activity = activity.map(|mut a| {
                a.end_ns = end.unwrap_or(a.start_ns).max(a.start_ns);
                a
            });
            self.ended.insert(order, activity);
        }
        self.deliver(sink);
        self.stats.unmatched_flow += self.extra_flows.len() as u64;
        for row in self.processes.drain(..) {
            sink(TraceItem::Process(row));
        }
        for row in self.threads.drain(..) {
            sink(TraceItem::Thread(row));
        }
        let start_ns = self.window_start.or(self.activities_start).unwrap_or(0);
        let end_ns = self.window_end.or(self.activities_end).unwrap_or(start_ns);
        sink(TraceItem::Window(Window::new(start_ns, end_ns)));
    }
}

/// The model's flow for one of the writer's flow ids (`uuid::flow`: the kind in the top two
/// bits, the id below).
fn model_flow(id: u64, start: bool) -> Option<Flow> {
    let kind = match id >> 62 {
        1 => FlowKind::FwdBwd,
        2 => FlowKind::Ac2g,
        _ => return None,
    };
    Some(Flow {
        id: id & !KIND_BITS,
        kind,
        start,
    })
}

/// The pids the writer gives devices (`DEVICE_PID_BASE` + the device's index, inside
/// `int32`); any other pid, however wide, is taken as it is.
fn device_pids() -> std::ops::Range<i64> {
    DEVICE_PID_BASE..2 * DEVICE_PID_BASE
}

/// A clock snapshot: which of its clocks are incremental.
fn read_snapshot(bytes: &[u8], seq: &mut Sequence) -> Result<(), String> {
    use field::clock as c;
    for f in Fields::new(bytes) {
        let (number, value) =
            f.map_err(|(at, why)| format!("{why} at byte {at} of a clock snapshot"))?;
        if number != c::CLOCKS {
            continue;
        }
        let (mut id, mut incremental) = (None, false);
        for (n, v) in Fields::new(value.bytes().unwrap_or_default()).flatten() {
            match n {
                c::ID => id = v.uint(),
                c::IS_INCREMENTAL => incremental = v.uint() == Some(1),
                _ => {}
            }
        }
        if let (Some(id), true) = (id, incremental) {
            if !seq.incremental_clocks.contains(&id) {
                seq.incremental_clocks.push(id);
            }
        }
    }
    Ok(())
}

/// What an interned string counts for against [`INTERNED_BYTES_HELD`].
fn interned_cost(s: &str) -> usize {
    s.len() + INTERNED_ENTRY_BYTES
}

/// Interned strings, into the sequence's tables; `held` counts the bytes of those of all
/// sequences, and one that would take it past [`INTERNED_BYTES_HELD`] is dropped and
/// counted in `dropped` (an iid interned again gives up its old string first).
fn read_interned(
    bytes: &[u8],
    seq: &mut Sequence,
    held: &mut usize,
    dropped: &mut u64,
) -> Result<(), String> {
    use field::interned as i;
    for f in Fields::new(bytes) {
        let (number, value) =
            f.map_err(|(at, why)| format!("{why} at byte {at} of interned data"))?;
        let table = match number {
            i::CATEGORIES => &mut seq.categories,
            i::NAMES => &mut seq.names,
            i::ARG_NAMES => &mut seq.arg_names,
            _ => continue,
        };
        let (mut iid, mut name) = (None, None);
        for (n, v) in Fields::new(value.bytes().unwrap_or_default()).flatten() {
            match n {
                i::IID => iid = v.uint(),
                i::NAME => name = v.str(),
                _ => {}
            }
        }
        if let (Some(iid), Some(name)) = (iid, name) {
            if let Some(old) = table.remove(&iid) {
                *held -= interned_cost(&old);
            }
            let cost = interned_cost(&name);
            if *held + cost <= INTERNED_BYTES_HELD {
                table.insert(iid, Arc::from(name));
                *held += cost;
            } else {
                *dropped += 1;
            }
        }
    }
    Ok(())
}

/// What a debug annotation gives.
enum Arg {
    Kept(Arc<str>, Value),
    /// Lists and maps nested deeper than [`MAX_VALUE_DEPTH`]: skipped, counted.
    TooDeep,
    /// A `legacy_json` value that is not JSON: skipped, counted.
    Malformed,
}

/// Why an annotation's value is not kept (its arg is skipped and counted, its event read).
enum Unkept {
    TooDeep,
    Malformed,
}

/// A debug annotation: its name and value.
fn annotation(bytes: &[u8], seq: &Sequence) -> Result<Arg, String> {
    let mut name: Option<Arc<str>> = None;
    Ok(match annotation_value(bytes, seq, &mut name, 0)? {
        Ok(value) => Arg::Kept(name.unwrap_or_else(|| Arc::from("")), value),
        Err(Unkept::TooDeep) => Arg::TooDeep,
        Err(Unkept::Malformed) => Arg::Malformed,
    })
}

/// The value of a debug annotation (and its name, into `name`), inside `depth` lists and
/// maps. Recursion stops at [`MAX_VALUE_DEPTH`], as the JSON reader's does: a crafted file
/// nests annotations as deep as its bytes allow.
fn annotation_value(
    bytes: &[u8],
    seq: &Sequence,
    name: &mut Option<Arc<str>>,
    depth: usize,
) -> Result<Result<Value, Unkept>, String> {
    use field::annotation as a;
    let mut value = Value::Null;
    let mut dict = Vec::new();
    let mut array = Vec::new();
    for f in Fields::new(bytes) {
        let (number, v) = f.map_err(|(at, why)| format!("{why} at byte {at} of an annotation"))?;
        match number {
            a::NAME => *name = v.str().map(Arc::from),
            a::NAME_IID => *name = v.uint().and_then(|i| seq.arg_names.get(&i).cloned()),
            a::BOOL => value = Value::Bool(v.uint().unwrap_or(0) != 0),
            a::UINT => {
                let u = v.uint().unwrap_or(0);
                value = i64::try_from(u).map_or(Value::UInt(u), Value::Int);
            }
            a::INT => value = Value::Int(v.int().unwrap_or(0)),
            a::DOUBLE => value = Value::Float(v.double().unwrap_or(f64::NAN)),
            a::STRING => value = Value::from(v.str().unwrap_or_default()),
            a::LEGACY_JSON => {
                // Bounded by `MAX_VALUE_DEPTH` less the levels around it.
                let text = v.str().unwrap_or_default();
                value = match Value::from_json(&text) {
                    Ok(v) if levels(&v) + depth <= MAX_VALUE_DEPTH => v,
                    Ok(_) | Err(FromJsonError::TooDeep) => return Ok(Err(Unkept::TooDeep)),
                    Err(FromJsonError::Invalid(_)) => return Ok(Err(Unkept::Malformed)),
                };
            }
            a::DICT | a::ARRAY if depth == MAX_VALUE_DEPTH => return Ok(Err(Unkept::TooDeep)),
            a::DICT => {
                let mut key = None;
                match annotation_value(v.bytes().unwrap_or_default(), seq, &mut key, depth + 1)? {
                    Ok(entry) => {
                        dict.push((key.map_or_else(String::new, |k| k.to_string()), entry))
                    }
                    Err(why) => return Ok(Err(why)),
                }
            }
            a::ARRAY => {
                let mut ignored = None;
                match annotation_value(v.bytes().unwrap_or_default(), seq, &mut ignored, depth + 1)?
                {
                    Ok(entry) => array.push(entry),
                    Err(why) => return Ok(Err(why)),
                }
            }
            _ => {}
        }
    }
    if !dict.is_empty() {
        value = Value::Map(dict);
    } else if !array.is_empty() {
        value = Value::List(array);
    }
    Ok(Ok(value))
}

/// How many levels of lists and maps `v` has (at most [`MAX_VALUE_DEPTH`] where it was read
/// from JSON, which bounds the recursion).
fn levels(v: &Value) -> usize {
    match v {
        Value::List(items) => 1 + items.iter().map(levels).max().unwrap_or(0),
        Value::Map(entries) => 1 + entries.iter().map(|(_, v)| levels(v)).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
