//! Proves `omniprof diff` on hand-built traces with known differences: exactly those deltas,
//! new and vanished ops marked, the largest regression first; identical traces give
//! all-zero deltas; traces with nothing in common get a note and exit 0; an unreadable
//! trace fails naming it.

use std::path::{Path, PathBuf};

use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_trace::{Activity, ActivityType, Trace};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The arguments of `omniprof diff BASE TRACE FLAGS...`.
fn diff<'a>(base: &'a Path, trace: &'a Path, flags: &[&'a str]) -> Vec<&'a str> {
    [&["diff", arg(base), arg(trace)], flags].concat()
}

/// One thread of top-level host ops `(name, duration ns)` back to back, and a kernel of
/// `kernel_ns` launched by the first.
fn save(dir: &Path, file: &str, ops: &[(&str, i64)], kernel_ns: i64) -> PathBuf {
    let base = omniprof_trace::process_base_time_ns();
    let mut t = Trace::new(base, base + 1_000_000);
    let mut at = base;
    for (i, &(name, ns)) in ops.iter().enumerate() {
        let mut a = Activity::new(ActivityType::CpuOp, name, 10, 1, at, at + ns);
        a.correlation = i as u64 + 1;
        t.activities.push(a);
        at += ns + 1_000;
    }
    let mut k = Activity::new(
        ActivityType::ConcurrentKernel,
        "gemm",
        0,
        7,
        base,
        base + kernel_ns,
    );
    k.linked_correlation = Some(1);
    t.activities.push(k);
    t.activities
        .sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
    let path = dir.join(file);
    omniprof_trace::save(&t, &path).unwrap();
    path
}

/// The CSV rows by name: (change, then every number column).
fn rows(csv: &str) -> Vec<(String, String, Vec<String>)> {
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].to_owned(),
                f[3].to_owned(),
                f[4..].iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect()
}

#[test]
fn known_differences_give_exactly_those_deltas_largest_regression_first() {
    let dir = tempfile::tempdir().unwrap();
    let base = save(
        dir.path(),
        "base.json",
        &[("aten::mm", 10_000), ("aten::relu", 3_000), ("old", 500)],
        4_000,
    );
    let new = save(
        dir.path(),
        "new.json",
        &[
            ("aten::mm", 12_500),
            ("aten::relu", 2_000),
            ("aten::relu", 2_000),
            ("fresh", 700),
        ],
        5_000,
    );
    let csv = OMNIPROF.ok(diff(&base, &new, &["--format", "csv"]));
    let rows = rows(&csv);
    let names: Vec<(&str, &str)> = rows
        .iter()
        .map(|(n, c, _)| (n.as_str(), c.as_str()))
        .collect();
    // Self host + self device change: mm +2500 host +1000 device, relu +1000, gemm +1000
    // device, fresh +700, old -500.
    assert_eq!(
        names,
        [
            ("aten::mm", "both"),
            ("aten::relu", "both"),
            ("gemm", "both"),
            ("fresh", "new"),
            ("old", "vanished"),
        ],
        "{csv}"
    );
    // count base,new,delta,ratio; self cpu; cpu total; self device; device total (µs).
    assert_eq!(
        rows[0].2,
        [
            "1", "1", "0", "1.000000", "10.000", "12.500", "2.500", "1.250000", "10.000", "12.500",
            "2.500", "1.250000", "4.000", "5.000", "1.000", "1.250000", "4.000", "5.000", "1.000",
            "1.250000"
        ]
    );
    assert_eq!(
        rows[1].2[..8],
        ["1", "2", "1", "2.000000", "3.000", "4.000", "1.000", "1.333333"]
    );
    assert_eq!(
        rows[3].2[..8],
        ["0", "1", "1", "", "0.000", "0.700", "0.700", ""]
    );
    assert_eq!(
        rows[4].2[..8],
        ["1", "0", "-1", "0.000000", "0.500", "0.000", "-0.500", "0.000000"]
    );

    let table = OMNIPROF.ok(diff(&base, &new, &[]));
    let mm = table.lines().find(|l| l.starts_with("aten::mm")).unwrap();
    assert!(mm.contains("+2.500us") && mm.contains("1.25x"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("old") && l.contains("vanished")),
        "{table}"
    );
    let by_count = OMNIPROF.ok(diff(
        &base,
        &new,
        &["--format", "json", "--sort-by", "count", "--row-limit", "1"],
    ));
    let json: serde_json::Value = serde_json::from_str(&by_count).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 1);
    assert_eq!(json["rows"][0]["name"], "aten::relu");
    assert_eq!(json["rows"][0]["count"]["delta"], 1.0);
}

#[test]
fn identical_traces_give_all_zero_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let ops = [("aten::mm", 10_000), ("aten::relu", 3_000)];
    let a = save(dir.path(), "a.json", &ops, 4_000);
    let b = save(dir.path(), "b.json", &ops, 4_000);
    let csv = OMNIPROF.ok(diff(&a, &b, &["--format", "csv"]));
    let rows = rows(&csv);
    assert_eq!(rows.len(), 3);
    for (name, change, numbers) in rows {
        assert_eq!(change, "both", "{name}");
        for delta in numbers.iter().skip(2).step_by(4) {
            assert!(delta == "0" || delta == "0.000", "{name}: {csv}");
        }
    }
}

#[test]
fn traces_with_no_op_in_common_get_a_note_and_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let a = save(dir.path(), "a.json", &[("aten::mm", 1_000)], 0);
    let mut b = Trace::new(0, 10);
    b.activities
        .push(Activity::new(ActivityType::CpuOp, "other", 1, 1, 0, 5));
    let b_path = dir.path().join("b.json");
    omniprof_trace::save(&b, &b_path).unwrap();
    let out = OMNIPROF.run(diff(&a, &b_path, &[]));
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("have no ops in common"));
    let table = text(&out.stdout);
    assert!(
        table.contains("vanished") && table.contains("new"),
        "{table}"
    );
}

#[test]
fn an_unreadable_trace_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = save(dir.path(), "a.json", &[("aten::mm", 1_000)], 0);
    let cut = dir.path().join("cut.json");
    let text = std::fs::read(&a).unwrap();
    std::fs::write(&cut, &text[..text.len() - 40]).unwrap();
    let stderr = OMNIPROF.fails(1, diff(&a, &cut, &[]));
    assert!(
        stderr.contains("cut.json") && stderr.contains("(byte "),
        "{stderr}"
    );
}

#[test]
fn control_characters_in_a_name_print_escaped_and_the_table_stays_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "a\u{1b}]0;pwned\u{7}b\rc\nd";
    let base = save(
        dir.path(),
        "base.json",
        &[(hostile, 1_000), ("aten::mm", 2_000)],
        0,
    );
    let new = save(
        dir.path(),
        "new.json",
        &[(hostile, 3_000), ("aten::mm", 2_000)],
        0,
    );
    let table = OMNIPROF.ok(diff(&base, &new, &[]));
    assert!(!table.contains(['\u{1b}', '\u{7}', '\r']), "{table:?}");
    // Separator, header, separator, the rows (the two ops, `gemm`), separator: each as
    // wide as the others.
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 7, "{table}");
    assert!(
        lines[3].starts_with(r"a\u{1b}]0;pwned\u{7}b\u{d}c\u{a}d  "),
        "{table}"
    );
    assert!(lines[4].starts_with("aten::mm  "), "{table}");
    let width = lines[0].chars().count();
    assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
}
