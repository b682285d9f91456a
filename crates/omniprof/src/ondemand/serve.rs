//! The on-demand engine behind the trigger socket: a process that opts in serves
//! `omniprof trigger` with this engine for as long as it runs, or until it stops serving.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::trigger::{self, TriggerHandler, TriggerServer};

/// How long a trigger's connection waits for its trace. The client gives up on its own
/// timeout; this only bounds a connection thread whose client vanished.
const WAIT_FOR_TRACE: Duration = Duration::from_secs(3600);

/// The server of this process, kept for as long as the process runs.
static SERVER: Mutex<Option<TriggerServer>> = Mutex::new(None);

/// Runs each trigger as an on-demand request: the engine's refusal or failure is the reply.
struct Engine;

impl TriggerHandler for Engine {
    fn handle(&self, config_text: &str) -> Result<PathBuf, String> {
        let ticket = super::request(config_text).map_err(|refused| refused.to_string())?;
        ticket
            .wait(WAIT_FOR_TRACE)
            .map_err(|failed| failed.to_string())
    }

    fn handle_traced(&self, config_text: &str) -> Result<trigger::Traced, String> {
        let ticket = super::request(config_text).map_err(|refused| refused.to_string())?;
        let (path, notes) = ticket
            .wait_with_notes(WAIT_FOR_TRACE)
            .map_err(|failed| failed.to_string())?;
        Ok(trigger::Traced { path, notes })
    }

    fn state(&self) -> String {
        super::status().to_string()
    }

    fn cancel(&self) -> Result<String, String> {
        super::cancel_request()
    }
}

/// Starts the engine's thread and listens for triggers of this process in this user's
/// runtime directory (see [`crate::trigger`]); idempotent. The process is then triggered
/// with `omniprof trigger --pid <pid> ...`.
///
/// ```no_run
/// omniprof::ondemand::serve()?;
/// println!("trigger me: omniprof trigger --pid {} --duration-ms 500", std::process::id());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve() -> io::Result<()> {
    super::enable()?;
    let mut server = SERVER.lock().unwrap_or_else(PoisonError::into_inner);
    if server.is_none() {
        *server = Some(trigger::listen(Arc::new(Engine))?);
    }
    Ok(())
}

/// Stops listening and removes this process's socket, so that a process about to exit
/// leaves nothing behind; returns whether it was serving. A request already accepted goes
/// on (see [`cancel`](super::cancel)), and [`serve`] listens again.
///
/// ```no_run
/// omniprof::ondemand::serve()?;
/// // ... the application's work ...
/// omniprof::ondemand::cancel();
/// omniprof::ondemand::stop_serving();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn stop_serving() -> bool {
    // Taken out first: dropping the server joins its accept thread, not under the lock.
    let server = SERVER.lock().unwrap_or_else(PoisonError::into_inner).take();
    server.is_some()
}
