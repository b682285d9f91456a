//! A session inherited through `fork` (issue 25, item 20): the child's `stop()` holds only
//! what the child recorded after the fork, none of the parent's records (its other threads'
//! nor the forking thread's from before the fork), so it costs what the child's own records
//! cost. The parent's session is untouched by the fork. In a process of its own: a fork
//! while another test holds a lock would leave it held in the child.
#![cfg(unix)]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use omniprof::trace::Trace;
use omniprof::{record_function, Profiler};
use omniprof_test_support::fork::wait_for;

const THREADS: usize = 4;
const PER_THREAD: usize = 50_000;

fn count(trace: &Trace, name: &str) -> usize {
    trace.activities.iter().filter(|a| &*a.name == name).count()
}

/// What the child exits with: 0 when its trace holds exactly its own three ranges.
fn in_child(mut profiler: Profiler) -> i32 {
    for _ in 0..3 {
        drop(record_function("child"));
    }
    let Ok(trace) = profiler.stop() else {
        return 4;
    };
    match (
        count(&trace, "parent thread"),
        count(&trace, "before fork"),
        count(&trace, "child"),
    ) {
        (0, 0, 3) => 0,
        (0, 0, _) => 3,
        (0, _, _) => 2,
        _ => 1,
    }
}

#[test]
fn a_forked_child_stops_its_inherited_session_with_only_its_own_records() {
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    for _ in 0..10 {
        drop(record_function("before fork"));
    }
    // Threads that recorded and still live at the fork, idle then (a thread in the middle
    // of recording could hold a lock the child would then never see released).
    let recorded = Arc::new(Barrier::new(THREADS + 1));
    let forked = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (recorded, forked) = (recorded.clone(), forked.clone());
            std::thread::spawn(move || {
                for _ in 0..PER_THREAD {
                    drop(record_function("parent thread"));
                }
                recorded.wait();
                forked.wait();
            })
        })
        .collect();
    recorded.wait();
    // SAFETY: the child only records, stops the session and exits with `_exit`; the other
    // threads hold no lock of the recorder (they wait at a barrier).
    let child = unsafe { libc::fork() };
    assert!(
        child >= 0,
        "fork failed: {}",
        std::io::Error::last_os_error()
    );
    if child == 0 {
        let code = in_child(profiler);
        // SAFETY: ends the child without running the parent's atexit handlers or tests.
        unsafe { libc::_exit(code) };
    }
    forked.wait();
    for t in threads {
        t.join().unwrap();
    }
    // 1: the parent threads' records; 2: the forking thread's from before the fork; 3: not
    // its own three; 4: stop failed; None: killed past 20 s.
    assert_eq!(wait_for(child, Duration::from_secs(20)), Some(0));
    let trace = profiler.stop().unwrap();
    assert_eq!(count(&trace, "parent thread"), THREADS * PER_THREAD);
    assert_eq!(count(&trace, "before fork"), 10);
    assert_eq!(count(&trace, "child"), 0);
}
