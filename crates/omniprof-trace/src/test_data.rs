//! The reference data this crate's unit tests read, kept in `tests/data`. Other crates' tests
//! reach the same files through `omniprof_test_support::data`; this crate cannot depend on
//! that one without pulling the recorder into its dependency tree.

use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The trace PyTorch 2.15 wrote for a small CPU run.
pub(crate) fn reference_trace() -> PathBuf {
    data_dir().join("pytorch-2.15-cpu-trace.json")
}

/// PyTorch's `key_averages().table(sort_by="cpu_time_total", row_limit=12)` of
/// [`reference_trace`].
pub(crate) fn reference_table() -> String {
    let path = data_dir().join("pytorch-2.15-cpu-table.txt");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The trace PyTorch 2.15 wrote for a CPU run with `profile_memory=True`,
/// `with_flops=True` and `record_shapes=True` (by `tests/data/gen_pytorch_memory_trace.py`,
/// which also added each op's `flops` arg: PyTorch's trace does not carry them).
pub(crate) fn memory_trace() -> PathBuf {
    data_dir().join("pytorch-2.15-cpu-memory-trace.json")
}

/// A table PyTorch printed for [`memory_trace`]: `table` is the file's name less
/// `pytorch-2.15-cpu-memory-` and `.txt` (`table`, `table-top`, `table-flops`, `events`;
/// see the generator for the arguments of each).
pub(crate) fn memory_table(table: &str) -> String {
    let path = data_dir().join(format!("pytorch-2.15-cpu-memory-{table}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The trace PyTorch 2.15 wrote for a CPU run with `with_stack=True`, a verbose
/// experimental config and `with_flops=True` (by `tests/data/gen_pytorch_stack_trace.py`):
/// `python_function` events, and a `Call stack` arg on every op.
pub(crate) fn stack_trace() -> PathBuf {
    data_dir().join("pytorch-2.15-cpu-stack-trace.json")
}

/// What PyTorch reported of [`stack_trace`]: `what` is the file's name less
/// `pytorch-2.15-cpu-stack-` and `.txt` (`table`, `folded`; see the generator).
pub(crate) fn stack_report(what: &str) -> String {
    let path = data_dir().join(format!("pytorch-2.15-cpu-stack-{what}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
