//! What cancelling a request ([`cancel_on_demand_request`](super::cancel_on_demand_request),
//! `omniprof trigger --cancel`) reports: the request it cancelled ([`CancelledRequest`]), or
//! why nothing was cancelled ([`NotCancelled`]). Their text is the reply the trigger client
//! prints.

use std::fmt;

use super::machine::{OnDemandState, OnDemandTrigger};

/// The request a cancel stopped: no file is written for it, and its ticket gets
/// [`TraceFailed::Cancelled`](super::TraceFailed::Cancelled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelledRequest {
    /// The request's number.
    pub id: u64,
    /// The engine's state when it was cancelled.
    pub state: OnDemandState,
    /// When it was to start and stop.
    pub trigger: OnDemandTrigger,
}

impl fmt::Display for CancelledRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cancelled request #{} ({}): {}",
            self.id, self.state, self.trigger
        )
    }
}

/// Why a cancel cancelled nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotCancelled {
    /// No request is pending or running.
    #[error("nothing to cancel: no request is pending or running")]
    NoRequest,
    /// The request's trace is being written (or the request torn down): it is finished,
    /// not cancelled.
    #[error("nothing to cancel: request #{id} is in {state}, its trace is being written")]
    BeingWritten {
        /// The request's number.
        id: u64,
        /// The engine's state: `ProcessTrace` or `Cancelling`.
        state: OnDemandState,
    },
    /// The process's trigger handler cannot cancel requests (the default of
    /// `TriggerHandler::cancel`); the on-demand engine never says this.
    #[error("this process cannot cancel requests")]
    Unsupported,
}
