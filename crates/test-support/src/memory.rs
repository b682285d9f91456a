//! The peak memory of a child process, as the kernel counted it (`wait4`'s `ru_maxrss`), so
//! that a test can bound what a command takes on a crafted input without sharing its own
//! address space with it.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};

/// What a command did, and the most memory it held at once.
pub struct Measured {
    /// How the process exited.
    pub status: ExitStatus,
    /// What it wrote to standard output.
    pub stdout: Vec<u8>,
    /// What it wrote to standard error.
    pub stderr: Vec<u8>,
    /// Peak resident set size, in bytes.
    pub peak_rss: u64,
}

/// Runs `command` to its end, collecting its output, and measures its peak resident memory.
///
/// Panics when the command cannot be started or waited for.
// The child is reaped by `wait4` below, which also gives its peak memory.
#[allow(clippy::zombie_processes)]
pub fn run_measured(command: &mut Command) -> Measured {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child (not yet reaped: `Child::wait` is never called), with
    // pointers to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    Measured {
        status: ExitStatus::from_raw(status),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        // Linux counts `ru_maxrss` in KiB.
        peak_rss: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
    }
}
