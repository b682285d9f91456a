//! Proves `omniprof flamegraph` on a hand-built trace whose self times are known: the folded
//! stacks hold exactly those numbers; the SVG is well-formed XML naming the top ops; with
//! `--device` every linked kernel's time sits on the stack of the op that launched it; a
//! trace with nothing to draw is an error that writes nothing.

use std::path::Path;
use std::process::{Command, Output};

use omniprof::export;
use omniprof::{Activity, ActivityType, Trace};
use quick_xml::events::Event;

fn flamegraph(trace: &Path, out: &Path, flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_omniprof"))
        .arg("flamegraph")
        .arg(trace)
        .arg("-o")
        .arg(out)
        .args(flags)
        .output()
        .expect("run the omniprof binary")
}

fn ok(out: Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Nested ops on two threads (self times in ns in the comments) and three kernels launched
/// by `aten::mm` and `aten::addmm`, one kernel launched from outside the trace.
fn trace() -> Trace {
    use ActivityType::*;
    let base = omniprof::trace::process_base_time_ns();
    let mut t = Trace::new(base, base + 100_000);
    let mut add = |kind, name: &str, device, tid, start: i64, end: i64, corr: u64, linked: u64| {
        let mut a = Activity::new(kind, name, device, tid, base + start, base + end);
        a.correlation = corr;
        a.linked_correlation = (linked != 0).then_some(linked);
        t.activities.push(a);
    };
    add(UserAnnotation, "ProfilerStep#0", 10, 1, 0, 10_000, 1, 0); // 10000-6000-1000 = 3000
    add(CpuOp, "aten::mm", 10, 1, 1_000, 7_000, 2, 0); // 6000-500 = 5500
    add(PrivateUse1Runtime, "launch", 10, 1, 2_000, 2_500, 90, 2); // 500
    add(CpuOp, "aten::relu", 10, 1, 8_000, 9_000, 3, 0); // 1000
    add(UserAnnotation, "ProfilerStep#1", 10, 2, 0, 4_000, 4, 0); // 4000-3000 = 1000
    add(CpuOp, "aten::addmm", 10, 2, 500, 3_500, 5, 0); // 3000
    add(ConcurrentKernel, "gemm", 0, 7, 3_000, 5_000, 90, 2); // 2000 under aten::mm
    add(ConcurrentKernel, "gemm", 0, 7, 6_000, 6_700, 91, 2); // 700 under aten::mm
    add(ConcurrentKernel, "bias", 0, 7, 7_000, 7_300, 92, 5); // 300 under aten::addmm
    add(ConcurrentKernel, "orphan", 0, 7, 8_000, 8_050, 93, 77); // 50, unlinked
    t.activities
        .sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
    t
}

fn saved(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("hand.pt.trace.json");
    export::save(&trace(), &path).unwrap();
    path
}

#[test]
fn the_folded_stacks_hold_exactly_the_known_self_times() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("host.folded");
    ok(flamegraph(&saved(dir.path()), &out, &["--folded"]));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "ProfilerStep* 4000\n\
         ProfilerStep*;aten::addmm 3000\n\
         ProfilerStep*;aten::mm 5500\n\
         ProfilerStep*;aten::mm;launch 500\n\
         ProfilerStep*;aten::relu 1000\n"
    );
}

#[test]
fn device_time_sits_on_the_launching_stack() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("device.folded");
    ok(flamegraph(
        &saved(dir.path()),
        &out,
        &["--device", "--folded"],
    ));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "ProfilerStep*;aten::addmm;bias 300\n\
         ProfilerStep*;aten::mm;gemm 2700\n\
         [unlinked];orphan 50\n"
    );
}

#[test]
fn the_svg_is_well_formed_xml_naming_the_top_ops() {
    let dir = tempfile::tempdir().unwrap();
    let trace = saved(dir.path());
    for (flags, names) in [
        (&[][..], &["aten::mm", "ProfilerStep*", "aten::addmm"][..]),
        (&["--device"][..], &["gemm", "bias", "aten::mm"][..]),
    ] {
        let out = dir.path().join("graph.svg");
        ok(flamegraph(&trace, &out, flags));
        let svg = std::fs::read_to_string(&out).unwrap();
        let mut reader = quick_xml::Reader::from_str(&svg);
        let mut elements = 0;
        let mut text = String::new();
        loop {
            match reader.read_event() {
                Ok(Event::Eof) => break,
                Ok(Event::Start(_) | Event::Empty(_)) => elements += 1,
                Ok(Event::Text(t)) => text.push_str(&String::from_utf8_lossy(&t)),
                Ok(_) => {}
                Err(e) => panic!("not XML at byte {}: {e}", reader.buffer_position()),
            }
        }
        assert!(svg.trim_start().starts_with("<?xml") && elements > 10);
        for name in names {
            assert!(
                text.contains(name),
                "{name} missing from the SVG's text ({flags:?})"
            );
        }
    }
}

#[test]
fn a_trace_with_nothing_to_draw_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pt.trace.json");
    export::save(&Trace::new(0, 10), &empty).unwrap();
    let out = dir.path().join("graph.svg");
    let result = flamegraph(&empty, &out, &[]);
    assert_eq!(result.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&result.stderr).contains("no host ops"));
    assert!(!out.exists());
}
