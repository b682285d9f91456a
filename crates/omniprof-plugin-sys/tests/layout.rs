//! The ABI's layout, checked against one table: the LP64 tables of `docs/plugin-abi.md`
//! (sections 3–6), written once below. The Rust mirror is checked against it here, and the
//! table is rendered into static assertions that a C and a C++ compiler check against the
//! header, so the two languages cannot drift apart or from the documented ABI.
#![cfg(target_pointer_width = "64")]

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

use omniprof_plugin_sys::*;
use omniprof_test_support::skip::{skip, Needs};

/// One struct of the ABI as `docs/plugin-abi.md` gives it, next to what the Rust mirror has.
struct Struct {
    rust_name: &'static str,
    c_name: &'static str,
    /// The header's macro for the unpadded size.
    size_macro: &'static str,
    size: usize,
    unpadded: usize,
    rust_c_name: &'static str,
    rust_size: usize,
    rust_unpadded: usize,
    fields: &'static [Field],
}

/// One field: its C names (two for the members of an anonymous union), C type, offset and
/// size as `docs/plugin-abi.md` gives them, and the Rust mirror's offset and size.
struct Field {
    rust_name: &'static str,
    c_names: &'static [&'static str],
    c_type: &'static str,
    offset: usize,
    size: usize,
    rust_offset: usize,
    rust_size: usize,
}

/// One value of a C enum.
struct Enumerator {
    c_name: &'static str,
    value: i32,
    rust_value: i32,
    rust_name: Option<&'static str>,
    expected_rust_name: Option<&'static str>,
}

/// Builds [`STRUCTS`] from the table and makes the compiler check, for every struct, that
/// the table names all its Rust fields (a struct pattern without `..`) with the Rust types
/// given.
macro_rules! structs {
    ($(
        $rust:ident = $c:literal, size $size:literal, unpadded $unpadded:literal, $size_macro:literal {
            $($field:ident: $rust_ty:ty = [$($c_field:literal),+] @ $offset:literal + $field_size:literal => $c_type:expr;)+
        }
    )+) => {
        $(
            const _: fn($rust) = |value| {
                let $rust { $($field: _),+ } = value;
            };
            $(const _: for<'a> fn(&'a $rust) -> &'a $rust_ty = |s| &s.$field;)+
        )+

        const STRUCTS: &[Struct] = &[$(
            Struct {
                rust_name: stringify!($rust),
                c_name: $c,
                size_macro: $size_macro,
                size: $size,
                unpadded: $unpadded,
                rust_c_name: <$rust as AbiStruct>::C_NAME,
                rust_size: size_of::<$rust>(),
                rust_unpadded: <$rust as AbiStruct>::UNPADDED_SIZE,
                fields: &[$(
                    Field {
                        rust_name: stringify!($field),
                        c_names: &[$($c_field),+],
                        c_type: $c_type,
                        offset: $offset,
                        size: $field_size,
                        rust_offset: offset_of!($rust, $field),
                        // The unpadded size up to a field, less its offset, is its size.
                        rust_size: unpadded_size!($rust, $field) - offset_of!($rust, $field),
                    },
                )+],
            },
        )+];
    };
}

/// Builds the enumerator table of a C enum.
macro_rules! enumerators {
    ($rust:ident, $prefix:literal { $($name:ident = $value:literal,)+ } $count:ident = $count_value:literal as $count_c:literal) => {
        &[
            $(Enumerator {
                c_name: concat!($prefix, stringify!($name)),
                value: $value,
                rust_value: $rust::$name.0,
                rust_name: $rust::$name.name(),
                expected_rust_name: Some(stringify!($name)),
            },)+
            Enumerator {
                c_name: $count_c,
                value: $count_value,
                rust_value: $rust::$count.0,
                rust_name: $rust::$count.name(),
                expected_rust_name: None,
            },
        ]
    };
}

/// The C type of a trace builder function taking `arg` after the handle.
macro_rules! builder_fn {
    ($($arg:literal),+) => {
        concat!("int (*)(KinetoPlugin_TraceBuilderHandle *", $(", ", $arg),+, ")")
    };
}

/// The C type of a profiler interface function taking its parameter struct.
macro_rules! profiler_fn {
    ($params:literal) => {
        concat!("int (*)(struct KinetoPlugin_", $params, " *)")
    };
}

structs! {
    ProfileEvent = "KinetoPlugin_ProfileEvent", size 48, unpadded 48, "KINETO_PLUGIN_PROFILE_EVENT_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        event_type: ProfileEventType = ["eventType"] @ 8 + 4 => "enum KinetoPlugin_ProfileEventType";
        start_time_utc_ns: i64 = ["startTimeUtcNs"] @ 16 + 8 => "int64_t";
        end_time_utc_ns: i64 = ["endTimeUtcNs"] @ 24 + 8 => "int64_t";
        event_id: i64 = ["eventId"] @ 32 + 8 => "int64_t";
        device_id: i32 = ["deviceId", "processId"] @ 40 + 4 => "int32_t";
        resource_id: i32 = ["resourceId", "threadId"] @ 44 + 4 => "int32_t";
    }
    ProfileEventFlow = "KinetoPlugin_ProfileEventFlow", size 24, unpadded 17, "KINETO_PLUGIN_PROFILE_EVENT_FLOW_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        flow_type: ProfileEventFlowType = ["flowType"] @ 8 + 4 => "enum KinetoPlugin_ProfileEventFlowType";
        flow_id: u32 = ["flowId"] @ 12 + 4 => "uint32_t";
        is_start_point: u8 = ["isStartPoint"] @ 16 + 1 => "bool";
    }
    ProfileDeviceInfo = "KinetoPlugin_ProfileDeviceInfo", size 40, unpadded 40, "KINETO_PLUGIN_PROFILE_DEVICE_INFO_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        device_id: i64 = ["deviceId"] @ 8 + 8 => "int64_t";
        sort_index: i64 = ["sortIndex"] @ 16 + 8 => "int64_t";
        name: *const core::ffi::c_char = ["pName"] @ 24 + 8 => "const char *";
        label: *const core::ffi::c_char = ["pLabel"] @ 32 + 8 => "const char *";
    }
    ProfileResourceInfo = "KinetoPlugin_ProfileResourceInfo", size 32, unpadded 32, "KINETO_PLUGIN_PROFILE_RESOURCE_INFO_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        device_id: i32 = ["deviceId", "processId"] @ 8 + 4 => "int32_t";
        resource_id: i32 = ["resourceId", "threadId"] @ 12 + 4 => "int32_t";
        display_order: i32 = ["displayOrder"] @ 16 + 4 => "int32_t";
        name: *const core::ffi::c_char = ["pName"] @ 24 + 8 => "const char *";
    }
    TraceBuilder = "KinetoPlugin_TraceBuilder", size 64, unpadded 64, "KINETO_PLUGIN_TRACE_BUILDER_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        trace_builder_handle: *mut TraceBuilderHandle = ["pTraceBuilderHandle"] @ 8 + 8 => "KinetoPlugin_TraceBuilderHandle *";
        add_event: Option<AddEventFn> = ["addEvent"] @ 16 + 8 => builder_fn!("const struct KinetoPlugin_ProfileEvent *");
        set_last_event_name: Option<SetLastEventNameFn> = ["setLastEventName"] @ 24 + 8 => builder_fn!("const char *");
        set_last_event_flow: Option<SetLastEventFlowFn> = ["setLastEventFlow"] @ 32 + 8 => builder_fn!("const struct KinetoPlugin_ProfileEventFlow *");
        add_last_event_metadata: Option<AddLastEventMetadataFn> = ["addLastEventMetadata"] @ 40 + 8 => builder_fn!("const char *", "const char *");
        add_device_info: Option<AddDeviceInfoFn> = ["addDeviceInfo"] @ 48 + 8 => builder_fn!("const struct KinetoPlugin_ProfileDeviceInfo *");
        add_resource_info: Option<AddResourceInfoFn> = ["addResourceInfo"] @ 56 + 8 => builder_fn!("const struct KinetoPlugin_ProfileResourceInfo *");
    }
    ProfilerCreateParams = "KinetoPlugin_ProfilerCreate_Params", size 32, unpadded 32, "KINETO_PLUGIN_PROFILER_CREATE_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
        enabled_activity_types: *mut ProfileEventType = ["pEnabledActivityTypes"] @ 16 + 8 => "enum KinetoPlugin_ProfileEventType *";
        enabled_activity_types_max_len: usize = ["enabledActivityTypesMaxLen"] @ 24 + 8 => "size_t";
    }
    ProfilerDestroyParams = "KinetoPlugin_ProfilerDestroy_Params", size 16, unpadded 16, "KINETO_PLUGIN_PROFILER_DESTROY_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerQueryParams = "KinetoPlugin_ProfilerQuery_Params", size 48, unpadded 48, "KINETO_PLUGIN_PROFILER_QUERY_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
        profiler_name: *mut core::ffi::c_char = ["pProfilerName"] @ 16 + 8 => "char *";
        profiler_name_max_len: usize = ["profilerNameMaxLen"] @ 24 + 8 => "size_t";
        supported_activity_types: *mut ProfileEventType = ["pSupportedActivityTypes"] @ 32 + 8 => "enum KinetoPlugin_ProfileEventType *";
        supported_activity_types_max_len: usize = ["supportedActivityTypesMaxLen"] @ 40 + 8 => "size_t";
    }
    ProfilerStartParams = "KinetoPlugin_ProfilerStart_Params", size 16, unpadded 16, "KINETO_PLUGIN_PROFILER_START_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerStopParams = "KinetoPlugin_ProfilerStop_Params", size 16, unpadded 16, "KINETO_PLUGIN_PROFILER_STOP_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerProcessEventsParams = "KinetoPlugin_ProfilerProcessEvents_Params", size 24, unpadded 24, "KINETO_PLUGIN_PROFILER_PROCESS_EVENTS_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
        trace_builder: *const TraceBuilder = ["pTraceBuilder"] @ 16 + 8 => "const struct KinetoPlugin_TraceBuilder *";
    }
    ProfilerPushCorrelationIdParams = "KinetoPlugin_ProfilerPushCorrelationId_Params", size 24, unpadded 24, "KINETO_PLUGIN_PROFILER_PUSH_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        correlation_id: u64 = ["correlationId"] @ 8 + 8 => "uint64_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 16 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerPopCorrelationIdParams = "KinetoPlugin_ProfilerPopCorrelationId_Params", size 16, unpadded 16, "KINETO_PLUGIN_PROFILER_POP_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerPushUserCorrelationIdParams = "KinetoPlugin_ProfilerPushUserCorrelationId_Params", size 24, unpadded 24, "KINETO_PLUGIN_PROFILER_PUSH_USER_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        user_correlation_id: u64 = ["userCorrelationId"] @ 8 + 8 => "uint64_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 16 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerPopUserCorrelationIdParams = "KinetoPlugin_ProfilerPopUserCorrelationId_Params", size 16, unpadded 16, "KINETO_PLUGIN_PROFILER_POP_USER_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_handle: *mut ProfilerHandle = ["pProfilerHandle"] @ 8 + 8 => "KinetoPlugin_ProfilerHandle *";
    }
    ProfilerInterface = "KinetoPlugin_ProfilerInterface", size 88, unpadded 88, "KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        profiler_create: Option<ProfilerCreateFn> = ["profilerCreate"] @ 8 + 8 => profiler_fn!("ProfilerCreate_Params");
        profiler_destroy: Option<ProfilerDestroyFn> = ["profilerDestroy"] @ 16 + 8 => profiler_fn!("ProfilerDestroy_Params");
        profiler_query: Option<ProfilerQueryFn> = ["profilerQuery"] @ 24 + 8 => profiler_fn!("ProfilerQuery_Params");
        profiler_start: Option<ProfilerStartFn> = ["profilerStart"] @ 32 + 8 => profiler_fn!("ProfilerStart_Params");
        profiler_stop: Option<ProfilerStopFn> = ["profilerStop"] @ 40 + 8 => profiler_fn!("ProfilerStop_Params");
        profiler_push_correlation_id: Option<ProfilerPushCorrelationIdFn> = ["profilerPushCorrelationId"] @ 48 + 8 => profiler_fn!("ProfilerPushCorrelationId_Params");
        profiler_pop_correlation_id: Option<ProfilerPopCorrelationIdFn> = ["profilerPopCorrelationId"] @ 56 + 8 => profiler_fn!("ProfilerPopCorrelationId_Params");
        profiler_push_user_correlation_id: Option<ProfilerPushUserCorrelationIdFn> = ["profilerPushUserCorrelationId"] @ 64 + 8 => profiler_fn!("ProfilerPushUserCorrelationId_Params");
        profiler_pop_user_correlation_id: Option<ProfilerPopUserCorrelationIdFn> = ["profilerPopUserCorrelationId"] @ 72 + 8 => profiler_fn!("ProfilerPopUserCorrelationId_Params");
        profiler_process_events: Option<ProfilerProcessEventsFn> = ["profilerProcessEvents"] @ 80 + 8 => profiler_fn!("ProfilerProcessEvents_Params");
    }
    Registry = "KinetoPlugin_Registry", size 24, unpadded 24, "KINETO_PLUGIN_REGISTRY_UNPADDED_STRUCT_SIZE" {
        unpadded_struct_size: usize = ["unpaddedStructSize"] @ 0 + 8 => "size_t";
        registry_handle: *mut RegistryHandle = ["pRegistryHandle"] @ 8 + 8 => "KinetoPlugin_RegistryHandle *";
        register_profiler: Option<RegisterProfilerFn> = ["registerProfiler"] @ 16 + 8 => "int (*)(KinetoPlugin_RegistryHandle *, const struct KinetoPlugin_ProfilerInterface *)";
    }
}

/// The C enums: their type names, the Rust value lists, and every enumerator.
const ENUMS: &[(&str, &[Enumerator])] = &[
    (
        "enum KinetoPlugin_ProfileEventType",
        enumerators!(ProfileEventType, "KINETO_PLUGIN_PROFILE_EVENT_TYPE_" {
            INVALID = 0,
            CPU_OP = 1,
            USER_ANNOTATION = 2,
            GPU_USER_ANNOTATION = 3,
            GPU_MEMCPY = 4,
            GPU_MEMSET = 5,
            CONCURRENT_KERNEL = 6,
            EXTERNAL_CORRELATION = 7,
            CUDA_RUNTIME = 8,
            CUDA_DRIVER = 9,
            CPU_INSTANT_EVENT = 10,
            PYTHON_FUNCTION = 11,
            OVERHEAD = 12,
            MTIA_RUNTIME = 13,
            MTIA_CCP_EVENTS = 14,
            MTIA_INSIGHT = 15,
            CUDA_SYNC = 16,
            GLOW_RUNTIME = 17,
            CUDA_PROFILER_RANGE = 18,
            HPU_OP = 19,
            XPU_RUNTIME = 20,
            COLLECTIVE_COMM = 21,
            GPU_PM_COUNTER = 22,
            PRIVATEUSE1_RUNTIME = 23,
            PRIVATEUSE1_DRIVER = 24,
        } NUM_TYPES = 25 as "KINETO_PLUGIN_PROFILE_EVENT_NUM_TYPES"),
    ),
    (
        "enum KinetoPlugin_ProfileEventFlowType",
        enumerators!(ProfileEventFlowType, "KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_" {
            INVALID = 0,
            FWD_BWD = 1,
            ASYNC_CPU_GPU = 2,
        } NUM_FLOW_TYPES = 3 as "KINETO_PLUGIN_PROFILE_EVENT_NUM_FLOW_TYPES"),
    ),
];

/// The opaque handle typedefs of the header.
const HANDLES: &[&str] = &[
    "KinetoPlugin_RegistryHandle",
    "KinetoPlugin_TraceBuilderHandle",
    "KinetoPlugin_ProfilerHandle",
];

#[test]
fn the_rust_mirror_matches_the_reference() {
    let mut mismatches = Vec::new();
    for s in STRUCTS {
        let mut check = |what: &str, expected: usize, actual: usize| {
            if expected != actual {
                mismatches.push(format!("{what}: reference {expected}, Rust {actual}"));
            }
        };
        check(&format!("size of {}", s.rust_name), s.size, s.rust_size);
        check(
            &format!("unpadded size of {}", s.rust_name),
            s.unpadded,
            s.rust_unpadded,
        );
        for f in s.fields {
            let name = format!("{}.{}", s.rust_name, f.rust_name);
            check(&format!("offset of {name}"), f.offset, f.rust_offset);
            check(&format!("size of {name}"), f.size, f.rust_size);
        }
        if s.rust_c_name != s.c_name {
            mismatches.push(format!("{}: C name {}", s.rust_name, s.rust_c_name));
        }
    }
    for (enum_name, enumerators) in ENUMS {
        for e in *enumerators {
            if (e.rust_value, e.rust_name) != (e.value, e.expected_rust_name) {
                mismatches.push(format!(
                    "{enum_name} {}: reference {} {:?}, Rust {} {:?}",
                    e.c_name, e.value, e.expected_rust_name, e.rust_value, e.rust_name
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn the_table_is_consistent() {
    // Catches a typo in the table itself: fields in order, not overlapping, and the last one
    // ending at the unpadded size, within the struct.
    for s in STRUCTS {
        let mut end = 0;
        for f in s.fields {
            assert!(f.offset >= end, "{}.{} overlaps", s.c_name, f.c_names[0]);
            end = f.offset + f.size;
        }
        assert_eq!(end, s.unpadded, "{}: last field end", s.c_name);
        assert!(s.unpadded <= s.size, "{}", s.c_name);
        assert_eq!(s.fields[0].c_names, ["unpaddedStructSize"], "{}", s.c_name);
    }
}

#[test]
fn valid_enum_values_are_all_but_invalid_and_the_count() {
    let event_types: Vec<i32> = ProfileEventType::ALL.iter().map(|t| t.0).collect();
    assert_eq!(event_types, (1..25).collect::<Vec<_>>());
    assert!(ProfileEventType::ALL.iter().all(|t| t.is_valid()));
    for invalid in [0, 25, -1, 1000] {
        assert!(!ProfileEventType(invalid).is_valid());
    }
    assert_eq!(
        ProfileEventFlowType::ALL,
        [
            ProfileEventFlowType::FWD_BWD,
            ProfileEventFlowType::ASYNC_CPU_GPU
        ]
    );
    assert_eq!(
        format!("{:?}", ProfileEventType::CUDA_RUNTIME),
        "CUDA_RUNTIME"
    );
    assert_eq!(
        format!("{:?}", ProfileEventType(99)),
        "ProfileEventType(99)"
    );
}

#[test]
fn names_and_the_entry_point_match_the_reference() {
    assert_eq!(REGISTER_SYMBOL, "KinetoPlugin_register");
    assert_eq!(REGISTER_SYMBOL_C.to_str(), Ok(REGISTER_SYMBOL));
    assert_eq!(LIB_DIR_PATH_ENV_VARIABLE, "KINETO_PLUGIN_LIB_DIR_PATH");
}

/// The table as static assertions on the header, valid as C11 and as C++17.
fn c_assertions() -> String {
    let mut c = String::from(
        "/* Generated by tests/layout.rs from its table; checks the header against it. */\n\
         #include \"KinetoDynamicPluginInterface.h\"\n\
         #include \"omniprof_plugin.h\" /* again: the include guard must hold */\n\
         #ifdef __cplusplus\n\
         #include <type_traits>\n\
         #define CHECK(condition, message) static_assert(condition, message)\n\
         #define SAME_TYPE(expression, ...) (std::is_same<decltype(expression), __VA_ARGS__>::value)\n\
         #else\n\
         #define CHECK(condition, message) _Static_assert(condition, message)\n\
         #define SAME_TYPE(expression, ...) _Generic(expression, __VA_ARGS__: 1, default: 0)\n\
         #endif\n\
         /* Not parenthesized: C++'s decltype gives a member's declared type only so. */\n\
         #define FIELD(type, field) ((type *)0)->field\n\n",
    );
    let mut line = |condition: String, message: String| {
        writeln!(c, "CHECK({condition}, \"{message}\");").unwrap();
    };
    for s in STRUCTS {
        let (name, tagged) = (s.c_name, format!("struct {}", s.c_name));
        line(
            format!("sizeof({tagged}) == {}", s.size),
            format!("sizeof {name}"),
        );
        line(
            format!("{} == {}", s.size_macro, s.unpadded),
            s.size_macro.to_owned(),
        );
        line(
            format!("SAME_TYPE(({name} *)0, {tagged} *)"),
            format!("typedef {name}"),
        );
        for f in s.fields {
            for field in f.c_names {
                let member = format!("FIELD({tagged}, {field})");
                let what = format!("{name}.{field}");
                line(
                    format!("offsetof({tagged}, {field}) == {}", f.offset),
                    format!("offset of {what}"),
                );
                line(
                    format!("sizeof({member}) == {}", f.size),
                    format!("size of {what}"),
                );
                line(
                    format!("SAME_TYPE({member}, {})", f.c_type),
                    format!("type of {what}"),
                );
            }
        }
    }
    for (enum_name, enumerators) in ENUMS {
        line(
            format!("sizeof({enum_name}) == 4"),
            format!("sizeof {enum_name}"),
        );
        let typedef = enum_name.trim_start_matches("enum ");
        line(
            format!("SAME_TYPE(({typedef} *)0, {enum_name} *)"),
            format!("typedef {typedef}"),
        );
        for e in *enumerators {
            line(format!("{} == {}", e.c_name, e.value), e.c_name.to_owned());
        }
    }
    for handle in HANDLES {
        line(
            format!("SAME_TYPE(({handle} *)0, struct {handle} *)"),
            format!("typedef {handle}"),
        );
    }
    line(
        "SAME_TYPE(&KinetoPlugin_register, int (*)(const struct KinetoPlugin_Registry *))".into(),
        "KinetoPlugin_register".into(),
    );
    c
}

/// Compiles `source` with `compiler` and the flags, returning `None` when the compiler is not
/// installed.
fn compile(compiler: &str, flags: &[&str], source: &Path) -> Option<()> {
    let object = source.with_extension("o");
    let output = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(INCLUDE_DIR)
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(&object)
        .output();
    match output {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("running {compiler}: {error}"),
        Ok(output) => {
            assert!(
                output.status.success(),
                "{compiler} {flags:?} rejected the header checks:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            Some(())
        }
    }
}

#[test]
fn the_header_matches_the_reference_in_c_and_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("layout_check.c");
    std::fs::write(&source, c_assertions()).unwrap();

    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let c_flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];
    if compile(&cc, &c_flags, &source).is_none() {
        return skip(
            "C header check",
            Needs::CCompiler,
            &format!("no C compiler ({cc}) to check include/omniprof_plugin.h"),
        );
    }
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let cxx_flags = [
        "-x",
        "c++",
        "-std=c++17",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
    ];
    if compile(&cxx, &cxx_flags, &source).is_none() {
        skip(
            "C++ header check",
            Needs::CxxCompiler,
            &format!("no C++ compiler ({cxx})"),
        );
    }
}

#[test]
fn a_wrong_expectation_fails_the_c_check() {
    // The check is only worth something if the compiler really evaluates it.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("wrong.c");
    std::fs::write(
        &source,
        "#include \"omniprof_plugin.h\"\n\
         _Static_assert(offsetof(struct KinetoPlugin_ProfileEventFlow, isStartPoint) == 17, \"\");\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-I", INCLUDE_DIR, "-c"])
        .arg(&source)
        .arg("-o")
        .arg(source.with_extension("o"))
        .stderr(std::process::Stdio::null())
        .status();
    match status {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            skip(
                "C assertion check",
                Needs::CCompiler,
                &format!("no C compiler ({cc})"),
            );
        }
        status => assert!(!status.unwrap().success(), "a false assertion compiled"),
    }
}
