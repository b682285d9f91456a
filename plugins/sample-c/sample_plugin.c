/*
 * sample_plugin.c: a profiler plugin in plain C11 for the dynamic plugin ABI of
 * omniprof_plugin.h (binary compatible with Kineto PR 1148's KinetoDynamicPluginInterface.h).
 *
 * One KinetoPlugin_register registers two profilers:
 *
 * MockPlugin
 *   The conformance mock of Kineto's DynamicPluginTest.cpp (docs/plugin-abi.md, section 10):
 *   query reports the name "MockPlugin" and CUDA_RUNTIME, CUDA_DRIVER, CONCURRENT_KERNEL,
 *   GPU_MEMCPY; create allocates a handle record {created, active, enabled types}; start and
 *   stop toggle `active`; destroy frees the record; the four optional correlation entries are
 *   NULL. processEvents emits, whatever was enabled, the reference's four events at fixed
 *   times around base = 1,000,000,000 ns (1970-01-01T00:00:01Z):
 *
 *     CUDA_RUNTIME       base        .. base+5000   id 1  device 0 resource 123 cudaLaunchKernel
 *     CUDA_DRIVER        base+10000  .. base+15000  id 2  device 0 resource 124 cuLaunchKernel
 *     CONCURRENT_KERNEL  base+20000  .. base+50000  id 3  device 0 resource 1   test_kernel
 *     GPU_MEMCPY         base+60000  .. base+70000  id 4  device 0 resource 2   cudaMemcpyHtoD
 *
 *   Those times lie outside any real capture window, so a host that filters plugin events by
 *   the window (omniprof does, Kineto does not) drops all four; they are for checking the
 *   ABI plumbing field by field. Two extra exported functions, MockPlugin_liveHandleCount
 *   and MockPlugin_lastHandleState (below), let a host's tests see the handle records the
 *   reference test inspects directly.
 *
 * SampleCounters
 *   A small device profiler whose events are real: timed inside the host's capture window,
 *   with a launch-to-kernel flow, metadata, counters and rows. It supports GPU_PM_COUNTER,
 *   PRIVATEUSE1_RUNTIME and CONCURRENT_KERNEL, emits only the enabled ones, and implements the
 *   four correlation entries by counting the calls. processEvents emits, on device 3:
 *
 *     PRIVATEUSE1_RUNTIME  sampleLaunchKernel  (pid, tid of the thread that called start)
 *         eventId = this session's correlation id (a process-wide counter starting at 2^32+1,
 *         so the id needs all 64 bits). It is the sample's own id, not one it was pushed, so
 *         it may equal a host op's id (omniprof's are thread index << 32 | sequence: 2^32+1
 *         is thread 1's first range); the host refuses such a link, since the launch lies
 *         outside that op's time or thread, and counts it (refused_links); metadata
 *         pushed_correlations, popped_correlations, pushed_user_correlations,
 *         popped_user_correlations (numbers: the correlation calls the session received),
 *         and, after at least one push of the kind, last_pushed_correlation and
 *         last_pushed_user_correlation (the id the latest push carried);
 *         the start of an ac2g flow whose id is the low 32 bits of the correlation id.
 *     CONCURRENT_KERNEL    sample_kernel  (device 3, stream 7)
 *         same eventId; metadata stream 7, device 3, kernel_kind "elementwise" and
 *         note "says \"hi\"" (JSON strings, quoted by the plugin), grid [4, 1, 1]; the end of
 *         the flow. The flow is set only when both ends are emitted.
 *     GPU_PM_COUNTER       sm_activity x5  (device 3, resource 0)
 *         metadata {"sm_active_pct": 12.5 / 37 / 64.25 / 88 / 50.0}
 *     GPU_PM_COUNTER       dram_throughput x3  (device 3, resource 0)
 *         metadata {"read_gbps": ..., "write_gbps": ...}: a counter with two series
 *   plus one device info (device 3, "Sample device", label "GPU 3") and two resource infos
 *   (stream 7 "stream 7", resource 0 "counters").
 *
 *   Timing: the host records its window start before calling profilerStart and its window
 *   end before calling profilerStop, so a plugin that spreads events up to its own stop time
 *   can end past the window. profilerStart therefore reads CLOCK_REALTIME on entry and waits
 *   until SPAN_NS more have passed before returning: everything emitted lies in that
 *   bracket, which is inside the window however short the capture.
 *
 * Build (the test helper in crates/test-support/src/plugins.rs uses the same flags):
 *   cc -std=c11 -pedantic -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden \
 *      -I ../../crates/omniprof-plugin-sys/include -o libsample_plugin.so sample_plugin.c
 */

/* For clock_gettime, and syscall(SYS_gettid) on Linux, under -std=c11. */
#define _GNU_SOURCE

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "omniprof_plugin.h"

typedef enum KinetoPlugin_ProfileEventType EventType;

/* ---- Helpers shared by both profilers ----------------------------------------------------- */

/* Whether a struct from the host is present and at least as large as this plugin knows it:
 * the versioning rule of the ABI, applied to what the host hands over. */
#define HOST_STRUCT_OK(ptr, unpadded) ((ptr) != NULL && (ptr)->unpaddedStructSize >= (unpadded))

/* The trace builder of processEvents, checked: NULL unless it is large enough and complete. */
static const struct KinetoPlugin_TraceBuilder *checked_builder(
    const struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_PROCESS_EVENTS_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return NULL;
  }
  const struct KinetoPlugin_TraceBuilder *tb = params->pTraceBuilder;
  if (!HOST_STRUCT_OK(tb, KINETO_PLUGIN_TRACE_BUILDER_UNPADDED_STRUCT_SIZE) ||
      tb->addEvent == NULL || tb->setLastEventName == NULL || tb->setLastEventFlow == NULL ||
      tb->addLastEventMetadata == NULL || tb->addDeviceInfo == NULL ||
      tb->addResourceInfo == NULL) {
    return NULL;
  }
  return tb;
}

/* Writes the profiler's name and supported types into the host's query buffers. */
static int write_query(struct KinetoPlugin_ProfilerQuery_Params *params, const char *name,
                       const EventType *types, size_t num_types) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_QUERY_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  if (params->pProfilerName != NULL) {
    /* At most profilerNameMaxLen bytes and the NUL; snprintf truncates and terminates. */
    snprintf(params->pProfilerName, params->profilerNameMaxLen + 1, "%s", name);
  }
  if (params->pSupportedActivityTypes != NULL) {
    for (size_t i = 0; i < params->supportedActivityTypesMaxLen; i++) {
      params->pSupportedActivityTypes[i] =
          i < num_types ? types[i] : KINETO_PLUGIN_PROFILE_EVENT_TYPE_INVALID;
    }
  }
  return 0;
}

/* Adds one event and names it: the ABI's addEvent then setLastEventName. */
static int add_named_event(const struct KinetoPlugin_TraceBuilder *tb, EventType type,
                           int64_t start_ns, int64_t end_ns, int64_t id, int32_t device,
                           int32_t resource, const char *name) {
  struct KinetoPlugin_ProfileEvent event;
  memset(&event, 0, sizeof event);
  event.unpaddedStructSize = KINETO_PLUGIN_PROFILE_EVENT_UNPADDED_STRUCT_SIZE;
  event.eventType = type;
  event.startTimeUtcNs = start_ns;
  event.endTimeUtcNs = end_ns;
  event.eventId = id;
  event.deviceId = device;
  event.resourceId = resource;
  int rc = tb->addEvent(tb->pTraceBuilderHandle, &event);
  if (rc != 0) {
    return rc;
  }
  return tb->setLastEventName(tb->pTraceBuilderHandle, name);
}

/* ---- MockPlugin --------------------------------------------------------------------------- */

#define MOCK_BASE_NS INT64_C(1000000000)

static const EventType kMockSupported[] = {
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_RUNTIME,
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_DRIVER,
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL,
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_MEMCPY,
};

/* The reference mock's handle record. */
struct MockHandle {
  bool created;
  atomic_bool active;
  size_t numEnabledTypes;
  EventType enabledTypes[]; /* numEnabledTypes entries, copied at create */
};

/* For the test hooks: live records, and the most recently created one still alive. */
static atomic_int g_mock_live_handles;
static struct MockHandle *_Atomic g_mock_last_handle;

static int mock_query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return write_query(params, "MockPlugin", kMockSupported,
                     sizeof kMockSupported / sizeof kMockSupported[0]);
}

static int mock_create(struct KinetoPlugin_ProfilerCreate_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_CREATE_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  params->pProfilerHandle = NULL;
  size_t n = params->enabledActivityTypesMaxLen;
  if (n > 0 && params->pEnabledActivityTypes == NULL) {
    return -1;
  }
  struct MockHandle *handle = malloc(sizeof *handle + n * sizeof(EventType));
  if (handle == NULL) {
    return -1;
  }
  handle->created = true;
  atomic_init(&handle->active, false);
  handle->numEnabledTypes = n;
  if (n > 0) {
    memcpy(handle->enabledTypes, params->pEnabledActivityTypes, n * sizeof(EventType));
  }
  atomic_fetch_add(&g_mock_live_handles, 1);
  atomic_store(&g_mock_last_handle, handle);
  params->pProfilerHandle = (KinetoPlugin_ProfilerHandle *)handle;
  return 0;
}

static int mock_destroy(struct KinetoPlugin_ProfilerDestroy_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_DESTROY_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  struct MockHandle *handle = (struct MockHandle *)params->pProfilerHandle;
  struct MockHandle *expected = handle;
  atomic_compare_exchange_strong(&g_mock_last_handle, &expected, NULL);
  atomic_fetch_sub(&g_mock_live_handles, 1);
  free(handle);
  return 0;
}

/* start and stop take the same 16-byte parameters; this sets `active` for either. */
static int mock_set_active(KinetoPlugin_ProfilerHandle *opaque, bool active) {
  if (opaque == NULL) {
    return -1;
  }
  atomic_store(&((struct MockHandle *)opaque)->active, active);
  return 0;
}

static int mock_start(struct KinetoPlugin_ProfilerStart_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_START_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  return mock_set_active(params->pProfilerHandle, true);
}

static int mock_stop(struct KinetoPlugin_ProfilerStop_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_STOP_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  return mock_set_active(params->pProfilerHandle, false);
}

static int mock_process_events(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = checked_builder(params);
  if (tb == NULL || params->pProfilerHandle == NULL) {
    return -1;
  }
  static const struct {
    EventType type;
    int64_t start, end, id;
    int32_t resource;
    const char *name;
  } kEvents[] = {
      {KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_RUNTIME, 0, 5000, 1, 123, "cudaLaunchKernel"},
      {KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_DRIVER, 10000, 15000, 2, 124, "cuLaunchKernel"},
      {KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL, 20000, 50000, 3, 1, "test_kernel"},
      {KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_MEMCPY, 60000, 70000, 4, 2, "cudaMemcpyHtoD"},
  };
  for (size_t i = 0; i < sizeof kEvents / sizeof kEvents[0]; i++) {
    int rc = add_named_event(tb, kEvents[i].type, MOCK_BASE_NS + kEvents[i].start,
                             MOCK_BASE_NS + kEvents[i].end, kEvents[i].id, 0,
                             kEvents[i].resource, kEvents[i].name);
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}

/* Test hooks, not part of the ABI: a host's tests look them up with dlsym. */

/* The number of MockPlugin handle records alive (created and not yet destroyed). */
OMNIPROF_PLUGIN_EXPORT int MockPlugin_liveHandleCount(void);
/*
 * The state of the most recently created handle record still alive: returns 0 and writes
 * whether it is active, its number of enabled types, and up to maxTypes of them (as ints);
 * returns -1 when none is alive. Any output pointer may be NULL.
 */
OMNIPROF_PLUGIN_EXPORT int MockPlugin_lastHandleState(bool *pActive, size_t *pNumEnabledTypes,
                                                      int32_t *pEnabledTypes, size_t maxTypes);

int MockPlugin_liveHandleCount(void) { return atomic_load(&g_mock_live_handles); }

int MockPlugin_lastHandleState(bool *pActive, size_t *pNumEnabledTypes, int32_t *pEnabledTypes,
                               size_t maxTypes) {
  struct MockHandle *handle = atomic_load(&g_mock_last_handle);
  if (handle == NULL || !handle->created) {
    return -1;
  }
  if (pActive != NULL) {
    *pActive = atomic_load(&handle->active);
  }
  if (pNumEnabledTypes != NULL) {
    *pNumEnabledTypes = handle->numEnabledTypes;
  }
  for (size_t i = 0; pEnabledTypes != NULL && i < maxTypes && i < handle->numEnabledTypes; i++) {
    pEnabledTypes[i] = (int32_t)handle->enabledTypes[i];
  }
  return 0;
}

/* ---- SampleCounters ----------------------------------------------------------------------- */

/* The bracket profilerStart waits out, inside which every event is placed. */
#define SPAN_NS INT64_C(50000)
/* A build may put the device elsewhere (-DSAMPLE_DEVICE=0: where another backend has one). */
#ifndef SAMPLE_DEVICE
#define SAMPLE_DEVICE 3
#endif
#define SAMPLE_STREAM 7
#define SAMPLE_COUNTER_RESOURCE 0

static const EventType kSampleSupported[] = {
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER,
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME,
    KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL,
};

/* Correlation ids handed to sessions; starting above 2^32 makes the 64-bit id observable. */
static _Atomic int64_t g_sample_next_correlation = (INT64_C(1) << 32) + 1;

struct SampleHandle {
  bool runtime, kernel, counters; /* which of the supported types are enabled */
  int64_t correlationId;
  /* Set by start: the bracket [beginNs, endNs] and the calling thread. */
  bool started;
  int64_t beginNs, endNs;
  int32_t pid, tid;
  /* Correlation calls, which arrive concurrently from application threads, and the id each
   * kind of push carried last. */
  _Atomic uint64_t pushes, pops, userPushes, userPops;
  _Atomic uint64_t lastPushed, lastUserPushed;
};

/* CLOCK_REALTIME in nanoseconds since the Unix epoch: the clock of the ABI's timestamps. */
static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

static int32_t thread_id(void) {
#if defined(__linux__) && defined(SYS_gettid)
  return (int32_t)syscall(SYS_gettid);
#else
  return (int32_t)getpid();
#endif
}

static int sample_query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return write_query(params, "SampleCounters", kSampleSupported,
                     sizeof kSampleSupported / sizeof kSampleSupported[0]);
}

static int sample_create(struct KinetoPlugin_ProfilerCreate_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_CREATE_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  params->pProfilerHandle = NULL;
  if (params->enabledActivityTypesMaxLen > 0 && params->pEnabledActivityTypes == NULL) {
    return -1;
  }
  struct SampleHandle *handle = calloc(1, sizeof *handle);
  if (handle == NULL) {
    return -1;
  }
  for (size_t i = 0; i < params->enabledActivityTypesMaxLen; i++) {
    switch (params->pEnabledActivityTypes[i]) {
      case KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME:
        handle->runtime = true;
        break;
      case KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL:
        handle->kernel = true;
        break;
      case KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER:
        handle->counters = true;
        break;
      default: /* not supported: ignored */
        break;
    }
  }
  handle->correlationId = atomic_fetch_add(&g_sample_next_correlation, 1);
  atomic_init(&handle->pushes, 0);
  atomic_init(&handle->pops, 0);
  atomic_init(&handle->userPushes, 0);
  atomic_init(&handle->userPops, 0);
  atomic_init(&handle->lastPushed, 0);
  atomic_init(&handle->lastUserPushed, 0);
  params->pProfilerHandle = (KinetoPlugin_ProfilerHandle *)handle;
  return 0;
}

static int sample_destroy(struct KinetoPlugin_ProfilerDestroy_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_DESTROY_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  free(params->pProfilerHandle);
  return 0;
}

static int sample_start(struct KinetoPlugin_ProfilerStart_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_START_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  struct SampleHandle *handle = (struct SampleHandle *)params->pProfilerHandle;
  handle->beginNs = now_ns();
  handle->pid = (int32_t)getpid();
  handle->tid = thread_id();
  /* Wait out the bracket (see the top of the file): 50 us of spinning. */
  do {
    handle->endNs = now_ns();
  } while (handle->endNs - handle->beginNs < SPAN_NS);
  handle->started = true;
  return 0;
}

static int sample_stop(struct KinetoPlugin_ProfilerStop_Params *params) {
  if (!HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_STOP_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  return 0;
}

/* The handle of a correlation call, or NULL when the parameters are unusable. */
#define SAMPLE_HANDLE_OF(params, unpadded)                                                   \
  (HOST_STRUCT_OK(params, unpadded) ? (struct SampleHandle *)(params)->pProfilerHandle : NULL)

static int sample_push(struct KinetoPlugin_ProfilerPushCorrelationId_Params *params) {
  struct SampleHandle *handle = SAMPLE_HANDLE_OF(
      params, KINETO_PLUGIN_PROFILER_PUSH_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE);
  if (handle == NULL) {
    return -1;
  }
  atomic_store(&handle->lastPushed, params->correlationId);
  atomic_fetch_add(&handle->pushes, 1);
  return 0;
}

static int sample_pop(struct KinetoPlugin_ProfilerPopCorrelationId_Params *params) {
  struct SampleHandle *handle = SAMPLE_HANDLE_OF(
      params, KINETO_PLUGIN_PROFILER_POP_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE);
  if (handle == NULL) {
    return -1;
  }
  atomic_fetch_add(&handle->pops, 1);
  return 0;
}

static int sample_push_user(struct KinetoPlugin_ProfilerPushUserCorrelationId_Params *params) {
  struct SampleHandle *handle = SAMPLE_HANDLE_OF(
      params, KINETO_PLUGIN_PROFILER_PUSH_USER_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE);
  if (handle == NULL) {
    return -1;
  }
  atomic_store(&handle->lastUserPushed, params->userCorrelationId);
  atomic_fetch_add(&handle->userPushes, 1);
  return 0;
}

static int sample_pop_user(struct KinetoPlugin_ProfilerPopUserCorrelationId_Params *params) {
  struct SampleHandle *handle = SAMPLE_HANDLE_OF(
      params, KINETO_PLUGIN_PROFILER_POP_USER_CORRELATION_ID_PARAMS_UNPADDED_STRUCT_SIZE);
  if (handle == NULL) {
    return -1;
  }
  atomic_fetch_add(&handle->userPops, 1);
  return 0;
}

/* Adds a metadata entry whose value is an unsigned number. */
static int add_u64_metadata(const struct KinetoPlugin_TraceBuilder *tb, const char *key,
                            uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, value);
  return tb->addLastEventMetadata(tb->pTraceBuilderHandle, key, text);
}

/* Sets the ac2g flow end of the last event. */
static int set_flow(const struct KinetoPlugin_TraceBuilder *tb, uint32_t id, bool start) {
  struct KinetoPlugin_ProfileEventFlow flow;
  memset(&flow, 0, sizeof flow);
  flow.unpaddedStructSize = KINETO_PLUGIN_PROFILE_EVENT_FLOW_UNPADDED_STRUCT_SIZE;
  flow.flowType = KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_ASYNC_CPU_GPU;
  flow.flowId = id;
  flow.isStartPoint = start;
  return tb->setLastEventFlow(tb->pTraceBuilderHandle, &flow);
}

/* Runs `call`, an expression evaluating to a return code, and returns it on failure. */
#define TRY(call)        \
  do {                   \
    int rc_ = (call);    \
    if (rc_ != 0) {      \
      return rc_;        \
    }                    \
  } while (0)

static int sample_emit(const struct KinetoPlugin_TraceBuilder *tb,
                       const struct SampleHandle *h) {
  const int64_t b = h->beginNs;
  const int64_t span = h->endNs - h->beginNs;
  const int64_t id = h->correlationId;
  const uint32_t flow_id = (uint32_t)((uint64_t)id & UINT32_MAX);
  const bool flow = h->runtime && h->kernel;

  struct KinetoPlugin_ProfileDeviceInfo device;
  memset(&device, 0, sizeof device);
  device.unpaddedStructSize = KINETO_PLUGIN_PROFILE_DEVICE_INFO_UNPADDED_STRUCT_SIZE;
  device.deviceId = SAMPLE_DEVICE;
  device.sortIndex = SAMPLE_DEVICE;
  device.pName = "Sample device";
  device.pLabel = "GPU 3";
  TRY(tb->addDeviceInfo(tb->pTraceBuilderHandle, &device));

  static const struct {
    int32_t resource, order;
    const char *name;
  } kRows[] = {{SAMPLE_STREAM, 1, "stream 7"}, {SAMPLE_COUNTER_RESOURCE, 0, "counters"}};
  for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; i++) {
    struct KinetoPlugin_ProfileResourceInfo row;
    memset(&row, 0, sizeof row);
    row.unpaddedStructSize = KINETO_PLUGIN_PROFILE_RESOURCE_INFO_UNPADDED_STRUCT_SIZE;
    row.deviceId = SAMPLE_DEVICE;
    row.resourceId = kRows[i].resource;
    row.displayOrder = kRows[i].order;
    row.pName = kRows[i].name;
    TRY(tb->addResourceInfo(tb->pTraceBuilderHandle, &row));
  }

  if (h->runtime) {
    TRY(add_named_event(tb, KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME, b + span / 20,
                        b + span / 5, id, h->pid, h->tid, "sampleLaunchKernel"));
    TRY(add_u64_metadata(tb, "pushed_correlations", atomic_load(&h->pushes)));
    TRY(add_u64_metadata(tb, "popped_correlations", atomic_load(&h->pops)));
    TRY(add_u64_metadata(tb, "pushed_user_correlations", atomic_load(&h->userPushes)));
    TRY(add_u64_metadata(tb, "popped_user_correlations", atomic_load(&h->userPops)));
    if (atomic_load(&h->pushes) > 0) {
      TRY(add_u64_metadata(tb, "last_pushed_correlation", atomic_load(&h->lastPushed)));
    }
    if (atomic_load(&h->userPushes) > 0) {
      TRY(add_u64_metadata(tb, "last_pushed_user_correlation", atomic_load(&h->lastUserPushed)));
    }
    if (flow) {
      TRY(set_flow(tb, flow_id, true));
    }
  }
  if (h->kernel) {
    TRY(add_named_event(tb, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL,
                        b + 3 * span / 10, b + 7 * span / 10, id, SAMPLE_DEVICE, SAMPLE_STREAM,
                        "sample_kernel"));
    /* Values are raw JSON: numbers bare, strings quoted (and escaped) here, lists bracketed. */
    TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "stream", "7"));
    TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "device", "3"));
    TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "kernel_kind", "\"elementwise\""));
    TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "note", "\"says \\\"hi\\\"\""));
    TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "grid", "[4, 1, 1]"));
    if (flow) {
      TRY(set_flow(tb, flow_id, false));
    }
  }
  if (h->counters) {
    /* A counter sample is an event whose metadata pairs are the series, at its start time. */
    static const char *const kSmActive[] = {"12.5", "37", "64.25", "88", "50.0"};
    const int64_t n = (int64_t)(sizeof kSmActive / sizeof kSmActive[0]);
    for (int64_t i = 0; i < n; i++) {
      int64_t t = b + (i + 1) * span / (n + 1);
      TRY(add_named_event(tb, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER, t, t, 0,
                          SAMPLE_DEVICE, SAMPLE_COUNTER_RESOURCE, "sm_activity"));
      TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "sm_active_pct", kSmActive[i]));
    }
    static const char *const kDram[][2] = {{"1.5", "0.25"}, {"12", "3.5"}, {"0", "0"}};
    const int64_t m = (int64_t)(sizeof kDram / sizeof kDram[0]);
    for (int64_t i = 0; i < m; i++) {
      int64_t t = b + (2 * i + 1) * span / (2 * m);
      TRY(add_named_event(tb, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER, t, t, 0,
                          SAMPLE_DEVICE, SAMPLE_COUNTER_RESOURCE, "dram_throughput"));
      TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "read_gbps", kDram[i][0]));
      TRY(tb->addLastEventMetadata(tb->pTraceBuilderHandle, "write_gbps", kDram[i][1]));
    }
  }
  return 0;
}

static int sample_process_events(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = checked_builder(params);
  if (tb == NULL || params->pProfilerHandle == NULL) {
    return -1;
  }
  const struct SampleHandle *handle = (const struct SampleHandle *)params->pProfilerHandle;
  if (!handle->started) {
    return 0; /* never started: nothing was captured */
  }
  return sample_emit(tb, handle);
}

/* ---- Registration ------------------------------------------------------------------------- */

int KinetoPlugin_register(const struct KinetoPlugin_Registry *pRegistry) {
  if (!HOST_STRUCT_OK(pRegistry, KINETO_PLUGIN_REGISTRY_UNPADDED_STRUCT_SIZE) ||
      pRegistry->registerProfiler == NULL) {
    return -1;
  }

  struct KinetoPlugin_ProfilerInterface mock;
  memset(&mock, 0, sizeof mock); /* the four correlation entries stay NULL */
  mock.unpaddedStructSize = KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE;
  mock.profilerCreate = mock_create;
  mock.profilerDestroy = mock_destroy;
  mock.profilerQuery = mock_query;
  mock.profilerStart = mock_start;
  mock.profilerStop = mock_stop;
  mock.profilerProcessEvents = mock_process_events;

  struct KinetoPlugin_ProfilerInterface sample;
  memset(&sample, 0, sizeof sample);
  sample.unpaddedStructSize = KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE;
  sample.profilerCreate = sample_create;
  sample.profilerDestroy = sample_destroy;
  sample.profilerQuery = sample_query;
  sample.profilerStart = sample_start;
  sample.profilerStop = sample_stop;
  sample.profilerPushCorrelationId = sample_push;
  sample.profilerPopCorrelationId = sample_pop;
  sample.profilerPushUserCorrelationId = sample_push_user;
  sample.profilerPopUserCorrelationId = sample_pop_user;
  sample.profilerProcessEvents = sample_process_events;

  /* The host copies each interface. Success once either registered: a failure makes the host
   * unload the library, which would leave it holding the other one's function pointers. */
  int mock_rc = pRegistry->registerProfiler(pRegistry->pRegistryHandle, &mock);
  int sample_rc = pRegistry->registerProfiler(pRegistry->pRegistryHandle, &sample);
  if (mock_rc == 0 || sample_rc == 0) {
    return 0;
  }
  return mock_rc;
}
