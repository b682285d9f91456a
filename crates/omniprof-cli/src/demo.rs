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
//! With `--ondemand --seconds N` no session runs: the main thread calls `omniprof::step()`
//! after every iteration of all workers while the process serves `omniprof trigger`, and
//! when the time is up it cancels a trace still running and stops serving.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use omniprof::{
    record_function, record_op, tensorboard_trace_handler, Config, Profiler, ProfilerBuilder,
    Schedule,
};
use omniprof_analysis::{key_averages, KeyAveragesOptions, SortKey, TableOptions};
use omniprof_trace::keys::metadata;
use omniprof_trace::{Trace, Value};
use openreg::{DeviceBuffer, HostBuffer, Kernel, Stream};

/// Profile a sample workload and write its trace.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Where to write the trace: `.json`, `.json.gz` (gzip) or `.pftrace` (Perfetto); `-`
    /// for JSON on standard output, and then what the demo says goes to standard error. Default: the config's
    /// ACTIVITIES_LOG_FILE when it sets one, else omniprof_demo.pt.trace.json.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Host worker threads (at least 1).
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    pub threads: usize,
    /// Training steps per thread (at least 1). Default: 40, or as many as fit in the
    /// config's ACTIVITIES_DURATION_MSECS when it sets one.
    #[arg(long, value_parser = at_least_one)]
    pub steps: Option<usize>,
    /// Kineto config text for the session (ACTIVITY_TYPES, ...): its ACTIVITIES_LOG_FILE is
    /// the output and its ACTIVITIES_DURATION_MSECS (or _SECS) how long the run records,
    /// unless -o or --steps say otherwise. A bad line exits 2 naming it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
        conflicts_with_all = ["schedule", "mode", "steps", "output", "config"]
    )]
    pub ondemand: bool,
    /// With --ondemand: how long to run.
    #[arg(long, value_name = "N", requires = "ondemand")]
    pub seconds: Option<u64>,
}

/// A count that must be at least 1 (0 threads or steps would profile nothing).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count: {e}")),
    }
}

/// `-o -`: the trace goes to standard output.
const STDOUT: &str = "-";

/// How the device side is profiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    Timeline,
    Stubs,
}

/// Side of the square matrices.
const DIM: usize = 48;
const BYTES: usize = DIM * DIM * 4;
/// Device streams the threads share.
const STREAMS: usize = 2;
const LAYERS: usize = 3;

/// The trace's path when neither -o nor the config names one.
const DEFAULT_OUTPUT: &str = "omniprof_demo.pt.trace.json";
/// Steps per thread when neither --steps nor the config's duration says how many.
const DEFAULT_STEPS: usize = 40;

pub(crate) fn run(args: &DemoArgs) -> ExitCode {
    let config = match &args.config {
        Some(path) => match read_config(path) {
            Ok(config) => config,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => Config::default(),
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

/// The config of `--config FILE`; the error names the file and the line.
fn read_config(path: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    Config::parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
}

/// How long the run records: `--steps` steps per thread, or for the config's duration.
#[derive(Clone, Copy)]
enum Length {
    Steps(usize),
    Duration(Duration),
}

fn profile(args: &DemoArgs, config: Config) -> DemoResult<()> {
    let defaults = Config::default();
    let output =
        args.output
            .clone()
            .unwrap_or_else(|| match config.log_file() != defaults.log_file() {
                true => PathBuf::from(config.log_file()),
                false => PathBuf::from(DEFAULT_OUTPUT),
            });
    let length = match args.steps {
        Some(steps) => Length::Steps(steps),
        None if config.activities_duration() != defaults.activities_duration() => {
            Length::Duration(config.activities_duration())
        }
        None => Length::Steps(DEFAULT_STEPS),
    };
    if output.as_os_str() != STDOUT && !args.ondemand && args.schedule.is_none() {
        crate::output::check_trace_output(&output)?;
    }
    if let Some(dir) = &args.trace_dir {
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "cannot write traces into {}: not a directory",
                dir.display()
            )
            .into());
        }
    }
    let workers = (0..args.threads)
        .map(Worker::new)
        .collect::<Result<Vec<_>, _>>()?;
    let builder = match args.mode {
        Mode::Timeline => Profiler::builder(),
        Mode::Stubs => Profiler::builder().stubs(openreg::DEVICE_TYPE),
    }
    .config(config);
    if let (true, Some(seconds)) = (args.ondemand, args.seconds) {
        return serve_triggers(workers, Duration::from_secs(seconds));
    }
    if let (Some(schedule), Some(dir)) = (args.schedule, &args.trace_dir) {
        let steps = args.steps.unwrap_or(DEFAULT_STEPS);
        return profile_scheduled(builder, schedule, dir, workers, steps);
    }
    let mut profiler = builder.build()?;
    profiler.start()?;
    match length {
        Length::Steps(steps) => run_workers(workers, steps, None)?,
        Length::Duration(duration) => {
            let deadline = Instant::now() + duration;
            run_workers(workers, usize::MAX, Some(&mut || Instant::now() < deadline))?
        }
    }
    let trace = profiler.stop()?;
    // `-o /dev/stdout` is `-o -`: what the demo says must not follow the trace.
    let to_stdout = output.as_os_str() == STDOUT || crate::output::is_standard_output(&output);
    let stats = if to_stdout {
        let stdout = std::io::stdout().lock();
        omniprof_trace::write_chrome(&trace, "stdout", std::io::BufWriter::new(stdout))?
    } else {
        omniprof_trace::save(&trace, &output)?
    };
    // With the trace on standard output, what the demo says goes to standard error.
    let mut say: Box<dyn Write> = match to_stdout {
        true => Box::new(std::io::stderr()),
        false => Box::new(std::io::stdout()),
    };
    let device = trace
        .activities
        .iter()
        .filter(|a| a.kind.is_device())
        .count();
    let threads = trace.threads.len();
    writeln!(
        say,
        "wrote {} ({} trace events: {} host and {} device activities on {threads} {})",
        if to_stdout {
            "standard output".into()
        } else {
            output.display().to_string()
        },
        stats.events,
        trace.activities.len() - device,
        device,
        if threads == 1 { "thread" } else { "threads" },
    )?;
    report_drops(&trace);
    if args.config.is_some() && !trace.counters.is_empty() {
        writeln!(
            say,
            "{} counter samples on {} tracks (omniprof summary TRACE --counters; --metrics for \
             per-kernel metrics)",
            trace.counters.samples(),
            trace.counters.series().len(),
        )?;
    }
    if args.mode == Mode::Stubs {
        let averages = key_averages(&trace, &KeyAveragesOptions::default());
        let report = TableOptions {
            sort_by: Some(SortKey::SelfDeviceTimeTotal),
            row_limit: Some(15),
            ..Default::default()
        };
        write!(say, "\n{}", averages.table(&report))?;
    }
    if !to_stdout {
        writeln!(
            say,
            "open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing"
        )?;
    }
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
    run_workers(
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
        "{printed} traces in {}; open them with TensorBoard's profiler plugin (--logdir {}) \
         or at https://ui.perfetto.dev",
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
    omniprof::on_demand::serve_triggers()?;
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
    run_workers(
        workers,
        usize::MAX,
        Some(&mut || {
            omniprof::step();
            iterations += 1;
            Instant::now() < deadline
        }),
    )?;
    if omniprof::on_demand::cancel_on_demand() {
        println!("the run ended while a trace was in progress: it was cancelled");
    }
    // An exiting process leaves no socket for `omniprof trigger --list` to clean up.
    omniprof::on_demand::stop_serving_triggers();
    println!("ran {iterations} iterations");
    Ok(())
}

fn report_drops(trace: &Trace) {
    let report = &trace.health;
    let counts = [
        (metadata::DROPPED_EVENTS, report.dropped_events),
        (metadata::OUT_OF_WINDOW_EVENTS, report.out_of_window_events),
    ];
    for (key, n) in counts {
        if let Some(n) = n.filter(|&n| n > 0) {
            eprintln!("warning: {n} {}", key.replace('_', " "));
        }
    }
    if !report.backend_errors.is_empty() {
        let errors = report.backend_errors.iter();
        let list = Value::List(errors.map(|e| Value::from(e.to_string())).collect());
        eprintln!("warning: backend errors: {}", list.to_json());
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

/// Runs the steps on one named thread per worker (their results are kept from the optimizer,
/// so the arithmetic really runs). With a `coordinator`, the workers run each step
/// together and the coordinator runs on this thread after every step, while they wait; it
/// returns whether to go on (the run ends early when it says no).
fn run_workers(
    workers: Vec<Worker>,
    steps: usize,
    coordinator: Option<&mut dyn FnMut() -> bool>,
) -> DemoResult<()> {
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
    for h in handles {
        std::hint::black_box(h.join().map_err(|_| "a demo worker panicked")??);
    }
    Ok(())
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
