//! What the engine is doing and for which request, as `omniprof trigger --list` shows it.

use std::fmt;

use super::machine::{OnDemandState, OnDemandTrigger};

/// The pending or running request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSummary {
    /// The request's id.
    pub id: u64,
    /// When it starts and stops.
    pub trigger: OnDemandTrigger,
    /// Where its trace goes (a `file://` URL).
    pub log_file: String,
}

/// What the engine is doing, for a `--list` view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnDemandStatus {
    /// What the engine does now.
    pub state: OnDemandState,
    /// The request pending or running, if any.
    pub request: Option<RequestSummary>,
    /// The current iteration (−1 before the first step).
    pub iteration: i64,
    /// Whether the profiler thread runs (see `enable_on_demand`).
    pub thread_running: bool,
}

impl fmt::Display for OnDemandStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at iteration {}", self.state, self.iteration)?;
        if let Some(r) = &self.request {
            write!(f, "; request #{}: {} -> {}", r.id, r.trigger, r.log_file)?;
        }
        Ok(())
    }
}
