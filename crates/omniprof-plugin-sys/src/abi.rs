//! The `#[repr(C)]` mirror of every type in the plugin ABI (`docs/plugin-abi.md`, sections 2–6).
//!
//! Names follow Rust style; each item's documentation gives its C name in
//! `include/omniprof_plugin.h`. Three choices keep the mirror sound when the other side is
//! buggy or from another version, at no cost in layout:
//!
//! - C enums are `#[repr(transparent)]` newtypes over `c_int` with associated constants, not
//!   Rust enums: the other side may send a value this side does not know, and an unknown
//!   discriminant in a Rust enum is undefined behaviour.
//! - Every function pointer is an `Option`, required entries included: a plugin may leave a
//!   required entry NULL, and the host must be able to read that NULL and reject the
//!   interface (a non-`Option` fn pointer holding NULL is undefined behaviour).
//! - The one C `bool` (`isStartPoint`) is a `u8`, so a stray byte is read as "true" instead of
//!   being an invalid `bool`.
//!
//! The anonymous unions of the C structs (`deviceId`/`processId`, `resourceId`/`threadId`)
//! have two `int32_t` members at the same place; each is one `i32` field here, named after
//! the device-side member, because a Rust union would only add `unsafe` to every read.

use core::ffi::{c_char, c_int};
use core::fmt;
use core::marker::{PhantomData, PhantomPinned};

/// The name of the symbol a plugin exports (C: `KinetoPlugin_register`).
pub const REGISTER_SYMBOL: &str = "KinetoPlugin_register";

/// [`REGISTER_SYMBOL`] NUL-terminated, as `dlsym` takes it.
pub const REGISTER_SYMBOL_C: &core::ffi::CStr = c"KinetoPlugin_register";

/// omniprof's optional extension symbol: `const char *OmniprofPlugin_lastError(void)`, the
/// text of the last failure of a call into the plugin on the calling thread
/// (`omniprof_plugin.h`). Kineto does not look for it.
pub const LAST_ERROR_SYMBOL: &str = "OmniprofPlugin_lastError";

/// [`LAST_ERROR_SYMBOL`] NUL-terminated, as `dlsym` takes it.
pub const LAST_ERROR_SYMBOL_C: &core::ffi::CStr = c"OmniprofPlugin_lastError";

/// The environment variable naming the plugin directory
/// (C: `KINETO_PLUGIN_LIB_DIR_PATH_ENV_VARIABLE`).
pub const LIB_DIR_PATH_ENV_VARIABLE: &str = "KINETO_PLUGIN_LIB_DIR_PATH";

/// Defines a C enum as a newtype over `c_int`: its constants, the list of its valid values,
/// and its ABI names (which the host maps to its own types by name, never by number).
macro_rules! abi_enum {
    (
        $(#[$meta:meta])*
        $name:ident, prefix $prefix:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
        $(#[$count_meta:meta])*
        count $count:ident = $count_value:literal as $count_c_name:literal
    ) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub c_int);

        impl $name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("\n\nC: `", $prefix, stringify!($variant), "` (", $value, ").")]
                pub const $variant: Self = Self($value);
            )+

            $(#[$count_meta])*
            #[doc = concat!("\n\nC: `", $count_c_name, "` (", $count_value, ").")]
            pub const $count: Self = Self($count_value);

            /// Every valid value (everything between `INVALID` and the count), in ABI order.
            pub const ALL: &'static [Self] = {
                const VALUES: &[$name] = &[$($name::$variant),+];
                // `INVALID` is first in the definition; it is not a valid value.
                VALUES.split_at(1).1
            };

            /// The ABI name without the prefix (`"CUDA_RUNTIME"`), for `INVALID` too; `None`
            /// for the count and for values this crate does not know.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($variant)),)+
                    _ => None,
                }
            }

            /// Whether this is a real value: neither `INVALID` nor the count nor unknown.
            pub const fn is_valid(self) -> bool {
                self.0 > Self::INVALID.0 && self.0 < Self::$count.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }
    };
}

abi_enum! {
    /// The type of a plugin event (C: `enum KinetoPlugin_ProfileEventType`, 4 bytes).
    ///
    /// Its numbering is its own: it is not Kineto's or omniprof's `ActivityType`, and the
    /// two must be mapped by [`name`](Self::name), never cast.
    ProfileEventType, prefix "KINETO_PLUGIN_PROFILE_EVENT_TYPE_" {
        /// Not a type; a host rejects events carrying it.
        INVALID = 0,
        /// A host-side operator.
        CPU_OP = 1,
        /// A user range on the host.
        USER_ANNOTATION = 2,
        /// A user range projected onto a device.
        GPU_USER_ANNOTATION = 3,
        /// A device memory copy.
        GPU_MEMCPY = 4,
        /// A device memory set.
        GPU_MEMSET = 5,
        /// Device work (a kernel).
        CONCURRENT_KERNEL = 6,
        /// An external correlation record.
        EXTERNAL_CORRELATION = 7,
        /// A host-side runtime call (the generic choice for a new device's runtime API).
        CUDA_RUNTIME = 8,
        /// A host-side driver call.
        CUDA_DRIVER = 9,
        /// A host-side point event.
        CPU_INSTANT_EVENT = 10,
        /// A Python function.
        PYTHON_FUNCTION = 11,
        /// Profiler overhead.
        OVERHEAD = 12,
        /// An MTIA runtime call.
        MTIA_RUNTIME = 13,
        /// MTIA on-device CCP events.
        MTIA_CCP_EVENTS = 14,
        /// MTIA Insight events.
        MTIA_INSIGHT = 15,
        /// Synchronization between runtime and device work.
        CUDA_SYNC = 16,
        /// A Glow runtime call.
        GLOW_RUNTIME = 17,
        /// A CUPTI profiler range.
        CUDA_PROFILER_RANGE = 18,
        /// An HPU host-side op.
        HPU_OP = 19,
        /// An XPU runtime call.
        XPU_RUNTIME = 20,
        /// A collective communication.
        COLLECTIVE_COMM = 21,
        /// A counter sample: the event's metadata pairs are the series, its start the time.
        GPU_PM_COUNTER = 22,
        /// A host-side call into a PrivateUse1 backend's runtime.
        PRIVATEUSE1_RUNTIME = 23,
        /// A host-side call into a PrivateUse1 backend's driver.
        PRIVATEUSE1_DRIVER = 24,
    }
    /// The number of values, not a type.
    count NUM_TYPES = 25 as "KINETO_PLUGIN_PROFILE_EVENT_NUM_TYPES"
}

abi_enum! {
    /// The kind of a flow between two events (C: `enum KinetoPlugin_ProfileEventFlowType`,
    /// 4 bytes).
    ProfileEventFlowType, prefix "KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_" {
        /// Not a flow type.
        INVALID = 0,
        /// Forward to backward op (host link type 1, `fwdbwd`).
        FWD_BWD = 1,
        /// Host launch to device work (host link type 2, `ac2g`).
        ASYNC_CPU_GPU = 2,
    }
    /// The number of values, not a flow type.
    count NUM_FLOW_TYPES = 3 as "KINETO_PLUGIN_PROFILE_EVENT_NUM_FLOW_TYPES"
}

/// Declares a handle type that only the side that created it may look inside: zero-sized,
/// never constructed, `!Send`, `!Sync` and `!Unpin`, so only pointers to it exist.
macro_rules! opaque_handle {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
            _not_send_sync_unpin: PhantomData<(*mut u8, PhantomPinned)>,
        }
    };
}

opaque_handle! {
    /// The host's registry, passed back to `registerProfiler`
    /// (C: `KinetoPlugin_RegistryHandle`).
    RegistryHandle
}

opaque_handle! {
    /// The host's trace under construction, passed back to every trace builder function
    /// (C: `KinetoPlugin_TraceBuilderHandle`).
    TraceBuilderHandle
}

opaque_handle! {
    /// One profiler session of a plugin, created per trace by `profilerCreate`
    /// (C: `KinetoPlugin_ProfilerHandle`).
    ProfilerHandle
}

/// One event (C: `struct KinetoPlugin_ProfileEvent`; 48 bytes, unpadded 48). Plugin → host.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileEvent {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `eventType`.
    pub event_type: ProfileEventType,
    /// Start, nanoseconds since the Unix epoch (C: `startTimeUtcNs`).
    pub start_time_utc_ns: i64,
    /// End, nanoseconds since the Unix epoch (C: `endTimeUtcNs`).
    pub end_time_utc_ns: i64,
    /// The correlation id the host pushed around the op that made the event, or 0; never an
    /// id of the plugin's own (C: `eventId`; see the header).
    pub event_id: i64,
    /// The device index; for host events the process id (C: the union `deviceId` /
    /// `processId`).
    pub device_id: i32,
    /// The stream or queue; for host events the thread id (C: the union `resourceId` /
    /// `threadId`).
    pub resource_id: i32,
}

/// One end of a flow, attached to the last event (C: `struct KinetoPlugin_ProfileEventFlow`;
/// 24 bytes, unpadded 17). Plugin → host.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileEventFlow {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `flowType`.
    pub flow_type: ProfileEventFlowType,
    /// The same non-zero id on both ends links them (C: `flowId`).
    pub flow_id: u32,
    /// C `bool`: non-zero on the source end, zero on the target (C: `isStartPoint`).
    pub is_start_point: u8,
}

/// A device's process row (C: `struct KinetoPlugin_ProfileDeviceInfo`; 40 bytes,
/// unpadded 40). Plugin → host.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfileDeviceInfo {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// The row's `pid` (C: `deviceId`).
    pub device_id: i64,
    /// The row's position (C: `sortIndex`).
    pub sort_index: i64,
    /// The process name; NULL means the decimal device id (C: `pName`).
    pub name: *const c_char,
    /// The label, e.g. `GPU 0`; NULL means empty (C: `pLabel`).
    pub label: *const c_char,
}

/// A stream's (or other resource's) thread row (C: `struct KinetoPlugin_ProfileResourceInfo`;
/// 32 bytes, unpadded 32). Plugin → host.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfileResourceInfo {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// The owning row's `pid` (C: the union `deviceId` / `processId`).
    pub device_id: i32,
    /// The row's `tid` (C: the union `resourceId` / `threadId`).
    pub resource_id: i32,
    /// Sort index; lower is nearer the top (C: `displayOrder`).
    pub display_order: i32,
    /// The row name; NULL means the decimal resource id (C: `pName`).
    pub name: *const c_char,
}

/// C: `addEvent`. Adds an event; it becomes the "last event".
pub type AddEventFn = unsafe extern "C" fn(*mut TraceBuilderHandle, *const ProfileEvent) -> c_int;
/// C: `setLastEventName`. Names the last event.
pub type SetLastEventNameFn = unsafe extern "C" fn(*mut TraceBuilderHandle, *const c_char) -> c_int;
/// C: `setLastEventFlow`. Attaches a flow end to the last event.
pub type SetLastEventFlowFn =
    unsafe extern "C" fn(*mut TraceBuilderHandle, *const ProfileEventFlow) -> c_int;
/// C: `addLastEventMetadata`. Adds a key and a raw JSON value to the last event's `args`.
pub type AddLastEventMetadataFn =
    unsafe extern "C" fn(*mut TraceBuilderHandle, *const c_char, *const c_char) -> c_int;
/// C: `addDeviceInfo`. Adds a device's process row.
pub type AddDeviceInfoFn =
    unsafe extern "C" fn(*mut TraceBuilderHandle, *const ProfileDeviceInfo) -> c_int;
/// C: `addResourceInfo`. Adds a resource's thread row.
pub type AddResourceInfoFn =
    unsafe extern "C" fn(*mut TraceBuilderHandle, *const ProfileResourceInfo) -> c_int;

/// The host's functions for building a trace (C: `struct KinetoPlugin_TraceBuilder`;
/// 64 bytes, unpadded 64). Host → plugin, valid only during `profilerProcessEvents` and only
/// on its thread. Every function takes [`trace_builder_handle`](Self::trace_builder_handle)
/// first and returns 0 on success.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TraceBuilder {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pTraceBuilderHandle`.
    pub trace_builder_handle: *mut TraceBuilderHandle,
    /// C: `addEvent`.
    pub add_event: Option<AddEventFn>,
    /// C: `setLastEventName`.
    pub set_last_event_name: Option<SetLastEventNameFn>,
    /// C: `setLastEventFlow`.
    pub set_last_event_flow: Option<SetLastEventFlowFn>,
    /// C: `addLastEventMetadata`.
    pub add_last_event_metadata: Option<AddLastEventMetadataFn>,
    /// C: `addDeviceInfo`.
    pub add_device_info: Option<AddDeviceInfoFn>,
    /// C: `addResourceInfo`.
    pub add_resource_info: Option<AddResourceInfoFn>,
}

/// Parameters of `profilerCreate` (C: `struct KinetoPlugin_ProfilerCreate_Params`; 32 bytes,
/// unpadded 32).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerCreateParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// Out: the new session (C: `pProfilerHandle`).
    pub profiler_handle: *mut ProfilerHandle,
    /// In: the enabled types, valid only during the call (C: `pEnabledActivityTypes`).
    pub enabled_activity_types: *mut ProfileEventType,
    /// In: the number of entries of `enabled_activity_types`
    /// (C: `enabledActivityTypesMaxLen`).
    pub enabled_activity_types_max_len: usize,
}

/// Parameters of `profilerDestroy` (C: `struct KinetoPlugin_ProfilerDestroy_Params`;
/// 16 bytes, unpadded 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerDestroyParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// Parameters of `profilerQuery` (C: `struct KinetoPlugin_ProfilerQuery_Params`; 48 bytes,
/// unpadded 48).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerQueryParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// NULL: the query is about the profiler, not a session (C: `pProfilerHandle`).
    pub profiler_handle: *mut ProfilerHandle,
    /// In/out: the buffer for the NUL-terminated name (C: `pProfilerName`).
    pub profiler_name: *mut c_char,
    /// The most name bytes the buffer takes, excluding the NUL (C: `profilerNameMaxLen`).
    pub profiler_name_max_len: usize,
    /// In/out: the array for the supported types, pre-filled with `INVALID`
    /// (C: `pSupportedActivityTypes`).
    pub supported_activity_types: *mut ProfileEventType,
    /// The number of entries of `supported_activity_types`
    /// (C: `supportedActivityTypesMaxLen`).
    pub supported_activity_types_max_len: usize,
}

/// Parameters of `profilerStart` (C: `struct KinetoPlugin_ProfilerStart_Params`; 16 bytes,
/// unpadded 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerStartParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// Parameters of `profilerStop` (C: `struct KinetoPlugin_ProfilerStop_Params`; 16 bytes,
/// unpadded 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerStopParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// Parameters of `profilerProcessEvents` (C: `struct KinetoPlugin_ProfilerProcessEvents_Params`;
/// 24 bytes, unpadded 24).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerProcessEventsParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
    /// The host's builder, valid only during the call (C: `pTraceBuilder`).
    pub trace_builder: *const TraceBuilder,
}

/// Parameters of `profilerPushCorrelationId`
/// (C: `struct KinetoPlugin_ProfilerPushCorrelationId_Params`; 24 bytes, unpadded 24). Unlike
/// every other struct, the id comes before the handle.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerPushCorrelationIdParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `correlationId`.
    pub correlation_id: u64,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// Parameters of `profilerPopCorrelationId`
/// (C: `struct KinetoPlugin_ProfilerPopCorrelationId_Params`; 16 bytes, unpadded 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerPopCorrelationIdParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// Parameters of `profilerPushUserCorrelationId`
/// (C: `struct KinetoPlugin_ProfilerPushUserCorrelationId_Params`; 24 bytes, unpadded 24).
/// Unlike every other struct, the id comes before the handle.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerPushUserCorrelationIdParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `userCorrelationId`.
    pub user_correlation_id: u64,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// Parameters of `profilerPopUserCorrelationId`
/// (C: `struct KinetoPlugin_ProfilerPopUserCorrelationId_Params`; 16 bytes, unpadded 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerPopUserCorrelationIdParams {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pProfilerHandle`.
    pub profiler_handle: *mut ProfilerHandle,
}

/// C: `profilerCreate`. Creates a session for one trace.
pub type ProfilerCreateFn = unsafe extern "C" fn(*mut ProfilerCreateParams) -> c_int;
/// C: `profilerDestroy`. Destroys a session at the end of its trace.
pub type ProfilerDestroyFn = unsafe extern "C" fn(*mut ProfilerDestroyParams) -> c_int;
/// C: `profilerQuery`. Reports the profiler's name and supported types.
pub type ProfilerQueryFn = unsafe extern "C" fn(*mut ProfilerQueryParams) -> c_int;
/// C: `profilerStart`. Starts collection.
pub type ProfilerStartFn = unsafe extern "C" fn(*mut ProfilerStartParams) -> c_int;
/// C: `profilerStop`. Stops collection.
pub type ProfilerStopFn = unsafe extern "C" fn(*mut ProfilerStopParams) -> c_int;
/// C: `profilerPushCorrelationId`. A host op began on the calling thread.
pub type ProfilerPushCorrelationIdFn =
    unsafe extern "C" fn(*mut ProfilerPushCorrelationIdParams) -> c_int;
/// C: `profilerPopCorrelationId`. The calling thread's innermost host op ended.
pub type ProfilerPopCorrelationIdFn =
    unsafe extern "C" fn(*mut ProfilerPopCorrelationIdParams) -> c_int;
/// C: `profilerPushUserCorrelationId`. A user range began on the calling thread.
pub type ProfilerPushUserCorrelationIdFn =
    unsafe extern "C" fn(*mut ProfilerPushUserCorrelationIdParams) -> c_int;
/// C: `profilerPopUserCorrelationId`. The calling thread's innermost user range ended.
pub type ProfilerPopUserCorrelationIdFn =
    unsafe extern "C" fn(*mut ProfilerPopUserCorrelationIdParams) -> c_int;
/// C: `profilerProcessEvents`. Hands the session's events to the host's trace builder.
pub type ProfilerProcessEventsFn = unsafe extern "C" fn(*mut ProfilerProcessEventsParams) -> c_int;

/// A plugin's profiler (C: `struct KinetoPlugin_ProfilerInterface`; 88 bytes, unpadded 88).
/// Plugin → host, copied by value at registration.
///
/// The correlation entries are optional (a host replaces NULL with a no-op); the others are
/// required (a host disables the profiler when one is NULL).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfilerInterface {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// Required (C: `profilerCreate`).
    pub profiler_create: Option<ProfilerCreateFn>,
    /// Required (C: `profilerDestroy`).
    pub profiler_destroy: Option<ProfilerDestroyFn>,
    /// Required (C: `profilerQuery`).
    pub profiler_query: Option<ProfilerQueryFn>,
    /// Required (C: `profilerStart`).
    pub profiler_start: Option<ProfilerStartFn>,
    /// Required (C: `profilerStop`).
    pub profiler_stop: Option<ProfilerStopFn>,
    /// Optional (C: `profilerPushCorrelationId`).
    pub profiler_push_correlation_id: Option<ProfilerPushCorrelationIdFn>,
    /// Optional (C: `profilerPopCorrelationId`).
    pub profiler_pop_correlation_id: Option<ProfilerPopCorrelationIdFn>,
    /// Optional (C: `profilerPushUserCorrelationId`).
    pub profiler_push_user_correlation_id: Option<ProfilerPushUserCorrelationIdFn>,
    /// Optional (C: `profilerPopUserCorrelationId`).
    pub profiler_pop_user_correlation_id: Option<ProfilerPopUserCorrelationIdFn>,
    /// Required (C: `profilerProcessEvents`).
    pub profiler_process_events: Option<ProfilerProcessEventsFn>,
}

/// C: `registerProfiler`. Copies the interface and adds a profiler to the host; a NULL
/// interface returns −1.
pub type RegisterProfilerFn =
    unsafe extern "C" fn(*mut RegistryHandle, *const ProfilerInterface) -> c_int;

/// The host's registry, passed to the entry point (C: `struct KinetoPlugin_Registry`;
/// 24 bytes, unpadded 24). Host → plugin, valid only during the entry point call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Registry {
    /// C: `unpaddedStructSize`.
    pub unpadded_struct_size: usize,
    /// C: `pRegistryHandle`.
    pub registry_handle: *mut RegistryHandle,
    /// C: `registerProfiler`.
    pub register_profiler: Option<RegisterProfilerFn>,
}

/// The type of the entry point [`REGISTER_SYMBOL`]: called once by the host with its
/// registry; 0 means the plugin is usable, anything else makes the host unload it.
pub type RegisterFn = unsafe extern "C" fn(*const Registry) -> c_int;

/// The type of [`LAST_ERROR_SYMBOL`]: a NUL-terminated text (or NULL), valid until the
/// calling thread's next call into the plugin.
pub type LastErrorFn = unsafe extern "C" fn() -> *const c_char;
