//! A training loop profiled on PyTorch's schedule; the README's schedule example (a test
//! keeps the two equal). Run with `cargo run -p omniprof --example schedule`.

use omniprof::{tensorboard_trace_handler, Profiler, Schedule, ScheduleArgs};

fn train_step() {
    omniprof::scope!("train_step");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Cycles of 1 step waiting, 1 warming up (the backends run, their records are dropped)
    // and 2 recorded; twice.
    let schedule = Schedule::new(ScheduleArgs {
        wait: 1,
        warmup: 1,
        active: 2,
        repeat: 2,
        ..Default::default()
    })?;
    // Each cycle's trace lands in traces/ as {host}_{pid}.{unix_ns}.pt.trace.json.
    let traces = tensorboard_trace_handler("traces", None, false);
    let mut profiler = Profiler::builder()
        .schedule(schedule)
        .on_trace_ready(traces.callback())
        .build()?;
    profiler.start()?; // opens ProfilerStep#0
    for _ in 0..10 {
        train_step();
        profiler.step()?; // closes ProfilerStep#N, acts on step N+1, opens ProfilerStep#N+1
    }
    profiler.finish()?;
    for path in traces.written() {
        println!("{}", path.display()); // two files: steps 2-3 and 6-7
    }
    for e in traces.take_errors() {
        eprintln!("{e}");
    }
    Ok(())
}
