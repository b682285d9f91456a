//! Forked children in tests: waiting for one with a deadline, so that a child that hangs
//! fails its test instead of hanging the run.

use std::time::{Duration, Instant};

/// Waits for `child` (a child of this process) up to `limit`, killing it past that; its
/// exit status, or `None` when it was killed or did not exit normally.
pub fn wait_for(child: libc::pid_t, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let rc = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if rc == child {
            return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        }
        if Instant::now() > deadline {
            // SAFETY: our own child, not yet reaped.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                libc::waitpid(child, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
