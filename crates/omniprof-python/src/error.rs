//! The errors `omniprof._native` raises: `ProfilerError` for what the profiler refuses, and
//! how a `TypeError`'s message names the type it got.
//!
//! Every module raises through these, so that one message reads the same whichever binding
//! raised it.

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(
    omniprof,
    ProfilerError,
    PyRuntimeError,
    "What the profiler refuses: a second profiler while one runs, a call out of order \
     (export before stop), a trace that cannot be written. The message is omniprof's."
);

/// A `ProfilerError` with `message`.
pub(crate) fn profiler_error(message: impl std::fmt::Display) -> PyErr {
    ProfilerError::new_err(message.to_string())
}

/// The name of `object`'s type, for a message.
pub(crate) fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}
