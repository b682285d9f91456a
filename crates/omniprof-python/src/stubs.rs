//! The bridge to PyTorch's PrivateUse1 profiler stubs: per-op device time for a PrivateUse1
//! backend that registered `ProfilerStubs` (`torch::profiler::impl::registerPrivateUse1Methods`),
//! the time `torch.autograd.profiler.profile(use_device="<name>")` reports.
//!
//! The op observer (`python/omniprof/csrc/observer.cpp`) hands over PyTorch's stubs as a table
//! of C functions ([`StubsApi`], in a capsule of a fixed name; every C++ exception is caught there and comes back as a
//! message). They are presented to the session engine as the `pytorch stubs` backend, which
//! offers `privateuse1_runtime` while the stubs say they are enabled: a session selecting
//! `ProfilerActivity.PrivateUse1` (or given `use_device`; the Python session then sets
//! `OMNIPROF_PRIVATEUSE1_STUBS`, which an on-demand config may set too) runs omniprof's own stubs
//! session over them ([`omniprof::backends::timing_session`]), which records an event pair on
//! the op's thread around every op and user range the observer records (from the recorder's
//! callbacks, so a session that did not ask pays nothing), resolves each pair with `elapsed`
//! after the trace stops, off the hot path and under a deadline, and writes it as the op's
//! `device_time_us` and as an interval on a row per device linked to the op (`External id`).
//! Like PyTorch's fallback, it calls neither `synchronize` nor the markers; unlike it, it
//! records one reference event per device at the start (`onEachDevice`), which places the
//! device rows on the host's clock.
//!
//! Stubs that are not enabled (PyTorch's default ones) leave the backend out, and the
//! profile's warning about an activity nobody records names them; stubs that fail are
//! counted and named in the trace's `backend_errors` (a Python warning), and the session
//! goes on.

use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use omniprof::backends::{
    ActivityProfiler, BackendError, ProfilerSession, ProfilerStubs, RecordOut, StubError, StubEvent,
};
use omniprof::Config;
use omniprof_trace::{ActivitySet, ActivityType};
use pyo3::prelude::*;

/// The layout version of [`StubsApi`] (`kStubsApiVersion` in `table.h`).
const STUBS_API_VERSION: u32 = 1;
/// Bytes of a failure's message the C++ side may write.
const ERROR_LEN: usize = 512;

/// PyTorch's PrivateUse1 stubs as C functions; mirrored by `struct StubsApi` in `table.h`.
/// The fallible ones return 0 on success, else 1 with a NUL-terminated message in `error`.
#[repr(C)]
pub(crate) struct StubsApi {
    version: u32,
    enabled: extern "C" fn() -> u8,
    device_name: unsafe extern "C" fn(out: *mut c_char, len: usize) -> usize,
    record: unsafe extern "C" fn(
        device: *mut i32,
        event: *mut *mut c_void,
        cpu_ns: *mut i64,
        error: *mut c_char,
        error_len: usize,
    ) -> i32,
    elapsed: unsafe extern "C" fn(
        start: *const c_void,
        end: *const c_void,
        us: *mut f32,
        error: *mut c_char,
        error_len: usize,
    ) -> i32,
    release: unsafe extern "C" fn(event: *mut c_void),
    on_each_device: unsafe extern "C" fn(
        op: extern "C" fn(context: *mut c_void, device: i32),
        context: *mut c_void,
        error: *mut c_char,
        error_len: usize,
    ) -> i32,
    synchronize: unsafe extern "C" fn(error: *mut c_char, error_len: usize) -> i32,
    mark: unsafe extern "C" fn(name: *const c_char, error: *mut c_char, error_len: usize) -> i32,
    range_push:
        unsafe extern "C" fn(name: *const c_char, error: *mut c_char, error_len: usize) -> i32,
    range_pop: unsafe extern "C" fn(error: *mut c_char, error_len: usize) -> i32,
}

/// Runs a fallible call of the table with a buffer for its message.
fn call(f: impl FnOnce(*mut c_char, usize) -> i32) -> Result<(), StubError> {
    let mut error = [0 as c_char; ERROR_LEN];
    match f(error.as_mut_ptr(), ERROR_LEN) {
        0 => Ok(()),
        _ => {
            // SAFETY: the C++ side wrote a NUL-terminated message into the buffer (and it
            // was zeroed, so it ends in a NUL whatever happened).
            let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_string_lossy();
            Err(StubError::Backend(message.into_owned()))
        }
    }
}

/// An event PyTorch's stubs recorded (a `std::shared_ptr<void>` the C++ side owns), released
/// when dropped.
struct TorchEvent {
    api: &'static StubsApi,
    event: *mut c_void,
}

// SAFETY: the pointer is an owned `std::shared_ptr<void>`, which may be used and released
// from any thread (the stubs' events are, by PyTorch's profiler: recorded on the op's thread,
// timed on another).
unsafe impl Send for TorchEvent {}
// SAFETY: as above; `elapsed` only reads the events.
unsafe impl Sync for TorchEvent {}

impl Drop for TorchEvent {
    fn drop(&mut self) {
        // SAFETY: an event `record` handed over, released once.
        unsafe { (self.api.release)(self.event) };
    }
}

/// PyTorch's stubs as omniprof's [`ProfilerStubs`].
struct TorchStubs(&'static StubsApi);

impl TorchStubs {
    fn text(&self, f: unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> i32, name: &str) {
        let name = CString::new(name.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a NUL-terminated name and a buffer of the length given.
        let _ = call(|error, len| unsafe { f(name.as_ptr(), error, len) });
    }
}

impl ProfilerStubs for TorchStubs {
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError> {
        let (mut device, mut event, mut cpu_ns) = (0i32, std::ptr::null_mut(), 0i64);
        let api = self.0;
        let want_device = out.device.is_some();
        let want_cpu = out.cpu_ns.is_some();
        call(|error, len| {
            // SAFETY: each pointer is valid for the call or null; the buffer has `len` bytes.
            unsafe {
                (api.record)(
                    if want_device {
                        &mut device
                    } else {
                        std::ptr::null_mut()
                    },
                    &mut event,
                    if want_cpu {
                        &mut cpu_ns
                    } else {
                        std::ptr::null_mut()
                    },
                    error,
                    len,
                )
            }
        })?;
        if let Some(d) = out.device {
            *d = device;
        }
        if let Some(c) = out.cpu_ns {
            *c = cpu_ns;
        }
        let event = (!event.is_null()).then(|| Box::new(TorchEvent { api, event }) as StubEvent);
        match out.event {
            Some(slot) => *slot = event,
            None => drop(event),
        }
        Ok(())
    }

    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError> {
        let (Some(start), Some(end)) = (
            start.downcast_ref::<TorchEvent>(),
            end.downcast_ref::<TorchEvent>(),
        ) else {
            return Ok(0.0);
        };
        let mut us = 0f32;
        // SAFETY: two live events `record` handed over, a valid output and buffer.
        call(|error, len| unsafe {
            (self.0.elapsed)(start.event, end.event, &mut us, error, len)
        })?;
        Ok(us)
    }

    fn mark(&self, name: &str) {
        self.text(self.0.mark, name);
    }

    fn range_push(&self, name: &str) {
        self.text(self.0.range_push, name);
    }

    fn range_pop(&self) {
        // SAFETY: a buffer of the length given.
        let _ = call(|error, len| unsafe { (self.0.range_pop)(error, len) });
    }

    fn enabled(&self) -> bool {
        (self.0.enabled)() != 0
    }

    fn on_each_device(&self, op: &mut dyn FnMut(i32)) {
        extern "C" fn each(context: *mut c_void, device: i32) {
            // SAFETY: `context` is the `&mut dyn FnMut(i32)` below, live for the call.
            let op = unsafe { &mut *context.cast::<&mut dyn FnMut(i32)>() };
            // A panic must not unwind into C++.
            let _ = catch_unwind(AssertUnwindSafe(|| op(device)));
        }
        let mut op = op;
        let context = (&mut op as *mut &mut dyn FnMut(i32)).cast::<c_void>();
        // SAFETY: `each` reads `context` as what it is, only during this call.
        // A failure costs the devices their reference events (and the trace its device
        // rows); the per-op calls report what fails.
        let _ = call(|error, len| unsafe { (self.0.on_each_device)(each, context, error, len) });
    }

    fn synchronize(&self) -> Result<(), StubError> {
        // SAFETY: a buffer of the length given.
        call(|error, len| unsafe { (self.0.synchronize)(error, len) })
    }
}

/// The name of the backend (and of its entry in the trace's `backends`).
const BACKEND_NAME: &str = "pytorch stubs";

/// PyTorch's PrivateUse1 stubs as a backend (see the module docs).
struct StubsBackend(&'static StubsApi);

impl StubsBackend {
    /// The PrivateUse1 backend's name, as PyTorch prints it in `use_device`.
    fn device(&self) -> String {
        let mut out = [0 as c_char; 256];
        // SAFETY: a buffer of the length given.
        unsafe { (self.0.device_name)(out.as_mut_ptr(), out.len()) };
        // SAFETY: NUL-terminated by `device_name` (and the buffer was zeroed).
        unsafe { CStr::from_ptr(out.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

impl ActivityProfiler for StubsBackend {
    fn name(&self) -> &str {
        BACKEND_NAME
    }

    /// `privateuse1_runtime`, which only `ProfilerActivity.PrivateUse1` selects, while the
    /// stubs are enabled; nothing otherwise.
    fn available_activities(&self) -> ActivitySet {
        if (self.0.enabled)() != 0 {
            [ActivityType::PrivateUse1Runtime].into_iter().collect()
        } else {
            ActivitySet::empty()
        }
    }

    /// Sits out a session whose config does not ask (`OMNIPROF_PRIVATEUSE1_STUBS`): one that
    /// selects every activity by default, as torch.profiler's default does not time ops
    /// through the stubs either. Sits out as well while the backend's Kineto profiler is
    /// installed (`src/privateuse1.rs`), unless `OMNIPROF_PRIVATEUSE1_PROFILER` is cleared.
    fn configure(
        &self,
        _: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        if !config.privateuse1_stubs() {
            return Ok(None);
        }
        // The backend's Kineto profiler records its device, as in torch.profiler (unless
        // the session asked for the legacy profiler's timing: `use_device=`).
        if config.privateuse1_profiler() && crate::privateuse1::installed() {
            return Ok(None);
        }
        let device = self.device();
        if (self.0.enabled)() == 0 {
            return Err(BackendError::new(StubError::NotEnabled(device).to_string()));
        }
        let stubs = Arc::new(TorchStubs(self.0));
        Ok(Some(omniprof::backends::timing_session(
            &device, stubs, config, true,
        )))
    }
}

/// The name of the observer's `stubs_api()` capsule (`kStubsApiCapsule` in `table.h`).
const STUBS_API_CAPSULE: &CStr = c"omniprof.observer.stubs_api";

/// Makes PyTorch's PrivateUse1 stubs, through the op observer's table in `api` (its
/// `stubs_api()` capsule), the `pytorch stubs` backend of every session from now on. Once
/// per process: Python calls it after building the observer. Anything but a capsule named
/// [`STUBS_API_CAPSULE`] is a `TypeError` (no integer is taken for an address); a table of
/// another version is a `ValueError` saying to rebuild the observer.
///
/// The table is static in the observer, which stays loaded for the life of the process
/// (Python keeps the extension module), hence `'static`.
#[pyfunction]
fn install_torch_stubs(api: &Bound<'_, PyAny>) -> PyResult<()> {
    let pointer =
        crate::capsule::capsule_pointer(api, STUBS_API_CAPSULE, "the op observer's stubs_api()")?;
    // SAFETY: a capsule of this name holds a `StubsApi`, whose first field is the `u32`
    // version; it is read alone until it says the rest has this layout.
    let version = unsafe { pointer.cast::<u32>().read() };
    if version != STUBS_API_VERSION {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "the op observer's stubs table is version {version}, omniprof's native module \
             expects {STUBS_API_VERSION}: remove the omniprof_observer build under \
             TORCH_EXTENSIONS_DIR so it is rebuilt"
        )));
    }
    // SAFETY: a `StubsApi` of this version (above), static in the observer module, which
    // stays loaded.
    let api: &'static StubsApi = unsafe { pointer.cast::<StubsApi>().as_ref() };
    omniprof::backends::register_profiler_factory(
        BACKEND_NAME,
        Box::new(move || Box::new(StubsBackend(api))),
    );
    Ok(())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(install_torch_stubs, m)?)
}
