//! Where the on-demand writer puts a trace (issue 25, items 2 and 4): never through a link, a
//! FIFO or another user's file planted at the trace's name, never outside the allowed
//! directory when a directory on the path is swapped for a link during the trace, and a
//! planted FIFO never leaves the engine busy.
//!
//! The allowed directory is a fresh one of this test binary (`KINETO_ONDEMAND_TRACE_DIR`, set
//! once before the engine first reads it), so "outside" is a sibling directory.

#![cfg(unix)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omniprof::on_demand::{OnDemandState, TraceFailed};
use omniprof_test_support::lock::serial;
use omniprof_test_support::shared_dirs::{give_to, mkfifo, other_owner};

const WAIT: Duration = Duration::from_secs(30);
/// How far ahead the requests start (a start in the past is refused), which is also the time
/// a test has to change the path after its request was checked.
const START_AHEAD_MS: i64 = 300;

/// The root of this binary's directories: `allowed/` (the allowed directory) and `outside/`.
fn root() -> &'static Path {
    static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("allowed")).unwrap();
        fs::create_dir(root.path().join("outside")).unwrap();
        // Before any request: the engine's thread reads it when it writes.
        std::env::set_var("KINETO_ONDEMAND_TRACE_DIR", root.path().join("allowed"));
        root
    })
    .path()
}

/// A fresh directory inside the allowed one, and a fresh one outside it.
fn dirs(name: &str) -> (PathBuf, PathBuf) {
    let (inside, outside) = (
        root().join("allowed").join(name),
        root().join("outside").join(name),
    );
    fs::create_dir(&inside).unwrap();
    fs::create_dir(&outside).unwrap();
    (inside, outside)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Requests a 50 ms trace to `log_file`, starting shortly.
fn request(log_file: &Path) -> omniprof::on_demand::Ticket {
    omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_TIME={}\nACTIVITIES_WARMUP_PERIOD_SECS=0\n\
         ACTIVITIES_DURATION_MSECS=50\nACTIVITIES_LOG_FILE={}",
        now_ms() + START_AHEAD_MS,
        log_file.display()
    ))
    .unwrap_or_else(|refused| panic!("{}: {refused}", log_file.display()))
}

/// Where the trace of a request for `dir/name.json` goes: `dir/name_<pid>.json`.
fn written_at(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}_{}.json", std::process::id()))
}

/// The write error of `ticket`'s request, after checking it names `path`.
fn write_error(ticket: omniprof::on_demand::Ticket, path: &Path) -> String {
    match ticket.wait(WAIT) {
        Err(TraceFailed::Write {
            path: failed,
            error,
        }) => {
            assert_eq!(failed, path);
            error
        }
        other => panic!("expected a write error at {}: {other:?}", path.display()),
    }
}

/// The engine is free again: a request right after writes its trace.
fn assert_engine_free(dir: &Path) {
    assert_eq!(
        omniprof::on_demand::on_demand_status().state,
        OnDemandState::WaitForRequest
    );
    let path = request(&dir.join("after.json")).wait(WAIT).unwrap();
    assert_eq!(path, written_at(dir, "after"));
    assert!(fs::read_to_string(&path).unwrap().contains("traceEvents"));
}

#[test]
fn a_fifo_at_the_trace_path_is_refused_unopened_and_the_engine_stays_free() {
    let _serial = serial();
    let (dir, _) = dirs("fifo");
    let fifo = written_at(&dir, "t");
    mkfifo(&fifo);

    let error = write_error(request(&dir.join("t.json")), &fifo);

    assert_eq!(
        error,
        format!(
            "cannot write trace to {}: refused: it is a FIFO, which is never opened here \
             (with no reader it would block the writer for good)",
            fifo.display()
        )
    );
    assert_engine_free(&dir);
}

#[test]
fn a_link_at_the_trace_path_is_not_followed_out_of_the_allowed_directory() {
    let _serial = serial();
    let (dir, outside) = dirs("link");
    let victim = outside.join("victim.json");
    fs::write(&victim, "kept").unwrap();
    let link = written_at(&dir, "t");
    std::os::unix::fs::symlink(&victim, &link).unwrap();

    let error = write_error(request(&dir.join("t.json")), &link);

    assert_eq!(
        error,
        format!(
            "cannot write trace to {}: refused: it is a symbolic link, which is never \
             followed here (it could lead outside the directory)",
            link.display()
        )
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "kept");
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_engine_free(&dir);
}

#[test]
fn a_directory_swapped_for_a_link_during_the_trace_is_not_written_through() {
    let _serial = serial();
    let (dir, outside) = dirs("swap");
    let sub = dir.join("sub");
    fs::create_dir(&sub).unwrap();

    let ticket = request(&sub.join("t.json"));
    // Checked: `sub` lies inside. Now, before the trace is written, it leads outside.
    fs::rename(&sub, dir.join("sub.old")).unwrap();
    std::os::unix::fs::symlink(&outside, &sub).unwrap();
    let error = write_error(ticket, &written_at(&sub, "t"));

    assert_eq!(
        error,
        format!(
            "{} resolves (through a symbolic link) outside the allowed directory {}: it \
             changed after the request was checked; nothing was written",
            sub.display(),
            root().join("allowed/").display()
        )
    );
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    assert_engine_free(&dir);
}

#[test]
fn a_link_to_a_directory_inside_the_allowed_one_is_followed() {
    let _serial = serial();
    let (dir, _) = dirs("inner");
    fs::create_dir(dir.join("real")).unwrap();
    std::os::unix::fs::symlink(dir.join("real"), dir.join("alias")).unwrap();

    let path = request(&dir.join("alias/t.json")).wait(WAIT).unwrap();

    assert_eq!(path, written_at(&dir.join("alias"), "t"));
    assert!(written_at(&dir.join("real"), "t").is_file());
}

#[test]
fn missing_directories_inside_the_allowed_one_are_created() {
    let _serial = serial();
    let (dir, _) = dirs("missing");

    let path = request(&dir.join("a/b/t.json")).wait(WAIT).unwrap();

    assert_eq!(path, written_at(&dir.join("a/b"), "t"));
    assert!(path.is_file());
}

#[test]
fn another_users_file_at_the_trace_path_is_refused_and_kept() {
    let Some(other) = other_owner("another user's file at an on-demand trace path") else {
        return;
    };
    let _serial = serial();
    let (dir, _) = dirs("foreign");
    let planted = written_at(&dir, "t");
    fs::write(&planted, "theirs").unwrap();
    give_to(&planted, other);

    let error = write_error(request(&dir.join("t.json")), &planted);

    assert_eq!(
        error,
        format!(
            "cannot write trace to {}: refused: it is a file of uid {other}, not of this \
             process's user (uid 0): only a file of one's own is replaced here (another user \
             may have planted it)",
            planted.display()
        )
    );
    assert_eq!(fs::read_to_string(&planted).unwrap(), "theirs");
}
