//! The demo's device timeline, read from the JSON file with a plain JSON parser so nothing of
//! omniprof's own reader is taken on trust: every kernel and memcpy is linked to the host op
//! that launched it and has an `ac2g` flow from its launch; and the trace loads in
//! HolisticTraceAnalysis with non-empty kernel and temporal breakdowns.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use omniprof_read::TraceReader;
use omniprof_test_support::cli::{arg, Cli};
use omniprof_test_support::skip::{self, Needs};
use serde_json::Value;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

fn demo(path: &Path) {
    OMNIPROF.ok(["demo", "-o", arg(path)]);
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn every_kernel_and_copy_is_linked_to_its_launch_and_host_op() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.pt.trace.json");
    demo(&path);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let cat = |e: &Value| e["cat"].as_str().unwrap_or("").to_owned();

    // Host ops by their own External id; launches by correlation.
    let host_ops: HashMap<i64, &Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && cat(e) == "cpu_op")
        .map(|e| (int(&e["args"]["External id"]), e))
        .collect();
    let launches: HashMap<i64, &Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && cat(e) == "privateuse1_runtime")
        .filter(|e| e["name"] != "orStreamSynchronize")
        .map(|e| (int(&e["args"]["correlation"]), e))
        .collect();
    let flow_events = |ph: &str| -> HashMap<i64, Vec<&Value>> {
        let mut by_id: HashMap<i64, Vec<&Value>> = HashMap::new();
        for e in events
            .iter()
            .filter(|e| e["ph"] == ph && e["cat"] == "ac2g")
        {
            by_id.entry(int(&e["id"])).or_default().push(e);
        }
        by_id
    };
    let (starts, ends) = (flow_events("s"), flow_events("f"));
    let ends_at: HashMap<(i64, i64, String), &Value> = ends
        .values()
        .flatten()
        .map(|f| ((int(&f["pid"]), int(&f["tid"]), f["ts"].to_string()), *f))
        .collect();

    let work: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && matches!(cat(e).as_str(), "kernel" | "gpu_memcpy"))
        .collect();
    let kernels = work.iter().filter(|e| cat(e) == "kernel").count();
    // 4 threads × 40 steps × (3 forward + 3 backward matmuls + 1 fill).
    assert_eq!(kernels, 4 * 40 * 7);
    assert_eq!(work.len() - kernels, 4 * 40 * 2, "two copies a step");
    for w in &work {
        let args = &w["args"];
        let correlation = int(&args["correlation"]);
        assert_eq!(int(&args["device"]), int(&w["pid"]));
        assert_eq!(int(&args["stream"]), int(&w["tid"]));
        let launch = launches
            .get(&correlation)
            .unwrap_or_else(|| panic!("no launch for {w}"));
        let op = host_ops
            .get(&int(&args["External id"]))
            .unwrap_or_else(|| panic!("no host op for {w}"));
        assert_eq!(args["External id"], launch["args"]["External id"]);
        assert_eq!(launch["tid"], op["tid"], "launched on the op's thread");
        let row_key = (int(&w["pid"]), int(&w["tid"]), w["ts"].to_string());
        let end = ends_at
            .get(&row_key)
            .unwrap_or_else(|| panic!("no flow ends on {w}"));
        let id = int(&end["id"]);
        let (s, f) = (&starts[&id], &ends[&id]);
        assert_eq!((s.len(), f.len()), (1, 1), "one flow pair for {w}");
        assert_eq!(s[0]["tid"], launch["tid"]);
        assert_eq!(s[0]["ts"], launch["ts"]);
        assert_eq!(f[0]["ts"], w["ts"]);
        assert_eq!(f[0]["bp"], "e");
    }
    let annotations = events
        .iter()
        .filter(|e| e["ph"] == "X" && cat(e) == "gpu_user_annotation")
        .count();
    assert!(
        annotations > 0,
        "user ranges are projected onto the streams"
    );
}

/// HTA reads the demo trace and its kernel and temporal breakdowns succeed. HTA rounds each
/// start up and each end down to whole microseconds, so device work shorter than 1 µs gets
/// a negative duration, and the temporal breakdown then fails when it lands among the
/// computation (`assert non_compute_time >= 0`): the simulated device's kernels, copies and
/// fills last at least `openreg::MIN_WORK_NS` (1 µs), as on a real device, so that no GPU
/// event of the demo's trace is negative once HTA has read it. CI installs HTA, sets
/// `OMNIPROF_HTA_PYTHON` and requires every check; elsewhere the test skips with a line the
/// test run shows.
#[test]
fn the_demo_trace_passes_the_kernel_and_temporal_breakdowns_of_holistic_trace_analysis() {
    let Ok(python) = std::env::var("OMNIPROF_HTA_PYTHON") else {
        return skip::skip(
            "HTA check",
            Needs::Hta,
            "OMNIPROF_HTA_PYTHON is not set (bash .ci/run installs HTA and sets it)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    demo(&dir.path().join("rank0.pt.trace.json"));
    let script = r#"
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
kernel_types, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
temporal = analyzer.get_temporal_breakdown(visualize=False)
print("kernel_types", len(kernel_types))
print("kernels", sorted(kernels["name"].unique()))
print("temporal", len(temporal), float(temporal["compute_time(us)"].sum()))
gpu = analyzer.t.get_trace(0)
gpu = gpu[gpu["stream"].ne(-1)]
print("gpu_events", len(gpu))
print("negative", int((gpu["dur"] < 0).sum()))
"#;
    let out = Command::new(&python)
        .args(["-c", script, dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "HTA failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {stdout}"))
            .trim()
            .to_owned()
    };
    assert_ne!(line("kernel_types "), "0");
    assert!(line("kernels ").contains("matmul_48x48"), "{stdout}");
    let temporal = line("temporal ");
    let (rows, compute) = temporal.split_once(' ').unwrap();
    assert_eq!(rows, "1", "one rank");
    assert!(compute.parse::<f64>().unwrap() > 0.0, "{stdout}");
    assert_ne!(line("gpu_events "), "0");
    assert_eq!(
        line("negative "),
        "0",
        "GPU events HTA reads as negative: {stdout}"
    );
}

#[test]
fn stubs_mode_times_every_op_on_the_device_and_prints_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stubs.pt.trace.json");
    let stdout = OMNIPROF.ok(["demo", "--mode", "stubs", "--steps", "5", "-o", arg(&path)]);
    for column in ["Self OPENREG", "OPENREG total", "# of Calls"] {
        assert!(stdout.contains(column), "{column} missing from\n{stdout}");
    }
    assert!(stdout.contains("Self OPENREG time total: "), "{stdout}");
    let trace = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert!(
        trace.activities.iter().all(|a| !a.kind.is_device()),
        "no device timeline in stubs mode"
    );
    let mms: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| &*a.name == "aten::mm")
        .collect();
    assert_eq!(mms.len(), 4 * 5 * 3);
    let timed = mms
        .iter()
        .filter(|a| {
            a.arg("device_time_us")
                .and_then(|v| v.as_i64())
                .is_some_and(|us| us > 0)
        })
        .count();
    assert!(
        timed * 10 >= mms.len() * 9,
        "{timed} of {} timed",
        mms.len()
    );
}
