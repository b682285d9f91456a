//! `omniprof trigger` as a user runs it, against a server in this test process whose handler
//! records and saves real sessions: a duration trigger prints the path of a trace that reads
//! back; `--list` shows the server; an output directory of `/etc` is refused with exit 1;
//! a pid that does not listen is named with how to opt in, one of no process said not to
//! exist; a request over the body limit is refused unsent; bad arguments, a bad `--config`
//! line and bad `--activities` exit 2 before anything is sent; `--dump` prints the path of the
//! flight recorder's dump, and without a flight recorder exits 1 saying so.
#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;

use omniprof::on_demand::{
    on_demand_trace_dir, CancelledRequest, NotCancelled, OnDemandState, OnDemandTrigger,
    RuntimeDir, TriggerRefused,
};
use omniprof_read::TraceReader;
use omniprof_test_support::cli::{text, Cli};
use omniprof_test_support::lock::serial;
use omniprof_test_support::trigger::{Recorder, STEP};

/// `omniprof` with `xdg` as `$XDG_RUNTIME_DIR`, so that the sockets `trigger` looks for are
/// this test's.
fn omniprof(xdg: &Path) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_omniprof")).env("XDG_RUNTIME_DIR", xdg)
}

#[test]
fn a_trigger_prints_the_path_of_the_trace_and_list_shows_the_process() {
    let xdg = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir_in(on_demand_trace_dir()).unwrap();
    let dir = RuntimeDir::at(xdg.path().join("omniprof")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let _server = dir.listen(recorder.clone()).unwrap();
    let pid = std::process::id().to_string();
    let out_dir = out.path().to_str().unwrap();

    let run = omniprof(xdg.path()).run([
        "trigger",
        "--pid",
        &pid,
        "--duration-ms",
        "30",
        "--activities",
        "cpu_op,user_annotation",
        "--output-dir",
        out_dir,
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{stderr}");
    let path = Path::new(stdout.trim_end());
    assert!(
        path.starts_with(std::fs::canonicalize(out.path()).unwrap()),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!("_{pid}.pt.trace.json\n")),
        "{stdout}"
    );
    let read = TraceReader::new().read_path(path);
    assert!(read.error.is_none(), "{:?}", read.error);
    assert!(read.trace.activities.iter().any(|a| &*a.name == STEP));

    let listed = omniprof(xdg.path()).ok(["trigger", "--list"]);
    let row = listed.lines().find(|l| l.trim_start().starts_with(&pid));
    let row = row.unwrap_or_else(|| panic!("pid {pid} not listed:\n{listed}"));
    assert!(row.contains("idle"), "{row}");

    let refused = omniprof(xdg.path()).run([
        "trigger",
        "--pid",
        &pid,
        "--iterations",
        "2",
        "--output-dir",
        "/etc",
    ]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("process {pid} refused")),
        "{stderr}"
    );
    assert!(stderr.contains("\"/etc/omniprof_trigger_"), "{stderr}");
    assert_eq!(recorder.calls(), 1);
}

#[test]
fn a_pid_that_does_not_listen_is_named_with_how_to_opt_in() {
    let xdg = tempfile::tempdir().unwrap();
    // This test's process: alive, and with no server in this runtime directory.
    let pid = std::process::id().to_string();
    let run = omniprof(xdg.path()).run(["trigger", "--pid", &pid, "--duration-ms", "10"]);
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("process {pid} is not listening")),
        "{stderr}"
    );
    assert!(stderr.contains("OMNIPROF_ONDEMAND=1"), "{stderr}");

    let list = omniprof(xdg.path()).run(["trigger", "--list"]);
    assert!(list.status.success());
    assert!(
        text(&list.stderr).contains("no process listens"),
        "{}",
        text(&list.stderr)
    );
}

#[test]
fn a_pid_of_no_process_is_said_not_to_exist_rather_than_not_to_listen() {
    let xdg = tempfile::tempdir().unwrap();
    // Above the kernel's largest pid (2^22).
    for args in [&["--duration-ms", "10"][..], &["--cancel"]] {
        let run = omniprof(xdg.path()).run([&["trigger", "--pid", "999999999"][..], args].concat());
        assert_eq!(run.status.code(), Some(1), "{args:?}");
        assert_eq!(
            text(&run.stderr),
            "error: process 999999999 does not exist (no /proc/999999999)\n",
            "{args:?}"
        );
    }
}

#[test]
fn a_request_over_the_body_limit_is_refused_naming_its_size_and_the_limit() {
    let xdg = tempfile::tempdir().unwrap();
    let dir = RuntimeDir::at(xdg.path().join("omniprof")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let _server = dir.listen(recorder.clone()).unwrap();
    let config = xdg.path().join("big.conf");
    // 70 KiB of comments: a valid config, too big for one request.
    let line = format!("# {}\n", "x".repeat(1021));
    std::fs::write(&config, line.repeat(70)).unwrap();
    let pid = std::process::id().to_string();
    let run = omniprof(xdg.path()).run([
        "trigger",
        "--pid",
        &pid,
        "--duration-ms",
        "10",
        "--config",
        config.to_str().unwrap(),
    ]);
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    let (size, limit) = (70 * 1024, omniprof::on_demand::TRIGGER_MAX_BODY);
    assert!(stderr.starts_with("error: the request is 7"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            " bytes, over the limit of {limit} bytes a trigger takes (--config {} gives \
             {size} of them)",
            config.display()
        )),
        "{stderr}"
    );
    assert_eq!(recorder.calls(), 0, "the request was sent");
}

#[test]
fn bad_arguments_exit_2_before_anything_is_sent() {
    let xdg = tempfile::tempdir().unwrap();
    let config = xdg.path().join("extra.conf");
    std::fs::write(
        &config,
        "ACTIVITIES_WARMUP_ITERATIONS=1\nACTIVITIES_ENABLED=maybe\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&[], "--pid"),
        (&["--pid", "1"], "--duration-ms N or --iterations N"),
        (
            &["--pid", "1", "--duration-ms", "5", "--iterations", "2"],
            "cannot be used with",
        ),
        (&["--list", "--duration-ms", "5"], "cannot be used with"),
        (
            &[
                "--pid",
                "1",
                "--iterations",
                "2",
                "--activities",
                "cpu_op,memcopy",
            ],
            "\"memcopy\"",
        ),
        (
            &["--pid", "1", "--iterations", "2", "--config", config],
            "extra.conf: line 2: ACTIVITIES_ENABLED",
        ),
    ];
    for (args, want) in cases {
        let run = omniprof(xdg.path()).run([&["trigger"][..], args].concat());
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

/// Answers a trace with a fixed path and a note, and a cancel with what it cancelled.
struct Noted;

impl omniprof::on_demand::TriggerHandler for Noted {
    fn handle(&self, _: &str) -> Result<std::path::PathBuf, TriggerRefused> {
        Ok("/tmp/noted.pt.trace.json".into())
    }
    fn handle_traced(&self, text: &str) -> Result<omniprof::on_demand::Traced, TriggerRefused> {
        Ok(omniprof::on_demand::Traced {
            path: self.handle(text)?,
            notes: vec!["fell back to a time-based trace".to_owned()],
        })
    }
    fn state(&self) -> String {
        "idle".to_owned()
    }
    fn cancel(&self) -> Result<CancelledRequest, NotCancelled> {
        Ok(CancelledRequest {
            id: 7,
            state: OnDemandState::WaitForRequest,
            trigger: OnDemandTrigger::Iteration {
                start: 10,
                warmup: 0,
                iterations: 3,
                roundup: None,
            },
        })
    }
}

#[test]
fn the_client_prints_the_notes_of_a_trace_on_stderr_and_what_cancel_cancelled() {
    let xdg = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir_in(on_demand_trace_dir()).unwrap();
    let dir = RuntimeDir::at(xdg.path().join("omniprof")).unwrap();
    let _server = dir.listen(Arc::new(Noted)).unwrap();
    let pid = std::process::id().to_string();
    let out_dir = out.path().to_str().unwrap();

    let run = omniprof(xdg.path()).run([
        "trigger",
        "--pid",
        &pid,
        "--iterations",
        "3",
        "--output-dir",
        out_dir,
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout), "/tmp/noted.pt.trace.json\n");
    assert_eq!(text(&run.stderr), "note: fell back to a time-based trace\n");

    let cancelled = omniprof(xdg.path()).ok(["trigger", "--pid", &pid, "--cancel"]);
    assert_eq!(
        cancelled,
        "cancelled request #7 (WaitForRequest): 3 iterations from iteration 10 (warm-up 0)\n"
    );
    omniprof(xdg.path()).fails(
        2,
        ["trigger", "--pid", &pid, "--cancel", "--iterations", "3"],
    );
}

#[test]
fn dump_prints_the_flight_recorders_dump_and_without_one_exits_1_saying_so() {
    // No session of the other tests records while the flight recorder runs.
    let _serial = serial();
    let xdg = tempfile::tempdir().unwrap();
    let dir = RuntimeDir::at(xdg.path().join("omniprof")).unwrap();
    let _server = dir.listen(Arc::new(Recorder::default())).unwrap();
    let pid = std::process::id().to_string();
    let ask = || omniprof(xdg.path()).run(["trigger", "--pid", &pid, "--dump"]);

    let refused = ask();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "process {pid} refused the request: no flight recorder runs in this process"
        )),
        "{stderr}"
    );

    let dumps = tempfile::tempdir().unwrap();
    let recorder = omniprof::FlightRecorder::builder()
        .dump_dir(dumps.path())
        .start()
        .unwrap();
    omniprof::instant("before_the_dump");
    let run = ask();
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let path = Path::new(stdout.trim_end());
    assert_eq!(path.parent(), Some(dumps.path()));
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("flight_request_step"), "{name}");
    assert!(
        name.ends_with(&format!("_pid{pid}_1.pt.trace.json")),
        "{name}"
    );
    let read = TraceReader::new().read_path(path);
    assert!(read.error.is_none(), "{:?}", read.error);
    assert!(read
        .trace
        .activities
        .iter()
        .any(|a| &*a.name == "before_the_dump"));
    recorder.stop();
    assert_eq!(ask().status.code(), Some(1));
}
