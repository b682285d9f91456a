//! `omniprof flamegraph` and `omniprof diff --format json` hold memory that grows with the
//! events and rows, not faster: the process's peak memory, as the kernel counted it, stays
//! under a bound on generated inputs that took gigabytes before.
//!
//! - `flamegraph` on 20,000 nested ops: each op's stack was a string of every frame above it,
//!   so memory grew with the square of the depth (2.4 GB here, release build). Stacks deeper than
//!   [`MAX_STACK_DEPTH`] are cut there, the folded output holds exactly `MAX_STACK_DEPTH` frames at most,
//!   and every nanosecond is still counted.
//! - `diff --format json` on 60,000 names: a `serde_json` map per row took ~5 KB a row; the
//!   JSON now takes no more than the CSV of the same rows, plus the difference of the texts.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use omniprof_analysis::MAX_STACK_DEPTH;
use omniprof_test_support::cli::Cli;
use omniprof_test_support::memory::{run_measured, Measured};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// A gzip trace of `events`, one JSON object per item.
fn gzip_trace(path: &Path, events: impl Iterator<Item = String>) -> PathBuf {
    let file = std::fs::File::create(path).unwrap();
    let mut gz = GzEncoder::new(std::io::BufWriter::new(file), Compression::fast());
    gz.write_all(b"{\"traceEvents\": [\n").unwrap();
    for (i, event) in events.enumerate() {
        if i > 0 {
            gz.write_all(b",\n").unwrap();
        }
        gz.write_all(event.as_bytes()).unwrap();
    }
    gz.write_all(b"\n]}\n").unwrap();
    gz.finish().unwrap().flush().unwrap();
    path.to_owned()
}

fn omniprof(args: &[&std::ffi::OsStr]) -> Measured {
    run_measured(&mut OMNIPROF.command(args))
}

fn succeeded(out: &Measured) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

const NESTED: u64 = 20_000;

/// `NESTED` ops, each inside the one before and 1 ns shorter at each end: op `i` runs from
/// `i` to `2 * NESTED - i` ns, so every op has 2 ns of self time (the innermost: its 2 ns).
fn nested_ops() -> impl Iterator<Item = String> {
    (0..NESTED).map(|i| {
        format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "f{i}", "pid": 1, "tid": 1, "ts": {}.{:03}, "dur": {}.{:03}}}"#,
            i / 1000,
            i % 1000,
            (2 * (NESTED - i)) / 1000,
            (2 * (NESTED - i)) % 1000,
        )
    })
}

#[test]
fn a_flame_graph_of_twenty_thousand_nested_ops_is_cut_at_the_depth_limit_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let trace = gzip_trace(&dir.path().join("deep.json.gz"), nested_ops());
    let folded = dir.path().join("deep.folded");
    let out = omniprof(&[
        "flamegraph".as_ref(),
        trace.as_os_str(),
        "-o".as_ref(),
        folded.as_os_str(),
        "--folded".as_ref(),
    ]);
    let stderr = succeeded(&out);
    // The user is told what was cut.
    assert_eq!(
        stderr.trim_end(),
        format!(
            "warning: {} frames deeper than {MAX_STACK_DEPTH} were cut; their time is drawn on their \
             ancestor at depth {MAX_STACK_DEPTH}",
            NESTED - MAX_STACK_DEPTH as u64
        )
    );
    let text = std::fs::read_to_string(&folded).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // One stack per depth up to the limit; the deepest holds every op below it.
    assert_eq!(lines.len(), MAX_STACK_DEPTH);
    let deepest = lines.iter().max_by_key(|l| l.matches(';').count()).unwrap();
    let (stack, ns) = deepest.rsplit_once(' ').unwrap();
    assert_eq!(stack.split(';').count(), MAX_STACK_DEPTH);
    assert_eq!(
        stack.rsplit(';').next(),
        Some(&*format!("f{}", MAX_STACK_DEPTH - 1))
    );
    // The deepest kept op's whole length: 2 * (NESTED - (MAX_STACK_DEPTH - 1)) ns.
    assert_eq!(
        ns,
        (2 * (NESTED - (MAX_STACK_DEPTH as u64 - 1))).to_string()
    );
    let total: u64 = lines
        .iter()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 2 * NESTED, "every nanosecond of the root op");
    // Before, 2.4 GB (release build); now 16 MB.
    assert!(
        out.peak_rss < 200 << 20,
        "peak RSS {} MiB",
        out.peak_rss >> 20
    );
}

/// A trace of `names` host ops of distinct names, `scale` ns each.
fn many_names(path: &Path, names: u64, scale: u64) -> PathBuf {
    gzip_trace(
        path,
        (0..names).map(move |i| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "aten::op_number_{i}", "pid": 1, "tid": 1, "ts": {i}, "dur": 0.{:03}}}"#,
                scale
            )
        }),
    )
}

#[test]
fn diff_as_json_takes_no_more_memory_than_as_csv() {
    const NAMES: u64 = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let base = many_names(&dir.path().join("base.json.gz"), NAMES, 400);
    let new = many_names(&dir.path().join("new.json.gz"), NAMES, 700);
    let run = |format: &str| {
        let out = omniprof(&[
            "diff".as_ref(),
            base.as_os_str(),
            new.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
        ]);
        succeeded(&out);
        out
    };
    let csv = run("csv");
    let json = run("json");
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout).lines().count(),
        1 + NAMES as usize
    );
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), NAMES as usize);
    assert_eq!(doc["rows"][0]["self_cpu_time_total_us"]["delta"], 0.3);
    // The JSON text is longer than the CSV's; past that, the same memory (before: ~5 KB a
    // row more: 500,000 names took 2.8 GB against 0.47 GB for the CSV).
    let text_excess = json.stdout.len().saturating_sub(csv.stdout.len()) as u64;
    assert!(
        json.peak_rss < csv.peak_rss + 2 * text_excess + (16 << 20),
        "JSON peak RSS {} MiB, CSV {} MiB, texts {} and {} MiB",
        json.peak_rss >> 20,
        csv.peak_rss >> 20,
        json.stdout.len() >> 20,
        csv.stdout.len() >> 20
    );
}
