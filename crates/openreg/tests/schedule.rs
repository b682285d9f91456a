//! A schedule driving OpenReg's backend: warm-up really starts the device recording and what
//! it records is not in the trace; the trace handler writes one loadable file per cycle.

use std::time::Duration;

use omniprof::trace::{ActivitySet, ActivityType, Trace};
use omniprof::{record_op, tensorboard_trace_handler, Profiler, Schedule};
use omniprof_read::TraceReader;
use omniprof_test_support::checker::assert_loads_in_perfetto;
use omniprof_test_support::lock::serial;
use openreg::{Kernel, Stream};

fn schedule(text: &str) -> Schedule {
    text.parse().unwrap()
}

fn kernels<'a>(t: &'a Trace, name: &str) -> Vec<&'a omniprof::trace::Activity> {
    t.activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel && &*a.name == name)
        .collect()
}

#[test]
fn work_launched_in_warmup_is_recorded_by_the_device_and_left_out() {
    let _serial = serial();
    let stream = Stream::new(0).unwrap();
    let out = openreg::malloc(0, 1024).unwrap();
    let (tx, traces) = std::sync::mpsc::channel();
    let mut profiler = Profiler::builder()
        .schedule(schedule("0,1,1,1"))
        .on_trace_ready(move |t| tx.send(t).unwrap())
        .build()
        .unwrap();
    profiler.start().unwrap(); // WARMUP: the backend records from here
    {
        let _op = record_op("warm_fill");
        openreg::launch_kernel(
            Kernel::Fill {
                out: out.clone(),
                value: 1.0,
            },
            &stream,
        )
        .unwrap();
        stream.synchronize();
    }
    profiler.step().unwrap(); // RECORD_AND_SAVE: the window opens
    {
        let _op = record_op("recorded_spin");
        openreg::launch_kernel(Kernel::Busy(Duration::from_micros(200)), &stream).unwrap();
        stream.synchronize();
    }
    profiler.step().unwrap(); // NONE: stop, trace_ready
    profiler.finish().unwrap();
    let t = traces.try_recv().unwrap();

    assert!(
        kernels(&t, "fill_f32").is_empty(),
        "warm-up work is left out"
    );
    assert!(t.activities.iter().all(|a| &*a.name != "warm_fill"));
    let spin = kernels(&t, "busy_spin");
    assert_eq!(spin.len(), 1, "recorded work is in");
    let op = t.activities.iter().find(|a| &*a.name == "recorded_spin");
    assert_eq!(spin[0].linked_correlation, op.map(|o| o.correlation));
    // The warm-up launch and its kernel were recorded by the device and dropped as warm-up,
    // not counted as anomalies.
    let warm = t.health.warmup_events;
    assert!(warm.is_some_and(|n| n >= 2), "{warm:?}");
    assert_eq!(t.health.out_of_window_events, Some(0));
}

#[test]
fn the_handler_writes_one_loadable_file_per_cycle_with_its_active_steps() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let handler = tensorboard_trace_handler(dir.path(), Some("rank0"), false);
    let stream = Stream::new(0).unwrap();
    let mut profiler = Profiler::builder()
        .schedule(schedule("1,1,2,2"))
        .on_trace_ready(handler.callback())
        .build()
        .unwrap();
    profiler.start().unwrap();
    for _ in 0..10 {
        let op = record_op("aten::spin");
        openreg::launch_kernel(Kernel::Busy(Duration::from_micros(50)), &stream).unwrap();
        stream.synchronize();
        drop(op);
        profiler.step().unwrap();
    }
    profiler.finish().unwrap();
    assert!(handler.take_errors().is_empty());

    let mut written = handler.written();
    written.sort();
    let mut listed: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    listed.sort();
    assert_eq!(listed, written, "one file per cycle, nothing else");
    let expected = [
        ["ProfilerStep#2", "ProfilerStep#3"],
        ["ProfilerStep#6", "ProfilerStep#7"],
    ];
    assert_eq!(written.len(), expected.len());
    for (path, steps) in handler.written().iter().zip(expected) {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("rank0.") && name.ends_with(".pt.trace.json"),
            "{name}"
        );
        let t = TraceReader::new().read_path(path).into_trace().unwrap();
        // The host ranges, and their projections onto the stream the steps launched on.
        for kind in [
            ActivityType::UserAnnotation,
            ActivityType::GpuUserAnnotation,
        ] {
            let mut names: Vec<_> = t
                .activities
                .iter()
                .filter(|a| a.kind == kind && a.name.starts_with("ProfilerStep#"))
                .map(|a| &*a.name)
                .collect();
            names.sort_unstable();
            assert_eq!(names, steps, "{name}: {kind:?}");
        }
        // One kernel per active step.
        assert_eq!(kernels(&t, "busy_spin").len(), 2, "{name}");
        assert_loads_in_perfetto(path);
    }
}

#[test]
fn device_work_begun_while_its_collection_is_off_is_left_out_into_the_next_cycle() {
    let _serial = serial();
    let stream = Stream::new(0).unwrap();
    let out = openreg::malloc(0, 1024).unwrap();
    let fill = |value: f32| {
        let _op = record_op("fill");
        openreg::launch_kernel(
            Kernel::Fill {
                out: out.clone(),
                value,
            },
            &stream,
        )
        .unwrap();
        stream.synchronize();
    };
    let kernels_only: ActivitySet = [ActivityType::ConcurrentKernel].into_iter().collect();
    let (tx, traces) = std::sync::mpsc::channel();
    let mut profiler = Profiler::builder()
        .schedule(schedule("0,1,1,2"))
        .on_trace_ready(move |t| tx.send(t).unwrap())
        .build()
        .unwrap();
    profiler.start().unwrap(); // WARMUP
    profiler.step().unwrap(); // RECORD_AND_SAVE
    fill(1.0);
    profiler.toggle_collection(false, kernels_only);
    fill(2.0);
    profiler.step().unwrap(); // WARMUP: the first trace is ready
    profiler.step().unwrap(); // RECORD_AND_SAVE, kernels still off
    fill(3.0);
    profiler.toggle_collection(true, kernels_only);
    fill(4.0);
    profiler.step().unwrap(); // NONE: the second trace is ready
    profiler.finish().unwrap();
    let (first, second) = (traces.try_recv().unwrap(), traces.try_recv().unwrap());

    for (t, kept) in [(&first, 0), (&second, 1)] {
        let ops: Vec<_> = t
            .activities
            .iter()
            .filter(|a| a.kind == ActivityType::CpuOp)
            .collect();
        let fills = kernels(t, "fill_f32");
        // Every op and launch is there; of the kernels only the one launched while on,
        // linked to its own op.
        assert_eq!((ops.len(), fills.len()), (2, 1));
        assert_eq!(fills[0].linked_correlation, Some(ops[kept].correlation));
        let launches: Vec<_> = t
            .activities
            .iter()
            .filter(|a| &*a.name == "orLaunchKernel")
            .collect();
        assert_eq!(launches.len(), 2);
        // The launch whose kernel was left out has lost its flow's start.
        let flowed: Vec<bool> = launches.iter().map(|a| a.flow.is_some()).collect();
        assert_eq!(flowed, [kept == 0, kept == 1]);
        // The backend's count is of what the trace kept, the kernel left out not among it
        // (the steps' projections onto the device are no backend's).
        let delivered = t
            .activities
            .iter()
            .filter(|a| {
                !matches!(
                    a.kind,
                    ActivityType::CpuOp
                        | ActivityType::UserAnnotation
                        | ActivityType::GpuUserAnnotation
                )
            })
            .count() as u64;
        let counted: Vec<u64> = t.health.backends.iter().map(|b| b.activities).collect();
        assert_eq!(counted, [delivered]);
    }
}
