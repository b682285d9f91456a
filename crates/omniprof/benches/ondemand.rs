//! The cost of `omniprof::step()`, which an application calls once per iteration.
//!
//! `cargo bench -p omniprof --bench ondemand`. `step/idle`: no request (the engine waits
//! for one). `step/recording`: an iteration-based on-demand trace is collecting; its end is
//! far away, so every step is an ordinary one inside the recording.

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("step");
    // At ~2 ns a step, longer runs would reach the recording's end (2^31 − 1 iterations).
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("idle", |b| b.iter(|| black_box(omniprof::step())));

    let dir = tempfile::tempdir_in(omniprof::on_demand::on_demand_trace_dir()).unwrap();
    let start = omniprof::step() + 1;
    let ticket = omniprof::on_demand::request_on_demand(&format!(
        "PROFILE_START_ITERATION={start}\nACTIVITIES_ITERATIONS=2147483647\n\
         ACTIVITIES_LOG_FILE={}/bench.json",
        dir.path().display()
    ))
    .unwrap();
    omniprof::step();
    assert_eq!(
        omniprof::on_demand::on_demand_status().state,
        omniprof::on_demand::OnDemandState::CollectTrace
    );
    group.bench_function("recording", |b| b.iter(|| black_box(omniprof::step())));
    group.finish();
    omniprof::on_demand::cancel_on_demand();
    assert_eq!(
        ticket.wait(Duration::from_secs(10)),
        Err(omniprof::on_demand::TraceFailed::Cancelled)
    );
}

criterion_group!(benches, step);
criterion_main!(benches);
