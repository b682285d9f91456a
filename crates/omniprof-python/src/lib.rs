//! `omniprof._native`: the native half of the `omniprof` Python package.
//!
//! The Python package (`python/omniprof`) gives `torch.profiler`'s API; this module binds what
//! it stands on, one Rust implementation each: the session engine with its schedule
//! (`session`), the recorder (`record_function`, `instant`: `recorder`), the key averages
//! table and the Chrome JSON writer (`results`), the TensorBoard trace handler (`handler`),
//! the PyTorch op observer as a backend (`observer`), the profiler stubs bridge (`stubs`), a
//! PrivateUse1 backend's Kineto profiler (`privateuse1`), on-demand serving and the iteration
//! count (`on_demand`), the flight recorder (`flight`), and whether CUDA can be recorded
//! (`cuda`). This file only registers
//! them.
//!
//! Errors reach Python as exceptions carrying the Rust message: `ProfilerError` for what
//! the profiler refuses (`error`), `ValueError` for bad arguments. A Rust panic becomes PyO3's
//! `PanicException`; the `extern "C"` functions of `observer` catch panics instead.
//!
//! The op observer's function tables reach this module only as capsules of fixed names
//! (`capsule`): an integer, or any other object, is refused with a `TypeError`, so no number
//! or stray object a Python program passes is called as a function table (a capsule of those
//! names comes from native code, the observer's). Hooks for the tests (a panic) live in the
//! private submodule `_testing` (`testing`), not among the module's names.

mod capsule;
mod cuda;
mod error;
mod flight;
mod handler;
mod observer;
mod on_demand;
mod op_details;
mod privateuse1;
mod record_function_ids;
mod recorder;
mod results;
mod session;
mod storage_reads;
mod stubs;
mod testing;

use pyo3::prelude::*;

use cuda::cuda_unavailable_reason;
use error::ProfilerError;
use on_demand::{
    kineto_daemon_opted_in, on_demand_opted_in, poll_kineto_daemon, serve_on_demand, step,
};
use recorder::{instant, RecordFunction};

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The package's version, the workspace's (`omniprof.__version__`).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ProfilerError", m.py().get_type::<ProfilerError>())?;
    m.add(
        "PanicException",
        m.py().get_type::<pyo3::panic::PanicException>(),
    )?;
    m.add_class::<RecordFunction>()?;
    m.add_function(wrap_pyfunction!(instant, m)?)?;
    m.add_function(wrap_pyfunction!(step, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(on_demand_opted_in, m)?)?;
    m.add_function(wrap_pyfunction!(serve_on_demand, m)?)?;
    m.add_function(wrap_pyfunction!(kineto_daemon_opted_in, m)?)?;
    m.add_function(wrap_pyfunction!(poll_kineto_daemon, m)?)?;
    testing::register(m)?;
    session::register(m)?;
    results::register(m)?;
    handler::register(m)?;
    observer::register(m)?;
    flight::register(m)?;
    stubs::register(m)?;
    privateuse1::register(m)?;
    // Starts the span the clock's scale is measured over for sessions too short to measure
    // their own: by a program's first stop it is usually long enough, so that no stop waits
    // to measure it.
    omniprof::clock::CalibrationSample::take();
    Ok(())
}
