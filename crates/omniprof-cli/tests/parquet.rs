//! `omniprof convert … --format parquet` from the command line: directories of traces, ranks
//! from `distributedInfo` or the traces' places, several traces of one rank as its parts,
//! and bad input (files that are not traces, a truncated trace, a directory that is not empty, a file given
//! as the directory, another user's link in a sticky directory). The tables'
//! contents are checked in crates/omniprof-parquet/tests/tables.rs.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use omniprof_test_support::cli::{text, Cli};
use omniprof_test_support::data::two_op_trace as trace;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

#[test]
fn a_directory_mixing_traces_and_other_files_converts_the_traces_and_names_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("logs")).unwrap();
    std::fs::write(run.join("rank0.pt.trace.json"), trace(Some(0))).unwrap();
    std::fs::write(run.join("rank1.pt.trace.json"), trace(Some(1))).unwrap();
    std::fs::write(run.join("notes.txt"), "not a trace").unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "run", "-o", "tables", "--format", "parquet"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr,
        "warning: run/logs: skipped: not a regular file (a directory)\n\
         warning: run/notes.txt: skipped: not a trace (a trace's name ends in .json, .json.gz or \
         .pftrace)\n"
    );
    assert_eq!(
        text(&out.stdout),
        "wrote rank 0 of run/rank0.pt.trace.json (2 events): 2 slices, 0 instants, 0 counters, \
         0 flows, 3 metadata, 0 device_properties, 2 ops\n\
         wrote rank 1 of run/rank1.pt.trace.json (2 events): 2 slices, 0 instants, 0 counters, \
         0 flows, 3 metadata, 0 device_properties, 2 ops\n\
         tables in tables\n"
    );
    for table in ["slices", "ops", "metadata", "flows"] {
        for rank in [0, 1] {
            let file = dir
                .path()
                .join(format!("tables/{table}/rank={rank}/part-0.parquet"));
            assert!(file.is_file(), "{}", file.display());
        }
    }
}

#[test]
fn a_trace_without_a_rank_takes_its_place_among_the_inputs_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), trace(Some(5))).unwrap();
    std::fs::write(dir.path().join("b.json"), trace(None)).unwrap();
    let out = OMNIPROF.current_dir(dir.path()).run([
        "convert", "a.json", "b.json", "-o", "t", "--format", "parquet",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "warning: b.json: no distributedInfo.rank; its rows are rank 1, its place among the \
         traces\n"
    );
    assert!(dir.path().join("t/slices/rank=5/part-0.parquet").is_file());
    assert!(dir.path().join("t/slices/rank=1/part-0.parquet").is_file());
}

#[test]
fn a_trace_without_a_rank_never_clashes_with_a_rank_a_trace_claims() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    // a.json comes first, and its place, 0, is the rank b.json claims.
    std::fs::write(run.join("a.json"), trace(None)).unwrap();
    std::fs::write(run.join("b.json"), trace(Some(0))).unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "run", "-o", "t", "--format", "parquet"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr,
        "warning: run/a.json: no distributedInfo.rank; its rows are rank 1, the first number \
         no trace claims (its place among the traces, 0, is claimed)\n"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("wrote rank 1 of run/a.json ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nwrote rank 0 of run/b.json ("),
        "{stdout}"
    );
    for rank in [0, 1] {
        let part = format!("t/slices/rank={rank}/part-0.parquet");
        assert!(dir.path().join(part).is_file(), "rank {rank}");
    }
    // As summary reads the same directory.
    let summary = OMNIPROF.current_dir(dir.path()).run(["summary", "run"]);
    assert!(summary.status.success(), "{}", text(&summary.stderr));
}

type Row = BTreeMap<String, Field>;

/// The rows of every part file of one table's rank, in part order.
fn rank_rows(tables: &Path, table: &str, rank: i64) -> Vec<Row> {
    let dir = tables.join(format!("{table}/rank={rank}"));
    let parts = std::fs::read_dir(&dir).unwrap().count();
    (0..parts)
        .flat_map(|k| {
            let file = File::open(dir.join(format!("part-{k}.parquet"))).unwrap();
            let reader = SerializedFileReader::new(file).unwrap();
            let rows: Vec<Row> = reader
                .get_row_iter(None)
                .unwrap()
                .map(|row| {
                    let row = row.unwrap();
                    row.get_column_iter()
                        .map(|(name, field)| (name.clone(), field.clone()))
                        .collect()
                })
                .collect();
            rows
        })
        .collect()
}

/// `slices JOIN ops USING (rank, op_id)` and each op's parent through `parent_op_id`, as
/// (slice, op, parent op) names, sorted; every slice with an op id matches one op.
fn slices_with_their_ops(tables: &Path, rank: i64) -> Vec<(String, String, Option<String>)> {
    let long = |row: &Row, column: &str| match &row[column] {
        Field::Long(v) => Some(*v),
        Field::Null => None,
        other => panic!("{column}: {other:?}"),
    };
    let name = |row: &Row| match &row["name"] {
        Field::Str(s) => s.clone(),
        other => panic!("name: {other:?}"),
    };
    let ops = rank_rows(tables, "ops", rank);
    let op = |id: i64| {
        let matches: Vec<&Row> = ops
            .iter()
            .filter(|o| long(o, "op_id") == Some(id))
            .collect();
        assert_eq!(matches.len(), 1, "op_id {id}");
        matches[0]
    };
    let mut joined: Vec<_> = rank_rows(tables, "slices", rank)
        .iter()
        .filter_map(|s| long(s, "op_id").map(|id| (s, op(id))))
        .map(|(s, o)| {
            (
                name(s),
                name(o),
                long(o, "parent_op_id").map(|p| name(op(p))),
            )
        })
        .collect();
    joined.sort();
    joined
}

/// A second trace of rank 0: an op with a child, and another.
const RANK0_AGAIN: &str = r#"{"distributedInfo": {"rank": 0}, "traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 100, "dur": 40},
{"ph": "X", "cat": "cpu_op", "name": "aten::convolution", "pid": 1, "tid": 1, "ts": 105, "dur": 30},
{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 150, "dur": 7}
]}"#;

#[test]
fn two_traces_of_one_rank_are_its_two_parts_and_join_as_each_alone() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    // One rank's two profiling cycles, as `tensorboard_trace_handler` names them, and a
    // second rank.
    std::fs::write(run.join("a.json"), trace(Some(0))).unwrap();
    std::fs::write(run.join("b.json"), RANK0_AGAIN).unwrap();
    std::fs::write(run.join("c.json"), trace(Some(1))).unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "run", "-o", "t", "--format", "parquet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "note: rank 0 has 2 traces (run/a.json, run/b.json): read as that rank's steps\n"
    );
    assert_eq!(
        text(&out.stdout),
        "wrote rank 0 of run/a.json (2 events): 2 slices, 0 instants, 0 counters, 0 flows, \
         3 metadata, 0 device_properties, 2 ops\n\
         wrote rank 0 of run/b.json (3 events): 3 slices, 0 instants, 0 counters, 0 flows, \
         3 metadata, 0 device_properties, 3 ops\n\
         wrote rank 1 of run/c.json (2 events): 2 slices, 0 instants, 0 counters, 0 flows, \
         3 metadata, 0 device_properties, 2 ops\n\
         tables in t\n"
    );
    let t = dir.path().join("t");
    for table in ["slices", "ops", "metadata"] {
        let mut files: Vec<String> = ["rank=0", "rank=1"]
            .iter()
            .flat_map(|rank| std::fs::read_dir(t.join(table).join(rank)).unwrap())
            .map(|e| {
                let e = e.unwrap().path();
                e.strip_prefix(t.join(table)).unwrap().display().to_string()
            })
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "rank=0/part-0.parquet",
                "rank=0/part-1.parquet",
                "rank=1/part-0.parquet"
            ]
        );
    }
    // A rank's rows are its traces' together.
    for (table, rank0, rank1) in [("slices", 5, 2), ("ops", 5, 2), ("metadata", 6, 3)] {
        assert_eq!(rank_rows(&t, table, 0).len(), rank0, "{table}");
        assert_eq!(rank_rows(&t, table, 1).len(), rank1, "{table}");
    }
    // The join across tables gives what it gives over each trace alone.
    let mut alone = Vec::new();
    for name in ["a", "b"] {
        let out = OMNIPROF.current_dir(dir.path()).run([
            "convert",
            &format!("run/{name}.json"),
            "-o",
            &format!("{name}-alone"),
            "--format",
            "parquet",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        alone.extend(slices_with_their_ops(
            &dir.path().join(format!("{name}-alone")),
            0,
        ));
    }
    alone.sort();
    let joined = slices_with_their_ops(&t, 0);
    assert_eq!(joined, alone);
    assert_eq!(
        joined,
        [
            ("aten::addmm", "aten::addmm", Some("aten::linear")),
            ("aten::conv2d", "aten::conv2d", None),
            (
                "aten::convolution",
                "aten::convolution",
                Some("aten::conv2d")
            ),
            ("aten::linear", "aten::linear", None),
            ("aten::relu", "aten::relu", None),
        ]
        .map(|(s, o, p)| (s.to_owned(), o.to_owned(), p.map(str::to_owned)))
    );
}

#[test]
fn a_truncated_trace_fails_and_with_partial_gives_the_rows_before_its_cut() {
    let dir = tempfile::tempdir().unwrap();
    let whole = trace(Some(0));
    let cut = &whole[..whole.find("aten::addmm").unwrap()];
    std::fs::write(dir.path().join("cut.json"), cut).unwrap();

    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "cut.json", "-o", "t", "--format", "parquet"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: cut.json"), "{stderr}");
    assert!(!dir.path().join("t/slices/rank=0").exists());

    let out = OMNIPROF.current_dir(dir.path()).run([
        "convert",
        "cut.json",
        "-o",
        "p",
        "--format",
        "parquet",
        "--partial",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("warning: cut.json"), "{stderr}");
    assert!(
        stderr.contains("converted what was read before it (--partial)"),
        "{stderr}"
    );
    assert!(
        text(&out.stdout).starts_with("wrote rank 0 of cut.json (cut short): 1 slices,"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_directory_that_holds_files_is_not_written_into() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), trace(Some(0))).unwrap();
    std::fs::create_dir(dir.path().join("t")).unwrap();
    std::fs::write(dir.path().join("t/old.parquet"), "").unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "a.json", "-o", "t", "--format", "parquet"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: t: not empty; omniprof writes its tables into a new or empty directory\n"
    );
}

#[test]
fn a_regular_file_given_as_the_directory_is_refused_naming_it_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), trace(Some(0))).unwrap();
    std::fs::write(dir.path().join("t"), "kept").unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "a.json", "-o", "t", "--format", "parquet"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: cannot write tables into t: it is a regular file, not a directory\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("t")).unwrap(),
        "kept"
    );
}

#[cfg(unix)]
#[test]
fn another_users_link_at_the_directory_in_a_sticky_directory_is_refused_and_nothing_written() {
    use omniprof_test_support::shared_dirs::{give_to, make_sticky, other_owner};
    let Some(other) = other_owner("parquet tables into another user's link") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.json");
    std::fs::write(&input, trace(Some(0))).unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    give_to(&theirs, other);
    let shared = tempfile::tempdir().unwrap();
    make_sticky(shared.path());
    let out_dir = shared.path().join("out");
    std::os::unix::fs::symlink(&theirs, &out_dir).unwrap();
    give_to(&out_dir, other);

    let out = OMNIPROF.run([
        "convert",
        input.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
        "--format",
        "parquet",
    ]);

    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: cannot write tables into {out}: {out} is a symbolic link of uid {other} in \
             the sticky world-writable directory {shared} (owned by uid 0), and this process \
             runs as uid 0: it is not followed, as the kernel's fs.protected_symlinks would \
             refuse; remove it or save elsewhere\n",
            out = out_dir.display(),
            shared = shared.path().display()
        )
    );
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
}

#[cfg(unix)]
#[test]
fn another_users_directory_in_a_sticky_directory_is_refused_and_nothing_written() {
    use omniprof_test_support::shared_dirs::{give_to, make_sticky, other_owner};
    let Some(other) = other_owner("parquet tables into another user's directory") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.json");
    std::fs::write(&input, trace(Some(0))).unwrap();
    let shared = tempfile::tempdir().unwrap();
    make_sticky(shared.path());
    // Empty, as the tables need, and its owner's to fill with links once they are named.
    let out_dir = shared.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    give_to(&out_dir, other);

    let out = OMNIPROF.run([
        "convert",
        input.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
        "--format",
        "parquet",
    ]);

    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: cannot write tables into {out}: {out} is a directory of uid {other} in \
             the sticky world-writable directory {shared} (owned by uid 0), and this process \
             runs as uid 0: its owner could swap what is written into it for links; remove \
             it or save elsewhere\n",
            out = out_dir.display(),
            shared = shared.path().display()
        )
    );
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 0);

    // The same directory given to the sticky directory's owner is taken.
    give_to(&out_dir, 0);
    let out = OMNIPROF.run([
        "convert",
        input.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
        "--format",
        "parquet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::read_dir(&out_dir).unwrap().count() > 0);
}

#[test]
fn convert_without_parquet_takes_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), trace(Some(0))).unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "a.json", "a.json", "-o", "x.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: convert takes one trace, except with --format parquet\n"
    );
}

#[test]
fn a_trace_with_counters_converts_with_a_row_per_counter_value() {
    let dir = tempfile::tempdir().unwrap();
    let events = r#"{"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 10},
{"ph": "C", "cat": "gpu_pm_counter", "name": "PM", "pid": 0, "tid": 0, "ts": 2, "args": {"used": 5, "free": 7.5}},
{"ph": "C", "cat": "gpu_pm_counter", "name": "PM", "pid": 0, "tid": 0, "ts": 4, "args": {"used": 6, "free": 6.5}}
]}"#;
    std::fs::write(dir.path().join("t.json"), events).unwrap();
    let out = OMNIPROF
        .current_dir(dir.path())
        .run(["convert", "t.json", "-o", "tables", "--format", "parquet"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "wrote rank 0 of t.json (3 events): 1 slices, 0 instants, 4 counters, 0 flows, \
         2 metadata, 0 device_properties, 1 ops\n\
         tables in tables\n"
    );
}
