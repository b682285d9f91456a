//! The capsules the op observer hands its function tables over in.
//!
//! A table reaches this module only as a capsule of a fixed name: an integer, or any other
//! object, is refused with a `TypeError`, so no number or stray object a Python program passes
//! is called as a function table (a capsule of those names comes from native code, the
//! observer's).

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::error::type_name;

/// The pointer a capsule named `name` holds: what the op observer hands over (its
/// `entry_points()`, `stubs_api()`). A `TypeError` naming the capsule expected for anything
/// else (an integer address, a capsule of another name), so that no number a Python program
/// passes is called as a function table; `what` says whose capsule it is.
pub(crate) fn capsule_pointer(
    object: &Bound<'_, PyAny>,
    name: &CStr,
    what: &str,
) -> PyResult<NonNull<c_void>> {
    let expected = name.to_string_lossy();
    let capsule = object.cast::<PyCapsule>().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a capsule named '{expected}' ({what}), not {}",
            type_name(object)
        ))
    })?;
    let actual = capsule
        .name()?
        // SAFETY: the name is copied at once, while nothing else runs (the GIL is held).
        .map(|actual| unsafe { actual.as_cstr() }.to_owned());
    if actual.as_deref() != Some(name) {
        return Err(PyTypeError::new_err(format!(
            "expected a capsule named '{expected}' ({what}), not a capsule named {}",
            actual.map_or_else(
                || "nothing".into(),
                |n| format!("'{}'", n.to_string_lossy())
            )
        )));
    }
    capsule.pointer_checked(Some(name))
}
