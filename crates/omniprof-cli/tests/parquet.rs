//! `omniprof convert … --format parquet` from the command line: directories of traces, ranks
//! from `distributedInfo` or the traces' places, and bad input (files that are not traces,
//! two traces of one rank, a truncated trace, a directory that is not empty, a file given
//! as the directory, another user's link in a sticky directory). The tables'
//! contents are checked in crates/omniprof-parquet/tests/tables.rs.

use omniprof_test_support::cli::{text, Cli};
use omniprof_test_support::data::two_op_trace as trace;

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

#[test]
fn two_traces_of_one_rank_fail_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), trace(Some(2))).unwrap();
    std::fs::write(dir.path().join("b.json"), trace(Some(2))).unwrap();
    let out = OMNIPROF.current_dir(dir.path()).run([
        "convert", "a.json", "b.json", "-o", "t", "--format", "parquet",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: a.json and b.json both claim rank 2\n"
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
