//! What the PM sampler costs a workload: the demo's shape (host threads of training steps
//! launching 48 × 48 matmuls and copies on two shared streams) profiled in a session that
//! records the device timeline, without and with `gpu_pm_counter` (every device sampled in
//! 1 ms intervals by a thread of its own, see `openreg::PmSampler`).
//!
//! The cost is a few percent at most, well inside the drift of a shared machine from one
//! second to the next, so a benchmark that runs all of one configuration and then all of the
//! other (criterion's way) measures the drift. This one alternates instead: each round runs
//! one session of each configuration, in an order that flips every round, and the figure is
//! the median over rounds of each round's ratio, with the geometric mean of the ratios and its
//! 95 % confidence interval (which narrows as rounds are added: a few hundred rounds are
//! needed here). An A/A control (the same configuration twice per round) shows what the
//! method reads when there is nothing to find. The intervals between successive samples are
//! reported too (the device's log is replayed onto an exact grid, however late the sampler's
//! low-priority thread runs).
//!
//! ```sh
//! cargo bench -p openreg --bench pm_sampler -- [ROUNDS] [--period-us=N]
//! ```
//!
//! `--period-us` sets `OMNIPROF_PM_SAMPLING_PERIOD_USECS` (default: the key's) in the sessions'
//! config, to see how the cost follows the sampler's wakeups.
//!
//! Times are the workload's wall time: from the session's start to its stop, both excluded
//! (the sampler's thread starts in `start` and its samples are merged in `stop`; what it
//! costs the workload is what it takes from the workload's CPUs while the workload runs).
//! The whole session, start to trace, is reported too, and the CPU time all the process's
//! threads used during the workload (`getrusage`).
//!
//! The workload is bound by its threads' scheduling (six threads on this project's two CPUs,
//! synchronizing every step), so its wall time spreads by ±10 % from round to round even in
//! the A/A control. What the sampler itself takes is measured exactly instead: the run time
//! the kernel accounts to its threads (`/proc/self/task/*/schedstat` of the `openreg-pm*`
//! threads, read before the session stops) against the CPU time of the whole process.

use std::hint::black_box;
use std::time::{Duration, Instant};

use omniprof::trace::ActivitySet;
use omniprof::{record_function, record_op, Config, Profiler};
use openreg::{HostBuffer, Kernel, Stream};

const THREADS: usize = 4;
/// About 45 ms of work per session here: long against the 1 ms sampling period and the
/// sampler's start and stop, short enough for hundreds of rounds.
const STEPS: usize = 200;
const DIM: usize = 48;
const BYTES: usize = DIM * DIM * 4;
const DEFAULT_ROUNDS: usize = 40;
const WARM_UP_ROUNDS: usize = 3;

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

const OFF: &str = "cpu_op,user_annotation,runtime,kernel,gpu_memcpy";
const ON: &str = "cpu_op,user_annotation,runtime,kernel,gpu_memcpy,gpu_pm_counter";

/// One session's times: the workload alone, the whole session (start to trace), the CPU time
/// the process used during the workload, and the run time and time slices of the PM
/// sampler's threads.
struct Times {
    /// The intervals between successive PM samples of a device, in µs.
    gaps: Vec<f64>,
    workload: Duration,
    session: Duration,
    cpu: Duration,
    sampler: Duration,
    sampler_slices: u64,
}

/// The run time and time slices the kernel accounted to the PM sampler's threads so far.
fn sampler_run() -> (Duration, u64) {
    let mut total = (Duration::ZERO, 0);
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let read = |file: &str| std::fs::read_to_string(task.path().join(file)).unwrap_or_default();
        if !read("comm").starts_with("openreg-pm") {
            continue;
        }
        // "run_ns wait_ns slices"
        let stat: Vec<u64> = read("schedstat")
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        if let [run_ns, _, slices] = stat[..] {
            total.0 += Duration::from_nanos(run_ns);
            total.1 += slices;
        }
    }
    total
}

/// User and system CPU time of all the process's threads so far.
fn process_cpu() -> Duration {
    // SAFETY: `getrusage` fills the zeroed struct it is given and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn session(types: &str, config: &Config) -> Times {
    let activities = ActivitySet::parse_list(types).unwrap();
    let mut profiler = Profiler::builder()
        .activities(activities)
        .config(config.clone())
        .build()
        .unwrap();
    let begun = Instant::now();
    profiler.start().unwrap();
    let (started, cpu_started) = (Instant::now(), process_cpu());
    workload();
    let (workload, cpu) = (started.elapsed(), process_cpu() - cpu_started);
    let (sampler, sampler_slices) = sampler_run();
    let trace = profiler.stop().unwrap();
    let mut gaps = Vec::new();
    for series in trace.counters.series() {
        let ts: Vec<i64> = series.samples.iter().map(|s| s.ts_ns).collect();
        // Each gap is a whole interval (the last sample's, cut by the stop, has no successor).
        gaps.extend(ts.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e3));
    }
    black_box(trace);
    Times {
        workload,
        session: begun.elapsed(),
        cpu,
        sampler,
        sampler_slices,
        gaps,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 0 {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// The geometric mean of the per-round ratios b/a as an added percentage, with its 95 %
/// confidence interval (normal approximation over the rounds' log ratios): the figure whose
/// uncertainty shrinks with the round count, where the median's quartiles only show the spread.
fn geometric_mean_interval(
    pairs: &[(Times, Times)],
    pick: fn(&Times) -> Duration,
) -> (f64, f64, f64) {
    let logs: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| (pick(b).as_secs_f64() / pick(a).as_secs_f64()).ln())
        .collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let variance = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let half = 1.96 * (variance / n).sqrt();
    let added = |l: f64| (l.exp() - 1.0) * 100.0;
    (added(mean), added(mean - half), added(mean + half))
}

/// Runs `rounds` rounds of one `a` and one `b` session (order flipping each round) and prints
/// the medians of each, the median and quartiles of the per-round ratios b/a and their
/// geometric mean with its interval.
fn compare(label: &str, a: &str, b: &str, rounds: usize, config: &Config) {
    let mut pairs = Vec::with_capacity(rounds);
    for round in 0..WARM_UP_ROUNDS + rounds {
        let (ta, tb): (Times, Times) = if round % 2 == 0 {
            let ta = session(a, config);
            (ta, session(b, config))
        } else {
            let tb = session(b, config);
            (session(a, config), tb)
        };
        if round >= WARM_UP_ROUNDS {
            pairs.push((ta, tb));
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (what, pick) in [
        (
            "workload",
            (|t: &Times| t.workload) as fn(&Times) -> Duration,
        ),
        ("session", |t: &Times| t.session),
        ("cpu", |t: &Times| t.cpu),
    ] {
        let a_ms = median(pairs.iter().map(|(a, _)| ms(pick(a))).collect());
        let b_ms = median(pairs.iter().map(|(_, b)| ms(pick(b))).collect());
        let mut ratios: Vec<f64> = pairs
            .iter()
            .map(|(a, b)| pick(b).as_secs_f64() / pick(a).as_secs_f64() - 1.0)
            .collect();
        ratios.sort_by(f64::total_cmp);
        let quartile = |q: usize| ratios[(ratios.len() - 1) * q / 4] * 100.0;
        let (low_quartile, high_quartile) = (quartile(1), quartile(3));
        let (mean, low, high) = geometric_mean_interval(&pairs, pick);
        println!(
            "{label:<28} {what:<8}  {a_ms:7.2} ms -> {b_ms:7.2} ms   added {:+6.2} % \
             (per-round median; quartiles {:+.1} % .. {:+.1} %), geometric mean {mean:+.2} % \
             (95 % interval {low:+.2} % .. {high:+.2} %)",
            median(ratios) * 100.0,
            low_quartile,
            high_quartile,
        );
    }
    let mut gaps: Vec<f64> = pairs
        .iter()
        .flat_map(|(_, b)| b.gaps.iter().copied())
        .collect();
    if !gaps.is_empty() {
        gaps.sort_by(f64::total_cmp);
        let at = |q: f64| gaps[((gaps.len() - 1) as f64 * q) as usize];
        println!(
            "{label:<28} sampling intervals: median {:.0} us, 90th {:.0} us, 99th {:.0} us, \
             max {:.0} us",
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0),
        );
    }
    let on = pairs.iter().map(|(_, b)| b);
    let sampler_us = median(on.clone().map(|t| t.sampler.as_secs_f64() * 1e6).collect());
    if sampler_us > 0.0 {
        let share = median(
            on.clone()
                .map(|t| t.sampler.as_secs_f64() / t.cpu.as_secs_f64() * 100.0)
                .collect(),
        );
        let slices = median(on.map(|t| t.sampler_slices as f64).collect());
        println!(
            "{label:<28} sampler threads ran {sampler_us:.0} us in {slices:.0} time slices per \
             session: {share:.2} % of the process's CPU time (median)"
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; the first number given is the round count.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(DEFAULT_ROUNDS);
    let config = match args.iter().find_map(|a| a.strip_prefix("--period-us=")) {
        Some(us) => Config::parse(&format!("OMNIPROF_PM_SAMPLING_PERIOD_USECS={us}"))
            .expect("--period-us takes microseconds"),
        None => Config::default(),
    };
    let period_us = config.pm_sampling_period_us();
    println!(
        "pm_sampler: {THREADS} threads x {STEPS} steps, {rounds} alternated rounds \
         after {WARM_UP_ROUNDS} warm-up rounds, sampling every {period_us} us"
    );
    compare("A/A control (pm off twice)", OFF, OFF, rounds, &config);
    compare("pm sampler (off -> on)", OFF, ON, rounds, &config);
}
