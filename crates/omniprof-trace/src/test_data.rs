//! The reference data this crate's tests read, kept in `tests/data`, and the small sample
//! trace its writers and readers are checked on. Other crates' tests reach the same files
//! through `omniprof_test_support::data`; this crate cannot depend on that one without
//! pulling the recorder into its dependency tree. The integration tests include this file
//! (`#[path]`), which is why it names this crate's items as `omniprof_trace::` (the crate
//! root declares that name for itself in its tests).

use std::path::{Path, PathBuf};

use omniprof_trace::{
    Activity, ActivityType, CounterTrack, Flow, FlowKind, ProcessRow, Span, ThreadRow, Trace, Value,
};

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

/// One end of the `ac2g` flow `id`: its start (the launch) or an end (the work).
pub(crate) fn ac2g(id: u64, start: bool) -> Option<Flow> {
    Some(Flow {
        id,
        kind: FlowKind::Ac2g,
        start,
    })
}

/// A launch on thread 7 of process 7 from 1.2 to 1.25 ms and the kernel `gemm` it launched
/// on device 0, stream 5, from 1.3 to 1.4 ms: correlation 11, linked by the `ac2g` flow 11.
pub(crate) fn launch_and_kernel() -> (Activity, Activity) {
    use ActivityType::{ConcurrentKernel, CudaRuntime};
    let mut launch = Activity::new(CudaRuntime, "cudaLaunchKernel", 7, 7, 1_200_000, 1_250_000);
    launch.correlation = 11;
    launch.flow = ac2g(11, true);
    let mut kernel = Activity::new(ConcurrentKernel, "gemm", 0, 5, 1_300_000, 1_400_000);
    kernel.correlation = 11;
    kernel.flow = ac2g(11, false);
    (launch, kernel)
}

/// A host op on thread `tid` of process 7.
pub(crate) fn op(name: &str, tid: i64, start_ns: i64, end_ns: i64) -> Activity {
    Activity::new(ActivityType::CpuOp, name, 7, tid, start_ns, end_ns)
}

/// A trace of `activities` in a window from 1 to 2 ms, with what its header and rows carry:
/// `deviceType` metadata, device 0's properties, the sample `active` = 87.5 of device 0's
/// `sm` counter on stream 5 at 1.3 ms, process 7's row (`python`), the row of its thread 8
/// (`worker`), and a span over the window counting the activities.
pub(crate) fn sample_trace(activities: Vec<Activity>) -> Trace {
    let mut t = Trace::new(1_000_000, 2_000_000);
    t.base_time_ns = 1_000_000;
    t.set_metadata("deviceType", Value::from("openreg"));
    t.device_properties = vec![Value::Map(vec![("id".into(), Value::Int(0))])];
    let sm = CounterTrack::new(ActivityType::GpuPmCounter, "sm", 0, 5);
    t.counters.add(&sm, 1_300_000, [("active".into(), 87.5)]);
    t.processes.push(ProcessRow {
        pid: 7,
        name: "python".into(),
        label: "CPU".into(),
        sort_index: 7,
    });
    t.threads.push(ThreadRow {
        pid: 7,
        tid: 8,
        name: "worker".into(),
        sort_index: 8,
    });
    t.spans.push(Span {
        name: "omniprof".into(),
        prefix: String::new(),
        iteration: 0,
        start_ns: 1_000_000,
        end_ns: 2_000_000,
        op_count: activities.len() as u64,
    });
    t.activities = activities;
    t
}
