//! Every broken plugin of `plugins/broken`, built by the test and loaded by the real loader,
//! is handled as specified — rejected with a reason naming the file, or loaded with each bad
//! call refused or repaired and counted — and in every case the host's own trace, and the
//! valid events around the broken call, are intact. The trace then loads in Perfetto.

use std::collections::HashMap;

use omniprof::plugins::PluginError;
use omniprof::trace::Trace;
use omniprof_test_support::lock::serial;
use omniprof_test_support::{checker, plugins, session};

/// How a library must come out of the loader.
enum Load {
    /// Rejected; the error names the file and contains this.
    Rejected(&'static str),
    /// Loaded; these profilers are usable.
    Usable(&'static [&'static str]),
    /// Loaded; its one profiler is disabled for this reason.
    Disabled(&'static str),
    /// Loaded, with nothing registered.
    Nothing,
}

/// For a usable profiler: what its session reports (a substring of its `backend_errors`
/// entry, or none), and what its `after_broken_call` kernel says the host returned.
struct Session {
    profiler: &'static str,
    error: Option<&'static str>,
    broken_call_rc: Option<i64>,
}

const fn s(profiler: &'static str, error: Option<&'static str>, rc: Option<i64>) -> Session {
    Session {
        profiler,
        error,
        broken_call_rc: rc,
    }
}

fn cases() -> Vec<(&'static str, Load, Option<Session>)> {
    use Load::*;
    vec![
        (
            "missing_register",
            Rejected("no KinetoPlugin_register symbol"),
            None,
        ),
        (
            "register_error",
            Rejected("KinetoPlugin_register returned -7"),
            None,
        ),
        (
            "register_error_after_register",
            Rejected("returned -7"),
            None,
        ),
        (
            "interface_too_small",
            Rejected("interface struct too small"),
            None,
        ),
        ("missing_start", Disabled("profilerStart"), None),
        ("registers_nothing", Nothing, None),
        ("query_error", Disabled("supports no activity type"), None),
        ("twin_profilers", Usable(&["TwinA", "TwinB"]), None),
        ("foreign_ids", Usable(&["ForeignIds"]), None),
        (
            "create_error",
            Usable(&["CreateError"]),
            Some(s("CreateError", Some("profilerCreate returned -5"), None)),
        ),
        (
            "process_events_error",
            Usable(&["ProcessEventsError"]),
            Some(s(
                "ProcessEventsError",
                Some("profilerProcessEvents returned -1"),
                None,
            )),
        ),
        (
            "event_type_99",
            Usable(&["BadEventType99"]),
            Some(s(
                "BadEventType99",
                Some("invalid event type: 99"),
                Some(-1),
            )),
        ),
        (
            "event_type_invalid",
            Usable(&["BadEventType0"]),
            Some(s("BadEventType0", Some("invalid event type: 0"), Some(-1))),
        ),
        (
            "event_type_num_types",
            Usable(&["BadEventType25"]),
            Some(s(
                "BadEventType25",
                Some("invalid event type: 25"),
                Some(-1),
            )),
        ),
        (
            "event_too_small",
            Usable(&["EventTooSmall"]),
            Some(s("EventTooSmall", Some("declares 24 bytes"), Some(-1))),
        ),
        (
            "flow_too_small",
            Usable(&["FlowTooSmall"]),
            Some(s("FlowTooSmall", Some("setLastEventFlow"), Some(-1))),
        ),
        (
            "name_null",
            Usable(&["NullEventName"]),
            Some(s("NullEventName", Some("NULL name"), Some(-1))),
        ),
        (
            "name_before_event",
            Usable(&["NameBeforeEvent"]),
            Some(s("NameBeforeEvent", Some("before any addEvent"), Some(-1))),
        ),
        (
            "name_huge",
            Usable(&["HugeName"]),
            Some(s("HugeName", Some("longer than 4096 bytes"), Some(0))),
        ),
        (
            "name_invalid_utf8",
            Usable(&["InvalidUtf8Name"]),
            Some(s("InvalidUtf8Name", Some("not valid UTF-8"), Some(0))),
        ),
        (
            "event_end_before_start",
            Usable(&["EndBeforeStart"]),
            Some(s("EndBeforeStart", Some("ends before it starts"), Some(0))),
        ),
        (
            "metadata_after_rejected_event",
            Usable(&["MetadataAfterRejected"]),
            Some(s(
                "MetadataAfterRejected",
                Some(
                    "addLastEventMetadata after a rejected addEvent (not applied): addEvent with \
                     an invalid event type",
                ),
                Some(-1),
            )),
        ),
        (
            "metadata_invalid_json",
            Usable(&["InvalidJsonMetadata"]),
            Some(s("InvalidJsonMetadata", Some("not JSON"), Some(0))),
        ),
        (
            "counter_non_numeric",
            Usable(&["NonNumericCounter"]),
            Some(s("NonNumericCounter", Some("not a JSON number"), Some(-1))),
        ),
    ]
}

#[test]
fn every_broken_plugin_is_handled_and_the_host_trace_is_intact() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut sessions = Vec::new();
    for (stem, expected, session) in cases() {
        let so = plugins::build_broken(stem, dir.path());
        let result = omniprof::plugins::load_plugin(&so);
        match (expected, &result) {
            (Load::Rejected(why), Err(e)) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!("{stem}.so")) && text.contains(why),
                    "{stem}: {text}"
                );
                assert!(!matches!(e, PluginError::Directory { .. }));
            }
            (Load::Usable(names), Ok(p)) => {
                let usable: Vec<&str> = p.usable().map(|p| p.name.as_str()).collect();
                assert_eq!(usable, names, "{stem}");
            }
            (Load::Disabled(why), Ok(p)) => {
                assert_eq!(p.profilers.len(), 1, "{stem}");
                let reason = p.profilers[0].rejected.as_deref().unwrap_or_default();
                assert!(reason.contains(why), "{stem}: {reason}");
            }
            (Load::Nothing, Ok(p)) => assert!(p.profilers.is_empty(), "{stem}"),
            (_, other) => panic!("{stem}: unexpected {other:?}"),
        }
        sessions.extend(session);
    }
    // A profiler registered by a library whose entry point then failed never takes part.
    assert!(omniprof::__test::registered_profilers()
        .iter()
        .all(|p| p.name() != "RegisteredThenFailed"));

    let trace = session::record_host_steps("", 3, 4);
    let host_ops = trace
        .activities
        .iter()
        .filter(|a| &*a.name == "host::op")
        .count();
    assert_eq!(host_ops, 12, "the host's own ranges are all there");
    let errors = session::backend_errors(&trace);
    let counts = backend_counts(&trace);
    for Session {
        profiler,
        error,
        broken_call_rc,
    } in sessions
    {
        let reported: Vec<&String> = errors
            .iter()
            .filter(|e| e.starts_with(&format!("{profiler}: ")))
            .collect();
        match error {
            Some(want) => assert!(
                reported.iter().any(|got| got.contains(want)),
                "{profiler}: no {want:?} in {errors:#?}"
            ),
            None => assert!(reported.is_empty(), "{profiler}: {reported:?}"),
        }
        if let Some(rc) = broken_call_rc {
            assert!(
                counts.get(profiler).copied().unwrap_or(0) >= 2,
                "{profiler}: {counts:?}"
            );
            let after = trace
                .activities
                .iter()
                .filter(|a| &*a.name == "after_broken_call")
                .filter_map(|a| a.arg("broken_call_rc"))
                .filter_map(|v| v.to_json().parse::<i64>().ok())
                .any(|got| got == rc);
            assert!(after, "{profiler}: no after_broken_call with rc {rc}");
        }
    }
    // Metadata meant for a rejected event lands on no other.
    assert!(trace
        .activities
        .iter()
        .all(|a| a.arg("rejected_event_key").is_none()));
    // Counters: the numeric samples of the non-numeric plugin form a series.
    let samples: usize = trace
        .counters
        .series()
        .iter()
        .filter(|s| &*s.track.name == "sm_activity")
        .map(|s| s.samples.len())
        .sum();
    assert_eq!(samples, 2);

    let path = dir.path().join("corpus.pt.trace.json");
    omniprof::trace::save(&trace, &path).unwrap();
    checker::assert_loads_in_perfetto(&path);
}

fn backend_counts(trace: &Trace) -> HashMap<String, u64> {
    trace
        .health
        .backends
        .iter()
        .map(|b| (b.name.clone(), b.activities))
        .collect()
}
