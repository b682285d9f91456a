//! The backend interface every source of device data implements, and its registry;
//! documented on [`ActivityProfiler`].

mod interface;
mod registry;

use std::sync::Arc;

pub use interface::{
    ActivityProfiler, ActivitySink, BackendError, DeviceInfo, Enclosing, HostOps, ProfilerSession,
    ResourceInfo, ScopeMetric,
};
pub use registry::{
    has_factory, init_engine, is_registered_with_engine, register_profiler_factory,
    registered_profilers, ProfilerFactory,
};

/// The backends a session would take part with now: those registered, and the plugins in the
/// plugin directories (loaded once, as the first session does).
pub fn profilers_present() -> Vec<Arc<dyn ActivityProfiler>> {
    take_in_backends();
    registered_profilers()
}

/// Takes in every backend a session can use: the plugins in the plugin directories (loaded
/// once per process) and the registered factories (each instantiated once).
pub(crate) fn take_in_backends() {
    crate::plugin::load_env_once();
    init_engine();
}

/// Registers a backend type with the process-wide registry before `main` runs. The type must
/// implement [`ActivityProfiler`] and `Default` (or give a constructor expression as a second
/// argument); anything else does not compile.
///
/// The registration runs when the binary starts, as long as the object holding it is linked:
/// a library that registers a backend must be used by the program for it to take part.
#[macro_export]
macro_rules! register_profiler {
    ($ty:ty) => {
        $crate::register_profiler!($ty, <$ty as ::core::default::Default>::default());
    };
    ($ty:ty, $make:expr) => {
        $crate::run_at_load!({
            fn factory() -> ::std::boxed::Box<dyn $crate::backends::ActivityProfiler> {
                let profiler: $ty = $make;
                ::std::boxed::Box::new(profiler)
            }
            $crate::backends::register_profiler_factory(
                ::core::any::type_name::<$ty>(),
                ::std::boxed::Box::new(factory),
            );
        });
    };
}

/// Runs a block when the program (or the library holding it) is loaded, before `main`: the
/// one constructor in `.init_array` behind [`register_profiler!`](crate::register_profiler)
/// and [`register_stubs!`](crate::register_stubs), so registrations from static
/// constructors work as PyTorch's do.
#[doc(hidden)]
#[macro_export]
macro_rules! run_at_load {
    ($body:block) => {
        const _: () = {
            extern "C" fn __omniprof_at_load() $body
            #[used]
            #[link_section = ".init_array"]
            static __OMNIPROF_AT_LOAD: extern "C" fn() = __omniprof_at_load;
        };
    };
}
