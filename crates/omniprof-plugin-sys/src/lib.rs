//! The dynamic profiler plugin C ABI: the binary interface between a profiler engine (the
//! host: omniprof, or Kineto with PR 1148) and a profiler shipped as a shared library.
//!
//! This crate holds the ABI three times over, kept in step by its tests:
//!
//! - the `#[repr(C)]` Rust mirror of every struct, enum and function type, at the crate
//!   root, with the versioning helpers ([`unpadded_size!`], [`check_struct_size`],
//!   [`read_versioned`]);
//! - the C header `include/omniprof_plugin.h` (directory [`INCLUDE_DIR`]), with the same
//!   names as Kineto's `KinetoDynamicPluginInterface.h`, which
//!   `include/KinetoDynamicPluginInterface.h` includes so that a Kineto plugin's source
//!   compiles unchanged;
//! - a safe SDK to write a plugin in Rust without `unsafe` ([`PluginProfiler`],
//!   [`PluginSession`], [`HostTrace`] and [`export_plugin!`]; see below).
//!
//! It depends on nothing of omniprof: the host side (the plugin loader) uses it, not the
//! other way round.
//!
//! # How the ABI maps
//!
//! | C (`omniprof_plugin.h`) | Rust |
//! |---|---|
//! | `int KinetoPlugin_register(const struct KinetoPlugin_Registry*)` | [`RegisterFn`], name [`REGISTER_SYMBOL`] |
//! | `enum KinetoPlugin_ProfileEventType`, `KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_RUNTIME` | [`ProfileEventType`], [`ProfileEventType::CUDA_RUNTIME`] |
//! | `enum KinetoPlugin_ProfileEventFlowType` | [`ProfileEventFlowType`] |
//! | `struct KinetoPlugin_ProfileEvent`, `…EventFlow`, `…DeviceInfo`, `…ResourceInfo` | [`ProfileEvent`], [`ProfileEventFlow`], [`ProfileDeviceInfo`], [`ProfileResourceInfo`] |
//! | `struct KinetoPlugin_TraceBuilder` and its functions | [`TraceBuilder`], [`AddEventFn`] … [`AddResourceInfoFn`] |
//! | `struct KinetoPlugin_Profiler<Name>_Params` | [`Profiler<Name>Params`](ProfilerCreateParams) |
//! | `struct KinetoPlugin_ProfilerInterface` and its functions | [`ProfilerInterface`], [`ProfilerCreateFn`] … |
//! | `struct KinetoPlugin_Registry` | [`Registry`], [`RegisterProfilerFn`] |
//! | `const char *OmniprofPlugin_lastError(void)` (omniprof's optional extension) | [`LastErrorFn`], name [`LAST_ERROR_SYMBOL`] |
//! | `KinetoPlugin_RegistryHandle`, `…TraceBuilderHandle`, `…ProfilerHandle` | opaque [`RegistryHandle`], [`TraceBuilderHandle`], [`ProfilerHandle`] |
//! | field `camelCase`, pointer `pName` | field `snake_case`, without the `p` (`name`) |
//! | `KINETO_PLUGIN_<STRUCT>_UNPADDED_STRUCT_SIZE` | [`AbiStruct::UNPADDED_SIZE`] |
//!
//! C enums are newtypes over `c_int` (an unknown value from the other side is then just a
//! value, not undefined behaviour), every function pointer is an `Option` (a NULL entry must
//! be readable to be rejected), the C `bool` of a flow is a `u8`, and each anonymous union of
//! two `int32_t` is one `i32` named after its device-side member (`device_id` for
//! `deviceId`/`processId`). The enum numbering is the ABI's own; a host maps it to its
//! activity types by [`ProfileEventType::name`], never by casting.
//!
//! # Versioning
//!
//! Every struct starts with `size_t unpaddedStructSize`: the producer's *unpadded size*,
//! `offsetof(last field) + sizeof(last field)` of the version it was built with (trailing
//! padding excluded, so the flow struct, 24 bytes in memory, declares 17). Fields are only
//! ever appended. A consumer accepts a struct declaring at least the size it knows and reads
//! only the fields it knows; a smaller struct comes from a producer older than supported and
//! is rejected. Each side checks what the other hands over: the host checks the interface,
//! events, flows and infos; the plugin checks the registry, the trace builder and the
//! parameter structs (the SDK does this for a Rust plugin).
//!
//! ```
//! use core::ptr::NonNull;
//! use omniprof_plugin_sys::{read_versioned, AbiStruct, ProfileEvent, SizeError};
//!
//! assert_eq!(ProfileEvent::UNPADDED_SIZE, 48);
//! let event = ProfileEvent::default(); // all zero, `unpadded_struct_size` = 48
//! // A consumer copies the known prefix of a struct only after checking its size.
//! let copy = unsafe { read_versioned(NonNull::from(&event)) }.unwrap();
//! assert_eq!(copy, event);
//! let old = ProfileEvent { unpadded_struct_size: 24, ..event };
//! assert_eq!(
//!     unsafe { read_versioned(NonNull::from(&old)) },
//!     Err(SizeError { given: 24, required: 48 })
//! );
//! ```
//!
//! # Writing a plugin in C
//!
//! Include the header, define `KinetoPlugin_register`, register one interface per profiler,
//! and build a shared library into the directory named by `KINETO_PLUGIN_LIB_DIR_PATH`:
//!
//! ```c
//! #include "omniprof_plugin.h"
//!
//! static int create(struct KinetoPlugin_ProfilerCreate_Params *p) { /* ... */ return 0; }
//! /* destroy, query, start, stop, processEvents likewise; the correlation entries may be NULL. */
//!
//! int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
//!     if (registry == NULL || registry->unpaddedStructSize < KINETO_PLUGIN_REGISTRY_UNPADDED_STRUCT_SIZE)
//!         return -1;
//!     struct KinetoPlugin_ProfilerInterface iface = {0};
//!     iface.unpaddedStructSize = KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE;
//!     iface.profilerCreate = create;
//!     /* ... */
//!     return registry->registerProfiler(registry->pRegistryHandle, &iface);
//! }
//! ```
//!
//! ```sh
//! cc -std=c11 -shared -fPIC -fvisibility=hidden -I "$OMNIPROF_PLUGIN_SYS/include" \
//!     my_plugin.c -o "$KINETO_PLUGIN_LIB_DIR_PATH/libmy_plugin.so"
//! ```
//!
//! The header declares `KinetoPlugin_register` with default visibility, so it stays exported
//! under `-fvisibility=hidden`.
//!
//! # Writing a plugin in Rust
//!
//! Depend on this crate, build a `cdylib`, implement [`PluginProfiler`] and [`PluginSession`],
//! then [`export_plugin!`] emits the entry point and every `extern "C"`
//! function of the interface. No `unsafe` in the plugin.
//!
//! The exported functions check every pointer and struct size the host hands over (NULL and
//! too-small structs are refused with an error code, never dereferenced), catch panics (a
//! panic never unwinds into the host), and follow the ABI's lifecycle: a session is created
//! per trace by `profilerCreate`, started, stopped, asked for its events, and dropped by
//! `profilerDestroy`.
//!
//! ## Return codes
//!
//! Every exported function returns one of these; the host treats any non-zero code as a
//! failure and logs it. The message of a failure goes to the [`log`] crate, which prints
//! nothing unless the plugin installs a logger.
//!
//! | code | constant | cause |
//! |---|---|---|
//! | 0 | [`OK`] | success |
//! | −1 | [`ERROR_FAILED`] | the plugin returned a [`PluginError`] (including a [`TraceError`] passed on with `?`) |
//! | −2 | [`ERROR_NULL_ARGUMENT`] | NULL where the ABI needs a pointer: the parameters, the registry or its `registerProfiler`, the session handle (e.g. after a failed `profilerCreate`), the trace builder, a non-empty array |
//! | −3 | [`ERROR_STRUCT_TOO_SMALL`] | a struct from the host is smaller than this crate's version (the versioning rule) |
//! | −4 | [`ERROR_PANICKED`] | the plugin panicked in this call, or the session panicked in an earlier one and is no longer used |
//!
//! `KinetoPlugin_register` returns 0 as soon as one profiler registered, even if another
//! failed: the host unloads a library whose entry point fails, and would then hold the
//! function pointers of the profilers already registered. When none registered, it returns
//! the first failure: the code `registerProfiler` returned, or one of the above.
//!
//! ## Threads
//!
//! The host calls `start`, `stop` and `process_events` from its engine thread, but pushes
//! and pops correlation ids from application threads, concurrently. The session therefore
//! sits behind a mutex that only the engine-thread calls take, and correlation calls go to a
//! separate [`CorrelationListener`] that takes `&self` and is called without a lock.
//!
//! ## Example
//!
//! ```
//! use omniprof_plugin_sys::*;
//!
//! #[derive(Default)]
//! struct Ticker;
//!
//! struct TickerSession {
//!     started_ns: i64,
//! }
//!
//! impl PluginProfiler for Ticker {
//!     type Session = TickerSession;
//!
//!     fn name(&self) -> &str {
//!         "Ticker"
//!     }
//!
//!     fn supported_activity_types(&self) -> &[ProfileEventType] {
//!         &[ProfileEventType::CONCURRENT_KERNEL]
//!     }
//!
//!     fn create_session(&self, _enabled: &[ProfileEventType]) -> Result<TickerSession, PluginError> {
//!         Ok(TickerSession { started_ns: 0 })
//!     }
//! }
//!
//! impl PluginSession for TickerSession {
//!     fn start(&mut self) -> Result<(), PluginError> {
//!         self.started_ns = 1_700_000_000_000_000_000;
//!         Ok(())
//!     }
//!
//!     fn process_events(&mut self, trace: &mut HostTrace<'_>) -> Result<(), PluginError> {
//!         let mut kernel = trace.add_event(&Event {
//!             name: "tick",
//!             event_type: ProfileEventType::CONCURRENT_KERNEL,
//!             start_ns: self.started_ns,
//!             end_ns: self.started_ns + 1_000,
//!             id: 1,
//!             device_id: 0,
//!             resource_id: 7,
//!         })?;
//!         kernel.add_metadata_str("stream", "default")?;
//!         Ok(())
//!     }
//! }
//!
//! omniprof_plugin_sys::export_plugin!(Ticker);
//! # fn main() {}
//! ```
//!
//! # Platform
//!
//! The ABI's layouts are specified for LP64 (x86-64 and aarch64 Linux and macOS); the tests
//! assert every size and offset there.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

mod abi;
mod sdk;
mod version;

pub use abi::*;
pub use sdk::{
    CorrelationListener, DeviceInfo, Event, Flow, HostTrace, LastEvent, PluginError,
    PluginProfiler, PluginSession, ResourceInfo, TraceError, ERROR_FAILED, ERROR_NULL_ARGUMENT,
    ERROR_PANICKED, ERROR_STRUCT_TOO_SMALL, OK,
};
pub use version::{check_struct_size, read_versioned, AbiStruct, SizeError};

/// The directory holding `omniprof_plugin.h` (and `KinetoDynamicPluginInterface.h`), for
/// build scripts that compile C against it.
pub const INCLUDE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include");

/// Items the exported macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::sdk::{prepare, register, Exported};
    pub use crate::version::field_size;
}
