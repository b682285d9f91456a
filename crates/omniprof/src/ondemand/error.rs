//! Why a request was refused ([`Refused`]) or produced no trace ([`TraceFailed`]).

use std::path::PathBuf;
use std::time::Duration;

use super::base::BaseConfigError;
use crate::config::ConfigError;

/// Why a request was not accepted. Nothing was scheduled; the process goes on.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A trace is running or being written, or a synchronous session is active; the reason
    /// says until when.
    #[error("{0}")]
    Busy(String),
    /// Another request waits for its start.
    #[error("{0}")]
    Pending(String),
    /// The request text is not a valid config (including a log file outside the allowed
    /// directory, [`crate::config::on_demand_trace_dir`]).
    #[error("invalid request: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    /// The base config file could not be used.
    BaseConfig(#[from] BaseConfigError),
    /// Valid, but cannot be honoured (activities disabled, no iteration count, a start in
    /// the past, ...).
    #[error("{0}")]
    Declined(String),
}

/// Why an accepted request produced no trace file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceFailed {
    /// Its scheduled start could not be kept (in the past, or too little warm-up left).
    #[error("{0}")]
    CouldNotStart(String),
    #[error("cancelled")]
    /// Cancelled before it ran.
    Cancelled,
    #[error("preempted by a synchronous profiling session")]
    /// A synchronous profiling session took the profiler.
    Preempted,
    /// The session could not be prepared, started or stopped.
    #[error("profiling session failed: {0}")]
    Session(String),
    /// The trace was recorded but could not be written.
    #[error("cannot write the trace to {}: {error}", path.display())]
    Write {
        /// Where the trace was to go.
        path: PathBuf,
        /// Why it could not be written.
        error: String,
    },
    /// [`Ticket::wait`](super::Ticket::wait) gave up; the request goes on, and waiting again
    /// is fine.
    #[error("no result after {0:?}; the request is still running")]
    TimedOut(Duration),
}
