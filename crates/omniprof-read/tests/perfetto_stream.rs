//! The streamed Perfetto writer against the whole one: a trace in written order streams into
//! the very bytes `write_perfetto` writes; a trace whose rows are in order only each on its
//! own (device work after the host's, as Kineto writes it) streams into a `.pftrace` that
//! reads back into the same trace; what cannot be streamed says why.

use omniprof_read::{ArgFilter, TraceReader};
use omniprof_trace::{
    write_chrome, write_perfetto, Activity, ActivityType, CounterTrack, NeedsWholeTrace,
    PerfettoStream, PerfettoSurvey, Trace, Value, WriteStats,
};

use omniprof_test_support::data::{ac2g, launch_and_kernel, op, sample_trace};

/// Nested ops, an overlapping one (a sibling lane), an instant, a launch whose flow has two
/// kernels at its end, counters, rows, a span and metadata.
fn trace() -> Trace {
    use ActivityType::*;
    let (launch, kernel) = launch_and_kernel();
    let mut second = Activity::new(ConcurrentKernel, "kernel", 0, 5, 1_450_000, 1_500_000);
    second.flow = ac2g(11, false);
    second
        .args
        .push(("grid".into(), Value::List(vec![Value::Int(128)])));
    let mut t = sample_trace(vec![
        op("aten::mm", 7, 1_100_000, 1_500_000),
        op("outer", 8, 1_100_000, 1_300_000),
        launch,
        op("overlapping", 8, 1_200_000, 1_400_000),
        Activity::new(CpuInstantEvent, "mark", 7, 7, 1_210_000, 1_210_000),
        kernel,
        second,
    ]);
    let sm = CounterTrack::new(GpuPmCounter, "sm", 0, 5);
    t.counters.add(
        &sm,
        1_400_000,
        [("active".into(), 12.0), ("idle".into(), 3.0)],
    );
    t
}

fn whole_pftrace(t: &Trace) -> (Vec<u8>, WriteStats) {
    let mut out = Vec::new();
    let stats = write_perfetto(t, &mut out).unwrap();
    (out, stats)
}

/// What the two reads of `json` write: the survey, then the stream.
fn streamed_pftrace(json: &[u8]) -> Result<(Vec<u8>, WriteStats), NeedsWholeTrace> {
    let mut survey = PerfettoSurvey::default();
    TraceReader::new()
        .args(ArgFilter::none())
        .stream(json, |item| survey.add(item))
        .unwrap();
    let layout = survey.finish()?;
    let mut out = Vec::new();
    let mut stream = PerfettoStream::new(layout, &mut out).unwrap();
    TraceReader::new()
        .stream(json, |item| stream.add(item))
        .unwrap();
    let stats = stream.finish().unwrap();
    Ok((out, stats))
}

/// `bytes` read back, its activities and thread rows in a fixed order (a `.pftrace`
/// written a sequence per row delivers them row by row).
fn read_back(bytes: &[u8]) -> Trace {
    let mut t = TraceReader::new().read(bytes).into_trace().unwrap();
    t.activities.sort_by(|a, b| {
        let key = |a: &Activity| {
            (
                a.start_ns,
                std::cmp::Reverse(a.end_ns),
                a.device,
                a.resource,
            )
        };
        key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
    });
    t.threads.sort_by_key(|r| (r.pid, r.tid));
    t.processes.sort_by_key(|r| r.pid);
    t
}

#[test]
fn a_trace_in_written_order_streams_into_the_bytes_the_whole_trace_writer_writes() {
    let mut json = Vec::new();
    write_chrome(&trace(), "t.json", &mut json).unwrap();
    let whole = TraceReader::new().read(&json[..]).into_trace().unwrap();
    let (expected, expected_stats) = whole_pftrace(&whole);
    let (streamed, stats) = streamed_pftrace(&json).unwrap();
    assert_eq!(stats, expected_stats);
    assert_eq!(stats.spilled, 1);
    assert!(streamed == expected, "the streamed bytes differ");
}

/// Host ops, then the device's kernels, which run earlier than the last host ops: each row
/// in order, the file not. The launch's flow ends at the first kernel.
const KINETO_ORDER: &[u8] = br#"{"baseTimeNanoseconds": 1000000, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 100, "dur": 50,
   "args": {"External id": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7,
   "ts": 110, "dur": 5, "args": {"External id": 1, "correlation": 9}},
  {"ph": "s", "id": 9, "pid": 7, "tid": 7, "ts": 110, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 7, "tid": 8, "ts": 105, "dur": 90},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 7, "tid": 7, "ts": 300, "dur": 20},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 5, "ts": 120, "dur": 30,
   "args": {"External id": 1, "correlation": 9}},
  {"ph": "f", "id": 9, "pid": 0, "tid": 5, "ts": 120, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 5, "ts": 160, "dur": 10},
  {"ph": "C", "cat": "gpu_pm_counter", "name": "sm", "pid": 0, "tid": 5, "ts": 120,
   "args": {"active": 50}},
  {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "worker"}}
]}"#;

#[test]
fn rows_in_order_only_each_on_its_own_stream_into_a_pftrace_holding_the_same_trace() {
    let whole = TraceReader::new().read(KINETO_ORDER).into_trace().unwrap();
    let (expected, expected_stats) = whole_pftrace(&whole);
    let (streamed, stats) = streamed_pftrace(KINETO_ORDER).unwrap();
    // Every begin, end, instant and sample of the whole writer's, each row on a sequence of
    // its own.
    assert_eq!(stats.events, expected_stats.events);
    assert_ne!(streamed, expected);
    let (from_stream, from_whole) = (read_back(&streamed), read_back(&expected));
    assert_eq!(from_stream.activities.len(), 6);
    assert_eq!(from_stream, from_whole);
    let kernel = &from_stream.activities[3];
    assert_eq!(
        (&*kernel.name, kernel.flow),
        ("gemm", ac2g(9, false)),
        "the flow reaches its kernel"
    );
}

#[test]
fn an_activity_out_of_order_on_its_row_asks_for_the_whole_trace() {
    let json = br#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "early", "pid": 1, "tid": 1, "ts": 2, "dur": 1}
    ]}"#;
    let why = streamed_pftrace(json).err().map(|e| e.to_string());
    assert_eq!(
        why.as_deref(),
        Some(
            "the trace cannot be written as it is read: an activity comes before one that \
             starts later on its row"
        )
    );
}

#[test]
fn a_flow_with_two_ends_in_a_file_out_of_time_order_asks_for_the_whole_trace() {
    let json = br#"{"traceEvents": [
      {"ph": "X", "cat": "cuda_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
      {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 5, "cat": "ac2g", "name": "ac2g"},
      {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 2, "dur": 1},
      {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 2, "cat": "ac2g", "name": "ac2g", "bp": "e"},
      {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 8, "dur": 1},
      {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 8, "cat": "ac2g", "name": "ac2g", "bp": "e"}
    ]}"#;
    let why = streamed_pftrace(json).err().map(|e| e.to_string());
    assert_eq!(
        why.as_deref(),
        Some(
            "the trace cannot be written as it is read: a flow id has several starts or ends \
             (or an end before its start) and the activities are not in time order"
        )
    );
}

#[test]
fn a_second_read_that_differs_from_the_first_is_an_error_not_a_broken_trace() {
    let mut survey = PerfettoSurvey::default();
    TraceReader::new()
        .args(ArgFilter::none())
        .stream(KINETO_ORDER, |item| survey.add(item))
        .unwrap();
    let changed = br#"{"baseTimeNanoseconds": 1000000, "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 100, "dur": 50},
      {"ph": "X", "cat": "cpu_op", "name": "new row", "pid": 7, "tid": 9, "ts": 100, "dur": 50}
    ]}"#;
    let mut out = Vec::new();
    let mut stream = PerfettoStream::new(survey.finish().unwrap(), &mut out).unwrap();
    TraceReader::new()
        .stream(&changed[..], |item| stream.add(item))
        .unwrap();
    let e = stream.finish().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        e.to_string(),
        "the trace changed between its two reads: activity 1 (new row) is not where the first \
         read found room for it"
    );
}
