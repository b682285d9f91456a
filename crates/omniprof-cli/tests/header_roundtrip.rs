//! What omniprof writes, omniprof reads back with its default limits: a `deviceProperties` of
//! 3 MB (under the reader's 4 MiB header limit) goes through `convert` and `summary` reads
//! the result. It was written 3.5 times larger when its numbers were floats spelled with an
//! exponent (`1e9` became `1000000000.0, `), and 1.5 times larger when they were small
//! integers (`0,` became `0, `): both over the limit, so `summary` refused omniprof's own
//! file. A trace whose header cannot fit even so, or with an event larger than the reader's
//! 16 MiB, is refused at write time, naming it, and nothing is written.

use std::path::{Path, PathBuf};

use omniprof_test_support::cli::{arg, Cli};
use omniprof_trace::{Activity, ActivityType, Trace, Value};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// A trace of one op whose `deviceProperties` is one object holding `items` repeated to
/// 3,000,000 bytes of list, written compactly as a tool other than omniprof would.
fn trace_with_properties(dir: &Path, item: &str) -> PathBuf {
    let count = 3_000_000 / (item.len() + 1);
    let list = vec![item; count].join(",");
    let text = format!(
        r#"{{"schemaVersion":1,"deviceProperties":[{{"id":0,"x":[{list}]}}],"traceEvents":[{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5}}]}}"#
    );
    let path = dir.join(format!("props-{}.json", item.len()));
    std::fs::write(&path, text).unwrap();
    path
}

fn convert_then_summarize(item: &str) {
    let dir = tempfile::tempdir().unwrap();
    let input = trace_with_properties(dir.path(), item);
    let output = dir.path().join("converted.pt.trace.json");
    OMNIPROF.ok(["convert", arg(&input), "-o", arg(&output)]);
    let read = std::fs::metadata(&input).unwrap().len();
    let written = std::fs::metadata(&output).unwrap().len();
    // The header, no larger than needed: the input's, plus Kineto's few fixed keys.
    assert!(
        written < read + 1024,
        "{item}: {read} bytes read, {written} written"
    );
    let table = OMNIPROF.ok(["summary", arg(&output)]);
    assert!(table.contains("aten::mm"), "{table}");
}

#[test]
fn a_three_megabyte_device_properties_of_exponent_floats_converts_and_reads_back() {
    convert_then_summarize("1e9");
}

#[test]
fn a_three_megabyte_device_properties_of_small_integers_converts_and_reads_back() {
    convert_then_summarize("0");
}

#[test]
fn a_header_that_cannot_fit_the_reader_is_refused_when_saved_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.pt.trace.json");
    let mut trace = Trace::new(0, 1_000);
    trace
        .activities
        .push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 500));
    // 5 MiB of name: no spelling fits the 4 MiB header limit.
    trace.device_properties.push(
        [("name", Value::from("x".repeat(5 << 20)))]
            .into_iter()
            .collect(),
    );
    let err = omniprof_trace::save(&trace, &path).unwrap_err().to_string();
    assert!(
        err.contains(
            "the trace's header (deviceProperties and metadata) would take 5243091 bytes, more \
             than the 4194304 bytes the reader reads of a header"
        ),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn an_event_larger_than_the_reader_reads_is_refused_when_saved_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.pt.trace.json");
    let mut trace = Trace::new(0, 1_000);
    let name = "x".repeat(17 << 20);
    trace
        .activities
        .push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 100));
    trace.activities.push(Activity::new(
        ActivityType::CpuOp,
        name.as_str(),
        1,
        1,
        200,
        500,
    ));
    let err = omniprof_trace::save(&trace, &path).unwrap_err().to_string();
    assert!(
        err.contains("traceEvents[1] would take 17825879 bytes, more than the 16777216 bytes"),
        "{err}"
    );
    assert!(!path.exists());
}
