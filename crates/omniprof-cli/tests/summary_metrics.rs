//! `omniprof summary --metrics` and `--counters` as a user runs them: on hand-built traces
//! with known values (omniprof's scope-profiler form, and the `cuda_profiler_range` events
//! PyTorch's CUPTI range profiler wrote) they print exactly those values, as a table, CSV or
//! JSON; on a trace the demo records with counters and the scope profiler on, they find them.

use std::path::Path;

use omniprof_test_support::cli::Cli;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

fn write(dir: &Path, name: &str, json: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, json).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Two `gemm` kernels and one `fill`, with their metrics in args and drawn as
/// `xpu_scope_profiler` counters (whose value names say which args are metrics).
const SCOPE_TRACE: &str = r#"{"schemaVersion": 1, "baseTimeNanoseconds": 0, "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 4,
   "args": {"device": 0, "stream": 7, "flops": 100, "bytes_read": 2.5}},
  {"ph": "C", "cat": "xpu_scope_profiler", "name": "work (stream 7)", "pid": 0, "tid": 7, "ts": 10, "args": {"flops": 100}},
  {"ph": "C", "cat": "xpu_scope_profiler", "name": "work (stream 7)", "pid": 0, "tid": 7, "ts": 14, "args": {"flops": 0}},
  {"ph": "C", "cat": "xpu_scope_profiler", "name": "memory (stream 7)", "pid": 0, "tid": 7, "ts": 10, "args": {"bytes_read": 2.5}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 6,
   "args": {"device": 0, "stream": 7, "flops": 300, "bytes_read": 0.5}},
  {"ph": "X", "cat": "kernel", "name": "fill", "pid": 0, "tid": 7, "ts": 30, "dur": 1,
   "args": {"device": 0, "stream": 7, "flops": 0}},
  {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 40}
]}"#;

#[test]
fn metrics_of_a_scope_profiler_trace_print_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "scope.json", SCOPE_TRACE);
    let table = OMNIPROF.ok(["summary", &trace, "--metrics"]);
    assert_eq!(
        table,
        "\
Kernel  Calls  Device time  Metric      Sum  Mean  Min  Max
-----------------------------------------------------------
gemm        2     10.000us  flops       400   200  100  300
                            bytes_read    3   1.5  0.5  2.5
fill        1      1.000us  flops         0     0    0    0
"
    );
    let csv = OMNIPROF.ok(["summary", &trace, "--metrics", "--format", "csv"]);
    assert_eq!(
        csv,
        "kernel,calls,device_time_us,metric,sum,mean,min,max\n\
         gemm,2,10.000,flops,400,200,100,300\n\
         gemm,2,10.000,bytes_read,3,1.5,0.5,2.5\n\
         fill,1,1.000,flops,0,0,0,0\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&OMNIPROF.ok(["summary", &trace, "--metrics", "--format", "json"]))
            .unwrap();
    assert_eq!(json["kernels"][0]["name"], "gemm");
    assert_eq!(json["kernels"][0]["metrics"][1]["mean"], 1.5);
    // `device` and `stream` are args, not metrics: no counter series names them.
    assert_eq!(json["kernels"][0]["metrics"].as_array().unwrap().len(), 2);
}

#[test]
fn metrics_of_a_cuda_profiler_range_trace_aggregate_every_numeric_arg() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(
        dir.path(),
        "range.json",
        r#"{"traceEvents": [
  {"ph": "X", "cat": "cuda_profiler_range", "name": "__profile_kernel_0", "pid": 0, "tid": 0, "ts": 1, "dur": 2,
   "args": {"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 12, "dram__bytes_read.sum": 4096, "note": "x"}},
  {"ph": "X", "cat": "cuda_profiler_range", "name": "__profile_kernel_0", "pid": 0, "tid": 0, "ts": 5, "dur": 2,
   "args": {"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 8, "dram__bytes_read.sum": 1024}}
]}"#,
    );
    let csv = OMNIPROF.ok(["summary", &trace, "--metrics", "--format", "csv"]);
    assert_eq!(
        csv,
        "kernel,calls,device_time_us,metric,sum,mean,min,max\n\
         __profile_kernel_0,2,4.000,smsp__sass_thread_inst_executed_op_dadd_pred_on.sum,20,10,8,12\n\
         __profile_kernel_0,2,4.000,dram__bytes_read.sum,5120,2560,1024,4096\n"
    );
}

#[test]
fn counters_print_each_tracks_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "scope.json", SCOPE_TRACE);
    let csv = OMNIPROF.ok(["summary", &trace, "--counters", "--format", "csv"]);
    // Series in file order; `work` holds 100 for 4 µs, then 0 until the window ends at
    // 40 µs.
    assert_eq!(
        csv,
        "counter,type,device,row,value,samples,min,mean,max,time_weighted_mean\n\
         work (stream 7),xpu_scope_profiler,0,7,flops,2,0,50,100,13.333333333333334\n\
         memory (stream 7),xpu_scope_profiler,0,7,bytes_read,1,2.5,2.5,2.5,2.5\n"
    );
    let table = OMNIPROF.ok(["summary", &trace, "--counters"]);
    assert!(table.starts_with("Counter "), "{table}");
    assert!(table.contains("work (stream 7)"), "{table}");
}

#[test]
fn the_flags_refuse_what_they_cannot_honour() {
    OMNIPROF.fails(2, ["summary", "x.json", "--metrics", "--sort-by", "count"]);
    let stderr = OMNIPROF.fails(1, ["summary", "missing.json", "--metrics"]);
    assert!(stderr.contains("missing.json"), "{stderr}");
}

#[test]
fn the_demo_shows_counters_and_metrics_by_configuration_alone() {
    let _serial = omniprof_test_support::lock::serial();
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "counters.cfg",
        "ACTIVITY_TYPES = cpu_op, user_annotation, runtime, kernel, gpu_memcpy, \
         scope_profiler, gpu_pm_counter\n\
         SCOPE_PROFILER_METRICS = flops, elements\n\
         SCOPE_PROFILER_ENABLE_PER_KERNEL = true\n\
         OMNIPROF_PM_SAMPLING_PERIOD_USECS = 500\n",
    );
    let trace = dir.path().join("demo.pt.trace.json");
    let trace = trace.to_str().unwrap();
    let args = ["--threads", "2", "--steps", "2", "-o", trace];
    let stdout = OMNIPROF.ok([&["demo", "--config", &config][..], &args].concat());
    assert!(stdout.contains("counter samples on"), "{stdout}");
    let metrics = OMNIPROF.ok(["summary", trace, "--metrics", "--format", "csv"]);
    // 48 × 48 matmuls: 2·48³ FLOPs each, whatever the number of calls.
    let flops = metrics
        .lines()
        .find(|l| l.starts_with("matmul_48x48,") && l.contains(",flops,"))
        .unwrap_or_else(|| panic!("{metrics}"));
    let stats: Vec<&str> = flops.rsplitn(4, ',').collect();
    assert_eq!(stats[..3], ["221184", "221184", "221184"], "{flops}");
    let counters = OMNIPROF.ok(["summary", trace, "--counters", "--format", "csv"]);
    assert!(counters.contains("OpenReg PM,gpu_pm_counter,0,0,busy_fraction,"));
    assert!(counters.contains("work (stream 0),xpu_scope_profiler,0,0,flops,"));
    omniprof_test_support::checker::assert_loads_in_perfetto(Path::new(trace));

    let bad = write(dir.path(), "bad.cfg", "SCOPE_PROFILER_MAX_SCOPES = many\n");
    let stderr = OMNIPROF.fails(2, [&["demo", "--config", &bad][..], &args].concat());
    assert!(
        stderr.contains("bad.cfg: line 1: SCOPE_PROFILER_MAX_SCOPES"),
        "{stderr}"
    );
}
