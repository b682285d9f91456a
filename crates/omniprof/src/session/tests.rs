//! The engine end to end: the lifecycle's order and exclusivity, and mock backends whose
//! device work the merge links, flows, projects and windows, or which fail and are left out.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use omniprof_test_support::lock::serial;

use super::{Profiler, ProfilerAction, Schedule, SessionError};
use crate::backend::{
    self, ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
};
use crate::config::Config;
use crate::record::{self, record_function, record_op, CorrelationListener};
use crate::{Activity, ActivitySet, ActivityType, FlowKind};
use crate::{BackendCall, Contribution, FailureKind};
use crate::{Trace, Window};

#[test]
fn calls_must_come_in_order() {
    let _g = serial();
    let mut p = Profiler::builder().build().unwrap();
    assert!(matches!(
        p.stop(),
        Err(SessionError::OutOfOrder { call: "stop", .. })
    ));
    p.start().unwrap();
    assert!(p.start().is_err());
    let mut other = Profiler::builder().build().unwrap();
    assert!(matches!(other.start(), Err(SessionError::Busy)));
    p.stop().unwrap();
    assert!(p.stop().is_err());
    other.start().unwrap();
    drop(other);
    let mut third = Profiler::builder().build().unwrap();
    third.start().unwrap();
    assert!(record::is_recording());
    drop(third);
    assert!(!record::is_recording());
}

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

/// Waits out the mock's kernels, which end 1 µs after their launch, so that a stop right
/// after keeps the last in its window.
fn wait_for_kernels() {
    std::thread::sleep(std::time::Duration::from_millis(1));
}

static ARMED: AtomicBool = AtomicBool::new(false);
static FAIL: AtomicBool = AtomicBool::new(false);
static FAIL_CONFIGURE: AtomicBool = AtomicBool::new(false);
/// Whether the second well-behaved backend, `twin`, takes part.
static TWIN: AtomicBool = AtomicBool::new(false);
/// How long the mock's runtime calls last.
static CALL_NS: AtomicI64 = AtomicI64::new(10);
static RUNTIME: std::sync::OnceLock<Arc<Runtime>> = std::sync::OnceLock::new();

#[test]
fn an_empty_selection_is_the_default_given_as_such_and_none_given_exactly() {
    let _g = serial();
    let names = |builder: super::ProfilerBuilder| {
        let mut p = builder.build().unwrap();
        p.start().unwrap();
        {
            let _range = record_function("mine");
        }
        let t = p.stop().unwrap();
        t.activities
            .iter()
            .map(|a| a.name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(Profiler::builder().activities(ActivitySet::empty())),
        ["mine"]
    );
    assert!(names(Profiler::builder().only_activities(ActivitySet::empty())).is_empty());
    let mut annotations = ActivitySet::empty();
    annotations.insert(ActivityType::UserAnnotation);
    assert_eq!(
        names(Profiler::builder().only_activities(annotations)),
        ["mine"]
    );
}

fn runtime() -> Arc<Runtime> {
    RUNTIME.get_or_init(Arc::default).clone()
}

struct Mock {
    name: &'static str,
    panics: bool,
    /// Device 1's backend, which counts correlation ids as the first one does.
    twin: bool,
}

struct MockSession {
    panics: bool,
    device: i64,
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
        let takes_part = if self.twin {
            TWIN.load(Ordering::SeqCst)
        } else {
            !self.panics || FAIL.load(Ordering::SeqCst)
        };
        let armed = ARMED.load(Ordering::SeqCst) && takes_part;
        if self.panics && FAIL_CONFIGURE.load(Ordering::SeqCst) {
            return Err(BackendError::new("no device found"));
        }
        Ok(armed.then(|| {
            Box::new(MockSession {
                panics: self.panics,
                device: i64::from(self.twin),
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
        for (n, &(op, user, start, end)) in runtime().launches.lock().unwrap().iter().enumerate() {
            let corr = n as u64 + 1;
            let launching = host_ops.get(op).expect("the launching op is known");
            // On the launching op's thread, as a runtime call is.
            let mut launch = Activity::new(
                ActivityType::PrivateUse1Runtime,
                "orLaunchKernel",
                pid,
                launching.resource,
                start,
                start + CALL_NS.load(Ordering::SeqCst),
            );
            launch.correlation = corr;
            launch.linked_correlation = Some(op);
            sink.add(launch);
            let mut kernel = Activity::new(
                ActivityType::ConcurrentKernel,
                "gemm",
                self.device,
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
            self.device,
            7,
            window.start_ns - 5,
            window.start_ns + 5,
        ));
        Ok(())
    }
    fn device_info(&self) -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            id: self.device,
            sort_index: 5_000_000 + self.device,
            name: ["mock", "twin"][self.device as usize].into(),
            label: format!("GPU {}", self.device),
        }]
    }
    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(runtime())
    }
}

fn arm() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        backend::register_profiler_factory(
            "test-mock",
            Box::new(|| {
                Box::new(Mock {
                    name: "mock",
                    panics: false,
                    twin: false,
                })
            }),
        );
        backend::register_profiler_factory(
            "test-panics",
            Box::new(|| {
                Box::new(Mock {
                    name: "panicky",
                    panics: true,
                    twin: false,
                })
            }),
        );
        backend::register_profiler_factory(
            "test-twin",
            Box::new(|| {
                Box::new(Mock {
                    name: "twin",
                    panics: false,
                    twin: true,
                })
            }),
        );
    });
    runtime().launches.lock().unwrap().clear();
    ARMED.store(true, Ordering::SeqCst);
}

/// A started profiler of every activity type over the armed mock backends; with `fail`,
/// each fails as it hands its trace over.
fn started(fail: bool) -> Profiler {
    arm();
    FAIL.store(fail, Ordering::SeqCst);
    FAIL_CONFIGURE.store(false, Ordering::SeqCst);
    let mut p = Profiler::builder()
        .activities(ActivitySet::all())
        .build()
        .unwrap();
    p.start().unwrap();
    p
}

fn run(fail: bool) -> Trace {
    let mut p = started(fail);
    {
        let _step = record_function("step");
        let _mm = record_op("aten::mm");
        runtime().launch();
        runtime().launch();
    }
    wait_for_kernels();
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
    assert_eq!(t.health.out_of_window_events, Some(1));
    assert!(t.processes.iter().any(|p| p.pid == 0 && p.name == "mock"));
    assert!(t
        .threads
        .iter()
        .any(|r| r.pid == 0 && r.tid == 7 && r.name == "stream 7 "));
    let stacks = runtime().stacks.lock().unwrap().clone();
    assert_eq!(stacks, (vec![], vec![]), "every push was popped");
}

#[test]
fn a_collectives_kernel_and_launch_carry_its_ops_fields_as_kineto_writes_them() {
    let _g = serial();
    let mut p = started(false);
    {
        let _comms = record_op(crate::keys::name::RECORD_PARAM_COMMS)
            .with_arg("Group size", 2i64)
            .with_arg("Collective name", "allreduce");
        runtime().launch();
    }
    {
        let _mm = record_op("aten::mm");
        runtime().launch();
    }
    wait_for_kernels();
    let t = p.stop().unwrap();
    ARMED.store(false, Ordering::SeqCst);
    let fields = |name: &str| -> Vec<Vec<String>> {
        t.activities
            .iter()
            .filter(|a| &*a.name == name)
            .map(|a| {
                a.args
                    .iter()
                    .filter(|(k, _)| crate::keys::arg::COLLECTIVE_FIELDS.contains(&&**k))
                    .map(|(k, v)| format!("{k}={}", v.to_json()))
                    .collect()
            })
            .collect()
    };
    let of_the_collective = vec![
        r#"Collective name="allreduce""#.to_string(),
        "Group size=2".into(),
    ];
    // The first launch is the collective's, in Kineto's order; the mm's carries none.
    assert_eq!(fields("gemm"), [of_the_collective.clone(), vec![]]);
    assert_eq!(fields("orLaunchKernel"), [of_the_collective, vec![]]);
}

#[test]
fn a_flow_id_is_the_launchs_correlation_id_as_kineto_writes_it() {
    let _g = serial();
    let t = run(false);
    let launches: Vec<_> = t
        .activities
        .iter()
        .filter(|a| &*a.name == "orLaunchKernel")
        .collect();
    let ids: Vec<_> = launches
        .iter()
        .map(|l| (l.correlation, l.flow.unwrap().id))
        .collect();
    assert_eq!(ids, [(1, 1), (2, 2)]);
    let kernels = t.activities.iter().filter(|a| &*a.name == "gemm");
    let ids: Vec<_> = kernels
        .map(|k| (k.correlation, k.flow.unwrap().id))
        .collect();
    assert_eq!(ids, [(1, 1), (2, 2)]);
    assert_eq!(t.health.renumbered_flow_ids, None);
}

#[test]
fn ids_two_backends_share_are_renumbered_in_the_later_one_and_counted() {
    let _g = serial();
    TWIN.store(true, Ordering::SeqCst);
    let t = run(false);
    TWIN.store(false, Ordering::SeqCst);
    // Both backends count their correlation ids from 1: the first keeps its ids, the
    // second's move into its namespace, and every arrow still joins its own two ends.
    let flows = |name: &str| -> Vec<(i64, u64, u64)> {
        let mut ends: Vec<_> = t
            .activities
            .iter()
            .filter(|a| &*a.name == name)
            .map(|a| (a.device, a.correlation, a.flow.unwrap().id))
            .collect();
        ends.sort_unstable_by_key(|&(_, _, id)| id);
        ends
    };
    let kernels = flows("gemm");
    let namespace = kernels[2].2 - 1;
    assert_eq!(namespace % (1 << 44), 0);
    assert!(namespace > 0);
    assert_eq!(
        kernels,
        [
            (0, 1, 1),
            (0, 2, 2),
            (1, 1, namespace | 1),
            (1, 2, namespace | 2)
        ]
    );
    let pid = std::process::id() as i64;
    assert_eq!(
        flows("orLaunchKernel"),
        [
            (pid, 1, 1),
            (pid, 2, 2),
            (pid, 1, namespace | 1),
            (pid, 2, namespace | 2)
        ]
    );
    assert_eq!(t.health.renumbered_flow_ids, Some(2));
    assert_eq!(t.health.duplicate_flow_starts, None);
}

#[test]
fn a_call_past_an_op_the_stop_cut_keeps_its_link_without_a_warning() {
    let _g = serial();
    let mut p = started(false);
    let open = record_op("aten::item");
    runtime().launch();
    wait_for_kernels();
    // The call lasts past the stop, which ends its op (still open) at the window's end.
    CALL_NS.store(60_000_000_000, Ordering::SeqCst);
    let t = p.stop().unwrap();
    CALL_NS.store(10, Ordering::SeqCst);
    drop(open);
    // The op ended after its session: its pop never reached the runtime.
    runtime().stacks.lock().unwrap().0.clear();
    ARMED.store(false, Ordering::SeqCst);
    let op = t
        .activities
        .iter()
        .find(|a| &*a.name == "aten::item")
        .unwrap();
    assert_eq!(op.end_ns, t.window.end_ns);
    let kernel = t.activities.iter().find(|a| &*a.name == "gemm").unwrap();
    assert_eq!(kernel.linked_correlation, Some(op.correlation));
    assert_eq!(
        (t.health.refused_links, t.health.window_cut_links),
        (None, Some(1))
    );
    assert!(t.health.backend_warnings.is_empty());
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
    let errors = &t.health.backend_errors;
    assert_eq!(errors.len(), 1);
    assert!(errors[0]
        .to_string()
        .contains("panicky: process_trace panicked: device lost"));
    assert_eq!(
        errors[0].kind,
        FailureKind::Panicked {
            call: BackendCall::ProcessTrace,
            reason: "device lost".into()
        }
    );
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
    let errors = &t.health.backend_errors;
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].to_string(),
        "panicky: configure failed: no device found"
    );
    assert_eq!(
        t.activities.iter().filter(|a| &*a.name == "gemm").count(),
        1
    );
}

#[test]
fn what_each_backend_contributed_is_in_the_typed_report() {
    let _g = serial();
    let t = run(false);
    let mock = Contribution {
        name: "mock".into(),
        activities: 4,
        out_of_window: 1,
        // The one outside starts 5 ns before the window and ends inside it.
        before_ns: 5,
        after_ns: 0,
    };
    assert_eq!(t.health.backends, [mock]);
    let entries = t.health.entries();
    let backends = entries.iter().find(|(key, _)| *key == "backends");
    assert_eq!(
        backends.unwrap().1.to_json(),
        r#"[{"name": "mock", "activities": 4, "out_of_window": 1, "out_of_window_before_ns": 5}]"#
    );
}

/// A backend that cannot configure, by error or by panic.
struct Unconfigurable {
    panics: bool,
}

impl ActivityProfiler for Unconfigurable {
    fn name(&self) -> &str {
        "unconfigurable"
    }
    fn available_activities(&self) -> ActivitySet {
        ActivitySet::empty()
    }
    fn configure(
        &self,
        _: ActivitySet,
        _: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        if self.panics {
            panic!("no device");
        }
        Err(BackendError::new("no device"))
    }
}

#[test]
fn a_requested_backend_that_cannot_configure_fails_prepare_and_frees_the_recorder() {
    let _g = serial();
    for (panics, message) in [
        (false, "no device"),
        (true, "unconfigurable: configure panicked: no device"),
    ] {
        let mut p = Profiler::builder()
            .backend(Unconfigurable { panics })
            .build()
            .unwrap();
        let err = p.prepare().unwrap_err();
        assert!(matches!(err, SessionError::Backend(_)), "{err:?}");
        assert_eq!(err.to_string(), message);
        let mut next = Profiler::builder().build().unwrap();
        next.start().unwrap();
        next.stop().unwrap();
    }
}

/// A backend that logs the engine's calls to it.
struct Logged(Arc<Mutex<Vec<&'static str>>>);

struct LoggedSession(Arc<Mutex<Vec<&'static str>>>);

impl ActivityProfiler for Logged {
    fn name(&self) -> &str {
        "logged"
    }
    fn available_activities(&self) -> ActivitySet {
        [ActivityType::ConcurrentKernel].into_iter().collect()
    }
    fn configure(
        &self,
        _: ActivitySet,
        _: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        self.0.lock().unwrap().push("configure");
        Ok(Some(Box::new(LoggedSession(self.0.clone()))))
    }
}

impl ProfilerSession for LoggedSession {
    fn start(&mut self) -> Result<(), BackendError> {
        self.0.lock().unwrap().push("start");
        Ok(())
    }
    fn collection_switched(&mut self, off: ActivitySet) -> Result<(), BackendError> {
        let call = match off.contains(ActivityType::ConcurrentKernel) {
            true => "kernels off",
            false => "kernels on",
        };
        self.0.lock().unwrap().push(call);
        Ok(())
    }
    fn stop(&mut self) -> Result<(), BackendError> {
        self.0.lock().unwrap().push("stop");
        Ok(())
    }
    fn process_trace(
        &mut self,
        _: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        self.0.lock().unwrap().push("process");
        Ok(())
    }
}

fn schedule(text: &str) -> Schedule {
    text.parse().unwrap()
}

/// A scheduled profiler driving a [`Logged`] backend; its traces arrive on the receiver.
fn scheduled(
    schedule: Schedule,
) -> (
    Profiler,
    mpsc::Receiver<Trace>,
    Arc<Mutex<Vec<&'static str>>>,
) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let p = Profiler::builder()
        .backend(Logged(log.clone()))
        .schedule(schedule)
        .on_trace_ready(move |t| tx.send(t).unwrap())
        .build()
        .unwrap();
    (p, rx, log)
}

fn step_names(t: &Trace) -> Vec<&str> {
    t.activities
        .iter()
        .filter(|a| a.name.starts_with("ProfilerStep#"))
        .map(|a| &*a.name)
        .collect()
}

#[test]
fn pytorchs_observed_run_gives_one_trace_of_the_active_steps() {
    let _g = serial();
    let (mut p, traces, _) = scheduled(schedule("1,1,2,1"));
    p.start().unwrap();
    let mut delivered_at = Vec::new();
    for _ in 0..6 {
        drop(record_function("work"));
        p.step().unwrap();
        if let Ok(t) = traces.try_recv() {
            delivered_at.push((p.step_num(), t));
        }
    }
    p.finish().unwrap();
    assert!(traces.try_recv().is_err());
    assert_eq!(delivered_at.len(), 1);
    let (at, t) = &delivered_at[0];
    assert_eq!(*at, 4);
    assert_eq!(step_names(t), ["ProfilerStep#2", "ProfilerStep#3"]);
    // The steps' work: each active step's, and nothing from the wait or warm-up.
    let work = t.activities.iter().filter(|a| &*a.name == "work").count();
    assert_eq!(work, 2);
    for a in t
        .activities
        .iter()
        .filter(|a| a.name.starts_with("ProfilerStep#"))
    {
        assert_eq!(a.kind, ActivityType::UserAnnotation);
        assert_eq!(a.arg("finished"), None, "{} ended in its step", a.name);
    }
}

#[test]
fn each_cycle_is_one_trace_and_spans_count_traces() {
    let _g = serial();
    let (mut p, traces, log) = scheduled(schedule("1,1,1,0"));
    p.start().unwrap();
    for _ in 0..9 {
        p.step().unwrap();
    }
    p.finish().unwrap();
    let traces: Vec<Trace> = traces.try_iter().collect();
    let names: Vec<_> = traces.iter().map(step_names).collect();
    assert_eq!(
        names,
        [["ProfilerStep#2"], ["ProfilerStep#5"], ["ProfilerStep#8"]]
    );
    let iterations: Vec<_> = traces.iter().map(|t| t.spans[0].iteration).collect();
    assert_eq!(iterations[1], iterations[0] + 1);
    assert_eq!(iterations[2], iterations[0] + 2);
    // Warm-up starts the backend a step ahead; each cycle ends with stop and process.
    let cycle = ["configure", "start", "stop", "process"];
    assert_eq!(*log.lock().unwrap(), cycle.repeat(3));
}

#[test]
fn backends_are_told_what_is_switched_off_and_what_stays_off_into_the_next_cycle() {
    let _g = serial();
    // (wait 0, warmup 1, active 1): WARMUP, RECORD_AND_SAVE, WARMUP, ...
    let (mut p, traces, log) = scheduled(schedule("0,1,1,0"));
    let kernels: ActivitySet = [ActivityType::ConcurrentKernel].into_iter().collect();
    let calls = |log: &Arc<Mutex<Vec<&'static str>>>| std::mem::take(&mut *log.lock().unwrap());
    // Before a backend runs, a switch is kept for it and no one is told.
    p.toggle_collection(false, kernels);
    assert_eq!(calls(&log), [] as [&str; 0]);
    p.start().unwrap();
    assert_eq!(calls(&log), ["configure", "start", "kernels off"]);
    p.toggle_collection(false, kernels); // no change: not told again
    p.step().unwrap();
    p.step().unwrap(); // the cycle ends; the next one's session starts with kernels off
    assert_eq!(
        calls(&log),
        ["stop", "process", "configure", "start", "kernels off"]
    );
    assert!(traces.try_recv().is_ok());
    p.toggle_collection(true, kernels);
    assert_eq!(calls(&log), ["kernels on"]);
    p.finish().unwrap();
    assert_eq!(calls(&log), ["stop", "process"]);
}

#[test]
fn the_engine_takes_each_transition() {
    let _g = serial();
    // (wait 0, warmup 1, active 2): WARMUP, RECORD, RECORD_AND_SAVE, WARMUP, ...
    let (mut p, traces, log) = scheduled(schedule("0,1,2,0"));
    let calls = |log: &Arc<Mutex<Vec<&'static str>>>| std::mem::take(&mut *log.lock().unwrap());
    p.start().unwrap(); // NONE -> WARMUP: prepare
    assert_eq!(calls(&log), ["configure", "start"]);
    assert!(!p.is_recording());
    p.step().unwrap(); // WARMUP -> RECORD: start (the window; the backend runs already)
    assert_eq!(calls(&log), [] as [&str; 0]);
    assert!(p.is_recording());
    p.step().unwrap(); // RECORD -> RECORD_AND_SAVE: nothing
    assert!(p.is_recording() && traces.try_recv().is_err());
    p.step().unwrap(); // RECORD_AND_SAVE -> WARMUP: stop, trace_ready, prepare
    assert_eq!(calls(&log), ["stop", "process", "configure", "start"]);
    assert_eq!(
        step_names(&traces.try_recv().unwrap()),
        ["ProfilerStep#1", "ProfilerStep#2"]
    );
    p.finish().unwrap(); // WARMUP -> exit: start, stop, and the trace is discarded
    assert_eq!(calls(&log), ["stop", "process"]);
    assert!(traces.try_recv().is_err());
    assert!(!p.is_recording());

    // RECORD -> exit: stop, trace_ready.
    let (mut p, traces, _) = scheduled(schedule("0,1,3,0"));
    p.start().unwrap();
    p.step().unwrap();
    p.finish().unwrap();
    assert_eq!(step_names(&traces.try_recv().unwrap()), ["ProfilerStep#1"]);
    // NONE -> exit: nothing.
    let (mut p, traces, log) = scheduled(schedule("5,1,1,0"));
    p.start().unwrap();
    p.step().unwrap();
    p.finish().unwrap();
    assert!(traces.try_recv().is_err() && log.lock().unwrap().is_empty());
}

#[test]
fn scheduled_calls_come_in_order() {
    let _g = serial();
    assert!(matches!(
        Profiler::builder().schedule(schedule("0,1,1,0")).build(),
        Err(SessionError::NoTraceHandler)
    ));
    let (mut p, _traces, _) = scheduled(schedule("0,1,1,0"));
    assert!(matches!(
        p.step(),
        Err(SessionError::OutOfOrder { call: "step", .. })
    ));
    assert!(matches!(
        p.prepare(),
        Err(SessionError::Scheduled { call: "prepare" })
    ));
    p.start().unwrap();
    assert!(p.start().is_err());
    assert!(matches!(
        p.stop(),
        Err(SessionError::Scheduled { call: "stop" })
    ));
    p.finish().unwrap();
    assert!(matches!(
        p.finish(),
        Err(SessionError::OutOfOrder { call: "finish", .. })
    ));
    assert!(p.step().is_err());
    // Without a schedule, steps count and add no range; finish needs a callback.
    let mut plain = Profiler::builder().build().unwrap();
    plain.start().unwrap();
    plain.step().unwrap();
    assert_eq!(plain.step_num(), 1);
    assert_eq!(plain.current_action(), ProfilerAction::Record);
    assert!(matches!(plain.finish(), Err(SessionError::NoTraceHandler)));
    assert!(step_names(&plain.stop().unwrap()).is_empty());
}

#[test]
fn without_a_schedule_finish_hands_the_trace_over() {
    let _g = serial();
    let (tx, rx) = mpsc::channel();
    let mut p = Profiler::builder()
        .on_trace_ready(move |t| tx.send(t).unwrap())
        .build()
        .unwrap();
    p.start().unwrap();
    drop(record_function("only"));
    p.finish().unwrap();
    let t = rx.try_recv().unwrap();
    assert!(t.activities.iter().any(|a| &*a.name == "only"));
}

#[test]
fn a_busy_recorder_skips_a_cycle_and_the_next_one_runs() {
    let _g = serial();
    let (mut p, traces, _) = scheduled(schedule("1,0,1,0"));
    p.start().unwrap();
    let mut other = Profiler::builder().build().unwrap();
    other.start().unwrap();
    assert!(matches!(p.step(), Err(SessionError::Busy)));
    other.stop().unwrap();
    p.step().unwrap(); // NONE
    p.step().unwrap(); // RECORD_AND_SAVE
    p.step().unwrap();
    p.finish().unwrap();
    let got: Vec<_> = traces.try_iter().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(step_names(&got[0]), ["ProfilerStep#3"]);
}

#[test]
fn a_step_range_ended_on_another_thread_keeps_that_end() {
    let _g = serial();
    let (mut p, traces, _) = scheduled(schedule("0,1,2,1"));
    p.start().unwrap();
    p.step().unwrap(); // ProfilerStep#1 opens on this thread
    let t = std::thread::spawn(move || {
        p.step().unwrap();
        p.step().unwrap();
        p.finish().unwrap();
        traces.try_recv().unwrap()
    })
    .join()
    .unwrap();
    let first = t
        .activities
        .iter()
        .find(|a| &*a.name == "ProfilerStep#1")
        .unwrap();
    // Its end is recorded by the thread that stepped, and it stays on the thread it began on.
    assert_eq!(first.arg("finished"), None);
    assert_eq!(t.health.unfinished_ranges, None);
    let second = t
        .activities
        .iter()
        .find(|a| &*a.name == "ProfilerStep#2")
        .unwrap();
    assert_eq!(second.arg("finished"), None);
    assert_ne!(first.resource, second.resource);
    assert!(first.end_ns <= second.start_ns);
}

#[test]
fn a_profiler_is_send() {
    fn send<T: Send>() {}
    send::<Profiler>();
}
