//! Host perf counters end to end: a session with `PERF_EVENTS` counts each recording thread,
//! its software counters grow across a busy loop, a hardware event the machine cannot count
//! is named in the session health instead of failing the session, an unknown name is refused with
//! the known ones, and the trace loads in Perfetto.

use omniprof::trace::ActivityType;
use omniprof::{Config, Profiler};
use omniprof_test_support::checker;
use omniprof_test_support::lock::serial;
use omniprof_test_support::skip::{self, Needs};

fn busy_loop() {
    let mut x = 0u64;
    for i in 0..3_000_000u64 {
        x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
    }
    std::hint::black_box(x);
}

#[test]
fn software_counters_grow_per_thread_and_missing_hardware_is_reported() {
    let _serial = serial();
    let config = Config::parse(
        "PERF_EVENTS = task-clock, context-switches, cycles\n\
         OMNIPROF_PERF_EVENTS_PERIOD_USECS = 500",
    )
    .unwrap();
    let mut profiler = Profiler::builder().config(config).build().unwrap();
    profiler.start().unwrap();
    let tid = std::thread::spawn(|| {
        for step in 0..8 {
            let _r = omniprof::record_function(format!("step {step}"));
            busy_loop();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // SAFETY: gettid has no preconditions and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) }
    })
    .join()
    .unwrap();
    let trace = profiler.stop().unwrap();
    let unavailable = &trace.health.unavailable_perf_events;
    if let Some(refused) = unavailable.iter().find(|e| e.name == "task-clock") {
        // A sandbox may forbid perf_event_open altogether (a seccomp filter): the session
        // still succeeded, which is the other half of this test.
        return skip::skip("software perf counters", Needs::PerfEvents, &refused.reason);
    }

    let series = trace
        .counters
        .series()
        .iter()
        .find(|s| s.track.resource == tid)
        .unwrap_or_else(|| panic!("no perf series for thread {tid}"));
    assert_eq!(series.track.kind, ActivityType::HostCounters);
    assert_eq!(series.track.device, i64::from(std::process::id()));
    let clock: Vec<f64> = series
        .samples
        .iter()
        .map(|s| s.value("task-clock").unwrap())
        .collect();
    assert!(clock.len() >= 3, "{clock:?}");
    assert!(clock.windows(2).all(|w| w[0] <= w[1]), "{clock:?}");
    assert!(clock.last() > clock.first(), "{clock:?}");
    assert!(series
        .samples
        .iter()
        .all(|s| s.value("context-switches").is_some()));

    // `cycles` is counted, or named as unavailable; either way the session succeeded.
    let counted = series.samples.iter().any(|s| s.value("cycles").is_some());
    assert!(
        counted != unavailable.iter().any(|e| e.name == "cycles"),
        "counted {counted}, unavailable {unavailable:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.pt.trace.json");
    omniprof::trace::save(&trace, &path).unwrap();
    checker::assert_loads_in_perfetto(&path);
}

#[test]
fn an_unknown_event_is_refused_with_the_known_names() {
    let err = Config::parse("PERF_EVENTS = task-clock, cache-mises").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("line 1: PERF_EVENTS: unknown perf event \"cache-mises\""),
        "{text}"
    );
    assert!(
        text.contains("cache-misses, ") && text.contains("context-switches"),
        "{text}"
    );
}
