/*
 * omniprof_plugin.h: the dynamic profiler plugin C ABI.
 *
 * This is the interface proposed for Kineto in PR 1148, binary compatible with it and
 * spelled with the same names, so a plugin written against Kineto's
 * KinetoDynamicPluginInterface.h builds against this header and loads in omniprof.
 * Differences from that header, none of which changes the binary interface:
 *   - it is valid C (C11 or later) as well as C++: it includes <stdbool.h> and <stddef.h>
 *     for bool, size_t and offsetof, and names enum and struct types with their tags, with
 *     a typedef for each so that the bare names of Kineto's C++ sources work too;
 *   - enumerator values are written out, so that editing the list cannot renumber them;
 *   - KinetoPlugin_register is declared with default visibility on GCC and Clang, so a
 *     plugin built with -fvisibility=hidden still exports it.
 *
 * A plugin is a shared library, placed in the directory named by the environment variable
 * KINETO_PLUGIN_LIB_DIR_PATH, that defines KinetoPlugin_register. The host calls it once
 * with its registry; the plugin calls registry->registerProfiler once per profiler it
 * provides and returns 0 (anything else makes the host skip the library; omniprof never
 * unloads a library it loaded, since a thread the library started may still run its code).
 *
 * The plugin runs in the host's process. The host guards against what it can detect: each
 * call into a profiler (create, start, stop, processEvents, destroy) has a deadline, past
 * which the profiler is abandoned for the rest of the process; the registry and the trace
 * builder serve calls only on the thread that was handed them, during that call (others
 * get -1 and are counted); every builder argument is checked. It cannot guard against the
 * plugin's own code: exit(), abort(), a segmentation fault or memory corruption in the
 * plugin ends or breaks the whole process, and correlation pushes and pops run on the
 * application's threads without a deadline. Run `omniprof plugins check` on a plugin in CI.
 *
 * Conventions. Every function returns int: 0 on success, anything else on failure. Strings
 * are NUL-terminated UTF-8, valid only during the call that passes them. Timestamps are
 * nanoseconds since the Unix epoch. Handles are opaque to the side that did not create
 * them.
 *
 * Versioning. Every struct starts with size_t unpaddedStructSize, which its producer sets
 * to the struct's unpadded size: the end of its last field, trailing padding excluded
 * (the <STRUCT>_UNPADDED_STRUCT_SIZE macro after each struct). Fields are only ever
 * appended. A consumer accepts a struct declaring at least the size it knows, reads only
 * the fields it knows, and rejects a smaller one. A plugin should check the registry, the
 * trace builder and each parameter struct it receives the same way.
 */
#ifndef OMNIPROF_PLUGIN_H
#define OMNIPROF_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The environment variable naming the directory the host loads plugins from. */
#define KINETO_PLUGIN_LIB_DIR_PATH_ENV_VARIABLE "KINETO_PLUGIN_LIB_DIR_PATH"

/* The unpadded size of struct_type whose last field is last_field. */
#define KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct_type, last_field) \
  ((size_t)(offsetof(struct_type, last_field) + sizeof(((struct_type *)0)->last_field)))

#if defined(__GNUC__) || defined(__clang__)
#define OMNIPROF_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define OMNIPROF_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Events (plugin -> host) ------------------------------------------------------------ */

/* The type of an event. This numbering belongs to the ABI; it is not Kineto's ActivityType. */
enum KinetoPlugin_ProfileEventType {
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_INVALID = 0, /* rejected by the host */
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CPU_OP = 1,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_USER_ANNOTATION = 2,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_USER_ANNOTATION = 3,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_MEMCPY = 4,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_MEMSET = 5,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL = 6, /* device work */
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_EXTERNAL_CORRELATION = 7,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_RUNTIME = 8, /* host-side runtime call */
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_DRIVER = 9,  /* host-side driver call */
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CPU_INSTANT_EVENT = 10,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_PYTHON_FUNCTION = 11,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_OVERHEAD = 12,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_MTIA_RUNTIME = 13,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_MTIA_CCP_EVENTS = 14,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_MTIA_INSIGHT = 15,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_SYNC = 16,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_GLOW_RUNTIME = 17,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_PROFILER_RANGE = 18,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_HPU_OP = 19,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_XPU_RUNTIME = 20,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_COLLECTIVE_COMM = 21,
  /* A counter sample: the event's metadata pairs are the series (JSON numbers), its start
   * time the sample time. */
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER = 22,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME = 23,
  KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_DRIVER = 24,
  KINETO_PLUGIN_PROFILE_EVENT_NUM_TYPES = 25 /* the count, not a type */
};
typedef enum KinetoPlugin_ProfileEventType KinetoPlugin_ProfileEventType;

/* One event. For host events deviceId is the process id and resourceId the thread id. */
struct KinetoPlugin_ProfileEvent {
  size_t unpaddedStructSize;
  enum KinetoPlugin_ProfileEventType eventType;
  int64_t startTimeUtcNs;
  int64_t endTimeUtcNs;
  /* The correlation id of the host op that made this event: the id the host passed to
   * profilerPushCorrelationId around that op (as CUPTI's external correlation id), or 0.
   * Never an id of the plugin's own: the host links an event to the op whose id equals it,
   * and refuses (and counts) a link that cannot hold: a runtime or driver event that lies
   * outside that op's time on its thread. A plugin's own launch-to-kernel ids go into
   * metadata ("correlation") and flows. */
  int64_t eventId;
  union {
    int32_t deviceId;
    int32_t processId;
  };
  union {
    int32_t resourceId; /* stream or queue */
    int32_t threadId;
  };
};
typedef struct KinetoPlugin_ProfileEvent KinetoPlugin_ProfileEvent;
#define KINETO_PLUGIN_PROFILE_EVENT_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfileEvent, threadId)

enum KinetoPlugin_ProfileEventFlowType {
  KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_INVALID = 0,
  KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_FWD_BWD = 1,       /* forward op to backward op */
  KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_ASYNC_CPU_GPU = 2, /* host launch to device work */
  KINETO_PLUGIN_PROFILE_EVENT_NUM_FLOW_TYPES = 3           /* the count, not a type */
};
typedef enum KinetoPlugin_ProfileEventFlowType KinetoPlugin_ProfileEventFlowType;

/* One end of a flow; the same non-zero flowId on two events links them. */
struct KinetoPlugin_ProfileEventFlow {
  size_t unpaddedStructSize;
  enum KinetoPlugin_ProfileEventFlowType flowType;
  uint32_t flowId;
  bool isStartPoint; /* true on the source end */
};
typedef struct KinetoPlugin_ProfileEventFlow KinetoPlugin_ProfileEventFlow;
#define KINETO_PLUGIN_PROFILE_EVENT_FLOW_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfileEventFlow, isStartPoint)

/* A device's process row. */
struct KinetoPlugin_ProfileDeviceInfo {
  size_t unpaddedStructSize;
  int64_t deviceId;  /* the row's pid */
  int64_t sortIndex; /* the row's position */
  const char *pName;  /* NULL: the decimal deviceId */
  const char *pLabel; /* e.g. "GPU 0"; NULL: empty */
};
typedef struct KinetoPlugin_ProfileDeviceInfo KinetoPlugin_ProfileDeviceInfo;
#define KINETO_PLUGIN_PROFILE_DEVICE_INFO_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfileDeviceInfo, pLabel)

/* A stream's (or other resource's) thread row. */
struct KinetoPlugin_ProfileResourceInfo {
  size_t unpaddedStructSize;
  union {
    int32_t deviceId; /* the owning row's pid */
    int32_t processId;
  };
  union {
    int32_t resourceId; /* the row's tid */
    int32_t threadId;
  };
  int32_t displayOrder; /* lower is nearer the top */
  const char *pName;    /* NULL: the decimal resourceId */
};
typedef struct KinetoPlugin_ProfileResourceInfo KinetoPlugin_ProfileResourceInfo;
#define KINETO_PLUGIN_PROFILE_RESOURCE_INFO_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfileResourceInfo, pName)

/* ---- Trace builder (host -> plugin) ----------------------------------------------------- */

typedef struct KinetoPlugin_TraceBuilderHandle KinetoPlugin_TraceBuilderHandle;

/*
 * The host's functions for handing over events, valid only during profilerProcessEvents
 * and only on its thread. Each takes pTraceBuilderHandle first and returns 0 or -1.
 *
 * For each event: addEvent, then setLastEventName; then any number of addLastEventMetadata
 * and at most one setLastEventFlow, which apply to the event added last. Metadata values
 * are raw JSON inserted verbatim: a string value must come quoted ("\"fp16\""), a list with
 * brackets ("[1, 2]"), numbers and true/false bare. addDeviceInfo and addResourceInfo may be
 * called at any point.
 */
struct KinetoPlugin_TraceBuilder {
  size_t unpaddedStructSize;
  KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle;
  int (*addEvent)(KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle,
                  const struct KinetoPlugin_ProfileEvent *pProfileEvent);
  int (*setLastEventName)(KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle,
                          const char *pName);
  int (*setLastEventFlow)(KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle,
                          const struct KinetoPlugin_ProfileEventFlow *pProfileEventFlow);
  int (*addLastEventMetadata)(KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle,
                              const char *pKey, const char *pValue);
  int (*addDeviceInfo)(KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle,
                       const struct KinetoPlugin_ProfileDeviceInfo *pProfileDeviceInfo);
  int (*addResourceInfo)(KinetoPlugin_TraceBuilderHandle *pTraceBuilderHandle,
                         const struct KinetoPlugin_ProfileResourceInfo *pProfileResourceInfo);
};
typedef struct KinetoPlugin_TraceBuilder KinetoPlugin_TraceBuilder;
#define KINETO_PLUGIN_TRACE_BUILDER_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_TraceBuilder, addResourceInfo)

/* ---- Profiler (plugin -> host) ---------------------------------------------------------- */

/* One session of a profiler, created per trace by profilerCreate. */
typedef struct KinetoPlugin_ProfilerHandle KinetoPlugin_ProfilerHandle;

struct KinetoPlugin_ProfilerCreate_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle; /* out: the new session */
  /* in: the enabled types, enabledActivityTypesMaxLen of them, valid during the call */
  enum KinetoPlugin_ProfileEventType *pEnabledActivityTypes;
  size_t enabledActivityTypesMaxLen;
};
typedef struct KinetoPlugin_ProfilerCreate_Params KinetoPlugin_ProfilerCreate_Params;
#define KINETO_PLUGIN_PROFILER_CREATE_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerCreate_Params, \
                                     enabledActivityTypesMaxLen)

struct KinetoPlugin_ProfilerDestroy_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerDestroy_Params KinetoPlugin_ProfilerDestroy_Params;
#define KINETO_PLUGIN_PROFILER_DESTROY_PARAMS_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerDestroy_Params, pProfilerHandle)

/* The query is about the profiler, not a session: the host passes a NULL handle. */
struct KinetoPlugin_ProfilerQuery_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
  char *pProfilerName;       /* in/out: the buffer for the NUL-terminated name */
  size_t profilerNameMaxLen; /* bytes the name may take, excluding the NUL */
  /* in/out: the supported types, pre-filled with INVALID; entries left INVALID are ignored */
  enum KinetoPlugin_ProfileEventType *pSupportedActivityTypes;
  size_t supportedActivityTypesMaxLen;
};
typedef struct KinetoPlugin_ProfilerQuery_Params KinetoPlugin_ProfilerQuery_Params;
#define KINETO_PLUGIN_PROFILER_QUERY_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerQuery_Params, \
                                     supportedActivityTypesMaxLen)

struct KinetoPlugin_ProfilerStart_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerStart_Params KinetoPlugin_ProfilerStart_Params;
#define KINETO_PLUGIN_PROFILER_START_PARAMS_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerStart_Params, pProfilerHandle)

struct KinetoPlugin_ProfilerStop_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerStop_Params KinetoPlugin_ProfilerStop_Params;
#define KINETO_PLUGIN_PROFILER_STOP_PARAMS_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerStop_Params, pProfilerHandle)

struct KinetoPlugin_ProfilerProcessEvents_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
  const struct KinetoPlugin_TraceBuilder *pTraceBuilder; /* valid during the call */
};
typedef struct KinetoPlugin_ProfilerProcessEvents_Params KinetoPlugin_ProfilerProcessEvents_Params;
#define KINETO_PLUGIN_PROFILER_PROCESS_EVENTS_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerProcessEvents_Params, \
                                     pTraceBuilder)

/* Unlike every other struct, the two push structs put the id before the handle. */
struct KinetoPlugin_ProfilerPushCorrelationId_Params {
  size_t unpaddedStructSize;
  uint64_t correlationId;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerPushCorrelationId_Params
    KinetoPlugin_ProfilerPushCorrelationId_Params;
#define KINETO_PLUGIN_PROFILER_PUSH_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerPushCorrelationId_Params, \
                                     pProfilerHandle)

struct KinetoPlugin_ProfilerPopCorrelationId_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerPopCorrelationId_Params
    KinetoPlugin_ProfilerPopCorrelationId_Params;
#define KINETO_PLUGIN_PROFILER_POP_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerPopCorrelationId_Params, \
                                     pProfilerHandle)

struct KinetoPlugin_ProfilerPushUserCorrelationId_Params {
  size_t unpaddedStructSize;
  uint64_t userCorrelationId;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerPushUserCorrelationId_Params
    KinetoPlugin_ProfilerPushUserCorrelationId_Params;
#define KINETO_PLUGIN_PROFILER_PUSH_USER_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerPushUserCorrelationId_Params, \
                                     pProfilerHandle)

struct KinetoPlugin_ProfilerPopUserCorrelationId_Params {
  size_t unpaddedStructSize;
  KinetoPlugin_ProfilerHandle *pProfilerHandle;
};
typedef struct KinetoPlugin_ProfilerPopUserCorrelationId_Params
    KinetoPlugin_ProfilerPopUserCorrelationId_Params;
#define KINETO_PLUGIN_PROFILER_POP_USER_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE        \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerPopUserCorrelationId_Params, \
                                     pProfilerHandle)

/*
 * A profiler's functions. All are required except the four correlation entries, which may
 * be NULL (the host then does not forward correlation ids); a NULL required entry, or a
 * struct smaller than this version, makes the host disable the profiler.
 *
 * Lifecycle: profilerQuery once, when the host starts; then per trace that enables any
 * supported type: profilerCreate, profilerStart, correlation pushes and pops (on
 * application threads, concurrently), profilerStop, profilerProcessEvents, profilerDestroy.
 * A trace with a warm-up calls profilerCreate at the warm-up and profilerStart only when its
 * capture window opens, as Kineto starts its child profilers, so nothing recorded during the
 * warm-up takes the window's place in a plugin's buffers; a trace cancelled before its window
 * opened calls profilerDestroy without profilerStart or profilerStop.
 */
struct KinetoPlugin_ProfilerInterface {
  size_t unpaddedStructSize;
  int (*profilerCreate)(struct KinetoPlugin_ProfilerCreate_Params *pProfilerCreateParams);
  int (*profilerDestroy)(struct KinetoPlugin_ProfilerDestroy_Params *pProfilerDestroyParams);
  int (*profilerQuery)(struct KinetoPlugin_ProfilerQuery_Params *pProfilerQueryParams);
  int (*profilerStart)(struct KinetoPlugin_ProfilerStart_Params *pProfilerStartParams);
  int (*profilerStop)(struct KinetoPlugin_ProfilerStop_Params *pProfilerStopParams);
  int (*profilerPushCorrelationId)(
      struct KinetoPlugin_ProfilerPushCorrelationId_Params *pProfilerPushCorrelationIdParams);
  int (*profilerPopCorrelationId)(
      struct KinetoPlugin_ProfilerPopCorrelationId_Params *pProfilerPopCorrelationIdParams);
  int (*profilerPushUserCorrelationId)(
      struct KinetoPlugin_ProfilerPushUserCorrelationId_Params
          *pProfilerPushUserCorrelationIdParams);
  int (*profilerPopUserCorrelationId)(
      struct KinetoPlugin_ProfilerPopUserCorrelationId_Params
          *pProfilerPopUserCorrelationIdParams);
  int (*profilerProcessEvents)(
      struct KinetoPlugin_ProfilerProcessEvents_Params *pProfilerProcessEventsParams);
};
typedef struct KinetoPlugin_ProfilerInterface KinetoPlugin_ProfilerInterface;
#define KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_ProfilerInterface, profilerProcessEvents)

/* ---- Registration (host -> plugin) ------------------------------------------------------ */

typedef struct KinetoPlugin_RegistryHandle KinetoPlugin_RegistryHandle;

/* Valid only during KinetoPlugin_register. registerProfiler copies *pProfiler. */
struct KinetoPlugin_Registry {
  size_t unpaddedStructSize;
  KinetoPlugin_RegistryHandle *pRegistryHandle;
  int (*registerProfiler)(KinetoPlugin_RegistryHandle *pRegistryHandle,
                          const struct KinetoPlugin_ProfilerInterface *pProfiler);
};
typedef struct KinetoPlugin_Registry KinetoPlugin_Registry;
#define KINETO_PLUGIN_REGISTRY_UNPADDED_STRUCT_SIZE \
  KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(struct KinetoPlugin_Registry, registerProfiler)

/* Defined by the plugin, called once by the host. */
OMNIPROF_PLUGIN_EXPORT int KinetoPlugin_register(const struct KinetoPlugin_Registry *pRegistry);

/*
 * omniprof extension, optional: the text of the last failure of a call into this plugin on
 * the calling thread (NUL-terminated, valid until the thread's next call into the plugin).
 * When a profiler function returns non-zero, omniprof calls it on the same thread at once
 * and names the text in the trace's backend errors. Kineto does not look for it.
 * omniprof_kineto_adapter.h defines it.
 */
OMNIPROF_PLUGIN_EXPORT const char *OmniprofPlugin_lastError(void);

#ifdef __cplusplus
}
#endif

#endif /* OMNIPROF_PLUGIN_H */
