//! The `extern "C"` side of the SDK: the entry point's body and the function table of each
//! exported profiler. Everything the host hands over is checked here before use.

use core::any::Any;
use core::ffi::{c_char, c_int};
use core::fmt;
use core::ptr::{self, NonNull};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    CorrelationListener, HostTrace, PluginError, PluginProfiler, PluginSession, ERROR_FAILED,
    ERROR_NULL_ARGUMENT, ERROR_PANICKED, ERROR_STRUCT_TOO_SMALL, OK,
};
use crate::abi::*;
use crate::version::{read_versioned, AbiStruct, SizeError};

/// An exported profiler, implemented by [`export_plugin!`](crate::export_plugin) for a type
/// local to the plugin (so that any profiler type can be exported, wherever it is defined).
pub trait Exported: 'static {
    /// The profiler.
    type Profiler: PluginProfiler;

    /// The one instance, created on first use.
    fn instance() -> &'static Self::Profiler;
}

/// Creates the profiler's instance and returns its function table. Registration calls it,
/// so that a constructor that panics fails registration instead of a later call.
pub fn prepare<E: Exported>() -> ProfilerInterface {
    E::instance();
    ProfilerInterface {
        profiler_create: Some(create::<E>),
        profiler_destroy: Some(destroy::<E>),
        profiler_query: Some(query::<E>),
        profiler_start: Some(start::<E>),
        profiler_stop: Some(stop::<E>),
        profiler_push_correlation_id: Some(push_correlation_id::<E>),
        profiler_pop_correlation_id: Some(pop_correlation_id::<E>),
        profiler_push_user_correlation_id: Some(push_user_correlation_id::<E>),
        profiler_pop_user_correlation_id: Some(pop_user_correlation_id::<E>),
        profiler_process_events: Some(process_events::<E>),
        ..Default::default()
    }
}

/// The body of `KinetoPlugin_register`: registers every profiler, each independently.
/// Returns 0 when at least one registered (a non-zero code makes the host unload the
/// library, which would leave it holding the registered profilers' function pointers), and
/// otherwise the first failure's code.
///
/// # Safety
///
/// `registry` is NULL or points to the host's registry, valid during the call.
pub unsafe fn register(
    registry: *const Registry,
    profilers: &[fn() -> ProfilerInterface],
) -> c_int {
    let run = || -> Result<(), Failure> {
        // SAFETY: the caller's contract.
        let registry = unsafe { read_params(registry.cast_mut()) }?;
        let register_profiler = registry
            .register_profiler
            .ok_or(Failure::Null("registerProfiler"))?;
        let mut first_failure = None;
        let mut registered = false;
        for prepare in profilers {
            let code = match panic::catch_unwind(prepare) {
                // SAFETY: the host's function with the host's handle, as the registry gave
                // them; the interface is complete and outlives the call (the host copies it).
                Ok(interface) => unsafe { register_profiler(registry.registry_handle, &interface) },
                Err(payload) => discard_panic(payload),
            };
            if code == OK {
                registered = true;
            } else {
                log::error!("registering a plugin profiler failed with {code}");
                first_failure.get_or_insert(code);
            }
        }
        match first_failure {
            Some(code) if !registered => Err(Failure::Code(code)),
            _ => Ok(()),
        }
    };
    guarded("KinetoPlugin_register", || "plugin".to_owned(), run)
}

/// The session behind a `ProfilerHandle`.
struct Session<S> {
    /// Taken by the engine-thread calls only, so it is never contended in practice; it
    /// exists so that a host calling from several threads cannot cause a data race, and so
    /// that a session that panicked (poisoned) is not used again.
    session: Mutex<S>,
    /// Called from application threads without a lock.
    correlation: Option<Arc<dyn CorrelationListener>>,
}

/// The session type of profiler `E`.
type SessionOf<E> = <<E as Exported>::Profiler as PluginProfiler>::Session;

/// Why an exported function failed; its [`code`](Self::code) goes to the host.
enum Failure {
    Plugin(PluginError),
    Null(&'static str),
    TooSmall(&'static str, SizeError),
    Poisoned,
    /// A code the host returned, passed back.
    Code(c_int),
}

impl Failure {
    fn code(&self) -> c_int {
        match self {
            Self::Plugin(_) => ERROR_FAILED,
            Self::Null(_) => ERROR_NULL_ARGUMENT,
            Self::TooSmall(..) => ERROR_STRUCT_TOO_SMALL,
            Self::Poisoned => ERROR_PANICKED,
            Self::Code(code) => *code,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Plugin(error) => error.fmt(f),
            Self::Null(what) => write!(f, "{what} is NULL"),
            Self::TooSmall(what, error) => write!(f, "{what}: {error}"),
            Self::Poisoned => f.write_str("the session panicked earlier and is not used again"),
            Self::Code(code) => write!(f, "the host returned {code}"),
        }
    }
}

/// Runs `body`, logging a failure and turning it into its code, and a panic into
/// [`ERROR_PANICKED`]: nothing unwinds into the host.
fn guarded(
    function: &'static str,
    subject: impl FnOnce() -> String,
    body: impl FnOnce() -> Result<(), Failure>,
) -> c_int {
    // Unwind safety: a panic in an engine-thread call poisons the session's mutex, so that
    // session is not used again; one while creating the instance fails registration. A
    // correlation listener that panics stays in use: it is `Sync`, so its state is at worst
    // inconsistent, never unsound.
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| match body() {
        Ok(()) => OK,
        Err(failure) => {
            log::error!("{}: {function} failed: {failure}", subject());
            failure.code()
        }
    }));
    outcome.unwrap_or_else(discard_panic)
}

/// The code for a caught panic, after dropping its payload. A payload whose destructor
/// panics in turn must not unwind into the host (an abort): that second payload is leaked.
fn discard_panic(payload: Box<dyn Any + Send>) -> c_int {
    if let Err(second) = panic::catch_unwind(AssertUnwindSafe(|| drop(payload))) {
        std::mem::forget(second);
    }
    ERROR_PANICKED
}

/// [`guarded`] for a call on profiler `E`.
fn call<E: Exported>(function: &'static str, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    guarded(
        function,
        || format!("plugin profiler {:?}", E::instance().name()),
        body,
    )
}

/// Copies the parameter struct at `params` after checking it is there and large enough.
///
/// # Safety
///
/// `params` is NULL or satisfies [`read_versioned`].
unsafe fn read_params<T: AbiStruct>(params: *mut T) -> Result<T, Failure> {
    let params = NonNull::new(params).ok_or(Failure::Null(T::C_NAME))?;
    // SAFETY: the caller's contract.
    unsafe { read_versioned(params) }.map_err(|error| Failure::TooSmall(T::C_NAME, error))
}

/// The session behind `handle`.
///
/// # Safety
///
/// `handle` is NULL or was returned by [`create`] for the same profiler and not yet
/// destroyed.
unsafe fn session<'a, S>(handle: *mut ProfilerHandle) -> Result<&'a Session<S>, Failure> {
    let handle = NonNull::new(handle).ok_or(Failure::Null("pProfilerHandle"))?;
    // SAFETY: `create` made the handle from a `Box<Session<S>>`, alive until `destroy`.
    Ok(unsafe { handle.cast::<Session<S>>().as_ref() })
}

/// Locks the session for an engine-thread call.
fn lock<S>(session: &Session<S>) -> Result<MutexGuard<'_, S>, Failure> {
    session.session.lock().map_err(|_| Failure::Poisoned)
}

/// `profilerQuery`: writes the name and the supported types into the host's buffers. The
/// handle is not used (the host passes NULL).
unsafe extern "C" fn query<E: Exported>(params: *mut ProfilerQueryParams) -> c_int {
    call::<E>("profilerQuery", || {
        // SAFETY: the host passes its parameters, valid during the call.
        let params = unsafe { read_params(params) }?;
        let profiler = E::instance();
        if let Some(buffer) = NonNull::new(params.profiler_name) {
            // SAFETY: the host's buffer holds `profiler_name_max_len` bytes plus the NUL.
            unsafe { write_name(profiler.name(), buffer, params.profiler_name_max_len) };
        }
        if let Some(types) = NonNull::new(params.supported_activity_types) {
            // SAFETY: the host's array holds `supported_activity_types_max_len` entries and
            // nothing else refers to it during the call.
            let slots = unsafe {
                std::slice::from_raw_parts_mut(
                    types.as_ptr(),
                    params.supported_activity_types_max_len,
                )
            };
            let supported = profiler.supported_activity_types().iter().copied();
            // Slots past the list are set to INVALID, which hosts ignore, in case the host
            // did not pre-fill them.
            let padded = supported.chain(std::iter::repeat(ProfileEventType::INVALID));
            for (slot, value) in slots.iter_mut().zip(padded) {
                *slot = value;
            }
        }
        Ok(())
    })
}

/// Writes `name` into a C buffer of `max_len` bytes plus a NUL: cut at the first NUL and at
/// the last character boundary that fits, so the host always gets valid, terminated UTF-8.
///
/// # Safety
///
/// `buffer` is writable for `max_len + 1` bytes.
unsafe fn write_name(name: &str, buffer: NonNull<c_char>, max_len: usize) {
    let name = name.split('\0').next().unwrap_or_default();
    let mut len = name.len().min(max_len);
    while !name.is_char_boundary(len) {
        len -= 1;
    }
    // SAFETY: `len <= max_len`, so the copy and the NUL after it fit the buffer, which is
    // the host's and cannot overlap `name`.
    unsafe {
        ptr::copy_nonoverlapping(name.as_ptr(), buffer.as_ptr().cast::<u8>(), len);
        buffer.as_ptr().add(len).write(0);
    }
}

/// `profilerCreate`: creates a session with the enabled types and returns its handle (NULL
/// on failure).
unsafe extern "C" fn create<E: Exported>(params_ptr: *mut ProfilerCreateParams) -> c_int {
    call::<E>("profilerCreate", || {
        // SAFETY: the host passes its parameters, valid during the call.
        let params = unsafe { read_params(params_ptr) }?;
        // SAFETY: `pProfilerHandle` lies within the size checked by `read_params`; it is
        // cleared first so that a failure below leaves NULL.
        let handle_out = unsafe { &raw mut (*params_ptr).profiler_handle };
        // SAFETY: as above.
        unsafe { handle_out.write(ptr::null_mut()) };
        let enabled = match params.enabled_activity_types_max_len {
            0 => &[][..],
            len => {
                let types = NonNull::new(params.enabled_activity_types)
                    .ok_or(Failure::Null("pEnabledActivityTypes"))?;
                // SAFETY: the host's array holds `len` entries during the call.
                unsafe { std::slice::from_raw_parts(types.as_ptr(), len) }
            }
        };
        let session = E::instance()
            .create_session(enabled)
            .map_err(Failure::Plugin)?;
        let correlation = session.correlation_listener();
        let session = Box::new(Session {
            session: Mutex::new(session),
            correlation,
        });
        // SAFETY: as above. Ownership passes to the host until `destroy`.
        unsafe { handle_out.write(Box::into_raw(session).cast()) };
        Ok(())
    })
}

/// `profilerDestroy`: drops the session.
unsafe extern "C" fn destroy<E: Exported>(params: *mut ProfilerDestroyParams) -> c_int {
    call::<E>("profilerDestroy", || {
        // SAFETY: the host passes its parameters, valid during the call.
        let params = unsafe { read_params(params) }?;
        let handle =
            NonNull::new(params.profiler_handle).ok_or(Failure::Null("pProfilerHandle"))?;
        // SAFETY: `create` made the handle with `Box::into_raw`; the host destroys each
        // handle once and uses it no more.
        drop(unsafe { Box::from_raw(handle.cast::<Session<SessionOf<E>>>().as_ptr()) });
        Ok(())
    })
}

/// `profilerStart`.
unsafe extern "C" fn start<E: Exported>(params: *mut ProfilerStartParams) -> c_int {
    call::<E>("profilerStart", || {
        // SAFETY: the host passes its parameters, valid during the call, and a handle
        // `create` returned.
        let session = unsafe { session::<SessionOf<E>>(read_params(params)?.profiler_handle) }?;
        lock(session)?.start().map_err(Failure::Plugin)
    })
}

/// `profilerStop`.
unsafe extern "C" fn stop<E: Exported>(params: *mut ProfilerStopParams) -> c_int {
    call::<E>("profilerStop", || {
        // SAFETY: as in `start`.
        let session = unsafe { session::<SessionOf<E>>(read_params(params)?.profiler_handle) }?;
        lock(session)?.stop().map_err(Failure::Plugin)
    })
}

/// `profilerProcessEvents`: lends the session the host's trace builder.
unsafe extern "C" fn process_events<E: Exported>(
    params: *mut ProfilerProcessEventsParams,
) -> c_int {
    call::<E>("profilerProcessEvents", || {
        // SAFETY: the host passes its parameters, valid during the call.
        let params = unsafe { read_params(params) }?;
        // SAFETY: a handle `create` returned.
        let session = unsafe { session::<SessionOf<E>>(params.profiler_handle) }?;
        let raw =
            NonNull::new(params.trace_builder.cast_mut()).ok_or(Failure::Null("pTraceBuilder"))?;
        // SAFETY: the host's builder is valid, and callable from this thread, during this
        // call, which the builder does not outlive.
        let mut trace = unsafe { HostTrace::from_raw(raw) }
            .map_err(|error| Failure::TooSmall("KinetoPlugin_TraceBuilder", error))?;
        lock(session)?
            .process_events(&mut trace)
            .map_err(Failure::Plugin)
    })
}

/// The correlation listener of the session behind `handle`, if it has one.
///
/// # Safety
///
/// As [`session`].
unsafe fn listener<'a, E: Exported>(
    handle: *mut ProfilerHandle,
) -> Result<Option<&'a dyn CorrelationListener>, Failure> {
    // SAFETY: the caller's contract.
    let session = unsafe { session::<SessionOf<E>>(handle) }?;
    Ok(session.correlation.as_deref())
}

/// `profilerPushCorrelationId`.
unsafe extern "C" fn push_correlation_id<E: Exported>(
    params: *mut ProfilerPushCorrelationIdParams,
) -> c_int {
    call::<E>("profilerPushCorrelationId", || {
        // SAFETY: the host passes its parameters, valid during the call.
        let params = unsafe { read_params(params) }?;
        // SAFETY: a handle `create` returned.
        if let Some(listener) = unsafe { listener::<E>(params.profiler_handle) }? {
            listener.push_correlation_id(params.correlation_id);
        }
        Ok(())
    })
}

/// `profilerPopCorrelationId`.
unsafe extern "C" fn pop_correlation_id<E: Exported>(
    params: *mut ProfilerPopCorrelationIdParams,
) -> c_int {
    call::<E>("profilerPopCorrelationId", || {
        // SAFETY: the host passes its parameters, valid during the call, and a handle
        // `create` returned.
        if let Some(listener) = unsafe { listener::<E>(read_params(params)?.profiler_handle) }? {
            listener.pop_correlation_id();
        }
        Ok(())
    })
}

/// `profilerPushUserCorrelationId`.
unsafe extern "C" fn push_user_correlation_id<E: Exported>(
    params: *mut ProfilerPushUserCorrelationIdParams,
) -> c_int {
    call::<E>("profilerPushUserCorrelationId", || {
        // SAFETY: the host passes its parameters, valid during the call.
        let params = unsafe { read_params(params) }?;
        // SAFETY: a handle `create` returned.
        if let Some(listener) = unsafe { listener::<E>(params.profiler_handle) }? {
            listener.push_user_correlation_id(params.user_correlation_id);
        }
        Ok(())
    })
}

/// `profilerPopUserCorrelationId`.
unsafe extern "C" fn pop_user_correlation_id<E: Exported>(
    params: *mut ProfilerPopUserCorrelationIdParams,
) -> c_int {
    call::<E>("profilerPopUserCorrelationId", || {
        // SAFETY: the host passes its parameters, valid during the call, and a handle
        // `create` returned.
        if let Some(listener) = unsafe { listener::<E>(read_params(params)?.profiler_handle) }? {
            listener.pop_user_correlation_id();
        }
        Ok(())
    })
}
