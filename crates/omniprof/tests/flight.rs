//! The flight recorder end to end, in a process of its own (the recorder is process-wide):
//! its rings wrapped many times stay within the memory bound, by its own count and by the
//! process's RSS, while a dump still holds the newest records and counts what was
//! overwritten; a window shorter than the bound allows holds exactly its last seconds; a
//! profiling session started beside it records its own trace without ending the rings;
//! slow steps and hangs write named dumps and normal steps none; and a dump directory that
//! is a link, another user's or read-only is refused with one warning.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use omniprof::recording::{pop_op_with_autograd, push_op, Autograd};
use omniprof::trace::keys::arg;
use omniprof::trace::{Activity, Trace, Value};
use omniprof::{record_function, DumpReason, FlightRecorder, Profiler};
use omniprof_test_support::shared_dirs;

/// One recorder at a time in this process.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A test that failed holding a recorder leaves it running: stopped here, so the next
    // test fails for its own reasons only.
    if let Some(left) = FlightRecorder::current() {
        left.stop();
    }
    guard
}

/// The process's resident memory, from `/proc/self/statm`.
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// The `i` arg of every range named `name`, in time order.
fn indices(trace: &Trace, name: &str) -> Vec<u64> {
    let mut ranges: Vec<&Activity> = trace
        .activities
        .iter()
        .filter(|a| &*a.name == name)
        .collect();
    ranges.sort_by_key(|a| a.start_ns);
    ranges
        .iter()
        .map(|a| match a.arg("i") {
            Some(Value::UInt(i)) => *i,
            Some(Value::Int(i)) => *i as u64,
            other => panic!("range without its index: {other:?}"),
        })
        .collect()
}

fn metadata(trace: &Trace, key: &str) -> Value {
    trace.metadata(key).cloned().unwrap_or(Value::Null)
}

#[test]
fn an_hour_of_ops_compressed_stays_within_the_bound_and_the_dump_holds_the_newest() {
    let _serial = serial();
    const BOUND: usize = 4 << 20;
    const RANGES: u64 = 4_000_000;
    let recorder = FlightRecorder::builder()
        .window(Duration::from_secs(3600))
        .max_bytes(BOUND)
        .start()
        .unwrap();
    let before = rss_bytes();
    // 8M records of 16 bytes: 128 MiB through a 4 MiB bound, 32 times round.
    let worker = std::thread::spawn(|| {
        for _ in 0..RANGES {
            omniprof::scope!("op");
        }
        omniprof::scope!("last");
    });
    worker.join().unwrap();
    let stats = recorder.stats();
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        stats.held_bytes <= BOUND,
        "the rings hold {} bytes",
        stats.held_bytes
    );
    // The bound, plus the pool of pre-faulted chunks (4 MiB) and the allocator's slack.
    assert!(grown <= BOUND + (8 << 20), "RSS grew by {grown} bytes");
    let trace = recorder.snapshot().unwrap();
    let count = |name: &str| trace.activities.iter().filter(|a| &*a.name == name).count() as u64;
    assert_eq!(count("last"), 1);
    // The bound holds 64 chunks of 4096 records, less the test thread's chunk and the part
    // of the chunk being written over: about 127k ranges.
    let held = count("op");
    assert!(held > 120_000, "{held} ranges held");
    // Every record of the worker is either held (two per range; chunks begin with a range's
    // beginning) or counted as overwritten.
    assert_eq!(
        metadata(&trace, "flight_overwritten_records"),
        Value::UInt(2 * (RANGES + 1) - 2 * (held + 1))
    );
    assert_eq!(metadata(&trace, "flight_cut_short"), Value::Bool(true));
    let warnings = recorder.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("memory bound (4 MiB) held only the last"),
        "{}",
        warnings[0]
    );
    recorder.stop();
}

#[test]
fn what_ranges_carry_beside_their_records_is_trimmed_with_the_rings() {
    let _serial = serial();
    const BOUND: usize = 4 << 20;
    const RANGES: u64 = 2_000_000;
    let recorder = FlightRecorder::builder()
        .window(Duration::from_secs(3600))
        .max_bytes(BOUND)
        .start()
        .unwrap();
    let before = rss_bytes();
    // Each range carries an arg (about 80 bytes beside its 32): kept for all 2M ranges that
    // would be 160 MB; trimmed with the rings, about what the ~127k ranges held carry.
    let worker = std::thread::spawn(|| {
        for i in 0..RANGES {
            drop(record_function("op").with_arg("i", i));
        }
    });
    worker.join().unwrap();
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown <= BOUND + (24 << 20), "RSS grew by {grown} bytes");
    let trace = recorder.snapshot().unwrap();
    let held = indices(&trace, "op");
    assert_eq!(held.last(), Some(&(RANGES - 1)));
    assert!(held.windows(2).all(|w| w[1] == w[0] + 1));
    recorder.stop();
}

#[test]
fn a_snapshot_holds_the_autograd_numbers_of_its_ops_moved_or_still_staged() {
    let _serial = serial();
    let recorder = FlightRecorder::builder()
        .window(Duration::from_secs(3600))
        .start()
        .unwrap();
    // Numbers are staged a batch at a time before they join their thread's table: 1,000 ops
    // leave the last few staged when the snapshot copies them out.
    const OPS: usize = 1_000;
    for i in 0..OPS {
        // SAFETY: the name is NUL-terminated.
        unsafe { push_op(c"aten::mul".as_ptr(), i) };
        let numbers = Autograd {
            sequence_number: i as i64,
            forward_thread: 0,
            thread: 1,
        };
        assert!(pop_op_with_autograd(i, numbers));
    }
    let numbers = |trace: &Trace| -> Vec<Option<Value>> {
        let ops = trace.activities.iter().filter(|a| &*a.name == "aten::mul");
        ops.map(|a| a.arg(arg::SEQUENCE_NUMBER).cloned()).collect()
    };
    let expected: Vec<_> = (0..OPS as i64).map(|i| Some(Value::Int(i))).collect();
    assert_eq!(numbers(&recorder.snapshot().unwrap()), expected);
    assert_eq!(
        numbers(&recorder.snapshot().unwrap()),
        expected,
        "a snapshot takes none"
    );
    recorder.stop();
}

#[test]
fn a_window_shorter_than_the_bound_allows_holds_exactly_its_last_seconds() {
    let _serial = serial();
    let window = Duration::from_millis(400);
    let recorder = FlightRecorder::builder()
        .window(window)
        .max_bytes(64 << 20)
        .start()
        .unwrap();
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < Duration::from_millis(1200) {
        drop(record_function("paced").with_arg("i", i));
        i += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    let trace = recorder.snapshot().unwrap();
    let held = indices(&trace, "paced");
    let starts: Vec<i64> = trace
        .activities
        .iter()
        .filter(|a| &*a.name == "paced")
        .map(|a| a.start_ns)
        .collect();
    assert_eq!(held.last(), Some(&(i - 1)));
    assert!(held.windows(2).all(|w| w[1] == w[0] + 1));
    // Nothing older than the window, and the window full: the oldest range held began
    // within one pacing interval (and a loaded machine's hiccup) of its start.
    let window_start = trace.window.end_ns - window.as_nanos() as i64;
    assert!(starts.iter().all(|&s| s >= window_start));
    assert!(starts.iter().min().unwrap() - window_start < 100_000_000);
    assert_eq!(
        metadata(&trace, "flight_overwritten_records"),
        Value::UInt(0)
    );
    assert_eq!(metadata(&trace, "flight_cut_short"), Value::Bool(false));
    assert!(recorder.take_warnings().is_empty());
    recorder.stop();
}

#[test]
fn a_profiling_session_beside_the_recorder_gets_its_own_trace_and_the_rings_go_on() {
    let _serial = serial();
    let recorder = FlightRecorder::builder().start().unwrap();
    drop(record_function("before_session"));
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    drop(record_function("in_session"));
    let trace = profiler.stop().unwrap();
    drop(record_function("after_session"));
    let names =
        |t: &Trace| -> Vec<String> { t.activities.iter().map(|a| a.name.to_string()).collect() };
    assert_eq!(
        names(&trace)
            .iter()
            .filter(|n| n.ends_with("_session"))
            .collect::<Vec<_>>(),
        ["in_session"]
    );
    let window = names(&recorder.snapshot().unwrap());
    for name in ["before_session", "in_session", "after_session"] {
        assert!(window.iter().any(|n| n == name), "{name} not in {window:?}");
    }
    // A second recorder is refused while this one runs.
    assert!(matches!(
        FlightRecorder::builder().start(),
        Err(omniprof::FlightError::Running)
    ));
    recorder.stop();
    // Stopped: sessions start afresh.
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    drop(record_function("alone"));
    assert!(names(&profiler.stop().unwrap()).contains(&"alone".to_owned()));
}

#[test]
fn a_python_frame_begun_at_a_sessions_window_start_beside_the_recorder_loses_nothing() {
    use omniprof::recording::{Name, PythonFrame};
    let _serial = serial();
    let recorder = FlightRecorder::builder().start().unwrap();
    let mut session = Profiler::builder().build().unwrap();
    session.start().unwrap();
    drop(record_function("before"));
    // A tracer finding a frame running only at its next event, as at a schedule's window.
    let main = PythonFrame::begin_at_window_start(Name::python("t.py(9): main", None)).unwrap();
    drop(record_function("after"));
    assert!(main.end());
    let trace = session.stop().unwrap();
    let stacks: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.name.starts_with("before") || a.name.starts_with("after"))
        .map(|a| (&*a.name, a.arg("Call stack").and_then(Value::as_str)))
        .collect();
    assert_eq!(
        stacks,
        [("before", None), ("after", Some("t.py(9): main;"))]
    );
    recorder.stop();
}

#[test]
fn a_forked_child_asks_for_no_dump_and_stops_without_waiting() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let recorder = FlightRecorder::builder()
        .dump_dir(dir.path())
        .start()
        .unwrap();
    // SAFETY: the child only records, asks, stops and exits (no lock another thread of the
    // parent could hold is taken on its path but the recorder's own, fork-safe ones).
    let child = unsafe { libc::fork() };
    if child == 0 {
        drop(record_function("in_the_child"));
        recorder.trigger(DumpReason::Failure);
        let started = Instant::now();
        let waited = recorder.flush(Duration::from_secs(30));
        recorder.stop();
        let quick = started.elapsed() < Duration::from_secs(5);
        // SAFETY: ends the forked child without running the parent's test harness.
        unsafe { libc::_exit(if !waited && quick { 0 } else { 1 }) };
    }
    let status = omniprof_test_support::fork::wait_for(child, Duration::from_secs(60));
    assert_eq!(status, Some(0));
    assert!(dumps_in(dir.path()).is_empty());
    // The parent's recorder goes on.
    recorder.trigger(DumpReason::Request);
    assert!(recorder.flush(Duration::from_secs(30)));
    assert_eq!(dumps_in(dir.path()).len(), 1);
    recorder.stop();
}

fn dumps_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_slow_step_writes_one_dump_named_for_it_holding_its_ops_and_normal_steps_none() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let recorder = FlightRecorder::builder()
        .dump_dir(dir.path())
        .slow_step(3.0, 5)
        .start()
        .unwrap();
    let first = omniprof::recording::iteration() + 1;
    for n in 0..12 {
        let _op = record_function(if n == 9 { "slow_op" } else { "op" });
        std::thread::sleep(Duration::from_millis(if n == 9 { 60 } else { 5 }));
        drop(_op);
        omniprof::step();
    }
    assert!(recorder.flush(Duration::from_secs(30)));
    let slow = first + 9;
    let pid = std::process::id();
    assert_eq!(
        dumps_in(dir.path()),
        [format!(
            "flight_slow_step_step{slow}_rank0_pid{pid}_1.pt.trace.json"
        )]
    );
    let trace = omniprof_read::TraceReader::new()
        .read_path(dir.path().join(&dumps_in(dir.path())[0]))
        .into_trace()
        .unwrap();
    assert!(trace.activities.iter().any(|a| &*a.name == "slow_op"));
    assert!(trace
        .activities
        .iter()
        .any(|a| *a.name == *format!("ProfilerStep#{slow}")));
    assert_eq!(
        trace.metadata("flight_reason"),
        Some(&Value::from("slow_step"))
    );
    assert_eq!(trace.metadata("flight_step"), Some(&Value::Int(slow)));
    recorder.stop();
}

#[test]
fn a_hang_writes_a_dump_for_the_step_that_never_ended() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let recorder = FlightRecorder::builder()
        .dump_dir(dir.path())
        .hang_after(Duration::from_millis(300))
        .start()
        .unwrap();
    omniprof::step();
    let hung = omniprof::recording::iteration() + 1;
    {
        omniprof::scope!("stuck_op");
        let deadline = Instant::now() + Duration::from_secs(20);
        while recorder.stats().dumps_written == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(recorder.flush(Duration::from_secs(30)));
    let names = dumps_in(dir.path());
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names[0].starts_with(&format!("flight_hang_step{hung}_rank0_")),
        "{names:?}"
    );
    let trace = omniprof_read::TraceReader::new()
        .read_path(dir.path().join(&names[0]))
        .into_trace()
        .unwrap();
    // Still open at the dump: kept, closed at the window's end, marked unfinished.
    let stuck = trace
        .activities
        .iter()
        .find(|a| &*a.name == "stuck_op")
        .unwrap();
    assert_eq!(stuck.arg("finished"), Some(&Value::Bool(false)));
    recorder.stop();
}

#[test]
fn a_trigger_storm_writes_one_dump_per_interval_and_keeps_the_last_few() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let recorder = FlightRecorder::builder()
        .dump_dir(dir.path())
        .min_interval(Duration::from_millis(100))
        .keep(2)
        .start()
        .unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1000) {
        // As if every step were slow.
        recorder.trigger(DumpReason::SlowStep);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(recorder.flush(Duration::from_secs(30)));
    let stats = recorder.stats();
    // At most one per 100 ms (and at least a few): the rest skipped, counted.
    assert!((2..=11).contains(&stats.dumps_written), "{stats:?}");
    assert!(stats.dumps_skipped > 100, "{stats:?}");
    assert_eq!(dumps_in(dir.path()).len(), 2);
    assert_eq!(recorder.dumps().len(), 2);
    let warnings = recorder.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("rate-limited to one per 100ms"),
        "{}",
        warnings[0]
    );
    recorder.stop();
}

/// Triggers a dump into `dir` and returns the warnings it left, after checking that the
/// job went on and nothing was written.
fn refused(dir: &Path) -> Vec<String> {
    let recorder = FlightRecorder::builder().dump_dir(dir).start().unwrap();
    recorder.trigger(DumpReason::Request);
    assert!(recorder.flush(Duration::from_secs(30)));
    recorder.trigger(DumpReason::Failure);
    assert!(recorder.flush(Duration::from_secs(30)));
    let stats = recorder.stats();
    assert_eq!((stats.dumps_written, stats.dumps_skipped), (0, 2));
    let warnings = recorder.take_warnings();
    recorder.stop();
    warnings
}

#[test]
fn a_dump_dir_that_is_a_link_is_refused_with_one_warning_and_nothing_written_through_it() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let warnings = refused(&link);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("is a symbolic link"),
        "{}",
        warnings[0]
    );
    assert!(dumps_in(&target).is_empty());
}

#[test]
fn a_read_only_dump_dir_is_refused_with_one_warning_naming_why() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = base.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let warnings = if unsafe { libc::geteuid() } == 0 {
        // Root writes anywhere: the recorder runs as the directory's owner instead, for the
        // test's length (its real uid stays root, so it can come back).
        shared_dirs::give_to(&dir, shared_dirs::OTHER_UID);
        // SAFETY: seteuid has no memory preconditions; the tests of this file run one at a
        // time.
        assert_eq!(unsafe { libc::seteuid(shared_dirs::OTHER_UID) }, 0);
        let warnings = std::panic::catch_unwind(|| refused(&dir));
        // SAFETY: as above; the real uid is root.
        assert_eq!(unsafe { libc::seteuid(0) }, 0);
        warnings.unwrap()
    } else {
        refused(&dir)
    };
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("is not writable"), "{}", warnings[0]);
    assert!(dumps_in(&dir).is_empty());
}

#[test]
fn another_users_dump_dir_is_refused_with_one_warning_naming_its_owner() {
    let _serial = serial();
    let Some(other) = shared_dirs::other_owner("another user's dump directory") else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("theirs");
    std::fs::create_dir(&dir).unwrap();
    shared_dirs::give_to(&dir, other);
    let warnings = refused(&dir);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("belongs to another user (uid {other}")),
        "{}",
        warnings[0]
    );
    assert!(dumps_in(&dir).is_empty());
}

#[test]
fn a_missing_dump_dir_is_made_and_a_file_in_its_place_refused() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let missing = base.path().join("a/b");
    let recorder = FlightRecorder::builder()
        .dump_dir(&missing)
        .start()
        .unwrap();
    recorder.trigger(DumpReason::Request);
    assert!(recorder.flush(Duration::from_secs(30)));
    assert_eq!(dumps_in(&missing).len(), 1);
    recorder.stop();
    let file = base.path().join("file");
    std::fs::write(&file, "").unwrap();
    let warnings = refused(&file);
    assert!(warnings[0].contains("is not a directory"), "{warnings:?}");
}
