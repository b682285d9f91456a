//! A trace item by item: the [`TraceItem`]s a reader delivers and a streaming writer takes,
//! and the [`TraceAssembler`] that collects them into a whole [`Trace`].

use crate::activity::Activity;
use crate::counter::{CounterSample, CounterTrack};
use crate::health::{MalformedEntry, SessionHealth};
use crate::trace::{ProcessRow, Span, ThreadRow, Trace, Window};
use crate::value::Value;

/// One piece of a trace, in the order the reader completes it.
///
/// Times are absolute nanoseconds: `baseTimeNanoseconds` plus the event's `ts`. Kineto and
/// omniprof write the base before `traceEvents`; should a file put it after, the items read
/// before [`TraceItem::BaseTime`] were computed with a base of 0, and the consumer adds the
/// base to them (as a whole read does).
#[derive(Clone, Debug, PartialEq)]
pub enum TraceItem {
    /// `baseTimeNanoseconds`.
    BaseTime(i64),
    /// `deviceProperties`: one value (a JSON object) per device.
    DeviceProperties(Vec<Value>),
    /// Any other top-level key (`trace_id`, `distributedInfo`, ...) with its value, in file
    /// order. `schemaVersion` and `displayTimeUnit` are not reported.
    Metadata(String, Value),
    /// `traceName`.
    TraceName(String),
    /// A range or instant.
    Activity(Activity),
    /// A counter sample (a `C` event) with its track; its values are finite numbers.
    Counter(CounterTrack, CounterSample),
    /// A trace span.
    Span(Span),
    /// The rows come after the last event (their pieces may be spread over the file).
    Process(ProcessRow),
    /// A thread row.
    Thread(ThreadRow),
    /// The capture window, last after the events: from the earliest row event (else the
    /// earliest activity) to `Record Window End` (else the latest activity end).
    Window(Window),
}

/// Collects [`TraceItem`]s into a [`Trace`], as a whole read does. The streamed Perfetto
/// writer collects a trace's header, rows and spans with it.
pub struct TraceAssembler {
    trace: Trace,
    window: Option<Window>,
    /// The session health's entries that were refused.
    health_problems: Vec<MalformedEntry>,
}

impl Default for TraceAssembler {
    fn default() -> Self {
        Self {
            // A file without `baseTimeNanoseconds` has base 0, not this process's base.
            trace: Trace {
                base_time_ns: 0,
                ..Trace::new(0, 0)
            },
            window: None,
            health_problems: Vec::new(),
        }
    }
}

impl TraceAssembler {
    /// Takes the next item.
    pub fn add(&mut self, item: TraceItem) {
        let trace = &mut self.trace;
        match item {
            TraceItem::BaseTime(base) => {
                // Anything already here was timed with a base of 0 (the base came late).
                for a in &mut trace.activities {
                    a.start_ns = a.start_ns.saturating_add(base);
                    a.end_ns = a.end_ns.saturating_add(base);
                }
                trace.counters.shift(base);
                for s in &mut trace.spans {
                    s.start_ns = s.start_ns.saturating_add(base);
                    s.end_ns = s.end_ns.saturating_add(base);
                }
                if let Some(window) = &mut self.window {
                    window.start_ns = window.start_ns.saturating_add(base);
                    window.end_ns = window.end_ns.saturating_add(base);
                }
                trace.base_time_ns = base;
            }
            TraceItem::DeviceProperties(devices) => trace.device_properties = devices,
            TraceItem::Metadata(key, value) if SessionHealth::is_key(&key) => {
                if let Err(e) = trace.health.set(&key, &value) {
                    log::warn!("omniprof: {e}");
                    self.health_problems.push(e);
                }
            }
            TraceItem::Metadata(key, value) => trace.set_metadata(key, value),
            TraceItem::TraceName(name) => trace.trace_name = Some(name),
            TraceItem::Activity(a) => trace.activities.push(a),
            TraceItem::Counter(track, sample) => {
                trace.counters.add(&track, sample.ts_ns, sample.values);
            }
            TraceItem::Span(s) => trace.spans.push(s),
            TraceItem::Process(row) => trace.processes.push(row),
            TraceItem::Thread(row) => trace.threads.push(row),
            TraceItem::Window(window) => self.window = Some(window),
        }
    }

    /// The trace of the items taken, and the session health's entries it refused (each
    /// already logged).
    pub fn finish(mut self) -> (Trace, Vec<MalformedEntry>) {
        let base = self.trace.base_time_ns;
        self.trace.window = self.window.unwrap_or(Window::new(base, base));
        (self.trace, self.health_problems)
    }
}
