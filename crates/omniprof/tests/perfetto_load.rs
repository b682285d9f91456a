//! Proves that what omniprof writes is accepted by Perfetto's real trace processor (the
//! offline checker in `tools/perfetto-check`) with no error stats and no lost slices:
//! a recorded session as `.json` and `.json.gz`; a device timeline with its `ac2g` flow and a
//! counter; and the reference PyTorch trace after a trip through omniprof's reader and
//! writer, which must show in Perfetto exactly what the original shows. A control test shows
//! the checker does catch events that overlap on one thread without nesting
//! (`slice_drop_overlapping_complete_event`), the failure the writer's sibling rows exist to
//! prevent. The same traces as `.pftrace` load too, and Perfetto's own schema decodes them to
//! exactly the slices, instants, counter samples, flows and args of their JSON.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use omniprof::trace::{
    Activity, ActivityType, CounterTrack, Flow, FlowKind, ProcessRow, ThreadRow, Trace, WriteStats,
};
use omniprof_read::TraceReader;
use omniprof_test_support::checker;
use omniprof_test_support::data::{add_example_rows, reference_trace};
use omniprof_test_support::decoder;
use omniprof_test_support::lock::serial;
use omniprof_test_support::session;

/// The `traceEvents` of a written file (plain or gzip), counted by `ph`.
fn phases(path: &Path) -> HashMap<String, u64> {
    let bytes = std::fs::read(path).unwrap();
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap();
        text
    } else {
        String::from_utf8(bytes).unwrap()
    };
    let doc: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let mut counts = HashMap::new();
    for event in doc["traceEvents"].as_array().expect("traceEvents") {
        let ph = event["ph"].as_str().expect("every event has a ph");
        *counts.entry(ph.to_owned()).or_default() += 1;
    }
    counts
}

/// Perfetto makes one slice per `X` and per `i` event: every one of them must be kept.
fn assert_every_slice_kept(path: &Path, report: &checker::PerfettoReport) {
    let counts = phases(path);
    let x = counts.get("X").copied().unwrap_or(0);
    let i = counts.get("i").copied().unwrap_or(0);
    assert!(x > 0, "{}: no X events", path.display());
    assert_eq!(
        report.slices,
        Some(x + i),
        "{}: {x} X and {i} i events written, Perfetto kept {:?} slices",
        path.display(),
        report.slices
    );
}

#[test]
fn a_recorded_session_loads_without_errors_as_json_and_gzip() {
    let trace = {
        let _serial = serial();
        session::record_sample_session()
    };
    let dir = tempfile::tempdir().unwrap();
    for file in ["session.pt.trace.json", "session.pt.trace.json.gz"] {
        let path = dir.path().join(file);
        let stats = omniprof::trace::save(&trace, &path).unwrap();
        assert_eq!(stats.spilled, 0, "a real session nests on every thread");
        let written: u64 = phases(&path).values().sum();
        assert_eq!(written, stats.events);
        let Some(report) = checker::assert_loads_in_perfetto(&path) else {
            return;
        };
        assert_every_slice_kept(&path, &report);
        // At least Perfetto's placeholder thread and the 3 recorded ones (it adds main
        // threads of its own, so the exact number is not ours to fix).
        assert!(report.threads.unwrap() > 3, "{}", report.line);
    }
}

/// A device timeline as a backend hands it over: a host op, the runtime call it makes, the
/// kernel that call launches (joined by an `ac2g` flow), a GPU annotation around the kernel
/// (widened by the writer) and a counter sample on the stream.
fn device_timeline() -> Trace {
    let base = omniprof::trace::process_base_time_ns();
    let start = base + 5_000_000_000;
    let mut trace = Trace::new(start, start + 1_000_000);
    add_example_rows(&mut trace);
    let at = |ns: i64| start + ns;
    let mut op = Activity::new(
        ActivityType::CpuOp,
        "aten::mm",
        4242,
        4242,
        at(10_125),
        at(50_625),
    );
    op.correlation = 17;
    let mut launch = Activity::new(
        ActivityType::CudaRuntime,
        "cudaLaunchKernel",
        4242,
        4242,
        at(20_250),
        at(26_375),
    );
    launch.correlation = 901;
    launch.linked_correlation = Some(17);
    launch.flow = Some(Flow {
        id: 901,
        kind: FlowKind::Ac2g,
        start: true,
    });
    let annotation = Activity::new(
        ActivityType::GpuUserAnnotation,
        "forward",
        0,
        7,
        at(31_000),
        at(43_000),
    );
    let mut kernel = Activity::new(
        ActivityType::ConcurrentKernel,
        "gemm_64x64",
        0,
        7,
        at(31_000),
        at(43_000),
    );
    kernel.correlation = 901;
    kernel.linked_correlation = Some(17);
    kernel.flow = Some(Flow {
        id: 901,
        kind: FlowKind::Ac2g,
        start: false,
    });
    trace.activities = vec![op, launch, annotation, kernel];
    let track = CounterTrack::new(ActivityType::GpuPmCounter, "sm_activity", 0, 7);
    trace
        .counters
        .add(&track, at(31_000), [("sm_active_pct".into(), 87.5)]);
    trace
}

#[test]
fn a_device_timeline_loads_with_its_flow_and_counter() {
    let trace = device_timeline();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("device.json");
    let stats = omniprof::trace::save(&trace, &path).unwrap();
    assert_eq!(
        stats.spilled, 0,
        "the widened annotation still encloses its kernel"
    );
    let counts = phases(&path);
    assert_eq!(
        (counts["X"], counts["s"], counts["f"], counts["C"]),
        (4, 1, 1, 1)
    );
    let Some(report) = checker::assert_loads_in_perfetto(&path) else {
        return;
    };
    assert_every_slice_kept(&path, &report);
    assert_eq!(
        (report.flows, report.counters),
        (Some(1), Some(1)),
        "{}",
        report.line
    );
}

/// Control: overlapping events written on one row without spilling are what Perfetto drops,
/// and the checker reports it, so a writer that failed to spill would fail these checks.
#[test]
fn the_checker_catches_overlaps_that_are_not_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("naive.json");
    std::fs::write(
        &path,
        r#"{"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0.000, "dur": 100.000},
  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 50.000, "dur": 100.000}
]}"#,
    )
    .unwrap();
    let Some(report) = checker::run_checker(&path) else {
        return;
    };
    assert_eq!(report.exit_code, 1, "{}", report.line);
    assert!(
        report.has_error("slice_drop_overlapping_complete_event"),
        "{}",
        report.line
    );
    assert_eq!(report.slices, Some(1), "{}", report.line);
}

#[test]
fn the_pytorch_reference_trace_rewritten_by_omniprof_loads_the_same() {
    let original = reference_trace();
    let trace = TraceReader::new()
        .read_path(&original)
        .into_trace()
        .unwrap();
    assert_eq!(
        trace.activities.len(),
        4 + 54,
        "4 user_annotation, 54 cpu_op"
    );
    let dir = tempfile::tempdir().unwrap();
    let paths = ["pytorch.json", "pytorch.json.gz"].map(|file| dir.path().join(file));
    for path in &paths {
        omniprof::trace::save(&trace, path).unwrap();
        assert_eq!(
            TraceReader::new()
                .read_path(path)
                .into_trace()
                .unwrap()
                .activities,
            trace.activities
        );
    }
    let Some(before) = checker::assert_loads_in_perfetto(&original) else {
        return;
    };
    let counts = |r: &checker::PerfettoReport| (r.slices, r.threads, r.processes, r.flows);
    for path in &paths {
        let report = checker::assert_loads_in_perfetto(path).unwrap();
        assert_every_slice_kept(path, &report);
        assert_eq!(
            counts(&report),
            counts(&before),
            "the rewritten trace shows what PyTorch's did: {} vs {}",
            report.line,
            before.line
        );
    }
}
/// Events on one (pid, tid) that overlap without nesting, in every shape: a chain of
/// partial overlaps, one event crossing the end of a nested pair, identical events, events
/// that touch, zero-length events, and a long pseudo-random run.
fn overlapping_trace() -> (Trace, u64) {
    let base = omniprof::trace::process_base_time_ns();
    let t0 = base + 1_000_000_000;
    let mut trace = Trace::new(t0, t0 + 10_000_000);
    let pid = 77;
    trace.add_process(ProcessRow {
        pid,
        name: "overlap".into(),
        label: "CPU".into(),
        sort_index: pid,
    });
    trace.add_thread(ThreadRow {
        pid,
        tid: 5,
        name: "thread 5 (overlap)".into(),
        sort_index: 5,
    });
    let mut add = |name: &str, start: i64, end: i64| {
        trace.activities.push(Activity::new(
            ActivityType::CpuOp,
            name,
            pid,
            5,
            t0 + start,
            t0 + end,
        ));
    };
    // Hand-made shapes (ns after t0).
    add("a", 0, 100);
    add("a.nested", 10, 20);
    add("b crosses a's end", 50, 150); // spills
    add("c crosses b's end", 120, 200); // fits under nothing open in lane 0 once a ended
    add("d crosses c's end", 180, 260); // spills
    add("same", 300, 400);
    add("same", 300, 400); // identical: nests
    add("touch", 400, 500); // starts where `same` ends
    add("zero", 450, 450);
    add("e", 600, 700);
    add("f", 650, 750); // spills
    add("g", 690, 760); // overlaps e and f: a third row
    let hand_made = 12;
    // A long pseudo-random run on the same row (a fixed LCG: reproducible).
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as i64
    };
    for i in 0..2_000 {
        let start = 1_000 + next() % 3_000_000;
        let dur = next() % 20_000;
        add(&format!("r{i}"), start, start + dur);
    }
    trace
        .activities
        .sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
    (trace, hand_made + 2_000)
}

#[test]
fn overlapping_events_on_one_thread_are_spilled_and_all_kept() {
    let (trace, x_events) = overlapping_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overlap.json");
    let stats: WriteStats = omniprof::trace::save(&trace, &path).unwrap();
    assert!(stats.spilled >= 3, "spilled only {}", stats.spilled);
    let counts = phases(&path);
    assert_eq!(counts["X"], x_events, "one X per activity, none lost");

    // What the writer spilled, the reader puts back on its own row.
    let read = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert_eq!(read.activities, trace.activities);
    assert_eq!(read.threads, trace.threads);

    let Some(report) = checker::run_checker(&path) else {
        return;
    };
    assert!(
        !report.has_error("slice_drop_overlapping_complete_event"),
        "Perfetto dropped overlapping events: {}",
        report.line
    );
    let report = checker::assert_loads_in_perfetto(&path).unwrap();
    assert_eq!(
        report.slices,
        Some(x_events + 1),
        "every X plus `Record Window End`"
    );
    assert_every_slice_kept(&path, &report);
}

#[test]
fn a_non_finite_counter_sample_still_loads() {
    let mut trace = device_timeline();
    let at = trace.window.start_ns + 44_000;
    let track = CounterTrack::new(ActivityType::GpuPmCounter, "sm_activity", 0, 7);
    assert!(!trace
        .counters
        .add(&track, at, [("sm_active_pct".into(), f64::NAN)]));
    assert_eq!(trace.counters.dropped_values(), 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nan.json");
    omniprof::trace::save(&trace, &path).unwrap();
    checker::assert_loads_in_perfetto(&path);
}

/// Saves `trace` as JSON and as `.pftrace`; the protobuf trace must decode to exactly the
/// JSON's events and load in Perfetto with the same slice, flow and counter counts (not
/// threads: the JSON's sibling rows are threads, the protobuf trace's sibling tracks are not).
fn assert_pftrace_matches_json(trace: &Trace, stem: &str) -> Option<decoder::DecodedReport> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join(format!("{stem}.json"));
    let pftrace = dir.path().join(format!("{stem}.pftrace"));
    omniprof::trace::save(trace, &json).unwrap();
    let stats = omniprof::trace::save(trace, &pftrace).unwrap();
    assert_eq!(stats.bytes, std::fs::metadata(&pftrace).unwrap().len());
    let decoded = decoder::assert_matches_json(&pftrace, Some(&json));
    if let (Some(pf), Some(js)) = (
        checker::assert_loads_in_perfetto(&pftrace),
        checker::assert_loads_in_perfetto(&json),
    ) {
        assert_eq!(
            (pf.slices, pf.flows, pf.counters),
            (js.slices, js.flows, js.counters),
            "{} vs {}",
            pf.line,
            js.line
        );
    }
    decoded
}

#[test]
fn a_device_timeline_with_counters_instants_and_every_kind_of_arg_as_pftrace() {
    let mut trace = device_timeline();
    let at = trace.window.start_ns;
    let hw = omniprof::trace::CounterTrack::new(ActivityType::HardwareCounters, "hw", 0, 7);
    trace.counters.add(
        &hw,
        at + 32_000,
        [
            ("sm_efficiency".into(), 61.25),
            ("dram_bytes".into(), 1024.0),
            ("not_a_number".into(), f64::NAN),
        ],
    );
    let pm = omniprof::trace::CounterTrack::new(ActivityType::GpuPmCounter, "sm_activity", 0, 7);
    trace
        .counters
        .add(&pm, at + 44_000, [("sm_active_pct".into(), f64::INFINITY)]);
    let mut tick = Activity::new(
        ActivityType::CpuInstantEvent,
        session::NASTY,
        4242,
        4242,
        at + 12_000,
        at + 12_000,
    );
    let map: omniprof::trace::Value = [
        ("nested", omniprof::trace::Value::from(vec![1i64, -2])),
        ("empty", omniprof::trace::Value::List(vec![])),
    ]
    .into_iter()
    .collect();
    tick.args = vec![
        (session::NASTY.into(), session::NASTY.into()),
        ("null".into(), omniprof::trace::Value::Null),
        ("negative".into(), (-7i64).into()),
        ("huge".into(), u64::MAX.into()),
        ("half".into(), 0.5.into()),
        ("yes".into(), true.into()),
        ("map".into(), map),
        ("empty map".into(), omniprof::trace::Value::Map(vec![])),
    ];
    let mut backward = Activity::new(
        ActivityType::CpuOp,
        "MmBackward0",
        4242,
        4242,
        at + 60_000,
        at + 70_000,
    );
    backward.flow = Some(Flow {
        id: 17,
        kind: FlowKind::FwdBwd,
        start: false,
    });
    // Same id as the `ac2g` flow, another kind: the two arrows stay apart.
    trace.activities[0].args.push(("fwd".into(), true.into()));
    let mut forward = trace.activities[0].clone();
    forward.name = "aten::mm fwd".into();
    forward.start_ns += 1;
    forward.end_ns = forward.start_ns + 5;
    forward.flow = Some(Flow {
        id: 17,
        kind: FlowKind::FwdBwd,
        start: true,
    });
    trace.activities.extend([tick, backward, forward]);
    trace
        .activities
        .sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
    let Some(report) = assert_pftrace_matches_json(&trace, "device") else {
        return;
    };
    assert_eq!(
        (report.counters, report.flows, report.instants),
        (3, 2, 2),
        "finite samples, both flows, the tick and `Record Window End`: {}",
        report.json
    );
}

#[test]
fn overlapping_events_as_pftrace_keep_every_slice_on_nested_tracks() {
    let (trace, x_events) = overlapping_trace();
    let Some(report) = assert_pftrace_matches_json(&trace, "overlap") else {
        return;
    };
    assert_eq!(report.slices, x_events);
}

#[test]
fn a_recorded_session_as_pftrace_holds_every_event() {
    let trace = {
        let _serial = serial();
        session::record_sample_session()
    };
    let Some(report) = assert_pftrace_matches_json(&trace, "session") else {
        return;
    };
    assert!(
        report.slices > 50 && report.instants > 20,
        "{}",
        report.json
    );
}
