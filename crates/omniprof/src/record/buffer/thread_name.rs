//! The OS thread id and name a thread's row in traces is labelled with.

use super::local::with_local;
use crate::lock;

/// The calling thread's OS id (`gettid`), as traces name threads.
pub(super) fn current_tid() -> i64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i64 }
}

/// The OS name of this process's thread `tid` (empty when unreadable): the row's name for a
/// thread Rust did not name.
pub(super) fn os_thread_name(tid: i64) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

/// Renames the calling thread's row.
pub(crate) fn set_current_thread_name(name: &str) {
    with_local(|l| {
        if !l.exiting.get() {
            *lock(&l.buffer_or_register().name) = name.to_owned();
        }
    });
}
