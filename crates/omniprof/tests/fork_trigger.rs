//! A child forked from a serving process (issue 25, item 20), e.g. a DataLoader worker: it
//! does not serve triggers (fork copies only the calling thread, not the engine's or the
//! server's), `serve()` there says so, `stop_serving()` there leaves the parent's socket
//! alone, and the trigger client tells the user to trigger the parent instead of to set
//! `OMNIPROF_ONDEMAND=1`, which the child already has. In a process of its own: a fork while
//! another test holds a lock would leave it held in the child.
#![cfg(unix)]

use std::time::Duration;

use omniprof::on_demand::RuntimeDir;
use omniprof_test_support::fork::wait_for;

/// What the child exits with: 0 when `serve()` fails naming its parent and `stop_serving()`
/// has nothing of its own to stop. It then waits for `hold` to close, so the parent can
/// trigger it meanwhile.
fn in_child(parent: u32, hold: libc::c_int) -> i32 {
    let me = std::process::id();
    let code = match omniprof::on_demand::serve_triggers() {
        Ok(()) => 1,
        Err(e)
            if e.to_string()
                == format!(
                    "process {me} was forked from process {parent}, which serves triggers: a \
                     forked child (e.g. a DataLoader worker) does not serve them, as fork \
                     copies only the calling thread; trigger process {parent}"
                ) =>
        {
            if omniprof::on_demand::stop_serving_triggers() {
                3
            } else {
                0
            }
        }
        Err(_) => 2,
    };
    let mut byte = 0u8;
    // SAFETY: reads into one byte we own; returns at EOF, when the parent closes its end.
    unsafe { libc::read(hold, (&mut byte as *mut u8).cast(), 1) };
    code
}

#[test]
fn a_forked_child_does_not_serve_and_the_client_says_to_trigger_its_parent() {
    omniprof::on_demand::serve_triggers().unwrap();
    let parent = std::process::id();
    let dir = RuntimeDir::user().unwrap();
    let mut pipe = [0; 2];
    // SAFETY: `pipe` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: the child only calls serve/stop_serving, reads a pipe and exits with `_exit`.
    let child = unsafe { libc::fork() };
    assert!(
        child >= 0,
        "fork failed: {}",
        std::io::Error::last_os_error()
    );
    if child == 0 {
        // SAFETY: the child's copy of the write end, which it does not use.
        unsafe { libc::close(pipe[1]) };
        let code = in_child(parent, pipe[0]);
        // SAFETY: ends the child without running the parent's atexit handlers or tests.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: the parent's copy of the read end, which it does not use.
    unsafe { libc::close(pipe[0]) };
    let child = child as u32;
    let path = dir.socket_path(child);
    let refused = omniprof::on_demand::send_trigger(
        child,
        "ACTIVITIES_DURATION_MSECS=100",
        Duration::from_secs(5),
    )
    .unwrap_err()
    .to_string();
    // SAFETY: closing our write end lets the child's read return.
    unsafe { libc::close(pipe[1]) };
    // 1: served; 2: serve() failed otherwise; 3: stop_serving() stopped the parent's server.
    assert_eq!(
        wait_for(child as libc::pid_t, Duration::from_secs(20)),
        Some(0)
    );
    assert_eq!(
        refused,
        format!(
            "process {child} is not listening for triggers (no server at {}): it was forked \
             from process {parent}, which is; a forked child (e.g. a DataLoader worker) does \
             not serve triggers even with OMNIPROF_ONDEMAND=1, as fork copies only the calling \
             thread and not the server's. Trigger process {parent} instead",
            path.display()
        )
    );
    assert!(dir.socket_path(parent).exists());
    assert!(omniprof::on_demand::stop_serving_triggers());
}
