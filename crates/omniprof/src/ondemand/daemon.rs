//! The on-demand engine as a client of a Kineto daemon (dynolog, `omniprof daemon`): the
//! poller of `crate::dynolog` hands it each config text the daemon has for this process, and
//! asks whether it could start a trace now.

use std::io;

use super::machine::OnDemandState;
use super::request::{on_demand_status, request_on_demand};
use crate::dynolog::{start_polling, Profiler};

/// Polls the Kineto daemon from this process, as PyTorch's Kineto does with
/// `KINETO_USE_DAEMON=1`, and runs what it hands over as on-demand requests; idempotent.
/// Fails only when the client's socket cannot be bound (in `KINETO_IPC_SOCKET_DIR`, else the
/// abstract namespace); a daemon that is not running is polled again five seconds later.
///
/// ```no_run
/// omniprof::on_demand::poll_kineto_daemon()?;
/// // `dyno gputrace --pids <this pid>` or `omniprof trigger --pid <this pid>` now traces it.
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn poll_kineto_daemon() -> io::Result<()> {
    start_polling(Profiler { idle, run })
}

/// Whether the engine could take a request now: no request pending or running.
fn idle() -> bool {
    let status = on_demand_status();
    status.state == OnDemandState::WaitForRequest && status.request.is_none()
}

/// Runs the daemon's config text as an on-demand request; the engine writes the trace.
fn run(text: &str) {
    match request_on_demand(text) {
        Ok(ticket) => log::info!(
            "omniprof: the daemon's request runs as on-demand request #{}",
            ticket.id()
        ),
        Err(refused) => log::warn!("omniprof: refused the daemon's request: {refused}"),
    }
}
