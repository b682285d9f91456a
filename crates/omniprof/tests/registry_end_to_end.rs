//! PyTorch's `PrivateUse1ProfilerTest.EndToEndProfiling`, in a process of its own because the
//! registry and the engine are process-wide: a backend registered with `register_profiler!`
//! before `main` is forwarded when the engine initializes, configured for a trace that asks
//! for a type it supports, and stays registered after the trace.

use std::sync::atomic::{AtomicBool, Ordering};

use omniprof::backends::{
    ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
};
use omniprof::trace::{ActivitySet, ActivityType, Window};
use omniprof::{Config, Profiler};
use omniprof_test_support::lock::serial;

static CONFIGURED: AtomicBool = AtomicBool::new(false);

#[derive(Default)]
struct MockPrivateUse1;

struct MockSession;

impl ActivityProfiler for MockPrivateUse1 {
    fn name(&self) -> &str {
        "mock_privateuse1"
    }

    fn available_activities(&self) -> ActivitySet {
        [ActivityType::CpuOp].into_iter().collect()
    }

    fn configure(
        &self,
        activities: ActivitySet,
        _: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        assert_eq!(activities, [ActivityType::CpuOp].into_iter().collect());
        CONFIGURED.store(true, Ordering::SeqCst);
        Ok(Some(Box::new(MockSession)))
    }
}

impl ProfilerSession for MockSession {
    fn process_trace(
        &mut self,
        _: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    fn device_info(&self) -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            id: 0,
            sort_index: 0,
            name: "MockDevice".into(),
            label: "mock_device".into(),
        }]
    }
}

omniprof::register_profiler!(MockPrivateUse1);

const KEY: &str = "registry_end_to_end::MockPrivateUse1";

#[test]
fn end_to_end_profiling() {
    let _serial = serial();
    assert!(omniprof::__test::has_factory(KEY), "registered before main");
    let mut profiler = Profiler::builder()
        .activities([ActivityType::CpuOp].into_iter().collect())
        .build()
        .unwrap();
    profiler.prepare().unwrap();
    assert!(omniprof::__test::is_registered_with_engine(KEY));
    profiler.start().unwrap();
    drop(omniprof::record_op("aten::add"));
    let trace = profiler.stop().unwrap();
    assert!(omniprof::__test::is_registered_with_engine(KEY));
    assert!(
        CONFIGURED.load(Ordering::SeqCst),
        "the engine configured the backend"
    );
    assert!(trace.processes.iter().any(|p| p.name == "MockDevice"));
}
