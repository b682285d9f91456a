//! The safe SDK to write a plugin in Rust without `unsafe`; documented at the crate root
//! ("Writing a plugin in Rust"), where its items are re-exported.

mod ffi;
mod trace;

use core::ffi::c_int;
use std::sync::Arc;

pub use trace::{DeviceInfo, Event, Flow, HostTrace, LastEvent, ResourceInfo, TraceError};

use crate::abi::ProfileEventType;
pub use ffi::{prepare, register, Exported};

/// Success.
pub const OK: c_int = 0;
/// The plugin's code reported an error (a [`PluginError`]).
pub const ERROR_FAILED: c_int = -1;
/// A pointer the ABI requires was NULL.
pub const ERROR_NULL_ARGUMENT: c_int = -2;
/// A struct from the host was smaller than the version this crate knows.
pub const ERROR_STRUCT_TOO_SMALL: c_int = -3;
/// The plugin panicked, now or in an earlier call on the same session.
pub const ERROR_PANICKED: c_int = -4;

/// A profiler a plugin provides: a long-lived factory of one session per trace.
///
/// One instance per type lives for the life of the process, created when the host calls
/// the entry point (with `Default`, or the expression given to
/// [`export_plugin!`](crate::export_plugin)).
pub trait PluginProfiler: Send + Sync + 'static {
    /// What [`create_session`](Self::create_session) makes.
    type Session: PluginSession;

    /// The profiler's name. The host's buffer takes 31 bytes: a longer name is cut at the
    /// last character boundary that fits, and at the first NUL.
    fn name(&self) -> &str;

    /// The event types the profiler can record. The host's array takes
    /// [`ProfileEventType::NUM_TYPES`] entries; any beyond what it takes are not reported.
    fn supported_activity_types(&self) -> &[ProfileEventType];

    /// A session for one trace, recording `enabled`: the requested types that the profiler
    /// supports, as the host sent them.
    fn create_session(&self, enabled: &[ProfileEventType]) -> Result<Self::Session, PluginError>;
}

/// One trace's worth of a profiler, called from the host's engine thread.
pub trait PluginSession: Send + 'static {
    /// The capture window opened.
    fn start(&mut self) -> Result<(), PluginError> {
        Ok(())
    }

    /// The capture window closed.
    fn stop(&mut self) -> Result<(), PluginError> {
        Ok(())
    }

    /// Hands the recorded events to the host's trace builder.
    fn process_events(&mut self, trace: &mut HostTrace<'_>) -> Result<(), PluginError>;

    /// Where correlation pushes and pops go, asked once right after the session is created;
    /// `None` (the default) ignores them.
    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        None
    }
}

/// Receives the host's correlation pushes and pops on application threads, concurrently;
/// calls for one thread come from that thread, properly nested.
pub trait CorrelationListener: Send + Sync {
    /// A host op with this correlation id began on the calling thread.
    fn push_correlation_id(&self, id: u64);
    /// The innermost host op of the calling thread ended.
    fn pop_correlation_id(&self);
    /// A user range with this correlation id began on the calling thread.
    fn push_user_correlation_id(&self, id: u64);
    /// The innermost user range of the calling thread ended.
    fn pop_user_correlation_id(&self);
}

/// What a plugin reports as having gone wrong. The host receives [`ERROR_FAILED`]; the
/// message goes to the plugin's logger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginError(String);

impl PluginError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PluginError {}

impl From<TraceError> for PluginError {
    fn from(error: TraceError) -> Self {
        Self(error.to_string())
    }
}

/// Exports profilers from a plugin library: emits `KinetoPlugin_register`, which registers
/// each listed profiler with the host, and the `extern "C"` functions behind them.
///
/// Each profiler type implements [`PluginProfiler`] and `Default`, or is followed by
/// `= expression` to construct it. Invoke once per library (the crate type must include
/// `cdylib` for the host to load it):
///
/// ```
/// # use omniprof_plugin_sys::*;
/// # #[derive(Default)]
/// # struct KernelProfiler;
/// # struct CounterProfiler(u32);
/// # impl CounterProfiler {
/// #     fn new(devices: u32) -> Self { Self(devices) }
/// # }
/// # struct Idle;
/// # impl PluginSession for Idle {
/// #     fn process_events(&mut self, _: &mut HostTrace<'_>) -> Result<(), PluginError> { Ok(()) }
/// # }
/// # impl PluginProfiler for KernelProfiler {
/// #     type Session = Idle;
/// #     fn name(&self) -> &str { "kernels" }
/// #     fn supported_activity_types(&self) -> &[ProfileEventType] { &[ProfileEventType::CONCURRENT_KERNEL] }
/// #     fn create_session(&self, _: &[ProfileEventType]) -> Result<Idle, PluginError> { Ok(Idle) }
/// # }
/// # impl PluginProfiler for CounterProfiler {
/// #     type Session = Idle;
/// #     fn name(&self) -> &str { "counters" }
/// #     fn supported_activity_types(&self) -> &[ProfileEventType] { &[ProfileEventType::GPU_PM_COUNTER] }
/// #     fn create_session(&self, _: &[ProfileEventType]) -> Result<Idle, PluginError> { Ok(Idle) }
/// # }
/// omniprof_plugin_sys::export_plugin!(KernelProfiler, CounterProfiler = CounterProfiler::new(4));
/// # fn main() {}
/// ```
///
/// The entry point is an `unsafe extern "C" fn(*const Registry) -> c_int` (see
/// [`RegisterFn`](crate::RegisterFn)).
#[macro_export]
macro_rules! export_plugin {
    ($($profiler:ty $(= $make:expr)?),+ $(,)?) => {
        /// The profilers this library exports, one instance per type, created by the first
        /// call of the entry point.
        #[allow(dead_code)] // never constructed: it only carries the profiler type
        struct __OmniprofPluginExport<P>(::core::marker::PhantomData<P>);

        $(
            impl $crate::__private::Exported for __OmniprofPluginExport<$profiler> {
                type Profiler = $profiler;

                fn instance() -> &'static $profiler {
                    static INSTANCE: ::std::sync::OnceLock<$profiler> =
                        ::std::sync::OnceLock::new();
                    INSTANCE.get_or_init(|| $crate::__export_make!($profiler $(, $make)?))
                }
            }
        )+

        /// The entry point of the plugin ABI: registers this library's profilers with the
        /// host's registry.
        ///
        /// # Safety
        ///
        /// `registry` is NULL or points to the host's registry, valid during the call.
        #[unsafe(no_mangle)]
        #[allow(non_snake_case)] // the ABI's name
        pub unsafe extern "C" fn KinetoPlugin_register(
            registry: *const $crate::Registry,
        ) -> ::core::ffi::c_int {
            // SAFETY: this function's contract is `register`'s.
            unsafe {
                $crate::__private::register(
                    registry,
                    &[$($crate::__private::prepare::<__OmniprofPluginExport<$profiler>>),+],
                )
            }
        }
    };
}

/// The constructor of an exported profiler: the given expression, or `Default`.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_make {
    ($profiler:ty) => {
        <$profiler as ::core::default::Default>::default()
    };
    ($profiler:ty, $make:expr) => {
        $make
    };
}
