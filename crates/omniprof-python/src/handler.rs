//! `omniprof.tensorboard_trace_handler`: omniprof's [`TraceDirHandler`] as PyTorch's
//! `on_trace_ready` callback, which receives the profiler and writes its current trace.

use omniprof::TraceDirHandler;
use pyo3::prelude::*;

use crate::error::profiler_error;
use crate::results::PyTrace;

/// Writes each trace it is called with into a directory as
/// `{worker_name}.{unix_time_ns}.pt.trace.json[.gz]`, the layout TensorBoard and HTA read.
#[pyclass(module = "omniprof._native", name = "TraceDirHandler", frozen)]
pub(crate) struct PyTraceDirHandler(TraceDirHandler);

#[pymethods]
impl PyTraceDirHandler {
    #[new]
    #[pyo3(signature = (dir_name, worker_name=None, use_gzip=false))]
    fn new(dir_name: std::path::PathBuf, worker_name: Option<&str>, use_gzip: bool) -> Self {
        Self(omniprof::tensorboard_trace_handler(
            dir_name,
            worker_name,
            use_gzip,
        ))
    }

    /// Writes the trace `prof` holds (`prof._trace`, the cycle just finished) and returns the
    /// file's path; a `ProfilerError` names the path when it cannot be written.
    fn __call__(&self, py: Python<'_>, prof: &Bound<'_, PyAny>) -> PyResult<String> {
        let trace = prof.getattr("_trace")?;
        let trace = trace.cast::<PyTrace>().map_err(|_| {
            profiler_error("the trace handler was called with a profiler that holds no trace")
        })?;
        let trace = trace.get();
        let path = py
            .detach(|| self.0.write(trace.trace()))
            .map_err(profiler_error)?;
        Ok(path.display().to_string())
    }

    #[getter]
    fn dir_name(&self) -> String {
        self.0.dir().display().to_string()
    }

    #[getter]
    fn worker_name(&self) -> &str {
        self.0.worker()
    }

    /// The files written so far, oldest first.
    #[getter]
    fn written(&self) -> Vec<String> {
        self.0
            .written()
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTraceDirHandler>()
}
