//! The CUPTI backend end to end on a machine without a GPU: a simulated CUPTI and CUDA
//! driver (`tests/sim`, built against the installed CUPTI headers) stand where the real ones
//! would, and an omniprof session records through them. The backend's part is all real:
//! finding and loading the libraries, the version check, the buffers, the external
//! correlation pushes, decoding, linking, the clock map, device rows and properties.
//!
//! Each test runs in a child process of this test binary, because a process loads CUPTI
//! once and the driver is found through `LD_LIBRARY_PATH`, read at start.

use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use omniprof::backends::ActivityProfiler;
use omniprof::trace::keys::metadata;
use omniprof::trace::{ActivitySet, ActivityType, Trace, Value};
use omniprof::{record_function, record_op, Profiler};
use omniprof_cupti::{unavailable_reason, CuptiProfiler, LIBRARY_ENV};
use omniprof_test_support::checker::assert_loads_in_perfetto;
use omniprof_test_support::cupti::{self, Simulated};
use omniprof_test_support::decoder::assert_matches_json;
use omniprof_test_support::session::backend_errors;
use omniprof_test_support::skip::{skip, Needs};

const CHECK: &str = "the simulated CUPTI session";
/// Set in the child process that runs a test's body.
const CHILD: &str = "OMNIPROF_CUPTI_SIM_CHILD";

/// In the parent: builds the simulated libraries and runs `test` in a child with them (and
/// `env`), asserting it passed; returns false. In the child: returns true.
fn in_child(test: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let dir =
        std::env::temp_dir().join(format!("omniprof-cupti-sim-{}-{test}", std::process::id()));
    let Some(Simulated { dir, cupti }) = cupti::build_simulated(CHECK, &dir) else {
        return false;
    };
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("LD_LIBRARY_PATH", &dir)
        .env(LIBRARY_ENV, &cupti);
    for (key, value) in env {
        child.env(key, value);
    }
    let out = child.output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the child running {test} failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
    false
}

type Launch = unsafe extern "C" fn(u32, *const c_char, u32, u64);
type Drop = unsafe extern "C" fn(usize);
type Count = unsafe extern "C" fn() -> usize;
type Now = unsafe extern "C" fn() -> u64;
type LaunchAt = unsafe extern "C" fn(u32, *const c_char, u32, u64, u64, u64);
type Memcpy = unsafe extern "C" fn(u32, u8, u8, u8, u64, u32, u64);
type Memset = unsafe extern "C" fn(u32, u16, u32, u64, u32, u64);
type Sync = unsafe extern "C" fn(u32, u32, u32, u32, u64);
type Overhead = unsafe extern "C" fn(u32, u64);
type EventRecord = unsafe extern "C" fn(u32, u32, u32);

/// A function of the simulated CUPTI the backend loaded.
fn sim<T: Copy>(name: &str) -> T {
    // Loads it, if no session has.
    let _ = unavailable_reason();
    let path = CString::new(std::env::var(LIBRARY_ENV).unwrap()).unwrap();
    // SAFETY: the backend loaded this library already; RTLD_NOLOAD only finds it.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(!handle.is_null(), "the simulated CUPTI is not loaded");
    let symbol = CString::new(name).unwrap();
    // SAFETY: looks a symbol up in a loaded library.
    let f = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
    assert!(!f.is_null(), "the simulated CUPTI has no {name}");
    // SAFETY: the caller names the symbol's C type (tests/sim/cupti.c).
    unsafe { std::mem::transmute_copy::<*mut libc::c_void, T>(&f) }
}

const CUDA_LAUNCH_KERNEL: u32 = 211;
const CUDA_DEVICE_SYNCHRONIZE: u32 = 165;
const CUDA_GET_DEVICE: u32 = 17;
const CU_LAUNCH_KERNEL: u32 = 307;
const CU_CTX_GET_CURRENT: u32 = 9;
const CUDA_MEMCPY_ASYNC: u32 = 41;
const CUDA_MEMSET_ASYNC: u32 = 51;
const CUDA_STREAM_SYNCHRONIZE: u32 = 131;
const CUDA_EVENT_RECORD: u32 = 135;
const CUDA_EVENT_SYNCHRONIZE: u32 = 137;
const CUDA_STREAM_WAIT_EVENT: u32 = 147;
/// CUPTI's id where no stream or event applies.
const NO_ID: u32 = u32::MAX;
/// `CUPTI_ACTIVITY_MEMCPY_KIND_HTOD`.
const HTOD: u8 = 1;
/// `CUPTI_ACTIVITY_MEMORY_KIND_PINNED`.
const PINNED: u8 = 2;
/// `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`.
const DEVICE: u8 = 3;
/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE`.
const EVENT_SYNCHRONIZE: u32 = 1;
/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT`.
const STREAM_WAIT_EVENT: u32 = 2;
/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE`.
const STREAM_SYNCHRONIZE: u32 = 3;
/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE`.
const CONTEXT_SYNCHRONIZE: u32 = 4;
/// `CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST`.
const ACTIVITY_BUFFER_REQUEST: u32 = 7 << 16;

/// A session over a step range holding an op that launches one kernel of 3 µs on stream 7,
/// then a synchronization outside any op; `before_stop` runs last.
fn record(before_stop: impl FnOnce()) -> Trace {
    assert_eq!(unavailable_reason(), None);
    let launch: Launch = sim("sim_launch");
    let activities =
        ActivitySet::parse_list("cpu_op,user_annotation,kernel,cuda_runtime,gpu_user_annotation")
            .unwrap();
    let mut profiler = Profiler::builder().activities(activities).build().unwrap();
    profiler.start().unwrap();
    {
        let _step = record_function("step");
        let _op = record_op("aten::mm");
        let name = c"_ZN2at6native6kernelIfEEvPT_i";
        // SAFETY: the simulated runtime copies nothing it is given but the name's address,
        // and the name is static.
        unsafe { launch(CUDA_LAUNCH_KERNEL, name.as_ptr(), 7, 3_000) };
    }
    // SAFETY: a runtime call with no kernel.
    unsafe { launch(CUDA_DEVICE_SYNCHRONIZE, std::ptr::null(), 0, 0) };
    std::thread::sleep(Duration::from_millis(2));
    before_stop();
    profiler.stop().unwrap()
}

fn one(trace: &Trace, kind: ActivityType, name: &str) -> omniprof::trace::Activity {
    let found: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.kind == kind && &*a.name == name)
        .collect();
    assert_eq!(found.len(), 1, "{kind:?} {name}: {found:?}");
    found[0].clone()
}

#[test]
fn a_kernel_is_recorded_on_its_stream_and_linked_to_the_op_that_launched_it() {
    if !in_child(
        "a_kernel_is_recorded_on_its_stream_and_linked_to_the_op_that_launched_it",
        &[],
    ) {
        return;
    }
    let trace = record(|| {});
    // SAFETY: gettid only reads the calling thread's id.
    let tid = i64::from(unsafe { libc::gettid() });
    let op = one(&trace, ActivityType::CpuOp, "aten::mm");
    let kernel = one(
        &trace,
        ActivityType::ConcurrentKernel,
        "void at::native::kernel<float>(float*, int)",
    );
    assert_eq!((kernel.device, kernel.resource), (0, 7));
    assert_eq!(kernel.linked_correlation, Some(op.correlation));
    assert!((kernel.duration_ns() - 3_000).abs() <= 1, "{kernel:?}");
    assert_eq!(kernel.arg("grid"), Some(&Value::from(vec![264, 1, 1])));
    assert_eq!(
        kernel.arg("registers per thread"),
        Some(&Value::from(32u32))
    );
    // 264 blocks of 8 warps over 132 SMs: 2 blocks, 16 of 64 warps.
    assert_eq!(
        kernel.arg("est. achieved occupancy %"),
        Some(&Value::from(25i64))
    );

    let launch = one(&trace, ActivityType::CudaRuntime, "cudaLaunchKernel");
    assert_eq!(
        (launch.resource, launch.linked_correlation),
        (tid, Some(op.correlation))
    );
    assert_eq!(launch.correlation, kernel.correlation);
    assert!(launch.start_ns < kernel.start_ns);
    // Outside any op, still on the thread's own row.
    let sync = one(&trace, ActivityType::CudaRuntime, "cudaDeviceSynchronize");
    assert_eq!((sync.resource, sync.linked_correlation), (tid, None));

    let projected = one(&trace, ActivityType::GpuUserAnnotation, "step");
    assert_eq!((projected.device, projected.resource), (0, 7));
    assert_eq!(
        (projected.start_ns, projected.end_ns),
        (kernel.start_ns, kernel.end_ns)
    );

    assert_eq!(trace.device_properties.len(), 1);
    let props = trace.device_properties[0].to_json();
    assert!(props
        .starts_with("{\"id\": 0, \"name\": \"Simulated GPU\", \"totalGlobalMem\": 85899345920"));
    let meta = |key: &str| {
        trace
            .metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(meta(metadata::DEVICE_TYPE), Some(Value::from("CUDA")));
    assert_eq!(meta("cuda_driver_version"), Some(Value::from(13000)));
    let Some(Value::Float(scale)) = meta("cupti_clock_scale") else {
        panic!("no clock scale: {:?}", trace.metadata)
    };
    assert!((scale - 1.0).abs() < 1e-3, "{scale}");
    assert!(trace
        .processes
        .iter()
        .any(|p| p.pid == 0 && p.name == "GPU 0"));
    assert!(trace
        .threads
        .iter()
        .any(|t| (t.pid, t.tid, t.name.as_str()) == (0, 7, "stream 7 ")));
    assert_eq!(backend_errors(&trace), Vec::<String>::new());
}

#[test]
fn only_kernel_launches_of_the_driver_and_no_runtime_queries_are_recorded_at_all() {
    if !in_child(
        "only_kernel_launches_of_the_driver_and_no_runtime_queries_are_recorded_at_all",
        &[],
    ) {
        return;
    }
    assert_eq!(unavailable_reason(), None);
    let launch: Launch = sim("sim_launch");
    let driver: Launch = sim("sim_driver_call");
    let made: Count = sim("sim_api_records");
    let activities = ActivitySet::parse_list("cpu_op,kernel,cuda_runtime,cuda_driver").unwrap();
    let mut profiler = Profiler::builder().activities(activities).build().unwrap();
    profiler.start().unwrap();
    // SAFETY: calls of the simulated runtime and driver; the kernel's name is static.
    let before = unsafe {
        let before = made();
        let _op = record_op("triton_kernel");
        launch(CUDA_GET_DEVICE, std::ptr::null(), 0, 0);
        driver(CU_CTX_GET_CURRENT, std::ptr::null(), 0, 0);
        driver(CU_LAUNCH_KERNEL, c"triton_poi_fused_0".as_ptr(), 7, 2_000);
        // Clear of the op's end, so that its time links it.
        spin(2);
        before
    };
    std::thread::sleep(Duration::from_millis(2));
    let trace = profiler.stop().unwrap();
    // SAFETY: reads a count.
    assert_eq!(
        unsafe { made() } - before,
        1,
        "only the launch made a record"
    );
    let api: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| matches!(a.kind, ActivityType::CudaRuntime | ActivityType::CudaDriver))
        .map(|a| (a.kind, &*a.name))
        .collect();
    assert_eq!(api, [(ActivityType::CudaDriver, "cuLaunchKernel")]);
    let op = one(&trace, ActivityType::CpuOp, "triton_kernel");
    let kernel = one(&trace, ActivityType::ConcurrentKernel, "triton_poi_fused_0");
    assert_eq!(kernel.linked_correlation, Some(op.correlation));
}

#[test]
fn with_cuda_collection_switched_off_cupti_records_nothing_until_it_is_back_on() {
    if !in_child(
        "with_cuda_collection_switched_off_cupti_records_nothing_until_it_is_back_on",
        &[],
    ) {
        return;
    }
    assert_eq!(unavailable_reason(), None);
    let made: Count = sim("sim_api_records");
    let cuda = ActivitySet::parse_list("kernel,cuda_runtime").unwrap();
    let mut activities = cuda;
    activities.insert(ActivityType::CpuOp);
    let mut profiler = Profiler::builder().activities(activities).build().unwrap();
    profiler.start().unwrap();
    // SAFETY: reads a count.
    let made_now = || unsafe { made() };
    let launch_in_op = |op: &str, kernel: &'static std::ffi::CStr| {
        let _op = record_op(op);
        launch_kernel(kernel);
    };
    let at_start = made_now();
    launch_in_op("aten::before", c"kernel_before");
    let after_first = made_now();
    profiler.toggle_collection(false, cuda);
    launch_in_op("aten::while_off", c"kernel_while_off");
    let while_off = made_now();
    profiler.toggle_collection(true, cuda);
    launch_in_op("aten::after", c"kernel_after");
    let after_last = made_now();
    std::thread::sleep(Duration::from_millis(2));
    let trace = profiler.stop().unwrap();
    // The launch's runtime call made a record while on, none while off (CUPTI's kinds were
    // disabled, as Kineto disables them), and one again once back on.
    assert_eq!(
        (
            after_first - at_start,
            while_off - after_first,
            after_last - while_off
        ),
        (1, 0, 1)
    );
    let kernels: Vec<&str> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
        .map(|a| &*a.name)
        .collect();
    assert_eq!(kernels, ["kernel_before", "kernel_after"]);
    let after = one(&trace, ActivityType::CpuOp, "aten::after");
    let kernel = one(&trace, ActivityType::ConcurrentKernel, "kernel_after");
    assert_eq!(kernel.linked_correlation, Some(after.correlation));
    assert_eq!(backend_errors(&trace), Vec::<String>::new());
}

#[test]
fn records_cupti_dropped_are_counted_in_the_trace_as_an_error() {
    if !in_child(
        "records_cupti_dropped_are_counted_in_the_trace_as_an_error",
        &[],
    ) {
        return;
    }
    let drop: Drop = sim("sim_drop");
    // SAFETY: sets a count.
    let trace = record(|| unsafe { drop(5) });
    let errors = backend_errors(&trace);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("CUPTI dropped 5 CUDA activity records: its buffers were full"),
        "{errors:?}"
    );
    // What was recorded is kept.
    assert_eq!(
        trace
            .activities
            .iter()
            .filter(|a| a.kind == ActivityType::ConcurrentKernel)
            .count(),
        1
    );
}

#[test]
fn a_cupti_of_unknown_layout_is_refused_with_its_version_named() {
    if !in_child(
        "a_cupti_of_unknown_layout_is_refused_with_its_version_named",
        &[("SIM_CUPTI_VERSION", "99")],
    ) {
        return;
    }
    let path = std::env::var(LIBRARY_ENV).unwrap();
    assert_eq!(
        unavailable_reason().unwrap(),
        format!(
            "CUPTI sits out: CUPTI at {path} has API version 99, whose record layout omniprof \
             does not know (known: 22–28, 130001–130202); its records are not decoded"
        )
    );
    assert!(CuptiProfiler.available_activities().is_empty());
}

#[test]
fn a_missing_libcupti_is_named_in_the_reason_it_sits_out() {
    let missing = PathBuf::from("/nonexistent/libcupti.so");
    if !in_child(
        "a_missing_libcupti_is_named_in_the_reason_it_sits_out",
        &[(LIBRARY_ENV, missing.to_str().unwrap())],
    ) {
        return;
    }
    let reason = unavailable_reason().unwrap();
    assert!(
        reason.starts_with(
            "CUPTI sits out: OMNIPROF_CUPTI_LIBRARY=/nonexistent/libcupti.so could not be loaded: "
        ),
        "{reason}"
    );
    // The trace goes on without it.
    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    drop(record_op("aten::add"));
    let trace = profiler.stop().unwrap();
    assert!(trace.activities.iter().any(|a| &*a.name == "aten::add"));
}

/// Runs for `micros` microseconds without sleeping (a sleep lasts tens of microseconds).
fn spin(micros: u64) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_micros(micros) {
        std::hint::spin_loop();
    }
}

/// Launches kernel `name` (static, mangled or not) through the simulated runtime, 2 µs from
/// what the caller recorded before and after: as close to an op's begin or end as a
/// framework's launch comes, and far beyond what the clocks may be off.
fn launch_kernel(name: &'static std::ffi::CStr) {
    let launch: Launch = sim("sim_launch");
    spin(2);
    // SAFETY: the simulated runtime keeps only the static name's address.
    unsafe { launch(CUDA_LAUNCH_KERNEL, name.as_ptr(), 7, 1_000) };
    spin(2);
}

/// The CUPTI session of `activities` under `config` (Kineto's `KEY=VALUE` text) over
/// `workload`, and the pushes and pops of external correlation ids it made.
fn record_with(activities: &str, config: &str, workload: impl FnOnce()) -> (Trace, usize) {
    assert_eq!(unavailable_reason(), None);
    let external_calls: Count = sim("sim_external_calls");
    let config = omniprof::Config::parse(config).unwrap();
    let mut profiler = Profiler::builder()
        .activities(ActivitySet::parse_list(activities).unwrap())
        .config(config)
        .build()
        .unwrap();
    profiler.start().unwrap();
    // SAFETY: reads a count.
    let before = unsafe { external_calls() };
    workload();
    // SAFETY: reads a count.
    let pushed = unsafe { external_calls() } - before;
    std::thread::sleep(Duration::from_millis(2));
    (profiler.stop().unwrap(), pushed)
}

const CUDA: &str = "cpu_op,user_annotation,kernel,cuda_runtime,cuda_driver,gpu_user_annotation";
const EXTERNAL: &str = "OMNIPROF_CUPTI_EXTERNAL_CORRELATION=1";

/// Kernels launched from nested ops, from a user range with no op, outside any op, from a
/// second thread, and as the first and the last thing in an op and right after one: 7 ops
/// and 3 user ranges in all.
fn workload() {
    {
        let _step = record_function("step");
        let _outer = record_op("aten::outer");
        launch_kernel(c"k_outer_first");
        {
            let _inner = record_op("aten::inner");
            launch_kernel(c"k_inner");
        }
        launch_kernel(c"k_outer_last");
    }
    {
        let _annotation = record_function("annotation");
        launch_kernel(c"k_in_annotation");
    }
    launch_kernel(c"k_outside");
    std::thread::scope(|s| {
        s.spawn(|| {
            let _range = record_function("worker step");
            let _op = record_op("aten::worker");
            launch_kernel(c"k_worker");
        });
        let _op = record_op("aten::main");
        launch_kernel(c"k_main");
    });
    {
        let _edge = record_op("aten::edge");
        launch_kernel(c"k_edge");
    }
    launch_kernel(c"k_after_edge");
    {
        let _a = record_op("aten::empty_before");
    }
    let _b = record_op("aten::last");
}

/// Each kernel and launch with what links it: the names of its op (`External id`) and of
/// the user range projected onto it, and its flow (`ac2g`) matched to its launch's.
fn links(trace: &Trace) -> Vec<String> {
    let by_correlation: std::collections::HashMap<u64, &str> = trace
        .activities
        .iter()
        .filter(|a| matches!(a.kind, ActivityType::CpuOp | ActivityType::UserAnnotation))
        .map(|a| (a.correlation, &*a.name))
        .collect();
    let launch_of: std::collections::HashMap<u64, &omniprof::trace::Activity> = trace
        .activities
        .iter()
        .filter(|a| a.kind == ActivityType::CudaRuntime)
        .map(|a| (a.correlation, a))
        .collect();
    let mut out: Vec<String> = trace
        .activities
        .iter()
        .filter_map(|a| {
            let op = a
                .linked_correlation
                .map(|id| by_correlation.get(&id).copied());
            match a.kind {
                ActivityType::ConcurrentKernel => {
                    let launch = launch_of[&a.correlation];
                    let flow = a.flow.as_ref().unwrap();
                    let launch_flow = launch.flow.as_ref().unwrap();
                    assert_eq!(
                        (flow.id, flow.start, launch_flow.start),
                        (launch_flow.id, false, true)
                    );
                    assert_eq!(launch.linked_correlation, a.linked_correlation);
                    Some(format!("kernel {} in {op:?} flow {:?}", a.name, flow.kind))
                }
                ActivityType::GpuUserAnnotation => Some(format!("projected {}", a.name)),
                ActivityType::CudaRuntime => Some(format!("{} in {op:?}", a.name)),
                _ => None,
            }
        })
        .collect();
    out.sort();
    out
}

#[test]
fn linking_by_thread_and_time_gives_the_external_correlations_links_with_no_cupti_call_per_op() {
    if !in_child(
        "linking_by_thread_and_time_gives_the_external_correlations_links_with_no_cupti_call_per_op",
        &[],
    ) {
        return;
    }
    let (cheap, cheap_calls) = record_with(CUDA, "", workload);
    let (external, external_calls) = record_with(CUDA, EXTERNAL, workload);
    let ranges = |t: &Trace| {
        t.activities
            .iter()
            .filter(|a| matches!(a.kind, ActivityType::CpuOp | ActivityType::UserAnnotation))
            .count()
    };
    assert_eq!((ranges(&cheap), ranges(&external)), (10, 10));
    let launches = |t: &Trace| {
        t.activities
            .iter()
            .filter(|a| a.kind == ActivityType::CudaRuntime)
            .count()
    };
    assert_eq!((launches(&cheap), launches(&external)), (9, 9));
    assert_eq!(cheap_calls, 0, "no CUPTI call per op or per launch");
    assert_eq!(
        external_calls,
        2 * 10,
        "a push and a pop per op and per user range, none per launch"
    );
    let expected = [
        "cudaLaunchKernel in None",
        "cudaLaunchKernel in None",
        "cudaLaunchKernel in None",
        "cudaLaunchKernel in Some(Some(\"aten::edge\"))",
        "cudaLaunchKernel in Some(Some(\"aten::inner\"))",
        "cudaLaunchKernel in Some(Some(\"aten::main\"))",
        "cudaLaunchKernel in Some(Some(\"aten::outer\"))",
        "cudaLaunchKernel in Some(Some(\"aten::outer\"))",
        "cudaLaunchKernel in Some(Some(\"aten::worker\"))",
        "kernel k_after_edge in None flow Ac2g",
        "kernel k_edge in Some(Some(\"aten::edge\")) flow Ac2g",
        "kernel k_in_annotation in None flow Ac2g",
        "kernel k_inner in Some(Some(\"aten::inner\")) flow Ac2g",
        "kernel k_main in Some(Some(\"aten::main\")) flow Ac2g",
        "kernel k_outer_first in Some(Some(\"aten::outer\")) flow Ac2g",
        "kernel k_outer_last in Some(Some(\"aten::outer\")) flow Ac2g",
        "kernel k_outside in None flow Ac2g",
        "kernel k_worker in Some(Some(\"aten::worker\")) flow Ac2g",
        "projected annotation",
        // One range per user range and stream, over its kernels.
        "projected step",
        "projected worker step",
    ];
    assert_eq!(links(&external), expected);
    assert_eq!(links(&cheap), expected);
    assert_eq!(backend_warnings(&cheap), Vec::<String>::new());
    // The launches from the second thread are on its own row on both paths.
    let worker = |t: &Trace| {
        let op = one(t, ActivityType::CpuOp, "aten::worker");
        let launch = t
            .activities
            .iter()
            .find(|a| a.linked_correlation == Some(op.correlation))
            .unwrap();
        (launch.resource == op.resource, launch.kind)
    };
    assert_eq!(worker(&cheap), (true, ActivityType::CudaRuntime));
    assert_eq!(worker(&external), (true, ActivityType::CudaRuntime));
}

#[test]
fn a_session_recording_no_driver_calls_links_through_the_external_correlation() {
    if !in_child(
        "a_session_recording_no_driver_calls_links_through_the_external_correlation",
        &[],
    ) {
        return;
    }
    // A kernel launched through the driver has no runtime record to give its thread and
    // time, so without driver calls every op is pushed.
    let (trace, calls) = record_with("cpu_op,kernel,cuda_runtime", "", || {
        let _op = record_op("aten::mm");
        launch_kernel(c"k");
    });
    assert_eq!(calls, 2);
    let op = one(&trace, ActivityType::CpuOp, "aten::mm");
    let kernel = one(&trace, ActivityType::ConcurrentKernel, "k");
    assert_eq!(kernel.linked_correlation, Some(op.correlation));
}

#[test]
fn a_call_across_an_ops_edge_is_left_unlinked_with_a_warning_naming_the_fallback() {
    if !in_child(
        "a_call_across_an_ops_edge_is_left_unlinked_with_a_warning_naming_the_fallback",
        &[],
    ) {
        return;
    }
    let now: Now = sim("sim_now");
    let launch_at: LaunchAt = sim("sim_launch_at");
    let (trace, calls) = record_with(CUDA, "", || {
        let inside = {
            let _op = record_op("aten::short");
            std::thread::sleep(Duration::from_micros(50));
            // SAFETY: reads CUPTI's clock.
            unsafe { now() }
        };
        // A call whose record begins inside the op and ends after it: on which side of the
        // op's end it began is not known to CUPTI's clock.
        // SAFETY: the simulated runtime keeps only the static name's address.
        unsafe {
            launch_at(
                CUDA_LAUNCH_KERNEL,
                c"k_across".as_ptr(),
                7,
                1_000,
                inside,
                inside + 1_000_000,
            )
        };
        let _op = record_op("aten::clear");
        std::thread::sleep(Duration::from_micros(50));
        launch_kernel(c"k_clear");
        std::thread::sleep(Duration::from_micros(50));
    });
    assert_eq!(calls, 0);
    let across = one(&trace, ActivityType::ConcurrentKernel, "k_across");
    assert_eq!(across.linked_correlation, None);
    let clear = one(&trace, ActivityType::ConcurrentKernel, "k_clear");
    let op = one(&trace, ActivityType::CpuOp, "aten::clear");
    assert_eq!(clear.linked_correlation, Some(op.correlation));
    let warnings = backend_warnings(&trace);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "cupti: 1 CUDA API calls (and the device work they launched) are not linked to a \
             host op: each lay within "
        ),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains(" ns of the begin or end of an op or user range of its thread"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains("OMNIPROF_CUPTI_EXTERNAL_CORRELATION=1 links them"),
        "{warnings:?}"
    );
}

/// A session recording copies, sets, waits and overhead: a copy of 3 ms on stream 7 (in
/// `aten::copy_`), a set after it (in `aten::fill_`), CUDA event 3 recorded on stream 7, then
/// a `Stream Sync` on stream 7 while the copy still runs, a `Stream Wait Event` of stream 13
/// (which then runs a kernel) and an `Event Sync` on event 3, a `Context Sync`, and an
/// overhead record.
fn waits_trace() -> Trace {
    let launch: Launch = sim("sim_launch");
    let memcpy: Memcpy = sim("sim_memcpy");
    let memset: Memset = sim("sim_memset");
    let event_record: EventRecord = sim("sim_event_record");
    let sync: Sync = sim("sim_sync");
    let overhead: Overhead = sim("sim_overhead");
    let activities = "cpu_op,user_annotation,kernel,gpu_memcpy,gpu_memset,cuda_runtime,\
                      cuda_driver,cuda_sync,overhead";
    // SAFETY (each block): calls of the simulated runtime, which keep nothing they are given.
    let (trace, _) = record_with(activities, "", || {
        {
            let _op = record_op("aten::copy_");
            spin(2);
            unsafe {
                memcpy(
                    CUDA_MEMCPY_ASYNC,
                    HTOD,
                    PINNED,
                    DEVICE,
                    1 << 20,
                    7,
                    3_000_000,
                )
            };
            spin(2);
        }
        {
            let _op = record_op("aten::fill_");
            spin(2);
            unsafe { memset(CUDA_MEMSET_ASYNC, DEVICE.into(), 0, 4096, 7, 1_000) };
            spin(2);
        }
        unsafe { event_record(CUDA_EVENT_RECORD, 7, 3) };
        // The waits, 10 µs apart so that no two of one row share time; the stream sync
        // shares the copy's.
        spin(10);
        unsafe {
            sync(
                CUDA_STREAM_SYNCHRONIZE,
                STREAM_SYNCHRONIZE,
                7,
                NO_ID,
                4_000_000,
            )
        };
        spin(10);
        unsafe { sync(CUDA_STREAM_WAIT_EVENT, STREAM_WAIT_EVENT, 13, 3, 2_000) };
        unsafe { launch(CUDA_LAUNCH_KERNEL, c"k_after_wait".as_ptr(), 13, 1_000) };
        spin(10);
        unsafe { sync(CUDA_EVENT_SYNCHRONIZE, EVENT_SYNCHRONIZE, NO_ID, 3, 2_000) };
        spin(10);
        unsafe {
            sync(
                CUDA_DEVICE_SYNCHRONIZE,
                CONTEXT_SYNCHRONIZE,
                NO_ID,
                NO_ID,
                3_000,
            )
        };
        unsafe { overhead(ACTIVITY_BUFFER_REQUEST, 1_500) };
        // Until the longest wait is over, so that the window holds it.
        std::thread::sleep(Duration::from_millis(6));
    });
    assert_eq!(backend_errors(&trace), Vec::<String>::new());
    trace
}

#[test]
fn copies_sets_waits_and_cuptis_overhead_are_written_as_kineto_writes_them() {
    if !in_child(
        "copies_sets_waits_and_cuptis_overhead_are_written_as_kineto_writes_them",
        &[],
    ) {
        return;
    }
    let trace = waits_trace();
    let dir = std::env::temp_dir().join(format!("omniprof-cupti-waits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json_path, pftrace_path) = (dir.join("waits.json"), dir.join("waits.pftrace"));
    omniprof::trace::save(&trace, &json_path).unwrap();
    omniprof::trace::save(&trace, &pftrace_path).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let of = |cat: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["cat"] == cat && e["ph"] == "X")
            .collect()
    };
    let op_id = |name: &str| one(&trace, ActivityType::CpuOp, name).correlation;
    let launch = |name: &str| {
        let launch = of("cuda_runtime")
            .into_iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {events:?}"));
        launch["args"]["correlation"].as_u64().unwrap()
    };
    // Each event's name, row and args, the bandwidth and the duration aside (GPU clock
    // times mapped to the trace's may move a nanosecond).
    let shape = |e: &serde_json::Value| {
        // An event with nothing to say writes no `args`.
        let mut args = e["args"].as_object().cloned().unwrap_or_default();
        args.remove("memory bandwidth (GB/s)");
        (
            e["name"].as_str().unwrap().to_owned(),
            e["pid"].as_i64().unwrap(),
            e["tid"].as_i64().unwrap(),
            serde_json::Value::Object(args),
        )
    };
    let dur_us = |e: &serde_json::Value| e["dur"].as_f64().unwrap();

    let copies = of("gpu_memcpy");
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(
        shape(copies[0]),
        (
            "Memcpy HtoD (Pinned -> Device)".to_owned(),
            0,
            7,
            serde_json::json!({
                "External id": op_id("aten::copy_"),
                "device": 0, "context": 1, "stream": 7, "bytes": 1 << 20,
                "correlation": launch("cudaMemcpyAsync"),
            })
        )
    );
    assert!((dur_us(copies[0]) - 3_000.0).abs() < 0.01, "{copies:?}");
    // Bytes per nanosecond: 1 MiB in 3 ms.
    let bandwidth = copies[0]["args"]["memory bandwidth (GB/s)"]
        .as_f64()
        .unwrap();
    assert!((bandwidth - 0.349_525).abs() < 0.001, "{bandwidth}");

    let sets = of("gpu_memset");
    assert_eq!(sets.len(), 1, "{sets:?}");
    assert_eq!(
        shape(sets[0]),
        (
            "Memset (Device)".to_owned(),
            0,
            7,
            serde_json::json!({
                "External id": op_id("aten::fill_"),
                "device": 0, "context": 1, "stream": 7, "bytes": 4096,
                "correlation": launch("cudaMemsetAsync"),
            })
        )
    );
    assert!((dur_us(sets[0]) - 1.0).abs() < 0.01, "{sets:?}");

    // As Kineto writes them: a `Stream Sync` on its stream's sync row (stream + 1,000,000),
    // a wait on an event with the stream and call that recorded the event, a wait on no
    // stream with stream -1, on `tid` 1 (-1's absolute value); outside any op, each with
    // its own correlation id as `External id`.
    let record = launch("cudaEventRecord");
    let waits: Vec<_> = of("cuda_sync").into_iter().map(shape).collect();
    assert_eq!(
        waits,
        [
            (
                "Stream Sync".to_owned(),
                0,
                1_000_007,
                serde_json::json!({
                    "External id": launch("cudaStreamSynchronize"),
                    "cuda_sync_kind": "Stream Sync", "stream": 7, "device": 0, "context": 1,
                    "correlation": launch("cudaStreamSynchronize"),
                })
            ),
            (
                "Stream Wait Event".to_owned(),
                0,
                13,
                serde_json::json!({
                    "External id": launch("cudaStreamWaitEvent"),
                    "cuda_sync_kind": "Stream Wait Event",
                    "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": record,
                    "wait_on_cuda_event_id": 3,
                    "stream": 13, "device": 0, "context": 1,
                    "correlation": launch("cudaStreamWaitEvent"),
                })
            ),
            (
                "Event Sync".to_owned(),
                0,
                1,
                serde_json::json!({
                    "External id": launch("cudaEventSynchronize"),
                    "cuda_sync_kind": "Event Sync",
                    "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": record,
                    "wait_on_cuda_event_id": 3,
                    "stream": -1, "device": 0, "context": 1,
                    "correlation": launch("cudaEventSynchronize"),
                })
            ),
            (
                "Context Sync".to_owned(),
                0,
                1,
                serde_json::json!({
                    "External id": launch("cudaDeviceSynchronize"),
                    "cuda_sync_kind": "Context Sync", "stream": -1, "device": 0, "context": 1,
                    "correlation": launch("cudaDeviceSynchronize"),
                })
            ),
        ]
    );

    // On Kineto's `CUPTI Overhead` row: pid -1, tid 0.
    let overheads: Vec<_> = of("overhead").into_iter().map(shape).collect();
    assert_eq!(
        overheads,
        [(
            "Activity Buffer Request".to_owned(),
            -1,
            0,
            serde_json::json!({})
        )]
    );

    // The rows: the stream's sync row named and sorted for its stream, the overhead
    // process named and sorted as Kineto's (with no label), and no sibling row for an
    // overlap.
    let rows: Vec<(String, i64, i64, serde_json::Value)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && (e["pid"] == -1 || e["tid"] == 1_000_007))
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["pid"].as_i64().unwrap(),
                e["tid"].as_i64().unwrap(),
                e["args"].clone(),
            )
        })
        .collect();
    let row = |name: &str, pid, tid, args| (name.to_owned(), pid, tid, args);
    assert_eq!(
        rows,
        [
            row(
                "process_name",
                -1,
                0,
                serde_json::json!({"name": "CUPTI Overhead"})
            ),
            row(
                "process_sort_index",
                -1,
                0,
                serde_json::json!({"sort_index": 1_048_576})
            ),
            row(
                "thread_name",
                0,
                1_000_007,
                serde_json::json!({"name": "stream 7 (sync)"})
            ),
            row(
                "thread_sort_index",
                0,
                1_000_007,
                serde_json::json!({"sort_index": 7})
            ),
            row(
                "thread_name",
                -1,
                0,
                serde_json::json!({"name": "CUPTI Overhead"})
            ),
            row(
                "thread_sort_index",
                -1,
                0,
                serde_json::json!({"sort_index": 0})
            ),
        ]
    );
    let overlaps: Vec<_> = events
        .iter()
        .filter(|e| {
            e["args"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("(overlap"))
        })
        .collect();
    assert!(overlaps.is_empty(), "{overlaps:?}");

    // The `.pftrace` puts every event on the same row as the JSON, and both load in
    // Perfetto.
    assert_matches_json(&pftrace_path, Some(&json_path));
    assert_loads_in_perfetto(&json_path);
    assert_loads_in_perfetto(&pftrace_path);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stream's waits on events are written where the stream ran work and
/// `ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS` is on (its default), as Kineto writes them:
/// stream 13 runs a kernel after its wait, stream 14 nothing.
#[test]
fn streams_waits_on_events_are_written_for_streams_that_ran_work_unless_turned_off() {
    if !in_child(
        "streams_waits_on_events_are_written_for_streams_that_ran_work_unless_turned_off",
        &[],
    ) {
        return;
    }
    let launch: Launch = sim("sim_launch");
    let sync: Sync = sim("sim_sync");
    let waits = |config: &str| -> Vec<i64> {
        // SAFETY (each block): calls of the simulated runtime, which keep nothing given.
        let (trace, _) = record_with("kernel,cuda_runtime,cuda_sync", config, || {
            for stream in [13, 14] {
                unsafe { sync(CUDA_STREAM_WAIT_EVENT, STREAM_WAIT_EVENT, stream, 3, 1_000) };
            }
            unsafe { launch(CUDA_LAUNCH_KERNEL, c"k_on_13".as_ptr(), 13, 1_000) };
        });
        let waits = trace.activities.iter();
        let waits = waits.filter(|a| a.kind == ActivityType::CudaSync);
        waits.map(|a| a.resource).collect()
    };
    assert_eq!(waits(""), [13]);
    assert_eq!(
        waits("ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS=false"),
        Vec::<i64>::new()
    );
}

/// HTA reads the waits' args that its critical path joins on: each wait on an event names
/// the stream and the `cudaEventRecord` call that recorded it. The simulated CUPTI counts
/// correlation ids from 1,000, as a process that ran for a while has (HTA 0.5.0 with pandas
/// 3 misreads a trace whose ids all fit in a byte).
#[test]
fn hta_reads_which_record_each_wait_on_an_event_waited_for() {
    if !in_child(
        "hta_reads_which_record_each_wait_on_an_event_waited_for",
        &[("SIM_CUPTI_FIRST_CORRELATION", "1000")],
    ) {
        return;
    }
    let Ok(python) = std::env::var("OMNIPROF_HTA_PYTHON") else {
        return skip(
            "HTA check of CUDA waits",
            Needs::Hta,
            "OMNIPROF_HTA_PYTHON is not set (bash .ci/run installs HTA and sets it)",
        );
    };
    let trace = waits_trace();
    let record = one(&trace, ActivityType::CudaRuntime, "cudaEventRecord").correlation;
    let dir = std::env::temp_dir().join(format!("omniprof-cupti-hta-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    omniprof::trace::save(&trace, dir.join("rank0.pt.trace.json")).unwrap();
    let script = r#"
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
df = analyzer.t.get_trace(0)
names = analyzer.t.symbol_table.get_sym_table()
for row in df[df["wait_on_stream"] > -1].itertuples():
    print(names[row.name], row.stream, row.wait_on_stream, row.wait_on_cuda_event_record_corr_id)
record = df[df["name"] == analyzer.t.symbol_table.get_sym_id_map()["cudaEventRecord"]]
print("cudaEventRecord", list(record["correlation"]))
"#;
    let out = Command::new(&python)
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "HTA failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            format!("Stream Wait Event 13 7 {record}"),
            format!("Event Sync -1 7 {record}"),
            format!("cudaEventRecord [{record}]"),
        ]
    );
}

/// The trace's `backend_warnings` entries (`<profiler>: <message>`).
fn backend_warnings(trace: &Trace) -> Vec<String> {
    let warnings = &trace.health.backend_warnings;
    warnings.iter().map(ToString::to_string).collect()
}
