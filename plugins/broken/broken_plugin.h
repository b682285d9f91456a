/*
 * broken_plugin.h: the well-behaved skeleton every plugin of this directory shares, so that
 * each .c file holds its one defect and little else.
 *
 * Not a plugin itself (the test helper builds only *.c files). Everything here is static
 * inline, so a file that does not use a helper gets no unused-function warning.
 *
 * The skeleton: create allocates a BrokenSession, destroy frees it, stop does nothing, and
 * start records a bracket of real time [beginNs, endNs] (CLOCK_REALTIME, waited out for
 * BROKEN_SPAN_NS) that lies inside the host's capture window: the host takes its window
 * start before profilerStart and its window end before profilerStop, after start returned.
 * Valid events are placed in that bracket so that a host filtering by the window keeps
 * them. Each plugin supplies its own query (its name) and processEvents (its defect).
 *
 * The convention the tests rely on: a plugin that emits events emits the valid kernel
 * "valid_kernel" (id 1, device 0, resource 1) before its broken call and the valid kernel
 * "after_broken_call" (id 2, device 0, resource 1) after it, whose metadata
 * "broken_call_rc" is the code the host returned for the broken call (a JSON number).
 */
#ifndef OMNIPROF_BROKEN_PLUGIN_H
#define OMNIPROF_BROKEN_PLUGIN_H

/* For clock_gettime under -std=c11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "omniprof_plugin.h"

/* The bracket start waits out. */
#define BROKEN_SPAN_NS INT64_C(20000)
#define BROKEN_DEVICE 0
#define BROKEN_RESOURCE 1

typedef enum KinetoPlugin_ProfileEventType BrokenEventType;

/* One session: the real-time bracket recorded by start. */
struct BrokenSession {
  bool started;
  int64_t beginNs, endNs;
};

/* Whether a struct from the host is present and at least as large as this plugin knows it. */
#define BROKEN_HOST_STRUCT_OK(ptr, unpadded) \
  ((ptr) != NULL && (ptr)->unpaddedStructSize >= (unpadded))

/* CLOCK_REALTIME in nanoseconds since the Unix epoch. */
static inline int64_t broken_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

/* A point `num`/`den` of the way through the session's bracket. */
static inline int64_t broken_at(const struct BrokenSession *s, int64_t num, int64_t den) {
  return s->beginNs + (s->endNs - s->beginNs) * num / den;
}

/* Query: `name` and the supported types, written into the host's buffers. */
static inline int broken_query(struct KinetoPlugin_ProfilerQuery_Params *params,
                               const char *name, const BrokenEventType *types,
                               size_t num_types) {
  if (!BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_QUERY_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  if (params->pProfilerName != NULL) {
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

/* Query for a plugin that records kernels only. */
static inline int broken_query_kernels(struct KinetoPlugin_ProfilerQuery_Params *params,
                                       const char *name) {
  static const BrokenEventType kKernels[] = {KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL};
  return broken_query(params, name, kKernels, 1);
}

static inline int broken_create(struct KinetoPlugin_ProfilerCreate_Params *params) {
  if (!BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_CREATE_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  struct BrokenSession *session = calloc(1, sizeof *session);
  params->pProfilerHandle = (KinetoPlugin_ProfilerHandle *)session;
  return session == NULL ? -1 : 0;
}

static inline int broken_destroy(struct KinetoPlugin_ProfilerDestroy_Params *params) {
  if (!BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_DESTROY_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return -1;
  }
  free(params->pProfilerHandle);
  return 0;
}

static inline int broken_start(struct KinetoPlugin_ProfilerStart_Params *params) {
  if (!BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_START_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  struct BrokenSession *session = (struct BrokenSession *)params->pProfilerHandle;
  session->beginNs = broken_now_ns();
  do {
    session->endNs = broken_now_ns();
  } while (session->endNs - session->beginNs < BROKEN_SPAN_NS);
  session->started = true;
  return 0;
}

static inline int broken_stop(struct KinetoPlugin_ProfilerStop_Params *params) {
  return BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_STOP_PARAMS_UNPADDED_STRUCT_SIZE)
             ? 0
             : -1;
}

/*
 * The session and the trace builder of a processEvents call, checked: returns the session,
 * or NULL when the parameters, the builder or the handle are unusable or start never ran.
 */
static inline const struct BrokenSession *broken_process_args(
    const struct KinetoPlugin_ProfilerProcessEvents_Params *params,
    const struct KinetoPlugin_TraceBuilder **out_builder) {
  if (!BROKEN_HOST_STRUCT_OK(params,
                             KINETO_PLUGIN_PROFILER_PROCESS_EVENTS_PARAMS_UNPADDED_STRUCT_SIZE)) {
    return NULL;
  }
  const struct KinetoPlugin_TraceBuilder *tb = params->pTraceBuilder;
  if (!BROKEN_HOST_STRUCT_OK(tb, KINETO_PLUGIN_TRACE_BUILDER_UNPADDED_STRUCT_SIZE) ||
      tb->addEvent == NULL || tb->setLastEventName == NULL || tb->setLastEventFlow == NULL ||
      tb->addLastEventMetadata == NULL || tb->addDeviceInfo == NULL ||
      tb->addResourceInfo == NULL) {
    return NULL;
  }
  const struct BrokenSession *session = (const struct BrokenSession *)params->pProfilerHandle;
  if (session == NULL || !session->started) {
    return NULL;
  }
  *out_builder = tb;
  return session;
}

/* A complete event (unpaddedStructSize set, the rest as given). */
static inline struct KinetoPlugin_ProfileEvent broken_event(BrokenEventType type, int64_t start,
                                                            int64_t end, int64_t id) {
  struct KinetoPlugin_ProfileEvent event;
  memset(&event, 0, sizeof event);
  event.unpaddedStructSize = KINETO_PLUGIN_PROFILE_EVENT_UNPADDED_STRUCT_SIZE;
  event.eventType = type;
  event.startTimeUtcNs = start;
  event.endTimeUtcNs = end;
  event.eventId = id;
  event.deviceId = BROKEN_DEVICE;
  event.resourceId = BROKEN_RESOURCE;
  return event;
}

/* A kernel on (BROKEN_DEVICE, BROKEN_RESOURCE) from `from` to `to` tenths of the bracket. */
static inline struct KinetoPlugin_ProfileEvent broken_kernel(const struct BrokenSession *s,
                                                             int64_t from, int64_t to,
                                                             int64_t id) {
  return broken_event(KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL, broken_at(s, from, 10),
                      broken_at(s, to, 10), id);
}

/* Adds `event` and names it; the first failing code, or 0. */
static inline int broken_add_named(const struct KinetoPlugin_TraceBuilder *tb,
                                   const struct KinetoPlugin_ProfileEvent *event,
                                   const char *name) {
  int rc = tb->addEvent(tb->pTraceBuilderHandle, event);
  return rc != 0 ? rc : tb->setLastEventName(tb->pTraceBuilderHandle, name);
}

/* The valid kernel "valid_kernel" (id 1) in the first fifth of the bracket. */
static inline int broken_emit_valid_before(const struct KinetoPlugin_TraceBuilder *tb,
                                           const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 1, 2, 1);
  return broken_add_named(tb, &event, "valid_kernel");
}

/* The valid kernel "after_broken_call" (id 2) in the last fifth of the bracket, with the
 * metadata "broken_call_rc": `broken_rc`. */
static inline int broken_emit_valid_after(const struct KinetoPlugin_TraceBuilder *tb,
                                          const struct BrokenSession *s, int broken_rc) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 8, 9, 2);
  int rc = broken_add_named(tb, &event, "after_broken_call");
  if (rc != 0) {
    return rc;
  }
  char text[16];
  snprintf(text, sizeof text, "%d", broken_rc);
  return tb->addLastEventMetadata(tb->pTraceBuilderHandle, "broken_call_rc", text);
}

/* A plugin's broken call: makes it against the builder and returns the host's code. */
typedef int (*BrokenCall)(const struct KinetoPlugin_TraceBuilder *tb,
                          const struct BrokenSession *s);

/* The usual processEvents: valid_kernel, the broken call, after_broken_call with its code.
 * Returns the first failing code of the valid calls (the broken call's code is reported in
 * the metadata, not returned, so that one rejected call does not fail the whole session). */
static inline int broken_process_around(struct KinetoPlugin_ProfilerProcessEvents_Params *params,
                                        BrokenCall call) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s == NULL) {
    return -1;
  }
  int rc = broken_emit_valid_before(tb, s);
  if (rc != 0) {
    return rc;
  }
  return broken_emit_valid_after(tb, s, call(tb, s));
}

/* An interface with the skeleton's entries, `query` and `process`; the correlation entries
 * NULL. */
static inline struct KinetoPlugin_ProfilerInterface broken_interface(
    int (*query)(struct KinetoPlugin_ProfilerQuery_Params *),
    int (*process)(struct KinetoPlugin_ProfilerProcessEvents_Params *)) {
  struct KinetoPlugin_ProfilerInterface iface;
  memset(&iface, 0, sizeof iface);
  iface.unpaddedStructSize = KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE;
  iface.profilerCreate = broken_create;
  iface.profilerDestroy = broken_destroy;
  iface.profilerQuery = query;
  iface.profilerStart = broken_start;
  iface.profilerStop = broken_stop;
  iface.profilerProcessEvents = process;
  return iface;
}

/* Whether the registry the host passed is usable. */
static inline bool broken_registry_ok(const struct KinetoPlugin_Registry *registry) {
  return BROKEN_HOST_STRUCT_OK(registry, KINETO_PLUGIN_REGISTRY_UNPADDED_STRUCT_SIZE) &&
         registry->registerProfiler != NULL;
}

/* Registers one interface: the body of most plugins' KinetoPlugin_register. */
static inline int broken_register_one(const struct KinetoPlugin_Registry *registry,
                                      const struct KinetoPlugin_ProfilerInterface *iface) {
  if (!broken_registry_ok(registry)) {
    return -1;
  }
  return registry->registerProfiler(registry->pRegistryHandle, iface);
}

#endif /* OMNIPROF_BROKEN_PLUGIN_H */
