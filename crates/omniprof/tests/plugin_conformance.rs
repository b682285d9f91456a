//! The conformance vectors for dynamic plugins (`docs/plugin-abi.md`, section 10), run
//! against the sample C plugin built by the test and loaded by omniprof's real loader: the
//! mock's lifecycle and its four events with exact times, ids and names; the configure
//! intersections; the interface validation; and the directory rules.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use omniprof::backends::{ActivityProfiler, ActivitySink, Enclosing, HostOps, ProfilerSession};
use omniprof::plugins::PluginError;
use omniprof::trace::{
    Activity, ActivitySet, ActivityType, CounterTrack, CounterValues, Value, Window,
};
use omniprof::Config;
use omniprof_test_support::lock::serial;
use omniprof_test_support::plugins;

#[derive(Default)]
struct Collect(Vec<Activity>);

impl ActivitySink for Collect {
    fn add(&mut self, a: Activity) {
        self.0.push(a);
    }
    fn add_in_user_range(&mut self, a: Activity, _: u64) {
        self.0.push(a);
    }
    fn add_host_arg(&mut self, _: u64, _: &str, _: Value) {}
    fn add_counter(&mut self, _: &CounterTrack, _: i64, _: CounterValues) {}
    fn add_kernel_metrics(&mut self, _: CounterValues) {}
}

struct NoHostOps;

impl HostOps for NoHostOps {
    fn get(&self, _: u64) -> Option<&Activity> {
        None
    }
    fn enclosing(&self, _: i64, _: i64, _: i64) -> Enclosing {
        Enclosing {
            op: None,
            user_range: None,
            clearance_ns: i64::MAX,
        }
    }
}

/// The sample plugin, built once per process and loaded through the loader.
fn sample() -> &'static Path {
    static SAMPLE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    SAMPLE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let so = plugins::build_sample(&dir);
        let loaded = omniprof::plugins::load_plugin(&so).unwrap();
        let names: Vec<&str> = loaded.usable().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["MockPlugin", "SampleCounters"]);
        omniprof::__test::init_engine();
        so
    })
}

fn profiler(name: &str) -> Arc<dyn ActivityProfiler> {
    sample();
    omniprof::__test::registered_profilers()
        .into_iter()
        .find(|p| p.name() == name)
        .unwrap_or_else(|| panic!("{name} is not registered"))
}

fn set(types: &[ActivityType]) -> ActivitySet {
    types.iter().copied().collect()
}

fn configure(requested: &[ActivityType]) -> Option<Box<dyn ProfilerSession>> {
    let mock = profiler("MockPlugin");
    let share = set(requested).intersect_enabled(mock.available_activities());
    if share.is_empty() {
        return None;
    }
    mock.configure(share, &Config::default()).unwrap()
}

/// The mock's own view of its handles, through the test hooks it exports. The count is the
/// library's, shared by every test's sessions: tests hold [`serial`] so it is theirs alone.
fn live_handles() -> i32 {
    let lib = unsafe { libloading::Library::new(sample()) }.unwrap();
    // SAFETY: the hook's C signature is `int MockPlugin_liveHandleCount(void)`.
    unsafe {
        let f = lib
            .get::<unsafe extern "C" fn() -> i32>(b"MockPlugin_liveHandleCount\0")
            .unwrap();
        f()
    }
}

use ActivityType::*;

#[test]
fn lifecycle_and_the_four_mock_events() {
    let _serial = serial();
    let mock = profiler("MockPlugin");
    assert_eq!(mock.name(), "MockPlugin");
    assert_eq!(
        mock.available_activities(),
        set(&[CudaRuntime, CudaDriver, ConcurrentKernel, GpuMemcpy])
    );
    let before = live_handles();
    let mut session = configure(&[CudaRuntime, CudaDriver, ConcurrentKernel, GpuMemcpy]).unwrap();
    assert_eq!(live_handles(), before + 1, "exactly one handle per session");
    session.start().unwrap();
    session.stop().unwrap();
    let mut sink = Collect::default();
    let window = Window {
        start_ns: 0,
        end_ns: i64::MAX,
    };
    session
        .process_trace(&mut sink, &NoHostOps, window)
        .unwrap();
    assert!(session.errors().is_empty(), "{:?}", session.errors());
    let base = 1_000_000_000;
    let got: Vec<_> = sink
        .0
        .iter()
        .map(|a| {
            (
                a.kind,
                &*a.name,
                a.start_ns - base,
                a.end_ns - base,
                a.correlation,
                a.device,
                a.resource,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (CudaRuntime, "cudaLaunchKernel", 0, 5_000, 1, 0, 123),
            (CudaDriver, "cuLaunchKernel", 10_000, 15_000, 2, 0, 124),
            (ConcurrentKernel, "test_kernel", 20_000, 50_000, 3, 0, 1),
            (GpuMemcpy, "cudaMemcpyHtoD", 60_000, 70_000, 4, 0, 2),
        ]
    );
    drop(session);
    assert_eq!(
        live_handles(),
        before,
        "dropping the session destroys the handle"
    );
}

#[test]
fn configure_gives_the_plugin_the_enabled_intersection() {
    let _serial = serial();
    assert!(configure(&[CudaRuntime, CudaDriver, ConcurrentKernel, GpuMemcpy]).is_some());
    // {cuda_runtime, cpu_op, kernel, user_annotation} → {CUDA_RUNTIME, CONCURRENT_KERNEL}.
    let mock = profiler("MockPlugin");
    let share = set(&[CudaRuntime, CpuOp, ConcurrentKernel, UserAnnotation])
        .intersect_enabled(mock.available_activities());
    assert_eq!(share, set(&[CudaRuntime, ConcurrentKernel]));
    assert!(configure(&[CpuOp, UserAnnotation, PythonFunction, Overhead]).is_none());
    assert!(configure(&[CpuOp]).is_none());
    assert!(configure(&[]).is_none());
}

#[test]
fn optional_entries_may_be_missing() {
    let _serial = serial();
    // The mock leaves all four correlation entries NULL: its session offers no listener,
    // and a full session around host ops runs without reaching them.
    let session = configure(&[ConcurrentKernel]).unwrap();
    assert!(session.correlation_listener().is_none());
}

#[test]
fn interface_validation_and_directory_rules() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path();
    // a.so loads; b.txt, c.so.1 and sub/d.so are not plugin files.
    std::fs::copy(sample(), lib.join("a.so")).unwrap();
    std::fs::write(lib.join("b.txt"), "x").unwrap();
    std::fs::copy(sample(), lib.join("c.so.1")).unwrap();
    std::fs::create_dir(lib.join("sub")).unwrap();
    std::fs::copy(sample(), lib.join("sub/d.so")).unwrap();
    let files = omniprof::plugins::plugin_files(lib).unwrap();
    assert_eq!(files, [lib.join("a.so")]);

    let missing_start = plugins::build_broken("missing_start", lib);
    let loaded = omniprof::plugins::load_plugin(&missing_start).unwrap();
    assert_eq!(loaded.profilers.len(), 1);
    let why = loaded.profilers[0].rejected.as_deref().unwrap();
    assert!(why.contains("profilerStart"), "{why}");

    // The host refuses the interface at registerProfiler; this plugin passes the refusal on
    // as its own result, so the whole library is rejected, saying why.
    let small = plugins::build_broken("interface_too_small", lib);
    let err = omniprof::plugins::load_plugin(&small)
        .unwrap_err()
        .to_string();
    assert!(err.contains("interface_too_small.so"), "{err}");
    assert!(
        err.contains("interface struct too small (80 bytes, at least 88 needed)"),
        "{err}"
    );

    let err = omniprof::plugins::plugin_files(&lib.join("nope")).unwrap_err();
    assert!(matches!(err, PluginError::Directory { .. }));
    assert!(err.to_string().contains("nope"));
}

#[test]
fn the_same_library_is_loaded_once() {
    let _serial = serial();
    let a = omniprof::plugins::load_plugin(sample()).unwrap();
    let b = omniprof::plugins::load_plugin(sample()).unwrap();
    assert_eq!(a, b);
    let mocks = omniprof::__test::registered_profilers()
        .iter()
        .filter(|p| p.name() == "MockPlugin")
        .count();
    assert_eq!(mocks, 1);
    let names: BTreeSet<String> = a.profilers.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names.len(), 2);
}
