//! The recorder end to end: what threads record, as the trace shows it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::buffer::with_local;
use super::state::{start_session, stop_session, STATE};
use super::word::{end_word, word, KIND_USER};
use super::*;
use crate::clock::TickConverter;
use crate::config::Config;
use crate::keys::arg;
use crate::Value;
use crate::Window;
use crate::{Activity, ActivityType};
use crate::{Profiler, Trace};
use omniprof_test_support::lock::serial;

fn record(config: Config, work: impl FnOnce()) -> Trace {
    let mut p = Profiler::builder().config(config).build().unwrap();
    p.start().unwrap();
    work();
    p.stop().unwrap()
}

fn names(t: &Trace, tid: i64) -> Vec<&str> {
    t.activities
        .iter()
        .filter(|a| a.resource == tid)
        .map(|a| &*a.name)
        .collect()
}

/// Each activity but the Python frames, with its `Call stack`.
fn call_stacks(t: &Trace) -> Vec<(&str, Option<&str>)> {
    t.activities
        .iter()
        .filter(|a| a.kind != ActivityType::PythonFunction)
        .map(|a| (&*a.name, a.arg(arg::CALL_STACK).and_then(Value::as_str)))
        .collect()
}

#[test]
fn nothing_is_recorded_without_a_session() {
    let _g = serial();
    let guard = record_function("outside");
    assert!(!guard.is_recording());
    assert_eq!(guard.correlation_id(), 0);
    drop(guard);
    let t = record(Config::default(), || {});
    assert!(t.activities.iter().all(|a| &*a.name != "outside"));
}

#[test]
fn python_frames_become_python_functions_and_give_ops_their_call_stack() {
    use python::PythonFrame;
    let _g = serial();
    let t = record(Config::default(), || {
        let module = PythonFrame::begin(Name::python("<string>(1): <module>", None)).unwrap();
        for _ in 0..2 {
            let linear = PythonFrame::begin(Name::python("nn.Module: Linear_0", Some(0))).unwrap();
            drop(record_op("aten::linear"));
            assert!(linear.end());
        }
        drop(record_function("step"));
        // Left open at the stop, as the frame that stops a profiler is.
        let _ = module;
    });
    let python: Vec<_> = t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::PythonFunction)
        .collect();
    let arg = |a: &Activity, k: &str| a.arg(k).cloned();
    assert_eq!(python.len(), 3);
    assert_eq!(&*python[0].name, "<string>(1): <module>");
    assert_eq!(arg(python[0], arg::PYTHON_ID), Some(Value::UInt(1)));
    assert_eq!(arg(python[0], arg::PYTHON_PARENT_ID), None);
    assert_eq!(python[0].end_ns, t.window.end_ns);
    assert_eq!(python[0].arg(arg::FINISHED), None);
    for (frame, id) in python[1..].iter().zip([2, 3]) {
        assert_eq!(&*frame.name, "nn.Module: Linear_0");
        assert_eq!(arg(frame, arg::PYTHON_ID), Some(Value::UInt(id)));
        assert_eq!(arg(frame, arg::PYTHON_PARENT_ID), Some(Value::UInt(1)));
        assert_eq!(arg(frame, arg::PYTHON_MODULE_ID), Some(Value::UInt(0)));
    }
    assert_eq!(
        call_stacks(&t),
        [
            (
                "aten::linear",
                Some("nn.Module: Linear_0;<string>(1): <module>;")
            ),
            (
                "aten::linear",
                Some("nn.Module: Linear_0;<string>(1): <module>;")
            ),
            ("step", Some("<string>(1): <module>;")),
        ]
    );
    assert_eq!(t.health.unfinished_ranges, None);
}

#[test]
fn what_begins_after_a_frame_returned_is_not_its_callee_though_a_range_begun_in_it_is_open() {
    use python::PythonFrame;
    let _g = serial();
    let t = record(Config::default(), || {
        let main = PythonFrame::begin(Name::python("t.py(9): main", None)).unwrap();
        let step = PythonFrame::begin(Name::python("t.py(2): step", None)).unwrap();
        // A step's range, opened inside `step()`, lasts until the next one.
        let range = OwnedRange::begin("ProfilerStep#1").unwrap();
        assert!(step.end());
        drop(record_op("aten::mm"));
        range.end();
        assert!(main.end());
    });
    assert_eq!(
        call_stacks(&t),
        [
            ("ProfilerStep#1", Some("t.py(2): step;t.py(9): main;")),
            ("aten::mm", Some("t.py(9): main;")),
        ]
    );
}

#[test]
fn a_frame_begun_at_the_window_start_goes_before_what_its_thread_recorded_earlier() {
    use python::PythonFrame;
    let _g = serial();
    let t = record(Config::default(), || {
        drop(record_op("aten::mm"));
        // The tracer finds `main` running only at its next event.
        let main = PythonFrame::begin_at_window_start(Name::python("t.py(9): main", None));
        drop(record_op("aten::add"));
        assert!(main.unwrap().end());
    });
    let main = t
        .activities
        .iter()
        .find(|a| a.kind == ActivityType::PythonFunction)
        .unwrap();
    let mm = t
        .activities
        .iter()
        .find(|a| &*a.name == "aten::mm")
        .unwrap();
    // Stamped when the recorder started, just after the window's start was read.
    assert!((t.window.start_ns..=mm.start_ns).contains(&main.start_ns));
    assert_eq!(
        call_stacks(&t),
        [
            ("aten::mm", Some("t.py(9): main;")),
            ("aten::add", Some("t.py(9): main;"))
        ]
    );
}

#[test]
fn numbers_without_a_sequence_number_are_not_attached() {
    let _g = serial();
    let none = Autograd {
        sequence_number: -1,
        forward_thread: 4,
        thread: 1,
    };
    let t = record(Config::default(), || {
        // SAFETY: literals are NUL-terminated.
        unsafe { push_op(c"aten::empty".as_ptr(), 1) };
        assert!(pop_op_with_autograd(1, none));
        unsafe { push_op(c"aten::zeros".as_ptr(), 2) }.with_autograd(none);
        assert!(pop_op(2));
    });
    let args: Vec<_> = t
        .activities
        .iter()
        .map(|a| (&*a.name, a.args.len(), a.flow.is_some()))
        .collect();
    assert_eq!(args, [("aten::empty", 0, false), ("aten::zeros", 0, false)]);
}

#[test]
fn a_fwdbwd_flow_joins_the_innermost_forward_op_to_the_first_backward_op_to_end() {
    let _g = serial();
    let numbers = |forward_thread, thread| Autograd {
        sequence_number: 3,
        forward_thread,
        thread,
    };
    let t = record(Config::default(), || {
        // SAFETY: literals are NUL-terminated.
        unsafe { push_op(c"aten::linear".as_ptr(), 1) };
        unsafe { push_op(c"aten::t".as_ptr(), 2) };
        assert!(pop_op_with_autograd(2, numbers(0, 1)));
        assert!(pop_op_with_autograd(1, numbers(0, 1)));
        // Another forward thread's op with the same sequence number: no flow.
        unsafe { push_op(c"aten::other".as_ptr(), 3) };
        assert!(pop_op_with_autograd(3, numbers(0, 9)));
        unsafe { push_op(c"evaluate_function: TBackward0".as_ptr(), 4) };
        unsafe { push_op(c"TBackward0".as_ptr(), 5) };
        assert!(pop_op_with_autograd(5, numbers(1, 2)));
        assert!(pop_op_with_autograd(4, numbers(1, 2)));
    });
    let flows: Vec<_> = t
        .activities
        .iter()
        .map(|a| (&*a.name, a.flow.map(|f| (f.id, f.start))))
        .collect();
    assert_eq!(
        flows,
        [
            ("aten::linear", None),
            ("aten::t", Some((1, true))),
            ("aten::other", None),
            ("evaluate_function: TBackward0", None),
            ("TBackward0", Some((1, false))),
        ]
    );
    let node = t
        .activities
        .iter()
        .find(|a| &*a.name == "TBackward0")
        .unwrap();
    assert_eq!(node.arg(arg::SEQUENCE_NUMBER), Some(&Value::Int(3)));
    assert_eq!(node.arg(arg::FWD_THREAD_ID), Some(&Value::UInt(1)));
}

#[test]
fn a_frame_name_stays_apart_from_a_range_name_of_the_same_text() {
    let _g = serial();
    let text = "f.py(1): f";
    let t = record(Config::default(), || {
        drop(record_op(text));
        python::PythonFrame::begin(Name::python(text, None)).map(python::PythonFrame::end);
    });
    let kinds: Vec<_> = t.activities.iter().map(|a| (a.kind, &*a.name)).collect();
    assert_eq!(
        kinds,
        [
            (ActivityType::CpuOp, text),
            (ActivityType::PythonFunction, text)
        ]
    );
}

#[test]
fn ranges_nest_and_carry_args_ids_and_kinds() {
    let _g = serial();
    let mut ids = (0, 0);
    let t = record(Config::default(), || {
        let outer = record_function("outer").with_arg("batch", 32i64);
        {
            let op = record_op("aten::mm").with_input_shapes(&[&[64, 64], &[64, 32]]);
            ids = (outer.correlation_id(), op.correlation_id());
            instant("mark").with_arg("note", "here");
        }
    });
    let by_name = |n: &str| t.activities.iter().find(|a| &*a.name == n).unwrap();
    let outer = by_name("outer");
    let op = by_name("aten::mm");
    let mark = by_name("mark");
    assert_eq!(outer.kind, ActivityType::UserAnnotation);
    assert_eq!(op.kind, ActivityType::CpuOp);
    assert_eq!(mark.kind, ActivityType::CpuInstantEvent);
    assert!(outer.start_ns <= op.start_ns && op.end_ns <= outer.end_ns);
    assert!(op.start_ns <= mark.start_ns && mark.start_ns <= op.end_ns);
    assert_eq!(outer.arg("batch"), Some(&Value::Int(32)));
    assert_eq!(
        op.arg(arg::INPUT_DIMS).unwrap().to_json(),
        "[[64, 64], [64, 32]]"
    );
    assert_eq!(mark.arg("note"), Some(&Value::from("here")));
    assert_eq!((outer.correlation, op.correlation), ids);
    assert_ne!(outer.correlation, op.correlation);
    assert!(t.window.start_ns <= outer.start_ns && outer.end_ns <= t.window.end_ns);
    let pid = std::process::id() as i64;
    assert!(t.activities.iter().all(|a| a.device == pid));
}

#[test]
fn threads_that_exit_before_stop_are_kept_with_their_names() {
    let _g = serial();
    let t = record(Config::default(), || {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || {
                        for _ in 0..1000 {
                            let _r = record_function("tick");
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    let ticks = t.activities.iter().filter(|a| &*a.name == "tick").count();
    assert_eq!(ticks, 4000);
    for i in 0..4 {
        let name = format!("(worker-{i})");
        let row = t.threads.iter().find(|r| r.name.ends_with(&name)).unwrap();
        assert_eq!(names(&t, row.tid).len(), 1000);
    }
    assert_eq!(t.health.dropped_events, Some(0));
}

/// Records 10,000 ranges on a fresh thread under a cap of `cap` records; returns the
/// ranges kept and the `dropped_events` count.
fn ranges_under_cap(cap: u64) -> (usize, Option<u64>) {
    let _g = serial();
    let mut config = Config::default();
    config
        .apply(&format!("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD={cap}"))
        .unwrap();
    let t = record(config, || {
        std::thread::spawn(|| {
            for _ in 0..10_000 {
                let _r = record_function("spin");
            }
        })
        .join()
        .unwrap();
    });
    let kept = t.activities.iter().filter(|a| &*a.name == "spin").count();
    (kept, t.health.dropped_events)
}

#[test]
fn past_the_cap_events_are_counted_not_kept() {
    // 8192 records = 4096 ranges (two whole chunks); each later range is one dropped
    // event (its begin is refused, so its end is never attempted).
    assert_eq!(ranges_under_cap(8192), (4096, Some(5904)));
}

#[test]
fn the_cap_is_exact_in_records() {
    // Not a multiple of the chunk size: the cap still holds to the record.
    assert_eq!(ranges_under_cap(5000), (2500, Some(7500)));
}

#[test]
fn a_range_whose_end_falls_past_the_cap_is_left_out_not_stretched() {
    let _g = serial();
    let mut config = Config::default();
    config
        .apply("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=3")
        .unwrap();
    let mut p = Profiler::builder().config(config).build().unwrap();
    p.start().unwrap();
    std::thread::spawn(|| {
        // Record 1; never ended.
        std::mem::forget(record_function("open_at_stop"));
        let _lost = record_function("end_past_cap"); // record 2; its end is dropped
        drop(record_op("whole")); // record 3; its end (4) is dropped
    })
    .join()
    .unwrap();
    let t = p.stop().unwrap();
    let names: Vec<&str> = t.activities.iter().map(|a| &*a.name).collect();
    assert!(!names.contains(&"end_past_cap"), "{names:?}");
    // `whole` lost its end too (the cap fell between its records): left out as well.
    assert!(!names.contains(&"whole"), "{names:?}");
    let open = t
        .activities
        .iter()
        .find(|a| &*a.name == "open_at_stop")
        .expect("a range open at the stop is kept");
    assert_eq!(open.arg("finished"), Some(&Value::Bool(false)));
    assert_eq!(t.health.unfinished_ranges, Some(1));
    assert_eq!(t.health.dropped_events, Some(2));
}

#[test]
fn range_names_are_bounded_reclaimed_between_sessions_and_reported() {
    let _g = serial();
    let names = |tag: &'static str, n: usize| {
        (0..n).map(move |i| format!("{tag}{i:06}{}", "x".repeat(1017)))
    };
    let named = |t: &Trace, name: &str| t.activities.iter().filter(|a| &*a.name == name).count();
    // More distinct 1 KiB names than a generation holds: the rest are counted.
    let t = record(Config::default(), || {
        for name in names("a", 20_000) {
            drop(record_function(name.as_str()));
        }
    });
    let full = named(&t, "<name table full>");
    assert!(full > 3_000, "{full}");
    assert_eq!(t.health.dropped_names, Some(full as u64));
    // The next session starts with room: its names are recorded as given.
    let t = record(Config::default(), || {
        for name in names("b", 5_000) {
            drop(record_function(name.as_str()));
        }
    });
    assert_eq!(t.health.dropped_names, None);
    assert_eq!(named(&t, "<name table full>"), 0);
    let first = names("b", 1).next().unwrap();
    assert_eq!(named(&t, &first), 1);
    // Once no session needs them, the first session's 16 MiB of names are freed.
    let t = record(Config::default(), || drop(record_function("after")));
    assert_eq!(named(&t, "after"), 1);
    let held = name::held_bytes();
    assert!(held < 12 << 20, "{} MiB of names held", held >> 20);
}

#[test]
fn open_ranges_end_at_the_window_and_say_so() {
    let _g = serial();
    let mut p = Profiler::builder().build().unwrap();
    p.start().unwrap();
    let open = record_function("still_open");
    let t = p.stop().unwrap();
    drop(open);
    let a = t
        .activities
        .iter()
        .find(|a| &*a.name == "still_open")
        .unwrap();
    assert_eq!(a.end_ns, t.window.end_ns);
    assert_eq!(a.arg("finished"), Some(&Value::Bool(false)));
    assert_eq!(t.health.unfinished_ranges, Some(1));
}

#[test]
fn a_guard_from_an_earlier_session_does_not_leak_into_the_next() {
    let _g = serial();
    let mut p = Profiler::builder().build().unwrap();
    p.start().unwrap();
    let old = record_function("old");
    p.stop().unwrap();
    let t = record(Config::default(), || {
        drop(old);
        let _n = record_function("new");
    });
    assert_eq!(names(&t, t.activities[0].resource), ["new"]);
}

fn count(t: &Trace, name: &str) -> usize {
    t.activities.iter().filter(|a| &*a.name == name).count()
}

#[test]
fn recycled_chunks_never_show_records_of_earlier_sessions() {
    let _g = serial();
    // Several chunks' worth on a thread that exits (its chunks go back to the pool) and
    // on this one (it keeps its first chunk for the next session).
    let t = record(Config::default(), || {
        std::thread::spawn(|| (0..6000).for_each(|_| drop(record_function("first"))))
            .join()
            .unwrap();
        (0..3000).for_each(|_| drop(record_function("first")));
    });
    assert_eq!(count(&t, "first"), 9000);
    let t = record(Config::default(), || {
        std::thread::spawn(|| (0..10).for_each(|_| drop(record_function("second"))))
            .join()
            .unwrap();
        drop(record_function("second"));
    });
    assert_eq!(count(&t, "first"), 0);
    assert_eq!(count(&t, "second"), 11);
}

#[test]
fn records_of_a_session_64_earlier_are_told_apart() {
    let _g = serial();
    // Session tags repeat every 64 sessions; what this thread wrote then is still in the
    // chunk it reuses, under the same tag, and only its age gives it away.
    let t = record(Config::default(), || {
        (0..3000).for_each(|_| drop(record_function("old")));
    });
    assert_eq!(count(&t, "old"), 3000);
    for _ in 0..63 {
        record(Config::default(), || {});
    }
    let t = record(Config::default(), || drop(record_function("new")));
    assert_eq!(count(&t, "old"), 0);
    assert_eq!(count(&t, "new"), 1);
}

#[test]
fn ranges_ended_out_of_order_keep_their_own_ends() {
    let _g = serial();
    let t = record(Config::default(), || {
        let a = record_function("a");
        let b = record_function("b");
        drop(a);
        let c = record_function("c");
        drop(b);
        drop(c);
    });
    let by_name = |n: &str| t.activities.iter().find(|x| &*x.name == n).unwrap();
    let (a, b, c) = (by_name("a"), by_name("b"), by_name("c"));
    assert!(a.start_ns <= b.start_ns && b.start_ns <= a.end_ns);
    assert!(a.end_ns <= c.start_ns && c.start_ns <= b.end_ns && b.end_ns <= c.end_ns);
    assert_eq!(t.health.unfinished_ranges, None);
}

#[test]
fn sessions_started_and_stopped_under_busy_threads_hold_only_their_own_ranges() {
    use std::sync::atomic::AtomicBool;
    let _g = serial();
    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let _outer = record_function("busy_outer");
                    (0..50).for_each(|_| drop(record_op("busy_inner")));
                }
            })
        })
        .collect();
    for _ in 0..20 {
        let t = record(Config::default(), || {
            std::thread::sleep(std::time::Duration::from_millis(2));
        });
        for a in &t.activities {
            assert!(
                matches!(&*a.name, "busy_outer" | "busy_inner"),
                "{}",
                a.name
            );
            assert!(a.start_ns <= a.end_ns);
            assert!(t.window.start_ns <= a.start_ns && a.end_ns <= t.window.end_ns);
        }
    }
    done.store(true, Ordering::Relaxed);
    workers.into_iter().for_each(|w| w.join().unwrap());
}

#[test]
fn records_written_after_the_stop_are_left_out() {
    let _g = serial();
    let start = crate::clock::CalibrationSample::take();
    let window_start_ns = crate::clock::wall_now_ns();
    let mut host = start_session(1 << 20);
    let ended_late = record_function("ended_late");
    drop(record_function("in_time"));
    // What a thread does when it read the state just before the stop and writes after
    // it: a range begins, and an open one ends, with the state it read.
    let state = STATE.load(Ordering::Relaxed);
    stop_session(&mut host);
    with_local(|l| {
        l.push(state, word(KIND_USER, Name::new("begun_late")), true);
        l.push(state, end_word(ended_late.seq), false);
    });
    drop(ended_late);
    let window = Window {
        start_ns: window_start_ns,
        end_ns: crate::clock::wall_now_ns(),
    };
    let conv = TickConverter::new(start, crate::clock::CalibrationSample::take());
    let host = collect(host, 1, &conv, window);
    let mut names: Vec<_> = host.activities.iter().map(|a| &*a.name).collect();
    names.sort_unstable();
    assert_eq!(names, ["ended_late", "in_time"]);
    let late = host.activities.iter().find(|a| &*a.name == "ended_late");
    assert_eq!(late.unwrap().arg("finished"), Some(&Value::Bool(false)));
    assert_eq!(host.unfinished_ranges, 1);
}

#[test]
fn an_owned_range_ended_on_another_thread_keeps_its_end() {
    let _g = serial();
    let mut ended_at = (0, 0);
    let t = record(Config::default(), || {
        let outer = record_function("outer_on_owner");
        let range = OwnedRange::begin_op("async_op")
            .unwrap()
            .with_input_shapes(&[&[2, 3]]);
        let local = OwnedRange::begin("local_range").unwrap();
        // The async op ends on another thread, which records its own range too, while
        // the owner keeps recording: neither thread's ranges may be closed by it.
        let ender = std::thread::spawn(move || {
            let _other = record_function("on_ender");
            let before = crate::clock::wall_now_ns();
            assert!(range.end());
            (before, crate::clock::wall_now_ns())
        });
        ended_at = ender.join().unwrap();
        drop(record_op("after_join"));
        assert!(local.end());
        drop(outer);
    });
    let by_name = |n: &str| t.activities.iter().find(|a| &*a.name == n).unwrap();
    let op = by_name("async_op");
    let outer = by_name("outer_on_owner");
    assert_eq!(op.kind, ActivityType::CpuOp);
    assert_eq!(
        op.resource, outer.resource,
        "the op stays on its owning thread"
    );
    assert_eq!(op.arg("finished"), None);
    assert_eq!(op.arg(arg::INPUT_DIMS).unwrap().to_json(), "[[2, 3]]");
    // Its end is the other thread's moment, within the calibration's rounding.
    let slack = 1_000_000;
    assert!(op.end_ns + slack >= ended_at.0 && op.end_ns <= ended_at.1 + slack);
    assert!(op.end_ns <= by_name("after_join").start_ns);
    assert_eq!(by_name("local_range").kind, ActivityType::UserAnnotation);
    assert!(by_name("on_ender").resource != op.resource);
    assert_eq!(t.health.unfinished_ranges, None);
    // A range ended after its session stopped records nothing, on any thread.
    let mut p = Profiler::builder().build().unwrap();
    p.start().unwrap();
    let late = OwnedRange::begin_op("late").unwrap();
    p.stop().unwrap();
    assert!(!std::thread::spawn(move || late.end()).join().unwrap());
}

#[test]
fn scope_macro_names_the_enclosing_block() {
    let _g = serial();
    let t = record(Config::default(), || {
        crate::scope!("block");
        let _inner = record_function(String::from("dynamic"));
    });
    let block = t.activities.iter().find(|a| &*a.name == "block").unwrap();
    let inner = t.activities.iter().find(|a| &*a.name == "dynamic").unwrap();
    assert!(block.start_ns <= inner.start_ns && inner.end_ns <= block.end_ns);
}

/// Unpacks one word as the op's `Batch` arg.
fn batch(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
    args.push((Arc::from("Batch"), Value::UInt(words[0])));
}

#[test]
fn allocator_reports_past_a_block_and_between_packed_ops_keep_their_own_args() {
    let _g = serial();
    // Reports beside ops' packed args in the thread's open block, more than a block holds
    // (7 words a report), an op with packed args after every seventh: each record must
    // still get its own words, in a sealed block or in the open one at the stop.
    const REPORTS: u64 = 12_000;
    let t = record(Config::default(), || {
        for i in 0..REPORTS {
            record_memory(&MemoryUsage {
                addr: 0x1000 + i,
                bytes: i as i64,
                total_allocated: i,
                ..Default::default()
            });
            if i % 7 == 0 {
                // SAFETY: the name is NUL-terminated.
                unsafe { push_op_packed(c"aten::mm".as_ptr(), i as usize, &[i], batch) };
                pop_op(i as usize);
            }
        }
    });
    let reports: Vec<_> = t
        .activities
        .iter()
        .filter(|a| &*a.name == "[memory]")
        .map(|a| (a.arg(arg::BYTES).cloned(), a.arg(arg::ADDR).cloned()))
        .collect();
    let expected: Vec<_> = (0..REPORTS)
        .map(|i| (Some(Value::Int(i as i64)), Some(Value::UInt(0x1000 + i))))
        .collect();
    assert_eq!(reports, expected);
    let batches: Vec<_> = t
        .activities
        .iter()
        .filter(|a| &*a.name == "aten::mm")
        .map(|a| a.arg("Batch").cloned())
        .collect();
    let expected: Vec<_> = (0..REPORTS)
        .step_by(7)
        .map(|i| Some(Value::UInt(i)))
        .collect();
    assert_eq!(batches, expected);
}

/// Unpacks an op's words as its `Words` arg (how many) and `Last` (the last one).
fn count_and_last(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
    args.push((Arc::from("Words"), Value::UInt(words.len() as u64)));
    args.push((
        Arc::from("Last"),
        Value::UInt(words.last().copied().unwrap_or(0)),
    ));
}

#[test]
fn packed_args_and_autograd_numbers_of_many_ops_keep_their_own_ops() {
    let _g = serial();
    // Ops of 1 to 40 words, one wider than a block of packed args, and every tenth with
    // another unpacker; each op's autograd numbers too: every op must get its own words and
    // numbers.
    const OPS: u64 = 600;
    let words_of = |i: u64| if i == 300 { 70_000 } else { 1 + i % 40 };
    let t = record(Config::default(), || {
        for i in 0..OPS {
            let words: Vec<u64> = (0..words_of(i)).map(|w| w * 1_000 + i).collect();
            let unpack: UnpackArgs = if i % 10 == 9 { batch } else { count_and_last };
            // SAFETY: the name is NUL-terminated.
            unsafe { push_op_packed(c"aten::op".as_ptr(), i as usize, &words, unpack) };
            let numbers = Autograd {
                sequence_number: i as i64,
                forward_thread: 0,
                thread: 1,
            };
            assert!(pop_op_with_autograd(i as usize, numbers));
        }
    });
    let ops: Vec<_> = t
        .activities
        .iter()
        .filter(|a| &*a.name == "aten::op")
        .map(|a| {
            let [words, last, batch, seq] =
                ["Words", "Last", "Batch", arg::SEQUENCE_NUMBER].map(|k| a.arg(k).cloned());
            (words, last, batch, seq)
        })
        .collect();
    let expected: Vec<_> = (0..OPS)
        .map(|i| {
            let n = words_of(i);
            let seq = Some(Value::Int(i as i64));
            if i % 10 == 9 {
                (None, None, Some(Value::UInt(i)), seq)
            } else {
                let last = Some(Value::UInt((n - 1) * 1_000 + i));
                (Some(Value::UInt(n)), last, None, seq)
            }
        })
        .collect();
    assert_eq!(ops, expected);
}
