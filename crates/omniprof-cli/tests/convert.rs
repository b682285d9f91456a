//! Proves `omniprof convert` and the `.pftrace` output as a user meets them: the demo's trace
//! converted to Perfetto holds every slice, flow and arg of its JSON (Perfetto's own schema
//! decodes it, its trace processor loads it) in at most a quarter of the bytes; `demo -o
//! x.pftrace` writes one directly; JSON → JSON.gz → JSON keeps the trace exactly; PyTorch's
//! reference trace converts and loads; a Kineto-ordered trace (device work after the host's)
//! streams to `.pftrace` in two reads with every slice, flow and key average; flows whose
//! events lie inside their slices (older Kineto's `async_gpu`) keep every arrow Perfetto
//! draws; a trace of nanosecond-resolution times converts to JSON with every digit of its
//! `ts` and `dur`, and its summary is the same table before and after; an unknown
//! extension or an input that fails to read is a clear error, and nothing is written at the
//! output path.

use std::path::Path;

use omniprof_read::TraceReader;
use omniprof_test_support::checker::assert_loads_in_perfetto;
use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_test_support::data::{gen_trace, reference_trace};
use omniprof_test_support::decoder::{assert_matches_json, decode};
use omniprof_test_support::lock::serial;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The arguments of `omniprof convert INPUT -o OUTPUT`.
fn convert<'a>(input: &'a Path, output: &'a Path) -> [&'a str; 4] {
    ["convert", arg(input), "-o", arg(output)]
}

/// Runs the demo alone (one at a time in this binary): its PM counters are sampled by time, so
/// a demo slowed by another one beside it holds more samples per event than the demo does.
fn demo(output: &Path) {
    let _alone = serial();
    OMNIPROF.ok(["demo", "--steps", "10", "-o", arg(output)]);
}

#[test]
fn the_demo_trace_converts_to_perfetto_with_every_event_in_a_quarter_of_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("demo.pt.trace.json");
    let pftrace = dir.path().join("demo.pftrace");
    demo(&json);
    let stdout = OMNIPROF.ok(convert(&json, &pftrace));
    assert!(
        stdout.starts_with(&format!("wrote {}", pftrace.display())),
        "{stdout}"
    );

    let (json_bytes, pf_bytes) = (
        std::fs::metadata(&json).unwrap().len(),
        std::fs::metadata(&pftrace).unwrap().len(),
    );
    assert!(
        pf_bytes * 4 <= json_bytes,
        "{pf_bytes} bytes of .pftrace for {json_bytes} of JSON: more than 25 %"
    );
    if let Some(report) = assert_matches_json(&pftrace, Some(&json)) {
        assert!(
            report.slices > 1000 && report.flows > 100,
            "{}",
            report.json
        );
    }
    let loaded = assert_loads_in_perfetto(&pftrace);
    if let (Some(loaded), Some(from_json)) = (loaded, assert_loads_in_perfetto(&json)) {
        assert_eq!(loaded.slices, from_json.slices);
        assert_eq!(loaded.flows, from_json.flows);
    }
}

#[test]
fn demo_writes_pftrace_directly() {
    let dir = tempfile::tempdir().unwrap();
    let pftrace = dir.path().join("demo.pftrace");
    demo(&pftrace);
    assert!(!dir.path().join("demo.pftrace.tmp").exists());
    if let Some(report) = assert_matches_json(&pftrace, None) {
        assert!(
            report.slices > 1000 && report.flows > 100,
            "{}",
            report.json
        );
    }
    assert_loads_in_perfetto(&pftrace);
}

#[test]
fn json_to_gzip_and_back_keeps_the_trace_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("demo.pt.trace.json");
    let gz = dir.path().join("demo.pt.trace.json.gz");
    let back = dir.path().join("back.pt.trace.json");
    demo(&json);
    OMNIPROF.ok(convert(&json, &gz));
    assert_eq!(
        &std::fs::read(&gz).unwrap()[..2],
        &[0x1f, 0x8b],
        "gzip magic"
    );
    OMNIPROF.ok(convert(&gz, &back));
    let read = |p: &Path| TraceReader::new().read_path(p).into_trace().unwrap();
    let (original, round_tripped) = (read(&json), read(&back));
    assert!(original.activities.len() > 1000);
    assert_eq!(original, round_tripped);
}

#[test]
fn pytorchs_reference_trace_converts_and_loads() {
    let dir = tempfile::tempdir().unwrap();
    let pftrace = dir.path().join("pytorch.pftrace");
    OMNIPROF.ok(convert(&reference_trace(), &pftrace));
    if let Some(report) = decode(&pftrace, None) {
        assert!(report.violations.is_empty(), "{}", report.json);
        assert!(report.slices > 20, "{}", report.json);
    }
    assert_loads_in_perfetto(&pftrace);
}

#[test]
fn a_kineto_ordered_trace_streams_to_pftrace_with_every_slice_flow_and_key_average() {
    let dir = tempfile::tempdir().unwrap();
    let json = gen_trace(
        &dir.path().join("gen.json"),
        &["--ops", "2000", "--threads", "2"],
    );
    let pftrace = dir.path().join("gen.pftrace");
    let out = OMNIPROF.run([&["-v"][..], &convert(&json, &pftrace)].concat());
    let stderr = text(&out.stderr);
    // Streamed: not read whole (which `-v` would say).
    assert!(!stderr.contains("whole"), "{stderr}");
    assert!(out.status.success(), "{stderr}");
    let stdout = text(&out.stdout);
    // 3,200 slices' begins and ends, and the window's end marker.
    assert!(stdout.contains("(6401 events, "), "{stdout}");
    let summary = |trace: &Path| OMNIPROF.ok(["summary", arg(trace)]);
    assert_eq!(summary(&pftrace), summary(&json));
    if let Some(report) = decode(&pftrace, None) {
        assert!(report.violations.is_empty(), "{}", report.json);
        assert_eq!(
            (report.slices, report.flows),
            (3200, 600),
            "{}",
            report.json
        );
    }
    let loaded = assert_loads_in_perfetto(&pftrace);
    if let (Some(loaded), Some(input)) = (loaded, assert_loads_in_perfetto(&json)) {
        // Both window end markers are slices to Perfetto.
        assert_eq!((loaded.slices, loaded.flows), (Some(3201), Some(600)));
        assert_eq!((input.slices, input.flows), (Some(3201), Some(600)));
    }
}

/// A trace shaped as HTA's `inference_rank_1.json.gz` (older Kineto): its flow events, `cat`
/// `async_gpu`, lie inside their slices rather than at their starts. The first launch's `s`
/// lies in the launch, itself inside an op (the launch, the innermost, is its slice); the
/// second's comes before its slice in the file; the first kernel's `f` (`"bp": "e"`) lies in
/// the kernel; the second's has no `bp`, so it binds to the next slice of its row.
const FLOWS_INSIDE_SLICES: &str = r#"{"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 10, "args": {"correlation": 5}},
  {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 113, "cat": "async_gpu", "name": "async_gpu", "bp": "e"},
  {"ph": "s", "id": 6, "pid": 1, "tid": 1, "ts": 131, "cat": "async_gpu", "name": "async_gpu", "bp": "e"},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 130, "dur": 10, "args": {"correlation": 6}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 20, "args": {"correlation": 5}},
  {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 205, "cat": "async_gpu", "name": "async_gpu", "bp": "e"},
  {"ph": "f", "id": 6, "pid": 0, "tid": 7, "ts": 225, "cat": "async_gpu", "name": "async_gpu"},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 230, "dur": 20, "args": {"correlation": 6}}
]}"#;

#[test]
fn flows_inside_their_slices_keep_every_arrow_perfetto_draws() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("inside.json");
    std::fs::write(&input, FLOWS_INSIDE_SLICES).unwrap();
    let output = dir.path().join("out.json");
    let out = OMNIPROF.run(convert(&input, &output));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
    // Each launch starts the arrow its kernel ends, with the launch's correlation id.
    let trace = TraceReader::new().read_path(&output).into_trace().unwrap();
    let flows: Vec<_> = trace
        .activities
        .iter()
        .map(|a| (&*a.name, a.correlation, a.flow.map(|f| (f.id, f.start))))
        .collect();
    assert_eq!(
        flows,
        [
            ("aten::mm", 0, None),
            ("cudaLaunchKernel", 5, Some((5, true))),
            ("cudaLaunchKernel", 6, Some((6, true))),
            ("gemm", 5, Some((5, false))),
            ("gemm", 6, Some((6, false))),
        ]
    );
    // Perfetto's trace processor draws as many arrows in the output as in the input.
    let loaded = assert_loads_in_perfetto(&output);
    if let (Some(loaded), Some(input)) = (loaded, assert_loads_in_perfetto(&input)) {
        assert_eq!((input.flows, loaded.flows), (Some(2), Some(2)));
    }
}

#[test]
fn an_unknown_output_extension_lists_the_supported_ones_and_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.txt");
    let stderr = OMNIPROF.fails(2, convert(Path::new("does-not-exist.json"), &out));
    assert!(
        stderr.contains("must end in one of: .json, .json.gz, .pftrace"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_input_that_fails_to_read_names_the_place_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("demo.pt.trace.json");
    demo(&json);
    let text = std::fs::read(&json).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    for name in ["out.pftrace", "out.json", "out.json.gz"] {
        let out = dir.path().join(name);
        let stderr = OMNIPROF.fails(1, convert(&cut, &out));
        assert!(
            stderr.contains(&cut.display().to_string())
                && stderr.contains("(byte ")
                && stderr.contains("traceEvents[")
                && stderr.contains("nothing was written"),
            "{stderr}"
        );
        assert!(!out.exists(), "{name} was written");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "only the inputs remain: {left:?}");
}

/// A Kineto trace of nanosecond-resolution times (absolute `ts` of 16 digits and three
/// decimals), its first event not its earliest, as PyTorch writes them: `convert` writes
/// the events by start. The averages of `aten::mm` (711.799 µs over 2 calls) and of `gemm`
/// (6.675 µs over 2) end in a half nanosecond, where the float error of the relative times
/// decides the last digit: counted from the first event in the file (`aten::mm` at
/// 1712345679871388.677) the table said 355.900, from the earliest 355.899.
const NS_RESOLUTION_TRACE: &str = r#"{"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 1712345679871388.677, "dur": 612.097, "args": {"External id": 3}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 7, "tid": 7, "ts": 1712345678901234.567, "dur": 1.001, "args": {"External id": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 1712345679477633.489, "dur": 99.702, "args": {"External id": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 1712345679477640.123, "dur": 5.333, "args": {"External id": 2, "correlation": 11}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 1712345679871390.001, "dur": 4.999, "args": {"External id": 3, "correlation": 12}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1712345679477650.001, "dur": 3.337, "args": {"External id": 2, "correlation": 11, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1712345679871400.333, "dur": 3.338, "args": {"External id": 3, "correlation": 12, "device": 0, "stream": 7}}
]}
"#;

/// Microseconds written with three decimals (`12.345`) as nanoseconds, from the digits.
fn micros_text_to_ns(text: &str) -> i64 {
    let (whole, decimals) = text.split_once('.').expect("three decimals");
    assert_eq!(decimals.len(), 3, "{text}");
    whole.parse::<i64>().unwrap() * 1000 + decimals.parse::<i64>().unwrap()
}

/// The text of the number after `"key": ` in `line`.
fn number_after<'a>(line: &'a str, key: &str) -> &'a str {
    let start = line.find(&format!("\"{key}\": ")).expect(key) + key.len() + 4;
    let rest = &line[start..];
    &rest[..rest.find([',', '}']).unwrap()]
}

/// Each `X` event's (name, absolute start, duration) in nanoseconds, sorted: from the text
/// of a trace that writes one event a line (the input above, and omniprof's writer).
fn x_events_ns(json: &str) -> Vec<(String, i64, i64)> {
    let base = json
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"baseTimeNanoseconds\": "))
        .map_or(0, |b| b.trim_end_matches(',').parse::<i64>().unwrap());
    let mut events: Vec<_> = json
        .lines()
        .filter(|l| l.contains(r#""ph": "X""#))
        .map(|l| {
            let name = number_after(l, "name").trim_matches('"').to_owned();
            let ts = base + micros_text_to_ns(number_after(l, "ts"));
            (name, ts, micros_text_to_ns(number_after(l, "dur")))
        })
        .collect();
    events.sort();
    events
}

#[test]
fn a_nanosecond_resolution_trace_converts_with_every_digit_and_summarizes_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("ns.json");
    let output = dir.path().join("ns-converted.json");
    std::fs::write(&input, NS_RESOLUTION_TRACE).unwrap();
    OMNIPROF.ok(convert(&input, &output));
    let converted = std::fs::read_to_string(&output).unwrap();
    // Every start and duration to the nanosecond (the writer counts `ts` from a base time
    // of its own, a whole hour, so that Perfetto's doubles keep every nanosecond).
    assert_eq!(x_events_ns(&converted), x_events_ns(NS_RESOLUTION_TRACE));
    assert_eq!(
        x_events_ns(NS_RESOLUTION_TRACE)[0],
        ("aten::empty".to_owned(), 1_712_345_678_901_234_567, 1_001)
    );
    let summary = |p: &Path| OMNIPROF.ok(["summary", arg(p)]);
    let before = summary(&input);
    assert_eq!(before, summary(&output));
    let row = |name: &str| {
        before
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in\n{before}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // Name, self CPU %, self CPU, CPU total %, CPU total, CPU avg, self CUDA, %, CUDA
    // total, CUDA avg, calls.
    assert_eq!(row("aten::mm")[4..6], ["711.799us", "355.899us"]);
    assert_eq!(row("gemm")[8..11], ["6.675us", "3.338us", "2"]);
}
