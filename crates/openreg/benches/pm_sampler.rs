//! What the PM sampler costs a workload: the demo's shape (host threads of training steps
//! launching 48 × 48 matmuls and copies on two shared streams) profiled in a session that
//! records the device timeline, without and with `gpu_pm_counter` (every device sampled
//! every millisecond on its own thread). One iteration is one whole session: start, the
//! workload, stop.

use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use omniprof::{record_function, record_op, ActivitySet, Profiler};
use openreg::{HostBuffer, Kernel, Stream};

const THREADS: usize = 4;
const STEPS: usize = 40;
const DIM: usize = 48;
const BYTES: usize = DIM * DIM * 4;

fn workload() {
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let stream = Stream::pooled(0, t % 2).unwrap();
                let host = HostBuffer::zeroed(BYTES);
                let a = openreg::malloc(0, BYTES).unwrap();
                let b = openreg::malloc(0, BYTES).unwrap();
                for step in 0..STEPS {
                    let _step = record_function(format!("ProfilerStep#{step}"));
                    {
                        let _copy = record_op("aten::copy_");
                        openreg::memcpy_async(&a, &host, BYTES, &stream).unwrap();
                    }
                    for _ in 0..3 {
                        let _mm = record_op("aten::mm");
                        let kernel = Kernel::Matmul {
                            a: a.clone(),
                            b: b.clone(),
                            out: b.clone(),
                            n: DIM,
                        };
                        openreg::launch_kernel(kernel, &stream).unwrap();
                    }
                    let _back = record_op("aten::to");
                    openreg::memcpy_async(&host, &b, BYTES, &stream).unwrap();
                    stream.synchronize();
                }
            });
        }
    });
}

fn session(types: &str) -> Duration {
    let activities = ActivitySet::parse_list(types).unwrap();
    let mut profiler = Profiler::builder().activities(activities).build().unwrap();
    let start = Instant::now();
    profiler.start().unwrap();
    workload();
    let trace = profiler.stop().unwrap();
    let elapsed = start.elapsed();
    black_box(trace);
    elapsed
}

const OFF: &str = "cpu_op,user_annotation,runtime,kernel,gpu_memcpy";
const ON: &str = "cpu_op,user_annotation,runtime,kernel,gpu_memcpy,gpu_pm_counter";

fn pm_sampler(c: &mut Criterion) {
    let mut g = c.benchmark_group("pm_sampler");
    g.sample_size(20);
    g.bench_function("demo_workload_pm_off", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| session(OFF)).sum())
    });
    g.bench_function("demo_workload_pm_on", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| session(ON)).sum())
    });
    g.finish();
}

criterion_group!(benches, pm_sampler);
criterion_main!(benches);
