//! OpenReg under omniprof: four host threads launching concurrently on two streams lose,
//! duplicate and mislink nothing; work still running at stop is dropped and counted.

use std::collections::HashMap;
use std::time::Duration;

use omniprof::trace::{ActivityType, Value};
use omniprof::{record_function, record_op, Profiler};
use omniprof_test_support::lock::serial;
use openreg::{Kernel, Stream};

const THREADS: usize = 4;
const OPS: usize = 200;

#[test]
fn concurrent_launches_are_all_linked_to_their_own_ops() {
    let _serial = serial();
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let stream = Stream::pooled(0, t % 2).unwrap();
                let out = openreg::malloc(0, 256).unwrap();
                let _range = record_function(format!("thread_{t}"));
                for i in 0..OPS {
                    let _op = record_op(format!("op_{t}_{i}"));
                    openreg::launch_kernel(
                        Kernel::Fill {
                            out: out.clone(),
                            value: i as f32,
                        },
                        &stream,
                    )
                    .unwrap();
                }
                stream.synchronize();
            });
        }
    });
    let trace = profiler.stop().unwrap();

    let ops: HashMap<u64, &omniprof::trace::Activity> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::CpuOp)
        .map(|a| (a.correlation, a))
        .collect();
    let launches: HashMap<u64, &omniprof::trace::Activity> = trace
        .activities
        .iter()
        .filter(|a| &*a.name == "orLaunchKernel")
        .map(|a| (a.correlation, a))
        .collect();
    let kernels: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
        .collect();
    assert_eq!(ops.len(), THREADS * OPS);
    assert_eq!(
        launches.len(),
        THREADS * OPS,
        "one launch per op, none lost"
    );
    assert_eq!(
        kernels.len(),
        THREADS * OPS,
        "one kernel per launch, none lost"
    );
    let mut kernels_per_op: HashMap<u64, usize> = HashMap::new();
    for k in &kernels {
        let launch = launches[&k.correlation];
        let op = ops[&k.linked_correlation.expect("every kernel is linked")];
        assert_eq!(launch.linked_correlation, k.linked_correlation);
        assert_eq!(
            launch.resource, op.resource,
            "launched on the op's own thread"
        );
        assert!(op.start_ns <= launch.start_ns && launch.end_ns <= op.end_ns);
        assert_eq!(k.resource, k.arg("stream").and_then(Value::as_i64).unwrap());
        let flow = k.flow.expect("a flow ends on every kernel");
        assert_eq!(flow.id, launch.flow.expect("every launch starts a flow").id);
        *kernels_per_op.entry(op.correlation).or_default() += 1;
    }
    assert!(kernels_per_op.values().all(|&n| n == 1), "no duplicates");
    // Each thread's range is projected onto the stream it launched on.
    let projected = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::GpuUserAnnotation)
        .count();
    assert_eq!(projected, THREADS);
}

#[test]
fn work_still_running_at_stop_is_dropped_and_counted() {
    let _serial = serial();
    let stream = Stream::new(0).unwrap();
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    {
        let _op = record_op("long");
        openreg::launch_kernel(Kernel::Busy(Duration::from_millis(30)), &stream).unwrap();
    }
    let trace = profiler.stop().unwrap();
    assert!(trace
        .activities
        .iter()
        .all(|a| a.kind != ActivityType::ConcurrentKernel));
    assert_eq!(trace.health.out_of_window_events, Some(1));
    assert!(trace
        .activities
        .iter()
        .any(|a| &*a.name == "orLaunchKernel"));
}
