//! The Perfetto writer over a trace read twice, item by item, in bounded memory: `omniprof
//! convert IN -o OUT.pftrace` writes this way.
//!
//! The writer must declare every track before its first event, number the rows, list each
//! flow start's ends, and know the row names, which a Chrome JSON file gives after its
//! events. So a first read ([`PerfettoSurvey`]) finds them, holding the header, the rows,
//! the spans, each row's open events (its lanes), the flow starts (an id and an index each,
//! to count their ends) and the counter tracks' names; a second read ([`PerfettoStream`]) writes each activity as it comes, holding each
//! row's slice ends not yet written and the counter samples (a time, a track and a value
//! each, written last in time order as the whole-trace writer does). Neither holds the
//! activities.
//!
//! Packets are the whole-trace writer's ([`write_perfetto`](crate::write_perfetto)), written by the same
//! code. When the activities come in written order (by start, the longer first) the bytes
//! are the same; when they come in that order on each row only (Kineto writes device work
//! after the host's), each row's events go on a packet sequence of their own, whose
//! incremental clock never goes backwards, and trace processor merges the sequences by
//! time.
//!
//! Some traces cannot be written this way; the survey then ends with [`NeedsWholeTrace`]
//! and the caller reads the trace whole and writes it with [`write_perfetto`](crate::write_perfetto): an
//! activity before one that starts later on its row, a base time after the events (which
//! moves them), or flows whose ids have several starts or ends in a file whose events are
//! not in written order (which start an end follows is decided in time order).
//!
//! ```
//! use omniprof_trace::{write_perfetto, Activity, ActivityType, TraceItem, Window};
//! use omniprof_trace::{PerfettoStream, PerfettoSurvey, TraceAssembler};
//!
//! // What a reader delivers, twice (the survey's read may skip args).
//! let items = [
//!     TraceItem::BaseTime(1_000),
//!     TraceItem::Activity(Activity::new(ActivityType::CpuOp, "aten::mm", 7, 7, 2_500, 4_500)),
//!     TraceItem::Window(Window::new(2_500, 4_500)),
//! ];
//! let mut survey = PerfettoSurvey::default();
//! items.iter().for_each(|item| survey.add(item.clone()));
//! let mut out = Vec::new();
//! let mut stream = PerfettoStream::new(survey.finish()?, &mut out)?;
//! items.iter().for_each(|item| stream.add(item.clone()));
//! let stats = stream.finish()?;
//!
//! // The same bytes as the whole trace written at once.
//! let mut whole = TraceAssembler::default();
//! items.into_iter().for_each(|item| whole.add(item));
//! let mut expected = Vec::new();
//! assert_eq!(write_perfetto(&whole.finish().0, &mut expected)?, stats);
//! assert_eq!(out, expected);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cmp::Reverse;
use std::collections::HashSet;
use std::io::{self, Write};

use super::counter_tracks::CounterTracksFound;
use super::writer::{place_on_row, timestamp, uuid, Layout, Placement, Writer};
use crate::activity::{Activity, ActivityType};
use crate::export::lanes::{row_tid, written_span, Lanes, RowId};
use crate::export::NeedsWholeTrace;
use crate::export::WriteStats;
use crate::hash::FastMap;
use crate::item::{TraceAssembler, TraceItem};
use crate::trace::Trace;

/// The order activities are written in (by start, the longer first).
type WrittenKey = (i64, Reverse<i64>);

/// The first read of a streamed trace: what [`PerfettoStream`] must know before it writes.
/// Feed it every item a reader delivers (`TraceReader::stream` in `omniprof-read`, which can
/// skip the args for this read),
/// then [`finish`](Self::finish) it.
pub struct PerfettoSurvey {
    /// The header, rows, spans and window, as a whole read collects them.
    skeleton: TraceAssembler,
    placement: Placement,
    counters: CounterTracksFound,
    /// Per row: the written key of its last slice, and the start of its last activity.
    last_on_row: FastMap<RowId, (WrittenKey, i64)>,
    /// The last activity's written key, while they come in written order.
    last: WrittenKey,
    in_written_order: bool,
    /// Whether an activity, counter sample or span came.
    events_seen: bool,
    /// Why the trace must be written whole.
    problem: Option<&'static str>,
}

impl Default for PerfettoSurvey {
    fn default() -> Self {
        Self {
            skeleton: TraceAssembler::default(),
            placement: Placement::new(&[], 0),
            counters: CounterTracksFound::default(),
            last_on_row: FastMap::default(),
            last: (i64::MIN, Reverse(i64::MAX)),
            in_written_order: true,
            events_seen: false,
            problem: None,
        }
    }
}

impl PerfettoSurvey {
    /// Takes the next item of the first read.
    pub fn add(&mut self, item: TraceItem) {
        if self.problem.is_some() {
            return;
        }
        match item {
            TraceItem::Activity(a) => {
                self.events_seen = true;
                self.activity(&a);
            }
            TraceItem::Counter(track, sample) => {
                self.events_seen = true;
                self.placement.counter_series(&track);
                self.counters.add(&track, &sample);
            }
            TraceItem::BaseTime(_) if self.events_seen => {
                self.problem = Some("the base time comes after the events");
            }
            TraceItem::Span(span) => {
                self.events_seen = true;
                self.skeleton.add(TraceItem::Span(span));
            }
            other => self.skeleton.add(other),
        }
    }

    fn activity(&mut self, a: &Activity) {
        let (start, end) = written_span(a);
        let key = (start, Reverse(end));
        let instant = a.kind == ActivityType::CpuInstantEvent;
        let row = (a.device, row_tid(a.resource));
        let first = (key, start);
        let (last_key, last_start) = self.last_on_row.entry(row).or_insert(first);
        // A row's lanes need its slices in written order, and its sequence's clock every
        // activity in time order.
        if start < *last_start || (!instant && key < *last_key) {
            self.problem = Some("an activity comes before one that starts later on its row");
            return;
        }
        *last_start = start;
        if !instant {
            *last_key = key;
        }
        if key < self.last {
            self.in_written_order = false;
        }
        self.last = key;
        self.placement.place(a);
    }

    /// What the second read needs, or why the trace cannot be streamed.
    pub fn finish(self) -> Result<PerfettoLayout, NeedsWholeTrace> {
        if let Some(why) = self.problem {
            return Err(NeedsWholeTrace::new(why));
        }
        let Placement {
            lanes,
            flows,
            device_pids,
            ..
        } = self.placement;
        if flows.reused() && !self.in_written_order {
            return Err(NeedsWholeTrace::new(
                "a flow id has several starts or ends (or an end before its start) and the \
                 activities are not in time order",
            ));
        }
        let trace = self.skeleton.finish().0;
        // Rows numbered as the whole-trace writer numbers them: thread rows first.
        let lanes_of: FastMap<RowId, u32> = lanes.rows().collect();
        let mut seen = HashSet::new();
        let thread_rows = trace.threads.iter().map(|t| (t.pid, row_tid(t.tid)));
        let mut rows = Vec::new();
        for id in thread_rows.chain(lanes.rows().map(|(id, _)| id)) {
            if seen.insert(id) {
                rows.push((id, lanes_of.get(&id).copied().unwrap_or(1)));
            }
        }
        let layout = Layout {
            rows,
            spilled: lanes.spilled,
            flows: flows.placed(),
            device_pids,
            counters: self.counters.finish(),
            per_row: !self.in_written_order,
        };
        Ok(PerfettoLayout { trace, layout })
    }
}

/// What a [`PerfettoSurvey`] found: the trace's header, rows and spans, and the tracks.
pub struct PerfettoLayout {
    /// The trace without its activities and counter samples.
    trace: Trace,
    layout: Layout,
}

/// The second read of a streamed trace: writes each activity as it comes, and the rest at
/// [`finish`](Self::finish). Its items must be the first read's, in the same order.
pub struct PerfettoStream<W: Write> {
    w: Writer<W>,
    found: PerfettoLayout,
    lanes: Lanes,
    /// Activities written: the next one's written index.
    written: usize,
    samples: Vec<(i64, u32, f64)>,
    error: Option<io::Error>,
}

impl<W: Write> PerfettoStream<W> {
    /// Writes what comes before the activities (the track descriptors) to `out`.
    pub fn new(found: PerfettoLayout, out: W) -> io::Result<Self> {
        let w = Writer::start(out, &found.trace, &found.layout)?;
        let mut lanes = Lanes::default();
        for &(id, _) in &found.layout.rows {
            lanes.row(id);
        }
        Ok(Self {
            w,
            found,
            lanes,
            written: 0,
            samples: Vec::new(),
            error: None,
        })
    }

    /// Writes one item; after an error, the items are ignored and [`finish`](Self::finish)
    /// returns it.
    pub fn add(&mut self, item: TraceItem) {
        if self.error.is_some() {
            return;
        }
        let layout = &self.found.layout;
        match item {
            TraceItem::Activity(a) => {
                let track = place_on_row(&mut self.lanes, &a);
                let (row, lane) = (uuid::row_of(track), uuid::lane_of(track));
                let known = layout.rows.get(row).is_some_and(|&(_, lanes)| lane < lanes);
                // Its sequence's clock only goes forward (the survey saw to it, unless the
                // file changed).
                let in_order = known && {
                    let sequence = &self.w.sequences[layout.sequence(track)];
                    timestamp(written_span(&a).0) >= sequence.last_ts
                };
                if !in_order {
                    self.error = Some(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the trace changed between its two reads: activity {} ({}) is \
                             not where the first read found room for it",
                            self.written, a.name
                        ),
                    ));
                    return;
                }
                let index = self.written;
                self.written += 1;
                if let Err(e) = self.w.activity(&a, layout, index, track) {
                    self.error = Some(e);
                }
            }
            TraceItem::Counter(track, sample) => {
                layout.counters.samples(&track, &sample, &mut self.samples);
            }
            _ => {}
        }
    }

    /// Writes the slice ends held back, the counter samples, the spans and the window's
    /// end, and returns what was written (or the first error).
    pub fn finish(mut self) -> io::Result<WriteStats> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.w
            .finish(&self.found.trace, &self.found.layout, self.samples)
    }
}
