//! The engine end to end: the lifecycle's order and exclusivity, and mock backends whose
//! device work the merge links, flows, projects and windows, or which fail and are left out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use omniprof_test_support::lock::serial;

use super::{Contribution, Profiler, SessionError};
use crate::activity::{Activity, ActivitySet, ActivityType, FlowKind};
use crate::backend::{
    self, ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
};
use crate::config::Config;
use crate::record::{self, record_function, record_op, CorrelationListener};
use crate::trace::{Trace, Window};
use crate::value::Value;

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
        let armed = ARMED.load(Ordering::SeqCst) && (!self.panics || FAIL.load(Ordering::SeqCst));
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
        for (n, &(op, user, start, end)) in runtime().launches.lock().unwrap().iter().enumerate() {
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

#[test]
fn what_each_backend_contributed_is_typed_metadata() {
    let _g = serial();
    let t = run(false);
    let mock = Contribution {
        name: "mock".into(),
        activities: 4,
        out_of_window: 1,
    };
    assert_eq!(Contribution::of(&t), [mock]);
    assert_eq!(
        t.metadata("backends").unwrap().to_json(),
        r#"[{"name": "mock", "activities": 4, "out_of_window": 1}]"#
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
