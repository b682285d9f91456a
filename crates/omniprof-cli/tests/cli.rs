//! Proves the `omniprof` binary works end to end as a user runs it: `demo` writes a trace
//! (plain or gzip by suffix) that Perfetto loads and omniprof reads back with the nested steps
//! of a training loop on four threads, and fails with a message naming an unwritable path;
//! `demo --schedule` writes one readable trace per cycle into its directory holding that
//! cycle's active steps, and refuses a bad schedule with exit 2 naming it; `config check`
//! accepts a valid config, rejects a bad one with exit 2 naming the line, key and value, and
//! resolves activity classes in `--json`; `--help` lists the commands.

use std::path::Path;

use omniprof_read::TraceReader;
use omniprof_test_support::checker;
use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_trace::{Activity, Trace};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// Runs the demo into `path` and asserts it succeeded and said so.
fn demo(path: &Path) -> String {
    let out = OMNIPROF.run(["demo", "-o", path.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "demo failed: {stderr}");
    assert!(stdout.contains(&path.display().to_string()), "{stdout}");
    assert!(stdout.contains("ui.perfetto.dev"), "{stdout}");
    assert!(path.is_file(), "{} was not written", path.display());
    stdout
}

/// `a` lies within `b` on the same row.
fn within(a: &Activity, b: &Activity) -> bool {
    a.device == b.device
        && a.resource == b.resource
        && b.start_ns <= a.start_ns
        && a.end_ns <= b.end_ns
}

fn named(trace: &Trace, pred: impl Fn(&str) -> bool) -> Vec<&Activity> {
    trace.activities.iter().filter(|a| pred(&a.name)).collect()
}

#[test]
fn demo_writes_a_trace_that_perfetto_loads_and_omniprof_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.pt.trace.json");
    let stdout = demo(&path);

    // `wrote <path> (<n> trace events, ...)`: the count is what the file holds.
    let events: u64 = stdout
        .split_once(" (")
        .and_then(|(_, rest)| rest.split_once(" trace events"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count in {stdout:?}"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["traceEvents"].as_array().unwrap().len() as u64, events);

    let trace = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert!(
        trace.activities.len() >= 3000,
        "{} activities",
        trace.activities.len()
    );
    // Four host threads, and the two OpenReg streams they share.
    let host_pid = trace
        .processes
        .iter()
        .find(|p| p.label == "CPU")
        .unwrap()
        .pid;
    let (host, device): (Vec<_>, Vec<_>) = trace.threads.iter().partition(|t| t.pid == host_pid);
    assert_eq!(host.len(), 4, "{:#?}", trace.threads);
    assert_eq!(device.len(), 2, "{:#?}", trace.threads);
    for row in host {
        assert!(row.name.contains("(worker-"), "{row:?}");
        let on_row = |a: &&Activity| a.resource == row.tid;
        let steps: Vec<_> = named(&trace, |n| n.starts_with("ProfilerStep#"))
            .into_iter()
            .filter(on_row)
            .collect();
        assert_eq!(steps.len(), 40, "ProfilerStep ranges on {}", row.name);
        let forwards = named(&trace, |n| n == "forward");
        let mms = named(&trace, |n| n == "aten::mm");
        for step in steps {
            let forward: Vec<_> = forwards.iter().filter(|f| within(f, step)).collect();
            assert_eq!(forward.len(), 1, "one forward in {}", step.name);
            let mm = mms.iter().filter(|m| within(m, forward[0])).count();
            assert_eq!(mm, 3, "aten::mm in the forward of {}", step.name);
        }
    }

    if let Some(report) = checker::assert_loads_in_perfetto(&path) {
        assert!(
            report.slices.unwrap() >= trace.activities.len() as u64,
            "{}",
            report.line
        );
    }
}

#[test]
fn demo_writes_gzip_for_a_gz_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json.gz");
    demo(&path);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip magic bytes");
    let trace = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert!(trace.activities.len() >= 3000);
    checker::assert_loads_in_perfetto(&path);
}

#[test]
fn demo_into_a_missing_directory_fails_naming_the_path() {
    let out = OMNIPROF.run(["demo", "-o", "/nonexistent/dir/x.json"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "demo succeeded: {stdout}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("/nonexistent/dir/x.json"),
        "{stderr}"
    );
    assert!(!stdout.contains("wrote"), "{stdout}");
    assert!(!Path::new("/nonexistent/dir/x.json.tmp").exists());
}

#[test]
fn config_check_accepts_a_valid_config_from_stdin() {
    let out = OMNIPROF.run_with_stdin(["config", "check"], "# kineto config\nACTIVITIES_ENABLED=true\nACTIVITY_TYPES=cpu_op,user_annotation\nACTIVITIES_DURATION_MSECS=500\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "ok: <stdin>\n");
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn config_check_rejects_an_unknown_activity_type_with_exit_2() {
    let out = OMNIPROF.run_with_stdin(["config", "check"], "ACTIVITY_TYPES=memcopy\n");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: <stdin>:1: ACTIVITY_TYPES: invalid activity type \"memcopy\"\n"
    );
    assert_eq!(text(&out.stdout), "");

    // From a file, the message names the file and the line.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kineto.conf");
    std::fs::write(
        &file,
        "ACTIVITIES_ENABLED=true\nACTIVITY_TYPES=cpu_op,memcopy\n",
    )
    .unwrap();
    let out = OMNIPROF.run(["config", "check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}:2: ACTIVITY_TYPES: invalid activity type \"memcopy\"\n",
            file.display()
        )
    );
}

#[test]
fn config_check_json_resolves_the_runtime_class() {
    let out = OMNIPROF.run_with_stdin(["config", "check", "--json"], "ACTIVITY_TYPES=runtime\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let enabled: Vec<&str> = json["enabled"]
        .as_array()
        .unwrap_or_else(|| panic!("no `enabled` list: {json}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // `runtime` stands for its whole class, in type order.
    assert_eq!(
        enabled,
        [
            "cuda_runtime",
            "mtia_runtime",
            "glow_runtime",
            "hpu_op",
            "xpu_runtime",
            "privateuse1_runtime"
        ]
    );
    assert_eq!(json["activity_types"], serde_json::json!(["cuda_runtime"]));
}

#[test]
fn help_lists_the_commands() {
    let out = OMNIPROF.run(["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for command in ["demo", "config"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(command)),
            "{command} missing from --help:\n{help}"
        );
    }
}

#[test]
fn demo_on_a_schedule_writes_one_trace_per_cycle_into_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let out = OMNIPROF.run([
        "demo",
        "--schedule",
        "1,1,2,2",
        "--trace-dir",
        traces.to_str().unwrap(),
        "--steps",
        "10",
        "--threads",
        "2",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "demo failed: {stderr}");
    let printed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .collect();
    let mut listed: Vec<_> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    listed.sort();
    assert_eq!(printed, listed, "{stdout}");
    let expected = [
        ["ProfilerStep#2", "ProfilerStep#3"],
        ["ProfilerStep#6", "ProfilerStep#7"],
    ];
    assert_eq!(printed.len(), expected.len());
    for (path, steps) in printed.iter().zip(expected) {
        assert!(path.ends_with(".pt.trace.json"), "{path}");
        let t = TraceReader::new().read_path(path).into_trace().unwrap();
        // The main thread's step ranges, each spanning every worker's iteration.
        let ranges = named(&t, |n| n.starts_with("ProfilerStep#"));
        let host: Vec<_> = ranges
            .iter()
            .filter(|a| a.kind == omniprof_trace::ActivityType::UserAnnotation)
            .map(|a| &*a.name)
            .collect();
        assert_eq!(host, steps, "{path}");
        let forwards = named(&t, |n| n == "forward");
        assert_eq!(
            forwards.len(),
            2 * 2,
            "two workers, two active steps: {path}"
        );
        assert!(t.activities.iter().any(|a| a.kind.is_device()), "{path}");
        assert_eq!(t.health.out_of_window_events, Some(0));
        checker::assert_loads_in_perfetto(Path::new(path));
    }
}

#[test]
fn demo_refuses_a_bad_schedule_with_exit_2_naming_it() {
    for (bad, why) in [
        ("1,x,2", "integers"),
        ("1,1", "3 or 4 numbers"),
        ("0,1,0", "active=0"),
        ("-1,1,1,1", "wait=-1"),
    ] {
        let out = OMNIPROF.run(["demo", "--schedule", bad, "--trace-dir", "unused"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains(&format!("'{bad}'")), "{stderr}");
        assert!(stderr.contains(why), "{bad}: {stderr}");
    }
}

#[test]
fn impossible_counts_are_refused_and_dash_means_standard_output_and_input() {
    for args in [
        &["demo", "--threads", "0"][..],
        &["demo", "--steps", "0"],
        &["summary", "-", "--row-limit", "-5"],
    ] {
        let out = OMNIPROF.run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let (option, value) = (args[args.len() - 2], args[args.len() - 1]);
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '{option}")),
            "{args:?}: {stderr}"
        );
    }

    // `-o -`: the trace is standard output; nothing named `-` appears.
    let dir = tempfile::tempdir().unwrap();
    let out =
        OMNIPROF
            .current_dir(dir.path())
            .run(["demo", "--threads", "1", "--steps", "2", "-o", "-"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!dir.path().join("-").exists(), "a file named -");
    assert!(stderr.contains("wrote standard output"), "{stderr}");
    let trace = text(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(&trace).expect("the trace on stdout");
    assert!(!doc["traceEvents"].as_array().unwrap().is_empty());

    // `summary -` reads it back from standard input; -1 prints every row.
    let all = OMNIPROF.run_with_stdin(
        ["summary", "-", "--row-limit", "-1", "--format", "csv"],
        &trace,
    );
    assert!(all.status.success(), "{}", text(&all.stderr));
    let two = OMNIPROF.run_with_stdin(
        ["summary", "-", "--row-limit", "2", "--format", "csv"],
        &trace,
    );
    assert_eq!(text(&two.stdout).lines().count(), 3, "header and 2 rows");
    assert!(text(&all.stdout).lines().count() > 3);
}

#[test]
fn output_paths_are_checked_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let as_dir = dir.path().to_str().unwrap();
    let out = OMNIPROF.run(["demo", "-o", as_dir]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot write {as_dir}: it is a directory")),
        "{stderr}"
    );
    assert!(!stderr.contains("rename"), "{stderr}");
    assert!(
        text(&out.stdout).is_empty(),
        "nothing ran: {}",
        text(&out.stdout)
    );

    let plugin = omniprof_test_support::plugins::build_broken("twin_profilers", dir.path());
    let out = OMNIPROF.run([
        "plugins",
        "check",
        plugin.to_str().unwrap(),
        "--trace",
        "/proc/x.json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot write /proc/x.json"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !text(&out.stdout).contains("PASS"),
        "no table before the failure"
    );
}

#[test]
fn an_unreadable_rank_is_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank.json");
    let out = OMNIPROF.env("RANK", "abc").run([
        "demo",
        "--threads",
        "1",
        "--steps",
        "1",
        "-o",
        arg(&path),
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("RANK=\"abc\" is not a non-negative integer"),
        "{stderr}"
    );
}

#[test]
fn config_keys_take_effect_or_are_reported_as_not_supported() {
    let out = OMNIPROF.run_with_stdin(
        ["config", "check"],
        "ENABLE_IPC_FABRIC=1\nREQUEST_GROUP_TRACE_ID=g\nACTIVITY_TYPES=cpu_op\n",
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for (line, key) in [(1, "ENABLE_IPC_FABRIC"), (2, "REQUEST_GROUP_TRACE_ID")] {
        let want = format!("<stdin>:{line}: {key}: accepted, not supported by omniprof");
        assert_eq!(stderr.matches(&want).count(), 1, "{want} in {stderr}");
    }

    // The demo's session: the log file is the output, the duration how long it records,
    // and the unsupported key is named once when the session starts.
    let dir = tempfile::tempdir().unwrap();
    let trace_path = dir.path().join("from_config.json");
    let config = dir.path().join("kineto.conf");
    std::fs::write(
        &config,
        format!(
            "ACTIVITIES_LOG_FILE={}\nACTIVITIES_DURATION_MSECS=300\nENABLE_IPC_FABRIC=1\n",
            trace_path.display()
        ),
    )
    .unwrap();
    let args = [
        "demo",
        "--threads",
        "1",
        "--config",
        config.to_str().unwrap(),
    ];
    let out = OMNIPROF.run(args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("config keys accepted, not supported by omniprof: ENABLE_IPC_FABRIC")
            .count(),
        1,
        "{stderr}"
    );
    let trace = TraceReader::new()
        .read_path(&trace_path)
        .into_trace()
        .unwrap();
    let span_ms = (trace.window.end_ns - trace.window.start_ns) / 1_000_000;
    assert!(span_ms >= 300, "recorded for {span_ms} ms");

    std::fs::write(&config, "ACTIVITIES_DURATION_MSECS=soon\n").unwrap();
    let out = OMNIPROF.run(args);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("line 1: ACTIVITIES_DURATION_MSECS"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_rust_guide_shows_what_config_check_prints_for_activity_types() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/rust.md"))
            .unwrap();
    let shown = readme
        .split("`\"activity_types\": ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("docs/rust.md shows an activity_types line");
    let shown: serde_json::Value = serde_json::from_str(shown).unwrap();
    assert!(readme.contains("echo 'ACTIVITY_TYPES=runtime,kernel' | omniprof config check --json"));
    let out = OMNIPROF.run_with_stdin(
        ["config", "check", "--json"],
        "ACTIVITY_TYPES=runtime,kernel\n",
    );
    let json: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(json["activity_types"], shown);
    // A vendor's name gates its class as the generic one does; integers are not names.
    let out = OMNIPROF.run_with_stdin(
        ["config", "check", "--json"],
        "ACTIVITY_TYPES=cuda_runtime\n",
    );
    let json: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert!(json["enabled"]
        .as_array()
        .unwrap()
        .contains(&"privateuse1_runtime".into()));
    let out = OMNIPROF.run_with_stdin(["config", "check"], "ACTIVITY_TYPES=7\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid activity type \"7\""),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_output_extension_that_names_no_format_is_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.txt");
    let out = OMNIPROF.run(["demo", "-o", path.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("must end in one of: .json, .json.gz, .pftrace"),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty(), "nothing ran");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A file of PyTorch's reference data (`crates/test-support/data`).
fn pytorch_data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../test-support/data")
        .join(name)
}

#[test]
fn summary_prints_pytorchs_memory_and_flops_columns_sorted_by_flops() {
    let trace = pytorch_data("pytorch-2.15-cpu-memory-trace.json");
    let table = OMNIPROF.ok(["summary", arg(&trace), "--sort-by", "flops"]);
    let expected =
        std::fs::read_to_string(pytorch_data("pytorch-2.15-cpu-memory-table-flops.txt")).unwrap();
    assert_eq!(table, expected);
    let csv = OMNIPROF.ok([
        "summary",
        trace.to_str().unwrap(),
        "--sort-by",
        "self_cuda_memory_usage",
        "--format",
        "csv",
        "--row-limit",
        "1",
    ]);
    assert!(
        csv.ends_with(
            ",self_device_memory_usage,flops\naten::randn,4,31.055,117.586,29.397,0.000,0.000,0.000,false,false,65536,0,0,0,0\n"
        ),
        "{csv}"
    );
}
