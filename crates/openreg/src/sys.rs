//! The two OS facts every record needs: wall-clock time and the calling thread's id.

/// `CLOCK_REALTIME` in nanoseconds since the Unix epoch: the time base of every record and
/// event timestamp, and the one omniprof converts its host clock to, so the two line up
/// without any translation.
pub(crate) fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_REALTIME exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The calling thread's OS id (`gettid`), cached per thread because runtime records take it
/// on every API call and the syscall would dominate a cheap call.
pub(crate) fn thread_id() -> i64 {
    thread_local! {
        static TID: i64 = os_thread_id();
    }
    // During thread-local teardown the cache is gone; ask the OS again instead of failing.
    TID.try_with(|tid| *tid).unwrap_or_else(|_| os_thread_id())
}

fn os_thread_id() -> i64 {
    // SAFETY: the gettid syscall has no preconditions and cannot fail. (The raw syscall
    // rather than glibc's wrapper, which only glibc 2.30 and later have.)
    unsafe { libc::syscall(libc::SYS_gettid) }
}
