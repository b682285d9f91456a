//! On-demand tracing that cannot be wedged, over real Unix sockets (issue 25, items 5-8): a
//! start beyond the horizon is refused naming the key, the value and the horizon, and a
//! pending request is cancelled from outside; a client that keeps connecting and saying
//! nothing does not keep legitimate triggers out, and a silent connection is let go at the
//! header timeout while a slow body is still served; a message full of unknown keys logs one
//! summary line; and a trigger directory that another user created first is refused with
//! the remedy.
#![cfg(unix)]

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use omniprof::on_demand::{
    on_demand_trace_dir, RuntimeDir, TriggerError, TriggerHandler, TriggerRefused,
    MAX_START_AHEAD_MS,
};
use omniprof_test_support::shared_dirs::{give_to, other_owner};
use omniprof_test_support::trigger::CountingLogger;

/// How long a test client waits for a reply that should come at once.
const WAIT: Duration = Duration::from_secs(5);

/// The on-demand engine is one per process: its tests take turns.
fn engine_turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn refusal(result: Result<PathBuf, TriggerError>) -> String {
    match result {
        Err(TriggerError::Refused { reason, .. }) => reason,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_start_beyond_the_horizon_is_refused_and_a_pending_request_is_cancelled_from_outside() {
    let _turn = engine_turn();
    omniprof::on_demand::serve_triggers().unwrap();
    let dir = RuntimeDir::user().unwrap();
    let pid = std::process::id();
    let out = tempfile::tempdir_in(on_demand_trace_dir()).unwrap();
    let log_file = |name: &str| format!("ACTIVITIES_LOG_FILE={}/{name}", out.path().display());

    // The year 5138.
    let far = 99_999_999_999_999_i64;
    let reason = refusal(dir.send(
        pid,
        &format!("PROFILE_START_TIME={far}\n{}", log_file("far.json")),
        WAIT,
    ));
    let (start, now) = reason
        .strip_prefix(&format!(
            "invalid config: line 1: PROFILE_START_TIME: start time {far} ms is more than 3600 s \
             ahead (now "
        ))
        .and_then(|rest| Some((far, rest.split_once(" ms)")?)))
        .unwrap_or_else(|| panic!("{reason}"));
    assert_eq!(start, far);
    assert_eq!(
        now.1,
        ": an on-demand request may start at most 3600 s ahead"
    );
    assert!(now.0.parse::<i64>().is_ok(), "{reason}");

    let reason = refusal(dir.send(
        pid,
        &format!(
            "PROFILE_START_ITERATION=2147483647\nACTIVITIES_ITERATIONS=1\n{}",
            log_file("iterations.json")
        ),
        WAIT,
    ));
    let at = omniprof::recording::iteration();
    assert_eq!(
        reason,
        format!(
            "declined: PROFILE_START_ITERATION=2147483647 is beyond the horizon: an on-demand \
             request may start at most 1000000 iterations after the current one ({at})"
        )
    );
    let reason = refusal(dir.send(
        pid,
        &format!(
            "ACTIVITIES_WARMUP_PERIOD_SECS=2147483647\n{}",
            log_file("warmup.json")
        ),
        WAIT,
    ));
    assert_eq!(
        reason,
        "declined: ACTIVITIES_WARMUP_PERIOD_SECS=2147483647 is beyond the horizon: an \
         on-demand request may start at most 3600 s ahead"
    );

    // Within the horizon, but half an hour away: pending, and every other request refused
    // meanwhile, until it is cancelled from outside.
    let start = now_ms() + MAX_START_AHEAD_MS / 2;
    let text = format!(
        "PROFILE_START_TIME={start}\nACTIVITIES_DURATION_MSECS=100\n{}",
        log_file("pending.json")
    );
    let waiting = {
        let dir = dir.clone();
        std::thread::spawn(move || dir.send(pid, &text, Duration::from_secs(60)))
    };
    let deadline = Instant::now() + WAIT;
    while omniprof::on_demand::on_demand_status().request.is_none() {
        assert!(
            Instant::now() < deadline,
            "the request never became pending"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let id = omniprof::on_demand::on_demand_status().request.unwrap().id;
    let busy = refusal(dir.send(pid, &log_file("second.json"), WAIT));
    assert!(
        busy.starts_with(&format!(
            "another profile request is pending: request #{id}"
        )),
        "{busy}"
    );
    let cancelled = dir.cancel(pid, WAIT).unwrap();
    assert!(
        cancelled.starts_with(&format!(
            "cancelled request #{id} (WaitForRequest): 100 ms from "
        )),
        "{cancelled}"
    );
    assert_eq!(refusal(waiting.join().unwrap()), "cancelled");
    match dir.cancel(pid, WAIT) {
        Err(TriggerError::Refused { reason, .. }) => assert_eq!(
            reason,
            "nothing to cancel: no request is pending or running"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

#[test]
fn a_message_full_of_unknown_keys_logs_one_summary_line() {
    let logger = CountingLogger::install();
    let _turn = engine_turn();
    omniprof::on_demand::serve_triggers().unwrap();
    let dir = RuntimeDir::user().unwrap();
    let pid = std::process::id();
    // Accepted by the server's check, declined by the engine after its parse.
    let mut text = String::from("PROFILE_MEMORY=true\nACTIVITIES_DURATION_MSECS=100\n");
    let mut keys = 0;
    while text.len() + 20 <= omniprof::on_demand::TRIGGER_MAX_BODY {
        text.push_str(&format!("UNKNOWN_KEY_{keys:06}=1\n"));
        keys += 1;
    }
    let before = logger.lines_containing("unrecognized");
    for _ in 0..50 {
        let reason = refusal(dir.send(pid, &text, WAIT));
        assert!(reason.contains("memory snapshots"), "{reason}");
    }
    let lines = logger.lines_containing("unrecognized");
    assert_eq!(lines.len() - before.len(), 50, "last: {:?}", lines.last());
    assert_eq!(
        lines.last().unwrap(),
        &format!(
            "config: {keys} unrecognized keys ignored: \"UNKNOWN_KEY_000000\" (line 3), \
             \"UNKNOWN_KEY_000001\" (line 4), \"UNKNOWN_KEY_000002\" (line 5), ..."
        )
    );
}

/// Answers every trace at once with the same path.
struct AtOnce;

impl TriggerHandler for AtOnce {
    fn handle(&self, _: &str) -> Result<PathBuf, TriggerRefused> {
        Ok(PathBuf::from("/tmp/t.pt.trace.json"))
    }
    fn state(&self) -> String {
        "idle".to_owned()
    }
}

#[test]
fn a_client_reconnecting_silently_does_not_keep_legitimate_triggers_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RuntimeDir::at(tmp.path().join("rt")).unwrap();
    let _server = dir.listen(Arc::new(AtOnce)).unwrap();
    let socket = dir.socket_path(std::process::id());
    let stop = Arc::new(AtomicBool::new(false));
    // Holds sixteen silent connections (twice the slots), opening a new one every 2 ms,
    // for at most 20 s.
    let silent = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(20);
            let mut held = VecDeque::new();
            let mut opened = 0;
            while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                if let Ok(stream) = UnixStream::connect(&socket) {
                    held.push_back(stream);
                    opened += 1;
                }
                if held.len() > 16 {
                    held.pop_front();
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            opened
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let pid = std::process::id();
    let failed: Vec<String> = (0..45)
        .filter_map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            dir.send(pid, "ACTIVITIES_DURATION_MSECS=1", WAIT)
                .err()
                .map(|e| e.to_string())
        })
        .collect();
    stop.store(true, Ordering::SeqCst);
    let opened = silent.join().unwrap();
    assert!(
        opened > 45,
        "the silent client opened only {opened} connections"
    );
    assert_eq!(failed, Vec::<String>::new());
}

#[test]
fn a_trigger_directory_another_user_created_first_is_refused_with_the_remedy() {
    let Some(other) = other_owner("a trigger directory of another user") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("omniprof-0");
    std::fs::create_dir(&path).unwrap();
    give_to(&path, other);
    let uid = unsafe { libc::geteuid() };
    let err = RuntimeDir::at(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(
        err.to_string(),
        format!(
            "refusing trigger directory {}: owned by uid {other}, not {uid}; it is never \
             repaired, so on-demand tracing of uid {uid} stays off while it is there (another \
             user who creates it first disables it): remove it (as its owner or root), or set \
             XDG_RUNTIME_DIR to a directory of uid {uid} (its omniprof subdirectory is used \
             instead)",
            path.display()
        )
    );
}

/// The whole reply on `stream`, read with a bound of 10 s.
fn reply_on(stream: &mut UnixStream) -> String {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
}

#[test]
fn a_connection_silent_past_the_header_timeout_is_let_go_but_a_slow_body_is_served() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let dir = RuntimeDir::at(tmp.path().join("rt")).unwrap();
    let _server = dir.listen(Arc::new(AtOnce)).unwrap();
    let socket = dir.socket_path(std::process::id());

    let started = Instant::now();
    let mut silent = UnixStream::connect(&socket).unwrap();
    let reply = reply_on(&mut silent);
    let waited = started.elapsed();
    let reason = "bad message: no complete message within the time limit (0 bytes arrived)";
    assert_eq!(
        reply,
        format!("omniprof-trigger/1 error {}\n{reason}", reason.len())
    );
    // Let go at the 1 s header timeout, not the 5 s read timeout.
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "{waited:?}"
    );

    // A header at once and a body 1.5 s later (within the 5 s read timeout) is served.
    let body = "ACTIVITIES_DURATION_MSECS=1";
    let mut slow = UnixStream::connect(&socket).unwrap();
    writeln!(slow, "omniprof-trigger/1 trace {}", body.len()).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    slow.write_all(body.as_bytes()).unwrap();
    assert_eq!(
        reply_on(&mut slow),
        "omniprof-trigger/1 ok 20\n/tmp/t.pt.trace.json"
    );
}
