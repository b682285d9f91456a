//! What `convert` must not lose, each on a small trace of the shape that lost it (issue 28,
//! item 6): a flow event away from its slice, a flow id with several ends. Perfetto's trace
//! processor (tools/perfetto-check) counts the same flows and slices in the input and in both
//! outputs, and omniprof reads the same flow ends back from its JSON; nested slices of a trace
//! with absolute nanosecond times stay nested in Perfetto. And a row out of order, which the
//! streamed JSON writer cannot take, is converted whole.

use std::path::{Path, PathBuf};

use omniprof_read::TraceReader;
use omniprof_test_support::checker::{assert_loads_in_perfetto, run_checker};
use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_trace::{Flow, FlowKind};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// Writes `text` to `name` in `dir`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Converts `input` to `output` and returns the standard error, which must be empty.
fn convert(input: &Path, output: &Path) {
    let out = OMNIPROF.run(["convert", arg(input), "-o", arg(output)]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr, "", "convert warned");
}

/// The flow ends of the trace at `path`, by activity name, in file order.
fn flow_ends(path: &Path) -> Vec<(String, Flow)> {
    let trace = TraceReader::new().read_path(path).into_trace().unwrap();
    trace
        .activities
        .iter()
        .filter_map(|a| Some((a.name.to_string(), a.flow?)))
        .collect()
}

/// Converts `input` to JSON and `.pftrace` and asserts that Perfetto counts `slices` slices
/// and `flows` flows in each of the three (plus, in the outputs, the window's end marker
/// that omniprof writes, which Perfetto counts as a slice).
fn assert_perfetto_counts_in_all_three(input: &Path, slices: u64, flows: u64) -> PathBuf {
    let dir = input.parent().unwrap();
    let json = dir.join("out.json");
    let pftrace = dir.join("out.pftrace");
    convert(input, &json);
    convert(input, &pftrace);
    for (path, marker) in [(input, 0), (&json, 1), (&pftrace, 1)] {
        if let Some(report) = assert_loads_in_perfetto(path) {
            assert_eq!(
                (report.slices, report.flows),
                (Some(slices + marker), Some(flows)),
                "{}: {}",
                path.display(),
                report.line
            );
        }
    }
    json
}

fn ac2g(id: u64, start: bool) -> Flow {
    Flow {
        id,
        kind: FlowKind::Ac2g,
        start,
    }
}

/// A launch and its kernel, each flow event written after both slices (as a tool that sorts
/// events by phase writes them).
const FLOW_AFTER_ANOTHER_SLICE: &str = r#"{"traceEvents": [
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 7}},
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 30, "dur": 5, "args": {"correlation": 7}},
{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 10},
{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 30, "bp": "e"}
]}"#;

#[test]
fn a_flow_whose_events_do_not_follow_their_slices_is_kept_by_convert() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "in.json", FLOW_AFTER_ANOTHER_SLICE);
    let json = assert_perfetto_counts_in_all_three(&input, 2, 1);
    let expected = vec![
        ("cudaLaunchKernel".to_string(), ac2g(7, true)),
        ("k".to_string(), ac2g(7, false)),
    ];
    assert_eq!(flow_ends(&input), expected);
    assert_eq!(flow_ends(&json), expected);
}

/// One launch whose flow id ends on three kernels (as an MTIA trace links one launch to the
/// kernels it runs), and a flow event written before its slice.
const FLOW_WITH_THREE_ENDS: &str = r#"{"traceEvents": [
{"ph": "X", "cat": "cuda_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 7}},
{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 10},
{"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 30, "dur": 5, "args": {"correlation": 7}},
{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 30, "bp": "e"},
{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 40, "dur": 5, "args": {"correlation": 7}},
{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 40, "bp": "e"},
{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 8, "ts": 50, "bp": "e"},
{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 8, "ts": 50, "dur": 5, "args": {"correlation": 7}}
]}"#;

#[test]
fn every_end_of_a_flow_with_several_ends_is_kept_in_json_and_pftrace() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "in.json", FLOW_WITH_THREE_ENDS);
    let json = assert_perfetto_counts_in_all_three(&input, 4, 3);
    let expected = vec![
        ("launch".to_string(), ac2g(7, true)),
        ("k1".to_string(), ac2g(7, false)),
        ("k2".to_string(), ac2g(7, false)),
        ("k3".to_string(), ac2g(7, false)),
    ];
    assert_eq!(flow_ends(&input), expected);
    assert_eq!(flow_ends(&json), expected);
}

#[test]
fn a_trace_whose_row_is_out_of_order_is_converted_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "in.json",
        r#"{"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
{"ph": "X", "cat": "cpu_op", "name": "early", "pid": 1, "tid": 1, "ts": 2, "dur": 1}
]}"#,
    );
    let json = dir.path().join("out.json.gz");
    convert(&input, &json);
    let trace = TraceReader::new().read_path(&json).into_trace().unwrap();
    let names: Vec<&str> = trace.activities.iter().map(|a| &*a.name).collect();
    assert_eq!(names, ["early", "late"]);
}

/// Two slices nested to the nanosecond, at absolute times without a base time (as Kineto
/// wrote traces before `baseTimeNanoseconds`): Perfetto reads `ts` as a double, which keeps
/// a quarter of a microsecond here, so that the inner one seems to end after the outer one.
const NESTED_TO_THE_NANOSECOND: &str = r#"{"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 1712195498123456.124, "dur": 1.000},
{"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 1712195498123456.126, "dur": 0.998}
]}"#;

#[test]
fn slices_nested_to_the_nanosecond_at_absolute_times_stay_nested_in_perfetto_after_convert() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "in.json", NESTED_TO_THE_NANOSECOND);
    if let Some(report) = run_checker(&input) {
        // The shape: Perfetto drops one of the two from the input itself.
        assert!(
            report.has_error("slice_drop_overlapping_complete_event"),
            "{}",
            report.line
        );
    }
    for out in ["out.json", "out.json.gz", "out.pftrace"] {
        let out = dir.path().join(out);
        convert(&input, &out);
        if let Some(report) = assert_loads_in_perfetto(&out) {
            // Both, and the window's end marker.
            assert_eq!(report.slices, Some(3), "{}", report.line);
        }
        let trace = TraceReader::new().read_path(&out).into_trace().unwrap();
        let times: Vec<(i64, i64)> = trace
            .activities
            .iter()
            .map(|a| (a.start_ns, a.end_ns))
            .collect();
        assert_eq!(
            times,
            [
                (1_712_195_498_123_456_124, 1_712_195_498_123_457_124),
                (1_712_195_498_123_456_126, 1_712_195_498_123_457_124)
            ]
        );
    }
}
