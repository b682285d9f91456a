//! The on-demand engine: traces of a running process, asked for at any time; documented on
//! [`request_on_demand`].

mod base;
mod cancel;
#[cfg(target_os = "linux")]
mod daemon;
mod engine;
mod error;
mod machine;
mod request;
#[cfg(unix)]
mod serve;
mod status;
#[cfg(unix)]
mod write;

pub use base::BaseConfigError;
pub use cancel::{CancelledRequest, NotCancelled};
#[cfg(target_os = "linux")]
pub use daemon::poll_kineto_daemon;
pub use engine::NOTES_METADATA;
pub use error::{Refused, TraceFailed};
pub use machine::{OnDemandState, OnDemandTrigger};
pub use request::{
    cancel_on_demand, cancel_on_demand_request, on_demand_status, request_on_demand, Ticket,
};
#[cfg(unix)]
pub use serve::{serve_triggers, stop_serving_triggers};
pub use status::{OnDemandStatus, RequestSummary};

use crate::config::ONDEMAND_ENV;

/// When [`ONDEMAND_ENV`] opts the process in, starts the engine and listens for triggers
/// ([`serve_triggers`]); when `KINETO_USE_DAEMON` does (on Linux), polls the Kineto daemon
/// ([`poll_kineto_daemon`]); returns whether either runs. A failure is logged, not raised: the
/// process goes on.
///
/// ```no_run
/// if omniprof::on_demand::enable_on_demand_from_env() {
///     println!("trigger me: omniprof trigger --pid {} --iterations 5", std::process::id());
/// }
/// ```
pub fn enable_on_demand_from_env() -> bool {
    let mut running = false;
    if on_demand_opted_in() {
        match serve_triggers() {
            Ok(()) => running = true,
            Err(e) => log::error!("omniprof on-demand: cannot start serving triggers: {e}"),
        }
    }
    #[cfg(target_os = "linux")]
    if crate::dynolog::kineto_daemon_opted_in() {
        match poll_kineto_daemon() {
            Ok(()) => running = true,
            Err(e) => log::error!("omniprof on-demand: cannot poll the Kineto daemon: {e}"),
        }
    }
    running
}

/// Whether [`ONDEMAND_ENV`] is set to `1`, `true` or `yes` (any case).
pub fn on_demand_opted_in() -> bool {
    std::env::var(ONDEMAND_ENV).is_ok_and(|v| {
        ["1", "true", "yes"]
            .iter()
            .any(|on| v.trim().eq_ignore_ascii_case(on))
    })
}

/// Triggers arrive on a Unix socket, which this platform lacks: always
/// [`std::io::ErrorKind::Unsupported`]. In-process [`request_on_demand`]s still work.
#[cfg(not(unix))]
pub fn serve_triggers() -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "on-demand triggers need a Unix socket, which this platform lacks; \
         use omniprof::on_demand::request_on_demand in the process instead",
    ))
}

/// Nothing listens on this platform (see [`serve_triggers`]): always `false`.
#[cfg(not(unix))]
pub fn stop_serving_triggers() -> bool {
    false
}

#[cfg(test)]
mod tests;
