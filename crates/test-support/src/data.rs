//! PyTorch's reference data, kept with the trace crate in `crates/omniprof-trace/tests/data`,
//! the rows of the example of `docs/trace-format.md` §14, and the synthetic traces of
//! `scripts/gen_trace.py`.

use std::path::{Path, PathBuf};

use omniprof::Trace;
use omniprof::{ProcessRow, ThreadRow};

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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../omniprof-trace/tests/data")
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
