//! The streamed JSON writer against the whole one: a trace read back from what
//! `ChromeStream` wrote as the reader streamed it equals the trace read back from
//! `omniprof_trace::write_chrome`'s output; a row out of order stops the stream with `NeedsWholeTrace`.

use omniprof_read::TraceReader;
use omniprof_trace::{ChromeStream, NeedsWholeTrace, Trace};

use omniprof_test_support::data::{launch_and_kernel, op, sample_trace};

/// Nested ops, an overlapping one (a sibling lane), a launch, its kernel with a flow, a
/// counter, rows, a span and metadata, in written order.
fn trace() -> Trace {
    let (launch, kernel) = launch_and_kernel();
    sample_trace(vec![
        op("aten::mm", 7, 1_100_000, 1_500_000),
        op("outer", 8, 1_100_000, 1_300_000),
        launch,
        op("overlapping", 8, 1_200_000, 1_400_000),
        kernel,
    ])
}

fn whole_json(t: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    omniprof_trace::write_chrome(t, "t.json", &mut out).unwrap();
    out
}

/// What `ChromeStream` writes as the reader streams `json`.
fn streamed_json(json: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut stream = ChromeStream::new(&mut out, "t.json");
    TraceReader::new()
        .stream(json, |item| stream.add(item))
        .unwrap();
    stream.finish()?;
    Ok(out)
}

#[test]
fn a_streamed_json_reads_back_into_the_trace_the_whole_json_reads_into() {
    let json = whole_json(&trace());
    let streamed = streamed_json(&json).unwrap();
    let (from_whole, whole_stats) = TraceReader::new().read(&json[..]).into_result().unwrap();
    let (from_stream, stream_stats) = TraceReader::new()
        .read(&streamed[..])
        .into_result()
        .unwrap();
    assert_eq!(from_stream, from_whole);
    assert_eq!(stream_stats, whole_stats);
    // The overlapping op is on a sibling row in both, which is named.
    let text = String::from_utf8(streamed).unwrap();
    assert!(text.contains(r#""worker (overlap 1)""#), "{text}");
}

#[test]
fn an_activity_out_of_order_on_its_row_stops_the_stream() {
    let json = br#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "other row", "pid": 1, "tid": 2, "ts": 1, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "early", "pid": 1, "tid": 1, "ts": 2, "dur": 1}
    ]}"#;
    let e = streamed_json(json).unwrap_err();
    let why = e
        .get_ref()
        .and_then(|s| s.downcast_ref::<NeedsWholeTrace>());
    assert_eq!(
        why.map(ToString::to_string).as_deref(),
        Some(
            "the trace cannot be written as it is read: an activity comes before one that \
             starts later on its row"
        )
    );
}
