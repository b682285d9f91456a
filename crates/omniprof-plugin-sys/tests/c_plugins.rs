//! The test plugins, checked without omniprof's loader: the C sample (`MockPlugin`,
//! `SampleCounters`), the corpus of broken C plugins and the OpenReg cdylib are built,
//! opened with `dlopen`, registered with a registry written here, and driven through their
//! interfaces against a strict trace builder written here, which logs every call the plugin
//! makes and what it answered.
//!
//! What is checked is the plugins: that each does exactly what its source file documents,
//! so that the host's tests can rely on them.
#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::size_of;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, OnceLock};

use omniprof_plugin_sys::*;
use omniprof_test_support::lock::serial;
use omniprof_test_support::plugins;

use ProfileEventType as T;

// ---- Libraries ---------------------------------------------------------------------------

/// Every C plugin, built once per process, by file stem (`sample_plugin`, `name_null`, ...).
fn corpus() -> &'static HashMap<String, PathBuf> {
    static CORPUS: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c_plugins");
        plugins::build_all(&out)
            .into_iter()
            .map(|lib| (lib.file_stem().unwrap().to_string_lossy().into_owned(), lib))
            .collect()
    })
}

/// An opened plugin library. Never closed, as a host never closes a plugin it registered
/// (and a Rust plugin's threads and thread-local destructors would outlive an unload).
struct Library {
    handle: NonNull<c_void>,
    path: PathBuf,
}

// SAFETY: a dlopen handle may be used from any thread.
unsafe impl Send for Library {}
// SAFETY: as above; dlsym is thread-safe.
unsafe impl Sync for Library {}

impl Library {
    fn open(path: &Path) -> Library {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; the plugins' constructors are the ones under test.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        let Some(handle) = NonNull::new(handle) else {
            // SAFETY: dlerror returns NULL or a NUL-terminated message.
            let error = unsafe { CStr::from_ptr(libc::dlerror()) };
            panic!("dlopen {}: {error:?}", path.display());
        };
        Library {
            handle,
            path: path.to_owned(),
        }
    }

    /// The address of `name`, if the library exports it.
    fn symbol(&self, name: &str) -> Option<NonNull<c_void>> {
        let name = CString::new(name).unwrap();
        // SAFETY: a handle from dlopen and a NUL-terminated name.
        NonNull::new(unsafe { libc::dlsym(self.handle.as_ptr(), name.as_ptr()) })
    }

    /// The entry point, as the ABI types it.
    fn register_fn(&self) -> Option<RegisterFn> {
        let symbol = self.symbol("KinetoPlugin_register")?;
        // SAFETY: the ABI gives the entry point this type.
        Some(unsafe { std::mem::transmute::<*mut c_void, RegisterFn>(symbol.as_ptr()) })
    }

    /// Calls the entry point with a fresh registry; its code and what it registered.
    fn register(&self) -> (c_int, Vec<Registered>) {
        let register = self
            .register_fn()
            .unwrap_or_else(|| panic!("{} has no KinetoPlugin_register", self.path.display()));
        let mut registered: Vec<Registered> = Vec::new();
        let registry = Registry {
            registry_handle: ptr::from_mut(&mut registered).cast(),
            register_profiler: Some(register_profiler),
            ..Default::default()
        };
        // SAFETY: a complete registry, valid during the call.
        let code = unsafe { register(&registry) };
        (code, registered)
    }

    /// Registers and returns the profilers, requiring success.
    fn profilers(&self) -> Vec<Profiler> {
        let (code, registered) = self.register();
        assert_eq!(code, 0, "{}: KinetoPlugin_register", self.path.display());
        registered
            .into_iter()
            .map(|r| {
                assert_eq!(r.declared_size, ProfilerInterface::UNPADDED_SIZE);
                Profiler(r.interface)
            })
            .collect()
    }
}

/// Each C plugin opened once per process: the tests share its global state, so tests that
/// read a plugin's test hooks take [`serial`].
fn library(stem: &str) -> &'static Library {
    static OPEN: OnceLock<Mutex<HashMap<String, &'static Library>>> = OnceLock::new();
    let mut open = OPEN.get_or_init(Default::default).lock().unwrap();
    open.entry(stem.to_owned()).or_insert_with(|| {
        let path = corpus()
            .get(stem)
            .unwrap_or_else(|| panic!("no plugin {stem} in the corpus"));
        Box::leak(Box::new(Library::open(path)))
    })
}

// ---- The registry ------------------------------------------------------------------------

/// One `registerProfiler` call: the size the interface declared and the part of it that
/// size covers (the rest zero, so entries beyond it read as NULL).
struct Registered {
    declared_size: usize,
    interface: ProfilerInterface,
}

unsafe extern "C" fn register_profiler(
    handle: *mut RegistryHandle,
    interface: *const ProfilerInterface,
) -> c_int {
    // SAFETY: the handle is the vector `Library::register` put in the registry.
    let registered = unsafe { &mut *handle.cast::<Vec<Registered>>() };
    let Some(interface) = NonNull::new(interface.cast_mut()) else {
        return -1;
    };
    // SAFETY: the plugin's struct, readable for the size it declares.
    let (declared_size, interface) = unsafe { copy_declared(interface) };
    registered.push(Registered {
        declared_size,
        interface,
    });
    0
}

/// A struct from the plugin: the size it declares, and as many of its bytes as that size
/// and this version of the struct both cover, on top of all zeros.
///
/// # Safety
///
/// `ptr` points to a struct readable for the size it declares.
unsafe fn copy_declared<S: AbiStruct + Default>(ptr: NonNull<S>) -> (usize, S) {
    // SAFETY: every struct starts with its size.
    let declared = unsafe { ptr.cast::<usize>().as_ptr().read_unaligned() };
    let mut copy = S::default();
    let len = declared.min(size_of::<S>());
    // SAFETY: `len` bytes are readable per the caller, and fit `copy`; every byte pattern
    // is a valid `AbiStruct`.
    unsafe {
        ptr::copy_nonoverlapping(
            ptr.cast::<u8>().as_ptr(),
            ptr::from_mut(&mut copy).cast::<u8>(),
            len,
        );
    }
    (declared, copy)
}

// ---- The trace builder -------------------------------------------------------------------

/// A builder call and what the builder answered.
#[derive(Clone, Debug, PartialEq)]
enum Call {
    AddEvent {
        declared_size: usize,
        /// Read only when the size covers it.
        event_type: Option<c_int>,
        rc: c_int,
    },
    SetName {
        /// The raw bytes (not necessarily UTF-8); `None` for a NULL pointer.
        name: Option<Vec<u8>>,
        rc: c_int,
    },
    SetFlow {
        declared_size: usize,
        rc: c_int,
    },
    Metadata {
        key: String,
        value: String,
        rc: c_int,
    },
    DeviceInfo {
        rc: c_int,
    },
    ResourceInfo {
        rc: c_int,
    },
}

/// An accepted event.
#[derive(Debug)]
struct Recorded {
    event: ProfileEvent,
    name: Option<String>,
    metadata: Vec<(String, String)>,
    flow: Option<ProfileEventFlow>,
}

impl Recorded {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unnamed>")
    }

    fn metadata(&self, key: &str) -> Option<&str> {
        let found = self.metadata.iter().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_str())
    }

    fn flow(&self) -> Option<(ProfileEventFlowType, u32, bool)> {
        self.flow
            .map(|f| (f.flow_type, f.flow_id, f.is_start_point != 0))
    }
}

/// What a plugin handed over, as a strict host sees it: every rule of `docs/plugin-abi.md`
/// section 5 is enforced with −1, values must be JSON, counter values numbers, names UTF-8.
#[derive(Default)]
struct Trace {
    calls: Vec<Call>,
    events: Vec<Recorded>,
    devices: Vec<(i64, i64, Option<String>, Option<String>)>,
    resources: Vec<(i32, i32, i32, Option<String>)>,
}

impl Trace {
    fn named(&self, name: &str) -> Vec<&Recorded> {
        self.events.iter().filter(|r| r.name() == name).collect()
    }

    fn one(&self, name: &str) -> &Recorded {
        match self.named(name)[..] {
            [event] => event,
            ref found => panic!("{} events named {name}: {:?}", found.len(), self.events),
        }
    }

    /// Records `call`; returns its code.
    fn log(&mut self, call: Call) -> c_int {
        let rc = call.rc();
        self.calls.push(call);
        rc
    }

    /// The calls the builder refused: the broken ones.
    fn refused(&self) -> Vec<&Call> {
        self.calls.iter().filter(|call| call.rc() != 0).collect()
    }
}

impl Call {
    /// What the builder answered.
    fn rc(&self) -> c_int {
        match *self {
            Call::AddEvent { rc, .. }
            | Call::SetName { rc, .. }
            | Call::SetFlow { rc, .. }
            | Call::Metadata { rc, .. }
            | Call::DeviceInfo { rc }
            | Call::ResourceInfo { rc } => rc,
        }
    }
}

/// # Safety
///
/// `handle` is the `Trace` of [`builder_over`].
unsafe fn trace<'a>(handle: *mut TraceBuilderHandle) -> &'a mut Trace {
    // SAFETY: the caller's contract.
    unsafe { &mut *handle.cast::<Trace>() }
}

/// # Safety
///
/// `text` is NULL or NUL-terminated.
unsafe fn bytes(text: *const c_char) -> Option<Vec<u8>> {
    // SAFETY: the caller's contract.
    NonNull::new(text.cast_mut())
        .map(|text| unsafe { CStr::from_ptr(text.as_ptr()) }.to_bytes().to_vec())
}

/// # Safety
///
/// As [`bytes`].
unsafe fn string(text: *const c_char) -> Option<String> {
    // SAFETY: the caller's contract.
    unsafe { bytes(text) }.map(|b| String::from_utf8(b).expect("UTF-8 from the plugin"))
}

unsafe extern "C" fn add_event(
    handle: *mut TraceBuilderHandle,
    event: *const ProfileEvent,
) -> c_int {
    // SAFETY: this builder's handle.
    let trace = unsafe { trace(handle) };
    let Some(event) = NonNull::new(event.cast_mut()) else {
        return trace.log(Call::AddEvent {
            declared_size: 0,
            event_type: None,
            rc: -1,
        });
    };
    // SAFETY: the plugin's event, readable for its declared size.
    let (declared_size, event) = unsafe { copy_declared(event) };
    let covered = declared_size >= ProfileEvent::UNPADDED_SIZE;
    let valid = covered && event.event_type.is_valid();
    if valid {
        trace.events.push(Recorded {
            event,
            name: None,
            metadata: Vec::new(),
            flow: None,
        });
    }
    trace.log(Call::AddEvent {
        declared_size,
        event_type: covered.then_some(event.event_type.0),
        rc: if valid { 0 } else { -1 },
    })
}

unsafe extern "C" fn set_last_event_name(
    handle: *mut TraceBuilderHandle,
    name: *const c_char,
) -> c_int {
    // SAFETY: this builder's handle; the plugin passes a string or NULL.
    let (trace, name) = unsafe { (trace(handle), bytes(name)) };
    let text = name.clone().and_then(|b| String::from_utf8(b).ok());
    let rc = match (trace.events.last_mut(), text) {
        (Some(last), Some(text)) => {
            last.name = Some(text);
            0
        }
        _ => -1,
    };
    trace.log(Call::SetName { name, rc })
}

unsafe extern "C" fn set_last_event_flow(
    handle: *mut TraceBuilderHandle,
    flow: *const ProfileEventFlow,
) -> c_int {
    // SAFETY: this builder's handle.
    let trace = unsafe { trace(handle) };
    let Some(flow) = NonNull::new(flow.cast_mut()) else {
        return trace.log(Call::SetFlow {
            declared_size: 0,
            rc: -1,
        });
    };
    // SAFETY: the plugin's flow, readable for its declared size.
    let (declared_size, flow) = unsafe { copy_declared(flow) };
    let valid = declared_size >= ProfileEventFlow::UNPADDED_SIZE && flow.flow_type.is_valid();
    let rc = match trace.events.last_mut() {
        Some(last) if valid && last.flow.is_none() => {
            last.flow = Some(flow);
            0
        }
        _ => -1,
    };
    trace.log(Call::SetFlow { declared_size, rc })
}

unsafe extern "C" fn add_last_event_metadata(
    handle: *mut TraceBuilderHandle,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    // SAFETY: this builder's handle; the plugin passes strings.
    let (trace, key, value) = unsafe { (trace(handle), string(key), string(value)) };
    let (Some(key), Some(value)) = (key, value) else {
        return trace.log(Call::Metadata {
            key: String::new(),
            value: String::new(),
            rc: -1,
        });
    };
    let json = serde_json::from_str::<serde_json::Value>(&value).ok();
    let rc = match (trace.events.last_mut(), json) {
        (Some(last), Some(json))
            if json.is_number() || last.event.event_type != T::GPU_PM_COUNTER =>
        {
            last.metadata.push((key.clone(), value.clone()));
            0
        }
        _ => -1,
    };
    trace.log(Call::Metadata { key, value, rc })
}

unsafe extern "C" fn add_device_info(
    handle: *mut TraceBuilderHandle,
    info: *const ProfileDeviceInfo,
) -> c_int {
    // SAFETY: this builder's handle.
    let trace = unsafe { trace(handle) };
    let Some(info) = NonNull::new(info.cast_mut()) else {
        return trace.log(Call::DeviceInfo { rc: -1 });
    };
    // SAFETY: the plugin's info, readable for its declared size.
    let Ok(info) = (unsafe { read_versioned(info) }) else {
        return trace.log(Call::DeviceInfo { rc: -1 });
    };
    // SAFETY: the plugin passes strings or NULL.
    let (name, label) = unsafe { (string(info.name), string(info.label)) };
    trace
        .devices
        .push((info.device_id, info.sort_index, name, label));
    trace.log(Call::DeviceInfo { rc: 0 })
}

unsafe extern "C" fn add_resource_info(
    handle: *mut TraceBuilderHandle,
    info: *const ProfileResourceInfo,
) -> c_int {
    // SAFETY: this builder's handle.
    let trace = unsafe { trace(handle) };
    let Some(info) = NonNull::new(info.cast_mut()) else {
        return trace.log(Call::ResourceInfo { rc: -1 });
    };
    // SAFETY: the plugin's info, readable for its declared size.
    let Ok(info) = (unsafe { read_versioned(info) }) else {
        return trace.log(Call::ResourceInfo { rc: -1 });
    };
    // SAFETY: the plugin passes a string or NULL.
    let name = unsafe { string(info.name) };
    let row = (info.device_id, info.resource_id, info.display_order, name);
    trace.resources.push(row);
    trace.log(Call::ResourceInfo { rc: 0 })
}

/// A complete builder over `trace`.
fn builder_over(trace: &mut Trace) -> TraceBuilder {
    TraceBuilder {
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

// ---- Driving a profiler ------------------------------------------------------------------

/// A registered profiler's interface, with its entries called as a host does.
#[derive(Clone, Copy)]
struct Profiler(ProfilerInterface);

/// A session handle, usable from the threads that push correlation ids.
#[derive(Clone, Copy)]
struct Handle(*mut ProfilerHandle);

// SAFETY: the ABI lets application threads call the correlation entries concurrently.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// Calls an entry with its parameter struct.
fn call<P>(entry: Option<unsafe extern "C" fn(*mut P) -> c_int>, mut params: P) -> c_int {
    // SAFETY: the plugin's entry with parameters owned by this call.
    unsafe { entry.expect("the entry is present")(&mut params) }
}

/// What a query reports: the return code, the 32-byte name buffer (zeroed before the call)
/// as the plugin left it, and the supported types.
struct Query {
    rc: c_int,
    buffer: [u8; 32],
    types: Vec<ProfileEventType>,
}

impl Query {
    /// The name as a host reads it: the NUL forced at index 31, up to the first NUL.
    fn name(&self) -> &[u8] {
        let mut buffer = &self.buffer[..31];
        if let Some(nul) = buffer.iter().position(|&b| b == 0) {
            buffer = &buffer[..nul];
        }
        buffer
    }
}

impl Profiler {
    fn query(&self) -> Query {
        let mut buffer = [0u8; 32];
        let mut types = [T::INVALID; T::NUM_TYPES.0 as usize];
        let params = ProfilerQueryParams {
            profiler_name: buffer.as_mut_ptr().cast(),
            profiler_name_max_len: 31,
            supported_activity_types: types.as_mut_ptr(),
            supported_activity_types_max_len: types.len(),
            ..Default::default()
        };
        let rc = call(self.0.profiler_query, params);
        let types = types.into_iter().filter(|&t| t != T::INVALID).collect();
        Query { rc, buffer, types }
    }

    /// The name, which must be a successful, UTF-8 answer.
    fn name(&self) -> String {
        let query = self.query();
        assert_eq!(query.rc, 0);
        String::from_utf8(query.name().to_vec()).unwrap()
    }

    fn create(&self, enabled: &[ProfileEventType]) -> (c_int, Handle) {
        let mut enabled = enabled.to_vec();
        let mut params = ProfilerCreateParams {
            enabled_activity_types: enabled.as_mut_ptr(),
            enabled_activity_types_max_len: enabled.len(),
            ..Default::default()
        };
        // SAFETY: as in `call`; the handle is read back after the call.
        let rc = unsafe { self.0.profiler_create.unwrap()(&mut params) };
        (rc, Handle(params.profiler_handle))
    }

    fn created(&self, enabled: &[ProfileEventType]) -> Handle {
        let (rc, handle) = self.create(enabled);
        assert_eq!(rc, 0, "profilerCreate");
        assert!(!handle.0.is_null());
        handle
    }

    fn start(&self, handle: Handle) -> c_int {
        let params = ProfilerStartParams {
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_start, params)
    }

    fn stop(&self, handle: Handle) -> c_int {
        let params = ProfilerStopParams {
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_stop, params)
    }

    fn destroy(&self, handle: Handle) -> c_int {
        let params = ProfilerDestroyParams {
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_destroy, params)
    }

    fn push(&self, handle: Handle, id: u64) -> c_int {
        let params = ProfilerPushCorrelationIdParams {
            correlation_id: id,
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_push_correlation_id, params)
    }

    fn pop(&self, handle: Handle) -> c_int {
        let params = ProfilerPopCorrelationIdParams {
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_pop_correlation_id, params)
    }

    fn push_user(&self, handle: Handle, id: u64) -> c_int {
        let params = ProfilerPushUserCorrelationIdParams {
            user_correlation_id: id,
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_push_user_correlation_id, params)
    }

    fn pop_user(&self, handle: Handle) -> c_int {
        let params = ProfilerPopUserCorrelationIdParams {
            profiler_handle: handle.0,
            ..Default::default()
        };
        call(self.0.profiler_pop_user_correlation_id, params)
    }

    fn process(&self, handle: Handle) -> (c_int, Trace) {
        let mut trace = Trace::default();
        let builder = builder_over(&mut trace);
        let params = ProfilerProcessEventsParams {
            profiler_handle: handle.0,
            trace_builder: &builder,
            ..Default::default()
        };
        let rc = call(self.0.profiler_process_events, params);
        (rc, trace)
    }

    /// A whole session of `enabled`: create, start, stop, process, destroy; the process
    /// code, the trace, and the wall-clock bracket around `start`.
    fn session(&self, enabled: &[ProfileEventType]) -> (c_int, Trace, (i64, i64)) {
        let handle = self.created(enabled);
        let before = now_ns();
        assert_eq!(self.start(handle), 0, "profilerStart");
        let after = now_ns();
        assert_eq!(self.stop(handle), 0, "profilerStop");
        let (rc, trace) = self.process(handle);
        assert_eq!(self.destroy(handle), 0, "profilerDestroy");
        (rc, trace, (before, after))
    }

    /// Which entries are present, in interface order.
    fn entries(&self) -> [bool; 10] {
        let i = &self.0;
        [
            i.profiler_create.is_some(),
            i.profiler_destroy.is_some(),
            i.profiler_query.is_some(),
            i.profiler_start.is_some(),
            i.profiler_stop.is_some(),
            i.profiler_push_correlation_id.is_some(),
            i.profiler_pop_correlation_id.is_some(),
            i.profiler_push_user_correlation_id.is_some(),
            i.profiler_pop_user_correlation_id.is_some(),
            i.profiler_process_events.is_some(),
        ]
    }
}

/// `CLOCK_REALTIME`, the ABI's clock, in nanoseconds since the Unix epoch.
fn now_ns() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_nanos()).unwrap()
}

/// Asserts `event` lies in `[from, to]`.
fn assert_within(event: &Recorded, (from, to): (i64, i64)) {
    let e = &event.event;
    assert!(
        from <= e.start_time_utc_ns.min(e.end_time_utc_ns)
            && e.start_time_utc_ns.max(e.end_time_utc_ns) <= to,
        "{} [{}, {}] is not within [{from}, {to}]",
        event.name(),
        e.start_time_utc_ns,
        e.end_time_utc_ns
    );
}

/// A test hook of a C plugin, `int name(void)`.
fn hook(library: &Library, name: &str) -> c_int {
    let symbol = library
        .symbol(name)
        .unwrap_or_else(|| panic!("{} exports no {name}", library.path.display()));
    // SAFETY: the plugin's source declares `int name(void)`.
    let hook =
        unsafe { std::mem::transmute::<*mut c_void, extern "C" fn() -> c_int>(symbol.as_ptr()) };
    hook()
}

// ---- The sample plugin -------------------------------------------------------------------

/// The sample's profilers: MockPlugin, then SampleCounters.
fn sample() -> (&'static Library, Profiler, Profiler) {
    let library = library("sample_plugin");
    match library.profilers()[..] {
        [mock, counters] => (library, mock, counters),
        ref other => panic!("the sample registered {} profilers", other.len()),
    }
}

type HandleStateFn = unsafe extern "C" fn(*mut bool, *mut usize, *mut i32, usize) -> c_int;

/// MockPlugin's `MockPlugin_lastHandleState`: whether the last live handle is active, and its
/// enabled types; `None` when no handle is alive.
fn mock_state(library: &Library) -> Option<(bool, Vec<i32>)> {
    let symbol = library.symbol("MockPlugin_lastHandleState").unwrap();
    // SAFETY: the sample declares this prototype.
    let state = unsafe { std::mem::transmute::<*mut c_void, HandleStateFn>(symbol.as_ptr()) };
    let (mut active, mut count, mut types) = (false, 0usize, [0i32; 32]);
    // SAFETY: outputs owned here; `types` holds 32 entries.
    let rc = unsafe { state(&mut active, &mut count, types.as_mut_ptr(), types.len()) };
    (rc == 0).then(|| (active, types[..count.min(32)].to_vec()))
}

#[test]
fn the_sample_registers_mock_plugin_and_sample_counters() {
    let (_, mock, counters) = sample();
    let optional_null = [
        true, true, true, true, true, false, false, false, false, true,
    ];
    assert_eq!(mock.entries(), optional_null);
    assert_eq!(counters.entries(), [true; 10]);
    assert_eq!(mock.name(), "MockPlugin");
    assert_eq!(counters.name(), "SampleCounters");
    use ProfileEventType as T;
    let query = mock.query();
    assert_eq!(
        query.types,
        [
            T::CUDA_RUNTIME,
            T::CUDA_DRIVER,
            T::CONCURRENT_KERNEL,
            T::GPU_MEMCPY
        ]
    );
    assert_eq!(
        counters.query().types,
        [
            T::GPU_PM_COUNTER,
            T::PRIVATEUSE1_RUNTIME,
            T::CONCURRENT_KERNEL
        ]
    );
}

/// `docs/plugin-abi.md` section 10: Lifecycle, the configure variants as the plugin sees them, and
/// EventBuilderProcessing.
#[test]
fn mock_plugin_is_the_reference_mock() {
    let _serial = serial();
    let (library, mock, _) = sample();
    let live = || hook(library, "MockPlugin_liveHandleCount");
    assert_eq!((live(), mock_state(library)), (0, None));

    let all = [
        T::CUDA_RUNTIME,
        T::CUDA_DRIVER,
        T::CONCURRENT_KERNEL,
        T::GPU_MEMCPY,
    ];
    let handle = mock.created(&all);
    assert_eq!(live(), 1);
    assert_eq!(mock_state(library), Some((false, vec![8, 9, 6, 4])));
    assert_eq!(mock.start(handle), 0);
    assert!(mock_state(library).unwrap().0, "active after start");
    assert_eq!(mock.stop(handle), 0);
    assert!(!mock_state(library).unwrap().0, "inactive after stop");

    let (rc, trace) = mock.process(handle);
    assert_eq!(rc, 0);
    assert!(trace.refused().is_empty(), "{:?}", trace.refused());
    let events: Vec<_> = trace
        .events
        .iter()
        .map(|r| {
            let e = &r.event;
            (
                e.event_type,
                e.start_time_utc_ns,
                e.end_time_utc_ns,
                e.event_id,
                e.device_id,
                e.resource_id,
                r.name(),
            )
        })
        .collect();
    const BASE: i64 = 1_000_000_000;
    assert_eq!(
        events,
        [
            (
                T::CUDA_RUNTIME,
                BASE,
                BASE + 5_000,
                1,
                0,
                123,
                "cudaLaunchKernel"
            ),
            (
                T::CUDA_DRIVER,
                BASE + 10_000,
                BASE + 15_000,
                2,
                0,
                124,
                "cuLaunchKernel"
            ),
            (
                T::CONCURRENT_KERNEL,
                BASE + 20_000,
                BASE + 50_000,
                3,
                0,
                1,
                "test_kernel"
            ),
            (
                T::GPU_MEMCPY,
                BASE + 60_000,
                BASE + 70_000,
                4,
                0,
                2,
                "cudaMemcpyHtoD"
            ),
        ]
    );
    assert!(trace
        .events
        .iter()
        .all(|r| r.event.unpadded_struct_size == 48 && r.metadata.is_empty() && r.flow.is_none()));
    assert!(trace.devices.is_empty() && trace.resources.is_empty());
    assert_eq!(mock.destroy(handle), 0);
    assert_eq!((live(), mock_state(library)), (0, None));

    // Configure, partial: the host sends the intersection, which the handle records as is.
    let handle = mock.created(&[T::CUDA_RUNTIME, T::CONCURRENT_KERNEL]);
    assert_eq!(mock_state(library), Some((false, vec![8, 6])));
    assert_eq!(mock.destroy(handle), 0);
    assert_eq!(live(), 0);
}

#[test]
fn sample_counters_emits_a_flow_metadata_and_counters_inside_its_start_bracket() {
    let (_, _, counters) = sample();
    let handle = counters.created(&[
        T::GPU_PM_COUNTER,
        T::PRIVATEUSE1_RUNTIME,
        T::CONCURRENT_KERNEL,
    ]);
    let before = now_ns();
    assert_eq!(counters.start(handle), 0);
    let after = now_ns();
    assert!(
        after - before >= 50_000,
        "start waits out its 50 us bracket"
    );
    // Correlation calls come from application threads, concurrently.
    std::thread::scope(|threads| {
        for thread in 0..3u64 {
            threads.spawn(move || {
                for i in 0..10 {
                    assert_eq!(counters.push(handle, thread * 100 + i), 0);
                    assert_eq!(counters.pop(handle), 0);
                }
                assert_eq!(counters.push_user(handle, thread), 0);
                assert_eq!(counters.pop_user(handle), 0);
            });
        }
    });
    assert_eq!(counters.push(handle, 7), 0);
    assert_eq!(counters.stop(handle), 0);
    let (rc, trace) = counters.process(handle);
    assert_eq!(rc, 0);
    assert_eq!(counters.destroy(handle), 0);
    assert!(trace.refused().is_empty(), "{:?}", trace.refused());

    assert_eq!(
        trace.devices,
        [(3, 3, Some("Sample device".into()), Some("GPU 3".into()))]
    );
    assert_eq!(
        trace.resources,
        [
            (3, 7, 1, Some("stream 7".into())),
            (3, 0, 0, Some("counters".into()))
        ]
    );
    for event in &trace.events {
        assert_within(event, (before, after));
    }

    let launch = trace.one("sampleLaunchKernel");
    let kernel = trace.one("sample_kernel");
    let id = launch.event.event_id;
    assert!(id > 1 << 32, "a 64-bit correlation id: {id}");
    let flow_id = (id as u64 & 0xffff_ffff) as u32;
    assert_eq!(launch.event.event_type, T::PRIVATEUSE1_RUNTIME);
    assert_eq!(launch.event.device_id, std::process::id() as i32);
    let meta = |key| launch.metadata(key);
    assert_eq!(meta("pushed_correlations"), Some("31"));
    assert_eq!(meta("popped_correlations"), Some("30"));
    assert_eq!(meta("pushed_user_correlations"), Some("3"));
    assert_eq!(meta("popped_user_correlations"), Some("3"));
    assert_eq!(meta("last_pushed_correlation"), Some("7"));
    let last_user = meta("last_pushed_user_correlation");
    assert!(matches!(last_user, Some("0" | "1" | "2")), "{last_user:?}");
    assert_eq!(launch.metadata.len(), 6);
    assert_eq!(
        launch.flow(),
        Some((ProfileEventFlowType::ASYNC_CPU_GPU, flow_id, true))
    );

    assert_eq!(kernel.event.event_type, T::CONCURRENT_KERNEL);
    assert_eq!(
        (
            kernel.event.event_id,
            kernel.event.device_id,
            kernel.event.resource_id
        ),
        (id, 3, 7)
    );
    assert!(launch.event.start_time_utc_ns < kernel.event.start_time_utc_ns);
    assert_eq!(
        kernel.flow(),
        Some((ProfileEventFlowType::ASYNC_CPU_GPU, flow_id, false))
    );
    assert_eq!(kernel.metadata("stream"), Some("7"));
    assert_eq!(kernel.metadata("device"), Some("3"));
    assert_eq!(kernel.metadata("kernel_kind"), Some("\"elementwise\""));
    assert_eq!(kernel.metadata("note"), Some(r#""says \"hi\"""#));
    assert_eq!(kernel.metadata("grid"), Some("[4, 1, 1]"));

    let samples: Vec<_> = trace
        .named("sm_activity")
        .iter()
        .map(|r| {
            assert_eq!(r.event.event_type, T::GPU_PM_COUNTER);
            assert_eq!((r.event.device_id, r.event.resource_id), (3, 0));
            assert_eq!(r.event.start_time_utc_ns, r.event.end_time_utc_ns);
            assert_eq!(r.metadata.len(), 1);
            r.metadata("sm_active_pct").unwrap().to_owned()
        })
        .collect();
    assert_eq!(samples, ["12.5", "37", "64.25", "88", "50.0"]);
    let dram: Vec<_> = trace
        .named("dram_throughput")
        .iter()
        .map(|r| {
            (
                r.metadata("read_gbps").unwrap(),
                r.metadata("write_gbps").unwrap(),
            )
        })
        .collect();
    assert_eq!(dram, [("1.5", "0.25"), ("12", "3.5"), ("0", "0")]);
    assert_eq!(trace.events.len(), 2 + 5 + 3);
}

#[test]
fn sample_counters_emits_only_what_is_enabled() {
    let (_, _, counters) = sample();
    let (rc, trace, bracket) = counters.session(&[T::CONCURRENT_KERNEL]);
    assert_eq!(rc, 0);
    let names: Vec<_> = trace.events.iter().map(Recorded::name).collect();
    assert_eq!(names, ["sample_kernel"]);
    // Without the launch there is no flow to draw.
    assert_eq!(trace.events[0].flow, None);
    assert_within(&trace.events[0], bracket);

    // Never started: nothing was captured.
    let handle = counters.created(&[T::GPU_PM_COUNTER]);
    let (rc, trace) = counters.process(handle);
    assert_eq!((rc, trace.calls.len()), (0, 0));
    assert_eq!(counters.destroy(handle), 0);
}

// ---- The broken plugins ------------------------------------------------------------------

/// The single profiler of a broken plugin that registers successfully.
fn single(stem: &str) -> Profiler {
    match library(stem).profilers()[..] {
        [profiler] => profiler,
        ref other => panic!("{stem} registered {} profilers", other.len()),
    }
}

#[test]
fn every_c_plugin_is_in_the_corpus() {
    let mut stems: Vec<_> = corpus().keys().map(String::as_str).collect();
    stems.sort_unstable();
    assert_eq!(
        stems,
        [
            "counter_non_numeric",
            "create_error",
            "event_end_before_start",
            "event_flood",
            "event_too_small",
            "event_type_99",
            "event_type_invalid",
            "event_type_num_types",
            "flow_too_small",
            "foreign_ids",
            "handle_misuse",
            "hangs",
            "interface_too_small",
            "invalid_type_flood",
            "late_calls",
            "metadata_after_rejected_event",
            "metadata_invalid_json",
            "metadata_unreadable",
            "missing_register",
            "missing_start",
            "name_before_event",
            "name_huge",
            "name_invalid_utf8",
            "name_null",
            "process_events_error",
            "profiler_name_invalid_utf8",
            "profiler_name_unterminated",
            "query_error",
            "register_error",
            "register_error_after_register",
            "register_error_with_thread",
            "registers_nothing",
            "sample_plugin",
            "spans_its_session",
            "twin_profilers",
        ],
        "a plugin was added or removed: cover it below and in plugins/README.md"
    );
}

#[test]
fn registration_defects() {
    let missing = library("missing_register");
    assert!(missing.register_fn().is_none());
    assert!(
        missing.symbol("KinetoPlugin_Register").is_some(),
        "the typo is there"
    );

    let (rc, registered) = library("register_error").register();
    assert_eq!((rc, registered.len()), (-7, 0));

    let (rc, registered) = library("register_error_after_register").register();
    assert_eq!((rc, registered.len()), (-7, 1));
    assert_eq!(
        Profiler(registered[0].interface).name(),
        "RegisteredThenFailed"
    );

    let (rc, registered) = library("registers_nothing").register();
    assert_eq!((rc, registered.len()), (0, 0));

    let (rc, registered) = library("interface_too_small").register();
    assert_eq!((rc, registered.len()), (0, 1));
    assert_eq!(registered[0].declared_size, 80);
    // Within the declared 80 bytes: everything but profilerProcessEvents.
    let mut expected = [true; 10];
    expected[5..9].fill(false);
    expected[9] = false;
    assert_eq!(Profiler(registered[0].interface).entries(), expected);

    let missing_start = single("missing_start");
    let mut expected = [true; 10];
    expected[3] = false;
    expected[5..9].fill(false);
    assert_eq!(missing_start.entries(), expected);
    assert_eq!(missing_start.name(), "MissingStart");

    let twins: Vec<_> = library("twin_profilers").profilers();
    let names: Vec<_> = twins.iter().map(Profiler::name).collect();
    assert_eq!(names, ["TwinA", "TwinB"]);
    for (twin, (kernel, id, resource)) in twins
        .iter()
        .zip([("twin_a_kernel", 1, 1), ("twin_b_kernel", 2, 2)])
    {
        let (rc, trace, bracket) = twin.session(&[T::CONCURRENT_KERNEL]);
        assert_eq!(rc, 0);
        let event = trace.one(kernel);
        assert_eq!(
            (event.event.event_id, event.event.resource_id),
            (id, resource)
        );
        assert_eq!(trace.events.len(), 1);
        assert_within(event, bracket);
    }
}

/// The plugins that misbehave towards the host: here only what they register (a session
/// with them needs a host that survives them, which `omniprof`'s plugin tests prove).
#[test]
fn misbehaving_plugins_register_as_documented() {
    let hangs: Vec<String> = library("hangs")
        .profilers()
        .iter()
        .map(Profiler::name)
        .collect();
    assert_eq!(
        hangs,
        [
            "HangInCreate",
            "HangInStart",
            "HangInStop",
            "HangInProcessEvents",
            "HangInDestroy"
        ]
    );
    // Its thread keeps running in the library, which this harness never unloads.
    let (rc, registered) = library("register_error_with_thread").register();
    assert_eq!((rc, registered.len()), (-7, 0));
    // This harness serves the call from the plugin's own thread, so it sees two profilers.
    let misuse: Vec<String> = library("handle_misuse")
        .profilers()
        .iter()
        .map(Profiler::name)
        .collect();
    assert_eq!(misuse, ["HandleMisuse", "HandleMisuse"]);

    let (rc, trace, _) = single("event_flood").session(&[T::CONCURRENT_KERNEL]);
    assert_eq!((rc, trace.named("flood_kernel").len()), (0, 100_000));
    let (rc, trace, _) = single("invalid_type_flood").session(&[T::CONCURRENT_KERNEL]);
    assert_eq!(rc, 0);
    assert_eq!(
        trace.one("after_broken_call").metadata("broken_call_rc"),
        Some("-1")
    );
}

#[test]
fn foreign_ids_ignores_pushes_and_uses_its_own_id() {
    let foreign = single("foreign_ids");
    assert_eq!(foreign.name(), "ForeignIds");
    assert_eq!(
        foreign.entries()[5..9],
        [true, true, false, false],
        "push and pop entries, which do nothing"
    );
    let (rc, trace, bracket) = foreign.session(&[T::PRIVATEUSE1_RUNTIME, T::CONCURRENT_KERNEL]);
    assert_eq!(rc, 0);
    for (name, resource) in [("foreign_launch", 4242), ("foreign_kernel", 1)] {
        let event = trace.one(name);
        assert_eq!(
            (event.event.event_id, event.event.resource_id),
            (42, resource)
        );
        assert_within(event, bracket);
    }
}

#[test]
fn query_defects() {
    let query = single("query_error").query();
    assert_eq!(query.rc, -3);
    assert_eq!(query.name(), b"QueryError", "the untrustworthy answer");

    let unterminated = single("profiler_name_unterminated").query();
    assert_eq!(unterminated.rc, 0);
    assert_eq!(
        unterminated.buffer, [b'U'; 32],
        "no NUL anywhere in the buffer"
    );
    assert_eq!(unterminated.name(), [b'U'; 31]);

    let invalid = single("profiler_name_invalid_utf8").query();
    assert_eq!(invalid.rc, 0);
    assert_eq!(invalid.name(), b"Bad\xff\xfeName");
    assert!(std::str::from_utf8(invalid.name()).is_err());
}

#[test]
fn a_failed_create_leaves_no_handle() {
    let _serial = serial();
    let library = library("create_error");
    let profiler = single("create_error");
    assert_eq!(profiler.name(), "CreateError");
    let created = hook(library, "CreateError_createCalls");
    let after = hook(library, "CreateError_callsAfterFailedCreate");
    let (rc, handle) = profiler.create(&[T::CONCURRENT_KERNEL]);
    assert_eq!((rc, handle.0), (-5, ptr::null_mut()));
    assert_eq!(hook(library, "CreateError_createCalls"), created + 1);
    // What a host must not do (`docs/plugin-abi.md`, defect 8); the hook counts it.
    assert_eq!(profiler.push(handle, 1), -1);
    assert_eq!(
        hook(library, "CreateError_callsAfterFailedCreate"),
        after + 1
    );
}

/// What a broken event plugin must hand over besides its broken call: valid_kernel (id 1,
/// unless the plugin stops after it) and after_broken_call (id 2) carrying the code.
fn assert_valid_pair(trace: &Trace, bracket: (i64, i64), broken_call_rc: c_int) {
    let before = trace.one("valid_kernel");
    let after = trace.one("after_broken_call");
    for (event, id) in [(before, 1), (after, 2)] {
        assert_eq!(event.event.event_type, T::CONCURRENT_KERNEL);
        assert_eq!(
            (
                event.event.event_id,
                event.event.device_id,
                event.event.resource_id
            ),
            (id, 0, 1)
        );
        assert_within(event, bracket);
    }
    assert_eq!(
        after.metadata("broken_call_rc"),
        Some(broken_call_rc.to_string().as_str())
    );
}

/// Runs a session of the broken plugin `stem` with `enabled`, requiring processEvents to
/// succeed; its trace and start bracket.
fn broken_session(stem: &str, name: &str, enabled: &[ProfileEventType]) -> (Trace, (i64, i64)) {
    let profiler = single(stem);
    assert_eq!(profiler.name(), name);
    let (rc, trace, bracket) = profiler.session(enabled);
    assert_eq!(rc, 0, "{stem}: profilerProcessEvents");
    (trace, bracket)
}

#[test]
fn bad_event_types_are_offered_and_refused() {
    for (stem, name, bad_type) in [
        ("event_type_99", "BadEventType99", 99),
        ("event_type_invalid", "BadEventType0", 0),
        ("event_type_num_types", "BadEventType25", 25),
    ] {
        let (trace, bracket) = broken_session(stem, name, &[T::CONCURRENT_KERNEL]);
        assert_eq!(
            trace.refused(),
            [&Call::AddEvent {
                declared_size: 48,
                event_type: Some(bad_type),
                rc: -1
            }],
            "{stem}"
        );
        assert_valid_pair(&trace, bracket, -1);
        assert_eq!(trace.events.len(), 2, "{stem}");
    }
}

#[test]
fn metadata_for_a_refused_event_is_offered_after_it() {
    let (trace, _) = broken_session(
        "metadata_after_rejected_event",
        "MetadataAfterRejected",
        &[T::CONCURRENT_KERNEL],
    );
    let refused = trace
        .calls
        .iter()
        .position(|c| {
            matches!(
                c,
                Call::AddEvent {
                    event_type: Some(99),
                    rc: -1,
                    ..
                }
            )
        })
        .expect("the type-99 event, refused");
    assert!(
        matches!(&trace.calls[refused + 1], Call::Metadata { key, .. } if key == "rejected_event_key"),
        "{:?}",
        trace.calls
    );
    assert_eq!(trace.events.len(), 2);
}

#[test]
fn a_too_small_event_and_flow_are_offered_and_refused() {
    let (trace, bracket) =
        broken_session("event_too_small", "EventTooSmall", &[T::CONCURRENT_KERNEL]);
    assert_eq!(
        trace.refused(),
        [&Call::AddEvent {
            declared_size: 24,
            event_type: None,
            rc: -1
        }]
    );
    assert_valid_pair(&trace, bracket, -1);
    assert_eq!(trace.events.len(), 2);

    let (trace, bracket) =
        broken_session("flow_too_small", "FlowTooSmall", &[T::CONCURRENT_KERNEL]);
    assert_eq!(
        trace.refused(),
        [&Call::SetFlow {
            declared_size: 16,
            rc: -1
        }]
    );
    assert_valid_pair(&trace, bracket, -1);
    assert!(trace.events.iter().all(|r| r.flow.is_none()));
}

#[test]
fn an_event_ending_before_it_starts() {
    let (trace, bracket) = broken_session(
        "event_end_before_start",
        "EndBeforeStart",
        &[T::CONCURRENT_KERNEL],
    );
    assert!(trace.refused().is_empty());
    assert_valid_pair(&trace, bracket, 0);
    let reversed = trace.one("reversed_kernel");
    assert!(reversed.event.end_time_utc_ns < reversed.event.start_time_utc_ns);
    assert_eq!(reversed.event.event_id, 3);
    assert_within(reversed, bracket);
}

#[test]
fn bad_event_names() {
    let (trace, bracket) = broken_session("name_null", "NullEventName", &[T::CONCURRENT_KERNEL]);
    assert_eq!(trace.refused(), [&Call::SetName { name: None, rc: -1 }]);
    assert_valid_pair(&trace, bracket, -1);
    let unnamed = trace.one("<unnamed>");
    assert_eq!(unnamed.event.event_id, 3);

    let (trace, bracket) = broken_session(
        "name_before_event",
        "NameBeforeEvent",
        &[T::CONCURRENT_KERNEL],
    );
    assert_eq!(
        trace.calls[0],
        Call::SetName {
            name: Some(b"orphan_name".to_vec()),
            rc: -1
        }
    );
    assert_eq!(trace.refused().len(), 1);
    assert_valid_pair(&trace, bracket, -1);

    let (trace, bracket) = broken_session("name_huge", "HugeName", &[T::CONCURRENT_KERNEL]);
    assert!(trace.refused().is_empty());
    assert_valid_pair(&trace, bracket, 0);
    let huge = trace.events.iter().find(|r| r.event.event_id == 3).unwrap();
    let name = huge.name.as_deref().unwrap();
    assert_eq!(name.len(), 1 << 20);
    assert!(name.bytes().all(|b| b == b'k'));

    let (trace, bracket) = broken_session(
        "name_invalid_utf8",
        "InvalidUtf8Name",
        &[T::CONCURRENT_KERNEL],
    );
    assert_eq!(
        trace.refused(),
        [&Call::SetName {
            name: Some(b"bad\xff\xfe_kernel\xc0\xaf\xed\xa0\x80".to_vec()),
            rc: -1
        }]
    );
    assert_valid_pair(&trace, bracket, -1);
}

#[test]
fn bad_metadata_values() {
    let (trace, bracket) = broken_session(
        "metadata_invalid_json",
        "InvalidJsonMetadata",
        &[T::CONCURRENT_KERNEL],
    );
    assert_eq!(
        trace.refused(),
        [&Call::Metadata {
            key: "blob".into(),
            value: r#"{"unclosed": [1, 2"#.into(),
            rc: -1
        }]
    );
    assert_valid_pair(&trace, bracket, -1);
    assert!(trace.one("valid_kernel").metadata.is_empty());

    let (trace, bracket) = broken_session(
        "counter_non_numeric",
        "NonNumericCounter",
        &[T::GPU_PM_COUNTER, T::CONCURRENT_KERNEL],
    );
    assert_eq!(
        trace.refused(),
        [&Call::Metadata {
            key: "sm_active_pct".into(),
            value: "\"high\"".into(),
            rc: -1
        }]
    );
    assert_valid_pair(&trace, bracket, -1);
    let samples: Vec<_> = trace
        .named("sm_activity")
        .iter()
        .map(|r| {
            assert_eq!(r.event.event_type, T::GPU_PM_COUNTER);
            assert_within(r, bracket);
            r.metadata.clone()
        })
        .collect();
    let pct = |v: &str| vec![("sm_active_pct".to_owned(), v.to_owned())];
    assert_eq!(samples, [pct("42"), vec![], pct("58")]);
}

#[test]
fn a_failing_process_events() {
    let profiler = single("process_events_error");
    assert_eq!(profiler.name(), "ProcessEventsError");
    let (rc, trace, bracket) = profiler.session(&[T::CONCURRENT_KERNEL]);
    assert_eq!(rc, -1);
    assert_eq!(trace.events.len(), 1);
    assert_within(trace.one("valid_kernel"), bracket);
}

#[test]
fn plugins_with_bad_names_emit_their_valid_pair() {
    for stem in ["profiler_name_unterminated", "profiler_name_invalid_utf8"] {
        let (rc, trace, bracket) = single(stem).session(&[T::CONCURRENT_KERNEL]);
        assert_eq!(rc, 0);
        assert!(trace.refused().is_empty());
        assert_valid_pair(&trace, bracket, 0);
    }
}

/// The profilers a host must never run work, so that a host that runs them shows it.
#[test]
fn the_profilers_a_host_must_refuse_work() {
    for stem in [
        "missing_register",
        "register_error_after_register",
        "query_error",
    ] {
        let profiler = match stem {
            "missing_register" => {
                let library = library(stem);
                let symbol = library.symbol("KinetoPlugin_Register").unwrap();
                // SAFETY: the misspelled entry point has the entry point's type.
                let register =
                    unsafe { std::mem::transmute::<*mut c_void, RegisterFn>(symbol.as_ptr()) };
                let mut registered: Vec<Registered> = Vec::new();
                let registry = Registry {
                    registry_handle: ptr::from_mut(&mut registered).cast(),
                    register_profiler: Some(register_profiler),
                    ..Default::default()
                };
                // SAFETY: a complete registry, valid during the call.
                assert_eq!(unsafe { register(&registry) }, 0);
                Profiler(registered.pop().unwrap().interface)
            }
            _ => Profiler(library(stem).register().1.pop().unwrap().interface),
        };
        let (rc, trace, bracket) = profiler.session(&[T::CONCURRENT_KERNEL]);
        assert_eq!(rc, 0, "{stem}");
        assert_within(trace.one("valid_kernel"), bracket);
    }
}

// ---- The OpenReg plugin ------------------------------------------------------------------

#[test]
fn the_openreg_plugin_records_real_work_with_flows() {
    let _serial = serial();
    let path = plugins::openreg_plugin();
    assert!(path.ends_with("libopenreg_plugin.so"), "{}", path.display());
    let library = Box::leak(Box::new(Library::open(&path)));
    let profiler = match library.profilers()[..] {
        [profiler] => profiler,
        ref other => panic!("{} profilers", other.len()),
    };
    assert_eq!(profiler.entries(), [true; 10]);
    let query = profiler.query();
    assert_eq!(query.name(), b"OpenRegPlugin");
    assert_eq!(
        query.types,
        [
            T::PRIVATEUSE1_RUNTIME,
            T::CONCURRENT_KERNEL,
            T::GPU_MEMCPY,
            T::GPU_MEMSET
        ]
    );
    let workload = library.symbol("OpenRegPlugin_runWorkload").unwrap();
    // SAFETY: the plugin documents this prototype.
    let workload = unsafe {
        std::mem::transmute::<*mut c_void, extern "C" fn(u32, u32) -> c_int>(workload.as_ptr())
    };

    let handle = profiler.created(&[
        T::PRIVATEUSE1_RUNTIME,
        T::CONCURRENT_KERNEL,
        T::GPU_MEMCPY,
        T::GPU_MEMSET,
        T::CPU_OP,
    ]);
    let before = now_ns();
    assert_eq!(profiler.start(handle), 0);
    // A host op and a user range around the work, pushed on this thread.
    assert_eq!(profiler.push_user(handle, 900), 0);
    assert_eq!(profiler.push(handle, 77), 0);
    assert_eq!(workload(0, 2), 0);
    assert_eq!(profiler.pop(handle), 0);
    assert_eq!(profiler.pop_user(handle), 0);
    assert_eq!(workload(99, 1), -1, "an invalid device is refused");
    let after = now_ns();
    assert_eq!(profiler.stop(handle), 0);
    let (rc, trace) = profiler.process(handle);
    assert_eq!(rc, 0);
    assert_eq!(profiler.destroy(handle), 0);
    assert!(trace.refused().is_empty(), "{:?}", trace.refused());

    let count = |event_type, name: &str| {
        trace
            .events
            .iter()
            .filter(|r| r.event.event_type == event_type && r.name() == name)
            .count()
    };
    let runtime = T::PRIVATEUSE1_RUNTIME;
    assert_eq!(count(runtime, "orMalloc"), 2);
    assert_eq!(count(runtime, "orMemcpyAsync"), 4);
    assert_eq!(count(runtime, "orMemsetAsync"), 2);
    assert_eq!(count(runtime, "orLaunchKernel"), 4);
    assert_eq!(count(runtime, "orStreamSynchronize"), 1);
    assert_eq!(count(T::CONCURRENT_KERNEL, "fill_f32"), 2);
    assert_eq!(count(T::CONCURRENT_KERNEL, "matmul_32x32"), 2);
    assert_eq!(count(T::GPU_MEMCPY, "Memcpy HtoD"), 2);
    assert_eq!(count(T::GPU_MEMCPY, "Memcpy DtoH"), 2);
    assert_eq!(count(T::GPU_MEMSET, "Memset"), 2);
    assert_eq!(trace.events.len(), 13 + 10);

    // Every record was made inside the pushed host op 77: that is each event's id, and the
    // record's own correlation id is metadata.
    let own = |r: &Recorded| -> u64 { r.metadata("correlation").unwrap().parse().unwrap() };
    let launches: HashMap<u64, &Recorded> = trace
        .events
        .iter()
        .filter(|r| r.event.event_type == runtime)
        .map(|r| (own(r), r))
        .collect();
    assert_eq!(launches.len(), 13, "one correlation id per runtime call");
    let pid = std::process::id() as i32;
    for launch in launches.values() {
        assert_eq!(launch.event.device_id, pid);
        assert_eq!(launch.event.event_id, 77, "{}", launch.name());
        assert_within(launch, (before, after));
    }
    let device_work: Vec<_> = trace
        .events
        .iter()
        .filter(|r| r.event.event_type != runtime)
        .collect();
    for work in &device_work {
        let e = &work.event;
        assert_within(work, (before, after));
        assert_eq!((e.device_id, e.resource_id), (0, 1), "{}", work.name());
        assert_eq!(e.event_id, 77, "{}", work.name());
        let launch = launches[&own(work)];
        assert!(launch.event.start_time_utc_ns <= e.start_time_utc_ns);
        let flow_id = (own(work) & 0xffff_ffff) as u32;
        let ac2g = ProfileEventFlowType::ASYNC_CPU_GPU;
        assert_eq!(work.flow(), Some((ac2g, flow_id, false)), "{}", work.name());
        assert_eq!(
            launch.flow(),
            Some((ac2g, flow_id, true)),
            "{}",
            launch.name()
        );
        assert_eq!(work.metadata("device"), Some("0"));
        assert_eq!(work.metadata("stream"), Some("1"));
        assert_eq!(work.metadata("user_correlation"), Some("900"));
        if e.event_type == T::CONCURRENT_KERNEL {
            assert!(work.metadata("grid").is_some() && work.metadata("block").is_some());
        } else {
            assert_eq!(work.metadata("bytes"), Some("4096"), "{}", work.name());
        }
    }
    // Launches without device work (allocations, the synchronize) start no flow.
    let flows = launches.values().filter(|r| r.flow.is_some()).count();
    assert_eq!(flows, device_work.len());
    assert_eq!(
        trace.devices,
        [(0, 5_000_000, Some("OpenReg 0".into()), Some("GPU 0".into()))]
    );
    assert_eq!(trace.resources, [(0, 1, 1, Some("stream 1 ".into()))]);

    // A session with only kernels: no runtime events, so no flows.
    let handle = profiler.created(&[T::CONCURRENT_KERNEL]);
    assert_eq!(profiler.start(handle), 0);
    assert_eq!(workload(1, 1), 0);
    assert_eq!(profiler.stop(handle), 0);
    let (rc, trace) = profiler.process(handle);
    assert_eq!(profiler.destroy(handle), 0);
    assert_eq!(rc, 0);
    let names: Vec<_> = trace.events.iter().map(Recorded::name).collect();
    assert_eq!(names, ["fill_f32", "matmul_32x32"]);
    assert!(trace
        .events
        .iter()
        .all(|r| r.flow.is_none() && r.event.device_id == 1));
}
