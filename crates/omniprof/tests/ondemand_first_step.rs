//! An iteration-based trigger before and after the application's first `step()` (issue 25,
//! item 19), in a process of its own so that nothing has stepped before the test begins:
//! before, the request falls back to a time-based trace (as Kineto's does), and both the
//! trigger's reply and the trace's metadata say so; after, the trace holds iterations and
//! carries no note.
#![cfg(unix)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omniprof::on_demand::{on_demand_trace_dir, RuntimeDir, NOTES_METADATA};
use omniprof::trace::Value;
use omniprof_read::TraceReader;

const WAIT: Duration = Duration::from_secs(60);

/// The request `omniprof trigger --iterations 3` sends, with no warm-up and a short fallback.
fn three_iterations(out: &Path, name: &str) -> String {
    format!(
        "PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=1\n\
         ACTIVITIES_WARMUP_PERIOD_SECS=0\nACTIVITIES_DURATION_MSECS=100\n\
         ACTIVITIES_ITERATIONS=3\nACTIVITIES_LOG_FILE={}/{name}",
        out.display()
    )
}

/// The notes in the metadata of the trace at `path`.
fn notes_in(path: &Path) -> Option<Value> {
    let trace = TraceReader::new().read_path(path).into_trace().unwrap();
    trace
        .metadata
        .iter()
        .find(|(key, _)| key == NOTES_METADATA)
        .map(|(_, value)| value.clone())
}

#[test]
fn an_iteration_request_before_the_first_step_says_it_fell_back_and_one_after_does_not() {
    assert_eq!(
        omniprof::recording::iteration(),
        -1,
        "something stepped before the test"
    );
    omniprof::on_demand::serve_triggers().unwrap();
    let dir = RuntimeDir::user().unwrap();
    let pid = std::process::id();
    let out = tempfile::tempdir_in(on_demand_trace_dir()).unwrap();

    let before = dir
        .send_traced(pid, &three_iterations(out.path(), "before.json"), WAIT)
        .unwrap();
    let note = "the application had not called omniprof::step() yet when the request \
                arrived, so the iteration-based request (3 iterations) fell back to a \
                time-based trace of 100 ms (as Kineto's does); trigger again once it steps \
                for a trace of iterations";
    assert_eq!(before.notes, vec![note.to_owned()]);
    assert_eq!(
        notes_in(&before.path),
        Some(Value::List(vec![Value::Str(note.into())]))
    );

    let stop = Arc::new(AtomicBool::new(false));
    let stepper = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            // Bounded: at most 60 s of 1 ms iterations.
            for _ in 0..60_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                omniprof::step();
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    while omniprof::recording::iteration() < 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let after = dir
        .send_traced(pid, &three_iterations(out.path(), "after.json"), WAIT)
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    stepper.join().unwrap();
    assert_eq!(after.notes, Vec::<String>::new());
    assert_eq!(notes_in(&after.path), None);
    omniprof::on_demand::stop_serving_triggers();
}
