//! The session health: what a profiling session says about its own trace — what it dropped
//! and why, what each backend contributed, which backends failed and what looked doubtful,
//! and what the engine's own profilers (the profiler stubs, the host perf counters, the scope
//! profiler) met.
//!
//! It is typed here once, so that the session writes it, the CLI, the Python package and the
//! tests read it, and none of them spells a metadata key or parses a message. In a file it is
//! part of the trace header, under the keys of [`metadata`] (the same keys and shapes as
//! before it was typed, so traces stay compatible): the JSON writer writes
//! [`SessionHealth::entries`] after the other metadata, and [`Trace::set_metadata`] (which
//! the reader calls for every header entry) routes a report key to
//! [`SessionHealth::set`]. A value of the wrong shape, as a foreign trace may hold, is
//! refused with a [`MalformedEntry`] that the trace logs as a warning; the field stays
//! empty and the read goes on.
//!
//! ```
//! use omniprof_trace::{BackendCall, BackendFailure, FailureKind};
//! use omniprof_trace::{Trace, Value};
//!
//! let mut trace = Trace::new(0, 10);
//! trace.health.dropped_events = Some(3);
//! trace.health.backend_errors.push(BackendFailure {
//!     backend: "openreg".into(),
//!     kind: FailureKind::Failed { call: BackendCall::Stop, reason: "device lost".into() },
//! });
//! let entries = trace.health.entries();
//! assert_eq!(entries[0], ("dropped_events", Value::UInt(3)));
//! assert_eq!(entries[1].1, Value::List(vec![Value::from("openreg: stop failed: device lost")]));
//!
//! // Read back from the header, the message is the same typed failure.
//! let mut read = Trace::new(0, 10);
//! for (key, value) in entries {
//!     read.set_metadata(key, value);
//! }
//! assert_eq!(read.health, trace.health);
//! assert!(read.metadata.is_empty());
//! ```
//!
//! [`Trace::set_metadata`]: crate::Trace::set_metadata

use std::fmt;

use crate::keys::metadata;
use crate::value::Value;

/// What a session says about its trace. Counts are `None` where the trace does not say
/// (a foreign trace, or a count the session writes only when it is not 0); lists are empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionHealth {
    /// Calls to the profiler stubs that failed ([`metadata::STUB_ERRORS`]).
    pub stub_errors: Option<u64>,
    /// The messages of the first few of those calls ([`metadata::STUB_ERROR_MESSAGES`]).
    pub stub_error_messages: Vec<String>,
    /// Host perf events (`PERF_EVENTS`) that could not be opened, and why
    /// ([`metadata::UNAVAILABLE_PERF_EVENTS`]).
    pub unavailable_perf_events: Vec<UnavailablePerfEvent>,
    /// What the scope profiler collected, when the trace enabled it
    /// ([`metadata::SCOPE_PROFILER`]).
    pub scope_profiler: Option<ScopeProfiling>,
    /// Plugin libraries and profilers that take no part in traces, one line each naming the
    /// file and why ([`metadata::PLUGIN_ERRORS`]).
    pub plugin_errors: Vec<String>,
    /// Host events dropped because a thread reached its record cap
    /// ([`metadata::DROPPED_EVENTS`]; a session always writes it).
    pub dropped_events: Option<u64>,
    /// Host ranges whose names did not fit in the name table ([`metadata::DROPPED_NAMES`]).
    pub dropped_names: Option<u64>,
    /// Ranges still open at stop ([`metadata::UNFINISHED_RANGES`]).
    pub unfinished_ranges: Option<u64>,
    /// Counter samples the trace holds ([`metadata::COUNTER_SAMPLES`]).
    pub counter_samples: Option<u64>,
    /// Counter samples dropped outside the capture window
    /// ([`metadata::OUT_OF_WINDOW_COUNTER_SAMPLES`]).
    pub out_of_window_counter_samples: Option<u64>,
    /// Counter values dropped because they were not finite numbers
    /// ([`metadata::DROPPED_COUNTER_VALUES`]).
    pub dropped_counter_values: Option<u64>,
    /// Kernels past the scope profiler's limit, which got no metrics
    /// ([`metadata::SCOPE_PROFILER_UNPROFILED_KERNELS`]).
    pub scope_profiler_unprofiled_kernels: Option<u64>,
    /// Device activities dropped outside the capture window
    /// ([`metadata::OUT_OF_WINDOW_EVENTS`]; a session always writes it).
    pub out_of_window_events: Option<u64>,
    /// Device activities of the warm-up, dropped as intended ([`metadata::WARMUP_EVENTS`]).
    pub warmup_events: Option<u64>,
    /// Launches that shared a correlation id with an earlier one
    /// ([`metadata::DUPLICATE_FLOW_STARTS`]).
    pub duplicate_flow_starts: Option<u64>,
    /// Flow ids a backend shared with an earlier source of the trace, renumbered into that
    /// backend's namespace ([`metadata::RENUMBERED_FLOW_IDS`]).
    pub renumbered_flow_ids: Option<u64>,
    /// What each backend contributed, in the order they were merged
    /// ([`metadata::BACKENDS`]).
    pub backends: Vec<Contribution>,
    /// Why backends were left out of the trace or lost records
    /// ([`metadata::BACKEND_ERRORS`]).
    pub backend_errors: Vec<BackendFailure>,
    /// Host-side device events whose link to a host op was refused
    /// ([`metadata::REFUSED_LINKS`]).
    pub refused_links: Option<u64>,
    /// Runtime or driver events that lie past their host op only where the capture window
    /// cut that op; their links are kept ([`metadata::WINDOW_CUT_LINKS`]).
    pub window_cut_links: Option<u64>,
    /// Doubts about what backends delivered ([`metadata::BACKEND_WARNINGS`]).
    pub backend_warnings: Vec<BackendWarning>,
}

/// A count of a report: its key, how to read it and how to set it.
type Count = (
    &'static str,
    fn(&SessionHealth) -> Option<u64>,
    fn(&mut SessionHealth, Option<u64>),
);

/// The counts of a report, in the order they are written: the first, `stub_errors`, among
/// the entries of the engine's own profilers, which lead; the last two, `refused_links` and
/// `window_cut_links`, after the backends' errors.
const COUNTS: [Count; 14] = [
    (
        metadata::STUB_ERRORS,
        |r| r.stub_errors,
        |r, n| r.stub_errors = n,
    ),
    (
        metadata::DROPPED_EVENTS,
        |r| r.dropped_events,
        |r, n| r.dropped_events = n,
    ),
    (
        metadata::DROPPED_NAMES,
        |r| r.dropped_names,
        |r, n| r.dropped_names = n,
    ),
    (
        metadata::UNFINISHED_RANGES,
        |r| r.unfinished_ranges,
        |r, n| r.unfinished_ranges = n,
    ),
    (
        metadata::COUNTER_SAMPLES,
        |r| r.counter_samples,
        |r, n| r.counter_samples = n,
    ),
    (
        metadata::OUT_OF_WINDOW_COUNTER_SAMPLES,
        |r| r.out_of_window_counter_samples,
        |r, n| r.out_of_window_counter_samples = n,
    ),
    (
        metadata::DROPPED_COUNTER_VALUES,
        |r| r.dropped_counter_values,
        |r, n| r.dropped_counter_values = n,
    ),
    (
        metadata::SCOPE_PROFILER_UNPROFILED_KERNELS,
        |r| r.scope_profiler_unprofiled_kernels,
        |r, n| r.scope_profiler_unprofiled_kernels = n,
    ),
    (
        metadata::OUT_OF_WINDOW_EVENTS,
        |r| r.out_of_window_events,
        |r, n| r.out_of_window_events = n,
    ),
    (
        metadata::WARMUP_EVENTS,
        |r| r.warmup_events,
        |r, n| r.warmup_events = n,
    ),
    (
        metadata::DUPLICATE_FLOW_STARTS,
        |r| r.duplicate_flow_starts,
        |r, n| r.duplicate_flow_starts = n,
    ),
    (
        metadata::RENUMBERED_FLOW_IDS,
        |r| r.renumbered_flow_ids,
        |r, n| r.renumbered_flow_ids = n,
    ),
    (
        metadata::REFUSED_LINKS,
        |r| r.refused_links,
        |r, n| r.refused_links = n,
    ),
    (
        metadata::WINDOW_CUT_LINKS,
        |r| r.window_cut_links,
        |r, n| r.window_cut_links = n,
    ),
];

/// The keys of a report that are not counts.
const SHAPED: [&str; 7] = [
    metadata::STUB_ERROR_MESSAGES,
    metadata::UNAVAILABLE_PERF_EVENTS,
    metadata::SCOPE_PROFILER,
    metadata::PLUGIN_ERRORS,
    metadata::BACKENDS,
    metadata::BACKEND_ERRORS,
    metadata::BACKEND_WARNINGS,
];

impl SessionHealth {
    /// Whether `key` is one of the header keys the report is written under.
    pub fn is_key(key: &str) -> bool {
        SHAPED.contains(&key) || COUNTS.iter().any(|(k, _, _)| *k == key)
    }

    /// The header entries the report is written as: each count that is set, each list that
    /// is not empty, the scope profiler's object when set, in the order a session has always
    /// written them among themselves (the JSON writer writes them after the trace's other
    /// metadata).
    pub fn entries(&self) -> Vec<(&'static str, Value)> {
        let [_, counts @ .., refused, window_cut] = &COUNTS;
        let mut out = self.profiler_entries();
        out.extend(list(metadata::PLUGIN_ERRORS, texts(&self.plugin_errors)));
        out.extend(counts.iter().filter_map(|c| self.count(c)));
        let backends = self.backends.iter().map(Contribution::to_value).collect();
        out.extend(list(metadata::BACKENDS, backends));
        let errors = self
            .backend_errors
            .iter()
            .map(|e| Value::from(e.to_string()));
        out.extend(list(metadata::BACKEND_ERRORS, errors.collect()));
        out.extend(self.count(refused));
        out.extend(self.count(window_cut));
        let warnings = self
            .backend_warnings
            .iter()
            .map(|w| Value::from(w.to_string()));
        out.extend(list(metadata::BACKEND_WARNINGS, warnings.collect()));
        out
    }

    /// The entries of the engine's own profilers, which lead [`Self::entries`]: the profiler
    /// stubs' failed calls, the perf events that did not open, the scope profiler's work.
    fn profiler_entries(&self) -> Vec<(&'static str, Value)> {
        let [stub_errors, ..] = &COUNTS;
        let mut out = Vec::from_iter(self.count(stub_errors));
        out.extend(list(
            metadata::STUB_ERROR_MESSAGES,
            texts(&self.stub_error_messages),
        ));
        let unavailable = self
            .unavailable_perf_events
            .iter()
            .map(|e| Value::from(e.to_string()));
        out.extend(list(
            metadata::UNAVAILABLE_PERF_EVENTS,
            unavailable.collect(),
        ));
        let scope = self.scope_profiler.as_ref().map(ScopeProfiling::to_value);
        out.extend(scope.map(|v| (metadata::SCOPE_PROFILER, v)));
        out
    }

    /// The entry of a count, when it is set.
    fn count(&self, &(key, get, _): &Count) -> Option<(&'static str, Value)> {
        get(self).map(|n| (key, Value::UInt(n)))
    }

    /// Sets the field of the header key `key` from `value`, as read from a trace. A value of
    /// the wrong shape leaves the field empty and is returned as an error to warn about; a
    /// key that is not the report's ([`Self::is_key`]) is an error too.
    pub fn set(&mut self, key: &str, value: &Value) -> Result<(), MalformedEntry> {
        let malformed = |expected: &'static str| MalformedEntry {
            key: key.to_owned(),
            expected,
            found: value.to_json(),
        };
        if let Some((_, _, set)) = COUNTS.iter().find(|(k, _, _)| *k == key) {
            let n = whole(value);
            set(self, n);
            return n
                .map(|_| ())
                .ok_or_else(|| malformed("a whole number from 0"));
        }
        let texts = || -> Option<Vec<String>> {
            let Value::List(items) = value else {
                return None;
            };
            items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        match key {
            metadata::STUB_ERROR_MESSAGES => {
                self.stub_error_messages = Vec::new();
                self.stub_error_messages = texts().ok_or_else(|| malformed("a list of strings"))?;
            }
            metadata::UNAVAILABLE_PERF_EVENTS => {
                self.unavailable_perf_events = Vec::new();
                let expected = UnavailablePerfEvent::EXPECTED;
                let list = texts().ok_or_else(|| malformed(expected))?;
                self.unavailable_perf_events = list
                    .iter()
                    .map(|t| UnavailablePerfEvent::parse(t))
                    .collect::<Option<_>>()
                    .ok_or_else(|| malformed(expected))?;
            }
            metadata::SCOPE_PROFILER => {
                self.scope_profiler = None;
                let scope = ScopeProfiling::from_value(value);
                self.scope_profiler =
                    Some(scope.ok_or_else(|| malformed(ScopeProfiling::EXPECTED))?);
            }
            metadata::PLUGIN_ERRORS => {
                self.plugin_errors = Vec::new();
                self.plugin_errors = texts().ok_or_else(|| malformed("a list of strings"))?;
            }
            metadata::BACKEND_ERRORS => {
                self.backend_errors = Vec::new();
                let list = texts().ok_or_else(|| malformed("a list of strings"))?;
                self.backend_errors = list.iter().map(|t| BackendFailure::parse(t)).collect();
            }
            metadata::BACKEND_WARNINGS => {
                self.backend_warnings = Vec::new();
                let list = texts().ok_or_else(|| malformed("a list of strings"))?;
                self.backend_warnings = list.iter().map(|t| BackendWarning::parse(t)).collect();
            }
            metadata::BACKENDS => {
                self.backends = Vec::new();
                let Value::List(items) = value else {
                    return Err(malformed(Contribution::EXPECTED));
                };
                self.backends = items
                    .iter()
                    .map(Contribution::from_value)
                    .collect::<Option<_>>()
                    .ok_or_else(|| malformed(Contribution::EXPECTED))?;
            }
            _ => return Err(malformed("no value: the key is not the session health's")),
        }
        Ok(())
    }
}

/// A report entry of the wrong shape: its key, what it should have been and what it was.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("trace metadata {key:?} should be {expected}, not {found} (left out of the report)")]
pub struct MalformedEntry {
    /// The header key.
    pub key: String,
    /// What a value of this key is.
    pub expected: &'static str,
    /// The value found, as JSON.
    pub found: String,
}

/// The entry of a list, when it is not empty.
fn list(key: &'static str, items: Vec<Value>) -> Option<(&'static str, Value)> {
    (!items.is_empty()).then_some((key, Value::List(items)))
}

/// Texts as string values.
fn texts(items: &[String]) -> Vec<Value> {
    items.iter().map(|s| Value::from(s.as_str())).collect()
}

/// A value as a count: a whole number from 0 (not a boolean, which reads as 0 or 1).
fn whole(value: &Value) -> Option<u64> {
    match value {
        Value::UInt(n) => Some(*n),
        Value::Bool(_) => None,
        _ => value.as_i64().and_then(|n| u64::try_from(n).ok()),
    }
}

/// A host perf event that could not be opened, and why. Written as `<name>: <reason>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnavailablePerfEvent {
    /// The event's name, as `PERF_EVENTS` spells it.
    pub name: String,
    /// Why it could not be opened (the system's error).
    pub reason: String,
}

impl UnavailablePerfEvent {
    const EXPECTED: &'static str = "a list of \"<event>: <reason>\" strings";

    /// The event a written entry names, `None` for one that is not `<name>: <reason>`.
    fn parse(text: &str) -> Option<Self> {
        let (name, reason) = text.split_once(": ")?;
        Some(Self {
            name: name.to_owned(),
            reason: reason.to_owned(),
        })
    }
}

impl fmt::Display for UnavailablePerfEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.reason)
    }
}

/// The keys of a [`metadata::SCOPE_PROFILER`] entry.
const METRICS_KEY: &str = "metrics";
const MAX_SCOPES_KEY: &str = "max_scopes";
const KERNELS_KEY: &str = "kernels";

/// What the scope profiler did in a trace: the metrics it collected, how many kernels it
/// profiles at most, and how many it profiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeProfiling {
    /// The metrics collected (`SCOPE_PROFILER_METRICS`), as selected.
    pub metrics: Vec<String>,
    /// The kernels profiled at most (`SCOPE_PROFILER_MAX_SCOPES`, or its default).
    pub max_scopes: u64,
    /// The kernels profiled.
    pub kernels: u64,
}

impl ScopeProfiling {
    const EXPECTED: &'static str = "a {metrics, max_scopes, kernels} object";

    fn to_value(&self) -> Value {
        [
            (METRICS_KEY, Value::List(texts(&self.metrics))),
            (MAX_SCOPES_KEY, Value::UInt(self.max_scopes)),
            (KERNELS_KEY, Value::UInt(self.kernels)),
        ]
        .into_iter()
        .collect()
    }

    fn from_value(entry: &Value) -> Option<Self> {
        let Value::List(metrics) = entry.get(METRICS_KEY)? else {
            return None;
        };
        Some(Self {
            metrics: metrics
                .iter()
                .map(|m| m.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
            max_scopes: whole(entry.get(MAX_SCOPES_KEY)?)?,
            kernels: whole(entry.get(KERNELS_KEY)?)?,
        })
    }
}

/// The keys of a [`metadata::BACKENDS`] entry.
const NAME_KEY: &str = "name";
const ACTIVITIES_KEY: &str = "activities";
const OUT_OF_WINDOW_KEY: &str = "out_of_window";
const BEFORE_KEY: &str = "out_of_window_before_ns";
const AFTER_KEY: &str = "out_of_window_after_ns";

/// One backend's entry in a trace's `backends` metadata: how many of its activities the trace
/// kept, how many fell outside the capture window, and how far: the farthest start before
/// the window's start (`before_ns`) and end after its end (`after_ns`), 0 when none; the
/// two are written only when not 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    /// The backend's name.
    pub name: String,
    /// Activities the trace kept.
    pub activities: u64,
    /// Activities dropped outside the capture window.
    pub out_of_window: u64,
    /// How far before the window's start the farthest of those started.
    pub before_ns: u64,
    /// How far after the window's end the farthest of those ended.
    pub after_ns: u64,
}

impl Contribution {
    const EXPECTED: &'static str =
        "a list of {name, activities, out_of_window[, out_of_window_before_ns, \
         out_of_window_after_ns]} objects";

    fn to_value(&self) -> Value {
        let far = [(BEFORE_KEY, self.before_ns), (AFTER_KEY, self.after_ns)];
        [
            (NAME_KEY, Value::from(self.name.as_str())),
            (ACTIVITIES_KEY, Value::UInt(self.activities)),
            (OUT_OF_WINDOW_KEY, Value::UInt(self.out_of_window)),
        ]
        .into_iter()
        .chain(
            far.into_iter()
                .filter(|&(_, ns)| ns > 0)
                .map(|(key, ns)| (key, Value::UInt(ns))),
        )
        .collect()
    }

    fn from_value(entry: &Value) -> Option<Self> {
        let count = |key| {
            let n = entry.get(key)?.as_i64()?;
            u64::try_from(n).ok()
        };
        let far = |key| match entry.get(key) {
            None => Some(0),
            Some(_) => count(key),
        };
        Some(Contribution {
            name: entry.get(NAME_KEY)?.as_str()?.to_owned(),
            activities: count(ACTIVITIES_KEY)?,
            out_of_window: count(OUT_OF_WINDOW_KEY)?,
            before_ns: far(BEFORE_KEY)?,
            after_ns: far(AFTER_KEY)?,
        })
    }
}

/// The call to a backend's session that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendCall {
    /// Making the session for the selected activity types.
    Configure,
    /// Starting it.
    Start,
    /// Telling it the capture window opened.
    WindowOpened,
    /// Telling it which activity types are switched off (`toggle_collection_dynamic`).
    CollectionSwitched,
    /// Stopping it.
    Stop,
    /// Having it process what it recorded.
    ProcessTrace,
    /// Asking it to record continuously, for a flight recorder.
    RecordContinuously,
    /// Having it hand a flight recorder's window while it goes on recording.
    ProcessWindow,
    /// Asking it for its devices, rows, metadata, errors and warnings.
    DeviceInfo,
}

impl BackendCall {
    const ALL: [BackendCall; 9] = [
        Self::Configure,
        Self::Start,
        Self::WindowOpened,
        Self::CollectionSwitched,
        Self::Stop,
        Self::ProcessTrace,
        Self::RecordContinuously,
        Self::ProcessWindow,
        Self::DeviceInfo,
    ];

    /// The call as a message names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Configure => "configure",
            Self::Start => "start",
            Self::WindowOpened => "window_opened",
            Self::CollectionSwitched => "collection_switched",
            Self::Stop => "stop",
            Self::ProcessTrace => "process_trace",
            Self::RecordContinuously => "record_continuously",
            Self::ProcessWindow => "process_window",
            Self::DeviceInfo => "device info",
        }
    }
}

/// The configuration key of the activities a backend may deliver per trace (omniprof's
/// `OMNIPROF_MAX_EVENTS_PER_BACKEND`), named in the over-budget message.
pub const MAX_EVENTS_KEY: &str = "OMNIPROF_MAX_EVENTS_PER_BACKEND";

/// What went wrong with a backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// A call returned an error; the backend was left out of the trace.
    Failed {
        /// The call.
        call: BackendCall,
        /// The error it returned.
        reason: String,
    },
    /// A call panicked; the backend was left out of the trace.
    Panicked {
        /// The call.
        call: BackendCall,
        /// The panic's message.
        reason: String,
    },
    /// A problem the session reported itself (`ProfilerSession::errors`), or a message this
    /// version does not know.
    Reported(String),
    /// Activities past the per-trace budget were dropped.
    OverBudget {
        /// How many were dropped.
        dropped: u64,
        /// The budget.
        budget: u64,
    },
}

/// Between the count and the budget of [`FailureKind::OverBudget`]'s message.
const OVER_BUDGET_MIDDLE: &str = " activities past the budget of ";

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed { call, reason } => write!(f, "{} failed: {reason}", call.name()),
            Self::Panicked { call, reason } => write!(f, "{} panicked: {reason}", call.name()),
            Self::Reported(message) => f.write_str(message),
            Self::OverBudget { dropped, budget } => write!(
                f,
                "{dropped}{OVER_BUDGET_MIDDLE}{budget} per trace dropped ({MAX_EVENTS_KEY})"
            ),
        }
    }
}

impl FailureKind {
    /// The kind a message (without its backend) says, [`Self::Reported`] when none.
    fn parse(text: &str) -> Self {
        for call in BackendCall::ALL {
            let Some(rest) = text.strip_prefix(call.name()) else {
                continue;
            };
            if let Some(reason) = rest.strip_prefix(" failed: ") {
                let reason = reason.to_owned();
                return Self::Failed { call, reason };
            }
            if let Some(reason) = rest.strip_prefix(" panicked: ") {
                let reason = reason.to_owned();
                return Self::Panicked { call, reason };
            }
        }
        let over_budget = || {
            let suffix = format!(" per trace dropped ({MAX_EVENTS_KEY})");
            let (dropped, budget) = text
                .strip_suffix(suffix.as_str())?
                .split_once(OVER_BUDGET_MIDDLE)?;
            Some(Self::OverBudget {
                dropped: whole_number(dropped)?,
                budget: whole_number(budget)?,
            })
        };
        over_budget().unwrap_or_else(|| Self::Reported(text.to_owned()))
    }
}

/// `text` as a number when it is written as the number is (no sign, no leading zeros), so
/// that a message reads back to the same text.
fn whole_number(text: &str) -> Option<u64> {
    text.parse::<u64>().ok().filter(|n| n.to_string() == text)
}

/// Splits `<backend>: <rest>`; a message naming no backend has an empty one.
fn split_backend(text: &str) -> (String, &str) {
    match text.split_once(": ") {
        Some((backend, rest)) if !backend.is_empty() => (backend.to_owned(), rest),
        _ => (String::new(), text),
    }
}

/// Writes `<backend>: <what>`, or `<what>` alone for no backend.
fn write_attributed(
    f: &mut fmt::Formatter<'_>,
    backend: &str,
    what: &dyn fmt::Display,
) -> fmt::Result {
    if backend.is_empty() {
        write!(f, "{what}")
    } else {
        write!(f, "{backend}: {what}")
    }
}

/// A backend that failed, and how. Displayed (and written) as `<backend>: <what>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendFailure {
    /// The backend's name (empty when a foreign trace's message names none).
    pub backend: String,
    /// What went wrong.
    pub kind: FailureKind,
}

impl BackendFailure {
    /// The failure a written message says (a message this version does not know is
    /// [`FailureKind::Reported`]); it displays as `text` again.
    pub fn parse(text: &str) -> Self {
        let (backend, rest) = split_backend(text);
        let kind = if backend.is_empty() {
            FailureKind::Reported(text.to_owned())
        } else {
            FailureKind::parse(rest)
        };
        Self { backend, kind }
    }
}

impl fmt::Display for BackendFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_attributed(f, &self.backend, &self.kind)
    }
}

/// A doubt about what a backend delivered that cost the trace nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarningKind {
    /// Host-side device events unlinked from host ops they lie outside of.
    RefusedLinks {
        /// How many events were unlinked.
        count: u64,
    },
    /// A doubt the session reported itself (`ProfilerSession::warnings`), or a message this
    /// version does not know.
    Reported(String),
}

/// What follows the count in [`WarningKind::RefusedLinks`]'s message.
const REFUSED_LINKS_TEXT: &str = " events unlinked from host ops: a runtime or driver event \
     with their id lies outside that op's time on its thread (an event's id must be the \
     correlation id the host pushed)";

impl fmt::Display for WarningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RefusedLinks { count } => write!(f, "{count}{REFUSED_LINKS_TEXT}"),
            Self::Reported(message) => f.write_str(message),
        }
    }
}

/// A backend's doubtful delivery. Displayed (and written) as `<backend>: <what>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendWarning {
    /// The backend's name (empty when a foreign trace's message names none).
    pub backend: String,
    /// The doubt.
    pub kind: WarningKind,
}

impl BackendWarning {
    /// The warning a written message says; it displays as `text` again.
    pub fn parse(text: &str) -> Self {
        let (backend, rest) = split_backend(text);
        if backend.is_empty() {
            return Self {
                backend,
                kind: WarningKind::Reported(text.to_owned()),
            };
        }
        let refused = rest
            .strip_suffix(REFUSED_LINKS_TEXT)
            .and_then(whole_number)
            .map(|count| WarningKind::RefusedLinks { count });
        let kind = refused.unwrap_or_else(|| WarningKind::Reported(rest.to_owned()));
        Self { backend, kind }
    }
}

impl fmt::Display for BackendWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_attributed(f, &self.backend, &self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report with every field set.
    fn full() -> SessionHealth {
        let count = |n| Some(n);
        SessionHealth {
            stub_errors: count(12),
            stub_error_messages: vec!["begin: no device".into()],
            unavailable_perf_events: vec![UnavailablePerfEvent {
                name: "cycles".into(),
                reason: "Permission denied (os error 13)".into(),
            }],
            scope_profiler: Some(ScopeProfiling {
                metrics: vec!["flops".into(), "bytes_read".into()],
                max_scopes: 10,
                kernels: 4,
            }),
            plugin_errors: vec!["libx.so: not a Kineto plugin".into()],
            dropped_events: count(1),
            dropped_names: count(2),
            unfinished_ranges: count(3),
            counter_samples: count(4),
            out_of_window_counter_samples: count(5),
            dropped_counter_values: count(6),
            scope_profiler_unprofiled_kernels: count(7),
            out_of_window_events: count(8),
            warmup_events: count(9),
            duplicate_flow_starts: count(10),
            renumbered_flow_ids: count(13),
            backends: vec![Contribution {
                name: "openreg".into(),
                activities: 12,
                out_of_window: 2,
                before_ns: 0,
                after_ns: 300,
            }],
            backend_errors: vec![
                BackendFailure {
                    backend: "a".into(),
                    kind: FailureKind::Failed {
                        call: BackendCall::ProcessTrace,
                        reason: "no device".into(),
                    },
                },
                BackendFailure {
                    backend: "b".into(),
                    kind: FailureKind::Panicked {
                        call: BackendCall::DeviceInfo,
                        reason: "boom".into(),
                    },
                },
                BackendFailure {
                    backend: "c".into(),
                    kind: FailureKind::OverBudget {
                        dropped: 5,
                        budget: 100,
                    },
                },
                BackendFailure {
                    backend: "d".into(),
                    kind: FailureKind::Reported("3 stub calls failed".into()),
                },
            ],
            refused_links: count(11),
            window_cut_links: count(14),
            backend_warnings: vec![
                BackendWarning {
                    backend: "a".into(),
                    kind: WarningKind::RefusedLinks { count: 11 },
                },
                BackendWarning {
                    backend: "b".into(),
                    kind: WarningKind::Reported("ids match no host op".into()),
                },
            ],
        }
    }

    fn read(entries: Vec<(&'static str, Value)>) -> SessionHealth {
        let mut report = SessionHealth::default();
        for (key, value) in entries {
            assert!(SessionHealth::is_key(key), "{key}");
            report.set(key, &value).unwrap();
        }
        report
    }

    #[test]
    fn a_report_written_as_entries_reads_back_equal() {
        let report = full();
        assert_eq!(read(report.entries()), report);
    }

    #[test]
    fn entries_keep_the_keys_and_order_a_session_has_always_written() {
        let keys: Vec<_> = full().entries().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "stub_errors",
                "stub_error_messages",
                "unavailable_perf_events",
                "scope_profiler",
                "plugin_errors",
                "dropped_events",
                "dropped_names",
                "unfinished_ranges",
                "counter_samples",
                "out_of_window_counter_samples",
                "dropped_counter_values",
                "scope_profiler_unprofiled_kernels",
                "out_of_window_events",
                "warmup_events",
                "duplicate_flow_starts",
                "renumbered_flow_ids",
                "backends",
                "backend_errors",
                "refused_links",
                "window_cut_links",
                "backend_warnings",
            ]
        );
        assert!(SessionHealth::default().entries().is_empty());
    }

    #[test]
    fn failures_and_warnings_are_written_as_the_sentences_they_always_were() {
        let texts: Vec<String> = full()
            .backend_errors
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            texts,
            [
                "a: process_trace failed: no device",
                "b: device info panicked: boom",
                "c: 5 activities past the budget of 100 per trace dropped \
                 (OMNIPROF_MAX_EVENTS_PER_BACKEND)",
                "d: 3 stub calls failed",
            ]
        );
        assert_eq!(
            full().backend_warnings[0].to_string(),
            "a: 11 events unlinked from host ops: a runtime or driver event with their id \
             lies outside that op's time on its thread (an event's id must be the correlation \
             id the host pushed)"
        );
    }

    #[test]
    fn a_contribution_is_written_with_its_distances_only_when_not_0() {
        let entries = full().entries();
        let (_, backends) = entries.iter().find(|(k, _)| *k == "backends").unwrap();
        assert_eq!(
            backends.to_json(),
            r#"[{"name": "openreg", "activities": 12, "out_of_window": 2, "out_of_window_after_ns": 300}]"#
        );
    }

    #[test]
    fn a_foreign_message_reads_back_as_the_same_text() {
        for text in [
            "no backend named",
            ": starts with a colon",
            "x: start failed",
            "x: 007 activities past the budget of 1 per trace dropped \
             (OMNIPROF_MAX_EVENTS_PER_BACKEND)",
        ] {
            assert_eq!(BackendFailure::parse(text).to_string(), text);
            assert_eq!(BackendWarning::parse(text).to_string(), text);
        }
        assert_eq!(
            BackendFailure::parse("no backend named").kind,
            FailureKind::Reported("no backend named".into())
        );
    }

    #[test]
    fn the_engines_own_profilers_are_written_as_they_always_were() {
        let json: Vec<_> = full().profiler_entries()[1..]
            .iter()
            .map(|(_, v)| v.to_json())
            .collect();
        assert_eq!(
            json,
            [
                r#"["begin: no device"]"#,
                r#"["cycles: Permission denied (os error 13)"]"#,
                r#"{"metrics": ["flops", "bytes_read"], "max_scopes": 10, "kernels": 4}"#,
            ]
        );
        assert_eq!(full().profiler_entries(), full().entries()[..4]);
    }

    #[test]
    fn a_malformed_profiler_entry_is_refused_and_leaves_its_field_empty() {
        let mut report = full();
        let no_reason = Value::List(vec![Value::from("cycles")]);
        let err = report
            .set("unavailable_perf_events", &no_reason)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "trace metadata \"unavailable_perf_events\" should be a list of \"<event>: <reason>\" \
             strings, not [\"cycles\"] (left out of the report)"
        );
        assert!(report.unavailable_perf_events.is_empty());
        let no_kernels: Value = [
            ("metrics", Value::List(vec![Value::from("flops")])),
            ("max_scopes", Value::UInt(10)),
        ]
        .into_iter()
        .collect();
        let err = report.set("scope_profiler", &no_kernels).unwrap_err();
        assert_eq!(
            err.to_string(),
            "trace metadata \"scope_profiler\" should be a {metrics, max_scopes, kernels} object, \
             not {\"metrics\": [\"flops\"], \"max_scopes\": 10} (left out of the report)"
        );
        assert_eq!(report.scope_profiler, None);
        let negative: Value = [
            ("metrics", Value::List(Vec::new())),
            ("max_scopes", Value::Int(-1)),
            ("kernels", Value::UInt(0)),
        ]
        .into_iter()
        .collect();
        assert!(report.set("scope_profiler", &negative).is_err());
        assert!(report.set("scope_profiler", &Value::from("on")).is_err());
        assert_eq!(report.scope_profiler, None);
    }

    #[test]
    fn a_malformed_value_is_refused_and_leaves_its_field_empty() {
        let mut report = full();
        let err = report
            .set("dropped_events", &Value::from("many"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "trace metadata \"dropped_events\" should be a whole number from 0, not \"many\" \
             (left out of the report)"
        );
        assert_eq!(report.dropped_events, None);
        assert!(report.set("refused_links", &Value::Int(-1)).is_err());
        assert_eq!(report.refused_links, None);
        let mixed = Value::List(vec![Value::from("a: x"), Value::Int(1)]);
        assert!(report.set("backend_errors", &mixed).is_err());
        assert!(report.backend_errors.is_empty());
        let entry: Value = [("name", Value::from("x"))].into_iter().collect();
        assert!(report.set("backends", &Value::List(vec![entry])).is_err());
        assert!(report.backends.is_empty());
        assert!(report.set("plugin_errors", &Value::from("one")).is_err());
        assert!(report.plugin_errors.is_empty());
        assert!(report.set("stub_errors", &Value::Bool(true)).is_err());
        assert_eq!(report.stub_errors, None);
        assert!(report.set("stub_error_messages", &mixed).is_err());
        assert!(report.stub_error_messages.is_empty());
        assert!(report.set("trace_id", &Value::from("x")).is_err());
    }
}
