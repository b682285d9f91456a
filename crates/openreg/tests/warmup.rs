//! A warm-up that produces more device records than the budget does not cost the window its
//! kernels (issue 25, item 18): OpenReg's store and the engine's per-backend budget are both
//! set to 2,000 records, a workload launches far more than that during a 2 s warm-up, and the
//! trace holds exactly the window's kernels, with no record dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omniprof::on_demand::OnDemandState;
use omniprof::trace::{ActivityType, Trace};
use omniprof::{record_op, Config, Profiler};
use omniprof_read::TraceReader;
use omniprof_test_support::lock::serial;
use omniprof_test_support::session::backend_errors;
use openreg::{Kernel, Stream};

/// OpenReg's store and the engine's per-backend budget, in records.
const BUDGET: usize = 2_000;
const WARMUP: Duration = Duration::from_secs(2);
/// Ops launched in the window, one kernel each.
const WINDOW_OPS: usize = 100;

/// Launches one fill kernel inside a host op named `name`.
fn launch(name: &str, stream: &Stream, out: &openreg::DeviceBuffer) {
    let _op = record_op(name);
    openreg::launch_kernel(
        Kernel::Fill {
            out: out.clone(),
            value: 1.0,
        },
        stream,
    )
    .unwrap();
}

/// Launches `warm_op` kernels until `done` says stop, waiting for the device every 64
/// launches; returns how many it launched.
fn warm_up(stream: &Stream, out: &openreg::DeviceBuffer, done: impl Fn() -> bool) -> usize {
    let mut launched = 0;
    while !done() {
        launch("warm_op", stream, out);
        launched += 1;
        if launched % 64 == 0 {
            stream.synchronize();
        }
    }
    stream.synchronize();
    launched
}

/// (host ops named `name`, kernels linked to them, other kernels) in `trace`.
fn count(trace: &Trace, name: &str) -> (usize, usize, usize) {
    let ops: Vec<u64> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::CpuOp && &*a.name == name)
        .map(|a| a.correlation)
        .collect();
    let (linked, other) = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
        .partition::<Vec<_>, _>(|k| k.linked_correlation.is_some_and(|c| ops.contains(&c)));
    (ops.len(), linked.len(), other.len())
}

#[test]
fn a_sync_session_whose_warm_up_overfills_the_budget_holds_every_kernel_of_its_window() {
    let _serial = serial();
    openreg::set_record_budget(BUDGET);
    let stream = Stream::new(0).unwrap();
    let out = openreg::malloc(0, 256).unwrap();
    let config = Config::parse(&format!("OMNIPROF_MAX_EVENTS_PER_BACKEND={BUDGET}")).unwrap();
    let mut profiler = Profiler::builder().config(config).build().unwrap();
    profiler.prepare().unwrap();
    let warm_until = Instant::now() + WARMUP;
    let warm = warm_up(&stream, &out, || Instant::now() >= warm_until);
    profiler.start().unwrap();
    for _ in 0..WINDOW_OPS {
        launch("window_op", &stream, &out);
    }
    stream.synchronize();
    let trace = profiler.stop().unwrap();
    openreg::set_record_budget(openreg::DEFAULT_RECORD_BUDGET);

    assert!(warm > BUDGET, "the warm-up launched only {warm} kernels");
    assert_eq!(count(&trace, "window_op"), (WINDOW_OPS, WINDOW_OPS, 0));
    assert_eq!(count(&trace, "warm_op").0, 0);
    assert_eq!(backend_errors(&trace), Vec::<String>::new());
}

#[test]
fn an_on_demand_trace_whose_warm_up_overfills_the_budget_holds_every_kernel_of_its_window() {
    let _serial = serial();
    openreg::set_record_budget(BUDGET);
    let dir = tempfile::tempdir_in(omniprof::on_demand::on_demand_trace_dir()).unwrap();
    let path = dir.path().join("warmup.pt.trace.json");
    let ticket = omniprof::on_demand::request_on_demand(&format!(
        "ACTIVITIES_WARMUP_PERIOD_SECS={}\nACTIVITIES_DURATION_MSECS=1500\n\
         OMNIPROF_MAX_EVENTS_PER_BACKEND={BUDGET}\nACTIVITIES_LOG_FILE={}",
        WARMUP.as_secs(),
        path.display()
    ))
    .unwrap();
    let collecting = Arc::new(AtomicBool::new(false));
    let stream = Stream::new(0).unwrap();
    let out = openreg::malloc(0, 256).unwrap();
    // Launches through the warm-up, then exactly the window's ops once the window is open.
    let warm = warm_up(&stream, &out, || {
        let open = omniprof::on_demand::on_demand_status().state == OnDemandState::CollectTrace;
        collecting.store(open, Ordering::Relaxed);
        open
    });
    for _ in 0..WINDOW_OPS {
        launch("window_op", &stream, &out);
    }
    stream.synchronize();
    let written = ticket.wait(Duration::from_secs(30)).unwrap();
    openreg::set_record_budget(openreg::DEFAULT_RECORD_BUDGET);
    let trace = TraceReader::new().read_path(&written).into_trace().unwrap();

    assert!(collecting.load(Ordering::Relaxed));
    assert!(warm > BUDGET, "the warm-up launched only {warm} kernels");
    // The test sees the window open only after it did: warm-up kernels still queued then (at
    // most the 64 launched since the last synchronize) run inside the window and are
    // rightly recorded, as a warm-up op that began after the window opened is.
    let (ops, linked, other) = count(&trace, "window_op");
    assert_eq!((ops, linked), (WINDOW_OPS, WINDOW_OPS));
    assert!(other <= 64, "{other} warm-up kernels ran in the window");
    assert_eq!(backend_errors(&trace), Vec::<String>::new());
}
