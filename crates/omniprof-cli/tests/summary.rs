//! Proves `omniprof summary` works as a user runs it: on the reference PyTorch trace it prints
//! exactly the table PyTorch printed (plain or gzip input); `--format csv|json`,
//! `--group-by-shapes`, `--row-limit` and `--sort-by` shape the output; a truncated file fails
//! with the byte offset, the event index and what was expected, and with `--partial` still
//! prints the rows of what was read; unknown event kinds are counted on standard error; a
//! trace recorded in stubs mode on OpenReg gets `OPENREG` device columns from its stub times;
//! `--group-by-stack N` on PyTorch's `with_stack` trace prints PyTorch's `Source Location`
//! table and stacks in JSON and CSV.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_test_support::data::{
    gen_trace, reference_table, reference_trace, stack_report, stack_trace,
};
use omniprof_test_support::lock::serial;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The arguments of `omniprof summary TRACE ARGS...`.
fn summary<'a>(trace: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    [&["summary", arg(trace)], args].concat()
}

const PYTORCH_ARGS: [&str; 4] = ["--sort-by", "cpu_time_total", "--row-limit", "12"];

#[test]
fn the_reference_trace_prints_pytorchs_table() {
    assert_eq!(
        OMNIPROF.ok(summary(&reference_trace(), &PYTORCH_ARGS)),
        reference_table()
    );
}

#[test]
fn gzip_input_prints_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json.gz");
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&std::fs::read(reference_trace()).unwrap())
        .unwrap();
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    assert_eq!(
        OMNIPROF.ok(summary(&path, &PYTORCH_ARGS)),
        reference_table()
    );
}

#[test]
fn row_limit_minus_one_prints_every_row_in_first_appearance_order() {
    let out = OMNIPROF.ok(summary(&reference_trace(), &["--row-limit", "-1"]));
    let names: Vec<&str> = out
        .lines()
        .skip(3)
        .take_while(|l| !l.starts_with('-'))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names.len(), 18);
    assert_eq!(
        names[..4],
        [
            "model_inference",
            "aten::randn",
            "aten::empty",
            "aten::normal_"
        ]
    );
}

#[test]
fn group_by_shapes_adds_the_input_shapes_column() {
    let out = OMNIPROF.ok(summary(
        &reference_trace(),
        &["--group-by-shapes", "--sort-by", "count"],
    ));
    let header = out.lines().nth(1).unwrap();
    assert!(
        header.ends_with("# of Calls                    Input Shapes  "),
        "{out}"
    );
    assert!(out.contains("        [[256, 256]]  "), "{out}");
}

#[test]
fn csv_and_json_formats() {
    let csv = OMNIPROF.ok(summary(
        &reference_trace(),
        &[
            "--format",
            "csv",
            "--sort-by",
            "self_cpu_time_total",
            "--row-limit",
            "2",
        ],
    ));
    assert_eq!(
        csv,
        "name,count,self_cpu_time_total_us,cpu_time_total_us,cpu_time_avg_us,\
         self_device_time_total_us,device_time_total_us,device_time_avg_us,on_device,user_annotation,\
         cpu_memory_usage,self_cpu_memory_usage,device_memory_usage,self_device_memory_usage,flops\n\
         aten::mm,3,65162.397,65168.911,21722.970,0.000,0.000,0.000,false,false,0,0,0,0,0\n\
         aten::clamp_min,3,31928.754,31928.754,10642.918,0.000,0.000,0.000,false,false,0,0,0,0,0\n"
    );
    let json = OMNIPROF.ok(summary(
        &reference_trace(),
        &["--format", "json", "--row-limit", "1"],
    ));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["self_cpu_time_total_us"], 127392.143);
    assert_eq!(
        doc["rows"],
        serde_json::json!([{
            "name": "model_inference", "count": 1,
            "self_cpu_time_total_us": 602.183, "cpu_time_total_us": 127392.143,
            "cpu_time_avg_us": 127392.143, "self_device_time_total_us": 0.0,
            "device_time_total_us": 0.0, "device_time_avg_us": 0.0,
            "on_device": false, "user_annotation": true,
            "cpu_memory_usage": 0, "self_cpu_memory_usage": 0, "device_memory_usage": 0,
            "self_device_memory_usage": 0, "flops": 0
        }])
    );
}

/// The reference trace cut inside `traceEvents[24]` (the second `aten::as_strided` of
/// `block_0`); returns the file and its length.
fn truncated(dir: &Path) -> (PathBuf, usize) {
    let bytes = std::fs::read(reference_trace()).unwrap();
    let text = text(&bytes);
    let marker = "\"External id\": 18,";
    let cut = text.find(marker).unwrap() + marker.len();
    let path = dir.join("cut.json");
    std::fs::write(&path, &bytes[..cut]).unwrap();
    (path, cut)
}

#[test]
fn a_truncated_file_fails_with_where_and_what() {
    let dir = tempfile::tempdir().unwrap();
    let (path, cut) = truncated(dir.path());
    let out = OMNIPROF.run(summary(&path, &[]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout, b"");
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(&format!("(byte {cut})")), "{stderr}");
    assert!(stderr.contains("traceEvents[24]"), "{stderr}");
    assert!(
        stderr.contains("unexpected end of input, expected the end of an event"),
        "{stderr}"
    );
    assert!(stderr.contains("cut.json"), "{stderr}");
}

#[test]
fn partial_prints_the_rows_read_before_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = truncated(dir.path());
    let out = OMNIPROF.run(summary(&path, &["--partial", "--row-limit", "-1"]));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("traceEvents[24]"), "{stderr}");
    let stdout = text(&out.stdout);
    // Everything up to `block_0`'s first `aten::as_strided` is there; nothing after.
    assert!(stdout.contains("  aten::as_strided  "), "{stdout}");
    assert!(stdout.contains("       block_0  "), "{stdout}");
    assert!(!stdout.contains("block_1"), "{stdout}");
    assert!(!stdout.contains("aten::select"), "{stdout}");
    assert!(
        stdout.ends_with("Self CPU time total: 127.392ms\n"),
        "{stdout}"
    );
}

#[test]
fn unknown_event_kinds_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(
        &path,
        r#"{"traceEvents": [
          {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
          {"ph": "X", "cat": "mystery", "name": "?", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
          {"ph": "Q", "name": "??", "pid": 1, "tid": 1, "ts": 1}
        ]}"#,
    )
    .unwrap();
    let out = OMNIPROF.run(summary(&path, &[]));
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr),
        "note: skipped 2 of 3 events (1 with an unknown `ph`, 1 with an unknown `cat`)\n"
    );
    assert!(text(&out.stdout).contains("Self CPU time total: 10.000us"));
}

#[test]
fn a_negative_dur_is_read_as_zero_and_noted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(
        &path,
        r#"{"traceEvents": [
          {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
          {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 20, "dur": -5}
        ]}"#,
    )
    .unwrap();
    let out = OMNIPROF.run(summary(&path, &[]));
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr),
        "note: read 1 complete events with a negative `dur` as lasting 0\n"
    );
    assert!(text(&out.stdout).contains("Self CPU time total: 10.000us"));
}

#[test]
fn an_empty_trace_prints_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.json");
    std::fs::write(&path, r#"{"traceEvents": []}"#).unwrap();
    let out = OMNIPROF.run(summary(&path, &[]));
    assert!(out.status.success());
    assert_eq!(out.stdout, b"");
    assert_eq!(
        text(&out.stderr),
        "note: no host ops or device activities to summarize\n"
    );
}

#[test]
fn bad_arguments_and_missing_files() {
    let stderr = OMNIPROF.fails(2, summary(&reference_trace(), &["--sort-by", "memory"]));
    assert!(stderr.contains("self_cpu_time_total"), "{stderr}");
    let stderr = OMNIPROF.fails(1, summary(Path::new("/nonexistent/trace.json"), &[]));
    assert!(
        stderr.contains("/nonexistent/trace.json") && stderr.contains("read failed"),
        "{stderr}"
    );
}

#[test]
fn a_stubs_mode_trace_gets_device_columns_named_after_its_device() {
    use std::time::Duration;

    let _serial = serial();
    let stream = openreg::current_stream().unwrap();
    let mut profiler = omniprof::Profiler::builder()
        .stubs("OpenReg")
        .build()
        .unwrap();
    profiler.start().unwrap();
    for _ in 0..2 {
        let _outer = omniprof::record_function("outer");
        let _op = omniprof::record_op("busy");
        let busy = openreg::Kernel::Busy(Duration::from_millis(2));
        openreg::launch_kernel(busy, &stream).unwrap();
        stream.synchronize();
    }
    let trace = profiler.stop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stubs.json");
    let file = std::fs::File::create(&path).unwrap();
    omniprof_trace::write_chrome(&trace, "stubs.json", file).unwrap();

    let out = OMNIPROF.ok(summary(
        &path,
        &["--sort-by", "self_privateuse1_time_total"],
    ));
    let header = out.lines().nth(1).unwrap();
    assert!(
        header.contains("  Self OPENREG  Self OPENREG %  OPENREG total"),
        "{out}"
    );
    // `busy` holds the device time; `outer` (legacy: its own record only) little beyond it.
    let busy = out.lines().nth(3).unwrap();
    assert!(busy.trim_start().starts_with("busy "), "{out}");
    assert!(busy.trim_end().ends_with(" 2"), "{out}");
    assert!(out.contains("Self OPENREG time total: "), "{out}");
}

#[test]
fn the_benchmark_generator_writes_a_trace_that_summarizes() {
    let dir = tempfile::tempdir().unwrap();
    let path = gen_trace(
        &dir.path().join("gen.json"),
        &["--ops", "400", "--threads", "3"],
    );
    let json = OMNIPROF.ok(summary(&path, &["--format", "json", "--row-limit", "-1"]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let row = |name: &str| {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {json}"))
            .clone()
    };
    // 40 blocks; the inner `aten::sum` collapses into the outer one.
    assert_eq!(row("aten::sum")["count"], 40);
    assert_eq!(row("cudaLaunchKernel")["count"], 120);
    assert_eq!(row("gemm_kernel")["on_device"], true);
    let addmm = row("aten::addmm");
    assert_eq!(
        addmm["self_device_time_total_us"],
        row("gemm_kernel")["device_time_total_us"]
    );
    assert_eq!(
        row("aten::linear")["device_time_total_us"],
        addmm["device_time_total_us"]
    );
    assert_eq!(doc["device"], "CUDA");
}

#[test]
fn device_time_follows_the_correlation_chain_when_there_is_no_external_id() {
    // As MTIA traces have it: the kernel names its launch only by `correlation`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mtia.json");
    let events = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 300},
      {"ph": "X", "cat": "mtia_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 150, "dur": 10,
       "args": {"correlation": 11}},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 200, "dur": 200,
       "args": {"correlation": 11}}
    ]}"#;
    std::fs::write(&path, events).unwrap();
    let csv = OMNIPROF.ok(summary(&path, &["--format", "csv"]));
    let mm = csv
        .lines()
        .find(|l| l.starts_with("aten::mm,"))
        .unwrap_or_else(|| panic!("{csv}"));
    assert!(
        mm.contains(",200.000,"),
        "aten::mm has the kernel's 200 µs: {csv}"
    );
}

#[test]
fn a_bare_array_of_events_is_summarized() {
    // What chrome://tracing and many tracers write: the events alone, `]` optional.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("array.json");
    let events = r#"[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 300},
      {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 500, "dur": 100},"#;
    std::fs::write(&path, events).unwrap();
    let csv = OMNIPROF.ok(summary(&path, &["--format", "csv"]));
    assert!(csv.contains("\naten::mm,1,300.000,300.000,"), "{csv}");
    assert!(csv.contains("\naten::add,1,100.000,"), "{csv}");
}

/// `summary ARGS` of a trace of one op with no args: its standard output and error, once it
/// succeeded.
fn summary_of_a_bare_op(args: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.json");
    let events = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 300}
    ]}"#;
    std::fs::write(&path, events).unwrap();
    let out = OMNIPROF.run(summary(&path, args));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    (stdout, stderr)
}

#[test]
fn grouping_by_shapes_a_trace_without_shapes_says_so_and_keeps_the_column() {
    let (stdout, stderr) = summary_of_a_bare_op(&["--group-by-shapes"]);
    assert!(stdout.contains("Input Shapes"), "{stdout}");
    assert!(stderr.contains("the trace has no input shapes"), "{stderr}");
    let (csv, _) = summary_of_a_bare_op(&["--group-by-shapes", "--format", "csv"]);
    assert!(csv.starts_with("name,input_shapes,"), "{csv}");
}

#[test]
fn group_by_overload_name_splits_an_ops_rows_by_its_overloads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overloads.json");
    let op = |ts: u32, name: &str, overload: Option<&str>| {
        let args = overload.map_or(String::new(), |o| {
            format!(r#", "args": {{"Overload Name": "{o}"}}"#)
        });
        format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": 10{args}}}"#
        )
    };
    let events = [
        op(0, "aten::add", Some("Tensor")),
        op(20, "aten::add", Some("Scalar")),
        op(40, "aten::add", Some("Tensor")),
        op(60, "aten::sum", None),
    ];
    std::fs::write(
        &path,
        format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n")),
    )
    .unwrap();
    let rows = |args: &[&str]| -> Vec<String> {
        let csv = OMNIPROF.ok(summary(&path, &[&["--format", "csv"], args].concat()));
        // Each line's cells before the times: name, [overload name,] calls.
        let cells = if args.is_empty() { 2 } else { 3 };
        csv.lines()
            .map(|l| l.split(',').take(cells).collect::<Vec<_>>().join(","))
            .collect()
    };
    assert_eq!(
        rows(&["--group-by-overload-name"]),
        [
            "name,overload_name,count",
            "aten::add,Tensor,2",
            "aten::add,Scalar,1",
            "aten::sum,,1"
        ]
    );
    assert_eq!(rows(&[]), ["name,count", "aten::add,3", "aten::sum,1"]);
    let table = OMNIPROF.ok(summary(&path, &["--group-by-overload-name"]));
    assert!(
        table.lines().nth(1).unwrap().contains("Overload Name"),
        "{table}"
    );
}

#[test]
fn group_by_overload_name_on_a_trace_without_them_says_so() {
    let (stdout, stderr) = summary_of_a_bare_op(&["--group-by-overload-name"]);
    assert!(!stdout.contains("Overload Name"), "{stdout}");
    assert!(
        stderr.contains("note: the trace has no overload names"),
        "{stderr}"
    );
}

#[test]
fn flops_counts_a_torch_profiler_traces_ops_from_their_recorded_inputs() {
    // torch.profiler's trace of `with_flops=True` keeps the inputs, not the counts.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torch_flops.json");
    let events = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 300,
       "args": {"Input Dims": [[8, 16], [16, 4]], "Input type": ["float", "float"],
                "Concrete Inputs": ["", ""]}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 500, "dur": 300,
       "args": {"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []],
                "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 900, "dur": 50,
       "args": {"Input Dims": [[4]], "Input type": ["float"], "Concrete Inputs": [""]}}
    ]}"#;
    std::fs::write(&path, events).unwrap();
    let flops = |args: &[&str]| -> Vec<String> {
        let csv = OMNIPROF.ok(summary(&path, &[&["--format", "csv"], args].concat()));
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let at = header.iter().position(|&h| h == "flops").unwrap();
        csv.lines()
            .skip(1)
            .map(|l| {
                let cells: Vec<&str> = l.split(',').collect();
                format!("{} {}", cells[0], cells[at])
            })
            .collect()
    };
    // 2·8·16·4, and 2·1·8·8·3·3·3·4 (padding 1 keeps 8×8); relu is counted by no formula.
    assert_eq!(
        flops(&["--flops"]),
        ["aten::mm 1024", "aten::conv2d 13824", "aten::relu 0"]
    );
    assert_eq!(
        flops(&[]),
        ["aten::mm 0", "aten::conv2d 0", "aten::relu 0"],
        "counted only when asked"
    );
    let table = OMNIPROF.ok(summary(&path, &["--flops"]));
    assert!(
        table.lines().nth(1).unwrap().contains("Total KFLOPs"),
        "{table}"
    );
}

#[test]
fn flops_on_a_trace_without_inputs_says_so() {
    let (stdout, stderr) = summary_of_a_bare_op(&["--flops"]);
    // No column, as PyTorch's table drops it when no op has FLOPs.
    assert!(!stdout.contains("FLOPs"), "{stdout}");
    assert!(stderr.contains("note: no op has FLOPs"), "{stderr}");
}

#[test]
fn group_by_stack_prints_pytorchs_source_location_table() {
    let args = [
        "--group-by-stack",
        "5",
        "--sort-by",
        "self_cpu_time_total",
        "--row-limit",
        "6",
    ];
    assert_eq!(
        OMNIPROF.ok(summary(&stack_trace(), &args)),
        stack_report("table-wide")
    );
}

#[test]
fn group_by_stack_puts_the_frames_in_json_and_csv() {
    let json = OMNIPROF.ok(summary(
        &stack_trace(),
        &["--group-by-stack", "2", "--format", "json"],
    ));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let addmm = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "aten::addmm")
        .unwrap();
    assert_eq!(
        addmm["stack"],
        serde_json::json!([
            "<built-in function linear>",
            "torch/nn/modules/linear.py(130): forward"
        ])
    );
    let csv = OMNIPROF.ok(summary(
        &stack_trace(),
        &["--group-by-stack", "1", "--format", "csv"],
    ));
    assert!(csv.starts_with("name,stack,count,"), "{csv}");
    assert!(
        csv.contains("\naten::addmm,<built-in function linear>;,1,"),
        "{csv}"
    );
}

#[test]
fn group_by_stack_on_a_trace_without_stacks_says_so() {
    let out = OMNIPROF.run(summary(&reference_trace(), &["--group-by-stack", "5"]));
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("note: the trace has no Python stacks"),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stdout).contains("Source Location"));
}

/// The name the hostile-input probe used: it retitles a terminal (`ESC ]0;… BEL`), returns
/// the cursor (CR) and breaks the line (LF).
const HOSTILE: &str = "a\u{1b}]0;pwned\u{7}b\rc\nd";

/// That name as the text tables print it.
const HOSTILE_SHOWN: &str = r"a\u{1b}]0;pwned\u{7}b\u{d}c\u{a}d";

#[test]
fn control_characters_in_a_name_print_escaped_and_the_table_stays_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.json");
    let events = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "a\u001b]0;pwned\u0007b\rc\nd", "pid": 1, "tid": 1, "ts": 100, "dur": 300},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 500, "dur": 100}]}"#;
    std::fs::write(&path, events).unwrap();
    let table = OMNIPROF.ok(summary(&path, &[]));
    assert!(!table.contains(['\u{1b}', '\u{7}', '\r']), "{table:?}");
    // Separator, header, separator, the two rows, separator (each as wide as the others),
    // then the total.
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 7, "{table}");
    // Names are right-aligned, as in PyTorch.
    assert!(
        lines[3]
            .trim_start()
            .starts_with(&format!("{HOSTILE_SHOWN}  ")),
        "{table}"
    );
    assert!(lines[4].trim_start().starts_with("aten::mm  "), "{table}");
    let width = lines[0].chars().count();
    assert!(
        lines[..6].iter().all(|l| l.chars().count() == width),
        "{table}"
    );
    // CSV keeps the name as the trace holds it, quoted.
    let csv = OMNIPROF.ok(summary(&path, &["--format", "csv"]));
    assert!(
        csv.contains(&format!("\n\"{HOSTILE}\",1,300.000,")),
        "{csv:?}"
    );
}

#[test]
fn identical_nested_events_past_the_depth_bound_are_counted_in_a_warning() {
    // 100,000 copies of one event (more than the 65,536 host ops held before folding):
    // each nests in the one before; the summary keeps 1,024 and counts the rest.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("same.json");
    let event =
        r#"{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10}"#;
    let events = vec![event; 100_000].join(",\n");
    std::fs::write(&path, format!(r#"{{"traceEvents": [{events}]}}"#)).unwrap();
    let out = OMNIPROF.run(summary(&path, &[]));
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr),
        "warning: 98976 host ops nested deeper than 1024 were left out of the rows; their \
         time stays in their parent's self time\n"
    );
    // The 1,024 kept collapse into the outermost, as PyTorch collapses a same-named only
    // child.
    assert!(text(&out.stdout).contains("Self CPU time total: 10.000us"));
}
