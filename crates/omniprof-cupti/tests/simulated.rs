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
use omniprof_test_support::cupti::{self, Simulated};
use omniprof_test_support::session::backend_errors;

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
    let made: unsafe extern "C" fn() -> usize = sim("sim_api_records");
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
