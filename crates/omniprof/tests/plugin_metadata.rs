//! Metadata a plugin passes reaches the trace only in a form every reader reads: numbers
//! beyond a double and lone surrogates stay strings, values nested deeper than
//! `omniprof::MAX_DEPTH` are refused and counted. The trace then loads in omniprof's reader,
//! Python's `json` and Perfetto.

use std::process::Command;

use omniprof::trace::Value;
use omniprof_read::TraceReader;
use omniprof_test_support::lock::serial;
use omniprof_test_support::{checker, plugins, session};

#[test]
fn metadata_no_reader_reads_is_kept_as_text_or_refused() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    omniprof::plugins::load_plugin(plugins::build_broken("metadata_unreadable", dir.path()))
        .unwrap();
    let trace = session::record_host_steps("", 1, 1);

    let kernel = trace
        .activities
        .iter()
        .find(|a| &*a.name == "valid_kernel")
        .expect("valid_kernel");
    assert_eq!(kernel.arg("huge"), Some(&Value::from("1e400")));
    assert_eq!(kernel.arg("tiny"), Some(&Value::from("-1e400")));
    assert_eq!(kernel.arg("surrogate"), Some(&Value::from(r#""\ud800""#)));
    assert_eq!((kernel.arg("deep"), kernel.arg("abyss")), (None, None));
    let after = trace
        .activities
        .iter()
        .find(|a| &*a.name == "after_broken_call")
        .expect("after_broken_call");
    assert_eq!(after.arg("broken_call_rc"), Some(&Value::Int(-1)));
    let errors: Vec<String> = session::backend_errors(&trace)
        .into_iter()
        .filter(|e| e.starts_with("UnreadableMetadata: "))
        .collect();
    assert_eq!(
        errors,
        [
            "UnreadableMetadata: 3 × metadata value is not JSON a reader reads (kept as a \
             string)",
            "UnreadableMetadata: 2 × metadata value nested deeper than a reader reads \
             (refused): deep, abyss",
        ]
    );

    let path = dir.path().join("metadata.pt.trace.json");
    omniprof::trace::save(&trace, &path).unwrap();
    let read = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert_eq!(read.activities.len(), trace.activities.len());
    let python = Command::new("python3")
        .args(["-c", "import json, sys; json.load(open(sys.argv[1]))"])
        .arg(&path)
        .output()
        .expect("python3 runs");
    assert!(
        python.status.success(),
        "{}",
        String::from_utf8_lossy(&python.stderr)
    );
    checker::assert_loads_in_perfetto(&path);
}
