//! Proves that `omniprof summary DIR` and `omniprof ranks DIR` read a job's traces as a user
//! runs them: four synthetic ranks of `scripts/gen_trace.py --rank` summed exactly over the
//! ranks (and per rank with `--by-rank`); a rank made slow named as the slowest; a
//! directory's other files named and skipped (one without traces, or `-` among files,
//! refused); traces claiming one rank read as its steps; a truncated rank read with
//! `--partial` and flagged, not summed in; JSON, gzip and Perfetto traces read alike; and the
//! time breakdown and communication overlap equal to Holistic Trace Analysis's on the same
//! traces.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use omniprof_test_support::cli::{text, Cli};
use omniprof_test_support::data::gen_trace;
use omniprof_test_support::skip::{self, Needs};

const STEPS: usize = 5;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// `args`, then `paths`, as a command's arguments.
fn with_paths<'a>(args: &[&'a str], paths: &[&'a Path]) -> Vec<&'a OsStr> {
    let args = args.iter().map(|a| OsStr::new(*a));
    args.chain(paths.iter().map(|p| p.as_os_str())).collect()
}

/// `gen_trace.py --rank` into `dir/rank<R>.json`; extra arguments after the rank's.
fn rank(dir: &Path, rank: u32, extra: &[&str]) -> PathBuf {
    let (r, steps) = (rank.to_string(), STEPS.to_string());
    let mut args = vec!["--ops", "2000", "--threads", "2", "--world-size", "4"];
    args.extend(["--rank", &r, "--steps", &steps]);
    args.extend(extra);
    gen_trace(&dir.join(format!("rank{rank}.json")), &args)
}

fn job(dir: &Path) -> Vec<PathBuf> {
    (0..4).map(|r| rank(dir, r, &[])).collect()
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).expect("JSON output")
}

fn row<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {doc}"))
}

#[test]
fn the_summary_of_a_directory_sums_every_rank_s_rows_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let files = job(dir.path());
    let args = ["summary", "--format", "json", "--row-limit", "-1"];
    let all = json(&OMNIPROF.ok(with_paths(&args, &[dir.path()])));
    let ranks: Vec<serde_json::Value> = files
        .iter()
        .map(|f| json(&OMNIPROF.ok(with_paths(&args, &[f]))))
        .collect();
    assert_eq!(row(&all, "ProfilerStep*")["count"], 4 * STEPS);
    assert_eq!(
        row(&all, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")["count"],
        4 * STEPS
    );
    for name in ["aten::addmm", "gemm_kernel", "cudaLaunchKernel"] {
        let count: u64 = ranks
            .iter()
            .map(|r| row(r, name)["count"].as_u64().unwrap())
            .sum();
        assert_eq!(row(&all, name)["count"], count, "{name}");
        // Exact nanoseconds summed, printed as microseconds with three decimals.
        let ns: i64 = ranks
            .iter()
            .map(|r| (row(r, name)["cpu_time_total_us"].as_f64().unwrap() * 1000.0).round() as i64)
            .sum();
        let got = (row(&all, name)["cpu_time_total_us"].as_f64().unwrap() * 1000.0).round() as i64;
        assert_eq!(got, ns, "{name}");
    }
    // Name order, whatever the traces' clocks.
    assert_in_name_order(&all["rows"]);
    // The same rows from the files given one by one.
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    assert_eq!(json(&OMNIPROF.ok(with_paths(&args, &paths))), all);
}

#[test]
fn by_rank_lists_each_rank_s_rows_under_its_rank() {
    let dir = tempfile::tempdir().unwrap();
    job(dir.path());
    let csv = OMNIPROF.ok(with_paths(
        &[
            "summary",
            "--by-rank",
            "--format",
            "csv",
            "--row-limit",
            "1",
            "--sort-by",
            "count",
        ],
        &[dir.path()],
    ));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines[0].starts_with("rank,name,count,"), "{csv}");
    for (r, line) in lines[1..].iter().enumerate() {
        assert!(line.starts_with(&format!("{r},cudaLaunchKernel,")), "{csv}");
    }
    let doc = json(&OMNIPROF.ok(with_paths(
        &["summary", "--by-rank", "--format", "json"],
        &[dir.path()],
    )));
    let ranks: Vec<u64> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
    // Each rank's rows in name order, as the job's.
    assert_in_name_order(&doc["ranks"][1]["summary"]["rows"]);
    assert_eq!(doc["ranks"][2]["partial"], false);
    assert!(doc["ranks"][2]["trace"]
        .as_str()
        .unwrap()
        .ends_with("rank2.json"));
}

#[test]
fn the_cross_rank_report_names_the_rank_made_slow() {
    let dir = tempfile::tempdir().unwrap();
    for r in [0, 1, 3] {
        rank(dir.path(), r, &[]);
    }
    rank(dir.path(), 2, &["--slow-steps", "1,3", "--slow-ms", "4"]);
    let report = OMNIPROF.ok(with_paths(&["ranks"], &[dir.path()]));
    assert!(
        report.contains("Slowest rank: rank 2 (slowest in "),
        "{report}"
    );
    let doc = json(&OMNIPROF.ok(with_paths(&["ranks", "--format", "json"], &[dir.path()])));
    assert_eq!(doc["straggler"]["rank"], 2);
    for step in [1, 3] {
        assert_eq!(doc["steps"][step]["slowest"], 2, "{doc}");
        let lag = doc["steps"][step]["lag_ns"].as_i64().unwrap();
        // The 4 ms stall, give or take the ranks' jitter.
        assert!(
            (3_500_000..4_500_000).contains(&lag),
            "step {step} lag {lag}"
        );
    }
}

#[test]
fn a_directory_s_other_files_are_named_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    job(dir.path());
    fs::write(dir.path().join("notes.txt"), "not a trace").unwrap();
    fs::create_dir(dir.path().join("logs")).unwrap();
    let out = OMNIPROF.run(with_paths(&["summary", "--format", "json"], &[dir.path()]));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for (name, why) in [("notes.txt", "not a trace"), ("logs", "not a regular file")] {
        let path = dir.path().join(name);
        assert!(
            stderr.contains(&format!("{}: skipped: {why}", path.display())),
            "{stderr}"
        );
    }
    assert_eq!(
        row(&json(&text(&out.stdout)), "ProfilerStep*")["count"],
        4 * STEPS
    );
}

#[test]
fn traces_claiming_one_rank_are_read_as_that_ranks_steps() {
    // A second cycle of rank 1, as a scheduled profiler writes it into the same directory:
    // its steps numbered on (ProfilerStep#100..).
    let dir = tempfile::tempdir().unwrap();
    let files = job(dir.path());
    let cycle = dir.path().join("rank1_cycle2.json");
    let first = fs::read_to_string(&files[1]).unwrap();
    fs::write(
        &cycle,
        first.replace("\"ProfilerStep#", "\"ProfilerStep#10"),
    )
    .unwrap();
    let note = format!(
        "note: rank 1 has 2 traces ({}, {}): read as that rank's steps",
        files[1].display(),
        cycle.display()
    );
    for command in ["summary", "ranks", "report"] {
        let page = dir.path().join("report.html");
        let mut args = vec![OsStr::new(command)];
        if command == "report" {
            args.extend([OsStr::new("-o"), page.as_os_str()]);
        } else {
            args.extend([OsStr::new("--format"), OsStr::new("json")]);
        }
        args.push(dir.path().as_os_str());
        let out = OMNIPROF.run(args);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{command}: {stderr}");
        assert!(stderr.contains(&note), "{command}: {stderr}");
    }
    let all = json(&OMNIPROF.ok(with_paths(&["summary", "--format", "json"], &[dir.path()])));
    assert_eq!(row(&all, "ProfilerStep*")["count"], 5 * STEPS);
    let ranks = json(&OMNIPROF.ok(with_paths(&["ranks", "--format", "json"], &[dir.path()])));
    let listed = ranks["ranks"].as_array().unwrap();
    assert_eq!(listed.len(), 4);
    assert_eq!(
        listed[1]["label"],
        format!("{} + {}", files[1].display(), cycle.display())
    );
    let steps: Vec<u64> = listed[1]["profile"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["number"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]);
    let args = ["summary", "--by-rank", "--format", "json"];
    let by_rank = json(&OMNIPROF.ok(with_paths(&args, &[dir.path()])));
    let rank1 = &by_rank["ranks"][1];
    assert_eq!(rank1["rank"], 1);
    assert_eq!(
        rank1["trace"],
        format!("{} + {}", files[1].display(), cycle.display())
    );
    assert_eq!(row(&rank1["summary"], "ProfilerStep*")["count"], 2 * STEPS);
    assert_eq!(by_rank["ranks"].as_array().unwrap().len(), 4);
}

#[test]
fn a_truncated_rank_is_read_in_part_flagged_and_not_summed_in() {
    let dir = tempfile::tempdir().unwrap();
    let files = job(dir.path());
    let whole = fs::read(&files[3]).unwrap();
    fs::write(&files[3], &whole[..whole.len() * 2 / 3]).unwrap();
    // Without --partial: the error, naming the file, and no report.
    let out = OMNIPROF.run(with_paths(&["ranks"], &[dir.path()]));
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("error: {}: line ", files[3].display())),
        "{stderr}"
    );
    // With it: rank 3 flagged, out of the step statistics.
    let out = OMNIPROF.run(with_paths(
        &["ranks", "--partial", "--format", "json"],
        &[dir.path()],
    ));
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["ranks"][3]["error"]
        .as_str()
        .unwrap()
        .contains("unexpected end of input"));
    assert_eq!(doc["ranks"][2]["error"], serde_json::Value::Null);
    assert_ne!(doc["straggler"]["rank"], 3);
    let out = OMNIPROF.run(with_paths(&["ranks", "--partial"], &[dir.path()]));
    let report = text(&out.stdout);
    assert!(report.contains("rank 3 (partial)"), "{report}");
    assert!(
        report.contains(&format!("rank 3: {} PARTIAL", files[3].display())),
        "{report}"
    );
    // The summary: three ranks summed, the fourth named.
    let out = OMNIPROF.run(with_paths(
        &["summary", "--partial", "--format", "json"],
        &[dir.path()],
    ));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("rank 3 (") && stderr.contains("read only in part"),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row(&doc, "ProfilerStep*")["count"], 3 * STEPS);
}

/// HTA's temporal breakdown and communication overlap of the same four ranks, with the last
/// step included (HTA leaves it out by default; `docs/ranks.md` says why the report does
/// not). CI installs HTA, sets `OMNIPROF_HTA_PYTHON` and requires every check.
#[test]
fn the_time_breakdown_and_overlap_equal_holistic_trace_analysis_s() {
    let Ok(python) = std::env::var("OMNIPROF_HTA_PYTHON") else {
        return skip::skip(
            "HTA comparison",
            Needs::Hta,
            "OMNIPROF_HTA_PYTHON is not set (bash .ci/run installs HTA and sets it)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    job(dir.path());
    let script = r#"
import json, sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
t = a.get_temporal_breakdown(visualize=False).set_index("rank")
o = a.get_comm_comp_overlap(visualize=False).set_index("rank")
rows = {int(r): [float(t.loc[r, c]) for c in ("idle_time(us)", "compute_time(us)",
        "non_compute_time(us)", "kernel_time(us)", "idle_time_pctg", "compute_time_pctg")]
        + [float(o.loc[r, "comp_comm_overlap_pctg"])] for r in t.index}
print(json.dumps(rows))
"#;
    let out = Command::new(&python)
        .args(["-c", script])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "HTA failed: {}", text(&out.stderr));
    let hta: serde_json::Value =
        serde_json::from_str(text(&out.stdout).lines().last().unwrap()).unwrap();
    let doc = json(&OMNIPROF.ok(with_paths(&["ranks", "--format", "json"], &[dir.path()])));
    for r in 0..4 {
        let b = &doc["ranks"][r]["profile"]["breakdown"];
        let us = |key: &str| b[key].as_f64().unwrap() / 1000.0;
        let pct = |key: &str| (10_000.0 * us(key) / us("span_ns")).round() / 100.0;
        let overlap = (10_000.0 * us("overlap_ns") / us("communication_ns")).round() / 100.0;
        let ours = [
            us("idle_ns"),
            us("computation_ns"),
            us("non_computation_ns"),
            us("span_ns"),
            pct("idle_ns"),
            pct("computation_ns"),
            overlap,
        ];
        let theirs: Vec<f64> = hta[r.to_string()]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(ours.to_vec(), theirs, "rank {r}");
    }
}

#[test]
fn a_directory_without_traces_and_standard_input_among_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "not a trace").unwrap();
    for command in ["summary", "ranks"] {
        let stderr = OMNIPROF.fails(2, with_paths(&[command], &[dir.path()]));
        assert!(
            stderr.contains(&format!(
                "error: {}: no trace in the directory (no file ending in .json, .json.gz or .pftrace)",
                dir.path().display()
            )),
            "{command}: {stderr}"
        );
    }
    let trace = rank(dir.path(), 0, &[]);
    let stderr = OMNIPROF.fails(2, with_paths(&["summary", "-"], &[&trace]));
    assert!(
        stderr.contains("error: `-` (standard input) reads one trace, alone"),
        "{stderr}"
    );
}

#[test]
fn a_job_of_json_gzip_and_perfetto_traces_reads_as_its_json_traces() {
    let json_dir = tempfile::tempdir().unwrap();
    let files = job(json_dir.path());
    let mixed = tempfile::tempdir().unwrap();
    for (file, name) in files
        .iter()
        .zip(["rank0.json", "rank1.json.gz", "rank2.pftrace"])
    {
        OMNIPROF.ok(with_paths(
            &["convert"],
            &[file, Path::new("-o"), &mixed.path().join(name)],
        ));
    }
    fs::copy(&files[3], mixed.path().join("rank3.json")).unwrap();
    let args = ["summary", "--format", "json", "--row-limit", "-1"];
    assert_eq!(
        json(&OMNIPROF.ok(with_paths(&args, &[mixed.path()]))),
        json(&OMNIPROF.ok(with_paths(&args, &[json_dir.path()])))
    );
    let report = |dir: &Path| {
        let mut doc = json(&OMNIPROF.ok(with_paths(&["ranks", "--format", "json"], &[dir])));
        // All but the file names, and the base time, which a Perfetto trace does not
        // carry (its times are absolute: the figures are the same).
        for r in doc["ranks"].as_array_mut().unwrap() {
            r["label"] = serde_json::Value::Null;
            r["profile"]["base_time_ns"] = serde_json::Value::Null;
        }
        doc
    };
    assert_eq!(report(mixed.path()), report(json_dir.path()));
}

/// Asserts that summary rows (a JSON array) come in name order.
fn assert_in_name_order(rows: &serde_json::Value) {
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}
