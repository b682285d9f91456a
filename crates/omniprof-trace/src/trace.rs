//! The one trace model: what a session produces, what the reader rebuilds from a file, and what
//! every exporter and analysis reads.
//!
//! Ranges and instants are [`Activity`] records in [`Trace::activities`]; counter samples are
//! not activities but series in [`Trace::counters`] (see [`crate::counter`]): a writer emits
//! the activities, then each series' samples (`CounterSeries::track` says the type, the
//! `pid`/`tid` row and the name; each `CounterSample` a time and its named values).
//!
//! ```
//! use omniprof_trace::{Activity, ActivityType, Trace, Value};
//!
//! let mut trace = Trace::new(1_000, 2_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 42, 42, 1_100, 1_500));
//! trace.set_metadata("trace_id", Value::from("ABC"));
//! assert_eq!(trace.metadata("trace_id"), Some(&Value::from("ABC")));
//! assert_eq!(trace.activities[0].duration_ns(), 400);
//! ```

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::activity::Activity;
use crate::counter::Counters;
use crate::health::SessionHealth;
use crate::value::Value;

/// Three average months (3 × 2,629,746 s): the granularity of `baseTimeNanoseconds`.
const BASE_TIME_QUANTUM_S: i64 = 7_889_238;

/// A capture window in nanoseconds since the Unix epoch: device activities outside it are
/// dropped (and counted), and unfinished host ranges end at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Start, in nanoseconds since the Unix epoch.
    pub start_ns: i64,
    /// End, in nanoseconds since the Unix epoch.
    pub end_ns: i64,
}

impl Window {
    /// The window from `start_ns` to `end_ns`.
    pub fn new(start_ns: i64, end_ns: i64) -> Self {
        Self { start_ns, end_ns }
    }

    /// `end_ns - start_ns`.
    pub fn duration_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }

    /// True when `[start_ns, end_ns]` lies inside the window (ends included).
    pub fn contains(&self, start_ns: i64, end_ns: i64) -> bool {
        self.start_ns <= start_ns && end_ns <= self.end_ns
    }
}

/// A process row (`process_name`, `process_labels`, `process_sort_index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessRow {
    /// The process id (for a device, its index).
    pub pid: i64,
    /// The row's name.
    pub name: String,
    /// The row's label.
    pub label: String,
    /// Where the row sorts among processes.
    pub sort_index: i64,
}

/// A thread row (`thread_name`, `thread_sort_index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRow {
    /// The process the thread belongs to.
    pub pid: i64,
    /// The thread id (for device work, the stream).
    pub tid: i64,
    /// The row's name.
    pub name: String,
    /// Where the row sorts among its process's threads.
    pub sort_index: i64,
}

/// A trace span: the `Trace` row on `pid` "Spans" plus its `Iteration Start` marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The span name (`PyTorch Profiler`, `omniprof`).
    pub name: String,
    /// Written before the name in the `Trace` event (`GPU: ` for device spans).
    pub prefix: String,
    /// The iteration the span starts at.
    pub iteration: i64,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_ns: i64,
    /// Equal to `start_ns` when the span has no end.
    pub end_ns: i64,
    /// The number of ops the span holds.
    pub op_count: u64,
}

/// A complete trace: header, rows, activities, counters, spans.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Written as `baseTimeNanoseconds`; `ts` values are relative to it.
    pub base_time_ns: i64,
    /// The capture window.
    pub window: Window,
    /// Metadata entries in insertion order (written between `deviceProperties` and
    /// `displayTimeUnit`), except the session health's.
    pub metadata: Vec<(String, Value)>,
    /// What the session says about this trace (drops, backends' contributions, failures
    /// and warnings): written after the other metadata, under its keys.
    pub health: SessionHealth,
    /// One JSON object per device (`deviceProperties`).
    pub device_properties: Vec<Value>,
    /// The process rows.
    pub processes: Vec<ProcessRow>,
    /// The thread rows.
    pub threads: Vec<ThreadRow>,
    /// The ranges and instants, in no particular order.
    pub activities: Vec<Activity>,
    /// Counter series (device PM counters, scope-profiler metrics, host perf counters):
    /// kept apart from the activities, which are ranges and instants.
    pub counters: Counters,
    /// The trace spans.
    pub spans: Vec<Span>,
    /// The `traceName` (the output path, set by the writer when absent).
    pub trace_name: Option<String>,
}

impl Trace {
    /// An empty trace with this capture window and the process-wide base time.
    pub fn new(window_start_ns: i64, window_end_ns: i64) -> Self {
        Self {
            base_time_ns: process_base_time_ns(),
            window: Window::new(window_start_ns, window_end_ns),
            metadata: Vec::new(),
            health: SessionHealth::default(),
            device_properties: Vec::new(),
            processes: Vec::new(),
            threads: Vec::new(),
            activities: Vec::new(),
            counters: Counters::default(),
            spans: Vec::new(),
            trace_name: None,
        }
    }

    /// The value of a metadata key (none for the session health's keys: see
    /// [`Trace::health`]).
    pub fn metadata(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets a metadata key, replacing an earlier value in place. A key of the session
    /// report sets its field instead ([`SessionHealth::set`]); a value of the wrong shape
    /// there is logged as a warning and leaves the field empty.
    pub fn set_metadata(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        if SessionHealth::is_key(&key) {
            if let Err(e) = self.health.set(&key, &value) {
                log::warn!("omniprof: {e}");
            }
            return;
        }
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key, value)),
        }
    }

    /// Adds a process row unless one with the same pid exists.
    pub fn add_process(&mut self, row: ProcessRow) {
        if !self.processes.iter().any(|p| p.pid == row.pid) {
            self.processes.push(row);
        }
    }

    /// Adds a thread row unless one with the same (pid, tid) exists.
    pub fn add_thread(&mut self, row: ThreadRow) {
        if !self
            .threads
            .iter()
            .any(|t| t.pid == row.pid && t.tid == row.tid)
        {
            self.threads.push(row);
        }
    }
}

/// The wall clock at first use, floored to three average months, so every process of a job
/// that starts within the same quarter shares the base (as Kineto does).
pub fn process_base_time_ns() -> i64 {
    static BASE: OnceLock<i64> = OnceLock::new();
    *BASE.get_or_init(|| {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        base_time_for(since_epoch.as_nanos() as i64)
    })
}

/// `baseTimeNanoseconds` for a wall-clock time.
pub(crate) fn base_time_for(wall_ns: i64) -> i64 {
    let secs = wall_ns.div_euclid(1_000_000_000);
    secs.div_euclid(BASE_TIME_QUANTUM_S) * BASE_TIME_QUANTUM_S * 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_time_matches_kinetos_example() {
        let base = 1_790_857_026_000_000_000;
        assert_eq!(base_time_for(base), base);
        assert_eq!(base_time_for(base + 50 * 86_400 * 1_000_000_000), base);
        assert_eq!(base / 1_000_000_000 / BASE_TIME_QUANTUM_S, 227);
    }

    #[test]
    fn metadata_keeps_insertion_order_and_replaces_in_place() {
        let mut t = Trace::new(0, 1);
        t.set_metadata("a", Value::from(1i64));
        t.set_metadata("b", Value::from(2i64));
        t.set_metadata("a", Value::from(3i64));
        let keys: Vec<_> = t.metadata.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(t.metadata("a"), Some(&Value::Int(3)));
    }

    #[test]
    fn a_report_key_sets_the_report_and_stays_out_of_the_metadata() {
        let mut t = Trace::new(0, 1);
        t.set_metadata("dropped_events", Value::UInt(4));
        t.set_metadata("warmup_events", Value::from("four"));
        assert_eq!(t.health.dropped_events, Some(4));
        assert_eq!(t.health.warmup_events, None);
        assert!(t.metadata.is_empty());
        assert_eq!(t.metadata("dropped_events"), None);
    }
}
