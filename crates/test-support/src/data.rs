//! PyTorch's reference data, kept in `crates/test-support/data`,
//! the rows of the example of `docs/trace-format.md` §14, and the synthetic traces of
//! `scripts/gen_trace.py`.

use std::path::{Path, PathBuf};

use omniprof::trace::{
    Activity, ActivityType, CounterTrack, Flow, FlowKind, ProcessRow, Span, ThreadRow, Trace, Value,
};

/// Runs `python3 scripts/gen_trace.py PATH ARGS...` (CI installs Python) and returns `path`.
pub fn gen_trace(path: &Path, args: &[&str]) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gen_trace.py");
    let status = std::process::Command::new("python3")
        .arg(&script)
        .arg(path)
        .args(args)
        .status()
        .expect("python3 runs scripts/gen_trace.py (CI installs it)");
    assert!(status.success(), "{} {args:?} failed", script.display());
    path.to_owned()
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// The trace PyTorch 2.15 wrote for a small CPU run (`docs/trace-format.md` §11), named
/// `-trace.json` rather than `.pt.trace.json` so that `.gitignore` (which drops
/// `*.pt.trace.json` outputs) keeps it.
pub fn reference_trace() -> PathBuf {
    data_dir().join("pytorch-2.15-cpu-trace.json")
}

/// `key_averages().table(sort_by="cpu_time_total", row_limit=12)` as PyTorch 2.15 printed it
/// for [`reference_trace`] (`docs/stubs-and-summary.md`, section 6): the text of
/// `pytorch-2.15-cpu-table.txt`.
pub fn reference_table() -> String {
    let path = data_dir().join("pytorch-2.15-cpu-table.txt");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The trace PyTorch 2.15 wrote for a CPU run with `profile_memory=True`,
/// `with_flops=True` and `record_shapes=True` (by `gen_pytorch_memory_trace.py` beside it,
/// which also added each op's `flops` arg: PyTorch's trace does not carry them).
pub fn memory_trace() -> PathBuf {
    data_dir().join("pytorch-2.15-cpu-memory-trace.json")
}

/// A table PyTorch printed for [`memory_trace`]: `table` is the file's name less
/// `pytorch-2.15-cpu-memory-` and `.txt` (`table`, `table-top`, `table-flops`, `events`;
/// see the generator for the arguments of each).
pub fn memory_table(table: &str) -> String {
    let path = data_dir().join(format!("pytorch-2.15-cpu-memory-{table}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The trace PyTorch 2.15 wrote with `with_stack=True` and a verbose experimental config
/// (`gen_pytorch_stack_trace.py` beside it): `python_function` events, and a `Call stack`
/// arg on every op.
pub fn stack_trace() -> PathBuf {
    data_dir().join("pytorch-2.15-cpu-stack-trace.json")
}

/// What PyTorch reported of [`stack_trace`]: `what` is the file's name less
/// `pytorch-2.15-cpu-stack-` and `.txt` (`table`, `table-wide`, `folded`; see the generator).
pub fn stack_report(what: &str) -> String {
    let path = data_dir().join(format!("pytorch-2.15-cpu-stack-{what}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the example of `docs/trace-format.md` §14: host process 4242 with one
/// thread, device 0 with stream 7, as Kineto writes them.
pub fn add_example_rows(trace: &mut Trace) {
    for (pid, label, sort_index) in [(4242, "CPU", 4242), (0, "GPU 0", 5_000_000)] {
        trace.add_process(ProcessRow {
            pid,
            name: "python".into(),
            label: label.into(),
            sort_index,
        });
    }
    trace.add_thread(ThreadRow {
        pid: 4242,
        tid: 4242,
        name: "thread 4242 (python)".into(),
        sort_index: 4242,
    });
    trace.add_thread(ThreadRow {
        pid: 0,
        tid: 7,
        name: "stream 7 ".into(),
        sort_index: 7,
    });
}

/// One end of the `ac2g` flow `id`: its start (the launch) or an end (the work).
pub fn ac2g(id: u64, start: bool) -> Option<Flow> {
    Some(Flow {
        id,
        kind: FlowKind::Ac2g,
        start,
    })
}

/// A launch on thread 7 of process 7 from 1.2 to 1.25 ms and the kernel `gemm` it launched
/// on device 0, stream 5, from 1.3 to 1.4 ms: correlation 11, linked by the `ac2g` flow 11.
pub fn launch_and_kernel() -> (Activity, Activity) {
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
pub fn op(name: &str, tid: i64, start_ns: i64, end_ns: i64) -> Activity {
    Activity::new(ActivityType::CpuOp, name, 7, tid, start_ns, end_ns)
}

/// A trace of `activities` in a window from 1 to 2 ms, with what its header and rows carry:
/// `deviceType` metadata, device 0's properties, the sample `active` = 87.5 of device 0's
/// `sm` counter on stream 5 at 1.3 ms, process 7's row (`python`), the row of its thread 8
/// (`worker`), and a span over the window counting the activities.
pub fn sample_trace(activities: Vec<Activity>) -> Trace {
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

/// A small Chrome JSON trace: two nested ops on one thread, with `distributedInfo.rank`
/// when given (for the tests of directories and ranks).
pub fn two_op_trace(rank: Option<i64>) -> String {
    let info = rank.map_or(String::new(), |r| {
        format!(r#""distributedInfo": {{"backend": "nccl", "rank": {r}}}, "#)
    });
    format!(
        r#"{{{info}"traceEvents": [
{{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 1, "dur": 10}},
{{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 2, "dur": 5}}
]}}"#
    )
}
