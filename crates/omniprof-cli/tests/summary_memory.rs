//! `omniprof summary` holds memory bounded by its limits, not by the file: crafted gzip files
//! that inflate to a huge `deviceProperties` or a huge event name fail at the byte offset of
//! the value, and the process's peak memory, as the kernel counted it, stays under
//! [`BOUND`]. With `--partial` the rows of the events read before still print. Crafted
//! `.pftrace` files that would make the reader hold state for every packet (a million
//! interned names, slices begun and never ended, one open slice around a file of
//! instants) are read under [`PFTRACE_BOUND`], its caps noted.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use omniprof_test_support::cli::{arg, Cli};
use omniprof_test_support::crafted_pftrace;
use omniprof_test_support::memory::{run_measured, Measured};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The peak resident memory `summary` may reach on these inputs: the bound `docs/reliability.md` gives with the
/// default limits (16 MiB events, a 4 MiB header).
const BOUND: u64 = 160 << 20;

/// The peak resident memory `summary` may reach on the crafted `.pftrace` files: what the
/// reader's caps let it hold (262,144 activities waiting for an open slice take the most,
/// about 80 MiB in all). Without the caps each file took 130 to 170 MiB.
const PFTRACE_BOUND: u64 = 112 << 20;

/// Gzip of `text`.
fn member(text: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(text).unwrap();
    gz.finish().unwrap()
}

/// A gzip file of `head`, then `chunk` `times` over, then `tail`: concatenated gzip members,
/// so that a file of a few hundred KiB inflates to hundreds of MiB.
fn inflating(path: &Path, head: &str, chunk: &[u8], times: usize, tail: &str) -> PathBuf {
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&member(head.as_bytes())).unwrap();
    let chunk = member(chunk);
    for _ in 0..times {
        file.write_all(&chunk).unwrap();
    }
    file.write_all(&member(tail.as_bytes())).unwrap();
    path.to_owned()
}

const OPS: &str = r#"{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 7, "dur": 2},"#;

fn summary(path: &Path) -> Measured {
    run_measured(&mut OMNIPROF.command(["summary", arg(path), "--partial"]))
}

fn check(out: &Measured, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    assert!(
        out.peak_rss < BOUND,
        "peak RSS {} MiB, bound {} MiB",
        out.peak_rss >> 20,
        BOUND >> 20
    );
}

#[test]
fn inflated_device_properties_fail_at_the_header_limit_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    // 64 MiB of `0,` inside deviceProperties (held whole, as values, over a gigabyte).
    let path = inflating(
        &dir.path().join("props.json.gz"),
        r#"{"deviceProperties": [{"id": 0, "x": ["#,
        &b"0,".repeat(1 << 19),
        64,
        r#"0]}], "traceEvents": []}"#,
    );
    let out = summary(&path);
    check(
        &out,
        r#"(byte 21): in "deviceProperties": a value larger than the limit of 4194304 bytes for the header"#,
    );
}

#[test]
fn a_huge_event_name_fails_at_the_event_limit_and_partial_keeps_the_rows_before() {
    let dir = tempfile::tempdir().unwrap();
    // Two ops, then an event whose name is 128 MiB long.
    let head =
        format!("{{\"traceEvents\": [\n{OPS}\n{{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"");
    let path = inflating(
        &dir.path().join("name.json.gz"),
        &head,
        &b"x".repeat(1 << 20),
        128,
        r#"", "pid": 1, "tid": 1, "ts": 9, "dur": 1}]}"#,
    );
    let out = summary(&path);
    check(
        &out,
        "traceEvents[2]: an event larger than the limit of 16777216 bytes for one event",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("aten::mm") && stdout.contains("aten::add"),
        "{stdout}"
    );
}

/// `summary` of the `.pftrace` file that `write` writes: it succeeds, notes `expected`,
/// prints the row of `row` and stays under [`PFTRACE_BOUND`].
fn check_pftrace(
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    expected: &str,
    row: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crafted.pftrace");
    write(&mut std::fs::File::create(&path).unwrap()).unwrap();
    let out = run_measured(&mut OMNIPROF.command(["summary", arg(&path)]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(row), "{stdout}");
    assert!(
        out.peak_rss < PFTRACE_BOUND,
        "peak RSS {} MiB, bound {} MiB",
        out.peak_rss >> 20,
        PFTRACE_BOUND >> 20
    );
}

#[test]
fn a_million_interned_names_are_read_in_bounded_memory_the_rest_dropped_and_noted() {
    check_pftrace(
        |f| crafted_pftrace::many_interned_names(1_000_000, f),
        "note: dropped 677362 Perfetto interned strings past the 32 MiB held",
        &format!("name_{:035}", 1),
    );
}

#[test]
fn slices_begun_and_never_ended_are_cut_in_bounded_memory_and_noted() {
    check_pftrace(
        |f| crafted_pftrace::never_ended_begins(300_000, f),
        "note: cut 234464 Perfetto slices still open when 65536 were open",
        "b",
    );
}

#[test]
fn a_slice_open_around_a_file_of_instants_is_cut_in_bounded_memory_and_noted() {
    check_pftrace(
        |f| crafted_pftrace::open_slice_then_instants(400_000, f),
        "note: cut 1 Perfetto slices still open",
        "open",
    );
}
