//! The Perfetto checker's assertion fails on a trace that loads as nothing: Perfetto reports
//! no error for events it never saw, so an empty load must not pass.

use std::panic::{catch_unwind, AssertUnwindSafe};

use omniprof_test_support::checker;

#[test]
fn a_trace_that_loads_with_no_slice_fails_the_load_check() {
    let dir = std::env::temp_dir().join(format!("omniprof-checker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rows_only.json");
    // Valid JSON that Perfetto loads without an error: a process row, and no event.
    std::fs::write(
        &path,
        r#"{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}}]}"#,
    )
    .unwrap();
    // Skipped (visibly, or failing where every check is required) without the checker.
    let Some(report) = checker::run_checker(&path) else {
        return;
    };
    assert_eq!(
        (report.exit_code, report.slices, report.errors.len()),
        (0, Some(0), 0),
        "{}",
        report.line
    );
    let failed = catch_unwind(AssertUnwindSafe(|| {
        checker::assert_loads_in_perfetto(&path)
    }))
    .expect_err("a load with no slice passed");
    let message = failed
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.starts_with(&format!(
            "Perfetto counted no slice in {}: ",
            path.display()
        )),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
