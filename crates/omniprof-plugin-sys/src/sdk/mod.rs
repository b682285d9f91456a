//! The safe SDK to write a plugin in Rust without `unsafe`; documented at the crate root
//! ("Writing a plugin in Rust"), where its items are re-exported.

mod ffi;
mod plugin;
mod trace;

pub use ffi::{prepare, register, Exported};
pub use plugin::{
    CorrelationListener, PluginError, PluginProfiler, PluginSession, ERROR_FAILED,
    ERROR_NULL_ARGUMENT, ERROR_PANICKED, ERROR_STRUCT_TOO_SMALL, OK,
};
pub use trace::{DeviceInfo, Event, Flow, HostTrace, LastEvent, ResourceInfo, TraceError};

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
