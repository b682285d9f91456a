//! OpenReg built as a Rust cdylib plugin through the SDK (`crates/openreg-plugin`), loaded
//! by omniprof's loader and driven by a real session: its runtime calls and device work are
//! linked to the host op that launched them and joined by `ac2g` flows.

use omniprof::trace::ActivityType;
use omniprof::{record_op, Profiler};
use omniprof_test_support::lock::serial;
use omniprof_test_support::plugins;

#[test]
fn the_openreg_plugin_records_linked_device_work() {
    let _serial = serial();
    let so = plugins::openreg_plugin();
    let loaded = omniprof::plugins::load_plugin(&so).unwrap();
    let names: Vec<&str> = loaded.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["OpenRegPlugin"]);
    // Work must go through the plugin's own copy of OpenReg (see the crate's docs).
    let lib = unsafe { libloading::Library::new(&so) }.unwrap();
    // SAFETY: the export's C signature is `int OpenRegPlugin_runWorkload(uint32_t, uint32_t)`.
    let run = unsafe {
        *lib.get::<unsafe extern "C" fn(u32, u32) -> i32>(b"OpenRegPlugin_runWorkload\0")
            .unwrap()
    };

    let mut profiler = Profiler::builder().build().unwrap();
    profiler.start().unwrap();
    let op_ids: Vec<u64> = (0..3)
        .map(|_| {
            let op = record_op("aten::mm");
            // SAFETY: as above; device 0 exists, and the call synchronizes before returning.
            assert_eq!(unsafe { run(0, 1) }, 0);
            op.correlation_id()
        })
        .collect();
    let trace = profiler.stop().unwrap();

    let device: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| a.kind.is_device() && a.kind != ActivityType::GpuUserAnnotation)
        .collect();
    assert!(!device.is_empty(), "{:?}", trace.metadata);
    let launches: Vec<_> = trace
        .activities
        .iter()
        .filter(|a| &*a.name == "orLaunchKernel")
        .collect();
    assert_eq!(launches.len(), 3 * 2, "two kernels per workload iteration");
    for a in device.iter().chain(&launches) {
        let linked = a
            .linked_correlation
            .unwrap_or_else(|| panic!("unlinked {a:?}"));
        assert!(op_ids.contains(&linked), "{} linked to {linked}", a.name);
        assert_ne!(
            a.correlation, linked,
            "its own correlation id is kept apart"
        );
    }
    for k in device
        .iter()
        .filter(|a| a.kind == ActivityType::ConcurrentKernel)
    {
        let flow = k.flow.expect("a flow ends on every kernel");
        let start = launches
            .iter()
            .find(|l| l.flow.map(|f| f.id) == Some(flow.id))
            .expect("a launch starts it");
        assert!(start.flow.unwrap().start && !flow.start);
        assert_eq!(start.linked_correlation, k.linked_correlation);
    }
    assert!(trace.processes.iter().any(|p| p.name == "OpenReg 0"));
    assert!(trace.health.backend_errors.is_empty(), "{:?}", trace.health);
}
