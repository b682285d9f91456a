//! The socket through which `omniprof trigger` asks a running process for an on-demand trace;
//! documented on [`listen_for_triggers`].

mod client;
mod handler;
mod peer;
mod protocol;
mod runtime_dir;
mod server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use client::{Listening, TriggerError};
pub use handler::{Traced, TriggerHandler, TriggerRefused};
pub use protocol::TRIGGER_MAX_BODY;
pub use runtime_dir::RuntimeDir;
pub(crate) use server::on_dump_request;
pub use server::{check_trigger_config, ServerOptions, TriggerServer};

/// Listens for triggers of this process in this user's [`RuntimeDir`] until the returned
/// server is dropped.
///
/// ```no_run
/// # use std::sync::Arc;
/// # fn run(engine: Arc<dyn omniprof::on_demand::TriggerHandler>) -> std::io::Result<()> {
/// let server = omniprof::on_demand::listen_for_triggers(engine)?;
/// println!("trigger me: omniprof trigger --pid {} --duration-ms 500", std::process::id());
/// # drop(server);
/// # Ok(())
/// # }
/// ```
///
/// Triggering a running process: the transport of on-demand tracing.
///
/// A process that opts in listens on a Unix socket, `<runtime dir>/<pid>.sock`, in a private
/// per-user directory ([`RuntimeDir`]: `$XDG_RUNTIME_DIR/omniprof`, else
/// `<temp dir>/omniprof-<uid>`, mode 0700). `omniprof trigger` connects, sends Kineto config
/// text, and waits for the path of the written trace. What runs the request is a
/// [`TriggerHandler`]; this module only carries requests to it, and guards the door:
///
/// - only a peer with this process's uid is served (its credentials are asked of the kernel,
///   `SO_PEERCRED`, not inferred from file modes);
/// - a request is one frame with a bounded header and a body of at most
///   [`TRIGGER_MAX_BODY`] bytes of UTF-8, read before a deadline; anything else is answered with an
///   error and logged, and the server goes on serving;
/// - a config that does not parse, asks for no trace, or names an output outside the
///   on-demand directory (`KINETO_ONDEMAND_TRACE_DIR`, after resolving `..` and symlinks) is
///   refused before the handler sees it.
///
/// The wire format (shared by both sides, protocol `omniprof-trigger` version 1): each message is a
/// header line `omniprof-trigger/1 KIND LENGTH\n` and `LENGTH` bytes of UTF-8. Requests:
/// `trace` (body: the config text), `state` and `cancel` (empty). Replies: `ok` (body: the
/// trace's path, then one line per note about the trace), `refused` (the reason), `error`
/// (why the message itself was not accepted), `state` (command line, newline, state line) and
/// `cancelled` (what was cancelled).
///
/// The server cannot be wedged by a client that connects and says nothing: when every
/// connection slot is taken, the connection that has waited longest for its request is
/// dropped to serve the new one (a request that is being handled keeps its slot), so a
/// client reconnecting in a loop delays others by a connection, not by the read deadline.
///
/// ```
/// use std::path::PathBuf;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use omniprof::on_demand::{RuntimeDir, TriggerError, TriggerHandler, TriggerRefused};
///
/// struct Fixed;
/// impl TriggerHandler for Fixed {
///     fn handle(&self, _config_text: &str) -> Result<PathBuf, TriggerRefused> {
///         Ok(PathBuf::from("/tmp/t.pt.trace.json"))
///     }
///     fn state(&self) -> String {
///         "idle".to_owned()
///     }
/// }
///
/// let tmp = tempfile::tempdir()?;
/// let dir = RuntimeDir::at(tmp.path().join("omniprof"))?;
/// let server = dir.listen(Arc::new(Fixed))?;
/// let pid = std::process::id();
/// let path = dir.send(pid, "ACTIVITIES_DURATION_MSECS=100", Duration::from_secs(5))?;
/// assert_eq!(path, PathBuf::from("/tmp/t.pt.trace.json"));
/// assert_eq!(dir.list()?[0].state, "idle");
///
/// let refused = dir.send(pid, "ACTIVITIES_LOG_FILE=/etc/t.json", Duration::from_secs(5));
/// assert!(matches!(refused, Err(TriggerError::Refused { .. })));
/// drop(server); // stops listening and removes the socket
/// assert!(dir.list()?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn listen_for_triggers(handler: Arc<dyn TriggerHandler>) -> std::io::Result<TriggerServer> {
    RuntimeDir::user()?.listen(handler)
}

/// Sends the Kineto config `text` to process `pid` through this user's [`RuntimeDir`],
/// waits up to `timeout` for the trace, and returns the path it was written to.
///
/// ```no_run
/// use std::time::Duration;
///
/// let path = omniprof::on_demand::send_trigger(4242, "ACTIVITIES_DURATION_MSECS=500", Duration::from_secs(60))?;
/// println!("{}", path.display());
/// # Ok::<(), omniprof::on_demand::TriggerError>(())
/// ```
pub fn send_trigger(pid: u32, text: &str, timeout: Duration) -> Result<PathBuf, TriggerError> {
    let dir = RuntimeDir::user().map_err(|source| TriggerError::RuntimeDir { pid, source })?;
    dir.send(pid, text, timeout)
}

/// [`send_trigger`], with the notes the process gives about the trace (see [`Traced`]).
pub fn send_trigger_traced(
    pid: u32,
    text: &str,
    timeout: Duration,
) -> Result<Traced, TriggerError> {
    let dir = RuntimeDir::user().map_err(|source| TriggerError::RuntimeDir { pid, source })?;
    dir.send_traced(pid, text, timeout)
}

/// Cancels the pending or running request of process `pid` through this user's
/// [`RuntimeDir`], and returns what was cancelled; see [`RuntimeDir::cancel`].
///
/// ```no_run
/// let what = omniprof::on_demand::cancel_trigger(4242, std::time::Duration::from_secs(10))?;
/// println!("{what}");
/// # Ok::<(), omniprof::on_demand::TriggerError>(())
/// ```
pub fn cancel_trigger(pid: u32, timeout: Duration) -> Result<String, TriggerError> {
    let dir = RuntimeDir::user().map_err(|source| TriggerError::RuntimeDir { pid, source })?;
    dir.cancel(pid, timeout)
}

/// Asks process `pid`'s flight recorder ([`FlightRecorder`](crate::FlightRecorder)) to
/// write its window into its dump directory now, and returns the dump's path.
///
/// ```no_run
/// use std::time::Duration;
///
/// let path = omniprof::on_demand::request_flight_dump(4242, Duration::from_secs(60))?;
/// println!("{}", path.display());
/// # Ok::<(), omniprof::on_demand::TriggerError>(())
/// ```
pub fn request_flight_dump(pid: u32, timeout: Duration) -> Result<PathBuf, TriggerError> {
    let dir = RuntimeDir::user().map_err(|source| TriggerError::RuntimeDir { pid, source })?;
    dir.dump(pid, timeout)
}
