//! What a plugin sends is bounded and reported in bounded space: a per-trace event budget
//! (`OMNIPROF_MAX_EVENTS_PER_BACKEND`) with the dropped events counted, and each kind of
//! problem reported once, with a count and a few examples. Each case is a real plugin of
//! `plugins/broken`, built by the test and loaded by the real loader.

use omniprof::trace::Trace;
use omniprof_test_support::lock::serial;
use omniprof_test_support::{plugins, session};

fn record(config: &str) -> Trace {
    session::record_host_steps(config, 1, 3)
}

fn errors_of(trace: &Trace, profiler: &str) -> Vec<String> {
    let prefix = format!("{profiler}: ");
    session::backend_errors(trace)
        .iter()
        .filter_map(|e| e.strip_prefix(&prefix).map(str::to_owned))
        .collect()
}

fn named(trace: &Trace, name: &str) -> usize {
    trace.activities.iter().filter(|a| &*a.name == name).count()
}

/// The two plugins are loaded in turn into one registry (a loaded plugin takes part in every
/// later session of the process), so that each session's counts are known.
#[test]
fn flooding_plugins_are_bounded_and_reported_in_a_line() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();

    // An event budget: the rest dropped and counted.
    omniprof::plugins::load_plugin(plugins::build_broken("event_flood", dir.path())).unwrap();
    let trace = record("OMNIPROF_MAX_EVENTS_PER_BACKEND=1000");
    assert_eq!(named(&trace, "host::op"), 3);
    assert_eq!(named(&trace, "valid_kernel"), 1);
    assert_eq!(named(&trace, "flood_kernel"), 999);
    assert_eq!(named(&trace, "after_broken_call"), 0, "past the budget");
    let errors = errors_of(&trace, "EventFlood");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("99002 × events past the budget"),
        "{}",
        errors[0]
    );

    // 100,000 refused calls with distinct values: one line, a count and three examples.
    omniprof::plugins::load_plugin(plugins::build_broken("invalid_type_flood", dir.path()))
        .unwrap();
    let trace = record("OMNIPROF_MAX_EVENTS_PER_BACKEND=1000");
    assert_eq!(named(&trace, "valid_kernel"), 2, "one of each plugin");
    assert_eq!(named(&trace, "after_broken_call"), 1, "InvalidTypeFlood's");
    let errors = errors_of(&trace, "InvalidTypeFlood");
    assert_eq!(
        errors,
        ["100000 × addEvent with an invalid event type: 1000, 1001, 1002, …"]
    );
}
