//! The listening side: one accept thread, one short-lived thread per connection.

use std::io::{self, BufReader, ErrorKind, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::peer::{check_peer, peer_uid};
use super::protocol::{Deadline, FrameError, Reply, Request};
use super::runtime_dir::{current_uid, RuntimeDir};
use super::TriggerHandler;
use crate::config::{check_on_demand_log_file, on_demand_trace_dir, Config, ACTIVITIES_LOG_FILE};

/// How the server treats its connections.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    /// How long a client may take to send its whole request; a slower (or stalled) client
    /// gets an error reply and is dropped. Default 5 s.
    pub read_timeout: Duration,
    /// Connections served at once; more are answered with an error at once. Default 8.
    pub max_connections: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            read_timeout: Duration::from_secs(5),
            max_connections: 8,
        }
    }
}

impl ServerOptions {
    /// Sets [`ServerOptions::read_timeout`].
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }
}

/// A process listening for triggers on `<runtime dir>/<pid>.sock`. Dropping it stops the
/// accept thread and removes the socket; connections in flight finish on their own threads.
#[derive(Debug)]
pub struct TriggerServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl TriggerServer {
    /// The socket this server listens on.
    pub fn socket_path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TriggerServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // A connection wakes the accept thread, which then sees the flag. If the socket
        // file is gone nothing can wake it: the thread is left blocked rather than joined
        // forever.
        let woken = UnixStream::connect(&self.path).is_ok();
        if let Some(accept) = self.accept.take().filter(|_| woken) {
            let _ = accept.join();
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            log::warn!("trigger: cannot remove socket {}: {e}", self.path.display());
        }
    }
}

/// What every connection thread shares.
struct Shared {
    handler: Arc<dyn TriggerHandler>,
    options: ServerOptions,
    own_uid: u32,
    command: String,
    active: AtomicUsize,
}

impl RuntimeDir {
    /// Listens for triggers of this process in this directory with default
    /// [`ServerOptions`]; see [`listen`](super::listen).
    pub fn listen(&self, handler: Arc<dyn TriggerHandler>) -> io::Result<TriggerServer> {
        self.listen_with(handler, ServerOptions::default())
    }

    /// Listens for triggers of this process in this directory. Fails when this process
    /// already listens here; a socket left by a dead process with the same pid is replaced.
    pub fn listen_with(
        &self,
        handler: Arc<dyn TriggerHandler>,
        options: ServerOptions,
    ) -> io::Result<TriggerServer> {
        let path = self.socket_path(std::process::id());
        let listener = bind(&path)?;
        let shared = Arc::new(Shared {
            handler,
            options,
            own_uid: current_uid(),
            command: command_line(),
            active: AtomicUsize::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("omniprof trigger".into())
                .spawn(move || accept_loop(&listener, &shared, &stop))?
        };
        log::info!("trigger: listening on {}", path.display());
        Ok(TriggerServer {
            path,
            stop,
            accept: Some(accept),
        })
    }
}

/// Binds `path`, replacing a socket nobody listens on (left by a dead process).
fn bind(path: &Path) -> io::Result<UnixListener> {
    match UnixListener::bind(path) {
        Err(e) if e.kind() == ErrorKind::AddrInUse => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    ErrorKind::AddrInUse,
                    format!("this process already listens on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        other => other,
    }
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen on {}: {e}", path.display()),
        )
    })
}

/// This process's command line, for `--list`.
fn command_line() -> String {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                log::warn!("trigger: accept failed: {e}");
                // A persistent error (e.g. out of fds) must not spin a core.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::SeqCst) >= shared.options.max_connections {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            let reason = format!(
                "too many trigger connections (at most {} at once)",
                shared.options.max_connections
            );
            log::warn!("trigger: {reason}");
            reply(&stream, &Reply::Error(reason));
            continue;
        }
        let conn = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("omniprof trigger conn".into())
            .spawn(move || {
                // Released even if the handler panics, so the slot is not lost.
                let _slot = Slot(&conn.active);
                serve(&stream, &conn);
            });
        if let Err(e) = spawned {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            log::warn!("trigger: cannot start a connection thread: {e}");
        }
    }
}

/// One of [`ServerOptions::max_connections`], taken by a connection thread.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection: credentials, one request, one reply.
fn serve(stream: &UnixStream, shared: &Shared) {
    let uid = match peer_uid(stream) {
        Ok(uid) => uid,
        Err(e) => {
            log::warn!("trigger: cannot read peer credentials: {e}");
            reply(
                stream,
                &Reply::Error(format!("cannot check credentials: {e}")),
            );
            return;
        }
    };
    if let Err(reason) = check_peer(uid, shared.own_uid) {
        log::warn!("trigger: refused a connection: {reason}");
        reply(stream, &Reply::Error(reason));
        return;
    }
    let mut input = BufReader::new(Deadline {
        stream,
        until: Instant::now() + shared.options.read_timeout,
    });
    let request = match Request::read_from(&mut input) {
        Ok(request) => request,
        // Nothing sent: a probe or the drop wake-up, not worth a warning.
        Err(FrameError::Empty) => return,
        Err(e) => {
            log::warn!("trigger: refused a message from uid {uid}: {e}");
            reply(stream, &Reply::Error(format!("bad message: {e}")));
            return;
        }
    };
    let answer = match request {
        Request::State => Reply::State {
            command: shared.command.clone(),
            state: shared.handler.state(),
        },
        Request::Trace(text) => trace(&text, shared.handler.as_ref()),
    };
    reply(stream, &answer);
}

/// Checks a trace request, then hands it to the handler.
fn trace(text: &str, handler: &dyn TriggerHandler) -> Reply {
    if let Err(reason) = check_request(text) {
        log::warn!("trigger: refused a request: {reason}");
        return Reply::Refused(reason);
    }
    log::info!("trigger: running an on-demand request");
    // A panicking handler must not leave the client without an answer.
    match std::panic::catch_unwind(AssertUnwindSafe(|| handler.handle(text))) {
        Ok(Ok(path)) => Reply::Written(path),
        Ok(Err(reason)) => {
            log::warn!("trigger: the request was refused: {reason}");
            Reply::Refused(reason)
        }
        Err(_) => {
            log::warn!("trigger: the handler panicked");
            Reply::Error("the profiler failed while handling the request".to_owned())
        }
    }
}

/// Refuses what the engine would only warn about or ignore: a config that does not parse, an
/// output path outside the allowed directory (Kineto silently keeps its default path; the
/// caller asked for a specific place and must hear it was refused), a text that asks for no
/// trace.
pub(super) fn check_request(text: &str) -> Result<(), String> {
    let mut config = Config::default();
    let warnings = config
        .apply_on_demand(text)
        .map_err(|e| format!("invalid config: {e}"))?;
    if warnings.iter().any(|w| w.key == ACTIVITIES_LOG_FILE) {
        // The same text without the restriction holds the path that was asked for.
        let mut unrestricted = Config::default();
        let _ = unrestricted.apply(text);
        let path = unrestricted.log_file();
        let dir = on_demand_trace_dir();
        let why = check_on_demand_log_file(path, &dir)
            .err()
            .unwrap_or_else(|| "not allowed".to_owned());
        return Err(format!(
            "output path {path:?} refused: {why}; traces may only be written inside {dir:?} \
             (KINETO_ONDEMAND_TRACE_DIR of the traced process)"
        ));
    }
    if !config.is_trace_request() {
        return Err(
            "the config asks for no trace: set ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS \
             or ACTIVITIES_LOG_FILE"
                .to_owned(),
        );
    }
    Ok(())
}

/// Sends `answer`, best effort: a client that went away only costs a log line.
fn reply(stream: &UnixStream, answer: &Reply) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    if let Err(e) = answer.write_to(&mut NoSigPipe(stream)) {
        log::warn!("trigger: cannot send the reply: {e}");
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// Writes to a socket without raising `SIGPIPE` when the peer has gone: the default action
/// of that signal would kill a host process that does not ignore it.
struct NoSigPipe<'a>(&'a UnixStream);

/// `send` flags that suppress `SIGPIPE` where the platform has one.
#[cfg(any(target_os = "linux", target_os = "android"))]
const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const SEND_FLAGS: libc::c_int = 0;

impl Write for NoSigPipe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the fd is a live socket owned by the borrowed stream, and `buf` is valid
        // for reads of `buf.len()` bytes.
        let sent = unsafe {
            libc::send(
                self.0.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                SEND_FLAGS,
            )
        };
        // A negative count is an error; any other fits in usize.
        usize::try_from(sent).map_err(|_| io::Error::last_os_error())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Panics;

    impl TriggerHandler for Panics {
        fn handle(&self, _: &str) -> Result<PathBuf, String> {
            panic!("a handler bug");
        }
        fn state(&self) -> String {
            "idle".to_owned()
        }
    }

    #[test]
    fn a_panicking_handler_gets_an_error_reply_and_keeps_its_slot() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RuntimeDir::at(tmp.path().join("rt")).unwrap();
        // Two slots: the previous connection's thread may still be finishing. A leaked slot
        // per panic would refuse the third request.
        let options = ServerOptions {
            max_connections: 2,
            ..ServerOptions::default()
        };
        let _server = dir.listen_with(Arc::new(Panics), options).unwrap();
        let pid = std::process::id();
        for _ in 0..4 {
            let err = dir
                .send(pid, "ACTIVITIES_DURATION_MSECS=1", Duration::from_secs(5))
                .unwrap_err();
            assert!(err.to_string().contains("failed while handling"), "{err}");
        }
        assert_eq!(dir.list().unwrap()[0].state, "idle");
    }

    #[test]
    fn requests_are_checked_before_the_handler() {
        assert!(check_request("ACTIVITIES_DURATION_MSECS=100").is_ok());
        let err = check_request("ACTIVITIES_DURATION_MSECS=ten").unwrap_err();
        assert!(
            err.starts_with("invalid config: line 1: ACTIVITIES_DURATION_MSECS"),
            "{err}"
        );
        let err = check_request("ACTIVITY_TYPES=cpu_op").unwrap_err();
        assert!(err.contains("asks for no trace"), "{err}");
    }
}
