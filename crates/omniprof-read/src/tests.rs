use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use flate2::write::GzEncoder;
use flate2::Compression;
use omniprof_test_support::data::reference_trace as pytorch_path;
use omniprof_trace::{Activity, ActivityType, Flow, FlowKind, Limits, TraceItem};
use omniprof_trace::{ProcessRow, Span, ThreadRow, Trace, Value};

use super::document::read_document_tuned;
use super::parallel::Tuning;
use super::*;

const PYTORCH_BASE: i64 = 1_790_857_026_000_000_000;

fn pytorch_text() -> Vec<u8> {
    std::fs::read(pytorch_path()).unwrap()
}

/// Reads `input` whole with the default reader.
fn read(input: impl Read) -> Result<Trace, ReadError> {
    TraceReader::new().read(input).into_trace()
}

fn read_file(path: impl AsRef<Path>) -> Result<Trace, ReadError> {
    TraceReader::new().read_path(path).into_trace()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

fn args(a: &Activity) -> Vec<(&str, &Value)> {
    a.args.iter().map(|(k, v)| (&**k, v)).collect()
}

fn count(trace: &Trace, kind: ActivityType) -> usize {
    trace.activities.iter().filter(|a| a.kind == kind).count()
}

#[test]
fn pytorch_trace_header_rows_and_spans() {
    let (trace, stats) = TraceReader::new()
        .read_path(pytorch_path())
        .into_result()
        .unwrap();
    assert_eq!(trace.base_time_ns, PYTORCH_BASE);
    assert_eq!(trace.trace_name.as_deref(), Some("torch_cpu_trace.json"));
    assert_eq!(
        trace.metadata,
        [
            (
                "trace_id".to_string(),
                Value::from("D496FC0E9C58406EBC3692BCEC462D17")
            ),
            ("record_shapes".to_string(), Value::Int(1)),
            ("host_name".to_string(), Value::from("vm")),
        ]
    );
    assert!(trace.device_properties.is_empty());
    assert_eq!(
        trace.processes,
        [ProcessRow {
            pid: 9362,
            name: "python".into(),
            label: "CPU".into(),
            sort_index: 9362,
        }]
    );
    // Kineto writes the main thread's pair twice; it is one row.
    assert_eq!(
        trace.threads,
        [ThreadRow {
            pid: 9362,
            tid: 9362,
            name: "thread 9362 (python)".into(),
            sort_index: 9362,
        }]
    );
    let span_start = PYTORCH_BASE + 4_385_904_291_751_330;
    assert_eq!(
        trace.spans,
        [Span {
            name: "PyTorch Profiler".into(),
            prefix: String::new(),
            iteration: 0,
            start_ns: span_start,
            end_ns: span_start + 127_935_776,
            op_count: 0,
        }]
    );
    // Rows carry the window start; `ts` 4385904291872.315 converts exactly.
    assert_eq!(trace.window.start_ns, PYTORCH_BASE + 4_385_904_291_872_315);
    assert_eq!(trace.window.end_ns, PYTORCH_BASE + 4_385_904_420_124_741);
    assert_eq!(
        stats,
        ReadStats {
            events: 69,
            regenerated: 2,
            ..ReadStats::default()
        }
    );
}

#[test]
fn pytorch_trace_activities() {
    let trace = read_file(pytorch_path()).unwrap();
    assert_eq!(trace.activities.len(), 58);
    assert_eq!(count(&trace, ActivityType::CpuOp), 54);
    assert_eq!(count(&trace, ActivityType::UserAnnotation), 4);

    let mut expected = Activity::new(
        ActivityType::UserAnnotation,
        "model_inference",
        9362,
        9362,
        PYTORCH_BASE + 4_385_904_292_237_968,
        PYTORCH_BASE + 4_385_904_292_237_968 + 127_392_143,
    );
    expected.correlation = 1;
    expected.args = vec![
        ("Record function id".into(), Value::Int(0)),
        ("Ev Idx".into(), Value::Int(0)),
    ];
    assert_eq!(trace.activities[0], expected);

    let matmul = &trace.activities[5];
    assert_eq!(&*matmul.name, "aten::matmul");
    assert_eq!(matmul.start_ns, PYTORCH_BASE + 4_385_904_301_678_211);
    assert_eq!(matmul.duration_ns(), 33_876_654);
    assert_eq!((matmul.correlation, matmul.linked_correlation), (6, None));
    let dims = Value::List(vec![
        Value::List(vec![Value::Int(256), Value::Int(256)]),
        Value::List(vec![Value::Int(256), Value::Int(256)]),
    ]);
    let inputs = Value::List(vec![Value::from(""), Value::from("")]);
    let types = Value::List(vec![Value::from("float"), Value::from("float")]);
    let strides = Value::List(vec![
        Value::List(vec![Value::Int(256), Value::Int(1)]),
        Value::List(vec![Value::Int(256), Value::Int(1)]),
    ]);
    assert_eq!(
        args(matmul),
        [
            ("Sequence number", &Value::Int(0)),
            ("Fwd thread id", &Value::Int(0)),
            ("Record function id", &Value::Int(0)),
            ("Concrete Inputs", &inputs),
            ("Input type", &types),
            ("Input Strides", &strides),
            ("Input Dims", &dims),
            ("Ev Idx", &Value::Int(5)),
        ]
    );

    // Names and arg keys are interned: one allocation per distinct string.
    let empties: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| &*a.name == "aten::empty")
        .collect();
    assert!(empties.len() > 1);
    assert!(Arc::ptr_eq(&empties[0].name, &empties[1].name));
    assert!(Arc::ptr_eq(&empties[0].args[0].0, &matmul.args[2].0));
}

#[test]
fn gzip_is_detected_by_its_magic_bytes() {
    let plain = read_file(pytorch_path()).unwrap();
    // A `.json` suffix: detection must not depend on the name.
    let mut file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    file.write_all(&gzip(&pytorch_text())).unwrap();
    assert_eq!(read_file(file.path()).unwrap(), plain);
    // Two concatenated gzip members are one stream.
    let text = pytorch_text();
    let (a, b) = text.split_at(text.len() / 2);
    let two = [gzip(a), gzip(b)].concat();
    assert_eq!(read(&two[..]).unwrap(), plain);
}

/// The example of `docs/trace-format.md` §14, extended: both kinds of flow, both counter shapes,
/// every `External id` rule, a device span, and events the reader skips.
const SMALL: &str = r#"{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Example Accelerator", "totalGlobalMem": 17179869184}, {"id": 1}],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
  "trace_id": "0123456789ABCDEF",
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1000000000000,
  "traceEvents": [
  {"ph": "M", "name": "process_name", "ts": 5000.000, "pid": 4242, "tid": 0, "args": {"name": "python"}},
  {"ph": "M", "name": "process_labels", "ts": 5000.000, "pid": 4242, "tid": 0, "args": {"labels": "CPU"}},
  {"ph": "M", "name": "process_name", "ts": 5000.000, "pid": 0, "tid": 0, "args": {"name": "python"}},
  {"ph": "M", "name": "process_labels", "ts": 5000.000, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
  {"ph": "M", "name": "process_sort_index", "ts": 5000.000, "pid": 0, "tid": 0, "args": {"sort_index": 5000000}},
  {"ph": "M", "name": "thread_name", "ts": 5000.000, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
  {"ph": "M", "name": "process_uptime", "ts": 5000.000, "pid": 0, "tid": 0, "args": {"uptime": 3}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4242, "ts": 5010.125, "dur": 40.500, "args": {"External id": 17, "correlation": 5, "Input Dims": [[64, 64], [64, 64]]}},
  {"ph": "s", "id": 3, "pid": 4242, "tid": 4242, "ts": 5010.125, "cat": "fwdbwd", "name": "fwdbwd"},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": 5020.250, "dur": 6.125, "args": {"External id": 17, "correlation": 901}},
  {"ph": "s", "id": 901, "pid": 4242, "tid": 4242, "ts": 5020.250, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "gemm_64x64", "pid": 0, "tid": 7, "ts": 5031.000, "dur": 12.000, "args": {"External id": 17, "device": 0, "stream": 7, "correlation": 901}},
  {"ph": "f", "id": 901, "pid": 0, "tid": 7, "ts": 5031.000, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "f", "id": 902, "pid": 0, "tid": 7, "ts": 5031.000, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 5044.5, "dur": 1, "args": {"External id": 18, "bytes": 4096}},
  {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 5044.501, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
  {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 4242, "tid": 4242, "ts": 5001, "dur": 90, "args": {"External id": 2}},
  {"ph": "X", "cat": "mystery", "name": "?", "pid": 4242, "tid": 4242, "ts": 5002, "dur": 1},
  {"ph": "b", "cat": "cpu_op", "name": "async", "pid": 4242, "tid": 4242, "ts": 5002, "id": 1},
  {"ph": "X", "cat": "cpu_op", "name": "odd", "pid": "host", "tid": 1, "ts": 5003, "dur": 1},
  {"ph": "C", "cat": "gpu_pm_counter", "name": "sm_activity", "pid": 0, "tid": 7, "ts": 5031.000, "args": {"sm_active_pct": 87.5, "unit": "%"}},
  {"ph": "C", "cat": "hardware_counters", "name": "sm_occupancy", "pid": "GPU 0 Counters", "tid": 7, "ts": 5032.000, "args": {"": 42}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 5040.000, "args": {"Bytes": -64}},
  {"ph": "X", "cat": "Trace", "name": "GPU: omniprof (3)", "pid": "Spans", "tid": "omniprof", "ts": 5000.000, "dur": 100.000, "args": {"Op count": 5}},
  {"ph": "M", "name": "process_sort_index", "ts": 5000.000, "pid": "Spans", "tid": 0, "args": {"sort_index": 536870912}},
  {"ph": "i", "s": "g", "name": "Iteration Start: omniprof", "pid": "Traces", "tid": "Trace omniprof", "ts": 5000.000},
  {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5100.000}
  ],
  "traceName": "small.json"
}"#;

const SMALL_BASE: i64 = 1_000_000_000_000;

fn find<'t>(trace: &'t Trace, name: &str) -> &'t Activity {
    trace
        .activities
        .iter()
        .find(|a| &*a.name == name)
        .unwrap_or_else(|| panic!("no activity {name}"))
}

#[test]
fn small_trace_header_rows_and_counts() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(SMALL.as_bytes()).unwrap();
    let (trace, stats) = TraceReader::new()
        .read_path(file.path())
        .into_result()
        .unwrap();
    assert_eq!(trace.base_time_ns, SMALL_BASE);
    let map = |entries: &[(&str, Value)]| entries.iter().cloned().collect::<Value>();
    assert_eq!(
        trace.device_properties,
        [
            map(&[
                ("id", Value::Int(0)),
                ("name", Value::from("Example Accelerator")),
                ("totalGlobalMem", Value::Int(17_179_869_184)),
            ]),
            map(&[("id", Value::Int(1))]),
        ]
    );
    assert_eq!(
        trace.metadata,
        [
            (
                "distributedInfo".to_string(),
                map(&[
                    ("backend", Value::from("nccl")),
                    ("rank", Value::Int(0)),
                    ("world_size", Value::Int(1)),
                ])
            ),
            ("trace_id".to_string(), Value::from("0123456789ABCDEF")),
        ]
    );
    assert_eq!(trace.trace_name.as_deref(), Some("small.json"));
    assert_eq!(
        trace.processes,
        [
            ProcessRow {
                pid: 4242,
                name: "python".into(),
                label: "CPU".into(),
                sort_index: 4242,
            },
            ProcessRow {
                pid: 0,
                name: "python".into(),
                label: "GPU 0".into(),
                sort_index: 5_000_000,
            },
        ]
    );
    assert_eq!(
        trace.threads,
        [ThreadRow {
            pid: 0,
            tid: 7,
            name: "stream 7 ".into(),
            sort_index: 7,
        }]
    );
    assert_eq!(
        trace.spans,
        [Span {
            name: "omniprof".into(),
            prefix: "GPU: ".into(),
            iteration: 3,
            start_ns: SMALL_BASE + 5_000_000,
            end_ns: SMALL_BASE + 5_100_000,
            op_count: 5,
        }]
    );
    assert_eq!(
        (trace.window.start_ns, trace.window.end_ns),
        (SMALL_BASE + 5_000_000, SMALL_BASE + 5_100_000)
    );
    let names: Vec<&str> = trace.activities.iter().map(|a| &*a.name).collect();
    assert_eq!(
        names,
        [
            "aten::mm",
            "cudaLaunchKernel",
            "gemm_64x64",
            "Memcpy HtoD",
            "step",
            "[memory]"
        ]
    );
    assert_eq!(trace.counters.samples(), 2);
    assert_eq!(
        stats,
        ReadStats {
            events: 27,
            regenerated: 2,
            unknown_phase: 1,
            unknown_category: 1,
            unknown_metadata: 1,
            unsupported_id: 1,
            unmatched_flow: 1,
            dropped_counter_values: 1,
            foreign_packets: 0,
            too_deep_args: 0,
            malformed_args: 0,
            reserved_header_keys: 0,
            sequence_overflow: 0,
            dropped_interned: 0,
            dropped_tracks: 0,
            cut_slices: 0,
            negative_durations: 0,
        }
    );
    assert_eq!(stats.skipped(), 5);
}

#[test]
fn small_trace_lifts_ids_and_attaches_flows() {
    let trace = read(SMALL.as_bytes()).unwrap();

    // A host op: `External id` is its own correlation; a `correlation` arg stays an arg.
    let mm = find(&trace, "aten::mm");
    assert_eq!((mm.correlation, mm.linked_correlation), (17, None));
    let dims = Value::List(vec![
        Value::List(vec![Value::Int(64), Value::Int(64)]),
        Value::List(vec![Value::Int(64), Value::Int(64)]),
    ]);
    assert_eq!(
        args(mm),
        [("correlation", &Value::Int(5)), ("Input Dims", &dims)]
    );
    assert_eq!(
        mm.flow,
        Some(Flow {
            id: 3,
            kind: FlowKind::FwdBwd,
            start: true
        })
    );
    assert_eq!(
        (mm.start_ns, mm.end_ns),
        (SMALL_BASE + 5_010_125, SMALL_BASE + 5_050_625)
    );
    let step = find(&trace, "step");
    assert_eq!((step.correlation, step.linked_correlation), (2, None));

    let mut launch = Activity::new(
        ActivityType::CudaRuntime,
        "cudaLaunchKernel",
        4242,
        4242,
        SMALL_BASE + 5_020_250,
        SMALL_BASE + 5_026_375,
    );
    launch.correlation = 901;
    launch.linked_correlation = Some(17);
    launch.flow = Some(Flow {
        id: 901,
        kind: FlowKind::Ac2g,
        start: true,
    });
    assert_eq!(find(&trace, "cudaLaunchKernel"), &launch);

    let mut kernel = Activity::new(
        ActivityType::ConcurrentKernel,
        "gemm_64x64",
        0,
        7,
        SMALL_BASE + 5_031_000,
        SMALL_BASE + 5_043_000,
    );
    kernel.correlation = 901;
    kernel.linked_correlation = Some(17);
    // The second `f` (id 902) finds the kernel's flow taken and is skipped.
    kernel.flow = Some(Flow {
        id: 901,
        kind: FlowKind::Ac2g,
        start: false,
    });
    kernel.args = vec![
        ("device".into(), Value::Int(0)),
        ("stream".into(), Value::Int(7)),
    ];
    assert_eq!(find(&trace, "gemm_64x64"), &kernel);

    // Linked type without a correlation arg; its flow event lies 1 ns inside it, which
    // binds it there, as Perfetto binds an `f` with `"bp": "e"`.
    let copy = find(&trace, "Memcpy HtoD");
    assert_eq!((copy.correlation, copy.linked_correlation), (0, Some(18)));
    assert_eq!(
        copy.flow,
        Some(Flow {
            id: 3,
            kind: FlowKind::FwdBwd,
            start: false,
        })
    );
    assert_eq!(copy.duration_ns(), 1_000);

    // Counter events become samples of their series; a non-number (`unit`) is dropped and
    // counted.
    let series = trace.counters.series();
    let pm = series
        .iter()
        .find(|s| &*s.track.name == "sm_activity")
        .unwrap();
    assert_eq!(pm.track.kind, ActivityType::GpuPmCounter);
    assert_eq!((pm.track.device, pm.track.resource), (0, 7));
    assert_eq!(pm.samples.len(), 1);
    assert_eq!(
        pm.samples[0].values,
        [(Arc::<str>::from("sm_active_pct"), 87.5)]
    );
    assert_eq!(trace.counters.dropped_values(), 1);

    let hw = series
        .iter()
        .find(|s| &*s.track.name == "sm_occupancy")
        .unwrap();
    assert_eq!(hw.track.kind, ActivityType::HardwareCounters);
    assert_eq!((hw.track.device, hw.track.resource), (0, 7));
    assert_eq!(
        hw.samples[0].values,
        [(Arc::<str>::from("sm_occupancy"), 42.0)]
    );
    assert!(trace.activities.iter().all(|a| !a.kind.is_counter()));

    let instant = find(&trace, "[memory]");
    assert_eq!(instant.kind, ActivityType::CpuInstantEvent);
    assert_eq!(
        (instant.start_ns, instant.end_ns),
        (SMALL_BASE + 5_040_000, SMALL_BASE + 5_040_000)
    );
    assert_eq!(args(instant), [("Bytes", &Value::Int(-64))]);
}

#[test]
fn small_trace_gzip_reads_the_same() {
    let mut file = tempfile::Builder::new()
        .suffix(".json.gz")
        .tempfile()
        .unwrap();
    file.write_all(&gzip(SMALL.as_bytes())).unwrap();
    let plain = read(SMALL.as_bytes()).unwrap();
    assert_eq!(read_file(file.path()).unwrap(), plain);
    assert_eq!(plain.activities.len(), 6);
    assert_eq!(plain.counters.samples(), 2);
}

#[test]
fn streamed_items_come_in_order_with_rows_and_window_last() {
    let mut items = Vec::new();
    let stats = TraceReader::new()
        .stream(SMALL.as_bytes(), |item| items.push(item))
        .unwrap();
    assert_eq!(stats.events, 27);
    let tags: Vec<&str> = items
        .iter()
        .map(|item| match item {
            TraceItem::BaseTime(_) => "base",
            TraceItem::DeviceProperties(_) => "devices",
            TraceItem::Metadata(..) => "meta",
            TraceItem::TraceName(_) => "name",
            TraceItem::Activity(_) => "activity",
            TraceItem::Counter(..) => "counter",
            TraceItem::Span(_) => "span",
            TraceItem::Process(_) => "process",
            TraceItem::Thread(_) => "thread",
            TraceItem::Window { .. } => "window",
        })
        .collect();
    let mut expected = vec!["devices", "meta", "meta", "base"];
    // File order: five activities, the two counters, the `[memory]` instant.
    expected.extend(["activity"; 5]);
    expected.extend(["counter"; 2]);
    expected.extend(["activity"; 1]);
    expected.extend(["span", "process", "process", "thread", "window", "name"]);
    assert_eq!(tags, expected);
}

#[test]
fn an_arg_filter_keeps_its_keys_and_the_lifted_ids() {
    let json = r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
      "pid": 7, "tid": 7, "ts": 1, "dur": 2,
      "args": {"External id": 3, "Input Dims": [[2, 2]], "Input type": ["float"]}}]}"#;
    let reader = TraceReader::new().args(ArgFilter::Only(vec!["Input Dims".into()]));
    reader
        .stream(json.as_bytes(), |item| {
            if let TraceItem::Activity(a) = item {
                assert_eq!(a.correlation, 3);
                assert_eq!(a.args.len(), 1);
                assert!(a.arg("Input Dims").is_some());
            }
        })
        .unwrap();
}

#[test]
fn a_late_base_time_still_gives_absolute_times() {
    let json = r#"{"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 2.000, "dur": 1.000},
        {"ph": "X", "cat": "Trace", "name": "s (1)", "pid": "Spans", "tid": "s", "ts": 1.000, "dur": 5.000}
    ], "baseTimeNanoseconds": 1000000}"#;
    let trace = read(json.as_bytes()).unwrap();
    assert_eq!(trace.base_time_ns, 1_000_000);
    let a = &trace.activities[0];
    assert_eq!((a.start_ns, a.end_ns), (1_002_000, 1_003_000));
    assert_eq!(
        (trace.spans[0].start_ns, trace.spans[0].end_ns),
        (1_001_000, 1_006_000)
    );
    // No rows and no window marker: the window spans the activities.
    assert_eq!(
        (trace.window.start_ns, trace.window.end_ns),
        (1_002_000, 1_003_000)
    );
}

#[test]
fn an_empty_trace_has_an_empty_window_at_the_base() {
    let trace = read(&br#"{"baseTimeNanoseconds": 77}"#[..]).unwrap();
    assert_eq!((trace.window.start_ns, trace.window.end_ns), (77, 77));
    let trace = read(&br#"{"traceEvents": []}"#[..]).unwrap();
    assert_eq!((trace.base_time_ns, trace.window.start_ns), (0, 0));
    assert!(trace.activities.is_empty());
}

#[test]
fn a_truncated_file_fails_where_it_ends_and_keeps_what_was_read() {
    // 12000 bytes end inside traceEvents[34], on line 443.
    let text = pytorch_text();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&text[..12_000]).unwrap();

    let partial = TraceReader::new().read_path(file.path());
    let error = partial.error.expect("a truncated file is an error");
    assert!(
        matches!(error.kind, ReadErrorKind::Truncated { .. }),
        "{error}"
    );
    assert_eq!(error.location.path.as_deref(), Some(file.path()));
    assert_eq!(error.location.event, Some(34));
    assert_eq!(
        error.location.position,
        Some(Position {
            offset: 12_000,
            line: 443,
            column: 51,
        })
    );
    assert_eq!(
        error.to_string(),
        format!(
            "{}: line 443, column 51 (byte 12000): traceEvents[34]: unexpected end of input, \
             expected the end of an event",
            file.path().display()
        )
    );
    // Events 0..=33: seven row events and 27 activities (3 user annotations), all delivered, rows included.
    let trace = partial.trace;
    assert_eq!(partial.stats.events, 34);
    assert_eq!(trace.activities.len(), 27);
    assert_eq!(count(&trace, ActivityType::UserAnnotation), 3);
    assert_eq!(&*trace.activities[26].name, "aten::resolve_conj");
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.threads.len(), 1);
    assert_eq!(trace.base_time_ns, PYTORCH_BASE);
    assert_eq!(trace.window.start_ns, PYTORCH_BASE + 4_385_904_291_872_315);
    assert!(read_file(file.path()).is_err());

    // Streaming delivers the same before failing.
    let mut activities = 0;
    let error = TraceReader::new()
        .stream(&text[..12_000], |item| {
            activities += matches!(item, TraceItem::Activity(_)) as usize;
        })
        .unwrap_err();
    assert_eq!((activities, error.location.event), (27, Some(34)));
}

/// `n` small `cpu_op` events, then `big` (an event's text), then one more small event.
fn events_around(n: usize, big: &str) -> (String, u64) {
    let mut text = String::from(r#"{"baseTimeNanoseconds": 0, "traceEvents": ["#);
    for i in 0..n {
        text += &format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}},"#
        );
        text.push('\n');
    }
    let offset = text.len() as u64;
    text += big;
    text +=
        r#", {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}"#;
    (text, offset)
}

#[test]
fn an_event_past_the_limit_fails_at_its_offset_and_keeps_what_was_read() {
    let limits = Limits {
        event_bytes: 64 << 10,
        ..Limits::default()
    };
    let long_name = format!(
        r#"{{"ph": "X", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": 1, "ts": 0, "dur": 1}}"#,
        "n".repeat(100 << 10)
    );
    let mut spaces = String::from(r#"{"ph": "X", "cat": "cpu_op", "#);
    spaces += &" ".repeat(1 << 20);
    spaces += r#""name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 1}"#;
    // 40,000 events (3 MiB) are read on several threads; 10 on one.
    for n in [10, 40_000] {
        for big in [&long_name, &spaces] {
            let (text, offset) = events_around(n, big);
            let outcome = TraceReader::new().limits(limits).read(text.as_bytes());
            let error = outcome.error.expect("an event past the limit is an error");
            assert!(
                matches!(error.kind, ReadErrorKind::TooLarge { limit, of: "one event", .. } if limit == 64 << 10),
                "{error}"
            );
            assert_eq!(error.location.position.unwrap().offset, offset, "{error}");
            assert_eq!(error.location.event, Some(n as u64));
            assert!(
                error.to_string().contains(&format!(
                    "(byte {offset}): traceEvents[{n}]: an event larger than the limit of 65536 \
                     bytes for one event"
                )),
                "{error}"
            );
            assert_eq!(outcome.trace.activities.len(), n, "what was read is kept");
            // Within the default limits it reads.
            assert!(TraceReader::new().read(text.as_bytes()).error.is_none());
        }
    }
}

#[test]
fn a_header_past_the_limit_fails_naming_its_key() {
    let limits = Limits {
        header_bytes: 1 << 20,
        ..Limits::default()
    };
    let zeros = vec!["0"; 1 << 20].join(",");
    let text = format!(
        r#"{{"traceName": "t", "deviceProperties": [{{"big": [{zeros}]}}], "traceEvents": []}}"#
    );
    let error = TraceReader::new()
        .limits(limits)
        .read(text.as_bytes())
        .error
        .expect("a header past the limit is an error");
    assert!(
        matches!(
            error.kind,
            ReadErrorKind::TooLarge {
                of: "the header",
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.location.key.as_deref(), Some("deviceProperties"));
    assert_eq!(
        error.location.position.unwrap().offset,
        text.find("[{").unwrap() as u64
    );
    // The limit is on the header as a whole: many small values add up.
    let many: String = (0..20_000)
        .map(|i| format!(r#""key {i}": "{}", "#, "v".repeat(60)))
        .collect();
    let text = format!(r#"{{{many}"traceEvents": []}}"#);
    let error = TraceReader::new()
        .limits(limits)
        .read(text.as_bytes())
        .error;
    assert!(
        matches!(
            error.as_ref().map(|e| &e.kind),
            Some(ReadErrorKind::TooLarge { .. })
        ),
        "{error:?}"
    );
}

#[test]
fn an_arg_nested_too_deep_is_skipped_and_counted() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let text = format!(
        r#"{{"traceEvents": [{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1,
        "ts": 1, "dur": 1, "args": {{"deep": {deep}, "External id": 4, "kept": [[1]]}}}}]}}"#
    );
    let (trace, stats) = TraceReader::new()
        .read(text.as_bytes())
        .into_result()
        .unwrap();
    let op = &trace.activities[0];
    assert_eq!((op.correlation, op.arg("deep")), (4, None));
    assert_eq!(op.arg("kept").unwrap().to_json(), "[[1]]");
    assert_eq!(stats.too_deep_args, 1);
}

#[test]
fn a_negative_dur_is_kept_as_zero_long_and_counted() {
    let text = r#"{"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "back", "pid": 1, "tid": 1, "ts": 10, "dur": -3},
        {"ph": "X", "cat": "cpu_op", "name": "fine", "pid": 1, "tid": 1, "ts": 20, "dur": 3}
    ]}"#;
    let (trace, stats) = TraceReader::new()
        .read(text.as_bytes())
        .into_result()
        .unwrap();
    let durations: Vec<_> = trace
        .activities
        .iter()
        .map(|a| (&*a.name, a.duration_ns()))
        .collect();
    assert_eq!(durations, [("back", 0), ("fine", 3_000)]);
    assert_eq!(stats.negative_durations, 1);
    assert_eq!(stats.skipped(), 0);
}

#[test]
fn every_prefix_of_a_trace_is_an_error() {
    let text = SMALL.trim_end().as_bytes();
    for len in 0..text.len() {
        let result = read(&text[..len]);
        assert!(result.is_err(), "prefix of {len} bytes was accepted");
    }
    assert!(read(text).is_ok());
}

fn small_with(from: &str, to: &str) -> String {
    assert!(SMALL.contains(from));
    SMALL.replacen(from, to, 1)
}

#[test]
fn a_bad_ts_names_the_event() {
    let json = small_with(r#""ts": 5010.125"#, r#""ts": "abc""#);
    let error = read(json.as_bytes()).unwrap_err();
    assert!(matches!(error.kind, ReadErrorKind::Invalid(_)), "{error}");
    assert_eq!(error.location.event, Some(7));
    assert_eq!(error.location.key.as_deref(), Some("traceEvents"));
    assert_eq!(
        error.location.position.map(|p| (p.line, p.column)),
        Some((16, 3))
    );
    assert!(
        error
            .to_string()
            .ends_with("traceEvents[7]: `ts`: expected a number of microseconds, found \"abc\""),
        "{error}"
    );
}

#[test]
fn malformed_json_is_located_exactly() {
    // A missing comma between two fields of traceEvents[9].
    let json = small_with(
        r#""name": "cudaLaunchKernel","#,
        r#""name": "cudaLaunchKernel""#,
    );
    let error = read(json.as_bytes()).unwrap_err();
    assert!(matches!(error.kind, ReadErrorKind::Syntax(_)), "{error}");
    assert_eq!(error.location.event, Some(9));
    let at = error.location.position.unwrap();
    let offset = json.find(r#"cudaLaunchKernel" "pid""#).unwrap() + 18;
    assert_eq!(at.offset, offset as u64);
    assert_eq!(&json[offset..offset + 5], "\"pid\"");

    let missing = small_with(r#", "ts": 5031.000, "dur": 12.000"#, "");
    let error = read(missing.as_bytes()).unwrap_err();
    assert_eq!(error.location.event, Some(11));
    assert!(error.to_string().ends_with("missing field `ts`"), "{error}");
}

#[test]
fn malformed_headers_name_their_key() {
    let json = small_with("1000000000000", "1.5");
    let error = read(json.as_bytes()).unwrap_err();
    assert_eq!(error.location.key.as_deref(), Some("baseTimeNanoseconds"));
    assert_eq!(error.location.event, None);
    assert!(
        error.to_string().contains("in \"baseTimeNanoseconds\": "),
        "{error}"
    );

    let error = read(&br#"{"traceName": 3}"#[..]).unwrap_err();
    assert!(matches!(error.kind, ReadErrorKind::Invalid(_)), "{error}");

    let twice = small_with(r#""traceName""#, r#""baseTimeNanoseconds": 1, "traceName""#);
    let error = read(twice.as_bytes()).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("duplicate key \"baseTimeNanoseconds\""),
        "{error}"
    );
}

#[test]
fn documents_that_are_not_trace_objects_fail() {
    for (text, expected) in [
        ("", "line 1, column 1 (byte 0): the input is empty: neither a JSON nor a Perfetto trace"),
        ("3", "line 1, column 1 (byte 0): invalid JSON: expected `{` or `[` opening the trace, found `3`"),
        ("[1]", "line 1, column 2 (byte 1): traceEvents[0]: invalid type: integer `1`, expected an event object"),
        ("{} x", "line 1, column 4 (byte 3): invalid JSON: expected the end of the input, found `x`"),
        (r#"{"a": 1,}"#, "line 1, column 9 (byte 8): invalid JSON: expected a key, found `}`"),
        (r#"{"traceEvents": [1]}"#, "line 1, column 18 (byte 17): traceEvents[0]: invalid type: integer `1`, expected an event object"),
        (r#"{"traceEvents": [{},]}"#, "line 1, column 21 (byte 20): traceEvents[1]: invalid JSON: expected an event, found `]`"),
        (r#"{"traceEvents": {}}"#, "line 1, column 17 (byte 16): in \"traceEvents\": invalid JSON: expected `[` opening traceEvents, found `{`"),
    ] {
        let error = read(text.as_bytes()).unwrap_err();
        assert_eq!(error.to_string(), expected, "for {text:?}");
    }
    assert!(read(&b"\xEF\xBB\xBF {}"[..]).is_ok());
    assert!(read(&b"[]"[..]).is_ok(), "a bare array of no events");
    assert!(read(&b"\x1f\x8b not gzip"[..]).is_err());
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let path = Path::new("/nonexistent/trace.json");
    let error = read_file(path).unwrap_err();
    assert!(matches!(error.kind, ReadErrorKind::Io(_)));
    assert!(error
        .to_string()
        .starts_with("/nonexistent/trace.json: read failed: "));
    let error = TraceReader::new().stream_path(path, |_| {}).unwrap_err();
    assert_eq!(error.location.path.as_deref(), Some(path));
}

/// A trace made to trip a reader that cuts it where an event seems to start: strings and
/// args lists of objects that hold `}, {`, escapes, non-ASCII names, flows right after their
/// activity, rows spread over the file, skipped events, and separators of every width.
fn tricky_trace(events: usize) -> String {
    let mut out =
        String::from(r#"{"schemaVersion": 1, "baseTimeNanoseconds": 1000000000, "traceEvents": ["#);
    for i in 0..events {
        let sep = ["", ", ", ",\n  ", ",", " ,\r\n\t"][if i == 0 { 0 } else { 1 + i % 4 }];
        let ts = 1000 + i * 10;
        let tid = 7 + i % 3;
        let event = match i % 8 {
            0 => format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": {tid}, "ts": {ts}.125, "dur": 9, "args": {{"External id": {i}, "Input Dims": [[{i}, 2], []], "odd": [{{"a": 1}}, {{"b": "}}, {{\"ph\": \"X\"}}"}}]}}}}"#
            ),
            1 => format!(
                r#"{{"ph": "s", "id": {i}, "pid": 1, "tid": {}, "ts": {}.125, "cat": "ac2g", "name": "ac2g"}}"#,
                7 + (i - 1) % 3,
                ts - 10
            ),
            2 => format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "gemm_ü_{i}", "pid": 0, "tid": 7, "ts": {ts}, "dur": 3.5, "args": {{"External id": {}, "correlation": {i}, "grid": [1, 1, 1]}}}}"#,
                i - 2
            ),
            3 => format!(
                r#"{{"ph": "M", "name": "thread_name", "pid": 1, "tid": {tid}, "ts": {ts}, "args": {{"name": "thread {i} ,{{\"x\": 1}}"}}}}"#
            ),
            4 => format!(
                r#"{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": {tid}, "ts": {ts}, "args": {{"Bytes": {i}}}}}"#
            ),
            5 => format!(
                r#"{{"ph": "C", "cat": "gpu_pm_counter", "name": "sm", "pid": 0, "tid": 7, "ts": {ts}, "args": {{"sm_active_pct": {i}.5, "unit": "%"}}}}"#
            ),
            6 => format!(
                r#"{{"ph": "X", "cat": "mystery", "name": "a\"}}, {{\"b\u00e9", "pid": 1, "tid": 1, "ts": {ts}, "dur": 1}}"#
            ),
            _ => format!(
                r#"{{"args": {{"External id": {i}, "Input Dims": []}}, "dur": 2, "ts": {ts}, "tid": {tid}, "pid": 1, "name": "late ph", "cat": "user_annotation", "ph": "X"}}"#
            ),
        };
        out.push_str(sep);
        out.push_str(&event);
    }
    out.push_str("\n], \"traceName\": \"tricky\"}\n");
    out
}

/// `scripts/gen_trace.py`'s trace: nested ops on three threads, with kernels.
fn generated_trace(ops: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gen.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gen_trace.py");
    let status = std::process::Command::new("python3")
        .arg(&script)
        .arg(&path)
        .args(["--ops", &ops.to_string(), "--threads", "3"])
        .status()
        .expect("python3 runs scripts/gen_trace.py");
    assert!(status.success());
    std::fs::read(&path).unwrap()
}

/// Everything a read delivers: the items in order, the stats, and the error with its
/// location.
type Outcome = (Vec<TraceItem>, ReadStats, Option<String>);

/// A reader that hands out at most 61 bytes per call, so that windows are read in pieces
/// and ahead of the parsing; at the end it fails if `fail`.
struct Dribble<'a> {
    text: &'a [u8],
    fail: bool,
}

impl std::io::Read for Dribble<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.text.is_empty() && self.fail {
            return Err(std::io::Error::other("unplugged"));
        }
        let n = self.text.len().min(out.len()).min(61);
        out[..n].copy_from_slice(&self.text[..n]);
        self.text = &self.text[n..];
        Ok(n)
    }
}

fn read_tuned(text: &[u8], args: &ArgFilter, tuning: &Tuning) -> Outcome {
    read_failing(text, false, args, tuning)
}

fn read_failing(text: &[u8], fail: bool, args: &ArgFilter, tuning: &Tuning) -> Outcome {
    let mut items = Vec::new();
    let input = Dribble { text, fail };
    let (stats, error) = read_document_tuned(input, args, Limits::default(), tuning, &mut |item| {
        items.push(item)
    });
    let error = error.map(|e| format!("{e} {:?}", e.location));
    (items, stats, error)
}

const SEQUENTIAL: Tuning = Tuning {
    threads: 1,
    window: 1 << 20,
    piece: 1 << 20,
};

/// Windows and pieces from smaller than an event (every cut checked, many wrong) to many
/// events; two helper threads and one.
fn parallel_tunings() -> Vec<Tuning> {
    let mut tunings = Vec::new();
    for threads in [2, 3] {
        for (window, piece) in [
            (100, 1),
            (300, 7),
            (2_000, 50),
            (5_000, 200),
            (1 << 20, 4_000),
        ] {
            tunings.push(Tuning {
                threads,
                window,
                piece,
            });
        }
    }
    tunings
}

fn arg_filters() -> [ArgFilter; 2] {
    [
        ArgFilter::All,
        ArgFilter::Only(vec!["Input Dims".into(), "Bytes".into()]),
    ]
}

/// Reads `text` sequentially and with every parallel tuning, which must all agree; returns
/// the sequential outcome.
fn assert_parallel_reads_agree(name: &str, text: &[u8]) -> Outcome {
    let mut sequential = None;
    for args in arg_filters() {
        let expected = read_tuned(text, &args, &SEQUENTIAL);
        for tuning in parallel_tunings() {
            let got = read_tuned(text, &args, &tuning);
            assert!(
                got == expected,
                "{name}: {tuning:?}, {args:?}: {got:#?}\n!=\n{expected:#?}"
            );
        }
        sequential.get_or_insert(expected);
    }
    sequential.unwrap()
}

#[test]
fn parallel_reading_delivers_the_sequential_items() {
    let (items, stats, error) = assert_parallel_reads_agree("pytorch", &pytorch_text());
    assert_eq!((items.len(), stats.events, error), (68, 69, None));

    let (items, stats, error) = assert_parallel_reads_agree("small", SMALL.as_bytes());
    assert_eq!((items.len(), stats.events, error), (18, 27, None));

    let tricky = tricky_trace(400);
    let (items, stats, error) = assert_parallel_reads_agree("tricky", tricky.as_bytes());
    assert_eq!((stats.events, error), (400, None));
    let flows = items
        .iter()
        .filter(|item| matches!(item, TraceItem::Activity(a) if a.flow.is_some()))
        .count();
    assert_eq!((stats.unmatched_flow, flows), (0, 50));
    assert_eq!(stats.unknown_category, 50);

    let generated = generated_trace(600);
    let (items, _, error) = assert_parallel_reads_agree("generated", &generated);
    // 60 blocks of 10 ops and 3 kernel launches; 3 threads; the header and the window.
    assert_eq!((items.len(), error), (60 * 16 + 3 + 5, None));
}

#[test]
fn parallel_reading_of_a_gzip_stream_matches_too() {
    // Decompressed on a helper thread when reading in parallel, on the reading one otherwise.
    let tricky = gzip(tricky_trace(300).as_bytes());
    let (_, stats, error) = assert_parallel_reads_agree("tricky.gz", &tricky);
    assert_eq!((stats.events, error), (300, None));
    let cut = &tricky[..tricky.len() * 2 / 3];
    let (_, stats, error) = assert_parallel_reads_agree("tricky.gz cut", cut);
    assert!(stats.events > 100 && error.is_some());
}

#[test]
fn parallel_reading_fails_where_sequential_reading_fails() {
    let tricky = tricky_trace(200);
    // A bad `ts` (an event that does not convert), a missing comma (a syntax error inside
    // an event), two events without a comma between them, and a stray byte between events.
    let at = |marker: &str| {
        let mut found = tricky.match_indices(marker).map(|(i, _)| i);
        found.find(|&i| i > tricky.len() / 2).unwrap()
    };
    let mut cases = Vec::new();
    for (marker, replacement) in [
        (r#""ts": "#, r#""ts": "x", "was": "#),
        (r#""pid": 1, "tid""#, r#""pid": 1 "tid""#),
        ("} ,\r\n\t{", "}\r\n\t{"),
        ("},\n  {", "},\n ] {"),
    ] {
        let cut = at(marker);
        cases.push(format!(
            "{}{replacement}{}",
            &tricky[..cut],
            &tricky[cut + marker.len()..]
        ));
    }
    for (i, text) in cases.iter().enumerate() {
        let (items, _, error) = assert_parallel_reads_agree(&format!("bad {i}"), text.as_bytes());
        assert!(error.is_some(), "bad {i}");
        // What was read before the error was delivered, rows and window included.
        assert!(items.len() > 50, "bad {i}: {}", items.len());
        assert!(matches!(items.last(), Some(TraceItem::Window { .. })));
    }
    // Truncated anywhere: the same error, after the same items.
    for len in (0..tricky.len()).step_by(997) {
        assert_parallel_reads_agree(&format!("cut at {len}"), &tricky.as_bytes()[..len]);
    }
    let text = pytorch_text();
    let (items, stats, error) = assert_parallel_reads_agree("pytorch cut", &text[..12_000]);
    assert_eq!((items.len(), stats.events), (35, 34));
    assert!(error.unwrap().contains("traceEvents[34]"));
}

#[test]
fn a_read_error_is_reported_where_sequential_reading_reports_it() {
    let tricky = tricky_trace(300);
    let gz = gzip(tricky.as_bytes());
    let cut_gz = &gz[..gz.len() / 2];
    for (text, what) in [(tricky.as_bytes(), "plain"), (cut_gz, "gzip")] {
        for len in [0, 1, 100, text.len() / 3, text.len() / 2, text.len()] {
            let expected = read_failing(&text[..len], true, &ArgFilter::All, &SEQUENTIAL);
            assert!(expected.2.is_some());
            for tuning in parallel_tunings() {
                let got = read_failing(&text[..len], true, &ArgFilter::All, &tuning);
                assert!(
                    got == expected,
                    "{what} {len} {tuning:?}: {got:?} != {expected:?}"
                );
            }
        }
    }
}

#[test]
fn invalid_utf8_is_reported_where_sequential_reading_reports_it() {
    let mut text = tricky_trace(100).into_bytes();
    let at = text
        .windows(5)
        .position(|w| w == "gemm_".as_bytes())
        .unwrap();
    text[at + 5] = 0xff;
    let (_, _, error) = assert_parallel_reads_agree("invalid UTF-8", &text);
    assert!(error.is_some());
}

proptest::proptest! {
    #[test]
    fn corrupted_input_never_panics(edits in proptest::collection::vec((0..SMALL.len(), 0u8..=255), 1..8)) {
        let mut bytes = SMALL.as_bytes().to_vec();
        for (at, byte) in edits {
            bytes[at] = byte;
        }
        let _ = read(&bytes[..]);
    }
}

#[test]
fn a_bare_array_of_events_is_read_closed_or_not() {
    let events = r#"[
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5},
      {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 2, "ts": 9, "dur": 8}"#;
    for text in [
        format!("{events}]"),
        format!("{events}\n]\n"),
        events.to_owned(),
        format!("{events},\n"),
    ] {
        let trace = read(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"));
        let names: Vec<&str> = trace.activities.iter().map(|a| &*a.name).collect();
        assert_eq!(names, ["aten::mm", "step"], "{text}");
        assert_eq!(trace.activities[0].start_ns, 10_000);
    }
    // Parallel windows read a long bare array as they read `traceEvents`.
    let long: Vec<String> = (0..20_000)
        .map(|i| format!(r#"{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}"#))
        .collect();
    let text = format!("[{}]", long.join(",\n"));
    let tuning = Tuning {
        threads: 2,
        window: 1 << 16,
        piece: 1 << 12,
    };
    let mut items = 0;
    let (stats, error) = read_document_tuned(
        text.as_bytes(),
        &ArgFilter::All,
        Limits::default(),
        &tuning,
        &mut |item| {
            items += matches!(item, TraceItem::Activity(_)) as usize;
        },
    );
    assert!(error.is_none(), "{error:?}");
    assert_eq!((stats.events, items), (20_000, 20_000));
    // Cut inside an event it is still an error, with where.
    let cut = &events[..events.len() - 10];
    let e = read(cut.as_bytes()).unwrap_err();
    assert!(
        e.to_string()
            .contains("traceEvents[1]: unexpected end of input"),
        "{e}"
    );
}

/// A launch, then `between` kernels on another row, then the launch's `s` event.
fn flow_after(between: usize) -> String {
    let mut events = vec![
        r#"{"ph": "X", "cat": "cuda_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 1, "dur": 1}"#
            .to_string(),
    ];
    for i in 0..between {
        events.push(format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {}, "dur": 1}}"#,
            10 + i
        ));
    }
    events.push(
        r#"{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 1}"#
            .to_string(),
    );
    format!("{{\"traceEvents\": [{}]}}", events.join(",\n"))
}

#[test]
fn a_flow_event_finds_its_activity_thousands_of_events_back_but_not_past_the_window() {
    let flow = |between: usize| {
        let (trace, stats) = TraceReader::new()
            .read(flow_after(between).as_bytes())
            .into_result()
            .unwrap();
        assert_eq!(trace.activities.len(), between + 1);
        (trace.activities[0].flow.map(|f| f.id), stats.unmatched_flow)
    };
    assert_eq!(flow(4_000), (Some(5), 0));
    assert_eq!(flow(5_000), (None, 1));
}

#[test]
fn a_flow_event_before_its_activity_waits_for_it() {
    let json = r#"{"traceEvents": [
      {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 3, "bp": "e"},
      {"ph": "X", "cat": "kernel", "name": "other", "pid": 0, "tid": 7, "ts": 2, "dur": 1},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1},
      {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 6, "pid": 0, "tid": 7, "ts": 9, "bp": "e"}
    ]}"#;
    let (trace, stats) = TraceReader::new()
        .read(json.as_bytes())
        .into_result()
        .unwrap();
    let flows: Vec<_> = trace
        .activities
        .iter()
        .map(|a| a.flow.map(|f| f.id))
        .collect();
    assert_eq!(flows, [None, Some(5)]);
    assert_eq!(stats.unmatched_flow, 1, "the end whose activity never came");
}

#[test]
fn a_foreign_traces_malformed_report_entries_are_left_empty_and_the_rest_is_read() {
    let text = br#"{
  "schemaVersion": 1,
  "trace_id": "ABC",
  "dropped_events": "many",
  "backends": 3,
  "backend_errors": ["gpu: stop failed: lost", 7],
  "warmup_events": 4,
  "backend_warnings": ["gpu: ids match no host op"],
  "stub_errors": -2,
  "stub_error_messages": "one",
  "unavailable_perf_events": ["cycles"],
  "scope_profiler": {"metrics": "flops", "max_scopes": 10, "kernels": 1},
  "baseTimeNanoseconds": 0,
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
  ]
}"#;
    let read = TraceReader::new().read(&text[..]);
    let refused: Vec<_> = read
        .health_problems
        .iter()
        .map(|p| p.key.as_str())
        .collect();
    assert_eq!(
        refused,
        [
            "dropped_events",
            "backends",
            "backend_errors",
            "stub_errors",
            "stub_error_messages",
            "unavailable_perf_events",
            "scope_profiler",
        ]
    );
    let trace = read.into_trace().unwrap();
    assert_eq!(trace.activities.len(), 1);
    assert_eq!(
        trace.metadata,
        [("trace_id".to_owned(), Value::from("ABC"))]
    );
    let report = &trace.health;
    assert_eq!(report.stub_errors, None);
    assert!(report.stub_error_messages.is_empty());
    assert!(report.unavailable_perf_events.is_empty());
    assert_eq!(report.scope_profiler, None);
    assert_eq!(report.dropped_events, None);
    assert!(report.backends.is_empty());
    assert!(report.backend_errors.is_empty());
    assert_eq!(report.warmup_events, Some(4));
    assert_eq!(
        report
            .backend_warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["gpu: ids match no host op"]
    );
}

#[test]
fn an_empty_input_is_an_error_that_says_it_is_empty() {
    let e = TraceReader::new()
        .read(&b""[..])
        .error
        .expect("an empty input");
    assert_eq!(
        e.to_string(),
        "line 1, column 1 (byte 0): the input is empty: neither a JSON nor a Perfetto trace"
    );
}

#[test]
fn a_cuda_sync_writes_its_own_external_id_unlinked_and_reads_back_unlinked() {
    // As Kineto writes a `cuda_sync`: its host op's `External id` when linked, else its own.
    let sync = |name: &str, correlation, linked| {
        let mut a = Activity::new(ActivityType::CudaSync, name, 0, 1, 1_000, 2_000);
        a.correlation = correlation;
        a.linked_correlation = linked;
        a
    };
    let mut trace = Trace::new(0, 10_000);
    trace.activities.push(sync("Stream Sync", 40, Some(17)));
    trace.activities.push(sync("Context Sync", 41, None));
    let dir = tempfile::tempdir().unwrap();
    for name in ["syncs.json", "syncs.pftrace"] {
        let path = dir.path().join(name);
        omniprof_trace::save(&trace, &path).unwrap();
        let back = read_file(&path).unwrap();
        let links: Vec<_> = back
            .activities
            .iter()
            .map(|a| (&*a.name, a.correlation, a.linked_correlation))
            .collect();
        assert_eq!(
            links,
            [("Stream Sync", 40, Some(17)), ("Context Sync", 41, None)],
            "{name}"
        );
    }
    let json = std::fs::read_to_string(dir.path().join("syncs.json")).unwrap();
    assert!(
        json.contains(r#""args": {"External id": 41, "correlation": 41}"#),
        "{json}"
    );
}
