//! The C trace builder's throughput: one iteration is one event as a plugin adds it,
//! `addEvent` then `setLastEventName`, through the function table the host hands out.
//!
//! `cargo bench -p omniprof --bench plugin`

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use std::ffi::CString;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use omniprof::plugins::HostTraceBuilder;
use omniprof_plugin_sys::{ProfileEvent, ProfileEventType};

/// Events per `profilerProcessEvents` call in the benchmark (the builder is emptied between).
const BATCH: u64 = 100_000;

fn builder_add_event(c: &mut Criterion) {
    let names: Vec<CString> = ["cudaLaunchKernel", "gemm_64x64", "Memcpy HtoD", "Memset"]
        .iter()
        .map(|n| CString::new(*n).unwrap())
        .collect();
    let mut g = c.benchmark_group("plugin");
    g.throughput(Throughput::Elements(1))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("builder_add_event", |b| {
        let mut builder = HostTraceBuilder::default();
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                builder.clear_activities();
                elapsed += builder.lend(|table| {
                    let (add, name) =
                        (table.add_event.unwrap(), table.set_last_event_name.unwrap());
                    let start = Instant::now();
                    for i in 0..n {
                        let event = ProfileEvent {
                            event_type: ProfileEventType::CONCURRENT_KERNEL,
                            start_time_utc_ns: i as i64 * 1_000,
                            end_time_utc_ns: i as i64 * 1_000 + 500,
                            event_id: i as i64,
                            device_id: 0,
                            resource_id: 7,
                            ..ProfileEvent::default()
                        };
                        // SAFETY: calls through the table lent right now, on this thread; the
                        // event and the names are complete and NUL-terminated.
                        unsafe {
                            black_box(add(table.trace_builder_handle, &event));
                            black_box(name(
                                table.trace_builder_handle,
                                names[i as usize % names.len()].as_ptr(),
                            ));
                        }
                    }
                    start.elapsed()
                });
                left -= n;
            }
            elapsed
        })
    });
    g.finish();
}

criterion_group!(benches, builder_add_event);
criterion_main!(benches);
