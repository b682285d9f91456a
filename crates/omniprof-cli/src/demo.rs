//! `omniprof demo`: a small model-like workload on several host threads and the simulated
//! OpenReg accelerator, profiled end to end.
//!
//! Each worker thread runs training steps made of nested user ranges (`ProfilerStep#N`,
//! `forward`, `block_i`, `backward`, `optimizer`) around host ops. Ops like `aten::mm` launch
//! real matrix multiplies on an OpenReg stream (two streams shared by the threads), copies
//! move the data in and out, and `aten::relu` / `aten::sum` compute on the host. The trace
//! shows host ops, runtime launches, kernels and copies on device rows, `ac2g` flows from
//! each launch to its work, and the user ranges projected onto the streams. With
//! `--mode stubs` the device is timed through OpenReg's profiler stubs instead, and the
//! summary table shows each op's device time.
//!
//! With `--schedule wait,warmup,active[,repeat]` the main thread coordinates: after every
//! training iteration of all workers it calls `Profiler::step`, so its `ProfilerStep#N` range
//! spans the whole iteration, and the workers add none of their own. Each recorded cycle is
//! written into `--trace-dir` by the TensorBoard trace handler.
//!
//! With `--config FILE` the session reads Kineto config text (`ACTIVITY_TYPES`, the scope
//! profiler's keys, `OMNIPROF_PM_SAMPLING_PERIOD_USECS`, `PERF_EVENTS`, ...), so counters and
//! per-kernel metrics are shown by configuration alone; the demo then also says how many
//! counter samples the trace holds.
//!
//! With `--ondemand --seconds N` no session runs: the main thread calls `omniprof::step()`
//! after every iteration of all workers while the process serves `omniprof trigger`, and
//! when the time is up it cancels a trace still running and stops serving.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use omniprof::analysis::{key_averages, KeyAveragesOptions, ReportOptions, SortKey};
use omniprof::export::chrome;
use omniprof::keys::metadata;
use omniprof::{
    record_function, record_op, tensorboard_trace_handler, Config, Profiler, ProfilerBuilder,
    Schedule, Trace,
};
use openreg::{DeviceBuffer, HostBuffer, Kernel, Stream};

/// Profile a sample workload and write its trace.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Where to write the trace (`.json`, or `.json.gz` for gzip).
    #[arg(short, long, default_value = "omniprof_demo.pt.trace.json")]
    pub output: PathBuf,
    /// Host worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Training steps per thread.
    #[arg(long, default_value_t = 40)]
    pub steps: usize,
    /// `timeline`: OpenReg's backend records the device timeline. `stubs`: the legacy
    /// profiler stubs time every op on the device instead, and the summary table is printed.
    #[arg(long, value_enum, default_value_t = Mode::Timeline)]
    pub mode: Mode,
    /// Profile on PyTorch's schedule: wait, warm-up and active steps per cycle, and cycles
    /// (0 or absent: until the steps run out). Needs --trace-dir.
    #[arg(
        long,
        value_name = "WAIT,WARMUP,ACTIVE[,REPEAT]",
        value_parser = str::parse::<Schedule>,
        allow_hyphen_values = true,
        requires = "trace_dir"
    )]
    pub schedule: Option<Schedule>,
    /// With --schedule: the directory each cycle's trace is written into, as
    /// `{host}_{pid}.{unix_ns}.pt.trace.json` (TensorBoard's and HTA's layout).
    #[arg(long, value_name = "DIR", requires = "schedule")]
    pub trace_dir: Option<PathBuf>,
    /// Run the workload without a session, stepping every iteration, and serve on-demand
    /// triggers (`omniprof trigger --pid <pid> ...`) until --seconds have passed. Each
    /// trigger picks its own output, and the run ends by time, not by --steps.
    #[arg(
        long,
        requires = "seconds",
        conflicts_with_all = ["schedule", "mode", "steps", "output"]
    )]
    pub ondemand: bool,
    /// With --ondemand: how long to run.
    #[arg(long, value_name = "N", requires = "ondemand")]
    pub seconds: Option<u64>,
    /// Kineto config text for the session (`-` for standard input), e.g.
    /// `ACTIVITY_TYPES=kernel,scope_profiler` and `SCOPE_PROFILER_METRICS=flops`. A line
    /// that does not parse exits 2 naming it.
    #[arg(long, value_name = "FILE", conflicts_with = "ondemand")]
    pub config: Option<PathBuf>,
}

/// How the device side is profiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Timeline,
    Stubs,
}

/// Side of the square matrices.
const DIM: usize = 48;
const BYTES: usize = DIM * DIM * 4;
/// Device streams the threads share.
const STREAMS: usize = 2;
const LAYERS: usize = 3;

pub fn run(args: &DemoArgs) -> ExitCode {
    let config = match &args.config {
        Some(path) => match read_config(path) {
            Ok(config) => Some(config),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    match profile(args, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type DemoResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The config text of `path` (`-`: standard input), parsed; warnings go to standard error.
fn read_config(path: &Path) -> Result<Config, String> {
    let text = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map(|_| text)
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut config = Config::default();
    let warnings = config
        .apply(&text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for w in warnings {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(config)
}

fn profile(args: &DemoArgs, config: Option<Config>) -> DemoResult<()> {
    let threads = args.threads.max(1);
    let workers = (0..threads)
        .map(Worker::new)
        .collect::<Result<Vec<_>, _>>()?;
    let mut builder = match args.mode {
        Mode::Timeline => Profiler::builder(),
        Mode::Stubs => Profiler::builder().stubs(openreg::profiler::DEVICE_TYPE),
    };
    if let Some(config) = config {
        builder = builder.config(config);
    }
    if let (true, Some(seconds)) = (args.ondemand, args.seconds) {
        return serve_triggers(workers, Duration::from_secs(seconds));
    }
    if let (Some(schedule), Some(dir)) = (args.schedule, &args.trace_dir) {
        return profile_scheduled(builder, schedule, dir, workers, args.steps);
    }
    let mut profiler = builder.build()?;
    profiler.start()?;
    let checksum = run_workers(workers, args.steps, None)?;
    let trace = profiler.stop()?;
    let stats = chrome::save(&trace, &args.output)?;
    let device = trace
        .activities
        .iter()
        .filter(|a| a.kind.is_device())
        .count();
    println!(
        "wrote {} ({} trace events: {} host and {} device activities on {} threads; checksum {checksum:.3})",
        args.output.display(),
        stats.events,
        trace.activities.len() - device,
        device,
        trace.threads.len(),
    );
    report_drops(&trace);
    if args.config.is_some() && !trace.counters.is_empty() {
        println!(
            "{} counter samples on {} tracks (omniprof summary {} --counters; --metrics for \
             per-kernel metrics)",
            trace.counters.samples(),
            trace.counters.series().len(),
            args.output.display()
        );
    }
    if args.mode == Mode::Stubs {
        let averages = key_averages(&trace, &KeyAveragesOptions::default());
        let report = ReportOptions {
            sort_by: Some(SortKey::SelfDeviceTimeTotal),
            row_limit: Some(15),
        };
        print!("\n{}", averages.table(&report));
    }
    println!("open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing");
    Ok(())
}

/// Runs the workload with `schedule`, printing each trace file as the handler writes it.
fn profile_scheduled(
    builder: ProfilerBuilder,
    schedule: Schedule,
    dir: &Path,
    workers: Vec<Worker>,
    steps: usize,
) -> DemoResult<()> {
    let handler = tensorboard_trace_handler(dir, None, false);
    let mut profiler = builder
        .schedule(schedule)
        .on_trace_ready(handler.callback())
        .build()?;
    let mut printed = 0;
    let mut failed = 0;
    let mut report = || {
        let written = handler.written();
        for path in &written[printed..] {
            println!("wrote {}", path.display());
        }
        printed = written.len();
        for e in handler.take_errors() {
            eprintln!("error: {e}");
            failed += 1;
        }
    };
    profiler.start()?;
    let mut step_error = None;
    let checksum = run_workers(
        workers,
        steps,
        Some(&mut || {
            if let Err(e) = profiler.step() {
                step_error.get_or_insert(e);
            }
            report();
            true
        }),
    )?;
    if let Some(e) = step_error {
        return Err(e.into());
    }
    profiler.finish()?;
    report();
    println!(
        "{printed} traces in {} (checksum {checksum:.3}); open them with TensorBoard's profiler \
         plugin (--logdir {}) or at https://ui.perfetto.dev",
        dir.display(),
        dir.display()
    );
    if failed > 0 {
        return Err(format!("{failed} traces could not be written").into());
    }
    Ok(())
}

/// Runs the workload for `duration`, stepping the process-wide iteration after each
/// iteration of all workers, while the on-demand engine serves triggers.
fn serve_triggers(workers: Vec<Worker>, duration: Duration) -> DemoResult<()> {
    omniprof::ondemand::serve()?;
    let pid = std::process::id();
    println!(
        "omniprof demo: pid {pid} serves on-demand triggers for {} s; try",
        duration.as_secs()
    );
    println!("  omniprof trigger --pid {pid} --duration-ms 500");
    println!("  omniprof trigger --pid {pid} --iterations 5");
    // The caller (a person or a test) reads the lines above before the run ends.
    std::io::stdout().flush()?;
    let deadline = Instant::now() + duration;
    let mut iterations = 0u64;
    let checksum = run_workers(
        workers,
        usize::MAX,
        Some(&mut || {
            omniprof::step();
            iterations += 1;
            Instant::now() < deadline
        }),
    )?;
    if omniprof::ondemand::cancel() {
        println!("the run ended while a trace was in progress: it was cancelled");
    }
    // An exiting process leaves no socket for `omniprof trigger --list` to clean up.
    omniprof::ondemand::stop_serving();
    println!("ran {iterations} iterations (checksum {checksum:.3})");
    Ok(())
}

fn report_drops(trace: &Trace) {
    for key in [metadata::DROPPED_EVENTS, metadata::OUT_OF_WINDOW_EVENTS] {
        if let Some(n) = trace
            .metadata(key)
            .and_then(|v| v.as_i64())
            .filter(|&n| n > 0)
        {
            eprintln!("warning: {n} {}", key.replace('_', " "));
        }
    }
    if let Some(errors) = trace.metadata(metadata::BACKEND_ERRORS) {
        eprintln!("warning: backend errors: {}", errors.to_json());
    }
}

/// One host thread's device state: its stream, weights and activations.
struct Worker {
    index: usize,
    stream: Stream,
    weights: Vec<DeviceBuffer>,
    x: DeviceBuffer,
    host: HostBuffer,
}

impl Worker {
    fn new(index: usize) -> openreg::Result<Self> {
        let stream = Stream::pooled(0, index % STREAMS)?;
        let weights = (0..LAYERS)
            .map(|_| openreg::malloc(0, BYTES))
            .collect::<openreg::Result<Vec<_>>>()?;
        for (l, w) in weights.iter().enumerate() {
            let init = HostBuffer::from_f32s(&matrix(index as f32 + l as f32));
            openreg::memcpy_async(w, &init, BYTES, &stream)?;
        }
        stream.synchronize();
        Ok(Self {
            index,
            stream,
            weights,
            x: openreg::malloc(0, BYTES)?,
            host: HostBuffer::from_f32s(&matrix(index as f32)),
        })
    }

    /// One training step; `annotate`: wrap it in this thread's own `ProfilerStep#<step>`
    /// range (not when a scheduled profiler's step range spans it).
    fn train_step(&self, step: usize, annotate: bool) -> openreg::Result<f64> {
        let _step = annotate.then(|| record_function(format!("ProfilerStep#{step}")));
        {
            let _copy = record_op("aten::copy_").with_arg("non_blocking", true);
            openreg::memcpy_async(&self.x, &self.host, BYTES, &self.stream)?;
        }
        {
            let _fwd = record_function("forward");
            for (layer, w) in self.weights.iter().enumerate() {
                let _block = record_function(format!("block_{layer}"));
                self.mm("aten::mm", w)?;
                let _relu = record_op("aten::relu");
                relu(&self.host);
            }
        }
        let loss = sum(&self.host);
        {
            let _bwd = record_function("backward");
            for w in self.weights.iter().rev() {
                self.mm("aten::mm_backward", w)?;
            }
        }
        {
            let _opt = record_function("optimizer");
            let _op = record_op("aten::fill_");
            let value = (self.index + step) as f32 * 1e-3;
            openreg::launch_kernel(
                Kernel::Fill {
                    out: self.x.clone(),
                    value,
                },
                &self.stream,
            )?;
        }
        {
            let _item = record_op("aten::item");
            openreg::memcpy_async(&self.host, &self.x, BYTES, &self.stream)?;
            self.stream.synchronize();
        }
        Ok(loss)
    }

    fn mm(&self, op: &str, w: &DeviceBuffer) -> openreg::Result<()> {
        let dims: &[i64] = &[DIM as i64, DIM as i64];
        let _op = record_op(op).with_input_shapes(&[dims, dims]);
        let kernel = Kernel::Matmul {
            a: self.x.clone(),
            b: w.clone(),
            out: self.x.clone(),
            n: DIM,
        };
        openreg::launch_kernel(kernel, &self.stream)
    }
}

/// Runs the steps on one named thread per worker; returns a checksum of the results, so the
/// arithmetic cannot be optimized away. With a `coordinator`, the workers run each step
/// together and the coordinator runs on this thread after every step, while they wait; it
/// returns whether to go on (the run ends early when it says no).
fn run_workers(
    workers: Vec<Worker>,
    steps: usize,
    coordinator: Option<&mut dyn FnMut() -> bool>,
) -> DemoResult<f64> {
    let barrier = coordinator
        .is_some()
        .then(|| Arc::new(Barrier::new(workers.len() + 1)));
    let stop = Arc::new(AtomicBool::new(false));
    let wait = |barrier: &Option<Arc<Barrier>>| {
        if let Some(b) = barrier {
            b.wait();
        }
    };
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let barrier = barrier.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("worker-{}", w.index))
                .spawn(move || {
                    // The stubs time on the current stream: make it this worker's.
                    openreg::set_current_stream(&w.stream);
                    let mut total = Ok(0.0);
                    for s in 0..steps {
                        wait(&barrier);
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        // After an error the worker still meets the others at each step.
                        if let Ok(sum) = &mut total {
                            match w.train_step(s, barrier.is_none()) {
                                Ok(loss) => *sum += loss,
                                Err(e) => total = Err(e),
                            }
                        }
                        wait(&barrier);
                    }
                    total
                })
        })
        .collect::<Result<_, _>>()?;
    if let Some(step) = coordinator {
        for _ in 0..steps {
            wait(&barrier); // the step begins
            wait(&barrier); // every worker finished it
            if !step() {
                stop.store(true, Ordering::Release);
                wait(&barrier); // the workers see the stop at the next step's beginning
                break;
            }
        }
    }
    let mut total = 0.0;
    for h in handles {
        total += h.join().map_err(|_| "a demo worker panicked")??;
    }
    Ok(total)
}

fn matrix(seed: f32) -> Vec<f32> {
    (0..DIM * DIM)
        .map(|i| (i as f32 * 0.37 + seed).sin() * 0.1)
        .collect()
}

fn relu(host: &HostBuffer) -> Vec<f32> {
    host.to_f32s().into_iter().map(|v| v.max(0.0)).collect()
}

fn sum(host: &HostBuffer) -> f64 {
    let _op = record_op("aten::sum");
    host.to_f32s().iter().map(|&v| v as f64).sum()
}
