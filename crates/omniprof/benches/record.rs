//! Recording costs, with peer profilers measured in the same run.
//!
//! `cargo bench -p omniprof --bench record`. One iteration is one begin+end pair. The
//! writers are measured apart, in `--bench export`.

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use omniprof::backends::{
    ActivityProfiler, ActivitySink, BackendError, CorrelationListener, HostOps, ProfilerSession,
};
use omniprof::recording::{
    pop_op, pop_op_with_autograd, push_op, push_op_packed, record_memory, Autograd, MemoryUsage,
    Name,
};
use omniprof::trace::{ActivitySet, ActivityType, Window};
use omniprof::{record_function, Config, FlightRecorder, Profiler};

/// Room for the largest sample criterion asks for, so no iteration hits the cap.
const BENCH_CAP: &str = "OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=67108864";

/// A backend whose sessions keep per-thread correlation stacks, as a device runtime does; it
/// takes part only while `CORRELATE` is set.
struct StackBackend;
struct StackSession;
struct StackListener;

static CORRELATE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static STACKS: RefCell<(Vec<u64>, Vec<u64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

impl CorrelationListener for StackListener {
    fn push_correlation_id(&self, id: u64) {
        STACKS.with(|s| s.borrow_mut().0.push(id));
    }
    fn pop_correlation_id(&self) {
        STACKS.with(|s| s.borrow_mut().0.pop());
    }
    fn push_user_correlation_id(&self, id: u64) {
        STACKS.with(|s| s.borrow_mut().1.push(id));
    }
    fn pop_user_correlation_id(&self) {
        STACKS.with(|s| s.borrow_mut().1.pop());
    }
}

impl ActivityProfiler for StackBackend {
    fn name(&self) -> &str {
        "bench-stacks"
    }
    fn available_activities(&self) -> ActivitySet {
        [ActivityType::ConcurrentKernel].into_iter().collect()
    }
    fn configure(
        &self,
        _: ActivitySet,
        _: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        Ok(CORRELATE
            .load(Ordering::Relaxed)
            .then(|| Box::new(StackSession) as Box<dyn ProfilerSession>))
    }
}

impl ProfilerSession for StackSession {
    fn process_trace(
        &mut self,
        _: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        Ok(())
    }
    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(Arc::new(StackListener))
    }
}

fn session() -> Profiler {
    session_with("")
}

/// A started session with `extra` config text on top of the bench's own.
fn session_with(extra: &str) -> Profiler {
    let mut config = Config::default();
    config.apply(BENCH_CAP).expect("valid bench config");
    config.apply(extra).expect("valid bench config");
    let mut p = Profiler::builder().config(config).build().unwrap();
    p.start().unwrap();
    p
}

/// Pins the calling thread to CPU `cpu`. Threads spawned for the multi-thread figures are
/// pinned to distinct CPUs: left to the scheduler, two fresh threads often share one CPU for
/// several 4 ms ticks before the other is used (seen with `perf sched` on these 2-vCPU
/// machines), which times the kernel's thread placement rather than the recorder.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: `set` is a plain bit mask initialized by CPU_ZERO/CPU_SET; sched_setaffinity
    // only reads it, and a failure just leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs `work` on `threads` threads pinned to distinct CPUs, released together; returns the
/// longest of the durations they report.
fn on_threads(threads: usize, work: impl Fn() -> Duration + Send + Sync + 'static) -> Duration {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let barrier = Arc::new(Barrier::new(threads));
    let work = Arc::new(work);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (barrier, work) = (barrier.clone(), work.clone());
            std::thread::spawn(move || {
                if cpus >= threads {
                    pin_to_cpu(i);
                }
                barrier.wait();
                work()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap()
}

/// Times `iters` ranges on each of `threads` threads inside one session; the drain at stop is
/// not timed.
fn ranges_in_session(iters: u64, threads: usize) -> Duration {
    ranges_in_session_with(iters, threads, "")
}

/// [`ranges_in_session`] with `extra` config text.
fn ranges_in_session_with(iters: u64, threads: usize, extra: &str) -> Duration {
    let name = Name::new("bench_range");
    let mut p = session_with(extra);
    let run = move || {
        let start = Instant::now();
        for _ in 0..iters {
            let g = record_function(name);
            black_box(&g);
        }
        start.elapsed()
    };
    let elapsed = if threads == 1 {
        run()
    } else {
        on_threads(threads, run)
    };
    black_box(p.stop().unwrap());
    elapsed
}

/// Unpacks nothing: the benchmark times the ops' recording, not the drain.
fn unpack_nothing(_: &[u64], _: &mut Vec<(Arc<str>, omniprof::trace::Value)>) {}

/// Ops per session in [`ops_in_sessions`]: a few hundred training steps' ops, so that what a
/// session keeps beside its records stays the size a profiled window leaves, not the size
/// criterion's millions of iterations would.
const OPS_PER_SESSION: u64 = 50_000;

/// Times `iters` ops pushed and popped as PyTorch's op observer does (by key, named by a C
/// string), in sessions of [`OPS_PER_SESSION`]: with `shapes`, each with 12 packed words
/// (what `x.add_(1)`'s inputs pack as under `record_shapes`) and ended with autograd's
/// numbers. The stops are not timed.
fn ops_in_sessions(iters: u64, shapes: bool) -> Duration {
    let words = [0_u64; 12];
    let numbers = Autograd {
        sequence_number: 7,
        forward_thread: 0,
        thread: 1,
    };
    let mut elapsed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let ops = left.min(OPS_PER_SESSION) as usize;
        left -= ops as u64;
        let mut p = session();
        let start = Instant::now();
        for key in 0..ops {
            if shapes {
                // SAFETY: the name is NUL-terminated.
                unsafe { push_op_packed(c"aten::add_".as_ptr(), key, &words, unpack_nothing) };
                black_box(pop_op_with_autograd(key, numbers));
            } else {
                // SAFETY: as above.
                unsafe { push_op(c"aten::add_".as_ptr(), key) };
                black_box(pop_op(key));
            }
        }
        elapsed += start.elapsed();
        black_box(p.stop().unwrap());
    }
    elapsed
}

/// Times `iters` allocations and frees reported as PyTorch's allocator reports them under
/// `profile_memory` (two reports an iteration), in sessions of [`OPS_PER_SESSION`]
/// iterations. The stops are not timed.
fn memory_reports_in_sessions(iters: u64) -> Duration {
    let alloc = MemoryUsage {
        addr: 0x7f00_0000_1000,
        bytes: 256,
        total_allocated: 4096,
        total_reserved: 0,
        device_type: 0,
        device_index: -1,
    };
    let free = MemoryUsage {
        bytes: -256,
        total_allocated: 3840,
        ..alloc
    };
    let mut elapsed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(OPS_PER_SESSION);
        left -= n;
        let mut p = session();
        let start = Instant::now();
        for _ in 0..n {
            record_memory(black_box(&alloc));
            record_memory(black_box(&free));
        }
        elapsed += start.elapsed();
        black_box(p.stop().unwrap());
    }
    elapsed
}

/// Times `iters` ranges recorded by a running flight recorder (the default rings: 30 s,
/// 64 MiB, which `iters` past 2M ranges wrap): the always-on recorder's cost per range.
fn ranges_in_flight(iters: u64) -> Duration {
    let name = Name::new("bench_range");
    let recorder = FlightRecorder::builder().start().unwrap();
    let start = Instant::now();
    for _ in 0..iters {
        let g = record_function(name);
        black_box(&g);
    }
    let elapsed = start.elapsed();
    recorder.stop();
    elapsed
}

/// Times `iters` pairs of raw clock reads on each of `threads` threads.
fn clock_pairs(iters: u64, threads: usize) -> Duration {
    let run = move || {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(omniprof::clock::ticks());
            black_box(omniprof::clock::ticks());
        }
        start.elapsed()
    };
    if threads == 1 {
        run()
    } else {
        on_threads(threads, run)
    }
}

fn record(c: &mut Criterion) {
    let mut g = c.benchmark_group("record");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("range_enabled", |b| {
        b.iter_custom(|iters| ranges_in_session(iters, 1))
    });
    g.bench_function("range_flight", |b| b.iter_custom(ranges_in_flight));
    // PyTorch's ops through the push/pop API: default flags, and with shapes and autograd's
    // numbers (`record_shapes` in a training step).
    g.bench_function("op_pushed", |b| {
        b.iter_custom(|iters| ops_in_sessions(iters, false))
    });
    g.bench_function("op_packed_autograd", |b| {
        b.iter_custom(|iters| ops_in_sessions(iters, true))
    });
    // An allocation and its free under `profile_memory`: two allocator reports.
    g.bench_function("memory_report_pair", |b| {
        b.iter_custom(memory_reports_in_sessions)
    });
    omniprof::backends::register_profiler_factory(
        "bench-stacks",
        Box::new(|| Box::new(StackBackend)),
    );
    CORRELATE.store(true, Ordering::Relaxed);
    g.bench_function("range_enabled_correlated", |b| {
        b.iter_custom(|iters| ranges_in_session(iters, 1))
    });
    CORRELATE.store(false, Ordering::Relaxed);
    // Two software perf counters counted on the recording thread and sampled every
    // millisecond by the perf backend's own thread.
    g.bench_function("range_enabled_perf", |b| {
        b.iter_custom(|iters| {
            ranges_in_session_with(iters, 1, "PERF_EVENTS = task-clock, context-switches")
        })
    });
    g.bench_function("range_enabled_2threads", |b| {
        b.iter_custom(|iters| ranges_in_session(iters, 2))
    });
    // The floor under the two above: the two clock reads a range needs and nothing else, on
    // one and on two threads. On a VM the two-thread floor moves with how the host schedules
    // the vCPUs, so the recorder's scaling is judged against it in the same run.
    g.bench_function("clock_pair_floor", |b| {
        b.iter_custom(|iters| clock_pairs(iters, 1))
    });
    g.bench_function("clock_pair_floor_2threads", |b| {
        b.iter_custom(|iters| clock_pairs(iters, 2))
    });
    // What `stop` costs per recorded range: draining one thread's records into the trace.
    g.bench_function("drain_at_stop", |b| {
        b.iter_custom(|iters| {
            let name = Name::new("bench_range");
            let mut p = session();
            for _ in 0..iters {
                let g = record_function(name);
                black_box(&g);
            }
            let start = Instant::now();
            let trace = p.stop().unwrap();
            let elapsed = start.elapsed();
            drop(black_box(trace));
            elapsed
        })
    });
    // The same for PyTorch's ops in a training step: each ended with autograd's numbers,
    // which the drain writes as two args and joins into `fwdbwd` flows.
    g.bench_function("drain_ops_autograd", |b| {
        b.iter_custom(|iters| {
            let mut p = session();
            for key in 0..iters as usize {
                let numbers = Autograd {
                    sequence_number: key as i64,
                    forward_thread: 0,
                    thread: 1,
                };
                // SAFETY: the name is NUL-terminated.
                unsafe { push_op(c"aten::add_".as_ptr(), key) };
                black_box(pop_op_with_autograd(key, numbers));
            }
            let start = Instant::now();
            let trace = p.stop().unwrap();
            let elapsed = start.elapsed();
            drop(black_box(trace));
            elapsed
        })
    });
    let name = Name::new("bench_range");
    g.bench_function("range_disabled", |b| {
        b.iter(|| {
            let g = record_function(name);
            black_box(&g);
        })
    });
    g.finish();
}

fn peers(c: &mut Criterion) {
    let mut g = c.benchmark_group("peers");
    g.sample_size(20).measurement_time(Duration::from_secs(3));

    g.bench_function("tracing_chrome", |b| {
        use tracing_subscriber::layer::SubscriberExt;
        let (layer, _flush) = tracing_chrome::ChromeLayerBuilder::new()
            .writer(std::io::sink())
            .build();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            b.iter(|| {
                let s = tracing::info_span!("bench_range").entered();
                black_box(&s);
            })
        });
    });

    g.bench_function("puffin", |b| {
        puffin::set_scopes_on(true);
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                puffin::profile_scope!("bench_range");
                // Frames bound puffin's memory, as a real frame loop does.
                if i % 1000 == 999 {
                    puffin::GlobalProfiler::lock().new_frame();
                }
            }
            start.elapsed()
        });
        puffin::set_scopes_on(false);
    });

    // Measured as performance-anchors §1 does: 1000 local spans per root, with the root and
    // the reporting of the spans included. The report interval is long so that the spans
    // are collected by the `flush` inside the timed region, not by fastrace's background
    // thread on the other core while the loop runs.
    g.bench_function("fastrace", |b| {
        fastrace::set_reporter(
            NullReporter,
            fastrace::collector::Config::default().report_interval(Duration::from_secs(3600)),
        );
        b.iter_custom(|iters| {
            let start = Instant::now();
            let mut left = iters;
            while left > 0 {
                let batch = left.min(1000);
                let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
                let _parent = root.set_local_parent();
                for _ in 0..batch {
                    let s = fastrace::local::LocalSpan::enter_with_local_parent("bench_range");
                    black_box(&s);
                }
                left -= batch;
            }
            fastrace::flush();
            start.elapsed()
        });
    });
    g.finish();
}

struct NullReporter;

impl fastrace::collector::Reporter for NullReporter {
    fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
        black_box(spans);
    }
}

criterion_group!(benches, record, peers);
criterion_main!(benches);
