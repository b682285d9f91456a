//! Plugins that misuse the host in ways it can detect cannot hang or crash it: a library
//! stays loaded whatever its registration did, a plugin that blocks is abandoned at its
//! deadline, and handles used from other threads or after their call are refused and
//! counted. Each case is a real plugin of `plugins/broken`, built by the test and loaded by
//! the real loader; the host's own trace is intact every time.

use std::time::{Duration, Instant};

use omniprof::trace::{Trace, Value};
use omniprof_test_support::lock::serial;
use omniprof_test_support::{plugins, session};

fn record(config: &str) -> Trace {
    session::record_host_steps(config, 2, 3)
}

fn host_ops(trace: &Trace) -> usize {
    trace
        .activities
        .iter()
        .filter(|a| &*a.name == "host::op")
        .count()
}

/// The error of `profiler`, which must have one.
fn error_of<'a>(errors: &'a [String], profiler: &str) -> &'a str {
    errors
        .iter()
        .find(|e| e.starts_with(&format!("{profiler}: ")))
        .unwrap_or_else(|| panic!("no error for {profiler} in {errors:#?}"))
}

fn named<'a>(trace: &'a Trace, name: &str) -> Vec<&'a omniprof::trace::Activity> {
    trace
        .activities
        .iter()
        .filter(|a| &*a.name == name)
        .collect()
}

#[test]
fn a_library_whose_registration_failed_stays_loaded_under_its_thread() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let so = plugins::build_broken("register_error_with_thread", dir.path());
    let err = omniprof::plugins::load_plugin(&so).unwrap_err();
    assert!(err.to_string().contains("returned -7"), "{err}");
    // The plugin's thread wakes every millisecond in the library's code: had the library
    // been unloaded, the process would crash within this pause.
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn misused_handles_are_refused_and_counted() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let so = plugins::build_broken("handle_misuse", dir.path());
    let loaded = omniprof::plugins::load_plugin(&so).unwrap();
    let usable: Vec<&str> = loaded.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(usable, ["HandleMisuse"], "the other thread's registration");
    let late_before = omniprof::plugins::late_plugin_calls();
    let _first = record("");
    let second = record("");
    assert_eq!(host_ops(&second), 6);
    assert_eq!(named(&second, "valid_kernel").len(), 1);
    assert!(named(&second, "late_kernel").is_empty());
    let after = named(&second, "after_broken_call");
    assert_eq!(after.len(), 1);
    for key in [
        "broken_call_rc",
        "late_builder_rc",
        "thread_registry_rc",
        "late_registry_rc",
    ] {
        assert_eq!(after[0].arg(key), Some(&Value::Int(-1)), "{key}");
    }
    let errors = session::backend_errors(&second);
    let error = error_of(&errors, "HandleMisuse");
    assert!(
        error.contains("1 × trace builder called from another thread"),
        "{error}"
    );
    // Both sessions' create made a late registerProfiler call; the second session's
    // processEvents made a late addEvent and setLastEventName.
    assert!(omniprof::plugins::late_plugin_calls() >= late_before + 4);
}

#[test]
fn a_plugin_that_blocks_is_abandoned_at_its_deadline() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let so = plugins::build_broken("hangs", dir.path());
    let loaded = omniprof::plugins::load_plugin(&so).unwrap();
    let calls = [
        ("HangInCreate", "profilerCreate"),
        ("HangInStart", "profilerStart"),
        ("HangInStop", "profilerStop"),
        ("HangInProcessEvents", "profilerProcessEvents"),
        ("HangInDestroy", "profilerDestroy"),
    ];
    assert_eq!(loaded.usable().count(), calls.len());

    let begun = Instant::now();
    let trace = record("OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS=300");
    let took = begun.elapsed();
    assert!(took < Duration::from_secs(10), "the session took {took:?}");
    assert_eq!(host_ops(&trace), 6, "the host's own trace is intact");
    let errors = session::backend_errors(&trace);
    for (profiler, call) in calls {
        let error = error_of(&errors, profiler);
        assert!(
            error.contains(&format!("{call} did not return within 300 ms"))
                && error.contains("abandoned"),
            "{error}"
        );
    }
    // A destroy that hangs comes after processEvents: its events are kept.
    assert!(!named(&trace, "after_broken_call").is_empty());

    // Abandoned for good: the next session makes no call into them ("not made" below), so
    // it cannot hang on them; the bound only catches a hang, with room for a loaded machine.
    let begun = Instant::now();
    let trace = record("OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS=300");
    let took = begun.elapsed();
    assert!(took < Duration::from_secs(10), "the session took {took:?}");
    let errors = session::backend_errors(&trace);
    for (profiler, _) in calls {
        assert!(
            error_of(&errors, profiler).contains("not made"),
            "{profiler}: {errors:#?}"
        );
    }
}
