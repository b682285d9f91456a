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
//! - a safe SDK, [`sdk`], to write a plugin in Rust without `unsafe`.
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
//! Depend on this crate, build a `cdylib`, implement [`sdk::PluginProfiler`] and
//! [`sdk::PluginSession`], and export with [`export_plugin!`]; the [`sdk`] module has a
//! complete example.
//!
//! # Platform
//!
//! The ABI's layouts are specified for LP64 (x86-64 and aarch64 Linux and macOS); the tests
//! assert every size and offset there.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

mod abi;
pub mod sdk;
mod version;

pub use abi::*;
pub use version::{check_struct_size, read_versioned, AbiStruct, SizeError};

/// The directory holding `omniprof_plugin.h` (and `KinetoDynamicPluginInterface.h`), for
/// build scripts that compile C against it.
pub const INCLUDE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include");

/// Items the exported macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::version::field_size;
}
