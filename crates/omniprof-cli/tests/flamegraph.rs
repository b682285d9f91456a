//! Proves `omniprof flamegraph` on a hand-built trace whose self times are known: the folded
//! stacks hold exactly those numbers; the SVG is well-formed XML naming the top ops; with
//! `--device` every linked kernel's time sits on the stack of the op that launched it; a
//! trace with nothing to draw is an error that writes nothing. OUT goes through the shared
//! save path: no fixed `OUT.tmp` (a link planted there is left alone), a FIFO at OUT is
//! written in place and stays one, a socket is refused naming it, and another user's link
//! in a sticky directory is not followed. On PyTorch's `with_stack` trace, the Python frames
//! are drawn around the ops they called.

use std::path::Path;

use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_trace::{Activity, ActivityType, Trace};
use quick_xml::events::Event;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The arguments of `omniprof flamegraph TRACE -o OUT FLAGS...`.
fn flamegraph<'a>(trace: &'a Path, out: &'a Path, flags: &[&'a str]) -> Vec<&'a str> {
    [&["flamegraph", arg(trace), "-o", arg(out)], flags].concat()
}

/// Nested ops on two threads (self times in ns in the comments) and three kernels launched
/// by `aten::mm` and `aten::addmm`, one kernel launched from outside the trace.
fn trace() -> Trace {
    use ActivityType::*;
    let base = omniprof_trace::process_base_time_ns();
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
    omniprof_trace::save(&trace(), &path).unwrap();
    path
}

#[test]
fn the_folded_stacks_hold_exactly_the_known_self_times() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("host.folded");
    OMNIPROF.ok(flamegraph(&saved(dir.path()), &out, &["--folded"]));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), FOLDED);
}

#[test]
fn device_time_sits_on_the_launching_stack() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("device.folded");
    OMNIPROF.ok(flamegraph(
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
        OMNIPROF.ok(flamegraph(&trace, &out, flags));
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
    omniprof_trace::save(&Trace::new(0, 10), &empty).unwrap();
    let out = dir.path().join("graph.svg");
    let stderr = OMNIPROF.fails(1, flamegraph(&empty, &out, &[]));
    assert!(stderr.contains("no host ops"), "{stderr}");
    assert!(!out.exists());
}

const FOLDED: &str = "ProfilerStep* 4000\n\
                      ProfilerStep*;aten::addmm 3000\n\
                      ProfilerStep*;aten::mm 5500\n\
                      ProfilerStep*;aten::mm;launch 500\n\
                      ProfilerStep*;aten::relu 1000\n";

#[cfg(unix)]
#[test]
fn a_link_at_the_old_fixed_temporary_name_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "kept").unwrap();
    let out = dir.path().join("host.folded");
    std::os::unix::fs::symlink(&victim, dir.path().join("host.folded.tmp")).unwrap();

    OMNIPROF.ok(flamegraph(&saved(dir.path()), &out, &["--folded"]));

    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), FOLDED);
    assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
}

#[cfg(unix)]
#[test]
fn a_fifo_at_out_is_written_in_place_and_stays_a_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let trace = saved(dir.path());
    let out = dir.path().join("host.folded");
    omniprof_test_support::shared_dirs::mkfifo(&out);
    let reader = {
        let out = out.clone();
        std::thread::spawn(move || std::fs::read_to_string(out).unwrap())
    };

    OMNIPROF.ok(flamegraph(&trace, &out, &["--folded"]));

    // Checked before joining: a FIFO replaced by a file would leave the reader blocked.
    assert!(std::fs::symlink_metadata(&out)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(reader.join().unwrap(), FOLDED);
}

#[cfg(unix)]
#[test]
fn a_socket_at_out_is_refused_naming_it_and_stays() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("host.folded");
    let _listener = std::os::unix::net::UnixListener::bind(&out).unwrap();

    let stderr = OMNIPROF.fails(1, flamegraph(&saved(dir.path()), &out, &["--folded"]));

    assert_eq!(
        stderr,
        format!(
            "error: cannot write {}: it is a socket, not a file\n",
            out.display()
        )
    );
    assert!(std::fs::symlink_metadata(&out)
        .unwrap()
        .file_type()
        .is_socket());
}

#[cfg(unix)]
#[test]
fn another_users_link_at_out_in_a_sticky_directory_is_refused() {
    use omniprof_test_support::shared_dirs::{give_to, make_sticky, other_owner};
    let Some(other) = other_owner("flamegraph to another user's link") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = saved(dir.path());
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "kept").unwrap();
    let shared = tempfile::tempdir().unwrap();
    make_sticky(shared.path());
    let out = shared.path().join("host.folded");
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    give_to(&out, other);

    let stderr = OMNIPROF.fails(1, flamegraph(&trace, &out, &["--folded"]));

    assert_eq!(
        stderr,
        format!(
            "error: cannot write {out}: {out} is a symbolic link of uid {other} in the sticky \
             world-writable directory {dir} (owned by uid 0), and this process runs as uid 0: \
             it is not followed, as the kernel's fs.protected_symlinks would refuse; remove it \
             or save elsewhere\n",
            out = out.display(),
            dir = shared.path().display()
        )
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
}

#[cfg(unix)]
#[test]
fn another_users_fifo_at_out_in_a_sticky_directory_is_refused_without_waiting() {
    use omniprof_test_support::shared_dirs::{
        give_to, make_sticky, mkfifo, other_owner, read_fifo_on_a_thread,
    };
    use std::os::unix::fs::FileTypeExt;
    let Some(other) = other_owner("flamegraph to another user's FIFO") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = saved(dir.path());
    let shared = tempfile::tempdir().unwrap();
    make_sticky(shared.path());
    let out = shared.path().join("host.folded");
    mkfifo(&out);
    give_to(&out, other);
    // Its owner reading (without a reader the write waited for one).
    let owner = read_fifo_on_a_thread(&out);

    let stderr = OMNIPROF.fails(1, flamegraph(&trace, &out, &["--folded"]));

    // The owner's read ends when a writer closes: this test's, with nothing written.
    drop(std::fs::OpenOptions::new().write(true).open(&out).unwrap());
    assert_eq!(owner.join().unwrap(), b"");

    assert_eq!(
        stderr,
        format!(
            "error: cannot write {out}: {out} is a FIFO of uid {other} in the sticky \
             world-writable directory {dir} (owned by uid 0), and this process runs as uid 0: \
             its owner would read what is written (and the write waits until they do), as the \
             kernel's fs.protected_fifos would refuse; remove it or save elsewhere\n",
            out = out.display(),
            dir = shared.path().display()
        )
    );
    assert!(std::fs::symlink_metadata(&out)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn python_frames_are_drawn_around_the_ops_they_called() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stacks.folded");
    OMNIPROF.ok(flamegraph(
        &omniprof_test_support::data::stack_trace(),
        &out,
        &["--folded"],
    ));
    let folded = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = folded.lines().collect();
    let step = "gen_pytorch_stack_trace.py(40): <module>;gen_pytorch_stack_trace.py(34): step";
    let linear = format!(
        "{step};gen_pytorch_stack_trace.py(30): forward;nn.Module: Linear_0;\
         torch/nn/modules/module.py(1791): _call_impl;torch/nn/modules/linear.py(130): forward;\
         <built-in function linear>;aten::linear"
    );
    // The Python line's own time, and the op's under the frames that called it.
    assert!(lines.contains(&format!("{step} 9944").as_str()), "{folded}");
    assert!(
        lines.contains(&format!("{linear};aten::addmm 64356").as_str()),
        "{folded}"
    );
    assert_eq!(lines.len(), 105);
}

/// Whether XML 1.0 allows `c` in a document (its `Char` production), escaped or not.
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

#[test]
fn control_characters_and_empty_names_keep_the_svg_xml_and_their_time() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("hostile.json");
    // A name that retitles a terminal and breaks lines, one with DEL and a C1 control, and
    // one with no name at all, holding most of the time.
    let events = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "a\u001b]0;pwned\u0007b\rc\nd", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
      {"ph": "X", "cat": "cpu_op", "name": "x\u007f\u0085y", "pid": 1, "tid": 1, "ts": 20, "dur": 5},
      {"ph": "X", "cat": "cpu_op", "name": "", "pid": 1, "tid": 1, "ts": 30, "dur": 70}]}"#;
    std::fs::write(&trace, events).unwrap();
    let folded = dir.path().join("host.folded");
    OMNIPROF.ok(flamegraph(&trace, &folded, &["--folded"]));
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "[unnamed] 70000\n\
         a\\u{1b}]0:pwned\\u{7}b c d 10000\n\
         x\\u{7f}\\u{85}y 5000\n"
    );
    let out = dir.path().join("graph.svg");
    OMNIPROF.ok(flamegraph(&trace, &out, &[]));
    let svg = std::fs::read_to_string(&out).unwrap();
    if let Some(c) = svg.chars().find(|&c| !xml_char(c)) {
        panic!("the SVG holds {c:?}, which XML 1.0 forbids");
    }
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut text = String::new();
    loop {
        match reader.read_event() {
            Ok(Event::Eof) => break,
            Ok(Event::Text(t)) => text.push_str(&String::from_utf8_lossy(&t)),
            Ok(Event::GeneralRef(r)) if r.is_char_ref() => {
                let c = r.resolve_char_ref().unwrap().unwrap();
                assert!(
                    xml_char(c),
                    "the SVG refers to {c:?}, which XML 1.0 forbids"
                );
            }
            Ok(_) => {}
            Err(e) => panic!("not XML at byte {}: {e}", reader.buffer_position()),
        }
    }
    // The unnamed op's 70 µs of the 85 are drawn.
    assert!(text.contains("[unnamed] (70,000 ns, 82.35%)"), "{text}");
}

#[test]
fn a_name_ending_in_a_number_is_one_frame_with_its_own_time() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("numbers.json");
    // Names whose last word a flame graph tool would take for a count (a differential
    // graph's first column), with times that tell them apart.
    let events = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "op 123", "pid": 1, "tid": 1, "ts": 0, "dur": 60},
      {"ph": "X", "cat": "cpu_op", "name": "layer 2.5", "pid": 1, "tid": 1, "ts": 100, "dur": 30},
      {"ph": "X", "cat": "cpu_op", "name": "op 1.2.3", "pid": 1, "tid": 1, "ts": 200, "dur": 10},
      {"ph": "X", "cat": "cpu_op", "name": "op x1", "pid": 1, "tid": 1, "ts": 300, "dur": 5}]}"#;
    std::fs::write(&trace, events).unwrap();
    let folded = dir.path().join("host.folded");
    OMNIPROF.ok(flamegraph(&trace, &folded, &["--folded"]));
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "layer\u{a0}2.5 30000\n\
         op x1 5000\n\
         op\u{a0}1.2.3 10000\n\
         op\u{a0}123 60000\n"
    );
    let out = dir.path().join("graph.svg");
    OMNIPROF.ok(flamegraph(&trace, &out, &[]));
    let svg = std::fs::read_to_string(&out).unwrap();
    // Each drawn as its own frame with its own time (read as counts, `op 123` was frame
    // `op` of 60,000 ns in a differential graph, `layer 2.5` frame `layer`).
    for title in [
        "op\u{a0}123 (60,000 ns, 57.14%)",
        "layer\u{a0}2.5 (30,000 ns, 28.57%)",
        "op\u{a0}1.2.3 (10,000 ns, 9.52%)",
        "op x1 (5,000 ns, 4.76%)",
    ] {
        assert!(svg.contains(title), "{title:?} not in {svg}");
    }
}

#[test]
fn durations_near_i64_max_draw_halved_and_keep_their_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("long.json");
    // Three ops of 8e18 ns on three threads: 2.4e19 ns in all, past u64::MAX (1.8e19).
    let events: Vec<String> = (1..=3)
        .map(|tid| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "op{tid}", "pid": 1, "tid": {tid}, "ts": 0, "dur": 8000000000000000}}"#
            )
        })
        .collect();
    std::fs::write(
        &trace,
        format!(r#"{{"traceEvents": [{}]}}"#, events.join(",")),
    )
    .unwrap();
    let folded = dir.path().join("long.folded");
    OMNIPROF.ok(flamegraph(&trace, &folded, &["--folded"]));
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "op1 8000000000000000000\nop2 8000000000000000000\nop3 8000000000000000000\n"
    );
    let svg = dir.path().join("long.svg");
    let out = OMNIPROF.run(flamegraph(&trace, &svg, &[]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "warning: the stacks hold more than 2^64 ns in all, more than the graph can add up: it \
         draws them divided by 2^1\n"
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("op3 (4,000,000,000,000,000,000 ns, 33.33%)"),
        "{svg}"
    );
}
