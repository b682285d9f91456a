//! The recorder from Python: `record_function` (a user range) and `instant` (a point event),
//! each a direct call of omniprof's recorder on the calling thread.

use omniprof::recording::OwnedRange;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::error::type_name;

/// `omniprof.record_function(name, args=None)`: a user range (`user_annotation`) on the
/// calling thread, as a context manager or a decorator.
///
/// `__enter__` and `__exit__` call the recorder directly. The name is interned at each
/// `__enter__` as a transient name (see [`omniprof::recording::IntoName`]): a new name every step
/// is not kept for the life of the process, and an object made before one session and
/// entered in a later one still names its range right. The range may end on another thread
/// than the one that began it: its end is recorded there (see [`OwnedRange`]).
#[pyclass(module = "omniprof._native", name = "record_function")]
pub(crate) struct RecordFunction {
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
pub(crate) fn instant(name: &str) {
    omniprof::instant(name);
}
