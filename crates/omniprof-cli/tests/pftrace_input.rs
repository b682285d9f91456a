//! `summary`, `diff`, `flamegraph` and `convert` read `.pftrace` (issue 28: 1): the demo's
//! trace and its `.pftrace` give the same summary, the same flame graphs and a diff of no
//! change, and a `.pftrace` converts back to JSON with the same summary.

use std::path::Path;

use omniprof_test_support::cli::{arg, Cli};

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

fn summary(trace: &Path) -> String {
    OMNIPROF.ok([
        "summary",
        "--sort-by",
        "self_cpu_time_total",
        "--row-limit",
        "-1",
        arg(trace),
    ])
}

fn folded(trace: &Path, device: bool, out: &Path) -> String {
    let mut args = vec!["flamegraph", "--folded"];
    if device {
        args.push("--device");
    }
    OMNIPROF.ok([&args[..], &[arg(trace), "-o", arg(out)]].concat());
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn every_tool_reads_a_pftrace_as_it_reads_the_same_trace_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("demo.pt.trace.json");
    let pftrace = dir.path().join("demo.pftrace");
    let back = dir.path().join("back.pt.trace.json");
    OMNIPROF.ok(["demo", "--steps", "4", "-o", arg(&json)]);
    OMNIPROF.ok(["convert", arg(&json), "-o", arg(&pftrace)]);

    let table = summary(&json);
    assert!(table.lines().count() > 10, "{table}");
    assert_eq!(summary(&pftrace), table);

    let out = dir.path().join("out.folded");
    for device in [false, true] {
        let from_json = folded(&json, device, &out);
        assert!(!from_json.is_empty());
        assert_eq!(
            folded(&pftrace, device, &out),
            from_json,
            "--device: {device}"
        );
    }

    let diff = OMNIPROF.ok(["diff", "--format", "csv", arg(&json), arg(&pftrace)]);
    let rows: Vec<&str> = diff.lines().skip(1).collect();
    assert!(rows.len() > 10, "{diff}");
    for row in rows {
        // name,input_shapes,on_device,change, then base,new,delta,ratio per column.
        assert!(row.contains(",both,"), "{row}");
    }

    let converted = OMNIPROF.ok(["convert", arg(&pftrace), "-o", arg(&back)]);
    assert!(
        converted.starts_with(&format!("wrote {}", back.display())),
        "{converted}"
    );
    assert_eq!(summary(&back), table);
}
