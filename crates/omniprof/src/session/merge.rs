//! The merge: turns what the recorder and the backends produced into the [`Trace`] — the one
//! stage between recording and the writers, so every source of device data is treated alike.
//!
//! In order: the host recording with the environment's metadata and rows; then, per backend,
//! its rows, metadata and device properties, its args for host ranges, its counter samples
//! filtered to the capture window and the selection, and its activities filtered alike,
//! linked by flows (in a namespace of its own), projected into user ranges and, for kernels
//! with scope-profiler metrics, given their args and counter square waves (`scope`); then
//! the default rows, the drop counts, what each backend contributed (`backends`) and the
//! errors (`backend_errors`); finally the time order and the span.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicI64, Ordering};

use super::backends::{Backends, Collected};
use super::scope::ScopeProfiler;
use crate::activity::{Activity, ActivityClass, ActivitySet, ActivityType, Flow, FlowKind};
use crate::backend::{HostOps, ScopeMetric};
use crate::clock;
use crate::config::Config;
use crate::counter::{CounterValues, Counters};
use crate::hash::FastMap;
use crate::keys::metadata;
use crate::record::HostRecording;
use crate::trace::{ProcessRow, Span, ThreadRow, Trace, Window};
use crate::value::Value;

/// The span every host recording is written under (PyTorch writes `PyTorch Profiler`).
pub const SPAN_NAME: &str = "omniprof";

/// Flow ids of backend `k` are offset by `(k + 1) << FLOW_NAMESPACE_SHIFT`, so two backends
/// that both count correlation ids from 1 cannot draw arrows into each other's work, nor into
/// the host's own `fwdbwd` arrows (numbered from 1 by the recorder). The result stays below
/// 2^53, exact in a JSON double.
const FLOW_NAMESPACE_SHIFT: u32 = 44;
/// Default device rows sort after the host (Kineto's offset).
const DEVICE_SORT_OFFSET: i64 = 5_000_000;

/// The keys of a [`metadata::BACKENDS`] entry.
const NAME_KEY: &str = "name";
const ACTIVITIES_KEY: &str = "activities";
const OUT_OF_WINDOW_KEY: &str = "out_of_window";
const BEFORE_KEY: &str = "out_of_window_before_ns";
const AFTER_KEY: &str = "out_of_window_after_ns";

/// Traces produced so far in this process: the span's iteration number.
static ITERATION: AtomicI64 = AtomicI64::new(0);

/// What a stopped session recorded on the host.
pub(crate) struct Recorded<'a> {
    pub(crate) host: HostRecording,
    /// The host process: the pid of the host rows.
    pub(crate) pid: i64,
    pub(crate) window: Window,
    /// When the backends started, if they warmed up before the window opened.
    pub(crate) warm_start_ns: Option<i64>,
    pub(crate) selection: ActivitySet,
    pub(crate) config: &'a Config,
}

/// The trace of a stopped session: its host recording merged with what its backends deliver.
pub(crate) fn trace(recorded: Recorded<'_>, backends: Backends) -> Trace {
    let Recorded {
        host,
        pid,
        window,
        warm_start_ns,
        selection,
        config,
    } = recorded;
    let mut trace = Trace::new(window.start_ns, window.end_ns);
    add_environment_metadata(&mut trace);
    trace.set_metadata(
        metadata::TRACE_ID,
        Value::from(match config.trace_id() {
            "" => new_trace_id(),
            id => id.to_owned(),
        }),
    );
    trace.set_metadata(metadata::HOST_NAME, Value::from(host_name()));
    let rejected = crate::plugin::env_rejections();
    if !rejected.is_empty() {
        let list = rejected.iter().map(|r| Value::from(r.as_str())).collect();
        trace.set_metadata(metadata::PLUGIN_ERRORS, Value::List(list));
    }
    trace.set_metadata(metadata::DROPPED_EVENTS, Value::UInt(host.dropped_events));
    if host.dropped_events > 0 {
        log::warn!(
            "omniprof: {} host events were dropped: a thread reached its cap of {} records \
             (OMNIPROF_MAX_HOST_RECORDS_PER_THREAD)",
            host.dropped_events,
            config.max_host_records_per_thread()
        );
    }
    if host.dropped_names > 0 {
        trace.set_metadata(metadata::DROPPED_NAMES, Value::UInt(host.dropped_names));
        log::warn!(
            "omniprof: {} range names did not fit in the name table; their ranges are named \
             \"<name table full>\"",
            host.dropped_names
        );
    }
    if host.unfinished_ranges > 0 {
        trace.set_metadata(
            metadata::UNFINISHED_RANGES,
            Value::UInt(host.unfinished_ranges),
        );
    }
    trace.set_metadata(metadata::CLOCK_SOURCE, Value::from(clock::source().name()));
    trace.add_process(ProcessRow {
        pid,
        name: process_name(),
        label: "CPU".to_owned(),
        sort_index: pid,
    });
    for row in host.threads {
        trace.add_thread(row);
    }
    trace.activities = host.activities;
    trace.activities.retain(|a| selection.enabled(a.kind));
    merge_backends(&mut trace, backends, selection, config, warm_start_ns, pid);
    sort_activities(&mut trace);
    trace.spans.push(Span {
        name: SPAN_NAME.to_owned(),
        prefix: String::new(),
        iteration: ITERATION.fetch_add(1, Ordering::Relaxed),
        start_ns: window.start_ns,
        end_ns: window.end_ns,
        op_count: 0,
    });
    trace
}

/// Merges every backend's delivery into `trace`, whose activities are the host recording.
fn merge_backends(
    trace: &mut Trace,
    backends: Backends,
    selection: ActivitySet,
    config: &Config,
    warm_start_ns: Option<i64>,
    host_pid: i64,
) {
    let window = Captured {
        window: trace.window,
        warm_start_ns,
    };
    // A session without backends never needs the index.
    let host = if backends.is_empty() {
        HostIndex::default()
    } else {
        HostIndex::new(&trace.activities)
    };
    let (delivered, errors) = backends.deliver(
        &host.view(&trace.activities),
        window.window,
        window.warm_start_ns,
    );
    let mut merged = Merged {
        scope: selection
            .enabled(ActivityType::XpuScopeProfiler)
            .then(|| ScopeProfiler::new(config)),
        ..Merged::default()
    };
    let mut contributions = Vec::new();
    let mut warnings = Vec::new();
    let mut refused_links = 0;
    let mut device_type = None;
    for mut d in delivered {
        let refused = refuse_foreign_links(
            &mut d.output.activities,
            &host.view(&trace.activities),
            host_pid,
        );
        if refused > 0 {
            refused_links += refused;
            warnings.push(format!(
                "{}: {refused} events unlinked from host ops: a runtime or driver event with \
                 their id lies outside that op's time on its thread (an event's id must be \
                 the correlation id the host pushed)",
                d.name
            ));
        }
        warnings.extend(d.warnings.iter().map(|w| format!("{}: {w}", d.name)));
        for device in d.devices {
            trace.add_process(ProcessRow {
                pid: device.id,
                name: device.name,
                label: device.label,
                sort_index: device.sort_index,
            });
        }
        for resource in d.resources {
            trace.add_thread(ThreadRow {
                pid: resource.device_id,
                tid: resource.id,
                name: resource.name,
                sort_index: resource.sort_index,
            });
        }
        let mut declared_type = None;
        for (key, value) in d.metadata {
            if key == metadata::DEVICE_TYPE {
                declared_type = Some(value);
            } else {
                trace.set_metadata(key, value);
            }
        }
        let timed_host_ranges = !d.output.host_args.is_empty();
        for p in d.properties {
            if !trace.device_properties.contains(&p) {
                trace.device_properties.push(p);
            }
        }
        for (correlation, key, value) in std::mem::take(&mut d.output.host_args) {
            if let Some(&i) = host.by_correlation.get(&correlation) {
                trace.activities[i].args.push((key, value));
            }
        }
        let (activities, outside) = merged.add(
            d.index,
            d.output,
            &d.scope_metrics,
            window,
            selection,
            &d.name,
        );
        // The device the trace is about is the first that produced data: a backend that
        // took part but recorded nothing does not name it.
        if device_type.is_none() && (activities > 0 || timed_host_ranges) {
            device_type = Some(declared_type.unwrap_or_else(|| Value::from(d.name.as_str())));
        }
        // A session configured for no activity type (one living on the host ranges, as the
        // stubs do) delivers none, so it has no entry.
        if !d.share.is_empty() {
            contributions.push(Contribution {
                name: d.name,
                activities,
                out_of_window: outside.count,
                before_ns: outside.before_ns,
                after_ns: outside.after_ns,
            });
        }
    }
    merged.finish(trace, host_pid);
    if !contributions.is_empty() {
        let list = contributions.iter().map(Contribution::to_value).collect();
        trace.set_metadata(metadata::BACKENDS, Value::List(list));
    }
    if !errors.is_empty() {
        let list = errors.into_iter().map(Value::from).collect();
        trace.set_metadata(metadata::BACKEND_ERRORS, Value::List(list));
    }
    if let Some(device_type) = device_type {
        trace.set_metadata(metadata::DEVICE_TYPE, device_type);
    }
    if refused_links > 0 {
        trace.set_metadata(metadata::REFUSED_LINKS, Value::UInt(refused_links));
    }
    if !warnings.is_empty() {
        for w in &warnings {
            log::warn!("omniprof: {w}");
        }
        let list = warnings.into_iter().map(Value::from).collect();
        trace.set_metadata(metadata::BACKEND_WARNINGS, Value::List(list));
    }
}

/// How far a runtime call may seem to stick out of the host op that made it: the host's
/// times are converted from the recording clock, the backend's read from the wall clock.
const LINK_SLACK_NS: i64 = 5_000;

/// Unlinks one backend's events from host ops they cannot belong to, and returns how many
/// it unlinked. A runtime or driver call runs inside the op that made it, on its thread: one
/// linked to an op it lies outside of (a backend passing its own ids off as the host's)
/// proves that link wrong, and with it every event of this backend linked to that op.
fn refuse_foreign_links(activities: &mut [Activity], host: &HostView<'_>, host_pid: i64) -> u64 {
    let inside = |a: &Activity, op: &Activity| {
        op.start_ns - LINK_SLACK_NS <= a.start_ns
            && a.end_ns <= op.end_ns + LINK_SLACK_NS
            && (a.device != host_pid || a.resource == op.resource)
    };
    let refused: FastMap<u64, ()> = activities
        .iter()
        .filter(|a| {
            matches!(
                a.kind.class(),
                Some(ActivityClass::Runtime | ActivityClass::Driver)
            )
        })
        .filter_map(|a| {
            let id = a.linked_correlation?;
            let op = host.get(id)?;
            (!inside(a, op)).then_some((id, ()))
        })
        .collect();
    if refused.is_empty() {
        return 0;
    }
    let mut count = 0;
    for a in activities {
        if a.linked_correlation
            .is_some_and(|id| refused.contains_key(&id))
        {
            a.linked_correlation = None;
            count += 1;
        }
    }
    count
}

/// A backend's activities outside the capture window: how many, and how far the farthest lay
/// before the window's start and after its end (what `omniprof plugins check` words its
/// warning by: microseconds at an edge, or decades from a clock that is not the host's).
#[derive(Clone, Copy, Debug, Default)]
struct Outside {
    count: u64,
    before_ns: u64,
    after_ns: u64,
}

impl Outside {
    fn add(&mut self, a: &Activity, window: Window) {
        let before = window.start_ns.saturating_sub(a.start_ns);
        let after = a.end_ns.saturating_sub(window.end_ns);
        self.before_ns = self.before_ns.max(u64::try_from(before).unwrap_or(0));
        self.after_ns = self.after_ns.max(u64::try_from(after).unwrap_or(0));
    }
}

/// One backend's entry in a trace's `backends` metadata: how many of its activities the trace
/// kept, how many fell outside the capture window, and how far: the farthest start before
/// the window's start (`before_ns`) and end after its end (`after_ns`), 0 when none; the
/// two are written only when not 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    pub name: String,
    pub activities: u64,
    pub out_of_window: u64,
    pub before_ns: u64,
    pub after_ns: u64,
}

impl Contribution {
    /// The entries of `trace`'s `backends` metadata, in order (none when it has none).
    pub fn of(trace: &Trace) -> Vec<Contribution> {
        let Some(Value::List(entries)) = trace.metadata(metadata::BACKENDS) else {
            return Vec::new();
        };
        let count = |entry: &Value, key| {
            let n = entry.get(key)?.as_i64()?;
            u64::try_from(n).ok()
        };
        entries
            .iter()
            .filter_map(|entry| {
                Some(Contribution {
                    name: entry.get(NAME_KEY)?.as_str()?.to_owned(),
                    activities: count(entry, ACTIVITIES_KEY)?,
                    out_of_window: count(entry, OUT_OF_WINDOW_KEY)?,
                    before_ns: count(entry, BEFORE_KEY).unwrap_or(0),
                    after_ns: count(entry, AFTER_KEY).unwrap_or(0),
                })
            })
            .collect()
    }

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
}

/// Host ops and user ranges by correlation id.
#[derive(Default)]
struct HostIndex {
    by_correlation: FastMap<u64, usize>,
}

impl HostIndex {
    fn new(host: &[Activity]) -> Self {
        let by_correlation = host
            .iter()
            .enumerate()
            .filter(|(_, a)| a.correlation != 0)
            .map(|(i, a)| (a.correlation, i))
            .collect();
        Self { by_correlation }
    }

    fn view<'a>(&'a self, host: &'a [Activity]) -> HostView<'a> {
        HostView { index: self, host }
    }
}

struct HostView<'a> {
    index: &'a HostIndex,
    host: &'a [Activity],
}

impl HostOps for HostView<'_> {
    fn get(&self, correlation: u64) -> Option<&Activity> {
        self.index
            .by_correlation
            .get(&correlation)
            .map(|&i| &self.host[i])
    }
}

/// A user range projected onto one device stream.
struct Projection {
    device: i64,
    stream: i64,
    user: u64,
    start_ns: i64,
    end_ns: i64,
}

#[derive(Default)]
struct Merged {
    activities: Vec<Activity>,
    counters: Counters,
    /// Set when the trace enables the scope profiler.
    scope: Option<ScopeProfiler>,
    projections: FastMap<(i64, i64, u64), Projection>,
    out_of_window: u64,
    out_of_window_samples: u64,
    warmup: u64,
    duplicate_flow_starts: u64,
}

/// The capture window, and the warm-up before it.
#[derive(Clone, Copy)]
struct Captured {
    window: Window,
    warm_start_ns: Option<i64>,
}

impl Captured {
    /// Started during warm-up: before the window, not before the backends started.
    fn in_warmup(&self, a: &Activity) -> bool {
        a.start_ns < self.window.start_ns && self.warm_start_ns.is_some_and(|w| a.start_ns >= w)
    }

    fn contains(&self, a: &Activity) -> bool {
        a.start_ns >= self.window.start_ns && a.end_ns <= self.window.end_ns
    }

    /// Where a counter sample at `ts` stands: kept, warm-up or out of the window.
    fn place(&self, ts: i64) -> Placed {
        if ts < self.window.start_ns && self.warm_start_ns.is_some_and(|w| ts >= w) {
            Placed::Warmup
        } else if ts < self.window.start_ns || ts > self.window.end_ns {
            Placed::Out
        } else {
            Placed::In
        }
    }
}

enum Placed {
    In,
    Warmup,
    Out,
}

/// Device-side work a launch can start a flow to.
fn is_launched_work(kind: ActivityType) -> bool {
    matches!(
        kind,
        ActivityType::GpuMemcpy | ActivityType::GpuMemset | ActivityType::CudaSync
    ) || kind.class() == Some(ActivityClass::Kernel)
}

fn is_launch(kind: ActivityType) -> bool {
    kind.class() == Some(ActivityClass::Runtime)
}

impl Merged {
    /// Filters one backend's activities to the window and the selection, draws its flows and
    /// collects its user-range projections.
    fn add(
        &mut self,
        backend: u64,
        output: Collected,
        offered: &[ScopeMetric],
        window: Captured,
        selection: ActivitySet,
        name: &str,
    ) -> (u64, Outside) {
        let Collected {
            mut activities,
            user_links,
            counters,
            kernel_metrics,
            warmup,
            ..
        } = output;
        self.warmup += warmup;
        let namespace = (backend + 1) << FLOW_NAMESPACE_SHIFT;
        let mut user_of: FastMap<usize, u64> = user_links.into_iter().collect();
        let mut metrics_of: FastMap<usize, CounterValues> = kernel_metrics.into_iter().collect();
        self.add_counters(counters, window, selection);
        // A kernel measured by the scope profiler is kept for its metrics.
        let scope = self.scope.is_some();
        let measured = |i: usize| scope && metrics_of.contains_key(&i);
        let mut keep = vec![true; activities.len()];
        let mut out = 0;
        let mut outside = Outside::default();
        for (i, a) in activities.iter().enumerate() {
            if window.in_warmup(a) {
                keep[i] = false;
                self.warmup += 1;
            } else if !window.contains(a) {
                keep[i] = false;
                out += 1;
                outside.add(a, window.window);
            } else if !(selection.enabled(a.kind) || measured(i)) {
                keep[i] = false;
            }
        }
        if out > 0 {
            log::warn!(
                "omniprof: {name}: {out} activities outside the capture window were dropped"
            );
        }
        self.out_of_window += out;

        // Flows: the launch with correlation c starts the arrow, the work with c ends it.
        let mut launches: FastMap<u64, usize> = FastMap::default();
        let mut has_work: FastMap<u64, ()> = FastMap::default();
        for (i, a) in activities.iter().enumerate() {
            // Activities that bring their own flows take no part in drawing them.
            if !keep[i] || a.correlation == 0 || a.flow.is_some() {
                continue;
            }
            if is_launch(a.kind) {
                match launches.entry(a.correlation) {
                    Entry::Vacant(v) => {
                        v.insert(i);
                    }
                    Entry::Occupied(_) => self.duplicate_flow_starts += 1,
                }
            } else if is_launched_work(a.kind) {
                has_work.insert(a.correlation, ());
            }
        }
        for (i, a) in activities.iter_mut().enumerate() {
            if !keep[i] {
                continue;
            }
            if let Some(flow) = a.flow.as_mut() {
                flow.id |= namespace;
                continue;
            }
            let c = a.correlation;
            let starts =
                is_launch(a.kind) && launches.get(&c) == Some(&i) && has_work.contains_key(&c);
            let ends = is_launched_work(a.kind) && launches.contains_key(&c);
            if starts || ends {
                a.flow = Some(Flow {
                    id: namespace | c,
                    kind: FlowKind::Ac2g,
                    start: starts,
                });
            }
        }

        let project = selection.enabled(ActivityType::GpuUserAnnotation);
        for (i, mut a) in activities.drain(..).enumerate() {
            if !keep[i] {
                continue;
            }
            if let (Some(scope), Some(values)) = (self.scope.as_mut(), metrics_of.remove(&i)) {
                scope.kernel(&mut a, values, offered, &mut self.counters);
            }
            if let Some(user) = user_of.remove(&i).filter(|_| project) {
                let p = self
                    .projections
                    .entry((a.device, a.resource, user))
                    .or_insert(Projection {
                        device: a.device,
                        stream: a.resource,
                        user,
                        start_ns: a.start_ns,
                        end_ns: a.end_ns,
                    });
                p.start_ns = p.start_ns.min(a.start_ns);
                p.end_ns = p.end_ns.max(a.end_ns);
            }
            self.activities.push(a);
        }
        outside.count = out;
        (keep.iter().filter(|&&k| k).count() as u64, outside)
    }

    /// Keeps a backend's counter samples that lie in the window and whose type the trace
    /// selected; counts the others. (Apart from activities: a sampler runs until its backend
    /// stops, after the window closed, so samples past the window are expected.)
    fn add_counters(&mut self, mut counters: Counters, window: Captured, selection: ActivitySet) {
        let (mut out, mut warmup) = (0, 0);
        counters.retain(|_, sample| match window.place(sample.ts_ns) {
            Placed::In => true,
            Placed::Warmup => {
                warmup += 1;
                false
            }
            Placed::Out => {
                out += 1;
                false
            }
        });
        counters.retain(|track, _| selection.enabled(track.kind));
        self.warmup += warmup;
        self.out_of_window_samples += out;
        self.counters.append(counters);
    }

    /// Adds the merged activities, the projections, default rows and the drop counts.
    fn finish(self, trace: &mut Trace, host_pid: i64) {
        let names: FastMap<u64, &Activity> = {
            let wanted: FastMap<u64, ()> =
                self.projections.values().map(|p| (p.user, ())).collect();
            trace
                .activities
                .iter()
                .filter(|a| wanted.contains_key(&a.correlation))
                .map(|a| (a.correlation, a))
                .collect()
        };
        let mut projected: Vec<Activity> = self
            .projections
            .into_values()
            .filter_map(|p| {
                let range = names.get(&p.user)?;
                let mut a = Activity::new(
                    ActivityType::GpuUserAnnotation,
                    range.name.clone(),
                    p.device,
                    p.stream,
                    p.start_ns,
                    p.end_ns,
                );
                a.correlation = p.user;
                Some(a)
            })
            .collect();
        drop(names);
        trace.activities.extend(self.activities);
        trace.activities.append(&mut projected);
        trace.counters.append(self.counters);
        trace.counters.sort();
        if !trace.counters.is_empty() {
            trace.set_metadata(
                metadata::COUNTER_SAMPLES,
                Value::UInt(trace.counters.samples() as u64),
            );
        }
        if self.out_of_window_samples > 0 {
            trace.set_metadata(
                metadata::OUT_OF_WINDOW_COUNTER_SAMPLES,
                Value::UInt(self.out_of_window_samples),
            );
        }
        if trace.counters.dropped_values() > 0 {
            log::warn!(
                "omniprof: {} counter values that were not finite numbers were dropped",
                trace.counters.dropped_values()
            );
            trace.set_metadata(
                metadata::DROPPED_COUNTER_VALUES,
                Value::UInt(trace.counters.dropped_values()),
            );
        }
        if let Some(scope) = self.scope {
            scope.finish(trace);
        }
        add_default_rows(trace, host_pid);
        trace.set_metadata(
            metadata::OUT_OF_WINDOW_EVENTS,
            Value::UInt(self.out_of_window),
        );
        if self.warmup > 0 {
            trace.set_metadata(metadata::WARMUP_EVENTS, Value::UInt(self.warmup));
        }
        if self.duplicate_flow_starts > 0 {
            log::warn!(
                "omniprof: {} duplicate flow starts (two launches with one correlation id)",
                self.duplicate_flow_starts
            );
            trace.set_metadata(
                metadata::DUPLICATE_FLOW_STARTS,
                Value::UInt(self.duplicate_flow_starts),
            );
        }
    }
}

/// Rows for devices and streams that produced events but were described by no session.
fn add_default_rows(trace: &mut Trace, host_pid: i64) {
    let mut devices: FastMap<i64, ()> = trace.processes.iter().map(|p| (p.pid, ())).collect();
    let mut streams: FastMap<(i64, i64), ()> =
        trace.threads.iter().map(|t| ((t.pid, t.tid), ())).collect();
    let mut rows = (Vec::new(), Vec::new());
    for a in trace.activities.iter().filter(|a| a.device != host_pid) {
        if devices.insert(a.device, ()).is_none() {
            rows.0.push(device_row(a.device));
        }
        if streams.insert((a.device, a.resource), ()).is_none() {
            rows.1.push(ThreadRow {
                pid: a.device,
                tid: a.resource,
                name: format!("stream {} ", a.resource),
                sort_index: a.resource,
            });
        }
    }
    let counter_devices = trace.counters.series().iter().map(|s| s.track.device);
    for device in counter_devices.filter(|&d| d != host_pid) {
        if devices.insert(device, ()).is_none() {
            rows.0.push(device_row(device));
        }
    }
    trace.processes.extend(rows.0);
    trace.threads.extend(rows.1);
}

/// The row of a device no session described.
fn device_row(device: i64) -> ProcessRow {
    ProcessRow {
        pid: device,
        name: format!("Device {device}"),
        label: format!("GPU {device}"),
        sort_index: device + DEVICE_SORT_OFFSET,
    }
}

/// Time order, enclosing ranges before what they enclose (writers and analyses rely on it).
fn sort_activities(trace: &mut Trace) {
    trace
        .activities
        .sort_by_key(|a| (a.start_ns, Reverse(a.end_ns)));
}

/// `PT_PROFILER_JOB_*` first (trace metadata with the same key wins later), then
/// `distributedInfo`, the first place a `"rank"` key appears, as HTA requires.
fn add_environment_metadata(trace: &mut Trace) {
    for key in [
        "PT_PROFILER_JOB_NAME",
        "PT_PROFILER_JOB_VERSION",
        "PT_PROFILER_JOB_ATTEMPT_INDEX",
    ] {
        if let Ok(v) = std::env::var(key) {
            trace.set_metadata(key, Value::from(v));
        }
    }
    trace.set_metadata(metadata::DISTRIBUTED_INFO, distributed_info());
}

/// Rank and world size from torchrun's `RANK` / `WORLD_SIZE` (rank 0 of 1 otherwise); the
/// JSON writer spells the rank `"rank": <n>`, as HTA scans for.
fn distributed_info() -> Value {
    let read = |key: &str, default: u64| match std::env::var(key) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|_| {
            log::warn!(
                "omniprof: {key}={text:?} is not a non-negative integer; the trace says \
                 {key} {default}"
            );
            default
        }),
        Err(_) => default,
    };
    let rank = read("RANK", 0);
    let world_size = read("WORLD_SIZE", 1).max(rank + 1);
    [
        ("backend", Value::from("")),
        ("rank", Value::UInt(rank)),
        ("world_size", Value::UInt(world_size)),
    ]
    .into_iter()
    .collect()
}

fn process_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "omniprof".to_owned())
}

/// This machine's name (empty when it cannot be read).
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `len` bytes; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// 32 upper-case hex digits, as PyTorch writes `trace_id`.
fn new_trace_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hi = std::collections::hash_map::RandomState::new().build_hasher();
    hi.write_i64(clock::wall_now_ns());
    let mut lo = std::collections::hash_map::RandomState::new().build_hasher();
    lo.write_u32(std::process::id());
    format!("{:016X}{:016X}", hi.finish(), lo.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributed_info_spells_rank_for_hta() {
        let v = distributed_info().to_json();
        assert!(v.contains("\"rank\": "), "{v}");
        assert!(v.contains("\"world_size\": "), "{v}");
    }

    #[test]
    fn trace_ids_are_32_hex_digits() {
        let id = new_trace_id();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
    }
}
