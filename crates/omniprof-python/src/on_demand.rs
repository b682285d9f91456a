//! On-demand tracing from Python: whether the process opted in, serving the triggers of
//! `omniprof trigger --pid`, polling a Kineto daemon (dynolog, `omniprof daemon`) as
//! PyTorch's Kineto does, and the iteration count that iteration-based requests count.

use pyo3::prelude::*;

use crate::error::profiler_error;

/// `omniprof.step()`: marks the end of one iteration of the application (iteration-based
/// on-demand traces count these); returns the new iteration number.
#[pyfunction]
pub(crate) fn step() -> i64 {
    omniprof::step()
}

/// Whether `OMNIPROF_ONDEMAND` opts the process in to on-demand tracing.
#[pyfunction]
pub(crate) fn on_demand_opted_in() -> bool {
    omniprof::on_demand::on_demand_opted_in()
}

/// Serves on-demand triggers (`omniprof trigger --pid`); `ProfilerError` when it cannot.
#[pyfunction]
pub(crate) fn serve_on_demand() -> PyResult<()> {
    omniprof::on_demand::serve_triggers().map_err(|e| {
        profiler_error(format!(
            "{} is set, but triggers cannot be served: {e}",
            omniprof::on_demand::ONDEMAND_ENV
        ))
    })
}

/// Whether `KINETO_USE_DAEMON` asks the process to poll a Kineto daemon.
#[pyfunction]
pub(crate) fn kineto_daemon_opted_in() -> bool {
    omniprof::on_demand::kineto_daemon_opted_in()
}

/// Polls the Kineto daemon (dynolog, or `omniprof daemon`) for on-demand requests;
/// `ProfilerError` when the client's socket cannot be set up.
#[pyfunction]
pub(crate) fn poll_kineto_daemon() -> PyResult<()> {
    omniprof::on_demand::poll_kineto_daemon().map_err(|e| {
        profiler_error(format!(
            "{} is set, but the daemon cannot be polled: {e}",
            omniprof::on_demand::KINETO_USE_DAEMON_ENV
        ))
    })
}
