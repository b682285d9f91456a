//! On-demand tracing of a running process, end to end with real processes: `omniprof demo
//! --ondemand` runs the OpenReg workload and serves triggers; `omniprof trigger` asks it for
//! a trace by duration and by iterations, and both traces hold the device timeline and load
//! in Perfetto. Bad triggers (an output outside the allowed directory, garbage and oversized
//! messages on the socket, a pid that does not listen) are refused, and the process keeps
//! running and serving after each, with nothing extra written. A demo whose time is up exits
//! 0 and removes its socket; `--ondemand` with options it would ignore exits 2.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use omniprof::on_demand::RuntimeDir;
use omniprof_read::TraceReader;
use omniprof_test_support::checker::assert_loads_in_perfetto;
use omniprof_test_support::cli::{text, Cli};
use omniprof_trace::ActivityType;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// `omniprof` allowed to write on-demand traces into `allowed`.
fn omniprof(allowed: &Path) -> Cli {
    OMNIPROF.env("KINETO_ONDEMAND_TRACE_DIR", allowed)
}

/// Generous: the machine may be busy building other tests.
const DEADLINE: Duration = Duration::from_secs(120);

/// The demo child, killed when the test ends however it ends.
struct Demo {
    child: Child,
    pid: u32,
    /// Kept open: the demo prints as it runs, and a closed pipe would end it.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    fn start(allowed: &Path) -> Demo {
        let mut child = omniprof(allowed)
            .command(["demo", "--ondemand", "--seconds", "300", "--threads", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the demo");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let pid = child.id();
        assert!(first.contains(&format!("pid {pid}")), "{first:?}");
        Demo {
            child,
            pid,
            _stdout: stdout,
        }
    }

    fn assert_alive(&mut self, after: &str) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the demo exited after {after}"
        );
    }
}

/// Runs `omniprof trigger args...` allowed to write into `allowed`.
fn trigger(allowed: &Path, args: &[&str]) -> Output {
    omniprof(allowed).run([&["trigger"][..], args].concat())
}

/// Triggers `pid` and returns the written trace's path; the trigger must succeed.
fn traced(allowed: &Path, pid: u32, extra: &[&str], config: &Path) -> PathBuf {
    let pid = pid.to_string();
    let dir = allowed.to_str().unwrap();
    let mut args = vec!["--pid", &pid, "--output-dir", dir];
    args.extend_from_slice(&["--config", config.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let out = trigger(allowed, &args);
    assert!(
        out.status.success(),
        "trigger {extra:?} failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let path = PathBuf::from(text(&out.stdout).trim());
    assert!(path.is_file(), "{} was not written", path.display());
    assert!(path.starts_with(allowed), "{} is outside", path.display());
    path
}

/// The files in `dir`.
fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// Holds the OpenReg timeline: kernels on a device row, linked to the host ops that launched
/// them.
fn assert_device_timeline(path: &Path) {
    let trace = TraceReader::new().read_path(path).into_trace().unwrap();
    let host_pid = trace
        .activities
        .iter()
        .find(|a| a.kind == ActivityType::CpuOp)
        .map(|a| a.device)
        .expect("host ops");
    let kernels: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
        .collect();
    assert!(!kernels.is_empty(), "no kernels in {}", path.display());
    // A kernel launched by an op that began before the window opened (or ended after it
    // closed) has no op in the trace to link to; the others do.
    let ops: std::collections::HashSet<u64> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::CpuOp)
        .map(|a| a.correlation)
        .collect();
    let linked = kernels
        .iter()
        .filter(|k| k.linked_correlation.is_some_and(|op| ops.contains(&op)))
        .count();
    assert!(
        kernels.iter().all(|k| k.device != host_pid),
        "a kernel on the host row"
    );
    assert!(
        linked * 2 > kernels.len(),
        "only {linked} of {} kernels are linked to host ops in {}",
        kernels.len(),
        path.display()
    );
    assert_loads_in_perfetto(path);
}

/// Sends raw bytes on the demo's socket and returns the reply (empty when it hung up).
fn raw(pid: u32, bytes: &[u8]) -> String {
    let socket = RuntimeDir::user().unwrap().socket_path(pid);
    let mut stream = UnixStream::connect(&socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The server may stop reading (and close) before everything is written.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut reply = String::new();
    let _ = BufReader::new(stream).read_line(&mut reply);
    reply
}

#[test]
fn a_running_demo_is_traced_on_demand_and_survives_bad_triggers() {
    let allowed = tempfile::tempdir().unwrap();
    let allowed_path = allowed.path().canonicalize().unwrap();
    let allowed = allowed_path.as_path();
    // No five-second warm-up before a time-based trace.
    let config = allowed.join("trigger.conf");
    std::fs::write(&config, "ACTIVITIES_WARMUP_PERIOD_SECS=0\n").unwrap();
    let mut demo = Demo::start(allowed);

    let started = Instant::now();
    while !text(&trigger(allowed, &["--list"]).stdout).contains(&demo.pid.to_string()) {
        assert!(started.elapsed() < DEADLINE, "the demo never listed itself");
        std::thread::sleep(Duration::from_millis(100));
    }

    let by_time = traced(allowed, demo.pid, &["--duration-ms", "300"], &config);
    assert_device_timeline(&by_time);
    let by_steps = traced(allowed, demo.pid, &["--iterations", "3"], &config);
    assert_ne!(by_time, by_steps);
    assert_device_timeline(&by_steps);
    demo.assert_alive("two traces");

    let written = files(allowed);
    let pid = demo.pid.to_string();
    let escape = format!("{}/../x", allowed.display());
    for dir in ["/etc", escape.as_str()] {
        let out = trigger(
            allowed,
            &["--pid", &pid, "--duration-ms", "300", "--output-dir", dir],
        );
        assert_eq!(out.status.code(), Some(1), "{dir}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(err.contains("refused"), "{dir}: {err}");
        demo.assert_alive(dir);
    }

    let garbage = raw(demo.pid, b"\x00\xffnot a frame at all\n\n\n");
    assert!(garbage.contains("error"), "garbage got {garbage:?}");
    demo.assert_alive("garbage bytes");
    let huge = format!("omniprof-trigger/1 trace {}\n", 100 << 20).into_bytes();
    let mut message = huge;
    message.resize(message.len() + (100 << 20), b'A');
    let reply = raw(demo.pid, &message);
    assert!(reply.contains("error"), "a 100 MB message got {reply:?}");
    demo.assert_alive("a 100 MB message");

    // This test's own process is alive and does not listen.
    let silent = std::process::id();
    let out = trigger(
        allowed,
        &["--pid", &silent.to_string(), "--duration-ms", "300"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("process {silent} ")) && err.contains("OMNIPROF_ONDEMAND=1"),
        "{err}"
    );

    // Refused requests recorded nothing and left the engine waiting for the next one.
    assert_eq!(files(allowed), written, "a refused trigger wrote a file");
    let listed = text(&trigger(allowed, &["--list"]).stdout);
    let line = listed
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("the demo is no longer listed: {listed}"));
    assert!(
        line.contains("WaitForRequest") && !line.contains("request #"),
        "{line}"
    );

    let last = traced(allowed, demo.pid, &["--duration-ms", "300"], &config);
    assert_device_timeline(&last);
    demo.assert_alive("the last trace");
}

#[test]
fn the_demo_prints_how_to_trigger_it_and_exits_cleanly_when_its_time_is_up() {
    let allowed = tempfile::tempdir().unwrap();
    let out =
        omniprof(allowed.path()).run(["demo", "--ondemand", "--seconds", "1", "--threads", "1"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let pid = stdout
        .split_once("pid ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no pid in {stdout:?}"));
    for command in [
        format!("omniprof trigger --pid {pid} --duration-ms 500"),
        format!("omniprof trigger --pid {pid} --iterations 5"),
    ] {
        assert!(stdout.contains(&command), "{command:?} not in {stdout:?}");
    }
    assert!(stdout.contains(" iterations\n"), "{stdout}");
    let socket = RuntimeDir::user()
        .unwrap()
        .socket_path(pid.parse().unwrap());
    assert!(!socket.exists(), "{} was left behind", socket.display());
}

#[test]
fn the_demo_refuses_on_demand_mixed_with_options_it_would_ignore() {
    for args in [
        &["--ondemand"][..],
        &["--seconds", "1"],
        &["--ondemand", "--seconds", "1", "--mode", "stubs"],
        &["--ondemand", "--seconds", "1", "--steps", "5"],
        &["--ondemand", "--seconds", "1", "-o", "x.json"],
        &[
            "--ondemand",
            "--seconds",
            "1",
            "--schedule",
            "1,1,1",
            "--trace-dir",
            "x",
        ],
    ] {
        OMNIPROF.fails(2, [&["demo"][..], args].concat());
    }
}

#[test]
fn the_trigger_client_says_what_the_trace_it_hands_back_lost() {
    let allowed = tempfile::tempdir().unwrap();
    let allowed_path = allowed.path().canonicalize().unwrap();
    let allowed = allowed_path.as_path();
    let mut demo = Demo::start(allowed);
    let started = Instant::now();
    while !text(&trigger(allowed, &["--list"]).stdout).contains(&demo.pid.to_string()) {
        assert!(started.elapsed() < DEADLINE, "the demo never listed itself");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A budget the demo's device overruns in any window.
    let config = allowed.join("small_budget.conf");
    std::fs::write(
        &config,
        "ACTIVITIES_WARMUP_PERIOD_SECS=0\nOMNIPROF_MAX_EVENTS_PER_BACKEND=10\n",
    )
    .unwrap();
    let pid = demo.pid.to_string();
    let dir = allowed.to_str().unwrap();
    let out = trigger(
        allowed,
        &[
            "--pid",
            &pid,
            "--output-dir",
            dir,
            "--config",
            config.to_str().unwrap(),
            "--duration-ms",
            "300",
        ],
    );
    demo.assert_alive("a trigger with a small budget");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let path = PathBuf::from(text(&out.stdout).trim());
    assert!(path.is_file(), "{} was not written", path.display());
    // The path alone on stdout; on stderr, each backend the budget cut short.
    let stderr = text(&out.stderr);
    let lost: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("note: the trace lacks records of a backend: "))
        .collect();
    assert!(!lost.is_empty(), "{stderr}");
    assert!(
        lost.iter()
            .all(|l| l.contains("OMNIPROF_MAX_EVENTS_PER_BACKEND")),
        "{stderr}"
    );
}
