//! The triggering side: send one request to a listening process, or list them all.

use std::io::{self, BufReader, ErrorKind};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::handler::Traced;
use super::protocol::{Deadline, FrameError, Reply, Request};
use super::runtime_dir::{RuntimeDir, SOCKET_SUFFIX};
use crate::config::ONDEMAND_ENV;

/// How long `--list` waits for each process to say its state.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a trigger did not produce a trace. Every variant names the pid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TriggerError {
    /// No process listens on the pid's socket.
    #[error(
        "process {pid} is not listening for triggers (no server at {}); start it with \
         {ONDEMAND_ENV}=1 in its environment to opt in (a PyTorch process without omniprof: \
         with KINETO_USE_DAEMON=1, while `omniprof daemon` runs)",
        path.display()
    )]
    NotListening {
        /// The pid asked for.
        pid: u32,
        /// The socket path that has no server.
        path: PathBuf,
    },
    /// No process has the pid: telling the user to opt it in would send them after a process
    /// that is gone.
    #[error("process {pid} does not exist (no /proc/{pid})")]
    NoSuchProcess {
        /// The pid asked for.
        pid: u32,
    },
    /// No process listens on the pid's socket, and the pid is a child forked from a process
    /// that does (same program and command line; e.g. a DataLoader worker): a forked child
    /// does not serve triggers (see `crate::ondemand::serve_triggers`).
    #[error(
        "process {pid} is not listening for triggers (no server at {}): it was forked from \
         process {parent}, which is; a forked child (e.g. a DataLoader worker) does not \
         serve triggers even with {ONDEMAND_ENV}=1, as fork copies only the calling thread \
         and not the server's. Trigger process {parent} instead",
        path.display()
    )]
    ForkedChild {
        /// The pid asked for.
        pid: u32,
        /// The process it was forked from.
        parent: u32,
        /// The socket path that has no server.
        path: PathBuf,
    },
    /// The process read the request and declined it (busy, bad config, output path not
    /// allowed, trace could not be written).
    #[error("process {pid} refused the request: {reason}")]
    Refused {
        /// The pid asked for.
        pid: u32,
        /// What the process said.
        reason: String,
    },
    /// The process could not accept the message itself (credentials, framing, size).
    #[error("process {pid} rejected the message: {reason}")]
    Rejected {
        /// The pid asked for.
        pid: u32,
        /// What the process said.
        reason: String,
    },
    /// No reply in time; the request may still be running in the process.
    #[error("no reply from process {pid} within {timeout:?}; the request may still be running")]
    TimedOut {
        /// The pid asked for.
        pid: u32,
        /// How long the client waited.
        timeout: Duration,
    },
    /// The runtime directory or the socket failed.
    #[error("cannot trigger process {pid} through {}: {source}", path.display())]
    Io {
        /// The pid asked for.
        pid: u32,
        /// The socket path.
        path: PathBuf,
        #[source]
        /// The I/O error.
        source: io::Error,
    },
    /// This user's runtime directory could not be used (its error names the path).
    #[error("cannot trigger process {pid}: {source}")]
    RuntimeDir {
        /// The pid asked for.
        pid: u32,
        #[source]
        /// The I/O error.
        source: io::Error,
    },
    /// The reply was not a reply of this protocol.
    #[error("process {pid} sent an unreadable reply: {reason}")]
    BadReply {
        /// The pid asked for.
        pid: u32,
        /// What was wrong with it.
        reason: String,
    },
}

/// One process listed by [`RuntimeDir::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listening {
    /// The process id.
    pub pid: u32,
    /// Its command line, or empty when it did not answer.
    pub command: String,
    /// What its handler says (e.g. `idle`), or why it could not be asked.
    pub state: String,
}

impl RuntimeDir {
    /// Sends the Kineto config `text` to process `pid`, waits up to `timeout` for the trace,
    /// and returns the path it was written to. See [`send_trigger`](super::send_trigger).
    pub fn send(&self, pid: u32, text: &str, timeout: Duration) -> Result<PathBuf, TriggerError> {
        self.send_traced(pid, text, timeout)
            .map(|traced| traced.path)
    }

    /// [`RuntimeDir::send`], with the notes the process gives about the trace.
    pub fn send_traced(
        &self,
        pid: u32,
        text: &str,
        timeout: Duration,
    ) -> Result<Traced, TriggerError> {
        match self.exchange(pid, &Request::Trace(text.to_owned()), timeout)? {
            Reply::Written { path, notes } => Ok(Traced { path, notes }),
            Reply::Refused(reason) => Err(TriggerError::Refused { pid, reason }),
            Reply::Error(reason) => Err(TriggerError::Rejected { pid, reason }),
            Reply::State { .. } | Reply::Cancelled(_) => Err(TriggerError::BadReply {
                pid,
                reason: "a state or cancel reply to a trace request".to_owned(),
            }),
        }
    }

    /// Asks process `pid`'s flight recorder to write its window now, waits up to `timeout`,
    /// and returns the dump's path; a process without one (or rate-limited) refuses.
    pub fn dump(&self, pid: u32, timeout: Duration) -> Result<PathBuf, TriggerError> {
        match self.exchange(pid, &Request::Dump, timeout)? {
            Reply::Written { path, .. } => Ok(path),
            Reply::Refused(reason) => Err(TriggerError::Refused { pid, reason }),
            Reply::Error(reason) => Err(TriggerError::Rejected { pid, reason }),
            Reply::State { .. } | Reply::Cancelled(_) => Err(TriggerError::BadReply {
                pid,
                reason: "a state or cancel reply to a dump request".to_owned(),
            }),
        }
    }

    /// Cancels the pending or running request of process `pid` and returns what was
    /// cancelled; with nothing to cancel, [`TriggerError::Refused`] says so.
    pub fn cancel(&self, pid: u32, timeout: Duration) -> Result<String, TriggerError> {
        match self.exchange(pid, &Request::Cancel, timeout)? {
            Reply::Cancelled(what) => Ok(what),
            Reply::Refused(reason) => Err(TriggerError::Refused { pid, reason }),
            Reply::Error(reason) => Err(TriggerError::Rejected { pid, reason }),
            Reply::State { .. } | Reply::Written { .. } => Err(TriggerError::BadReply {
                pid,
                reason: "a state or trace reply to a cancel request".to_owned(),
            }),
        }
    }

    /// The processes listening in this directory, by pid, each with its command line and
    /// state. Sockets left behind by processes that no longer exist are removed.
    pub fn list(&self) -> io::Result<Vec<Listening>> {
        let mut listed = Vec::new();
        for entry in std::fs::read_dir(self.path())? {
            let name = entry?.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_suffix(SOCKET_SUFFIX))
                .and_then(|stem| stem.parse::<u32>().ok())
            else {
                continue;
            };
            let (command, state) = match self.exchange(pid, &Request::State, LIST_TIMEOUT) {
                Ok(Reply::State { command, state }) => (command, state),
                Ok(Reply::Error(reason) | Reply::Refused(reason)) => {
                    (String::new(), format!("refused: {reason}"))
                }
                Ok(Reply::Written { .. } | Reply::Cancelled(_)) => {
                    (String::new(), "unexpected reply".to_owned())
                }
                Err(TriggerError::NoSuchProcess { .. }) => {
                    let path = self.socket_path(pid);
                    match std::fs::remove_file(&path) {
                        Ok(()) => log::info!("trigger: removed stale socket {}", path.display()),
                        Err(e) => log::warn!("trigger: cannot remove {}: {e}", path.display()),
                    }
                    continue;
                }
                Err(TriggerError::NotListening { .. }) => (
                    String::new(),
                    "socket left behind, not listening".to_owned(),
                ),
                Err(TriggerError::TimedOut { .. }) => (String::new(), "not responding".to_owned()),
                Err(e) => (String::new(), e.to_string()),
            };
            listed.push(Listening {
                pid,
                command,
                state,
            });
        }
        listed.sort_by_key(|l| l.pid);
        Ok(listed)
    }

    /// The parent of `pid` when `pid` looks forked from it without an `exec` (the same
    /// executable and command line) and the parent has a socket here and is alive.
    fn serving_parent(&self, pid: u32) -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
        let parent: u32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let same = |what: &str| -> Option<bool> {
            Some(match what {
                "exe" => {
                    std::fs::read_link(format!("/proc/{pid}/exe")).ok()?
                        == std::fs::read_link(format!("/proc/{parent}/exe")).ok()?
                }
                _ => {
                    std::fs::read(format!("/proc/{pid}/{what}")).ok()?
                        == std::fs::read(format!("/proc/{parent}/{what}")).ok()?
                }
            })
        };
        let forked = same("exe")? && same("cmdline")?;
        (forked && is_alive(parent) && self.socket_path(parent).exists()).then_some(parent)
    }

    /// One request, one reply.
    fn exchange(
        &self,
        pid: u32,
        request: &Request,
        timeout: Duration,
    ) -> Result<Reply, TriggerError> {
        let path = self.socket_path(pid);
        let io_error = |source| TriggerError::Io {
            pid,
            path: path.clone(),
            source,
        };
        let stream = match UnixStream::connect(&path) {
            Ok(stream) => stream,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
                return Err(match self.serving_parent(pid) {
                    Some(parent) => TriggerError::ForkedChild { pid, parent, path },
                    None if !is_alive(pid) => TriggerError::NoSuchProcess { pid },
                    None => TriggerError::NotListening { pid, path },
                });
            }
            Err(e) => return Err(io_error(e)),
        };
        stream.set_write_timeout(Some(timeout)).map_err(io_error)?;
        // A server that refuses early (credentials, size) closes its side while we write;
        // its reply is still waiting to be read, and says more than the broken pipe.
        let written = request.write_to(&mut &stream);
        let mut input = BufReader::new(Deadline::new(&stream, Instant::now() + timeout));
        match (Reply::read_from(&mut input), written) {
            (Ok(reply), _) => Ok(reply),
            (Err(_), Err(e)) => Err(io_error(e)),
            (Err(FrameError::TimedOut { .. }), Ok(())) => {
                Err(TriggerError::TimedOut { pid, timeout })
            }
            (Err(FrameError::Io(e)), Ok(())) => Err(io_error(e)),
            (Err(e), Ok(())) => Err(TriggerError::BadReply {
                pid,
                reason: e.to_string(),
            }),
        }
    }
}

/// Whether a process `pid` exists (one of another user counts: it exists).
fn is_alive(pid: u32) -> bool {
    // Pid 0 would ask about our own process group.
    let Some(pid) = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
