//! The merge: turns what the recorder and the backends produced into the [`Trace`] — the one
//! stage between recording and the writers, so every source of device data is treated alike.
//!
//! In order: the host recording with the process's identity ([`identity`]) and rows; then,
//! per backend, the check of its links to host ops ([`links`], through the host ops' side
//! tables, [`host_index`], which finds them by thread and time through [`host_ranges`]), its
//! rows, metadata and device properties, its args for host
//! ranges, and its activities and counter samples gathered ([`merged`]): filtered to the
//! capture window ([`window`]) and the selection, linked by flows ([`flows`]), projected into
//! user ranges ([`projection`]) and, for kernels with scope-profiler metrics, given their
//! args and counter square waves (`scope`); then the default rows ([`rows`]); finally the
//! time order and the span. What the session says about the trace (drops, what each backend
//! contributed, failures, warnings) goes into its typed [health](crate::trace::SessionHealth).

mod flows;
mod host_index;
mod host_ranges;
mod identity;
mod links;
mod merged;
mod projection;
mod rows;
mod window;

use std::cmp::Reverse;
use std::sync::atomic::{AtomicI64, Ordering};

use super::backends::{Backends, Handover};
use super::scope::ScopeProfiler;
use super::toggles::Switched;
use crate::clock;
use crate::config::Config;
use crate::keys::{metadata, name};
use crate::record::HostRecording;
use crate::Value;
use crate::{Activity, ActivitySet, ActivityType};
use crate::{BackendWarning, Contribution, WarningKind};
use crate::{ProcessRow, Span, ThreadRow, Trace, Window};
use host_index::HostIndex;
pub(crate) use identity::host_name;
use identity::{add_environment_metadata, new_trace_id, process_name};
use merged::Merged;
use window::Captured;

/// The span every host recording is written under (PyTorch writes `PyTorch Profiler`).
pub(crate) const SPAN_NAME: &str = "omniprof";

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
    /// What `toggle_collection` left out, by type and time.
    pub(crate) toggled: Switched,
    pub(crate) config: &'a Config,
}

/// The trace of a stopped session: its host recording merged with what its backends deliver.
pub(crate) fn trace(recorded: Recorded<'_>, mut backends: Backends) -> Trace {
    merge(recorded, &mut backends, Handover::Final)
}

/// The trace of a flight recorder's window: its host recording merged with the window of
/// each backend that records continuously, which go on recording.
pub(crate) fn window_trace(recorded: Recorded<'_>, backends: &mut Backends) -> Trace {
    merge(recorded, backends, Handover::Window)
}

fn merge(recorded: Recorded<'_>, backends: &mut Backends, handover: Handover) -> Trace {
    let Recorded {
        host,
        pid,
        window,
        warm_start_ns,
        selection,
        toggled,
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
    // The plugin libraries the environment named that take no part, found once per process.
    trace.health.plugin_errors = crate::plugin::env_plugin_rejections().to_vec();
    trace.health.dropped_events = Some(host.dropped_events);
    if host.dropped_events > 0 {
        log::warn!(
            "omniprof: {} host events were dropped: a thread reached its cap of {} records \
             (OMNIPROF_MAX_HOST_RECORDS_PER_THREAD)",
            host.dropped_events,
            config.max_host_records_per_thread()
        );
    }
    if host.dropped_names > 0 {
        trace.health.dropped_names = Some(host.dropped_names);
        log::warn!(
            "omniprof: {} range names did not fit in the name table; their ranges are named \
             \"<name table full>\"",
            host.dropped_names
        );
    }
    if host.unfinished_ranges > 0 {
        trace.health.unfinished_ranges = Some(host.unfinished_ranges);
    }
    trace.set_metadata(
        metadata::CLOCK_SOURCE,
        Value::from(clock::clock_source().name()),
    );
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
    // Kept aside: backends link by thread and time to ops the selection leaves out too, as
    // they do by the correlation ids pushed.
    let mut left_out_ranges = Vec::new();
    trace.activities.retain(|a| {
        let keep = selection.enabled(a.kind);
        if !keep && host_ranges::is_range(a) {
            left_out_ranges.push(a.clone());
        }
        keep
    });
    merge_backends(
        &mut trace,
        backends,
        handover,
        left_out_ranges,
        selection,
        &toggled,
        config,
        warm_start_ns,
        pid,
    );
    toggled.leave_out(&mut trace);
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
#[allow(clippy::too_many_arguments)]
fn merge_backends(
    trace: &mut Trace,
    backends: &mut Backends,
    handover: Handover,
    left_out_ranges: Vec<Activity>,
    selection: ActivitySet,
    toggled: &Switched,
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
        HostIndex::new(&trace.activities, left_out_ranges)
    };
    let (delivered, errors) = backends.deliver(
        handover,
        &host.view(&trace.activities),
        window.window,
        window.warm_start_ns,
        &mut trace.health,
    );
    let mut merged = Merged::new(
        &trace.activities,
        selection
            .enabled(ActivityType::XpuScopeProfiler)
            .then(|| ScopeProfiler::new(config)),
        toggled.clone(),
    );
    let mut warnings = Vec::new();
    let (mut refused_links, mut window_cut_links) = (0, 0);
    let mut device_type = None;
    let host_has_collectives = !delivered.is_empty()
        && trace
            .activities
            .iter()
            .any(|a| &*a.name == name::RECORD_PARAM_COMMS);
    for mut d in delivered {
        let checked = links::refuse_foreign_links(
            &mut d.output.activities,
            &host.view(&trace.activities),
            host_pid,
            window.window,
        );
        links::copy_collective_fields(
            &mut d.output.activities,
            &host.view(&trace.activities),
            host_has_collectives,
        );
        window_cut_links += checked.window_cut;
        if checked.refused > 0 {
            refused_links += checked.refused;
            warnings.push(BackendWarning {
                backend: d.name.clone(),
                kind: WarningKind::RefusedLinks {
                    count: checked.refused,
                },
            });
        }
        warnings.extend(d.warnings.into_iter().map(|w| BackendWarning {
            backend: d.name.clone(),
            kind: WarningKind::Reported(w),
        }));
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
            trace.health.backends.push(Contribution {
                name: d.name,
                activities,
                out_of_window: outside.count,
                before_ns: outside.before_ns,
                after_ns: outside.after_ns,
            });
        }
    }
    merged.finish(trace);
    rows::add_default_rows(trace, host_pid);
    trace.health.backend_errors = errors;
    if let Some(device_type) = device_type {
        trace.set_metadata(metadata::DEVICE_TYPE, device_type);
    }
    trace.health.refused_links = (refused_links > 0).then_some(refused_links);
    trace.health.window_cut_links = (window_cut_links > 0).then_some(window_cut_links);
    for w in &warnings {
        log::warn!("omniprof: {w}");
    }
    trace.health.backend_warnings = warnings;
}

/// Time order, enclosing ranges before what they enclose (writers and analyses rely on it).
fn sort_activities(trace: &mut Trace) {
    trace
        .activities
        .sort_by_key(|a| (a.start_ns, Reverse(a.end_ns)));
}
