//! `omniprof convert … --format parquet` streams: on the benchmark's trace of 2.2 million
//! events (`scripts/gen_trace.py --ops 1000000`, 500 MB of JSON) the process's peak memory,
//! as the kernel counted it, stays under [`BOUND`], whatever the trace's size.

use omniprof_test_support::cli::{arg, Cli};
use omniprof_test_support::data::gen_trace;
use omniprof_test_support::memory::run_measured;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The peak resident memory the conversion may reach (issue 28's acceptance bound).
const BOUND: u64 = 300 << 20;

#[test]
fn converting_the_benchmark_trace_to_parquet_stays_under_300_mb() {
    let dir = tempfile::tempdir().unwrap();
    let trace = gen_trace(
        &dir.path().join("big.json"),
        &["--ops", "1000000", "--rank", "0"],
    );
    let out = run_measured(&mut OMNIPROF.command([
        "convert",
        arg(&trace),
        "-o",
        arg(&dir.path().join("tables")),
        "--format",
        "parquet",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "(2200025 events): 1600020 slices, 0 instants, 0 counters, 600000 flows, 6 metadata, \
             0 device_properties, 1500020 ops"
        ),
        "{stdout}"
    );
    assert!(
        out.peak_rss < BOUND,
        "peak RSS {} MiB, bound {} MiB",
        out.peak_rss >> 20,
        BOUND >> 20
    );
}
