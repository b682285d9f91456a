//! `omniprof._native._testing`: hooks for the package's tests, kept out of the module's
//! public names (and its stubs).

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
