//! The listening side: one accept thread, one short-lived thread per connection.
//!
//! Connections that have not yet sent their request are kept in a queue, oldest first: when
//! every slot is taken, the oldest of them is let go (its reading side shut down) to serve
//! the new connection, so clients that connect and stay silent (or a client reconnecting in a
//! loop) cannot hold every slot for the whole read deadline while legitimate triggers are
//! refused. A request that arrived before that is still answered. A connection whose request
//! is being handled is never dropped this way; when all slots
//! hold such connections, a new one is refused. A connection that has not sent its header
//! line within [`ServerOptions::header_timeout`] (1 s) is let go as well.

use std::collections::VecDeque;
use std::io::{self, BufReader, ErrorKind, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::handler::{Traced, TriggerHandler, TriggerRefused};
use super::peer::{check_peer, peer_uid};
use super::protocol::{Deadline, FrameError, Reply, Request};
use super::runtime_dir::{current_uid, RuntimeDir};
use crate::config::keys::ACTIVITIES_LOG_FILE;
use crate::config::{check_on_demand_log_file, on_demand_trace_dir, Config};
use crate::lock;

/// How the server treats its connections.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    /// How long a client may take to send its whole request; a slower (or stalled) client
    /// gets an error reply and is dropped. Default 5 s.
    pub read_timeout: Duration,
    /// How long a client may take to send the header line of its request (the client sends
    /// it as soon as it connects); a client silent that long gets an error reply and is
    /// dropped, so that it holds a slot for this long, not [`ServerOptions::read_timeout`].
    /// Default 1 s.
    pub header_timeout: Duration,
    /// Connections served at once. A new connection beyond them takes the slot of the
    /// connection that has waited longest for its request; when every slot holds a request
    /// being handled, it is answered with an error at once. Default 8.
    pub max_connections: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            read_timeout: Duration::from_secs(5),
            header_timeout: Duration::from_secs(1),
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

    /// Sets [`ServerOptions::header_timeout`].
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
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
    /// The connections still waiting for their request, oldest first, with their ids.
    waiting: Mutex<VecDeque<(u64, UnixStream)>>,
    next_id: AtomicU64,
}

impl Shared {
    /// Shuts down the reading side of the connection that has waited longest for its request
    /// with nothing unread (a connection whose bytes have arrived is about to be served);
    /// false if none. Its thread then reads the end of the stream and gives its slot back.
    fn drop_oldest_waiting(&self) -> bool {
        let oldest = {
            let mut waiting = lock(&self.waiting);
            let silent = waiting.iter().position(|(_, stream)| !has_unread(stream));
            silent.and_then(|at| waiting.remove(at))
        };
        let Some((id, stream)) = oldest else {
            return false;
        };
        log::debug!("trigger: dropping connection #{id}, silent while all slots were taken");
        // Only the reading side: the peek above and the client's write race, and a request
        // that arrived meanwhile (or that its thread already read) is still read in full and
        // answered; a silent client reads the end of the stream.
        let _ = stream.shutdown(std::net::Shutdown::Read);
        true
    }

    /// Forgets connection `id` as waiting (its request arrived, or it failed).
    fn stop_waiting(&self, id: u64) {
        lock(&self.waiting).retain(|(waiting, _)| *waiting != id);
    }
}

/// Whether bytes the server has not read yet wait on `stream`.
fn has_unread(stream: &UnixStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: the fd is a live socket owned by `stream`, and `byte` is valid for a write of
    // one byte; MSG_PEEK leaves it unread and MSG_DONTWAIT makes the call return at once.
    let got = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            std::ptr::addr_of_mut!(byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    got > 0
}

impl RuntimeDir {
    /// Listens for triggers of this process in this directory with default
    /// [`ServerOptions`]; see `listen_for_triggers`.
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
        self.listen_for(std::process::id(), handler, options)
    }

    /// Listens for triggers of process `pid` in this directory, on its behalf: for a daemon
    /// that serves a process which cannot listen itself (`omniprof daemon`, for a Kineto
    /// client). Fails with [`ErrorKind::AddrInUse`] when a server already listens on the
    /// pid's socket (the process itself, say); a socket nobody listens on is replaced.
    pub fn listen_for(
        &self,
        pid: u32,
        handler: Arc<dyn TriggerHandler>,
        options: ServerOptions,
    ) -> io::Result<TriggerServer> {
        let path = self.socket_path(pid);
        let listener = bind(&path)?;
        let command = handler.command().unwrap_or_else(command_line);
        let shared = Arc::new(Shared {
            handler,
            options,
            own_uid: current_uid(),
            command,
            active: AtomicUsize::new(0),
            waiting: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(1),
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
                    format!(
                        "a server already listens on {} (this process itself, or an \
                         `omniprof daemon` serving its Kineto client, through which triggers \
                         reach it)",
                        path.display()
                    ),
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
        if !take_slot(shared) {
            let reason = format!(
                "too many trigger connections (at most {} at once)",
                shared.options.max_connections
            );
            log::warn!("trigger: {reason}");
            reply(&stream, &Reply::Error(reason));
            continue;
        }
        // Waiting from now on, so that the next full house can drop it before its thread
        // has even started.
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(handle) = stream.try_clone() {
            lock(&shared.waiting).push_back((id, handle));
        }
        let conn = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("omniprof trigger conn".into())
            .spawn(move || {
                // Released even if the handler panics, so the slot is not lost.
                let _slot = Slot(&conn.active);
                serve(&stream, id, &conn);
            });
        if let Err(e) = spawned {
            shared.stop_waiting(id);
            shared.active.fetch_sub(1, Ordering::SeqCst);
            log::warn!("trigger: cannot start a connection thread: {e}");
        }
    }
}

/// How long the accept thread waits for dropped connections to give their slots back.
/// What answers a `dump` request: the flight recorder's, installed by it (so the socket
/// does not depend on it).
static DUMP_REQUESTS: OnceLock<fn() -> Result<PathBuf, String>> = OnceLock::new();

/// Installs what answers `dump` requests (the first one installed stays).
pub(crate) fn on_dump_request(dump: fn() -> Result<PathBuf, String>) {
    let _ = DUMP_REQUESTS.set(dump);
}

const DROPPED_GRACE: Duration = Duration::from_millis(200);

/// Takes a slot for a new connection, making room by dropping the connection that has waited
/// longest for its request when all are taken; false when every slot holds a request being
/// handled. A dropped connection gives its slot back when its thread sees the end of the
/// stream: until then up to twice `max_connections` threads may be alive, and beyond that the
/// accept thread waits for them a little.
fn take_slot(shared: &Shared) -> bool {
    let max = shared.options.max_connections;
    if shared.active.load(Ordering::SeqCst) >= max && !shared.drop_oldest_waiting() {
        return false;
    }
    let until = Instant::now() + DROPPED_GRACE;
    loop {
        if shared.active.fetch_add(1, Ordering::SeqCst) < 2 * max {
            return true;
        }
        shared.active.fetch_sub(1, Ordering::SeqCst);
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One of [`ServerOptions::max_connections`], taken by a connection thread.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves connection `id`: credentials, one request, one reply.
fn serve(stream: &UnixStream, id: u64, shared: &Shared) {
    let uid = match peer_uid(stream) {
        Ok(uid) => uid,
        Err(e) => {
            shared.stop_waiting(id);
            log::warn!("trigger: cannot read peer credentials: {e}");
            reply(
                stream,
                &Reply::Error(format!("cannot check credentials: {e}")),
            );
            return;
        }
    };
    if let Err(reason) = check_peer(uid, shared.own_uid) {
        shared.stop_waiting(id);
        log::warn!("trigger: refused a connection: {reason}");
        reply(stream, &Reply::Error(reason));
        return;
    }
    let now = Instant::now();
    let mut input = BufReader::new(Deadline {
        stream,
        until: now + shared.options.read_timeout,
        header_until: Some(now + shared.options.header_timeout),
    });
    let read = Request::read_from(&mut input);
    shared.stop_waiting(id);
    let request = match read {
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
        Request::Cancel => cancel_trigger(shared.handler.as_ref()),
        // The flight recorder is the process's, whatever handles traces.
        Request::Dump => match DUMP_REQUESTS.get().map(|dump| dump()) {
            Some(Ok(path)) => Reply::Written {
                path,
                notes: Vec::new(),
            },
            Some(Err(reason)) => Reply::Refused(reason),
            None => Reply::Refused("no flight recorder runs in this process".into()),
        },
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
    match std::panic::catch_unwind(AssertUnwindSafe(|| handler.handle_traced(text))) {
        Ok(Ok(Traced { path, notes })) => Reply::Written { path, notes },
        Ok(Err(reason)) => {
            log::warn!("trigger: the request was refused: {reason}");
            Reply::Refused(reason.to_string())
        }
        Err(_) => {
            log::warn!("trigger: the handler panicked");
            Reply::Error("the profiler failed while handling the request".to_owned())
        }
    }
}

/// Asks the handler to cancel its request.
fn cancel_trigger(handler: &dyn TriggerHandler) -> Reply {
    match std::panic::catch_unwind(AssertUnwindSafe(|| handler.cancel())) {
        Ok(Ok(what)) => {
            log::info!("trigger: {what}");
            Reply::Cancelled(what.to_string())
        }
        Ok(Err(reason)) => Reply::Refused(reason.to_string()),
        Err(_) => {
            log::warn!("trigger: the handler panicked");
            Reply::Error("the profiler failed while cancelling".to_owned())
        }
    }
}

/// Checks a trigger's config text as the trigger socket does before any handler sees it,
/// and says why it is refused: a config that does not parse, an output path outside the
/// allowed directory (Kineto silently keeps its default path; the caller asked for a
/// specific place and must hear it was refused), or a text that asks for no trace. For a
/// server of another transport (`omniprof daemon`'s RPC) that must refuse the same.
///
/// ```
/// use omniprof::on_demand::check_trigger_config;
///
/// assert!(check_trigger_config("ACTIVITIES_DURATION_MSECS=500").is_ok());
/// let refused = check_trigger_config("ACTIVITIES_LOG_FILE=/etc/x.json").unwrap_err();
/// assert!(refused.reason().contains("/etc/x.json"), "{refused}");
/// ```
pub fn check_trigger_config(text: &str) -> Result<(), TriggerRefused> {
    check_request(text).map_err(TriggerRefused::new)
}

/// [`check_trigger_config`], with the reason as text.
pub(super) fn check_request(text: &str) -> Result<(), String> {
    let mut config = Config::default();
    // Unlogged: the handler parses the same text again and logs its warnings once.
    let warnings = config
        .check_on_demand(text)
        .map_err(|e| format!("invalid config: {e}"))?;
    if warnings.iter().any(|w| w.key == ACTIVITIES_LOG_FILE) {
        // The same text without the restriction holds the path that was asked for.
        let mut unrestricted = Config::default();
        let _ = unrestricted.apply_quietly(text);
        let path = unrestricted.log_file();
        let dir = on_demand_trace_dir();
        let why = check_on_demand_log_file(path, &dir)
            .err()
            .map_or_else(|| "not allowed".to_owned(), |why| why.to_string());
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
        fn handle(&self, _: &str) -> Result<PathBuf, TriggerRefused> {
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
        // Two slots. A connection's thread gives its slot back just after its reply (later
        // still while a panic's backtrace is printed), so a request refused as one too many
        // is sent again; a slot leaked per panic would refuse the requests for good.
        let options = ServerOptions {
            max_connections: 2,
            ..ServerOptions::default()
        };
        let _server = dir.listen_with(Arc::new(Panics), options).unwrap();
        let pid = std::process::id();
        let busy = |text: &str| text.contains("too many trigger connections");
        // Asks again while both slots are still taken, for up to 30 s.
        let until_a_slot_is_free = |ask: &dyn Fn() -> String| {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let answer = ask();
                if !busy(&answer) || std::time::Instant::now() > deadline {
                    break answer;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        for _ in 0..4 {
            let err = until_a_slot_is_free(&|| {
                dir.send(pid, "ACTIVITIES_DURATION_MSECS=1", Duration::from_secs(5))
                    .unwrap_err()
                    .to_string()
            });
            assert!(err.contains("failed while handling"), "{err}");
        }
        // The listing asks the server too, so it may come while the last request's
        // connection still holds its slot.
        let state = until_a_slot_is_free(&|| dir.list().unwrap()[0].state.clone());
        assert_eq!(state, "idle");
    }

    #[test]
    fn a_connection_dropped_as_silent_after_its_request_arrived_still_gets_its_reply() {
        let (server_end, client) = UnixStream::pair().unwrap();
        let shared = Shared {
            handler: Arc::new(Panics),
            options: ServerOptions::default(),
            own_uid: current_uid(),
            command: String::new(),
            active: AtomicUsize::new(1),
            waiting: Mutex::new(VecDeque::from([(1, server_end.try_clone().unwrap())])),
            next_id: AtomicU64::new(2),
        };
        let request = Request::Trace("ACTIVITIES_DURATION_MSECS=1".to_owned());
        request.write_to(&mut &client).unwrap();
        // The connection's thread has read the request and not yet left the queue when a new
        // connection finds every slot taken: nothing is unread, so it looks silent.
        let until = Instant::now() + Duration::from_secs(5);
        let mut input = BufReader::new(Deadline::new(&server_end, until));
        assert_eq!(Request::read_from(&mut input).unwrap(), request);
        assert!(shared.drop_oldest_waiting());
        let answer = Reply::Written {
            path: PathBuf::from("/tmp/t.pt.trace.json"),
            notes: Vec::new(),
        };
        reply(&server_end, &answer);
        let mut input = BufReader::new(Deadline::new(&client, until));
        assert_eq!(Reply::read_from(&mut input).unwrap(), answer);
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
