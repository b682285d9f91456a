//! The SDK seen from the host: two profilers exported with `export_plugin!`, driven through
//! `KinetoPlugin_register` and the function tables it registers, against a fake host
//! (registry and trace builder) written here in plain Rust.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CStr};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use omniprof_plugin_sys::*;

// ---- The plugin --------------------------------------------------------------------------

/// The conformance mock of `docs/plugin-abi.md` section 10, plus a record of its lifecycle.
#[derive(Default)]
struct Mock;

/// Sessions of [`Mock`] alive; only `mock_lifecycle` creates them.
static MOCK_SESSIONS_ALIVE: AtomicUsize = AtomicUsize::new(0);

struct MockSession {
    enabled: Vec<ProfileEventType>,
    lifecycle: Vec<&'static str>,
    correlation: Arc<Correlations>,
}

impl Drop for MockSession {
    fn drop(&mut self) {
        MOCK_SESSIONS_ALIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct Correlations {
    pushes: AtomicU64,
    pops: AtomicU64,
    user_pushes: AtomicU64,
    user_pops: AtomicU64,
    last_id: AtomicU64,
}

impl CorrelationListener for Correlations {
    fn push_correlation_id(&self, id: u64) {
        self.pushes.fetch_add(1, Ordering::SeqCst);
        self.last_id.store(id, Ordering::SeqCst);
    }
    fn pop_correlation_id(&self) {
        self.pops.fetch_add(1, Ordering::SeqCst);
    }
    fn push_user_correlation_id(&self, id: u64) {
        self.user_pushes.fetch_add(1, Ordering::SeqCst);
        self.last_id.store(id, Ordering::SeqCst);
    }
    fn pop_user_correlation_id(&self) {
        self.user_pops.fetch_add(1, Ordering::SeqCst);
    }
}

impl PluginProfiler for Mock {
    type Session = MockSession;

    fn name(&self) -> &str {
        "MockPlugin"
    }

    fn supported_activity_types(&self) -> &[ProfileEventType] {
        &[
            ProfileEventType::CUDA_RUNTIME,
            ProfileEventType::CUDA_DRIVER,
            ProfileEventType::CONCURRENT_KERNEL,
            ProfileEventType::GPU_MEMCPY,
        ]
    }

    fn create_session(&self, enabled: &[ProfileEventType]) -> Result<MockSession, PluginError> {
        MOCK_SESSIONS_ALIVE.fetch_add(1, Ordering::SeqCst);
        Ok(MockSession {
            enabled: enabled.to_vec(),
            lifecycle: vec!["created"],
            correlation: Arc::default(),
        })
    }
}

const BASE: i64 = 1_000_000_000;

impl PluginSession for MockSession {
    fn start(&mut self) -> Result<(), PluginError> {
        self.lifecycle.push("started");
        Ok(())
    }

    fn stop(&mut self) -> Result<(), PluginError> {
        self.lifecycle.push("stopped");
        Ok(())
    }

    fn process_events(&mut self, trace: &mut HostTrace<'_>) -> Result<(), PluginError> {
        trace.add_device_info(&DeviceInfo {
            id: 0,
            sort_index: 5,
            name: Some("Mock device"),
            label: None,
        })?;
        trace.add_resource_info(&ResourceInfo {
            device_id: 0,
            id: 1,
            display_order: 2,
            name: Some("stream 1"),
        })?;
        let event = |event_type, name, start, end, id, resource_id| Event {
            name,
            event_type,
            start_ns: BASE + start,
            end_ns: BASE + end,
            id,
            device_id: 0,
            resource_id,
        };
        use ProfileEventType as T;
        let mut launch = trace.add_event(&event(
            T::CUDA_RUNTIME,
            "cudaLaunchKernel",
            0,
            5_000,
            1,
            123,
        ))?;
        let enabled: Vec<String> = self.enabled.iter().map(|t| t.0.to_string()).collect();
        launch.add_metadata_json("enabled", &format!("[{}]", enabled.join(", ")))?;
        launch.add_metadata_str("lifecycle", &self.lifecycle.join(","))?;
        let c = &self.correlation;
        let counts = [&c.pushes, &c.pops, &c.user_pushes, &c.user_pops, &c.last_id]
            .map(|n| n.load(Ordering::SeqCst).to_string());
        launch.add_metadata_json("correlations", &format!("[{}]", counts.join(", ")))?;
        launch.set_flow(Flow {
            flow_type: ProfileEventFlowType::ASYNC_CPU_GPU,
            id: 3,
            is_start: true,
        })?;
        trace.add_event(&event(
            T::CUDA_DRIVER,
            "cuLaunchKernel",
            10_000,
            15_000,
            2,
            124,
        ))?;
        let mut kernel = trace.add_event(&event(
            T::CONCURRENT_KERNEL,
            "test_kernel",
            20_000,
            50_000,
            3,
            1,
        ))?;
        kernel.add_metadata_str("quoted", "say \"hi\"\n")?;
        kernel.set_flow(Flow {
            flow_type: ProfileEventFlowType::ASYNC_CPU_GPU,
            id: 3,
            is_start: false,
        })?;
        trace.add_event(&event(
            T::GPU_MEMCPY,
            "cudaMemcpyHtoD",
            60_000,
            70_000,
            4,
            2,
        ))?;
        Ok(())
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(self.correlation.clone())
    }
}

/// A profiler that fails in every way the SDK must contain. What it does is chosen by the
/// first enabled type: `CPU_OP` fails creation, `OVERHEAD` panics in `start`,
/// `GPU_PM_COUNTER` probes the trace builder's error paths.
struct Faulty {
    name: &'static str,
}

struct FaultySession {
    mode: ProfileEventType,
}

impl PluginProfiler for Faulty {
    type Session = FaultySession;

    fn name(&self) -> &str {
        self.name
    }

    fn supported_activity_types(&self) -> &[ProfileEventType] {
        &[
            ProfileEventType::CPU_OP,
            ProfileEventType::OVERHEAD,
            ProfileEventType::GPU_PM_COUNTER,
        ]
    }

    fn create_session(&self, enabled: &[ProfileEventType]) -> Result<FaultySession, PluginError> {
        match enabled.first() {
            Some(&ProfileEventType::CPU_OP) => Err(PluginError::new("no CPU ops here")),
            Some(&mode) => Ok(FaultySession { mode }),
            None => Err(PluginError::new("nothing enabled")),
        }
    }
}

impl PluginSession for FaultySession {
    fn start(&mut self) -> Result<(), PluginError> {
        assert_ne!(self.mode, ProfileEventType::OVERHEAD, "start panics");
        Ok(())
    }

    fn process_events(&mut self, trace: &mut HostTrace<'_>) -> Result<(), PluginError> {
        let counter = |name, event_type| Event {
            name,
            event_type,
            start_ns: BASE,
            end_ns: BASE,
            id: 1 << 40,
            device_id: 3,
            resource_id: 4,
        };
        let mut outcomes = vec![
            trace
                .add_event(&counter("invalid", ProfileEventType::INVALID))
                .err(),
            trace
                .add_event(&counter("unknown", ProfileEventType::NUM_TYPES))
                .err(),
            trace
                .add_event(&counter("nul\0name", ProfileEventType::GPU_PM_COUNTER))
                .err(),
            trace
                .add_device_info(&DeviceInfo {
                    id: 3,
                    sort_index: 0,
                    name: None,
                    label: None,
                })
                .err(),
        ];
        let mut sample =
            trace.add_event(&counter("occupancy", ProfileEventType::GPU_PM_COUNTER))?;
        sample.add_metadata_json("value", "42")?;
        outcomes.push(sample.add_metadata_json("rejected", "1").err());
        outcomes.push(
            sample
                .set_flow(Flow {
                    flow_type: ProfileEventFlowType::INVALID,
                    id: 1,
                    is_start: true,
                })
                .err(),
        );
        let mut report =
            trace.add_event(&counter("outcomes", ProfileEventType::CPU_INSTANT_EVENT))?;
        report.add_metadata_str("errors", &format!("{outcomes:?}"))?;
        // The host rejects a negative display order: the error goes back with `?`.
        trace.add_resource_info(&ResourceInfo {
            device_id: 3,
            id: 4,
            display_order: -1,
            name: None,
        })?;
        unreachable!("the host rejects this resource info")
    }
}

export_plugin!(Mock, Faulty = Faulty { name: FAULTY_NAME });

/// 34 bytes; byte 31 is inside the `é`, so the name the host gets stops before it.
const FAULTY_NAME: &str = "Faulty profiler with a long namé!";

// ---- The fake host -----------------------------------------------------------------------

/// The registry side: the interfaces registered, and the codes `registerProfiler` returns.
#[derive(Default)]
struct Host {
    interfaces: Vec<ProfilerInterface>,
    results: VecDeque<c_int>,
}

unsafe extern "C" fn register_profiler(
    handle: *mut RegistryHandle,
    interface: *const ProfilerInterface,
) -> c_int {
    // SAFETY: the handle is the `Host` that `register` put in the registry.
    let host = unsafe { &mut *handle.cast::<Host>() };
    let Some(interface) = NonNull::new(interface.cast_mut()) else {
        return -1;
    };
    let code = host.results.pop_front().unwrap_or(0);
    if code == 0 {
        // SAFETY: the plugin passes a complete interface.
        host.interfaces
            .push(unsafe { read_versioned(interface) }.unwrap());
    }
    code
}

/// Calls the plugin's entry point with a registry over `host`.
fn register(host: &mut Host) -> c_int {
    let registry = Registry {
        registry_handle: ptr::from_mut(host).cast(),
        register_profiler: Some(register_profiler),
        ..Default::default()
    };
    // SAFETY: a complete registry, valid during the call.
    unsafe { KinetoPlugin_register(&registry) }
}

/// Registers the plugin and returns the interfaces of Mock and Faulty.
fn interfaces() -> (ProfilerInterface, ProfilerInterface) {
    let mut host = Host::default();
    assert_eq!(register(&mut host), OK);
    match host.interfaces[..] {
        [mock, faulty] => (mock, faulty),
        _ => panic!("{} interfaces", host.interfaces.len()),
    }
}

/// What the plugin handed to the trace builder.
#[derive(Default)]
struct Trace {
    events: Vec<Recorded>,
    devices: Vec<(i64, i64, Option<String>, Option<String>)>,
    resources: Vec<(i32, i32, i32, Option<String>)>,
}

struct Recorded {
    event: ProfileEvent,
    name: Option<String>,
    metadata: Vec<(String, String)>,
    flow: Option<ProfileEventFlow>,
}

impl Recorded {
    fn metadata(&self, key: &str) -> &str {
        let found = self.metadata.iter().find(|(k, _)| k == key);
        &found.unwrap_or_else(|| panic!("no metadata {key}")).1
    }
}

/// # Safety
///
/// `handle` is the `Trace` of `builder_over`.
unsafe fn trace<'a>(handle: *mut TraceBuilderHandle) -> &'a mut Trace {
    // SAFETY: the caller's contract.
    unsafe { &mut *handle.cast::<Trace>() }
}

/// # Safety
///
/// `text` is NULL or a NUL-terminated string.
unsafe fn string(text: *const c_char) -> Option<String> {
    // SAFETY: the caller's contract.
    NonNull::new(text.cast_mut()).map(|text| {
        unsafe { CStr::from_ptr(text.as_ptr()) }
            .to_str()
            .unwrap()
            .to_owned()
    })
}

unsafe extern "C" fn add_event(
    handle: *mut TraceBuilderHandle,
    event: *const ProfileEvent,
) -> c_int {
    let Some(event) = NonNull::new(event.cast_mut()) else {
        return -1;
    };
    // SAFETY: the plugin passes a complete event.
    let Ok(event) = (unsafe { read_versioned(event) }) else {
        return -1;
    };
    if !event.event_type.is_valid() {
        return -1;
    }
    let recorded = Recorded {
        event,
        name: None,
        metadata: Vec::new(),
        flow: None,
    };
    // SAFETY: this host's builder.
    unsafe { trace(handle) }.events.push(recorded);
    0
}

unsafe extern "C" fn set_last_event_name(
    handle: *mut TraceBuilderHandle,
    name: *const c_char,
) -> c_int {
    // SAFETY: this host's builder; the plugin passes a string.
    match (unsafe { trace(handle) }.events.last_mut(), unsafe {
        string(name)
    }) {
        (Some(event), Some(name)) => {
            event.name = Some(name);
            0
        }
        _ => -1,
    }
}

unsafe extern "C" fn set_last_event_flow(
    handle: *mut TraceBuilderHandle,
    flow: *const ProfileEventFlow,
) -> c_int {
    let Some(flow) = NonNull::new(flow.cast_mut()) else {
        return -1;
    };
    // SAFETY: the plugin passes a complete flow.
    let Ok(flow) = (unsafe { read_versioned(flow) }) else {
        return -1;
    };
    // SAFETY: this host's builder.
    match unsafe { trace(handle) }.events.last_mut() {
        Some(event) => {
            event.flow = Some(flow);
            0
        }
        None => -1,
    }
}

/// Rejects the key `rejected` with −5, to show the code reaching the plugin.
unsafe extern "C" fn add_last_event_metadata(
    handle: *mut TraceBuilderHandle,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    // SAFETY: the plugin passes strings.
    let (Some(key), Some(value)) = (unsafe { string(key) }, unsafe { string(value) }) else {
        return -1;
    };
    if key == "rejected" {
        return -5;
    }
    // SAFETY: this host's builder.
    match unsafe { trace(handle) }.events.last_mut() {
        Some(event) => {
            event.metadata.push((key, value));
            0
        }
        None => -1,
    }
}

unsafe extern "C" fn add_device_info(
    handle: *mut TraceBuilderHandle,
    info: *const ProfileDeviceInfo,
) -> c_int {
    let Some(info) = NonNull::new(info.cast_mut()) else {
        return -1;
    };
    // SAFETY: the plugin passes a complete info.
    let Ok(info) = (unsafe { read_versioned(info) }) else {
        return -1;
    };
    // SAFETY: this host's builder; the plugin passes strings or NULL.
    let row = unsafe {
        (
            info.device_id,
            info.sort_index,
            string(info.name),
            string(info.label),
        )
    };
    // SAFETY: as above.
    unsafe { trace(handle) }.devices.push(row);
    0
}

/// Rejects a negative display order with −6.
unsafe extern "C" fn add_resource_info(
    handle: *mut TraceBuilderHandle,
    info: *const ProfileResourceInfo,
) -> c_int {
    let Some(info) = NonNull::new(info.cast_mut()) else {
        return -1;
    };
    // SAFETY: the plugin passes a complete info.
    let Ok(info) = (unsafe { read_versioned(info) }) else {
        return -1;
    };
    if info.display_order < 0 {
        return -6;
    }
    // SAFETY: the plugin passes a string or NULL.
    let row = (
        info.device_id,
        info.resource_id,
        info.display_order,
        unsafe { string(info.name) },
    );
    // SAFETY: this host's builder.
    unsafe { trace(handle) }.resources.push(row);
    0
}

/// A complete trace builder over `trace`.
fn builder_over(trace: &mut Trace) -> omniprof_plugin_sys::TraceBuilder {
    omniprof_plugin_sys::TraceBuilder {
        trace_builder_handle: ptr::from_mut(trace).cast(),
        add_event: Some(add_event),
        set_last_event_name: Some(set_last_event_name),
        set_last_event_flow: Some(set_last_event_flow),
        add_last_event_metadata: Some(add_last_event_metadata),
        add_device_info: Some(add_device_info),
        add_resource_info: Some(add_resource_info),
        ..Default::default()
    }
}

// ---- Calling the plugin ------------------------------------------------------------------

/// Calls an interface function with a parameter struct.
fn call<P>(function: Option<unsafe extern "C" fn(*mut P) -> c_int>, mut params: P) -> c_int {
    // SAFETY: the plugin's function with parameters this host owns for the call.
    unsafe { function.expect("entry present")(&mut params) }
}

fn create(
    interface: &ProfilerInterface,
    enabled: &[ProfileEventType],
) -> (c_int, *mut ProfilerHandle) {
    let mut enabled = enabled.to_vec();
    let mut params = ProfilerCreateParams {
        // Garbage, to show that a failed create leaves NULL.
        profiler_handle: NonNull::dangling().as_ptr(),
        enabled_activity_types: enabled.as_mut_ptr(),
        enabled_activity_types_max_len: enabled.len(),
        ..Default::default()
    };
    // SAFETY: as in `call`.
    let code = unsafe { interface.profiler_create.unwrap()(&mut params) };
    (code, params.profiler_handle)
}

fn start(interface: &ProfilerInterface, handle: *mut ProfilerHandle) -> c_int {
    call(
        interface.profiler_start,
        ProfilerStartParams {
            profiler_handle: handle,
            ..Default::default()
        },
    )
}

fn stop(interface: &ProfilerInterface, handle: *mut ProfilerHandle) -> c_int {
    call(
        interface.profiler_stop,
        ProfilerStopParams {
            profiler_handle: handle,
            ..Default::default()
        },
    )
}

fn destroy(interface: &ProfilerInterface, handle: *mut ProfilerHandle) -> c_int {
    call(
        interface.profiler_destroy,
        ProfilerDestroyParams {
            profiler_handle: handle,
            ..Default::default()
        },
    )
}

fn process(
    interface: &ProfilerInterface,
    handle: *mut ProfilerHandle,
    builder: &omniprof_plugin_sys::TraceBuilder,
) -> c_int {
    let params = ProfilerProcessEventsParams {
        profiler_handle: handle,
        trace_builder: builder,
        ..Default::default()
    };
    call(interface.profiler_process_events, params)
}

/// The name and supported types a query reports, with the host's buffers as Kineto sizes
/// them (a 32-byte name buffer, pre-filled with garbage here; 25 types).
fn query(interface: &ProfilerInterface) -> (String, Vec<ProfileEventType>) {
    let mut name = [0x7f as c_char; 32];
    let mut types = [ProfileEventType::INVALID; ProfileEventType::NUM_TYPES.0 as usize];
    let params = ProfilerQueryParams {
        profiler_name: name.as_mut_ptr(),
        profiler_name_max_len: 31,
        supported_activity_types: types.as_mut_ptr(),
        supported_activity_types_max_len: types.len(),
        ..Default::default()
    };
    assert_eq!(call(interface.profiler_query, params), OK);
    // SAFETY: the plugin NUL-terminates the name within the buffer.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    (
        name,
        types
            .into_iter()
            .filter(|t| *t != ProfileEventType::INVALID)
            .collect(),
    )
}

/// A session handle used from several threads, as the ABI allows for correlation calls.
struct SharedHandle(*mut ProfilerHandle);

// SAFETY: the handle is only passed to the plugin's correlation entries, which the ABI lets
// application threads call concurrently.
unsafe impl Sync for SharedHandle {}

impl SharedHandle {
    fn get(&self) -> *mut ProfilerHandle {
        self.0
    }
}

// ---- Tests -------------------------------------------------------------------------------

#[test]
fn mock_lifecycle() {
    use ProfileEventType as T;
    let (mock, _) = interfaces();
    assert_eq!(
        query(&mock),
        (
            "MockPlugin".to_owned(),
            vec![
                T::CUDA_RUNTIME,
                T::CUDA_DRIVER,
                T::CONCURRENT_KERNEL,
                T::GPU_MEMCPY
            ]
        )
    );

    let (code, handle) = create(&mock, &[T::CUDA_RUNTIME, T::CONCURRENT_KERNEL]);
    assert_eq!((code, handle.is_null()), (OK, false));
    assert_eq!(MOCK_SESSIONS_ALIVE.load(Ordering::SeqCst), 1);
    assert_eq!(start(&mock, handle), OK);

    // Application threads push and pop concurrently, on the same session.
    let shared = &SharedHandle(handle);
    std::thread::scope(|threads| {
        for thread in 0..4u64 {
            threads.spawn(move || {
                let handle = shared.get();
                for i in 0..250 {
                    let id = thread * 1000 + i;
                    let push = ProfilerPushCorrelationIdParams {
                        correlation_id: id,
                        profiler_handle: handle,
                        ..Default::default()
                    };
                    assert_eq!(call(mock.profiler_push_correlation_id, push), OK);
                    let pop = ProfilerPopCorrelationIdParams {
                        profiler_handle: handle,
                        ..Default::default()
                    };
                    assert_eq!(call(mock.profiler_pop_correlation_id, pop), OK);
                }
            });
        }
    });
    let push_user = ProfilerPushUserCorrelationIdParams {
        user_correlation_id: 67890,
        profiler_handle: handle,
        ..Default::default()
    };
    assert_eq!(call(mock.profiler_push_user_correlation_id, push_user), OK);
    let pop_user = ProfilerPopUserCorrelationIdParams {
        profiler_handle: handle,
        ..Default::default()
    };
    assert_eq!(call(mock.profiler_pop_user_correlation_id, pop_user), OK);
    assert_eq!(stop(&mock, handle), OK);

    let mut trace = Trace::default();
    let builder = builder_over(&mut trace);
    assert_eq!(process(&mock, handle, &builder), OK);
    assert_eq!(destroy(&mock, handle), OK);
    assert_eq!(MOCK_SESSIONS_ALIVE.load(Ordering::SeqCst), 0);

    assert_eq!(
        trace.devices,
        [(0, 5, Some("Mock device".to_owned()), None)]
    );
    assert_eq!(trace.resources, [(0, 1, 2, Some("stream 1".to_owned()))]);
    let summary: Vec<_> = trace
        .events
        .iter()
        .map(|r| {
            let e = &r.event;
            (
                e.event_type,
                r.name.as_deref().unwrap(),
                e.start_time_utc_ns - BASE,
                e.end_time_utc_ns - BASE,
                e.event_id,
                e.device_id,
                e.resource_id,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (T::CUDA_RUNTIME, "cudaLaunchKernel", 0, 5_000, 1, 0, 123),
            (T::CUDA_DRIVER, "cuLaunchKernel", 10_000, 15_000, 2, 0, 124),
            (T::CONCURRENT_KERNEL, "test_kernel", 20_000, 50_000, 3, 0, 1),
            (T::GPU_MEMCPY, "cudaMemcpyHtoD", 60_000, 70_000, 4, 0, 2),
        ]
    );
    assert!(trace
        .events
        .iter()
        .all(|r| r.event.unpadded_struct_size == 48));

    let launch = &trace.events[0];
    assert_eq!(launch.metadata("enabled"), "[8, 6]");
    assert_eq!(launch.metadata("lifecycle"), "\"created,started,stopped\"");
    assert_eq!(launch.metadata("correlations"), "[1000, 1000, 1, 1, 67890]");
    let flow = |r: &Recorded| {
        r.flow.map(|f| {
            (
                f.unpadded_struct_size,
                f.flow_type,
                f.flow_id,
                f.is_start_point,
            )
        })
    };
    assert_eq!(
        flow(launch),
        Some((17, ProfileEventFlowType::ASYNC_CPU_GPU, 3, 1))
    );
    assert_eq!(
        flow(&trace.events[2]),
        Some((17, ProfileEventFlowType::ASYNC_CPU_GPU, 3, 0))
    );
    assert_eq!(trace.events[2].metadata("quoted"), r#""say \"hi\"\n""#);
}

#[test]
fn trace_builder_errors_reach_the_plugin_as_values() {
    let (_, faulty) = interfaces();
    let (code, handle) = create(&faulty, &[ProfileEventType::GPU_PM_COUNTER]);
    assert_eq!(code, OK);
    let mut trace = Trace::default();
    let builder = omniprof_plugin_sys::TraceBuilder {
        add_device_info: None,
        ..builder_over(&mut trace)
    };
    // The session's last call fails (the host rejects its resource info): −1.
    assert_eq!(process(&faulty, handle, &builder), ERROR_FAILED);
    assert_eq!(destroy(&faulty, handle), OK);

    let names: Vec<_> = trace.events.iter().map(|r| r.name.as_deref()).collect();
    // The invalid types never reached the host; the event whose name has a NUL did, unnamed.
    assert_eq!(names, [None, Some("occupancy"), Some("outcomes")]);
    let sample = &trace.events[1];
    assert_eq!(sample.event.event_id, 1 << 40);
    assert_eq!(sample.metadata, [("value".to_owned(), "42".to_owned())]);
    assert_eq!(sample.flow, None);
    let expected = [
        Some(TraceError::InvalidType {
            function: "addEvent",
            value: 0,
        }),
        Some(TraceError::InvalidType {
            function: "addEvent",
            value: 25,
        }),
        Some(TraceError::InteriorNul {
            function: "setLastEventName",
        }),
        Some(TraceError::Missing {
            function: "addDeviceInfo",
        }),
        Some(TraceError::Rejected {
            function: "addLastEventMetadata",
            code: -5,
        }),
        Some(TraceError::InvalidType {
            function: "setLastEventFlow",
            value: 0,
        }),
    ];
    let expected = json_string(&format!("{expected:?}"));
    assert_eq!(trace.events[2].metadata("errors"), expected);
}

/// `text` as the JSON string the SDK's `add_metadata_str` writes (only quotes need escaping
/// in a Debug rendering of the errors above).
fn json_string(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\\\""))
}

#[test]
fn a_failed_create_leaves_no_handle_and_later_calls_are_refused() {
    let (_, faulty) = interfaces();
    let (code, handle) = create(&faulty, &[ProfileEventType::CPU_OP]);
    assert_eq!((code, handle), (ERROR_FAILED, ptr::null_mut()));
    // What Kineto does next (`docs/plugin-abi.md`, defect 8): calls with the NULL handle.
    // Refused, not followed.
    assert_eq!(start(&faulty, handle), ERROR_NULL_ARGUMENT);
    let push = ProfilerPushCorrelationIdParams {
        correlation_id: 1,
        profiler_handle: handle,
        ..Default::default()
    };
    assert_eq!(
        call(faulty.profiler_push_correlation_id, push),
        ERROR_NULL_ARGUMENT
    );
    assert_eq!(destroy(&faulty, handle), ERROR_NULL_ARGUMENT);
    // An empty list of enabled types is an empty slice, even with a NULL array.
    assert_eq!(create(&faulty, &[]), (ERROR_FAILED, ptr::null_mut()));
}

#[test]
fn a_panic_is_an_error_code_and_retires_the_session() {
    let (_, faulty) = interfaces();
    let (code, handle) = create(&faulty, &[ProfileEventType::OVERHEAD]);
    assert_eq!(code, OK);
    assert_eq!(start(&faulty, handle), ERROR_PANICKED);
    assert_eq!(stop(&faulty, handle), ERROR_PANICKED);
    let mut trace = Trace::default();
    assert_eq!(
        process(&faulty, handle, &builder_over(&mut trace)),
        ERROR_PANICKED
    );
    assert!(trace.events.is_empty());
    // Correlation calls do not touch the session and still work.
    let pop = ProfilerPopCorrelationIdParams {
        profiler_handle: handle,
        ..Default::default()
    };
    assert_eq!(call(faulty.profiler_pop_correlation_id, pop), OK);
    assert_eq!(destroy(&faulty, handle), OK);
}

#[test]
fn null_and_too_small_structs_from_the_host_are_refused() {
    let (_, faulty) = interfaces();
    // SAFETY: NULL is what is being tested.
    assert_eq!(
        unsafe { faulty.profiler_start.unwrap()(ptr::null_mut()) },
        ERROR_NULL_ARGUMENT
    );
    let old = ProfilerStartParams {
        unpadded_struct_size: 8,
        ..Default::default()
    };
    assert_eq!(call(faulty.profiler_start, old), ERROR_STRUCT_TOO_SMALL);

    let (code, handle) = create(&faulty, &[ProfileEventType::GPU_PM_COUNTER]);
    assert_eq!(code, OK);
    let mut trace = Trace::default();
    let old_builder = omniprof_plugin_sys::TraceBuilder {
        unpadded_struct_size: 56,
        ..builder_over(&mut trace)
    };
    assert_eq!(
        process(&faulty, handle, &old_builder),
        ERROR_STRUCT_TOO_SMALL
    );
    let no_builder = ProfilerProcessEventsParams {
        profiler_handle: handle,
        ..Default::default()
    };
    assert_eq!(
        call(faulty.profiler_process_events, no_builder),
        ERROR_NULL_ARGUMENT
    );
    assert!(trace.events.is_empty());
    assert_eq!(destroy(&faulty, handle), OK);

    // A non-empty enabled list needs an array.
    let params = ProfilerCreateParams {
        enabled_activity_types_max_len: 1,
        ..Default::default()
    };
    assert_eq!(call(faulty.profiler_create, params), ERROR_NULL_ARGUMENT);
}

#[test]
fn a_newer_larger_struct_from_the_host_is_accepted() {
    /// A later version of the create parameters, with a field appended.
    #[repr(C)]
    struct CreateV2 {
        current: ProfilerCreateParams,
        appended: u64,
    }
    let (_, faulty) = interfaces();
    let mut enabled = [ProfileEventType::GPU_PM_COUNTER];
    let mut params = CreateV2 {
        current: ProfilerCreateParams {
            unpadded_struct_size: unpadded_size!(CreateV2, appended),
            enabled_activity_types: enabled.as_mut_ptr(),
            enabled_activity_types_max_len: 1,
            ..Default::default()
        },
        appended: u64::MAX,
    };
    // SAFETY: the plugin's function with a larger struct that starts like the known one.
    let code = unsafe { faulty.profiler_create.unwrap()(ptr::from_mut(&mut params).cast()) };
    assert_eq!(code, OK);
    assert!(!params.current.profiler_handle.is_null());
    assert_eq!(params.appended, u64::MAX);
    assert_eq!(destroy(&faulty, params.current.profiler_handle), OK);
}

#[test]
fn the_query_fits_the_hosts_buffers() {
    let (mock, faulty) = interfaces();
    let (name, types) = query(&faulty);
    // Cut at 31 bytes would split the `é`: the name stops before it, still valid UTF-8.
    assert_eq!(name, "Faulty profiler with a long nam");
    assert_eq!(types.len(), 3);

    // A smaller array gets what fits; NULL buffers are skipped.
    let mut two = [ProfileEventType::INVALID; 2];
    let params = ProfilerQueryParams {
        supported_activity_types: two.as_mut_ptr(),
        supported_activity_types_max_len: 2,
        ..Default::default()
    };
    assert_eq!(call(mock.profiler_query, params), OK);
    assert_eq!(
        two,
        [
            ProfileEventType::CUDA_RUNTIME,
            ProfileEventType::CUDA_DRIVER
        ]
    );

    // Slots past the list become INVALID even when the host left garbage in them.
    let mut garbage = [ProfileEventType(77); 6];
    let params = ProfilerQueryParams {
        supported_activity_types: garbage.as_mut_ptr(),
        supported_activity_types_max_len: 6,
        ..Default::default()
    };
    assert_eq!(call(mock.profiler_query, params), OK);
    assert_eq!(garbage[4..], [ProfileEventType::INVALID; 2]);
}

#[test]
fn registration() {
    let (mock, faulty) = interfaces();
    assert_eq!(mock.unpadded_struct_size, 88);
    for interface in [mock, faulty] {
        let entries = [
            interface.profiler_create.is_some(),
            interface.profiler_destroy.is_some(),
            interface.profiler_query.is_some(),
            interface.profiler_start.is_some(),
            interface.profiler_stop.is_some(),
            interface.profiler_push_correlation_id.is_some(),
            interface.profiler_pop_correlation_id.is_some(),
            interface.profiler_push_user_correlation_id.is_some(),
            interface.profiler_pop_user_correlation_id.is_some(),
            interface.profiler_process_events.is_some(),
        ];
        assert_eq!(entries, [true; 10]);
    }

    // One profiler refused by the host: the other still counts, and the library stays.
    let mut host = Host {
        results: [-7].into(),
        ..Default::default()
    };
    assert_eq!(register(&mut host), OK);
    assert_eq!(host.interfaces.len(), 1);
    // All refused: the host's first code.
    let mut host = Host {
        results: [-7, -8].into(),
        ..Default::default()
    };
    assert_eq!(register(&mut host), -7);

    // SAFETY: NULL is what is being tested.
    assert_eq!(
        unsafe { KinetoPlugin_register(ptr::null()) },
        ERROR_NULL_ARGUMENT
    );
    let mut host = Host::default();
    let old = Registry {
        unpadded_struct_size: 16,
        registry_handle: ptr::from_mut(&mut host).cast(),
        register_profiler: Some(register_profiler),
    };
    // SAFETY: a registry valid during the call, declaring fewer bytes than it has.
    assert_eq!(
        unsafe { KinetoPlugin_register(&old) },
        ERROR_STRUCT_TOO_SMALL
    );
    let no_function = Registry {
        register_profiler: None,
        ..old
    };
    let no_function = Registry {
        unpadded_struct_size: 24,
        ..no_function
    };
    // SAFETY: as above.
    assert_eq!(
        unsafe { KinetoPlugin_register(&no_function) },
        ERROR_NULL_ARGUMENT
    );
    assert!(host.interfaces.is_empty());

    // The entry point has the ABI's type.
    let _: RegisterFn = KinetoPlugin_register;
}
