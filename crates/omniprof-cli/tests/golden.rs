//! Pins what the `omniprof` binary prints, so a change that should not alter behaviour (a
//! restructuring, a new dependency) cannot alter it unnoticed.
//!
//! - `summary` on PyTorch's reference trace, in every format and with the main options, is
//!   compared byte for byte with `tests/data/golden/`.
//! - `demo` runs on real threads and a real (simulated) device, so its times differ per run;
//!   what is compared is everything else: its standard output with times masked, and the
//!   trace's shape (every event's phase, category, name and arg keys, counted; the header's
//!   keys and values, except the ones that name this machine, this run or this moment).
//!   Counter samples come at a fixed period, so how many there are depends on how long the
//!   run took: their counts are masked, and so is the total in the demo's output.
//!
//! After an intended change of output, regenerate the files with `OMNIPROF_BLESS=1 cargo
//! test -p omniprof-cli --test golden` and review the diff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use omniprof_test_support::cli::Cli;
use omniprof_test_support::data::reference_trace;
use serde_json::Value;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

const BLESS_ENV: &str = "OMNIPROF_BLESS";

/// Header entries that differ between runs or machines (ids, paths, clock, host).
const VOLATILE_KEYS: [&str; 7] = [
    "traceName",
    "trace_id",
    "host_name",
    "baseTimeNanoseconds",
    "clock_source",
    "counter_samples",
    "out_of_window_counter_samples",
];

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/golden")
        .join(name)
}

/// Compares `actual` with the golden file `name` (or writes it when blessing).
fn check(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os(BLESS_ENV).is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with {BLESS_ENV}=1)", path.display()));
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from {} at line {}:\nexpected: {:?}\nactual:   {:?}",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

#[test]
fn summary_of_the_reference_trace_is_unchanged() {
    let trace = reference_trace();
    let trace = trace.to_str().unwrap();
    let runs: [(&str, &[&str]); 6] = [
        ("summary-table.txt", &[]),
        (
            "summary-sorted.txt",
            &["--sort-by", "self_cpu_time_total", "--row-limit", "5"],
        ),
        ("summary-all-rows.txt", &["--row-limit", "-1"]),
        ("summary-shapes.txt", &["--group-by-shapes"]),
        ("summary.csv", &["--format", "csv"]),
        ("summary.json", &["--format", "json"]),
    ];
    for (name, args) in runs {
        let mut full = vec!["summary", trace];
        full.extend_from_slice(args);
        check(name, &OMNIPROF.ok(&full));
    }
}

/// Replaces every time or percentage (`12.345us`, `1.2ms`, `50.50%`) with `#` and collapses
/// runs of spaces, which change with the widths of the numbers.
fn mask_times(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| {
                let number = w.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
                let unit = &w[number.len()..];
                let is_time = !number.is_empty()
                    && number.chars().all(|c| c.is_ascii_digit() || c == '.')
                    && matches!(unit, "us" | "ms" | "s" | "%");
                if is_time {
                    "#".to_owned()
                } else {
                    w.to_owned()
                }
            })
            .collect();
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

/// Every event's (phase, category, name, arg keys less `ignored_args`), counted, and the
/// header with its volatile entries left out.
fn trace_shape(path: &Path, ignored_args: &[&str]) -> String {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = String::new();
    for (key, value) in doc.as_object().unwrap() {
        if key == "traceEvents" || VOLATILE_KEYS.contains(&key.as_str()) {
            continue;
        }
        out.push_str(&format!("{key} = {value}\n"));
    }
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for ev in doc["traceEvents"].as_array().unwrap() {
        let field = |k: &str| ev[k].as_str().unwrap_or("").to_owned();
        let mut keys: Vec<&str> = ev["args"]
            .as_object()
            .map(|m| {
                m.keys()
                    .map(String::as_str)
                    .filter(|k| !ignored_args.contains(k))
                    .collect()
            })
            .unwrap_or_default();
        keys.sort_unstable();
        let line = format!(
            "{} | {} | {} | {}",
            field("ph"),
            field("cat"),
            field("name"),
            keys.join(",")
        );
        *counts.entry(line).or_default() += 1;
    }
    for (line, n) in counts {
        if line.starts_with("C |") {
            out.push_str(&format!("    # {line}\n"));
        } else {
            out.push_str(&format!("{n:5} {line}\n"));
        }
    }
    out
}

/// The demo's output with its total event count masked (it includes counter samples).
fn mask_event_count(stdout: &str) -> String {
    match stdout.split_once(" trace events") {
        Some((head, tail)) => match head.rsplit_once('(') {
            Some((before, _)) => format!("{before}(# trace events{tail}"),
            None => stdout.to_owned(),
        },
        None => stdout.to_owned(),
    }
}

#[test]
fn demo_output_and_trace_shape_are_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.pt.trace.json");
    let p = path.to_str().unwrap();
    let stdout = OMNIPROF.ok(["demo", "--threads", "2", "--steps", "3", "-o", p]);
    check(
        "demo-stdout.txt",
        &mask_event_count(&stdout.replace(p, "OUT")),
    );
    check("demo-trace-shape.txt", &trace_shape(&path, &[]));
}

#[test]
fn demo_in_stubs_mode_prints_the_same_table_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stubs.pt.trace.json");
    let p = path.to_str().unwrap();
    let args = ["demo", "--mode", "stubs", "--threads", "2", "--steps", "3"];
    let stdout = OMNIPROF.ok([&args[..], &["-o", p]].concat());
    // The rows vary between runs: their order follows device time, and an op whose device
    // time truncates to 0us lands in a row of its own. Everything around them is compared.
    let masked = mask_times(&stdout.replace(p, "OUT"));
    let mut separators = 0;
    let kept: Vec<&str> = masked
        .lines()
        .filter(|line| {
            if line.starts_with("---") {
                separators += 1;
                return true;
            }
            separators != 2
        })
        .collect();
    check("demo-stubs-stdout.txt", &(kept.join("\n") + "\n"));
    // Likewise an op whose device time truncates to 0us has no `device_time_us`.
    check(
        "demo-stubs-trace-shape.txt",
        &trace_shape(&path, &["device_time_us"]),
    );
}
