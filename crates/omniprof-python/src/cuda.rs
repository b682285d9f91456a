//! Whether this process can record CUDA activity, asked of the NVIDIA backend
//! (`omniprof_cupti`): the Python package warns with the reason when CUDA was asked for, and
//! leaves CUDA out of the default activities where it cannot be recorded.

use pyo3::prelude::*;

/// Why CUDA activity cannot be recorded in this process (no driver, no `libcupti`, a CUPTI
/// version of unknown layout), in one line, or `None` when CUPTI can record it.
#[pyfunction]
pub(crate) fn cuda_unavailable_reason() -> Option<String> {
    omniprof_cupti::unavailable_reason()
}
