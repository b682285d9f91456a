//! The profiler stubs through a session: every range timed on the device, markers forwarded,
//! the PyTorch error for a device nobody registered, and a backend holding its own stubs
//! (device rows, the elapsed deadline). The stubs reach the engine as a
//! backend, so these run the whole engine path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use omniprof::backends::{
    register_stubs, timing_session, ProfilerStubs, RecordOut, StubError, StubEvent,
};
use omniprof::backends::{ActivityProfiler, BackendError, ProfilerSession};
use omniprof::trace::keys::arg;
use omniprof::trace::{ActivitySet, ActivityType, Value};
use omniprof::{instant, record_function, record_op, Config, Profiler};
use omniprof_test_support::lock::serial;

/// Events are host timestamps; `elapsed` is their difference. Recording fails while
/// `FAIL_RECORD` is set, so a range can lose an event.
struct HostClockStubs {
    log: Mutex<Vec<String>>,
}

static FAIL_RECORD: AtomicBool = AtomicBool::new(false);

impl ProfilerStubs for HostClockStubs {
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError> {
        if FAIL_RECORD.load(Ordering::SeqCst) {
            return Err(StubError::Backend("device lost".into()));
        }
        if let Some(slot) = out.event {
            *slot = Some(Box::new(omniprof::clock::wall_now_ns()));
        }
        Ok(())
    }
    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError> {
        let (s, e) = (start.downcast_ref::<i64>(), end.downcast_ref::<i64>());
        Ok((e.unwrap() - s.unwrap()) as f32 / 1000.0)
    }
    fn mark(&self, name: &str) {
        self.log.lock().unwrap().push(format!("mark {name}"));
    }
    fn range_push(&self, name: &str) {
        self.log.lock().unwrap().push(format!("push {name}"));
    }
    fn range_pop(&self) {
        self.log.lock().unwrap().push("pop".into());
    }
    fn on_each_device(&self, op: &mut dyn FnMut(i32)) {
        op(0);
    }
    fn synchronize(&self) -> Result<(), StubError> {
        Ok(())
    }
}

fn host_clock() -> Arc<HostClockStubs> {
    static STUBS: std::sync::OnceLock<Arc<HostClockStubs>> = std::sync::OnceLock::new();
    STUBS
        .get_or_init(|| {
            let s = Arc::new(HostClockStubs {
                log: Mutex::new(Vec::new()),
            });
            register_stubs("HostClock", s.clone());
            s
        })
        .clone()
}

fn spin(us: u64) {
    let until = std::time::Instant::now() + std::time::Duration::from_micros(us);
    while std::time::Instant::now() < until {}
}

#[test]
fn every_range_gets_its_device_time_and_a_lost_event_gives_none() {
    let _g = serial();
    host_clock();
    let mut p = Profiler::builder().stubs("hostclock").build().unwrap();
    p.start().unwrap();
    {
        let _outer = record_function("outer");
        {
            let _op = record_op("inner");
            spin(3_000);
        }
        FAIL_RECORD.store(true, Ordering::SeqCst);
        let _lost = record_op("lost");
        spin(500);
        FAIL_RECORD.store(false, Ordering::SeqCst);
    }
    let t = p.stop().unwrap();
    let time = |name: &str| {
        let a = t.activities.iter().find(|a| &*a.name == name).unwrap();
        a.arg(arg::DEVICE_TIME_US).and_then(Value::as_i64)
    };
    let (outer, inner) = (time("outer").unwrap(), time("inner").unwrap());
    assert!((3_000..100_000).contains(&inner), "{inner}");
    assert!(outer >= inner, "{outer} < {inner}");
    assert_eq!(time("lost"), None, "no device time without both events");
    assert_eq!(t.metadata("device_type"), Some(&Value::from("hostclock")));
    assert_eq!(t.health.stub_errors, Some(1), "the failed begin");
    assert_eq!(t.health.stub_error_messages.len(), 1);
}

#[test]
fn markers_forward_ranges_and_instants_and_keep_nothing() {
    let _g = serial();
    let stubs = host_clock();
    stubs.log.lock().unwrap().clear();
    let mut p = Profiler::builder().markers("HostClock").build().unwrap();
    p.start().unwrap();
    {
        let _a = record_function("a");
        let _b = record_op("b");
        instant("here");
    }
    let t = p.stop().unwrap();
    assert!(t.activities.is_empty());
    assert_eq!(
        *stubs.log.lock().unwrap(),
        ["push a", "push b", "mark here", "pop", "pop"]
    );
}

#[test]
fn an_unregistered_device_is_a_clear_error_and_frees_the_recorder() {
    let _g = serial();
    let err = Profiler::builder()
        .stubs("Nope")
        .build()
        .unwrap()
        .start()
        .unwrap_err();
    assert_eq!(err.to_string(), "Nope used in profiler but not enabled.");
    let mut p = Profiler::builder().build().unwrap();
    p.start().unwrap();
    p.stop().unwrap();
}

/// Stubs whose events are host timestamps, on device 2, whose `elapsed` blocks while `HANG`
/// is set (until it is cleared).
struct DeviceTwo;

static HANG: AtomicBool = AtomicBool::new(false);

impl ProfilerStubs for DeviceTwo {
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError> {
        if let Some(device) = out.device {
            *device = 2;
        }
        let now = omniprof::clock::wall_now_ns();
        if let Some(cpu_ns) = out.cpu_ns {
            *cpu_ns = now;
        }
        if let Some(slot) = out.event {
            *slot = Some(Box::new(now));
        }
        Ok(())
    }
    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError> {
        while HANG.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (s, e) = (start.downcast_ref::<i64>(), end.downcast_ref::<i64>());
        Ok((e.unwrap() - s.unwrap()) as f32 / 1000.0)
    }
    fn mark(&self, _: &str) {}
    fn range_push(&self, _: &str) {}
    fn range_pop(&self) {}
    fn on_each_device(&self, op: &mut dyn FnMut(i32)) {
        op(2);
    }
    fn synchronize(&self) -> Result<(), StubError> {
        Ok(())
    }
}

/// A backend holding its stubs itself, as the Python package's PyTorch bridge does: it
/// times with device rows, in the sessions whose config sets `OMNIPROF_PRIVATEUSE1_STUBS`.
struct HeldStubs;

impl ActivityProfiler for HeldStubs {
    fn name(&self) -> &str {
        "held stubs"
    }
    fn available_activities(&self) -> ActivitySet {
        [ActivityType::PrivateUse1Runtime].into_iter().collect()
    }
    fn configure(
        &self,
        _: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        Ok(config
            .privateuse1_stubs()
            .then(|| timing_session("DeviceTwo", Arc::new(DeviceTwo), config, true)))
    }
}

fn held_stubs_session(config: &str) -> Profiler {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        omniprof::backends::register_profiler_factory(
            "held stubs",
            Box::new(|| Box::new(HeldStubs)),
        );
    });
    let mut c = Config::default();
    c.apply(&format!("OMNIPROF_PRIVATEUSE1_STUBS=true\n{config}"))
        .unwrap();
    // The device rows are `gpu_user_annotation`s, which ProfilerActivity.PrivateUse1 selects.
    let activities = [
        ActivityType::CpuOp,
        ActivityType::PrivateUse1Runtime,
        ActivityType::GpuUserAnnotation,
    ];
    Profiler::builder()
        .config(c)
        .activities(activities.into_iter().collect())
        .build()
        .unwrap()
}

#[test]
fn a_held_stubs_session_draws_each_timed_range_on_its_devices_row() {
    let _g = serial();
    let mut p = held_stubs_session("");
    p.start().unwrap();
    {
        let _op = record_op("drawn");
        spin(2_000);
    }
    let t = p.stop().unwrap();
    let op = t.activities.iter().find(|a| &*a.name == "drawn").unwrap();
    let us = op.arg(arg::DEVICE_TIME_US).and_then(Value::as_i64).unwrap();
    let drawn: Vec<_> = t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::GpuUserAnnotation)
        .collect();
    assert_eq!(drawn.len(), 1);
    let d = drawn[0];
    assert_eq!(
        (&*d.name, d.device, d.linked_correlation),
        ("drawn", 2, Some(op.correlation))
    );
    assert_eq!(d.arg(arg::DEVICE_TIME_US).and_then(Value::as_i64), Some(us));
    assert_eq!(d.duration_ns(), us * 1000);
    assert!(
        t.processes
            .iter()
            .any(|r| r.pid == 2 && r.name == "DeviceTwo 2"),
        "{:?}",
        t.processes
    );
    assert_eq!(t.health.backend_errors, []);
}

#[test]
fn an_elapsed_past_the_deadline_costs_the_ranges_their_time_and_is_a_backend_error() {
    let _g = serial();
    let mut p = held_stubs_session("OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS=100");
    p.start().unwrap();
    {
        let _op = record_op("untimed");
    }
    HANG.store(true, Ordering::SeqCst);
    let t = p.stop();
    HANG.store(false, Ordering::SeqCst);
    let t = t.unwrap();
    let op = t.activities.iter().find(|a| &*a.name == "untimed").unwrap();
    assert_eq!(op.arg(arg::DEVICE_TIME_US), None);
    let errors: Vec<String> = t
        .health
        .backend_errors
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errors,
        [
            "held stubs: 1 call(s) to the DeviceTwo profiler stubs failed, first: elapsed did \
          not return within 100 ms: device time resolved for 0 of 1 ranges, the rest have \
          none"
        ]
    );
}

/// Stubs whose `record` is itself a range (as a device whose events are ops of its own).
struct RecordsARange;

impl ProfilerStubs for RecordsARange {
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError> {
        let _inner = record_op("record_event");
        if let Some(slot) = out.event {
            *slot = Some(Box::new(omniprof::clock::wall_now_ns()));
        }
        Ok(())
    }
    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError> {
        let (s, e) = (start.downcast_ref::<i64>(), end.downcast_ref::<i64>());
        Ok((e.unwrap() - s.unwrap()) as f32 / 1000.0)
    }
    fn mark(&self, _: &str) {}
    fn range_push(&self, _: &str) {}
    fn range_pop(&self) {}
    fn on_each_device(&self, op: &mut dyn FnMut(i32)) {
        op(0);
    }
    fn synchronize(&self) -> Result<(), StubError> {
        Ok(())
    }
}

#[test]
fn ranges_the_stubs_record_inside_record_are_not_timed() {
    let _g = serial();
    register_stubs("RecordsARange", Arc::new(RecordsARange));
    let mut p = Profiler::builder().stubs("RecordsARange").build().unwrap();
    p.start().unwrap();
    {
        let _op = record_op("timed");
        spin(1_000);
    }
    let t = p.stop().unwrap();
    let time = |name: &str| {
        let a = t.activities.iter().find(|a| &*a.name == name).unwrap();
        a.arg(arg::DEVICE_TIME_US).and_then(Value::as_i64)
    };
    assert!(time("timed").is_some_and(|us| us >= 1_000));
    let inner: Vec<_> = t
        .activities
        .iter()
        .filter(|a| &*a.name == "record_event")
        .collect();
    assert_eq!(inner.len(), 2, "one per event of `timed`");
    assert!(inner.iter().all(|a| a.arg(arg::DEVICE_TIME_US).is_none()));
}
