//! The engine's side of the backends: configure, start and stop every session, then merge
//! what each one recorded into the trace (the work Kineto does for every child profiler).
//!
//! A backend that panics or fails in any call is dropped from the trace with its error in the
//! metadata and the log; the other backends and the host recording are untouched.

use crate::trace::Window;
use std::collections::hash_map::Entry;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::activity::{Activity, ActivityClass, ActivitySet, ActivityType, Flow, FlowKind};
use crate::backend::{registered_profilers, ActivitySink, BackendError, HostOps, ProfilerSession};
use crate::config::Config;
use crate::hash::FastMap;
use crate::record::CorrelationListener;
use crate::trace::{ProcessRow, ThreadRow, Trace};
use crate::value::Value;

/// Flow ids of backend `k` are offset by `k << FLOW_NAMESPACE_SHIFT`, so two backends that
/// both count correlation ids from 1 cannot draw arrows into each other's work. The result
/// stays below 2^53, exact in a JSON double.
const FLOW_NAMESPACE_SHIFT: u32 = 44;
/// Default device rows sort after the host (Kineto's offset).
const DEVICE_SORT_OFFSET: i64 = 5_000_000;

struct Running {
    name: String,
    session: Box<dyn ProfilerSession>,
}

/// The sessions taking part in one trace.
#[derive(Default)]
pub(crate) struct Backends {
    running: Vec<Running>,
    errors: Vec<String>,
}

/// Runs `f`, turning an error or a panic into a message that names the backend and the call.
fn guarded<T>(
    backend: &str,
    call: &str,
    f: impl FnOnce() -> Result<T, BackendError>,
) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{backend}: {call} failed: {e}")),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(format!("{backend}: {call} panicked: {what}"))
        }
    }
}

impl Backends {
    /// Configures every registered backend that supports an enabled type.
    pub(crate) fn configure(selection: ActivitySet, config: &Config) -> Self {
        let mut backends = Self::default();
        for profiler in registered_profilers() {
            let share = selection.intersect_enabled(profiler.available_activities());
            if share.is_empty() {
                continue;
            }
            let name = profiler.name().to_owned();
            match guarded(&name, "configure", || profiler.configure(share, config)) {
                Ok(Some(session)) => backends.running.push(Running { name, session }),
                Ok(None) => {}
                Err(e) => backends.fail(e),
            }
        }
        backends
    }

    fn fail(&mut self, message: String) {
        log::warn!("omniprof: {message}; the trace goes on without it");
        self.errors.push(message);
    }

    /// Calls `f` on every session; a session whose call fails is dropped.
    fn each(
        &mut self,
        call: &str,
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
            .filter_map(|r| {
                catch_unwind(AssertUnwindSafe(|| r.session.correlation_listener()))
                    .ok()
                    .flatten()
            })
            .collect()
    }

    pub(crate) fn start(&mut self) {
        self.each("start", |s| s.start());
    }

    pub(crate) fn stop(&mut self) {
        self.each("stop", |s| s.stop());
    }

    /// Merges every session's activities, rows, metadata and errors into `trace`, whose
    /// activities are the host recording.
    pub(crate) fn process(mut self, trace: &mut Trace, selection: ActivitySet) {
        let window = trace.window;
        // Built on first use: a session without running backends never needs it.
        let mut host: Option<HostIndex> = None;
        let mut merged = Merged::default();
        let mut contributions = Vec::new();
        for (index, mut r) in std::mem::take(&mut self.running).into_iter().enumerate() {
            let mut sink = CollectSink::default();
            let host = host.get_or_insert_with(|| HostIndex::new(&trace.activities));
            let processed = guarded(&r.name, "process_trace", || {
                r.session
                    .process_trace(&mut sink, &host.view(&trace.activities), window)
            });
            if let Err(e) = processed {
                self.fail(e);
                drop_quietly(r);
                continue;
            }
            let session = r.session.as_ref();
            let infos = guarded(&r.name, "device info", || {
                Ok((
                    session.device_info(),
                    session.resource_infos(),
                    session.metadata(),
                    session.device_properties(),
                    session.errors(),
                ))
            });
            let (devices, resources, metadata, properties, errors) = match infos {
                Ok(infos) => infos,
                Err(e) => {
                    self.fail(e);
                    drop_quietly(r);
                    continue;
                }
            };
            for device in devices {
                trace.add_process(ProcessRow {
                    pid: device.id,
                    name: device.name,
                    label: device.label,
                    sort_index: device.sort_index,
                });
            }
            for resource in resources {
                trace.add_thread(ThreadRow {
                    pid: resource.device_id,
                    tid: resource.id,
                    name: resource.name,
                    sort_index: resource.sort_index,
                });
            }
            for (key, value) in metadata {
                trace.set_metadata(key, value);
            }
            for p in properties {
                if !trace.device_properties.contains(&p) {
                    trace.device_properties.push(p);
                }
            }
            for e in errors {
                self.errors.push(format!("{}: {e}", r.name));
            }
            let (kept, out) = merged.add(index as u64, sink, window, selection, &r.name);
            contributions.push(serde_json::json!({
                "name": r.name,
                "activities": kept,
                "out_of_window": out,
            }));
            drop_quietly(r);
        }
        merged.finish(trace);
        if !contributions.is_empty() {
            let list = serde_json::Value::Array(contributions).to_string();
            trace.set_metadata("backends", Value::json(list));
        }
        if !self.errors.is_empty() {
            let list = self
                .errors
                .iter()
                .map(|e| Value::from(e.as_str()))
                .collect();
            trace.set_metadata("backend_errors", Value::List(list));
        }
    }
}

/// Drops a session, containing a panic in its destructor.
fn drop_quietly(r: Running) {
    let name = r.name.clone();
    if catch_unwind(AssertUnwindSafe(move || drop(r))).is_err() {
        log::warn!("omniprof: {name}: dropping the session panicked");
    }
}

/// Host ops and user ranges by correlation id.
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

#[derive(Default)]
struct CollectSink {
    activities: Vec<Activity>,
    /// (index in `activities`, user range correlation id)
    user_links: Vec<(usize, u64)>,
}

impl ActivitySink for CollectSink {
    fn add(&mut self, activity: Activity) {
        self.activities.push(activity);
    }

    fn add_in_user_range(&mut self, activity: Activity, user_correlation: u64) {
        self.user_links
            .push((self.activities.len(), user_correlation));
        self.activities.push(activity);
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
    projections: FastMap<(i64, i64, u64), Projection>,
    out_of_window: u64,
    duplicate_flow_starts: u64,
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
        sink: CollectSink,
        window: Window,
        selection: ActivitySet,
        name: &str,
    ) -> (u64, u64) {
        let CollectSink {
            mut activities,
            user_links,
        } = sink;
        let namespace = backend << FLOW_NAMESPACE_SHIFT;
        let mut user_of: FastMap<usize, u64> = user_links.into_iter().collect();
        let mut keep = vec![true; activities.len()];
        let mut out = 0;
        for (i, a) in activities.iter().enumerate() {
            if a.start_ns < window.start_ns || a.end_ns > window.end_ns {
                keep[i] = false;
                out += 1;
            } else if !selection.enabled(a.kind) {
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
        for (i, a) in activities.drain(..).enumerate() {
            if !keep[i] {
                continue;
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
        (keep.iter().filter(|&&k| k).count() as u64, out)
    }

    /// Adds the merged activities, the projections, default rows and the drop counts.
    fn finish(self, trace: &mut Trace) {
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
        add_default_rows(trace);
        trace.set_metadata("out_of_window_events", Value::UInt(self.out_of_window));
        if self.duplicate_flow_starts > 0 {
            log::warn!(
                "omniprof: {} duplicate flow starts (two launches with one correlation id)",
                self.duplicate_flow_starts
            );
            trace.set_metadata(
                "duplicate_flow_starts",
                Value::UInt(self.duplicate_flow_starts),
            );
        }
    }
}

/// Rows for devices and streams that produced events but were described by no session.
fn add_default_rows(trace: &mut Trace) {
    let host_pid = std::process::id() as i64;
    let mut devices: FastMap<i64, ()> = trace.processes.iter().map(|p| (p.pid, ())).collect();
    let mut streams: FastMap<(i64, i64), ()> =
        trace.threads.iter().map(|t| ((t.pid, t.tid), ())).collect();
    let mut rows = (Vec::new(), Vec::new());
    for a in trace.activities.iter().filter(|a| a.device != host_pid) {
        if devices.insert(a.device, ()).is_none() {
            rows.0.push(ProcessRow {
                pid: a.device,
                name: format!("Device {}", a.device),
                label: format!("GPU {}", a.device),
                sort_index: a.device + DEVICE_SORT_OFFSET,
            });
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
    trace.processes.extend(rows.0);
    trace.threads.extend(rows.1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{self, ActivityProfiler, DeviceInfo};
    use crate::{record_function, record_op, Profiler};
    use omniprof_test_support::lock::serial;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    /// A fake device runtime: launches capture the pushed correlation ids, like CUPTI's
    /// external correlation, and complete instantly.
    #[derive(Default)]
    struct Runtime {
        stacks: Mutex<(Vec<u64>, Vec<u64>)>,
        launches: Mutex<Vec<(u64, u64, i64, i64)>>,
    }

    impl CorrelationListener for Runtime {
        fn push_correlation_id(&self, id: u64) {
            self.stacks.lock().unwrap().0.push(id);
        }
        fn pop_correlation_id(&self) {
            self.stacks.lock().unwrap().0.pop();
        }
        fn push_user_correlation_id(&self, id: u64) {
            self.stacks.lock().unwrap().1.push(id);
        }
        fn pop_user_correlation_id(&self) {
            self.stacks.lock().unwrap().1.pop();
        }
    }

    impl Runtime {
        fn launch(&self) {
            let (op, user) = {
                let s = self.stacks.lock().unwrap();
                (*s.0.last().unwrap_or(&0), *s.1.last().unwrap_or(&0))
            };
            let t = crate::clock::wall_now_ns();
            self.launches.lock().unwrap().push((op, user, t, t + 1_000));
        }
    }

    static ARMED: AtomicBool = AtomicBool::new(false);
    static FAIL: AtomicBool = AtomicBool::new(false);
    static FAIL_CONFIGURE: AtomicBool = AtomicBool::new(false);
    static RUNTIME: std::sync::OnceLock<Arc<Runtime>> = std::sync::OnceLock::new();

    fn runtime() -> Arc<Runtime> {
        RUNTIME.get_or_init(Arc::default).clone()
    }

    struct Mock {
        name: &'static str,
        panics: bool,
    }

    struct MockSession {
        panics: bool,
    }

    impl ActivityProfiler for Mock {
        fn name(&self) -> &str {
            self.name
        }
        fn available_activities(&self) -> ActivitySet {
            ActivitySet::parse_list("kernel,privateuse1_runtime").unwrap()
        }
        fn configure(
            &self,
            _: ActivitySet,
            _: &Config,
        ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
            let armed =
                ARMED.load(Ordering::SeqCst) && (!self.panics || FAIL.load(Ordering::SeqCst));
            if self.panics && FAIL_CONFIGURE.load(Ordering::SeqCst) {
                return Err(BackendError::new("no device found"));
            }
            Ok(armed.then(|| {
                Box::new(MockSession {
                    panics: self.panics,
                }) as Box<dyn ProfilerSession>
            }))
        }
    }

    impl ProfilerSession for MockSession {
        fn process_trace(
            &mut self,
            sink: &mut dyn ActivitySink,
            host_ops: &dyn HostOps,
            window: Window,
        ) -> Result<(), BackendError> {
            if self.panics {
                sink.add(Activity::new(
                    ActivityType::ConcurrentKernel,
                    "lost",
                    0,
                    1,
                    0,
                    0,
                ));
                panic!("device lost");
            }
            let pid = std::process::id() as i64;
            for (n, &(op, user, start, end)) in
                runtime().launches.lock().unwrap().iter().enumerate()
            {
                let corr = n as u64 + 1;
                assert!(host_ops.get(op).is_some(), "the launching op is known");
                let mut launch = Activity::new(
                    ActivityType::PrivateUse1Runtime,
                    "orLaunchKernel",
                    pid,
                    1,
                    start,
                    start + 10,
                );
                launch.correlation = corr;
                launch.linked_correlation = Some(op);
                sink.add(launch);
                let mut kernel = Activity::new(
                    ActivityType::ConcurrentKernel,
                    "gemm",
                    0,
                    7,
                    start + 20,
                    end,
                );
                kernel.correlation = corr;
                kernel.linked_correlation = Some(op);
                sink.add_in_user_range(kernel, user);
            }
            sink.add(Activity::new(
                ActivityType::ConcurrentKernel,
                "early",
                0,
                7,
                window.start_ns - 5,
                window.start_ns + 5,
            ));
            Ok(())
        }
        fn device_info(&self) -> Vec<DeviceInfo> {
            vec![DeviceInfo {
                id: 0,
                sort_index: 5_000_000,
                name: "mock".into(),
                label: "GPU 0".into(),
            }]
        }
        fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
            Some(runtime())
        }
    }

    fn arm() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            backend::register(
                "test-mock",
                Box::new(|| {
                    Box::new(Mock {
                        name: "mock",
                        panics: false,
                    })
                }),
            );
            backend::register(
                "test-panics",
                Box::new(|| {
                    Box::new(Mock {
                        name: "panicky",
                        panics: true,
                    })
                }),
            );
        });
        runtime().launches.lock().unwrap().clear();
        ARMED.store(true, Ordering::SeqCst);
    }

    fn run(fail: bool) -> Trace {
        arm();
        FAIL.store(fail, Ordering::SeqCst);
        FAIL_CONFIGURE.store(false, Ordering::SeqCst);
        let mut p = Profiler::builder()
            .activities(ActivitySet::all())
            .build()
            .unwrap();
        p.start().unwrap();
        {
            let _step = record_function("step");
            let _mm = record_op("aten::mm");
            runtime().launch();
            runtime().launch();
        }
        let t = p.stop().unwrap();
        ARMED.store(false, Ordering::SeqCst);
        t
    }

    #[test]
    fn device_work_is_linked_flowed_projected_and_windowed() {
        let _g = serial();
        let t = run(false);
        let op = t
            .activities
            .iter()
            .find(|a| &*a.name == "aten::mm")
            .unwrap();
        let step = t.activities.iter().find(|a| &*a.name == "step").unwrap();
        let kernels: Vec<_> = t.activities.iter().filter(|a| &*a.name == "gemm").collect();
        let launches: Vec<_> = t
            .activities
            .iter()
            .filter(|a| &*a.name == "orLaunchKernel")
            .collect();
        assert_eq!((kernels.len(), launches.len()), (2, 2));
        for (k, l) in kernels.iter().zip(&launches) {
            assert_eq!(k.linked_correlation, Some(op.correlation));
            let (kf, lf) = (k.flow.unwrap(), l.flow.unwrap());
            assert_eq!(kf.id, lf.id);
            assert!(lf.start && !kf.start);
            assert_eq!(kf.kind, FlowKind::Ac2g);
        }
        let ann: Vec<_> = t
            .activities
            .iter()
            .filter(|a| a.kind == ActivityType::GpuUserAnnotation)
            .collect();
        assert_eq!(ann.len(), 1);
        assert_eq!(&*ann[0].name, "step");
        assert_eq!(ann[0].correlation, step.correlation);
        assert_eq!(
            (ann[0].start_ns, ann[0].end_ns),
            (kernels[0].start_ns, kernels[1].end_ns)
        );
        assert!(t.activities.iter().all(|a| &*a.name != "early"));
        assert_eq!(t.metadata("out_of_window_events"), Some(&Value::UInt(1)));
        assert!(t.processes.iter().any(|p| p.pid == 0 && p.name == "mock"));
        assert!(t
            .threads
            .iter()
            .any(|r| r.pid == 0 && r.tid == 7 && r.name == "stream 7 "));
        let stacks = runtime().stacks.lock().unwrap().clone();
        assert_eq!(stacks, (vec![], vec![]), "every push was popped");
    }

    #[test]
    fn a_panicking_backend_leaves_the_others_intact() {
        let _g = serial();
        let t = run(true);
        assert_eq!(
            t.activities.iter().filter(|a| &*a.name == "gemm").count(),
            2
        );
        assert!(t.activities.iter().all(|a| &*a.name != "lost"));
        let Some(Value::List(errors)) = t.metadata("backend_errors") else {
            panic!("no backend_errors in {:?}", t.metadata);
        };
        assert_eq!(errors.len(), 1);
        assert!(errors[0]
            .as_str()
            .unwrap()
            .contains("panicky: process_trace panicked: device lost"));
        assert!(t.activities.iter().any(|a| &*a.name == "aten::mm"));
    }

    #[test]
    fn a_backend_failing_to_configure_is_reported_and_left_out() {
        let _g = serial();
        arm();
        FAIL.store(true, Ordering::SeqCst);
        FAIL_CONFIGURE.store(true, Ordering::SeqCst);
        let mut p = Profiler::builder()
            .activities(ActivitySet::all())
            .build()
            .unwrap();
        p.start().unwrap();
        {
            let _mm = record_op("aten::mm");
            runtime().launch();
        }
        let t = p.stop().unwrap();
        ARMED.store(false, Ordering::SeqCst);
        FAIL_CONFIGURE.store(false, Ordering::SeqCst);
        let Some(Value::List(errors)) = t.metadata("backend_errors") else {
            panic!("no backend_errors in {:?}", t.metadata);
        };
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].as_str(),
            Some("panicky: configure failed: no device found")
        );
        assert_eq!(
            t.activities.iter().filter(|a| &*a.name == "gemm").count(),
            1
        );
    }
}
