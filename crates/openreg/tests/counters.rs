//! OpenReg's counters under omniprof: the scope profiler's per-kernel metrics (one square
//! wave per kernel and metric group, values equal to OpenReg's accounting of the kernel) and
//! the PM sampler (busy fraction, copied bytes), both in the trace's one counter model and
//! loading in Perfetto.

use std::time::Duration;

use omniprof::trace::{ActivitySet, ActivityType, ScopeProfiling, Trace, Value};
use omniprof::{Config, Profiler};
use omniprof_test_support::checker;
use omniprof_test_support::lock::serial;
use openreg::{HostBuffer, Kernel, Stream};
use openreg::{PM_SERIES, SCOPE_METRICS};

fn profile(types: &str, config: &str, work: impl FnOnce()) -> Result<Trace, String> {
    let config = Config::parse(config).unwrap();
    let mut profiler = Profiler::builder()
        .activities(ActivitySet::parse_list(types).unwrap())
        .config(config)
        .build()
        .map_err(|e| e.to_string())?;
    profiler.start().map_err(|e| e.to_string())?;
    work();
    Ok(profiler.stop().unwrap())
}

fn saved(trace: &Trace, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    omniprof::trace::save(trace, &path).unwrap();
    checker::assert_loads_in_perfetto(&path);
}

const N: usize = 48;

fn launch_matmul_and_fill() {
    let stream = Stream::pooled(0, 1).unwrap();
    let buf = openreg::malloc(0, N * N * 4).unwrap();
    let _op = omniprof::record_op("aten::mm");
    openreg::launch_kernel(
        Kernel::Matmul {
            a: buf.clone(),
            b: buf.clone(),
            out: buf.clone(),
            n: N,
        },
        &stream,
    )
    .unwrap();
    openreg::launch_kernel(
        Kernel::Fill {
            out: buf,
            value: 1.0,
        },
        &stream,
    )
    .unwrap();
    stream.synchronize();
}

#[test]
fn each_kernel_gets_one_square_wave_per_metric_group_with_openregs_numbers() {
    let _serial = serial();
    let trace = profile(
        "kernel,scope_profiler",
        "SCOPE_PROFILER_ENABLE_PER_KERNEL=1",
        launch_matmul_and_fill,
    )
    .unwrap();
    let kernels: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
        .collect();
    assert_eq!(kernels.len(), 2);
    let flops = |k: &omniprof::trace::Activity| k.arg("flops").and_then(Value::as_i64);
    let mm = kernels
        .iter()
        .find(|k| k.name.starts_with("matmul"))
        .unwrap();
    assert_eq!(flops(mm), Some(2 * (N as i64).pow(3)), "FLOPs = 2·m·n·k");
    assert_eq!(
        mm.arg("elements").and_then(Value::as_i64),
        Some((N * N) as i64)
    );
    assert_eq!(
        mm.arg("bytes_read").and_then(Value::as_i64),
        Some((2 * N * N * 4) as i64)
    );
    assert_eq!(
        mm.arg("bytes_written").and_then(Value::as_i64),
        Some((N * N * 4) as i64)
    );
    let same = Kernel::Matmul {
        a: openreg::malloc(0, N * N * 4).unwrap(),
        b: openreg::malloc(0, N * N * 4).unwrap(),
        out: openreg::malloc(0, N * N * 4).unwrap(),
        n: N,
    };
    let occupancy = i64::from(same.metrics().occupancy_pct);
    assert!(occupancy > 0);
    assert_eq!(mm.arg("occupancy").and_then(Value::as_i64), Some(occupancy));

    for k in &kernels {
        for group in ["work", "memory", "occupancy"] {
            let name = format!("{group} (stream {})", k.resource);
            let series = trace
                .counters
                .series()
                .iter()
                .find(|s| *s.track.name == *name)
                .unwrap_or_else(|| panic!("no series {name}"));
            assert_eq!(series.track.kind, ActivityType::XpuScopeProfiler);
            assert_eq!(
                (series.track.device, series.track.resource),
                (k.device, k.resource)
            );
            let at = |ts| series.samples.iter().filter(move |s| s.ts_ns == ts);
            let zeros = |s: &&omniprof::trace::CounterSample| s.values.iter().all(|v| v.1 == 0.0);
            let starts: Vec<_> = at(k.start_ns).filter(|s| !zeros(s)).collect();
            let ends: Vec<_> = at(k.end_ns).filter(zeros).collect();
            assert_eq!(starts.len(), 1, "{name}: one start sample for {}", k.name);
            assert_eq!(ends.len(), 1, "{name}: one end sample for {}", k.name);
            for (metric, value) in &starts[0].values {
                let arg = k.arg(metric).and_then(Value::as_f64).unwrap();
                assert_eq!(*value, arg, "{metric}");
                let (_, g, _) = SCOPE_METRICS.iter().find(|m| m.0 == &**metric).unwrap();
                assert_eq!(*g, group);
            }
        }
        // A fill does no FLOPs: the value is 0, which is a value, not a missing one.
        if k.name.starts_with("fill") {
            assert_eq!(flops(k), Some(0));
        }
    }
    // Two samples per kernel and group.
    assert_eq!(trace.counters.samples(), 2 * 3 * kernels.len());
    assert_eq!(trace.health.counter_samples, Some(12));
    saved(&trace, "scope.pt.trace.json");
}

#[test]
fn selected_metrics_and_the_scope_limit_are_honoured() {
    let _serial = serial();
    let trace = profile(
        "kernel,scope_profiler",
        "XPUPTI_PROFILER_METRICS=flops\nCUPTI_PROFILER_MAX_RANGES=1",
        launch_matmul_and_fill,
    )
    .unwrap();
    // Only the `work` group has a selected metric; the others have no values: not written.
    let names: Vec<_> = trace
        .counters
        .series()
        .iter()
        .map(|s| &*s.track.name)
        .collect();
    assert_eq!(names, ["work (stream 1)"]);
    let series = &trace.counters.series()[0];
    assert_eq!(series.samples.len(), 2, "the first kernel only");
    assert_eq!(series.samples[0].values.len(), 1);
    let kernels: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
        .collect();
    assert!(kernels[0].arg("flops").is_some() && kernels[0].arg("elements").is_none());
    assert!(kernels[1].arg("flops").is_none());
    let scope = ScopeProfiling {
        metrics: vec!["flops".into()],
        max_scopes: 1,
        kernels: 1,
    };
    assert_eq!(trace.health.scope_profiler, Some(scope));
    assert_eq!(trace.health.scope_profiler_unprofiled_kernels, Some(1));
}

#[test]
fn an_unknown_metric_fails_naming_the_offered_ones() {
    let _serial = serial();
    let err = profile(
        "kernel,scope_profiler",
        "SCOPE_PROFILER_METRICS=flops,GpuTime",
        || {},
    )
    .unwrap_err();
    assert!(err.contains("\"GpuTime\""), "{err}");
    assert!(
        err.contains("openreg offers elements, flops, bytes_read, bytes_written, occupancy"),
        "{err}"
    );
}

#[test]
fn pm_samples_report_busy_time_and_copied_bytes() {
    let _serial = serial();
    const BYTES: usize = 3 << 20;
    let busy = Duration::from_millis(40);
    let trace = profile(
        "gpu_pm_counter",
        "OMNIPROF_PM_SAMPLING_PERIOD_USECS=1000",
        || {
            let stream = Stream::pooled(0, 0).unwrap();
            let host = HostBuffer::zeroed(BYTES);
            let dev = openreg::malloc(0, BYTES).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            openreg::memcpy_async(&dev, &host, BYTES, &stream).unwrap();
            openreg::launch_kernel(Kernel::Busy(busy), &stream).unwrap();
            openreg::memcpy_async(&host, &dev, BYTES / 3, &stream).unwrap();
            stream.synchronize();
            std::thread::sleep(Duration::from_millis(5));
        },
    )
    .unwrap();
    let series = |device: i64| {
        trace
            .counters
            .series()
            .iter()
            .find(|s| *s.track.name == *PM_SERIES && s.track.device == device)
            .unwrap_or_else(|| panic!("no PM series for device {device}"))
    };
    let (busy_dev, idle_dev) = (series(0), series(1));
    assert!(busy_dev.samples.len() >= 20, "{}", busy_dev.samples.len());
    let value = |s: &omniprof::trace::CounterSample, name| s.value(name).unwrap();
    for s in busy_dev.samples.iter().chain(&idle_dev.samples) {
        assert!((0.0..=1.0).contains(&value(s, openreg::BUSY_FRACTION)));
    }
    for s in &idle_dev.samples {
        assert!(value(s, openreg::BUSY_FRACTION) <= 0.05, "{s:?}");
    }
    // The samples whose interval the busy kernel covers read it as busy. A sample's interval
    // runs to the next sample, so the busy time they add up to is the kernel's at least,
    // however late the sampling thread ran; half of it is the margin for a loaded machine.
    let fractions: Vec<f64> = busy_dev
        .samples
        .iter()
        .map(|s| value(s, openreg::BUSY_FRACTION))
        .collect();
    assert!(
        fractions.iter().any(|&f| f >= 0.9),
        "no busy sample: {fractions:?}"
    );
    let busy_ns: f64 = busy_dev
        .samples
        .windows(2)
        .map(|w| value(&w[0], openreg::BUSY_FRACTION) * (w[1].ts_ns - w[0].ts_ns) as f64)
        .sum();
    assert!(
        busy_ns >= 0.5 * busy.as_nanos() as f64,
        "{busy_ns} ns busy for a {busy:?} kernel: {fractions:?}"
    );
    let sum = |name| -> f64 { busy_dev.samples.iter().map(|s| value(s, name)).sum() };
    assert_eq!(sum(openreg::HOST_TO_DEVICE_BYTES), BYTES as f64);
    assert_eq!(sum(openreg::DEVICE_TO_HOST_BYTES), (BYTES / 3) as f64);
    assert!(busy_dev
        .samples
        .iter()
        .any(|s| value(s, openreg::MEMORY_USED_BYTES) >= BYTES as f64));
    saved(&trace, "pm.pt.trace.json");
}
