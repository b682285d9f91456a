//! What the trigger socket hands a request to ([`TriggerHandler`]), and what it answers with
//! ([`Traced`], or [`TriggerRefused`]).

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
    fn handle(&self, config_text: &str) -> Result<PathBuf, TriggerRefused>;

    /// One line for `omniprof trigger --list`, such as `idle` or `tracing until 12:00:01`.
    fn state(&self) -> String;

    /// The command line `omniprof trigger --list` shows for the traced process; `None` (the
    /// default) shows this process's own. A handler that serves on behalf of another process
    /// (`omniprof daemon`, for a Kineto client) gives that process's.
    fn command(&self) -> Option<String> {
        None
    }

    /// [`TriggerHandler::handle`], with notes about the trace for the client to show (such
    /// as an iteration-based request that fell back to a time-based trace). The default has
    /// no notes.
    fn handle_traced(&self, config_text: &str) -> Result<Traced, TriggerRefused> {
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

/// Why a [`TriggerHandler`] produced no trace: the request was refused, or its trace failed.
/// The client hears the reason as it is, in a `refused` reply
/// ([`TriggerError::Refused`](super::TriggerError::Refused)).
///
/// It holds the text rather than the engine's [`Refused`](crate::ondemand::Refused) or
/// [`TraceFailed`](crate::ondemand::TraceFailed): a handler need not be the engine, and the
/// reason crosses the socket as text anyway.
///
/// ```
/// use omniprof::on_demand::TriggerRefused;
///
/// let refused = TriggerRefused::new("profiler busy");
/// assert_eq!(refused.reason(), "profiler busy");
/// assert_eq!(refused.to_string(), "profiler busy");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct TriggerRefused {
    reason: String,
}

impl TriggerRefused {
    /// A refusal for `reason`, as the client is to show it.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }

    /// The reason, as the client shows it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}
