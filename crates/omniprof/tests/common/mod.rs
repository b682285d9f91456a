//! Helpers shared by the end-to-end tests of both crates (the CLI tests include this file
//! with `#[path]`): locating and running the offline Perfetto checker, serializing the tests
//! that record, one realistic recorded session, and ([`plugins`]) building plugins.
//!
//! The checker is `shared/tools/perfetto-check/check.sh`, found beside the workspace (in CI
//! the repository is a clone with `shared/` next to it) or named by
//! `OMNIPROF_PERFETTO_CHECK`. When it cannot be found or run, a check is skipped with a
//! message, unless `OMNIPROF_REQUIRE_PERFETTO_CHECK` is set (as CI does), which makes that a
//! failure.

#![allow(dead_code)]

/// Building the test plugins of the dynamic plugin ABI (C sample, broken corpus, OpenReg).
pub mod plugins;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use omniprof::{instant, record_function, record_op, Profiler, Trace};

/// Names the checker script, overriding the search.
pub const CHECKER_ENV: &str = "OMNIPROF_PERFETTO_CHECK";
/// When set (to anything), a checker that cannot be found or run fails the test.
pub const REQUIRE_ENV: &str = "OMNIPROF_REQUIRE_PERFETTO_CHECK";

const CHECKER_IN_SHARED: &str = "shared/tools/perfetto-check/check.sh";

/// What the checker printed: Perfetto's counts (null after a fatal error) and its errors.
#[derive(Debug)]
pub struct PerfettoReport {
    pub exit_code: i32,
    pub slices: Option<u64>,
    pub counters: Option<u64>,
    pub flows: Option<u64>,
    pub threads: Option<u64>,
    pub processes: Option<u64>,
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

/// The checker script: `$OMNIPROF_PERFETTO_CHECK`, else the first
/// `<ancestor>/shared/tools/perfetto-check/check.sh` above this crate (which covers both a
/// `shared/` inside the workspace and one beside it).
fn locate_checker() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(CHECKER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{CHECKER_ENV}={} is not a file", path.display()))
        };
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .map(|dir| dir.join(CHECKER_IN_SHARED))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "no {CHECKER_IN_SHARED} in {} or any directory above it, and {CHECKER_ENV} is unset",
                manifest_dir.display()
            )
        })
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
        panic!("the Perfetto checker is required ({REQUIRE_ENV} is set) but cannot run: {reason}");
    }
    eprintln!(
        "SKIPPED Perfetto check: {reason}. Set {CHECKER_ENV} to check.sh, or set {REQUIRE_ENV} \
         to make this a failure."
    );
    None
}

/// Runs `run` once the first call has finished: that call may fetch the checker's assets
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

/// Asserts that `trace` loads in Perfetto's trace processor with exit 0 and no errors, and
/// returns the report. `None`: skipped, see the module docs.
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
        report.slices.is_some(),
        "no slice count for {}: {}",
        trace.display(),
        report.line
    );
    Some(report)
}

/// Sessions are process-wide and the tests of one binary run on parallel threads: every
/// test that records holds this lock.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A name with everything JSON writers get wrong: quotes, backslashes, newlines, control
/// characters (NUL and DEL included), and non-ASCII text.
pub const NASTY: &str =
    "say \"hi\" C:\\temp\\x\n\ttab\r\u{0}\u{1}\u{1b}[0m\u{1f}\u{7f} ünïcødé ✓ 😀 \u{2028}";

/// Rows and names a [`record_sample_session`] produces.
pub const WORKER_DONE: &str = "worker done \"early\"";
pub const WORKER_LIVE: &str = "worker \\ still \n alive ☃";
pub const STEPS: usize = 25;

/// Records one session the way an application would: the calling thread runs nested ranges
/// and ops with args, input shapes and instants; one worker thread records and exits before
/// `stop`; another records and is still alive at `stop`. Names hold [`NASTY`] text.
/// The caller holds [`serial`].
pub fn record_sample_session() -> Trace {
    let mut profiler = Profiler::builder().build().expect("build a profiler");
    profiler.start().expect("start a session");

    let early = std::thread::Builder::new()
        .name("early".into())
        .spawn(|| {
            omniprof::record::set_thread_name(WORKER_DONE);
            for step in 0..STEPS {
                let _s = record_function(format!("ProfilerStep#{step}"));
                let _f = record_function("forward");
                let _mm = record_op("aten::mm").with_input_shapes(&[&[8, 16], &[16, 4]]);
            }
        })
        .expect("spawn a worker");
    early.join().expect("the early worker ran");

    // This worker is still alive at stop: it reports when its ranges are closed and waits
    // to be released after the session ends.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let live = std::thread::Builder::new()
        .name("live".into())
        .spawn(move || {
            omniprof::record::set_thread_name(WORKER_LIVE);
            for i in 0..STEPS as i64 {
                let _r = record_function(NASTY).with_arg(NASTY, NASTY);
                instant("tick").with_arg("i", i);
            }
            done_tx.send(()).expect("report done");
            release_rx.recv().expect("wait for release");
        })
        .expect("spawn a worker");

    {
        let _outer = record_function(format!("outer {NASTY}"))
            .with_arg("batch", 32i64)
            .with_arg("lr", 0.125f64)
            .with_arg("train", true)
            .with_arg("label", "a \"quoted\" \\ value\n")
            .with_arg(&format!("key {NASTY}"), -7i64);
        for layer in 0..3i64 {
            omniprof::scope!("block");
            let _op = record_op("aten::addmm")
                .with_input_shapes(&[&[64], &[64, 128], &[128, 64]])
                .with_arg("layer", layer);
            instant(format!("mark {layer} {NASTY}")).with_arg("note", NASTY);
        }
        let _named = record_op("C:\\path\\to\\op \"x\"");
    }

    done_rx.recv().expect("the live worker finished recording");
    let trace = profiler.stop().expect("stop the session");
    release_tx.send(()).expect("release the live worker");
    live.join().expect("the live worker ran");
    trace
}

/// The rows of the reference's example: host process 4242 with one thread, device 0 with
/// stream 7, as Kineto writes them.
pub fn add_example_rows(trace: &mut omniprof::Trace) {
    use omniprof::trace::{ProcessRow, ThreadRow};
    for (pid, label, sort_index) in [(4242, "CPU", 4242), (0, "GPU 0", 5_000_000)] {
        trace.add_process(ProcessRow {
            pid,
            name: "python".into(),
            label: label.into(),
            sort_index,
        });
    }
    trace.add_thread(ThreadRow {
        pid: 4242,
        tid: 4242,
        name: "thread 4242 (python)".into(),
        sort_index: 4242,
    });
    trace.add_thread(ThreadRow {
        pid: 0,
        tid: 7,
        name: "stream 7 ".into(),
        sort_index: 7,
    });
}
