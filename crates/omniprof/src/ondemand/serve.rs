//! The on-demand engine behind the trigger socket: a process that opts in serves
//! `omniprof trigger` with this engine for as long as it runs, or until it stops serving.
//!
//! A child forked from a serving process (a DataLoader worker, a `multiprocessing` child)
//! does not serve: `fork` copies only the thread that called it, so the child has neither
//! the engine's thread nor the accept thread, and the locks those threads held stay held in
//! it. Restarting both in every worker would mean sockets and threads per worker, started
//! in a process whose copied state cannot be trusted; the parent still serves, and a child
//! that `exec`s is a new process that opts in by itself. So [`serve_triggers`] in a forked child
//! fails saying so, [`stop_serving_triggers`] there leaves the parent's socket alone, and the
//! trigger client tells a user who triggers such a child (see `crate::trigger::client`).

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cancel::{CancelledRequest, NotCancelled};
use super::request::{
    cancel_on_demand_request, enable_on_demand, on_demand_status, request_on_demand,
};
use crate::lock;
use crate::trigger::{self, TriggerHandler, TriggerRefused, TriggerServer};

/// How long a trigger's connection waits for its trace. The client gives up on its own
/// timeout; this only bounds a connection thread whose client vanished.
const WAIT_FOR_TRACE: Duration = Duration::from_secs(3600);

/// The server, with the pid of the process that started it (in a forked child, the
/// parent's: see the module docs), kept for as long as the process runs.
static SERVER: Mutex<Option<(u32, TriggerServer)>> = Mutex::new(None);

/// Runs each trigger as an on-demand request: the engine's refusal or failure is the reply.
struct Engine;

impl TriggerHandler for Engine {
    fn handle(&self, config_text: &str) -> Result<PathBuf, TriggerRefused> {
        let ticket = request_on_demand(config_text).map_err(refused)?;
        ticket.wait(WAIT_FOR_TRACE).map_err(refused)
    }

    fn handle_traced(&self, config_text: &str) -> Result<trigger::Traced, TriggerRefused> {
        let ticket = request_on_demand(config_text).map_err(refused)?;
        let (path, notes) = ticket.wait_with_notes(WAIT_FOR_TRACE).map_err(refused)?;
        Ok(trigger::Traced { path, notes })
    }

    fn state(&self) -> String {
        on_demand_status().to_string()
    }

    fn cancel(&self) -> Result<CancelledRequest, NotCancelled> {
        cancel_on_demand_request()
    }
}

/// The engine's refusal ([`Refused`](super::Refused)) or failure
/// ([`TraceFailed`](super::TraceFailed)), as the client hears it.
fn refused(why: impl std::fmt::Display) -> TriggerRefused {
    TriggerRefused::new(why.to_string())
}

/// Starts the engine's thread and listens for triggers of this process in this user's
/// runtime directory (see `listen_for_triggers`); idempotent. The process is then triggered
/// with `omniprof trigger --pid <pid> ...`.
///
/// ```no_run
/// omniprof::on_demand::serve_triggers()?;
/// println!("trigger me: omniprof trigger --pid {} --duration-ms 500", std::process::id());
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// In a child forked from a serving process it fails: the child does not serve (module
/// docs); trigger the parent.
pub fn serve_triggers() -> io::Result<()> {
    let me = std::process::id();
    if let Some((parent, _)) = &*lock(&SERVER) {
        if *parent != me {
            return Err(io::Error::other(format!(
                "process {me} was forked from process {parent}, which serves triggers: a \
                 forked child (e.g. a DataLoader worker) does not serve them, as fork copies \
                 only the calling thread; trigger process {parent}"
            )));
        }
    }
    enable_on_demand()?;
    let mut server = lock(&SERVER);
    if server.is_none() {
        *server = Some((me, trigger::listen_for_triggers(Arc::new(Engine))?));
    }
    Ok(())
}

/// Stops listening and removes this process's socket, so that a process about to exit
/// leaves nothing behind; returns whether it was serving. A request already accepted goes
/// on (see [`cancel_on_demand`](super::cancel_on_demand)), and [`serve_triggers`] listens again.
///
/// ```no_run
/// omniprof::on_demand::serve_triggers()?;
/// // ... the application's work ...
/// omniprof::on_demand::cancel_on_demand();
/// omniprof::on_demand::stop_serving_triggers();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn stop_serving_triggers() -> bool {
    // Taken out first: dropping the server joins its accept thread, not under the lock.
    let server = lock(&SERVER).take();
    match server {
        Some((pid, server)) if pid != std::process::id() => {
            // The parent's: its accept thread is not in this process, and its socket is the
            // parent's to remove.
            std::mem::forget(server);
            false
        }
        Some(_) => true,
        None => false,
    }
}
