//! What the trigger socket hands a request to ([`TriggerHandler`]), and what it answers with
//! ([`Traced`]).

use std::path::PathBuf;

use crate::ondemand::{CancelledRequest, NotCancelled};

/// What runs a trigger's request: the on-demand engine, or a test double.
///
/// Both methods are called from connection threads, possibly at once: a handler that runs
/// one trace at a time refuses the second request (with the reason) rather than queueing.
pub trait TriggerHandler: Send + Sync + 'static {
    /// Runs one on-demand request, given as Kineto config text that already parsed with
    /// [`Config::apply_on_demand`](crate::Config::apply_on_demand), asks for a trace, and
    /// names no output outside the on-demand directory. Blocks until the trace is written
    /// and returns its path, or returns why the request was refused or failed.
    fn handle(&self, config_text: &str) -> Result<PathBuf, String>;

    /// One line for `omniprof trigger --list`, such as `idle` or `tracing until 12:00:01`.
    fn state(&self) -> String;

    /// [`TriggerHandler::handle`], with notes about the trace for the client to show (such
    /// as an iteration-based request that fell back to a time-based trace). The default has
    /// no notes.
    fn handle_traced(&self, config_text: &str) -> Result<Traced, String> {
        self.handle(config_text).map(|path| Traced {
            path,
            notes: Vec::new(),
        })
    }

    /// Cancels the pending or running request (`omniprof trigger --cancel`) and says which
    /// it was, or why nothing was cancelled. The default cancels nothing.
    fn cancel(&self) -> Result<CancelledRequest, NotCancelled> {
        Err(NotCancelled::Unsupported)
    }
}

/// A written trace, as the client hears of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    /// Where the trace was written.
    pub path: PathBuf,
    /// What the user should know about the trace, one line each.
    pub notes: Vec<String>,
}
