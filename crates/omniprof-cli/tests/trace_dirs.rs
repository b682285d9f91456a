//! A directory of traces is read by one rule in every command (`summary`, `ranks`,
//! `report`, `convert --format parquet`): its regular files named `*.json`, `*.json.gz` or
//! `*.pftrace`; every other entry is named on standard error with why it was skipped, and a
//! FIFO named like a trace is skipped (never opened, which would wait for a writer forever).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use omniprof_test_support::cli::{text, Cli};
use omniprof_test_support::data::two_op_trace as trace;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// Runs `command` to its end, or kills it after a minute: a regression that blocks fails
/// the test instead of hanging it.
fn run_with_timeout(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("omniprof starts");
    let start = Instant::now();
    while child
        .try_wait()
        .expect("omniprof can be waited on")
        .is_none()
    {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().expect("omniprof can be killed");
            let out = child.wait_with_output().unwrap();
            panic!("still running after a minute: {}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
}

#[test]
fn a_fifo_named_like_a_trace_is_skipped_as_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.json"), trace(Some(0))).unwrap();
    mkfifo(&dir.path().join("x.json"));
    // What each prints of the good trace.
    for (command, want) in [
        ("summary", "aten::linear"),
        ("ranks", "rank 0: ./good.json"),
    ] {
        let out = run_with_timeout(OMNIPROF.current_dir(dir.path()).command([command, "."]));
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{command}: {stderr}");
        assert_eq!(
            stderr, "warning: ./x.json: skipped: not a regular file (a FIFO)\n",
            "{command}"
        );
        assert!(text(&out.stdout).contains(want), "{command}");
    }
}

#[test]
fn parquet_reads_a_directory_s_pftrace_files_as_summary_does() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let json = dir.path().join("a.json");
    std::fs::write(&json, trace(Some(3))).unwrap();
    OMNIPROF.ok([
        "convert".as_ref(),
        json.as_os_str(),
        "-o".as_ref(),
        run.join("a.pftrace").as_os_str(),
    ]);
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "run", "-o", "tables", "--format", "parquet"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        text(&out.stdout).starts_with("wrote rank 3 of run/a.pftrace ("),
        "{}",
        text(&out.stdout)
    );
    assert!(dir
        .path()
        .join("tables/slices/rank=3/part-0.parquet")
        .is_file());
}
