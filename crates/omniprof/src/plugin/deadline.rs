//! Calls into a plugin under a deadline (`OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS`): create, start,
//! stop, processEvents and destroy each run on a thread of their own while the engine waits
//! at most that long. Past it the profiler is abandoned: the call's thread is left to itself
//! (detached, still blocked in the plugin), the library stays loaded, the profiler takes no
//! further part in this process, and the error names the call and the deadline.
//!
//! The correlation pushes and pops stay on the application threads, where a thread hop per
//! host op would cost more than the op: a plugin that blocks in those still blocks its
//! caller.

use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::backend::BackendError;

/// Why a profiler was abandoned, once it was; shared by every session of the profiler.
#[derive(Clone, Default)]
pub(crate) struct Abandoned(Arc<OnceLock<String>>);

impl Abandoned {
    /// The reason, if the profiler was abandoned.
    pub(crate) fn reason(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    /// Runs `f` (one call into the plugin) on a thread of its own and waits for it at most
    /// `limit`. Past it, the profiler is abandoned and the error says so.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        call: &str,
        limit: Duration,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, BackendError> {
        if let Some(reason) = self.reason() {
            return Err(BackendError::new(format!("{call} not made: {reason}")));
        }
        let (done, result) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name(format!("omniprof {call}"))
            .spawn(move || {
                // The receiver is gone when the call was abandoned: nothing to deliver.
                let _ = done.send(f());
            })
            .map_err(|e| BackendError::new(format!("{call}: cannot start its thread: {e}")))?;
        result.recv_timeout(limit).map_err(|e| {
            if e == mpsc::RecvTimeoutError::Disconnected {
                return BackendError::new(format!("{call} panicked"));
            }
            let reason = format!(
                "{call} did not return within {} ms; the profiler is abandoned (its thread \
                 detached, the library kept loaded) for the rest of this process",
                limit.as_millis()
            );
            log::warn!("omniprof: {reason}");
            let _ = self.0.set(reason.clone());
            BackendError::new(reason)
        })
    }
}
