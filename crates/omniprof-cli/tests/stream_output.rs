//! Traces written to a character device or a FIFO (issue 25, item 17): a path without a
//! known extension that is one of those gets Chrome JSON, as `docs/cli.md` says,
//! where the CLI used to refuse it before the save was reached ("unknown trace format").

#![cfg(unix)]

use omniprof_test_support::cli::Cli;
use omniprof_test_support::shared_dirs::{mkfifo, read_fifo_on_a_thread};

/// `omniprof` without the plugins the user installed, which would add their output.
fn omniprof() -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_omniprof"))
        .env_remove("OMNIPROF_PLUGIN_DIR")
        .env_remove("KINETO_PLUGIN_LIB_DIR_PATH")
}

#[test]
fn demo_writes_its_trace_to_dev_null() {
    let stdout = omniprof().ok(["demo", "-o", "/dev/null", "--steps", "1", "--threads", "1"]);
    assert!(stdout.starts_with("wrote /dev/null ("), "{stdout}");
}

#[test]
fn demo_writes_chrome_json_into_a_fifo_without_an_extension() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("trace-pipe");
    mkfifo(&fifo);
    let reader = read_fifo_on_a_thread(&fifo);
    omniprof().ok([
        "demo",
        "-o",
        fifo.to_str().unwrap(),
        "--steps",
        "1",
        "--threads",
        "1",
    ]);
    let bytes = reader.join().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert!(!json["traceEvents"].as_array().unwrap().is_empty());
    assert!(fifo.exists(), "the FIFO is written in place, not replaced");
}

#[test]
fn convert_writes_chrome_json_to_dev_null_and_a_plain_unknown_name_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    omniprof().ok(["demo", "-o", trace.to_str().unwrap(), "--steps", "1"]);

    let stdout = omniprof().ok(["convert", trace.to_str().unwrap(), "-o", "/dev/null"]);
    assert!(stdout.starts_with("wrote /dev/null ("), "{stdout}");

    let plain = dir.path().join("t.txt");
    let stderr = omniprof().fails(
        2,
        [
            "convert",
            trace.to_str().unwrap(),
            "-o",
            plain.to_str().unwrap(),
        ],
    );
    assert_eq!(
        stderr,
        format!(
            "error: {}: unknown trace format; the file name must end in one of: .json, \
             .json.gz, .pftrace\n",
            plain.display()
        )
    );
    assert!(!plain.exists());
}
