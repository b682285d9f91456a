//! The on-demand engine end to end: the real profiler thread, a workload thread that records
//! one range per iteration and calls `omniprof::step()`, and requests that produce trace
//! files, which are read back and loaded in Perfetto. Also the refusals and failures a
//! trigger reports, and a synchronous session preempting an on-demand one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use omniprof::on_demand::{OnDemandState, Refused, TraceFailed};
use omniprof::{record_function, Profiler};
use omniprof_read::TraceReader;
use omniprof_test_support::checker;
use omniprof_test_support::lock::serial;

const WAIT: Duration = Duration::from_secs(30);
const RANGE_PREFIX: &str = "iteration#";

/// A thread that runs iterations of ~1 ms, each in a range named after its iteration.
struct Workload {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Workload {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let iteration = omniprof::step();
                let name = format!("{RANGE_PREFIX}{iteration}");
                let _range = record_function(&name);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        // The first step must have happened before an iteration-based request.
        while omniprof::recording::iteration() < 0 {
            std::thread::yield_now();
        }
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

/// A fresh directory inside the directory on-demand traces may be written to.
fn allowed_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(omniprof::on_demand::on_demand_trace_dir()).unwrap()
}

/// How far ahead the tests' requests start: far enough that a loaded machine does not reach
/// the start time before the request is read (a start time in the past is refused).
const START_AHEAD_MS: i64 = 500;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The iterations whose ranges the trace at `path` holds.
fn iterations_in(path: &Path) -> BTreeSet<i64> {
    let trace = TraceReader::new()
        .read_path(path)
        .into_trace()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    trace
        .activities
        .iter()
        .filter_map(|a| a.name.strip_prefix(RANGE_PREFIX)?.parse().ok())
        .collect()
}

fn wait_for_state(state: OnDemandState) {
    let deadline = Instant::now() + WAIT;
    while omniprof::on_demand::on_demand_status().state != state {
        assert!(Instant::now() < deadline, "never reached {state}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn iteration_based_request_writes_exactly_its_iterations() {
    let _serial = serial();
    let dir = allowed_dir();
    let workload = Workload::start();
    let start = omniprof::recording::iteration() + 20;
    let ticket = omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_ITERATION={start}\nACTIVITIES_WARMUP_ITERATIONS=3\n\
         ACTIVITIES_ITERATIONS=5\nACTIVITIES_LOG_FILE={}/iterations.json",
        dir.path().display()
    ))
    .unwrap();
    let path = ticket.wait(WAIT).unwrap();
    drop(workload);
    let pid = std::process::id();
    assert_eq!(path, dir.path().join(format!("iterations_{pid}.json")));
    assert_eq!(
        iterations_in(&path),
        (start..start + 5).collect::<BTreeSet<_>>()
    );
    checker::assert_loads_in_perfetto(&path);
    assert_eq!(
        omniprof::on_demand::on_demand_status().state,
        OnDemandState::WaitForRequest
    );
}

#[test]
fn duration_based_request_writes_its_window_and_refuses_a_second() {
    let _serial = serial();
    let dir = allowed_dir();
    let workload = Workload::start();
    let ticket = omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_TIME={}\nACTIVITIES_WARMUP_PERIOD_SECS=0\n\
         ACTIVITIES_DURATION_MSECS=200\nACTIVITIES_LOG_FILE={}/duration.json.gz",
        now_ms() + START_AHEAD_MS,
        dir.path().display()
    ))
    .unwrap();
    let second =
        omniprof::on_demand::request_on_demand("ACTIVITIES_DURATION_MSECS=100").unwrap_err();
    assert!(
        matches!(second, Refused::Busy(_) | Refused::Pending(_)),
        "{second}"
    );
    wait_for_state(OnDemandState::CollectTrace);
    let busy = omniprof::on_demand::request_on_demand("ACTIVITIES_DURATION_MSECS=100").unwrap_err();
    assert!(
        busy.to_string().starts_with("profiler busy until "),
        "{busy}"
    );
    let status = omniprof::on_demand::on_demand_status();
    assert_eq!(status.request.as_ref().unwrap().id, ticket.id());
    assert!(status.to_string().contains("CollectTrace"), "{status}");

    let path = ticket.wait(WAIT).unwrap();
    drop(workload);
    let iterations = iterations_in(&path);
    // ~200 ms of 1 ms iterations; every one complete and consecutive.
    assert!(iterations.len() >= 20, "{iterations:?}");
    let (first, last) = (*iterations.first().unwrap(), *iterations.last().unwrap());
    assert_eq!(iterations.len() as i64, last - first + 1, "{iterations:?}");
    checker::assert_loads_in_perfetto(&path);
}

#[test]
fn refusals_and_failures_leave_the_process_running() {
    let _serial = serial();
    let allowed = omniprof::on_demand::on_demand_trace_dir();
    for path in ["/etc/x.json".to_owned(), format!("{allowed}../x.json")] {
        let err = omniprof::on_demand::request_on_demand(&format!("ACTIVITIES_LOG_FILE={path}"))
            .unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, Refused::Config(_)), "{message}");
        assert!(message.contains(&path), "{message}");
        assert!(message.contains(&allowed), "{message}");
    }
    let err = omniprof::on_demand::request_on_demand("ACTIVITIES_DURATION_MSECS=abc").unwrap_err();
    assert!(
        err.to_string()
            .contains("line 1: ACTIVITIES_DURATION_MSECS"),
        "{err}"
    );

    // A trace directory that cannot be created: reported on the ticket.
    let dir = allowed_dir();
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let ticket = omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_TIME={}\nACTIVITIES_WARMUP_PERIOD_SECS=0\n\
         ACTIVITIES_DURATION_MSECS=50\nACTIVITIES_LOG_FILE={}/file/t.json",
        now_ms() + START_AHEAD_MS,
        dir.path().display()
    ))
    .unwrap();
    match ticket.wait(WAIT) {
        Err(TraceFailed::Write { path, error }) => {
            assert!(path.starts_with(dir.path().join("file")), "{path:?}");
            assert!(error.contains("cannot create directory"), "{error}");
        }
        other => panic!("{other:?}"),
    }

    // Cancelled while pending.
    let ticket = omniprof::on_demand::request_on_demand("ACTIVITIES_DURATION_MSECS=50").unwrap();
    assert!(omniprof::on_demand::cancel_on_demand());
    assert_eq!(ticket.wait(WAIT), Err(TraceFailed::Cancelled));
    assert!(!omniprof::on_demand::cancel_on_demand());

    // A later valid request still works.
    let ticket = omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_TIME={}\nACTIVITIES_WARMUP_PERIOD_SECS=0\n\
         ACTIVITIES_DURATION_MSECS=50\nACTIVITIES_LOG_FILE={}/after.json",
        now_ms() + START_AHEAD_MS,
        dir.path().display()
    ))
    .unwrap();
    let path: PathBuf = ticket.wait(WAIT).unwrap();
    assert!(path.is_file());
}

#[test]
fn sync_session_preempts_on_demand_and_refuses_it_meanwhile() {
    let _serial = serial();
    let dir = allowed_dir();
    let log_file = |name: &str| format!("ACTIVITIES_LOG_FILE={}/{name}", dir.path().display());

    // Pending.
    let pending = omniprof::on_demand::request_on_demand(&format!(
        "ACTIVITIES_WARMUP_PERIOD_SECS=60\n{}",
        log_file("pending.json")
    ))
    .unwrap();
    let mut sync = Profiler::builder().build().unwrap();
    sync.prepare().unwrap();
    assert_eq!(pending.wait(WAIT), Err(TraceFailed::Preempted));
    let refused =
        omniprof::on_demand::request_on_demand("ACTIVITIES_DURATION_MSECS=50").unwrap_err();
    assert_eq!(
        refused.to_string(),
        "profiler busy: a synchronous profiling session is active"
    );
    sync.start().unwrap();
    drop(record_function("sync"));
    let trace = sync.stop().unwrap();
    assert!(trace.activities.iter().any(|a| &*a.name == "sync"));

    // Running.
    let running = omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_TIME={}\nACTIVITIES_WARMUP_PERIOD_SECS=0\n\
         ACTIVITIES_DURATION_SECS=60\n{}",
        now_ms() + START_AHEAD_MS,
        log_file("running.json")
    ))
    .unwrap();
    wait_for_state(OnDemandState::CollectTrace);
    let mut sync = Profiler::builder().build().unwrap();
    sync.start().unwrap();
    assert_eq!(running.wait(WAIT), Err(TraceFailed::Preempted));
    sync.stop().unwrap();
    assert_eq!(
        omniprof::on_demand::on_demand_status().state,
        OnDemandState::WaitForRequest
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file");
}
