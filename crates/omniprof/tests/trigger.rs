//! The trigger transport end to end, in-process: a server whose handler records a real
//! session and saves a real trace, and the library's client. Proves that a trace request
//! comes back with the path of a trace that reads back; that garbage, a 100 MB message, a
//! message cut off or stalled, an output outside the allowed directory and a peer of
//! another uid are each refused with the server still serving the next request; that a
//! second request while one runs is refused without deadlock; and that listing shows a live
//! server and removes a stale socket.
#![cfg(unix)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omniprof::on_demand::{
    on_demand_trace_dir, RuntimeDir, ServerOptions, TriggerError, TriggerServer,
};
use omniprof_read::TraceReader;
use omniprof_test_support::trigger::{Recorder, STEP};

/// How long a test client waits for a reply.
const WAIT: Duration = Duration::from_secs(30);
/// The server's read timeout in these tests: short, so a stalled client is cut off fast.
const READ_TIMEOUT: Duration = Duration::from_millis(300);

/// A private runtime directory, an output directory inside the allowed one, and a server.
struct Setup {
    _tmp: tempfile::TempDir,
    out: tempfile::TempDir,
    dir: RuntimeDir,
    recorder: Arc<Recorder>,
    server: TriggerServer,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir_in(on_demand_trace_dir()).unwrap();
    let dir = RuntimeDir::at(tmp.path().join("omniprof")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let options = ServerOptions::default().read_timeout(READ_TIMEOUT);
    let server = dir.listen_with(recorder.clone(), options).unwrap();
    Setup {
        _tmp: tmp,
        out,
        dir,
        recorder,
        server,
    }
}

impl Setup {
    fn request(&self, name: &str, duration_ms: u32) -> String {
        format!(
            "ACTIVITIES_DURATION_MSECS={duration_ms}\nACTIVITIES_LOG_FILE={}\n",
            self.out.path().join(name).display()
        )
    }

    fn send(&self, text: &str) -> Result<PathBuf, TriggerError> {
        self.dir.send(std::process::id(), text, WAIT)
    }

    /// A valid request still gives a trace that reads back.
    fn assert_still_serving(&self, name: &str) {
        let path = self.send(&self.request(name, 20)).expect("a valid request");
        assert_trace(&path);
    }

    /// Writes raw bytes and returns the raw reply.
    fn raw(&self, bytes: &[u8]) -> String {
        let mut stream = UnixStream::connect(self.server.socket_path()).unwrap();
        let _ = stream.write_all(bytes);
        read_reply(&mut stream)
    }
}

fn read_reply(stream: &mut UnixStream) -> String {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

/// `path` is a trace omniprof reads back without error, holding the recorded steps.
fn assert_trace(path: &Path) {
    let read = TraceReader::new().read_path(path);
    assert!(read.error.is_none(), "{}: {:?}", path.display(), read.error);
    let steps = read.trace.activities.iter().filter(|a| &*a.name == STEP);
    assert!(steps.count() > 0, "{} holds no {STEP:?}", path.display());
}

fn assert_error_reply(reply: &str, want: &str) {
    assert!(reply.starts_with("omniprof-trigger/1 error "), "{reply:?}");
    assert!(reply.contains(want), "{reply:?} does not say {want:?}");
}

#[test]
fn a_trigger_returns_the_path_of_a_real_trace() {
    let s = setup();
    let path = s.send(&s.request("t.pt.trace.json", 50)).unwrap();
    let pid = std::process::id();
    assert_eq!(path, s.out.path().join(format!("t_{pid}.pt.trace.json")));
    assert_trace(&path);

    let listed = s.dir.list().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].pid, pid);
    assert_eq!(listed[0].state, "idle");
    let exe = std::env::args().next().unwrap();
    assert!(listed[0].command.starts_with(&exe), "{listed:?}");
}

#[test]
fn bad_messages_get_an_error_and_the_server_goes_on() {
    let s = setup();
    assert_error_reply(&s.raw(b"\x00\x01 garbage \xff\n"), "malformed header");
    s.assert_still_serving("after_garbage.pt.trace.json");

    // 100 MB announced and sent: refused from the header, without reading the body.
    let huge = 100 * 1024 * 1024;
    let mut stream = UnixStream::connect(s.server.socket_path()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(format!("omniprof-trigger/1 trace {huge}\n").as_bytes());
        let _ = writer.write_all(&vec![b'A'; huge]);
    });
    assert_error_reply(&read_reply(&mut stream), "exceeds the limit of 65536 bytes");
    drop(stream);
    sender.join().unwrap();
    // 100 MB with no header at all.
    assert_error_reply(&s.raw(&vec![b'x'; huge]), "header line is longer");
    s.assert_still_serving("after_huge.pt.trace.json");

    // Cut in the middle: the client closes its side after 3 of 100 bytes.
    let mut stream = UnixStream::connect(s.server.socket_path()).unwrap();
    stream
        .write_all(b"omniprof-trigger/1 trace 100\nA=1")
        .unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_error_reply(&read_reply(&mut stream), "3 of 100 body bytes");

    // Stalled: part of a message, then nothing past the server's read timeout.
    let started = Instant::now();
    let mut stream = UnixStream::connect(s.server.socket_path()).unwrap();
    stream
        .write_all(b"omniprof-trigger/1 trace 100\nA=")
        .unwrap();
    assert_error_reply(&read_reply(&mut stream), "time limit");
    assert!(started.elapsed() >= READ_TIMEOUT);

    // Not UTF-8, and a config that does not parse.
    assert_error_reply(&s.raw(b"omniprof-trigger/1 trace 2\n\xc3\x28"), "not UTF-8");
    let err = s
        .send("ACTIVITIES_DURATION_MSECS=soon")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 1: ACTIVITIES_DURATION_MSECS"), "{err}");

    assert_eq!(s.recorder.calls(), 2, "only valid requests ran");
    s.assert_still_serving("after_all.pt.trace.json");
}

#[test]
fn an_output_outside_the_allowed_directory_is_refused() {
    let s = setup();
    let allowed = on_demand_trace_dir();
    let escape = s.out.path().join("escape");
    std::os::unix::fs::symlink("/etc", &escape).unwrap();
    let traversal = format!("{}/../x.pt.trace.json", allowed.trim_end_matches('/'));
    let symlinked = escape.join("x.pt.trace.json").display().to_string();
    for path in ["/etc/x.pt.trace.json", &traversal, &symlinked] {
        let text = format!("ACTIVITIES_DURATION_MSECS=10\nACTIVITIES_LOG_FILE={path}");
        let err = s.send(&text).unwrap_err();
        let TriggerError::Refused { pid, reason } = &err else {
            panic!("{path}: not a refusal: {err}");
        };
        assert_eq!(*pid, std::process::id());
        assert!(reason.contains(&format!("{path:?}")), "{reason}");
        assert!(reason.contains(&format!("{allowed:?}")), "{reason}");
    }
    assert!(!Path::new("/etc/x.pt.trace.json").exists());
    assert!(!Path::new("/etc/x_1.pt.trace.json").exists());
    assert_eq!(s.recorder.calls(), 0);
    s.assert_still_serving("after_refusals.pt.trace.json");
}

#[test]
fn a_second_request_while_one_runs_is_refused_without_deadlock() {
    let s = setup();
    let first = s.request("first.pt.trace.json", 1_000);
    let pid = std::process::id();
    let dir = s.dir.clone();
    let running = std::thread::spawn(move || dir.send(pid, &first, WAIT));
    let deadline = Instant::now() + WAIT;
    while s.dir.list().unwrap()[0].state != "tracing" {
        assert!(Instant::now() < deadline, "the first request never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = s.send(&s.request("second.pt.trace.json", 10)).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("refused the request: profiler busy"),
        "{err}"
    );
    assert_trace(&running.join().unwrap().unwrap());
    s.assert_still_serving("after_busy.pt.trace.json");
}

#[test]
fn listing_drops_a_stale_socket_and_drop_removes_the_live_one() {
    let s = setup();
    // A socket whose process has exited: bound by us, left behind, named by a dead pid.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = s.dir.socket_path(dead);
    drop(UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    std::fs::write(s.dir.path().join("notes.txt"), "not a socket").unwrap();

    let listed = s.dir.list().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].pid, std::process::id());
    assert!(!stale.exists(), "the stale socket was kept");

    // One server per process and directory.
    let again = s.dir.listen(s.recorder.clone()).unwrap_err().to_string();
    assert!(again.contains("already listens"), "{again}");

    let socket = s.server.socket_path().to_owned();
    let Setup { server, dir, .. } = s;
    drop(server);
    assert!(!socket.exists());
    assert!(dir.list().unwrap().is_empty());
    let err = dir.send(std::process::id(), "ACTIVITIES_ITERATIONS=1", WAIT);
    let message = err.unwrap_err().to_string();
    assert!(
        message.contains(&std::process::id().to_string()),
        "{message}"
    );
    assert!(message.contains("OMNIPROF_ONDEMAND=1"), "{message}");
}

#[test]
fn a_trigger_to_a_pid_of_no_process_says_it_does_not_exist() {
    let s = setup();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    // With no socket, and with one the dead process left behind: neither is "not listening",
    // which would tell the user to opt a process in that is gone.
    for stale in [false, true] {
        if stale {
            drop(UnixListener::bind(s.dir.socket_path(dead)).unwrap());
        }
        let err = s
            .dir
            .send(dead, "ACTIVITIES_ITERATIONS=1", WAIT)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("process {dead} does not exist (no /proc/{dead})"),
            "stale socket: {stale}"
        );
        let err = s.dir.cancel(dead, WAIT).unwrap_err();
        assert!(
            matches!(err, TriggerError::NoSuchProcess { pid } if pid == dead),
            "{err:?}"
        );
    }
}

/// The uid `nobody` runs as.
const NOBODY: libc::uid_t = 65534;

#[test]
fn a_peer_of_another_uid_is_refused_even_when_file_modes_let_it_in() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return omniprof_test_support::skip::skip(
            "peer credential check",
            omniprof_test_support::skip::Needs::Root,
            "only root can run a client as another uid",
        );
    }
    let s = setup();
    // Open every door a file mode can: only the credential check is left.
    for dir in [s.dir.path().parent().unwrap(), s.dir.path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let socket = s.server.socket_path();
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o777)).unwrap();

    let status = connect_as_nobody(
        socket,
        b"omniprof-trigger/1 trace 29\nACTIVITIES_DURATION_MSECS=10",
    );
    assert_eq!(
        status, 0,
        "the child as nobody was not refused (see connect_as_nobody)"
    );
    assert_eq!(s.recorder.calls(), 0);
    s.assert_still_serving("after_nobody.pt.trace.json");
}

/// Forks a child that becomes `nobody`, connects to `socket`, sends `request` and exits 0
/// when the reply is an error naming its uid; 2: setuid failed, 3: connect failed, 4: any
/// other reply. Returns the exit status.
fn connect_as_nobody(socket: &Path, request: &[u8]) -> i32 {
    use std::os::unix::ffi::OsStrExt;

    // Everything the child needs is built before the fork: after it, only raw syscalls.
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = socket.as_os_str().as_bytes();
    assert!(bytes.len() < addr.sun_path.len());
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let want = format!("peer uid {NOBODY}");
    let mut reply = [0u8; 512];

    // SAFETY: the child only makes async-signal-safe calls on memory prepared above and
    // leaves with _exit, so the forked copy of this multi-threaded process is never
    // unwound or allocated from.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
                libc::_exit(2);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if fd < 0 || libc::connect(fd, std::ptr::addr_of!(addr).cast(), len) != 0 {
                libc::_exit(3);
            }
            libc::write(fd, request.as_ptr().cast(), request.len());
            let mut got = 0usize;
            loop {
                let n = libc::read(fd, reply[got..].as_mut_ptr().cast(), reply.len() - got);
                if n <= 0 {
                    break;
                }
                got += n as usize;
                if got == reply.len() {
                    break;
                }
            }
            let reply = &reply[..got];
            let refused = reply.starts_with(b"omniprof-trigger/1 error ")
                && reply.windows(want.len()).any(|w| w == want.as_bytes());
            libc::_exit(if refused { 0 } else { 4 });
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
        libc::WEXITSTATUS(status)
    }
}
