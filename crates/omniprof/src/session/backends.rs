//! The lifecycle of the backend sessions taking part in one trace: configure, start and stop
//! every session, then collect what each one recorded ([`Delivered`]) for the
//! [merge](super::merge).
//!
//! A registered backend that panics or fails in any call is dropped from the trace with its
//! failure ([`BackendFailure`], typed until the trace is written) in the trace's report and
//! the log; the other backends and the host recording are untouched. A backend the session
//! was built with is different only at configure: the caller asked for it, so its failure
//! fails the session instead.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::{
    registered_profilers, ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps,
    ProfilerSession, ResourceInfo, ScopeMetric,
};
use crate::config::Config;
use crate::record::CorrelationListener;
use crate::ActivityType;
use crate::Value;
use crate::Window;
use crate::{Activity, ActivitySet};
use crate::{BackendCall, BackendFailure, FailureKind, SessionHealth};
use crate::{CounterTrack, CounterValues, Counters};

struct Running {
    name: String,
    /// The types it was configured to record.
    share: ActivitySet,
    /// The scope-profiler metrics it offers, when its share includes the scope profiler.
    scope_metrics: Vec<ScopeMetric>,
    session: Box<dyn ProfilerSession>,
    /// It agreed to record continuously for a flight recorder, so it hands windows.
    continuous: bool,
}

/// How the sessions hand over what they recorded ([`Backends::deliver`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handover {
    /// At the end of their trace: each processes all it recorded and is dropped.
    Final,
    /// A flight recorder's window: each session that records continuously hands that
    /// window and goes on; the others are not asked.
    Window,
}

/// The sessions taking part in one trace.
#[derive(Default)]
pub(crate) struct Backends {
    running: Vec<Running>,
    errors: Vec<BackendFailure>,
    /// Activities each session may deliver (`OMNIPROF_MAX_EVENTS_PER_BACKEND`).
    max_events: usize,
}

/// Runs `f`, turning a panic into its message.
fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned())
    })
}

/// Runs `f`, turning an error or a panic into a failure of the backend's call.
fn guarded<T>(
    backend: &str,
    call: BackendCall,
    f: impl FnOnce() -> Result<T, BackendError>,
) -> Result<T, BackendFailure> {
    let kind = match caught(f) {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => FailureKind::Failed {
            call,
            reason: e.to_string(),
        },
        Err(reason) => FailureKind::Panicked { call, reason },
    };
    Err(BackendFailure {
        backend: backend.to_owned(),
        kind,
    })
}

/// What one session handed over at the end of a trace.
pub(crate) struct Delivered {
    pub(crate) name: String,
    /// Its position among the sessions asked to process, which namespaces its flow ids.
    pub(crate) index: u64,
    pub(crate) share: ActivitySet,
    pub(crate) scope_metrics: Vec<ScopeMetric>,
    pub(crate) output: Collected,
    pub(crate) devices: Vec<DeviceInfo>,
    pub(crate) resources: Vec<ResourceInfo>,
    pub(crate) metadata: Vec<(String, Value)>,
    pub(crate) properties: Vec<Value>,
    /// The session's [`warnings`](ProfilerSession::warnings).
    pub(crate) warnings: Vec<String>,
}

/// The sink a session processes into: what it added, as it added it, up to its budget.
/// Activities that started during the warm-up are dropped as they arrive and counted, never
/// charged to the budget: the budget holds the window.
#[derive(Default)]
pub(crate) struct Collected {
    max_events: usize,
    /// Activities past the budget, dropped.
    dropped: u64,
    /// `[warm-up start, window start)`, when the session warmed up ahead of the window.
    warmup_span: Option<(i64, i64)>,
    /// Activities that started during the warm-up, dropped.
    pub(crate) warmup: u64,
    /// Whether the last activity added was kept (kernel metrics follow their kernel).
    last_kept: bool,
    pub(crate) activities: Vec<Activity>,
    /// (index in `activities`, user range correlation id)
    pub(crate) user_links: Vec<(usize, u64)>,
    /// (host range correlation id, key, value)
    pub(crate) host_args: Vec<(u64, Arc<str>, Value)>,
    pub(crate) counters: Counters,
    /// (index in `activities`, the kernel's scope-profiler metric values)
    pub(crate) kernel_metrics: Vec<(usize, CounterValues)>,
}

impl Collected {
    fn new(max_events: usize, warmup_span: Option<(i64, i64)>) -> Self {
        Self {
            max_events,
            warmup_span,
            ..Self::default()
        }
    }

    /// Whether `activity` is kept: not from the warm-up, and within the budget (counting it
    /// as warm-up or dropped when not).
    fn keeps(&mut self, activity: &Activity) -> bool {
        let warm = self
            .warmup_span
            .is_some_and(|(from, to)| (from..to).contains(&activity.start_ns));
        let fits = !warm && self.activities.len() < self.max_events;
        self.warmup += u64::from(warm);
        self.dropped += u64::from(!warm && !fits);
        self.last_kept = fits;
        fits
    }
}

impl ActivitySink for Collected {
    fn add(&mut self, activity: Activity) {
        if self.keeps(&activity) {
            self.activities.push(activity);
        }
    }

    fn add_in_user_range(&mut self, activity: Activity, user_correlation: u64) {
        if self.keeps(&activity) {
            self.user_links
                .push((self.activities.len(), user_correlation));
            self.activities.push(activity);
        }
    }

    fn add_host_arg(&mut self, correlation: u64, key: &str, value: Value) {
        self.host_args.push((correlation, key.into(), value));
    }

    fn add_counter(&mut self, track: &CounterTrack, ts_ns: i64, values: CounterValues) {
        self.counters.add(track, ts_ns, values);
    }

    fn add_kernel_metrics(&mut self, values: CounterValues) {
        if !self.last_kept {
            return;
        }
        if let Some(last) = self.activities.len().checked_sub(1) {
            self.kernel_metrics.push((last, values));
        }
    }
}

/// The error for `SCOPE_PROFILER_METRICS` naming a metric no taking-part backend offers.
fn check_scope_metrics(config: &Config, backends: &Backends) -> Result<(), BackendError> {
    let offering: Vec<&Running> = backends
        .running
        .iter()
        .filter(|r| !r.scope_metrics.is_empty())
        .collect();
    if offering.is_empty() {
        return Ok(());
    }
    let offered = |name: &str| {
        offering
            .iter()
            .any(|r| r.scope_metrics.iter().any(|m| m.name == name))
    };
    let unknown: Vec<&str> = config
        .scope_profiler_metrics()
        .iter()
        .map(String::as_str)
        .filter(|name| !offered(name))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let lists: Vec<String> = offering
        .iter()
        .map(|r| {
            let names: Vec<&str> = r.scope_metrics.iter().map(|m| m.name.as_str()).collect();
            format!("{} offers {}", r.name, names.join(", "))
        })
        .collect();
    Err(BackendError::new(format!(
        "SCOPE_PROFILER_METRICS: unknown metric {}; {}",
        unknown
            .iter()
            .map(|m| format!("{m:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        lists.join("; ")
    )))
}

impl Backends {
    /// Configures the backends of a session: the `requested` ones when the session was built
    /// with some (each must take part: its error is returned), else every registered backend
    /// that supports a selected type.
    pub(crate) fn configure(
        selection: ActivitySet,
        config: &Config,
        requested: Option<&[Arc<dyn ActivityProfiler>]>,
    ) -> Result<Self, BackendError> {
        let mut backends = Self {
            max_events: usize::try_from(config.max_events_per_backend()).unwrap_or(usize::MAX),
            ..Self::default()
        };
        let Some(requested) = requested else {
            backends.configure_each(registered_profilers(), selection, config);
            backends.configure_each(builtin_profilers(), selection, config);
            check_scope_metrics(config, &backends)?;
            return Ok(backends);
        };
        for profiler in requested {
            let share = selection.intersect_enabled(profiler.available_activities());
            let name = profiler.name().to_owned();
            let session = caught(|| profiler.configure(share, config)).map_err(|reason| {
                let kind = FailureKind::Panicked {
                    call: BackendCall::Configure,
                    reason,
                };
                BackendError::new(
                    BackendFailure {
                        backend: name.clone(),
                        kind,
                    }
                    .to_string(),
                )
            })??;
            let metrics = scope_metrics_of(profiler.as_ref(), share);
            backends.add(name, share, metrics, session);
        }
        backends.configure_each(builtin_profilers(), selection, config);
        check_scope_metrics(config, &backends)?;
        Ok(backends)
    }

    /// Configures each of `profilers` that supports a selected type; a failure leaves that
    /// one out of the trace.
    fn configure_each(
        &mut self,
        profilers: Vec<Arc<dyn ActivityProfiler>>,
        selection: ActivitySet,
        config: &Config,
    ) {
        for profiler in profilers {
            let share = selection.intersect_enabled(profiler.available_activities());
            if share.is_empty() {
                continue;
            }
            let name = profiler.name().to_owned();
            match guarded(&name, BackendCall::Configure, || {
                profiler.configure(share, config)
            }) {
                Ok(session) => {
                    let metrics = scope_metrics_of(profiler.as_ref(), share);
                    self.add(name, share, metrics, session);
                }
                Err(e) => self.fail(e),
            }
        }
    }

    fn add(
        &mut self,
        name: String,
        share: ActivitySet,
        scope_metrics: Vec<ScopeMetric>,
        session: Option<Box<dyn ProfilerSession>>,
    ) {
        if let Some(session) = session {
            self.running.push(Running {
                name,
                share,
                scope_metrics,
                session,
                continuous: false,
            });
        }
    }

    fn fail(&mut self, failure: BackendFailure) {
        log::warn!("omniprof: {failure}; the trace goes on without it");
        self.errors.push(failure);
    }

    /// Calls `f` on every session; a session whose call fails is dropped.
    fn each(
        &mut self,
        call: BackendCall,
        mut f: impl FnMut(&mut dyn ProfilerSession) -> Result<(), BackendError>,
    ) {
        let mut kept = Vec::with_capacity(self.running.len());
        for mut r in std::mem::take(&mut self.running) {
            match guarded(&r.name, call, || f(r.session.as_mut())) {
                Ok(()) => kept.push(r),
                Err(e) => {
                    self.fail(e);
                    drop_quietly(r);
                }
            }
        }
        self.running = kept;
    }

    /// The correlation listeners of every session.
    pub(crate) fn listeners(&self) -> Vec<Arc<dyn CorrelationListener>> {
        self.running
            .iter()
            .filter_map(|r| caught(|| r.session.correlation_listener()).ok().flatten())
            .collect()
    }

    pub(crate) fn start(&mut self) {
        self.each(BackendCall::Start, |s| s.start());
    }

    /// Tells every session the capture window opened (see
    /// [`ProfilerSession::window_opened`]).
    pub(crate) fn window_opened(&mut self) {
        self.each(BackendCall::WindowOpened, |s| s.window_opened());
    }

    /// Tells every session which types are switched off (see
    /// [`ProfilerSession::collection_switched`]).
    pub(crate) fn collection_switched(&mut self, off: ActivitySet) {
        self.each(BackendCall::CollectionSwitched, |s| {
            s.collection_switched(off)
        });
    }

    pub(crate) fn stop(&mut self) {
        self.each(BackendCall::Stop, |s| s.stop());
    }

    /// True when no session takes part.
    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Asks every session to record continuously for a flight recorder keeping `window`
    /// ([`ProfilerSession::record_continuously`]); drops those that cannot and returns their
    /// backends' names. A session whose answer panics is dropped as a failure.
    pub(crate) fn keep_continuous(&mut self, window: Duration) -> Vec<String> {
        let mut sitting_out = Vec::new();
        let mut kept = Vec::with_capacity(self.running.len());
        for mut r in std::mem::take(&mut self.running) {
            match guarded(&r.name, BackendCall::RecordContinuously, || {
                Ok(r.session.record_continuously(window))
            }) {
                Ok(true) => {
                    r.continuous = true;
                    kept.push(r);
                }
                Ok(false) => {
                    sitting_out.push(r.name.clone());
                    drop_quietly(r);
                }
                Err(e) => {
                    self.fail(e);
                    drop_quietly(r);
                }
            }
        }
        self.running = kept;
        sitting_out
    }

    /// The names of the sessions that record continuously.
    pub(crate) fn continuous(&self) -> Vec<String> {
        self.running
            .iter()
            .filter(|r| r.continuous)
            .map(|r| r.name.clone())
            .collect()
    }

    /// Takes in `other`'s sessions and failures, after this one's.
    pub(crate) fn join(&mut self, other: Backends) {
        self.running.extend(other.running);
        self.errors.extend(other.errors);
        self.max_events = self.max_events.max(other.max_events);
    }

    /// Has every session hand over what it recorded into a sink of its own and describe
    /// itself (its own fields of `report` among that). [`Handover::Final`]: each processes
    /// its trace and is dropped; [`Handover::Window`]: each continuous session hands the
    /// window and is kept (a session that fails is dropped either way). Returns what each
    /// delivered, in order, and every failure met
    /// (a session's own [`errors`](ProfilerSession::errors) among them, as
    /// [`FailureKind::Reported`]); a kept set remembers only the failures that dropped a
    /// session, so each later window reports them again. With
    /// `warm_start_ns` (the sessions started then, ahead of the window), what started before
    /// the window is dropped and counted as warm-up before the budget is applied.
    pub(crate) fn deliver(
        &mut self,
        handover: Handover,
        host_ops: &dyn HostOps,
        window: Window,
        warm_start_ns: Option<i64>,
        report: &mut SessionHealth,
    ) -> (Vec<Delivered>, Vec<BackendFailure>) {
        let mut delivered = Vec::with_capacity(self.running.len());
        let warmup_span = warm_start_ns.map(|from| (from, window.start_ns));
        // Every failure of this handover in order, and those that drop a session.
        let mut errors = self.errors.clone();
        let mut kept = Vec::new();
        let mut asked = 0;
        for mut r in std::mem::take(&mut self.running) {
            if handover == Handover::Window && !r.continuous {
                kept.push(r);
                continue;
            }
            let mut output = Collected::new(self.max_events, warmup_span);
            let processed = match handover {
                Handover::Final => guarded(&r.name, BackendCall::ProcessTrace, || {
                    r.session.process_trace(&mut output, host_ops, window)
                }),
                Handover::Window => guarded(&r.name, BackendCall::ProcessWindow, || {
                    r.session.process_window(&mut output, host_ops, window)
                }),
            };
            let index = asked;
            asked += 1;
            if let Err(e) = processed {
                self.fail(e.clone());
                errors.push(e);
                drop_quietly(r);
                continue;
            }
            let session = r.session.as_ref();
            let infos = guarded(&r.name, BackendCall::DeviceInfo, || {
                // Filled apart, so that a panic leaves the report as it was.
                let mut own = report.clone();
                session.report(&mut own);
                Ok((
                    session.device_info(),
                    session.resource_infos(),
                    session.metadata(),
                    own,
                    session.device_properties(),
                    session.errors(),
                    session.warnings(),
                ))
            });
            let (devices, resources, metadata, own, properties, reported, warnings) = match infos {
                Ok(infos) => infos,
                Err(e) => {
                    self.fail(e.clone());
                    errors.push(e);
                    drop_quietly(r);
                    continue;
                }
            };
            *report = own;
            let failure = |kind| BackendFailure {
                backend: r.name.clone(),
                kind,
            };
            errors.extend(
                reported
                    .into_iter()
                    .map(|e| failure(FailureKind::Reported(e))),
            );
            if output.dropped > 0 {
                errors.push(failure(FailureKind::OverBudget {
                    dropped: output.dropped,
                    budget: self.max_events as u64,
                }));
            }
            delivered.push(Delivered {
                name: r.name.clone(),
                index,
                share: r.share,
                scope_metrics: r.scope_metrics.clone(),
                output,
                devices,
                resources,
                metadata,
                properties,
                warnings,
            });
            match handover {
                Handover::Final => drop_quietly(r),
                Handover::Window => kept.push(r),
            }
        }
        match handover {
            Handover::Final => self.errors.clear(),
            Handover::Window => self.running = kept,
        }
        (delivered, errors)
    }
}

/// The backends that are part of the engine itself, asked for every trace like the
/// registered ones: the host perf counters.
fn builtin_profilers() -> Vec<Arc<dyn ActivityProfiler>> {
    vec![Arc::new(crate::perf::PerfEventsProfiler)]
}

/// The scope metrics a backend offers, when this trace enables its scope profiler (a
/// panicking list counts as none).
fn scope_metrics_of(profiler: &dyn ActivityProfiler, share: ActivitySet) -> Vec<ScopeMetric> {
    if !share.contains(ActivityType::XpuScopeProfiler) {
        return Vec::new();
    }
    caught(|| profiler.scope_metrics()).unwrap_or_default()
}

/// Drops a session, containing a panic in its destructor.
fn drop_quietly(r: Running) {
    let name = r.name.clone();
    if catch_unwind(AssertUnwindSafe(move || drop(r))).is_err() {
        log::warn!("omniprof: {name}: dropping the session panicked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_EVENTS_KEY;

    #[test]
    fn the_over_budget_failure_names_the_config_key_of_the_budget() {
        let text = format!("{MAX_EVENTS_KEY}=5");
        let config = Config::parse(&text).unwrap();
        assert_eq!(config.max_events_per_backend(), 5);
        let failure = FailureKind::OverBudget {
            dropped: 1,
            budget: 5,
        };
        assert_eq!(
            failure.to_string(),
            format!("1 activities past the budget of 5 per trace dropped ({MAX_EVENTS_KEY})")
        );
    }
}
