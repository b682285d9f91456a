//! Proves that bad input at the edges is an error value that says what and where, never a
//! panic or a lost recording: saving to a path that cannot be written names the path,
//! leaves no temporary file, and leaves the trace intact and savable elsewhere; a truncated
//! trace file is an error naming the file; a malformed config line names its line and key;
//! an unknown activity type names itself; and recording past the per-thread cap is counted
//! exactly in `dropped_events` instead of crashing or growing without bound.

use std::path::{Path, PathBuf};

use omniprof::trace::{ActivitySet, ActivityType, Trace, UnknownActivityType};
use omniprof::{record_function, Config, ConfigErrorReason, Profiler};
use omniprof_read::{ReadErrorKind, TraceReader};
use omniprof_test_support::lock::serial;
use omniprof_test_support::session;

fn recorded_trace() -> Trace {
    let _serial = serial();
    session::record_sample_session()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Saving to `bad` fails at `stage` with a message naming `bad`; nothing is left behind but
/// `expected_files`; the trace is unchanged and then saves and reads back elsewhere.
fn assert_save_fails_cleanly(
    trace: &Trace,
    dir: &Path,
    bad: &Path,
    stage: &str,
    expected_files: &[PathBuf],
) {
    let before = trace.clone();
    let err = omniprof::trace::save(trace, bad).expect_err("saving must fail");
    assert_eq!(err.path, bad);
    assert_eq!(err.stage, stage, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&bad.display().to_string()),
        "the error does not name the path: {message}"
    );
    assert_eq!(
        files_under(dir),
        expected_files,
        "files left after the failure"
    );
    assert_eq!(*trace, before, "a failed save must not change the trace");

    let good = dir.join("saved elsewhere.pt.trace.json");
    let stats = omniprof::trace::save(trace, &good).expect("the trace still saves elsewhere");
    assert!(stats.events as usize > trace.activities.len());
    let read = TraceReader::new().read_path(&good).into_trace().unwrap();
    assert_eq!(read.activities, trace.activities);
    std::fs::remove_file(&good).unwrap();
}

#[test]
fn saving_into_a_missing_directory_is_an_error_naming_the_path() {
    let trace = recorded_trace();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir
        .path()
        .join("no such dir")
        .join("deeper")
        .join("t.pt.trace.json");
    assert_save_fails_cleanly(&trace, dir.path(), &bad, "create", &[]);
    let bad_gz = dir.path().join("missing").join("t.json.gz");
    assert_save_fails_cleanly(&trace, dir.path(), &bad_gz, "create", &[]);
}

#[test]
fn saving_under_a_regular_file_is_an_error_naming_the_path() {
    let trace = recorded_trace();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a file");
    std::fs::write(&file, b"not a directory").unwrap();
    let bad = file.join("t.pt.trace.json");
    assert_save_fails_cleanly(
        &trace,
        dir.path(),
        &bad,
        "create",
        std::slice::from_ref(&file),
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
}

#[test]
fn saving_onto_a_directory_is_refused_before_writing() {
    let trace = recorded_trace();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("a directory.json");
    std::fs::create_dir(&bad).unwrap();
    assert_save_fails_cleanly(&trace, dir.path(), &bad, "refused", &[]);
    assert!(bad.is_dir());
}

#[test]
fn a_truncated_trace_file_is_an_error_naming_the_file_and_keeps_what_was_read() {
    let trace = recorded_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    omniprof::trace::save(&trace, &path).unwrap();
    let text = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &text[..text.len() * 2 / 3]).unwrap();

    let err = TraceReader::new()
        .read_path(&cut)
        .into_trace()
        .expect_err("a truncated file is an error");
    assert!(matches!(err.kind, ReadErrorKind::Truncated { .. }), "{err}");
    assert_eq!(err.location.path.as_deref(), Some(cut.as_path()));
    assert!(
        err.to_string().starts_with(&format!("{}: ", cut.display())),
        "{err}"
    );

    let partial = TraceReader::new().read_path(&cut);
    assert!(partial.error.is_some());
    let kept = partial.trace.activities.len();
    assert!(kept > 0 && kept < trace.activities.len(), "kept {kept}");
    assert_eq!(partial.trace.activities[..], trace.activities[..kept]);
}

#[test]
fn a_malformed_config_line_is_an_error_naming_its_line_and_key() {
    let mut config = Config::parse("ACTIVITY_TYPES=cpu_op\n").unwrap();
    let before = config.clone();
    let text =
        "# a comment\nACTIVITY_TYPES=cpu_op,user_annotation\n\nPROFILE_START_ITERATION=soon\n";
    let err = config.apply(text).expect_err("not an integer");
    assert_eq!(err.line, 4);
    assert_eq!(err.key.as_deref(), Some("PROFILE_START_ITERATION"));
    assert!(
        matches!(&err.reason, ConfigErrorReason::Integer { value, .. } if value == "soon"),
        "{:?}",
        err.reason
    );
    let message = err.to_string();
    for part in ["line 4", "PROFILE_START_ITERATION", "\"soon\""] {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    assert_eq!(
        config, before,
        "a rejected config leaves the config unchanged"
    );

    let err = Config::parse("ACTIVITIES_ENABLED=true\nno equals sign here\n").unwrap_err();
    assert_eq!((err.line, err.key.as_deref()), (2, None));
    assert_eq!(
        err.reason,
        ConfigErrorReason::Syntax("no equals sign here".into())
    );
    assert!(err.to_string().starts_with("line 2: "), "{err}");

    let err = Config::parse("ACTIVITIES_ENABLED=maybe").unwrap_err();
    assert_eq!(
        (err.line, err.key.as_deref()),
        (1, Some("ACTIVITIES_ENABLED"))
    );
    assert_eq!(err.reason, ConfigErrorReason::Bool("maybe".into()));
}

#[test]
fn an_unknown_activity_type_is_an_error_naming_it() {
    assert_eq!(
        ActivityType::parse("memcopy"),
        Err(UnknownActivityType {
            name: "memcopy".into()
        })
    );
    let err = ActivitySet::parse_list("cpu_op, gpu_memcpy, memcopy ,kernel").unwrap_err();
    assert_eq!(err.name, "memcopy");
    assert!(err.to_string().contains("\"memcopy\""), "{err}");

    let err =
        Config::parse("ACTIVITIES_ENABLED=true\nACTIVITY_TYPES=cpu_op,memcopy\n").unwrap_err();
    assert_eq!((err.line, err.key.as_deref()), (2, Some("ACTIVITY_TYPES")));
    assert_eq!(
        err.reason,
        ConfigErrorReason::ActivityType("memcopy".into())
    );
    assert_eq!(
        err.to_string(),
        "line 2: ACTIVITY_TYPES: invalid activity type \"memcopy\""
    );
}

#[test]
fn recording_past_the_per_thread_cap_counts_every_dropped_event() {
    let _serial = serial();
    let mut config = Config::default();
    // 4096 records: exactly one buffer chunk, so the cap is not rounded.
    config
        .apply("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=4096")
        .unwrap();
    assert_eq!(config.max_host_records_per_thread(), 4096);
    let mut profiler = Profiler::builder().config(config).build().unwrap();
    profiler.start().unwrap();
    std::thread::Builder::new()
        .name("capped".into())
        .spawn(|| {
            // Record 1 is the outer begin; records 2..=4095 hold 2047 inner ranges; record
            // 4096 is the begin of inner range 2048, whose end is the first drop. The 952
            // ranges after it are refused at their begin (1 drop each, no end attempted),
            // and the outer end is dropped too: 1 + 952 + 1 = 954.
            let _outer = record_function("outer");
            for _ in 0..3_000 {
                let _inner = record_function("inner");
            }
        })
        .unwrap()
        .join()
        .unwrap();
    // Another thread has its own cap.
    for _ in 0..10 {
        let _r = record_function("main");
    }
    let trace = profiler.stop().expect("stop after the cap was reached");

    assert_eq!(trace.health.dropped_events, Some(954));
    // The two ranges whose ends were dropped (inner range 2048 and the outer one) have no
    // known duration: they are left out, not stretched to the window's end.
    assert_eq!(trace.health.unfinished_ranges, None);
    let named = |n: &str| {
        trace
            .activities
            .iter()
            .filter(|a| &*a.name == n)
            .collect::<Vec<_>>()
    };
    assert_eq!(named("inner").len(), 2_047);
    assert!(named("outer").is_empty());
    assert_eq!(named("main").len(), 10);
    assert!(trace
        .activities
        .iter()
        .all(|a| a.arg("finished").is_none() && a.end_ns < trace.window.end_ns));

    // The counts reach the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("capped.json");
    omniprof::trace::save(&trace, &path).unwrap();
    let read = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert_eq!(read.health.dropped_events, Some(954));
    assert_eq!(read.activities.len(), trace.activities.len());

    // The cap belongs to that session: the next one, with the default cap, drops nothing.
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    std::thread::spawn(|| {
        for _ in 0..3_000 {
            let _inner = record_function("inner");
        }
    })
    .join()
    .unwrap();
    let trace = profiler.stop().unwrap();
    assert_eq!(trace.health.dropped_events, Some(0));
    assert_eq!(trace.activities.len(), 3_000);
}
