//! The CLI with dynamic plugins: the demo picks up the sample plugin from
//! `KINETO_PLUGIN_LIB_DIR_PATH` and its events (pushed correlations included) are in the
//! trace; `plugins list` and `plugins check` report what a vendor needs, `check` fails on a
//! broken plugin, and leaves OpenReg out unless asked, so a plugin's device 0 keeps its row.

use std::path::Path;

use omniprof_read::TraceReader;
use omniprof_test_support::checker;
use omniprof_test_support::cli::{text, Cli};
use omniprof_test_support::plugins::{build_broken, build_sample, build_sample_on_device};

/// `omniprof` loading the plugins in `plugin_dir`, and none of the user's.
fn omniprof(plugin_dir: Option<&Path>) -> Cli {
    let cli = Cli::new(env!("CARGO_BIN_EXE_omniprof")).env_remove("OMNIPROF_PLUGIN_DIR");
    match plugin_dir {
        Some(dir) => cli.env("KINETO_PLUGIN_LIB_DIR_PATH", dir),
        None => cli.env_remove("KINETO_PLUGIN_LIB_DIR_PATH"),
    }
}

#[test]
fn the_demo_shows_the_sample_plugins_events() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    build_sample(&plugins);
    let out_path = dir.path().join("demo.pt.trace.json");
    omniprof(Some(&plugins)).ok(["demo", "-o", out_path.to_str().unwrap()]);
    let trace = TraceReader::new()
        .read_path(&out_path)
        .into_trace()
        .unwrap();
    let named = |n: &str| trace.activities.iter().filter(|a| &*a.name == n).count();
    assert_eq!(named("sampleLaunchKernel"), 1);
    assert_eq!(named("sample_kernel"), 1);
    // The plugin's counters and OpenReg's land in the one counter model.
    let samples = |n: &str| {
        let series = trace.counters.series().iter();
        series
            .filter(|s| &*s.track.name == n)
            .map(|s| s.samples.len())
            .sum::<usize>()
    };
    assert_eq!(samples("sm_activity"), 5, "the plugin's counter series");
    assert_eq!(samples("dram_throughput"), 3, "a series of two values");
    assert!(samples(openreg::PM_SERIES) > 0, "OpenReg's PM samples");
    let launch = trace
        .activities
        .iter()
        .find(|a| &*a.name == "sampleLaunchKernel")
        .unwrap();
    let pushed: u64 = launch
        .arg("pushed_correlations")
        .unwrap()
        .to_json()
        .parse()
        .unwrap();
    assert!(
        pushed > 0,
        "the host's correlation pushes reached the plugin"
    );
    // The sample's flow, drawn from its launch to its kernel.
    let kernel = trace
        .activities
        .iter()
        .find(|a| &*a.name == "sample_kernel")
        .unwrap();
    assert_eq!(launch.flow.unwrap().id, kernel.flow.unwrap().id);
    // OpenReg's own device work is still all there.
    assert!(named("matmul_48x48") > 0);
    checker::assert_loads_in_perfetto(&out_path);
}

#[test]
fn plugins_list_and_check_give_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let sample = build_sample(dir.path());
    let broken = build_broken("process_events_error", dir.path());

    let stdout = omniprof(None).ok(["plugins", "list", dir.path().to_str().unwrap()]);
    assert!(
        stdout.contains("MockPlugin [gpu_memcpy, kernel, cuda_runtime, cuda_driver]"),
        "{stdout}"
    );
    assert!(stdout.contains("SampleCounters ["), "{stdout}");
    assert!(stdout.contains("ProcessEventsError ["), "{stdout}");

    let trace = dir.path().join("check.json");
    let stdout = omniprof(None).ok([
        "plugins",
        "check",
        sample.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(verdict_of(&stdout, "SampleCounters"), "PASS");
    assert_eq!(
        verdict_of(&stdout, "MockPlugin"),
        "WARN",
        "its events are in 1970"
    );
    // 1970 is decades before the window: the clock, not the edges, is named.
    let warning = stdout
        .lines()
        .find(|l| l.starts_with("WARN MockPlugin ("))
        .unwrap_or_else(|| panic!("no MockPlugin warning in {stdout}"));
    assert!(
        warning.contains(": 4 of 4 events outside the ")
            && warning.contains(
                " days before its start), dropped: are times Unix-epoch ns \
                 (CLOCK_REALTIME), as the host's?"
            ),
        "{warning}"
    );
    // The device is the one that produced events, not OpenReg, which took part idle.
    let checked = TraceReader::new().read_path(&trace).into_trace().unwrap();
    let device_type = checked.metadata(omniprof_trace::keys::metadata::DEVICE_TYPE);
    assert_eq!(device_type.and_then(|v| v.as_str()), Some("SampleCounters"));
    let out = omniprof(None).run(["summary", trace.to_str().unwrap()]);
    let table = text(&out.stdout);
    assert!(
        table.contains("Self SAMPLECOUNTERS") && !table.contains("OPENREG"),
        "{table}"
    );

    let out = omniprof(None).run(["plugins", "check", broken.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(verdict_of(&stdout, "ProcessEventsError"), "FAIL");
    assert!(
        stdout.contains("profilerProcessEvents returned -1"),
        "{stdout}"
    );

    let out = omniprof(None).run(["plugins", "check", "/nonexistent/x.so"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("/nonexistent/x.so"));
}

#[test]
fn plugins_check_fails_a_plugin_that_blocks_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let hangs = build_broken("hangs", dir.path());
    let begun = std::time::Instant::now();
    let out = omniprof(None).run([
        "plugins",
        "check",
        hangs.to_str().unwrap(),
        "--timeout",
        "0.3",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(begun.elapsed() < std::time::Duration::from_secs(20));
    for profiler in [
        "HangInCreate",
        "HangInStart",
        "HangInStop",
        "HangInProcessEvents",
        "HangInDestroy",
    ] {
        assert_eq!(verdict_of(&stdout, profiler), "FAIL");
    }
    assert_eq!(
        stdout.matches("did not return within 300 ms").count(),
        5,
        "{stdout}"
    );

    let out = omniprof(None).run(["plugins", "check", "x.so", "--timeout", "-1"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plugins_check_fails_a_plugin_whose_late_calls_were_refused_and_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let twins = build_broken("twin_profilers", dir.path());
    let late = build_broken("late_calls", dir.path());
    for paths in [vec![&late], vec![&twins, &late]] {
        let mut args = vec!["plugins", "check"];
        args.extend(paths.iter().map(|p| p.to_str().unwrap()));
        let out = omniprof(None).run(&args);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
        assert_eq!(verdict_of(&stdout, "LateCalls"), "FAIL");
        // One late registerProfiler (in create) and one late addEvent (in destroy).
        let line = format!(
            "FAIL LateCalls ({}): 2 call(s) through a registry or trace builder handle after \
             the call that lent it returned: refused",
            late.display()
        );
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.starts_with("FAIL "))
                .collect::<Vec<_>>(),
            [line.as_str()],
            "{stdout}"
        );
        if paths.len() == 2 {
            assert_eq!(verdict_of(&stdout, "TwinA"), "PASS", "{stdout}");
            assert_eq!(verdict_of(&stdout, "TwinB"), "PASS", "{stdout}");
        }
    }
}

#[test]
fn plugins_check_passes_a_plugin_that_timestamps_its_events_across_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let spans = build_broken("spans_its_session", dir.path());
    let stdout = omniprof(None).ok(["plugins", "check", spans.to_str().unwrap()]);
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("SpansItsSession"))
        .unwrap_or_else(|| panic!("no row in {stdout}"))
        .split_whitespace()
        .skip(2)
        .collect();
    // EVENTS, OUT OF WINDOW, ERRORS, VERDICT: its 8 kernels all lie in the window.
    assert_eq!(row, ["8", "0", "0", "PASS"], "{stdout}");
}

#[test]
fn plugins_check_leaves_openreg_out_unless_asked_so_a_plugins_device_0_keeps_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let sample = build_sample_on_device(dir.path(), 0);
    let trace = dir.path().join("check.json");
    let check = |more: &[&str]| {
        let args = ["plugins", "check", sample.to_str().unwrap()];
        let stdout =
            omniprof(None).ok([&args[..], &["--trace", trace.to_str().unwrap()], more].concat());
        let checked = TraceReader::new().read_path(&trace).into_trace().unwrap();
        let row = checked
            .processes
            .iter()
            .find(|p| p.pid == 0)
            .map(|p| p.name.clone());
        let backends: Vec<String> = checked
            .health
            .backends
            .iter()
            .map(|b| b.name.clone())
            .collect();
        (stdout, row, backends)
    };
    let (stdout, row, backends) = check(&[]);
    assert_eq!(row.as_deref(), Some("Sample device"), "{stdout}");
    assert_eq!(backends, ["MockPlugin", "SampleCounters"], "{stdout}");
    assert!(
        stdout.contains("note: OpenReg, the simulated device this binary carries, was left out"),
        "{stdout}"
    );
    // Asked for, OpenReg runs beside the plugin, and the output says their rows may merge.
    let (stdout, _, backends) = check(&["--with-openreg"]);
    assert!(backends.iter().any(|b| b == "openreg"), "{backends:?}");
    assert!(
        stdout.contains("note: OpenReg ran beside the plugins: a device id both report"),
        "{stdout}"
    );
}

fn verdict_of(table: &str, profiler: &str) -> String {
    table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(profiler))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_else(|| panic!("no row for {profiler} in {table}"))
        .to_owned()
}

#[test]
fn the_demo_reports_every_rejected_plugin_on_stderr_and_in_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::write(plugins.join("not_elf.so"), "not a shared library").unwrap();
    build_broken("missing_register", &plugins); // a library, but no plugin
    build_broken("register_error", &plugins);
    let out_path = dir.path().join("demo.pt.trace.json");
    let args = ["demo", "--steps", "2", "-o", out_path.to_str().unwrap()];
    let out = omniprof(Some(&plugins)).run(args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let expected = [
        "missing_register.so: REJECTED: no KinetoPlugin_register symbol",
        "not_elf.so: REJECTED: cannot open",
        "register_error.so: REJECTED: KinetoPlugin_register returned -7",
    ];
    for want in expected {
        let lines = stderr.lines().filter(|l| l.contains(want)).count();
        assert_eq!(lines, 1, "{want:?} once in {stderr}");
    }
    let trace = TraceReader::new()
        .read_path(&out_path)
        .into_trace()
        .unwrap();
    let recorded = &trace.health.plugin_errors;
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    for (line, want) in recorded.iter().zip(expected) {
        assert!(line.contains(want), "{line} / {want}");
    }

    // -q keeps warnings off stderr; the trace still says it.
    let out = omniprof(Some(&plugins)).run([
        "-q",
        "demo",
        "--steps",
        "2",
        "-o",
        out_path.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(
        !text(&out.stderr).contains("REJECTED"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_plugins_own_ids_do_not_link_its_events_to_unrelated_host_ops() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let foreign = build_broken("foreign_ids", &plugins);
    let out_path = dir.path().join("demo.pt.trace.json");
    let args = ["demo", "--threads", "2", "-o", out_path.to_str().unwrap()];
    let out = omniprof(Some(&plugins)).run(args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("ForeignIds: 2 events unlinked"), "{stderr}");
    let trace = TraceReader::new()
        .read_path(&out_path)
        .into_trace()
        .unwrap();
    assert!(
        trace.activities.iter().any(|a| a.correlation == 42),
        "the demo has a host op with id 42"
    );
    for name in ["foreign_launch", "foreign_kernel"] {
        let event = trace.activities.iter().find(|a| &*a.name == name).unwrap();
        assert_eq!(event.linked_correlation, None, "{name}: {event:?}");
    }
    assert_eq!(trace.health.refused_links, Some(2));

    let stdout = omniprof(None).ok(["plugins", "check", foreign.to_str().unwrap()]);
    assert_eq!(verdict_of(&stdout, "ForeignIds"), "WARN");
    assert!(
        stdout.contains("correlation id the host pushed"),
        "{stdout}"
    );
}
