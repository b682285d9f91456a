//! OpenReg under the flight recorder, in a process of its own (the recorder is
//! process-wide): its device work is recorded continuously in the store's ring, which
//! wraps many times within its record budget, and a dump holds the window's kernels beside
//! the host ops that launched them, linked as in a profiling session (`External id`, `ac2g`
//! flows); a device backend that cannot record continuously is named; a profiling session
//! started beside the recorder records the device itself, and the recorder takes it back
//! after.

use std::collections::HashMap;
use std::time::Duration;

use omniprof::backends::{ActivityProfiler, ActivitySink, BackendError, HostOps, ProfilerSession};
use omniprof::trace::keys::metadata;
use omniprof::trace::{Activity, ActivitySet, ActivityType, FlowKind, Trace, Value, Window};
use omniprof::{record_op, Config, FlightRecorder};
use omniprof_read::TraceReader;
use omniprof_test_support::lock::serial;
use openreg::{Kernel, Stream};

/// OpenReg's record budget here: the ring's size, in records.
const BUDGET: usize = 2_000;
/// Ops launched before the window, one kernel each: two records per op (the launch and
/// the kernel), so the ring wraps `EARLY_OPS * 2 / BUDGET` times.
const EARLY_OPS: usize = 10_000;
/// Ops launched in the window.
const LATE_OPS: usize = 300;
const WINDOW: Duration = Duration::from_secs(2);

/// A device backend that records only inside profiling sessions.
#[derive(Default)]
struct SessionOnly;

struct SessionOnlySession;

impl ActivityProfiler for SessionOnly {
    fn name(&self) -> &str {
        "session-only"
    }
    fn available_activities(&self) -> ActivitySet {
        [ActivityType::GpuMemcpy].into_iter().collect()
    }
    fn configure(
        &self,
        _: ActivitySet,
        _: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        Ok(Some(Box::new(SessionOnlySession)))
    }
}

impl ProfilerSession for SessionOnlySession {
    fn process_trace(
        &mut self,
        _: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        Ok(())
    }
}

omniprof::register_profiler!(SessionOnly);

/// Launches one fill kernel inside a host op named `name`.
fn launch(name: &str, stream: &Stream, out: &openreg::DeviceBuffer) {
    let _op = record_op(name);
    let fill = Kernel::Fill {
        out: out.clone(),
        value: 1.0,
    };
    openreg::launch_kernel(fill, stream).unwrap();
}

/// The correlation ids of the host ops named `name`.
fn ops(trace: &Trace, name: &str) -> Vec<u64> {
    trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::CpuOp && &*a.name == name)
        .map(|a| a.correlation)
        .collect()
}

fn of_kind(trace: &Trace, kind: ActivityType) -> Vec<&Activity> {
    trace.activities.iter().filter(|a| a.kind == kind).collect()
}

fn text(trace: &Trace, key: &str) -> Option<String> {
    match trace.metadata(key)? {
        Value::Str(s) => Some(s.to_string()),
        other => panic!("{key} is not text: {other:?}"),
    }
}

#[test]
fn a_dump_holds_the_windows_kernels_linked_to_their_ops_while_the_ring_wraps_in_its_budget() {
    let _serial = serial();
    openreg::set_ring_record_budget(BUDGET);
    let recorder = FlightRecorder::builder().window(WINDOW).start().unwrap();
    let stream = Stream::new(0).unwrap();
    let out = openreg::malloc(0, 256).unwrap();
    for i in 0..EARLY_OPS {
        launch("early", &stream, &out);
        // Keeps the stream's queue short.
        if i % 256 == 255 {
            stream.synchronize();
        }
    }
    stream.synchronize();
    let wrapped = openreg::copy_records_since(i64::MIN);
    // The window still holds every early op, the ring only the newest of their kernels.
    let cut = recorder.snapshot().unwrap();
    // Past the window: what the ring still holds of the early ops is older than it.
    std::thread::sleep(WINDOW + Duration::from_millis(200));
    for _ in 0..LATE_OPS {
        launch("late", &stream, &out);
    }
    stream.synchronize();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flight.pt.trace.json");
    let dump = recorder.dump(&path);
    let held = openreg::copy_records_since(i64::MIN);
    recorder.stop();
    openreg::set_ring_record_budget(openreg::DEFAULT_RING_RECORD_BUDGET);
    dump.unwrap();
    let trace = TraceReader::new().read_path(&path).into_trace().unwrap();

    // Bounded: the ring held its budget, having dropped the rest, several times round.
    assert_eq!(wrapped.runtime.len() + wrapped.device.len(), BUDGET);
    assert_eq!(held.runtime.len() + held.device.len(), BUDGET);
    assert!(
        held.dropped >= 4 * BUDGET as u64,
        "dropped {}",
        held.dropped
    );
    assert!(held.device.iter().any(|r| r.external.default.is_some()));

    // A window longer than the ring holds: the newest kernels, and a warning saying so.
    assert_eq!(ops(&cut, "early").len(), EARLY_OPS);
    let cut_kernels = of_kind(&cut, ActivityType::ConcurrentKernel);
    assert!(
        (1..BUDGET).contains(&cut_kernels.len()),
        "{} kernels",
        cut_kernels.len()
    );
    let early = ops(&cut, "early");
    assert!(cut_kernels
        .iter()
        .all(|k| k.linked_correlation.is_some_and(|c| early.contains(&c))));
    let warnings: Vec<String> = cut
        .health
        .backend_warnings
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "openreg: the ring of {BUDGET} records held only the last "
        )),
        "{warnings:?}"
    );

    // The window: every late op and its kernel, no early one.
    let late = ops(&trace, "late");
    assert_eq!(late.len(), LATE_OPS);
    assert_eq!(ops(&trace, "early"), Vec::<u64>::new());
    let kernels = of_kind(&trace, ActivityType::ConcurrentKernel);
    let mut linked: Vec<u64> = kernels
        .iter()
        .filter_map(|k| k.linked_correlation)
        .collect();
    linked.sort_unstable();
    let mut expected = late.clone();
    expected.sort_unstable();
    assert_eq!(linked, expected, "one kernel per late op, linked to it");
    assert_eq!(kernels.len(), LATE_OPS);
    assert!(kernels.iter().all(|k| &*k.name == "fill_f32"));

    // Each launch draws its ac2g arrow to its kernel.
    let launches = of_kind(&trace, ActivityType::PrivateUse1Runtime);
    let arrows_from: HashMap<u64, u64> = launches
        .iter()
        .filter_map(|l| {
            let flow = l.flow.as_ref()?;
            (flow.kind == FlowKind::Ac2g && flow.start).then_some((flow.id, l.linked_correlation?))
        })
        .collect();
    for kernel in &kernels {
        let flow = kernel
            .flow
            .as_ref()
            .expect("a kernel without its ac2g arrow");
        assert_eq!((flow.kind, flow.start), (FlowKind::Ac2g, false));
        assert_eq!(
            arrows_from.get(&flow.id),
            kernel.linked_correlation.as_ref()
        );
    }

    // The ring's losses lay before the window: nothing to warn about.
    assert_eq!(trace.health.backend_warnings, Vec::new());
    assert_eq!(
        text(&trace, metadata::FLIGHT_DEVICE_BACKENDS).as_deref(),
        Some("openreg")
    );
    assert_eq!(
        text(&trace, metadata::DEVICE_TYPE).as_deref(),
        Some("OpenReg")
    );
}

#[test]
fn a_device_backend_that_cannot_record_continuously_is_named_in_a_warning_and_each_dump() {
    let _serial = serial();
    let recorder = FlightRecorder::builder().start().unwrap();
    let warnings = recorder.take_warnings();
    let trace = recorder.snapshot().unwrap();
    recorder.stop();

    assert_eq!(
        warnings,
        [
            "omniprof: the flight recorder records no device work from session-only: they \
          cannot record continuously (their profiling sessions still record them)"
        ]
    );
    assert_eq!(
        text(&trace, metadata::FLIGHT_SITTING_OUT).as_deref(),
        Some("session-only")
    );
    assert_eq!(
        text(&trace, metadata::FLIGHT_DEVICE_BACKENDS).as_deref(),
        Some("openreg")
    );
}

#[test]
fn a_profiling_session_beside_the_recorder_records_the_device_and_the_recorder_resumes_after() {
    let _serial = serial();
    let recorder = FlightRecorder::builder().start().unwrap();
    let stream = Stream::new(0).unwrap();
    let out = openreg::malloc(0, 256).unwrap();
    launch("before", &stream, &out);
    stream.synchronize();
    let mut profiler = omniprof::Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    launch("during", &stream, &out);
    stream.synchronize();
    let session = profiler.stop().unwrap();
    launch("after", &stream, &out);
    stream.synchronize();
    let dump = recorder.snapshot().unwrap();
    recorder.stop();

    // (kernels linked to an op named `name`) in `trace`.
    let linked = |trace: &Trace, name: &str| {
        let ops = ops(trace, name);
        of_kind(trace, ActivityType::ConcurrentKernel)
            .iter()
            .filter(|k| k.linked_correlation.is_some_and(|c| ops.contains(&c)))
            .count()
    };
    assert_eq!(
        ["before", "during", "after"].map(|n| linked(&session, n)),
        [0, 1, 0]
    );
    // The session took the device over: the ring started afresh after it.
    assert_eq!(
        ["before", "during", "after"].map(|n| (ops(&dump, n).len(), linked(&dump, n))),
        [(1, 0), (1, 0), (1, 1)]
    );
}
