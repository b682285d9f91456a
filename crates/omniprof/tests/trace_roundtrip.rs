//! Proves that a trace survives save → read unchanged: a real recorded session (several
//! threads, one gone before stop, nested ranges, ops with args and input shapes, instants,
//! names full of quotes, backslashes, newlines, control characters and non-ASCII text) written
//! as `.json` and as `.json.gz` reads back with the same activities (every field, times to
//! the nanosecond), rows, spans, metadata, base time and window. Values compare as `Value`
//! does: numbers by value (a `UInt` reads back as an `Int`). Property tests extend this to
//! any Unicode string as a name, arg key or arg value, any value as metadata, device
//! properties or an arg, and any times and overlaps.

use std::path::Path;

use omniprof::trace::{Activity, ActivityType, CounterTrack, Trace, Value};
use omniprof::trace::{
    BackendCall, BackendFailure, BackendWarning, Contribution, FailureKind, ScopeProfiling,
    SessionHealth, UnavailablePerfEvent, WarningKind,
};
use omniprof::trace::{ProcessRow, Span, ThreadRow};
use omniprof_read::TraceReader;
use omniprof_test_support::data::add_example_rows;
use omniprof_test_support::lock::serial;
use omniprof_test_support::session;
use proptest::prelude::*;

/// Saves `trace` to `path` and reads it back.
fn save_and_read(trace: &Trace, path: &Path) -> Trace {
    omniprof::trace::save(trace, path).unwrap_or_else(|e| panic!("save {}: {e}", path.display()));
    TraceReader::new()
        .read_path(path)
        .into_trace()
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// What reading `original` back from `path` must give: the same trace, with the output path
/// as its `traceName`.
fn expected_after_read(original: &Trace, path: &Path) -> Trace {
    let mut expected = original.clone();
    if expected.trace_name.is_none() {
        expected.trace_name = Some(path.to_string_lossy().into_owned());
    }
    expected
}

/// A session health with every field set, each failure and warning kind among them.
fn every_report_field() -> SessionHealth {
    let failure = |backend: &str, kind| BackendFailure {
        backend: backend.into(),
        kind,
    };
    SessionHealth {
        stub_errors: Some(40),
        stub_error_messages: vec!["begin: \"no\" device".into(), "end: timed out".into()],
        unavailable_perf_events: vec![
            UnavailablePerfEvent {
                name: "cycles".into(),
                reason: "No such file or directory (os error 2)".into(),
            },
            UnavailablePerfEvent {
                name: "task-clock".into(),
                reason: "Permission denied: perf_event_paranoid is 4".into(),
            },
        ],
        scope_profiler: Some(ScopeProfiling {
            metrics: vec!["flops".into(), "bytes_read".into()],
            max_scopes: 1500,
            kernels: 3,
        }),
        plugin_errors: vec!["/opt/libx.so: not a Kineto plugin".into()],
        dropped_events: Some(1),
        dropped_names: Some(2),
        unfinished_ranges: Some(3),
        counter_samples: Some(4),
        out_of_window_counter_samples: Some(5),
        dropped_counter_values: Some(6),
        scope_profiler_unprofiled_kernels: Some(7),
        out_of_window_events: Some(8),
        warmup_events: Some(9),
        duplicate_flow_starts: Some(10),
        renumbered_flow_ids: Some(12),
        backends: vec![Contribution {
            name: "openreg".into(),
            activities: 12,
            out_of_window: 8,
            before_ns: 40,
            after_ns: 3_000_000_000,
        }],
        backend_errors: vec![
            failure(
                "a",
                FailureKind::Failed {
                    call: BackendCall::WindowOpened,
                    reason: "queue full".into(),
                },
            ),
            failure(
                "b",
                FailureKind::Panicked {
                    call: BackendCall::Configure,
                    reason: "no \"device\"".into(),
                },
            ),
            failure(
                "c",
                FailureKind::OverBudget {
                    dropped: 7,
                    budget: 1_000_000,
                },
            ),
            failure("d", FailureKind::Reported("2 stub calls failed".into())),
        ],
        refused_links: Some(11),
        window_cut_links: Some(13),
        backend_warnings: vec![
            BackendWarning {
                backend: "a".into(),
                kind: WarningKind::RefusedLinks { count: 11 },
            },
            BackendWarning {
                backend: "b".into(),
                kind: WarningKind::Reported("ids match no host op".into()),
            },
        ],
    }
}

/// Compares field by field (for readable failures), then as a whole.
fn assert_same_trace(read: &Trace, original: &Trace, path: &Path) {
    let expected = expected_after_read(original, path);
    let at = path.display();
    assert_eq!(read.base_time_ns, expected.base_time_ns, "{at}: base time");
    assert_eq!(
        (read.window.start_ns, read.window.end_ns),
        (expected.window.start_ns, expected.window.end_ns),
        "{at}: capture window"
    );
    let keys = |t: &Trace| {
        t.metadata
            .iter()
            .map(|(k, _)| k.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(read), keys(&expected), "{at}: metadata keys");
    assert_eq!(read.metadata, expected.metadata, "{at}: metadata values");
    assert_eq!(read.health, expected.health, "{at}: session health");
    assert_eq!(read.device_properties, expected.device_properties, "{at}");
    assert_eq!(read.processes, expected.processes, "{at}: process rows");
    assert_eq!(read.threads, expected.threads, "{at}: thread rows");
    assert_eq!(read.spans, expected.spans, "{at}: spans");
    assert_eq!(
        read.activities.len(),
        expected.activities.len(),
        "{at}: activity count"
    );
    for (i, (r, e)) in read.activities.iter().zip(&expected.activities).enumerate() {
        assert_eq!(r, e, "{at}: activity {i}");
    }
    assert_eq!(read.trace_name, expected.trace_name, "{at}: traceName");
    assert_eq!(*read, expected, "{at}: whole trace");
}

#[test]
fn a_recorded_session_round_trips_exactly_as_json_and_gzip() {
    let trace = {
        let _serial = serial();
        session::record_sample_session()
    };

    // The session really holds what this test claims to round-trip.
    let pid = std::process::id() as i64;
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].pid, pid);
    assert_eq!(trace.threads.len(), 3, "{:#?}", trace.threads);
    for worker in [session::WORKER_DONE, session::WORKER_LIVE] {
        let suffix = format!(" ({worker})");
        assert!(
            trace.threads.iter().any(|t| t.name.ends_with(&suffix)),
            "no row named {suffix:?}: {:#?}",
            trace.threads
        );
    }
    let count = |kind| trace.activities.iter().filter(|a| a.kind == kind).count();
    let steps = session::STEPS;
    // Main thread: outer, 3 × block, 3 × addmm, the path-named op; early worker: 3 per step;
    // live worker: 1 range + 1 instant per step; 3 marks on the main thread.
    assert_eq!(
        count(ActivityType::UserAnnotation),
        1 + 3 + 2 * steps + steps
    );
    assert_eq!(count(ActivityType::CpuOp), 3 + 1 + steps);
    assert_eq!(count(ActivityType::CpuInstantEvent), 3 + steps);
    assert!(trace.activities.iter().all(|a| a.correlation != 0));
    assert!(trace
        .activities
        .iter()
        .any(|a| a.name.contains(session::NASTY) && a.arg(session::NASTY).is_some()));
    assert_eq!(trace.health.dropped_events, Some(0));
    assert_eq!(trace.spans.len(), 1);

    let dir = tempfile::tempdir().unwrap();
    for file in ["session.pt.trace.json", "session.pt.trace.json.gz"] {
        let path = dir.path().join(file);
        let read = save_and_read(&trace, &path);
        assert_same_trace(&read, &trace, &path);
    }
    let gz = std::fs::read(dir.path().join("session.pt.trace.json.gz")).unwrap();
    assert_eq!(gz[..2], [0x1f, 0x8b], "a .gz path is written as gzip");
}

#[test]
fn a_hand_built_trace_with_every_field_round_trips() {
    let base = omniprof::trace::process_base_time_ns();
    let (start, end) = (base + 5_000_000_123, base + 6_000_000_999);
    let mut trace = Trace::new(start, end);
    trace.set_metadata("trace_id", Value::from("0123456789ABCDEF"));
    let pg: Value = [
        ("pg_name", Value::from("0")),
        ("pg_size", Value::UInt(8)),
        ("ranks", Value::from("[0, 1, 2, 3, 4, 5, 6, 7]")),
    ]
    .into_iter()
    .collect();
    trace.set_metadata(
        "distributedInfo",
        [
            ("backend", Value::from("nccl")),
            ("rank", Value::Int(3)),
            ("world_size", Value::UInt(8)),
            ("pg_config", Value::List(vec![pg])),
            ("nccl_version", Value::Null),
        ]
        .into_iter()
        .collect(),
    );
    trace.set_metadata("record_shapes", Value::from(1i64));
    trace.set_metadata("with_stack", Value::Bool(false));
    trace.set_metadata("clock_ghz", Value::Float(1.5));
    trace.health = every_report_field();
    trace.device_properties.push(
        [
            ("id", Value::Int(0)),
            ("name", Value::from("Example Accelerator")),
            ("totalGlobalMem", Value::UInt(17_179_869_184)),
            ("maxClockFrequency", Value::Float(2.0)),
        ]
        .into_iter()
        .collect(),
    );
    add_example_rows(&mut trace);

    let mut op = Activity::new(
        ActivityType::CpuOp,
        "aten::mm",
        4242,
        4242,
        start + 10_125,
        start + 50_625,
    );
    op.correlation = 17;
    op.args.push((
        "Input Dims".into(),
        Value::from(vec![
            Value::from(vec![64i64, 64]),
            Value::from(vec![64i64, 64]),
        ]),
    ));
    op.args.push(("Sequence number".into(), Value::Int(-1)));
    let mut launch = Activity::new(
        ActivityType::CudaRuntime,
        "cudaLaunchKernel",
        4242,
        4242,
        start + 20_250,
        start + 26_375,
    );
    launch.correlation = 901;
    launch.linked_correlation = Some(17);
    launch.flow = Some(omniprof::trace::Flow {
        id: 901,
        kind: omniprof::trace::FlowKind::Ac2g,
        start: true,
    });
    let mut kernel = Activity::new(
        ActivityType::ConcurrentKernel,
        "gemm_64x64",
        0,
        7,
        start + 31_000,
        start + 43_000,
    );
    kernel.correlation = 901;
    kernel.linked_correlation = Some(17);
    kernel.flow = Some(omniprof::trace::Flow {
        id: 901,
        kind: omniprof::trace::FlowKind::Ac2g,
        start: false,
    });
    kernel.args.push(("device".into(), Value::Int(0)));
    kernel.args.push(("stream".into(), Value::Int(7)));
    let mut annotation = Activity::new(
        ActivityType::GpuUserAnnotation,
        "forward",
        0,
        7,
        start + 31_000,
        start + 43_000,
    );
    // Types with their own `External id` carry one id in the file: linked or their own,
    // never both (`docs/trace-format.md`, section 5), so this one holds its own.
    annotation.correlation = 17;
    let mut mark = Activity::new(
        ActivityType::CpuInstantEvent,
        "mark",
        4242,
        4242,
        start + 30_000,
        start + 30_000,
    );
    mark.correlation = 18;
    mark.args.push(("note".into(), Value::from("here")));
    trace.activities = vec![op, launch, mark, annotation, kernel];
    let track = CounterTrack::new(ActivityType::GpuPmCounter, "sm_activity", 0, 7);
    trace.counters.add(
        &track,
        start + 31_000,
        [("sm_active_pct".into(), 87.5), ("sm_busy".into(), 0.5)],
    );
    trace
        .activities
        .sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
    trace.spans.push(Span {
        name: "omniprof".into(),
        prefix: String::new(),
        iteration: 3,
        start_ns: start,
        end_ns: end,
        op_count: 0,
    });

    let dir = tempfile::tempdir().unwrap();
    for file in ["every_field.json", "every_field.json.gz"] {
        let path = dir.path().join(file);
        assert_same_trace(&save_and_read(&trace, &path), &trace, &path);
    }
}

/// Any character, with the ones JSON writers get wrong made frequent.
fn nasty_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        2 => (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
        1 => prop::sample::select(vec!['"', '\\', '/', '\u{7f}', '\u{2028}', '\u{fffd}', '😀', 'é']),
    ]
}

fn nasty_string() -> impl Strategy<Value = String> {
    prop::collection::vec(nasty_char(), 0..40).prop_map(String::from_iter)
}

/// A one-row trace whose rows, activities and args are named with `s`.
fn trace_named(s: &str, value: &str) -> Trace {
    let base = omniprof::trace::process_base_time_ns();
    let mut trace = Trace::new(base + 1_000, base + 9_000);
    trace.add_process(ProcessRow {
        pid: 1,
        name: s.into(),
        label: s.into(),
        sort_index: 1,
    });
    trace.add_thread(ThreadRow {
        pid: 1,
        tid: 2,
        name: s.into(),
        sort_index: 2,
    });
    let mut op = Activity::new(ActivityType::CpuOp, s, 1, 2, base + 2_000, base + 3_000);
    op.correlation = 5;
    op.args.push((s.into(), Value::from(value)));
    op.args.push((
        "v".into(),
        Value::from(vec![Value::from(s), Value::from(value)]),
    ));
    let mut mark = Activity::new(
        ActivityType::CpuInstantEvent,
        s,
        1,
        2,
        base + 4_000,
        base + 4_000,
    );
    mark.args.push((value.into(), Value::from(s)));
    trace.activities = vec![op, mark];
    trace.spans.push(Span {
        name: s.into(),
        prefix: String::new(),
        iteration: 0,
        start_ns: base + 1_000,
        end_ns: base + 9_000,
        op_count: 0,
    });
    trace
}

/// Any value JSON can hold: finite numbers of every variant, strings, lists and maps.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::UInt),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::Float),
        nasty_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
            prop::collection::vec((nasty_string(), inner), 0..4).prop_map(Value::Map),
        ]
    })
}

/// A one-op trace that carries `values` as metadata, as device properties and as args.
fn trace_with_values(values: &[Value]) -> Trace {
    let base = omniprof::trace::process_base_time_ns();
    let mut trace = Trace::new(base + 1_000, base + 9_000);
    // A row: the reader takes the window's start from the earliest row event.
    trace.add_process(ProcessRow {
        pid: 1,
        name: "p".into(),
        label: "CPU".into(),
        sort_index: 1,
    });
    let mut op = Activity::new(ActivityType::CpuOp, "op", 1, 2, base + 2_000, base + 3_000);
    for (i, value) in values.iter().enumerate() {
        trace.set_metadata(format!("m{i}"), value.clone());
        trace.device_properties.push(value.clone());
        op.args.push((format!("a{i}").into(), value.clone()));
    }
    trace.activities.push(op);
    trace
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Any value reads back equal (numbers by value) as metadata, a device's properties and
    /// an arg.
    #[test]
    fn any_value_round_trips(values in prop::collection::vec(any_value(), 1..6)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("values.json");
        let trace = trace_with_values(&values);
        let read = save_and_read(&trace, &path);
        prop_assert_eq!(read, expected_after_read(&trace, &path));
    }

    /// Any Unicode string, control characters included, round-trips as an activity name, an
    /// arg key, an arg value and a row or span name.
    #[test]
    fn any_string_round_trips(s in nasty_string(), value in nasty_string()) {
        // The one documented rename: an event named exactly `kernel` is written `Kernel`.
        prop_assume!(s != "kernel");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("names.json");
        let trace = trace_named(&s, &value);
        let read = save_and_read(&trace, &path);
        prop_assert_eq!(read, expected_after_read(&trace, &path));
    }

    /// Any start and duration within the exactly representable range round-trips to the
    /// nanosecond, overlapping events included (the writer spills them to sibling rows, the
    /// reader puts them back on their own row).
    #[test]
    fn any_times_round_trip_exactly(
        spans in prop::collection::vec((0i64..1 << 52, 0i64..1 << 40, 0i64..3), 1..24)
    ) {
        let base = omniprof::trace::process_base_time_ns();
        let mut trace = Trace::new(base, base + (1 << 53));
        trace.add_process(ProcessRow { pid: 9, name: "p".into(), label: "CPU".into(), sort_index: 9 });
        for tid in 0..3 {
            trace.add_thread(ThreadRow { pid: 9, tid, name: format!("t{tid}"), sort_index: tid });
        }
        for (i, &(offset, dur, tid)) in spans.iter().enumerate() {
            let mut a = Activity::new(ActivityType::CpuOp, format!("op{i}"), 9, tid, base + offset, base + offset + dur);
            a.correlation = i as u64 + 1;
            trace.activities.push(a);
        }
        trace.activities.sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("times.json.gz");
        let read = save_and_read(&trace, &path);
        prop_assert_eq!(read, expected_after_read(&trace, &path));
    }
}

#[test]
fn a_float_arg_reads_back_as_a_float() {
    let _serial = serial();
    let mut profiler = omniprof::Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    {
        let _op = omniprof::record_op("aten::mul").with_arg("alpha", 1.0);
    }
    let trace = profiler.stop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let back = save_and_read(&trace, &dir.path().join("float.json"));
    let op = back
        .activities
        .iter()
        .find(|a| &*a.name == "aten::mul")
        .unwrap();
    assert!(
        matches!(op.arg("alpha"), Some(Value::Float(f)) if *f == 1.0),
        "{:?}",
        op.arg("alpha")
    );
}
