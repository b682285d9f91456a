//! `omniprof._native`: the native half of the `omniprof` Python package.
//!
//! The Python package (`python/omniprof`) gives `torch.profiler`'s API; this module binds what
//! it stands on, one Rust implementation each: the session engine with its schedule
//! (`session`), the recorder (`record_function`, `instant`), the key averages table and the
//! Chrome JSON writer (`results`), the TensorBoard trace handler (`handler`), the PyTorch op
//! observer as a backend (`observer`), on-demand serving and the iteration count.
//!
//! Errors reach Python as exceptions carrying the Rust message: `ProfilerError` for what
//! the profiler refuses, `ValueError` for bad arguments. A Rust panic becomes PyO3's
//! `PanicException`; the `extern "C"` functions of `observer` catch panics instead.
//!
//! The op observer's function tables reach this module only as capsules of fixed names
//! (`capsule`): an integer, or any other object, is refused with a `TypeError`, so no
//! number or stray object a Python program passes is called as a function table (a capsule
//! of those names comes from native code, the observer's). Hooks for the tests (a panic) live in the
//! private submodule `_testing`, not among the module's names.

mod capsule;
mod error;
mod handler;
mod observer;
mod privateuse1;
mod results;
mod session;
mod stubs;

use omniprof::OwnedRange;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use error::{profiler_error, type_name, ProfilerError};

/// `omniprof.record_function(name, args=None)`: a user range (`user_annotation`) on the
/// calling thread, as a context manager or a decorator.
///
/// `__enter__` and `__exit__` call the recorder directly. The name is interned at each
/// `__enter__` as a transient name (see [`omniprof::IntoName`]): a new name every step
/// is not kept for the life of the process, and an object made before one session and
/// entered in a later one still names its range right. The range may end on another thread
/// than the one that began it: its end is recorded there (see [`OwnedRange`]).
#[pyclass(module = "omniprof._native", name = "record_function")]
struct RecordFunction {
    name: String,
    args: Option<String>,
    range: Option<OwnedRange>,
}

#[pymethods]
impl RecordFunction {
    /// `name` is a `str`, or `bytes` as PyTorch also takes (decoded as UTF-8, an invalid
    /// sequence replaced).
    #[new]
    #[pyo3(signature = (name, args=None))]
    fn new(name: &Bound<'_, PyAny>, args: Option<String>) -> PyResult<Self> {
        let name = match name.cast::<PyBytes>() {
            Ok(bytes) => String::from_utf8_lossy(bytes.as_bytes()).into_owned(),
            Err(_) => name.extract::<String>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "record_function's name must be str or bytes, not {}",
                    type_name(name)
                ))
            })?,
        };
        Ok(Self {
            name,
            args,
            range: None,
        })
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        let range = OwnedRange::begin(slf.name.as_str());
        slf.range = match (&slf.args, range) {
            (Some(args), Some(range)) => Some(range.with_arg("args", args.as_str())),
            (_, range) => range,
        };
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) {
        if let Some(range) = self.range.take() {
            range.end();
        }
    }

    /// As a decorator: every call of `func` runs inside a range of this name.
    fn __call__<'py>(&self, func: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = func.py();
        py.import("omniprof._decorate")?
            .getattr("decorate")?
            .call1((self.name.as_str(), self.args.as_deref(), func))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    #[getter]
    fn args(&self) -> Option<&str> {
        self.args.as_deref()
    }
}

/// `omniprof.instant(name)`: a point event (`cpu_instant_event`) on the calling thread.
#[pyfunction]
fn instant(name: &str) {
    omniprof::instant(name);
}

/// `omniprof.step()`: marks the end of one iteration of the application (iteration-based
/// on-demand traces count these); returns the new iteration number.
#[pyfunction]
fn step() -> i64 {
    omniprof::step()
}

/// Whether `OMNIPROF_ONDEMAND` opts the process in to on-demand tracing.
#[pyfunction]
fn on_demand_opted_in() -> bool {
    omniprof::on_demand_opted_in()
}

/// Serves on-demand triggers (`omniprof trigger --pid`); `ProfilerError` when it cannot.
#[pyfunction]
fn serve_on_demand() -> PyResult<()> {
    omniprof::serve_triggers().map_err(|e| {
        profiler_error(format!(
            "{} is set, but triggers cannot be served: {e}",
            omniprof::ONDEMAND_ENV
        ))
    })
}

/// `omniprof._native._testing`: hooks for the package's tests, kept out of the module's
/// public names (and its stubs).
mod testing {
    use pyo3::prelude::*;

    /// Panics in Rust, to show the interpreter survives (a `PanicException`).
    #[pyfunction]
    fn panic() {
        panic!("omniprof: a panic injected by _testing.panic");
    }

    pub(crate) fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
        let m = PyModule::new(parent.py(), "_testing")?;
        m.add_function(wrap_pyfunction!(panic, &m)?)?;
        // An attribute, not `add_submodule`, which would list it in `__all__`.
        parent.setattr("_testing", m)
    }
}

/// Why CUDA activity cannot be recorded in this process (no driver, no `libcupti`, a CUPTI
/// version of unknown layout), in one line, or `None` when CUPTI can record it.
#[pyfunction]
fn cuda_unavailable_reason() -> Option<String> {
    omniprof_cupti::unavailable_reason()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
    testing::register(m)?;
    session::register(m)?;
    results::register(m)?;
    handler::register(m)?;
    observer::register(m)?;
    stubs::register(m)?;
    privateuse1::register(m)?;
    Ok(())
}
