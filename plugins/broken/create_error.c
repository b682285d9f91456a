/*
 * create_error.c -- BROKEN: profilerCreate fails (returns -5 and leaves the handle NULL).
 *
 * "CreateError" records CONCURRENT_KERNEL, but every session fails to create. Every other
 * entry, the four correlation entries included, only counts that it was called (and returns
 * -1, as there is no session). Two exported test hooks, not part of the ABI, read the counts:
 *   int CreateError_createCalls(void);               profilerCreate calls
 *   int CreateError_callsAfterFailedCreate(void);    calls of any other entry
 *
 * Expected host behaviour (docs/plugin-abi.md section 7 and defect 8): the session exists without
 * a handle and no further call reaches the plugin: start, stop, processEvents, destroy and
 * the correlation pushes and pops are all skipped (Kineto still forwards push/pop with a
 * NULL handle). CreateError_callsAfterFailedCreate() stays 0; the failure is reported.
 */
#include <stdatomic.h>

#include "broken_plugin.h"

static atomic_int g_create_calls;
static atomic_int g_calls_after;

OMNIPROF_PLUGIN_EXPORT int CreateError_createCalls(void);
OMNIPROF_PLUGIN_EXPORT int CreateError_callsAfterFailedCreate(void);

int CreateError_createCalls(void) { return atomic_load(&g_create_calls); }
int CreateError_callsAfterFailedCreate(void) { return atomic_load(&g_calls_after); }

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "CreateError");
}

static int create(struct KinetoPlugin_ProfilerCreate_Params *params) {
  atomic_fetch_add(&g_create_calls, 1);
  if (params != NULL) {
    params->pProfilerHandle = NULL;
  }
  return -5; /* the defect */
}

/* Any entry after the failed create: counted, then refused. */
static int counted(void) {
  atomic_fetch_add(&g_calls_after, 1);
  return -1;
}

static int destroy(struct KinetoPlugin_ProfilerDestroy_Params *params) {
  (void)params;
  return counted();
}
static int start(struct KinetoPlugin_ProfilerStart_Params *params) {
  (void)params;
  return counted();
}
static int stop(struct KinetoPlugin_ProfilerStop_Params *params) {
  (void)params;
  return counted();
}
static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  (void)params;
  return counted();
}
static int push(struct KinetoPlugin_ProfilerPushCorrelationId_Params *params) {
  (void)params;
  return counted();
}
static int pop(struct KinetoPlugin_ProfilerPopCorrelationId_Params *params) {
  (void)params;
  return counted();
}
static int push_user(struct KinetoPlugin_ProfilerPushUserCorrelationId_Params *params) {
  (void)params;
  return counted();
}
static int pop_user(struct KinetoPlugin_ProfilerPopUserCorrelationId_Params *params) {
  (void)params;
  return counted();
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.profilerCreate = create;
  iface.profilerDestroy = destroy;
  iface.profilerStart = start;
  iface.profilerStop = stop;
  iface.profilerPushCorrelationId = push;
  iface.profilerPopCorrelationId = pop;
  iface.profilerPushUserCorrelationId = push_user;
  iface.profilerPopUserCorrelationId = pop_user;
  return broken_register_one(registry, &iface);
}
