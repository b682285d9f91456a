/*
 * late_calls.c -- BROKEN: calls the registry and the trace builder after the call that lent
 * each of them returned, and nothing else wrong.
 *
 * "LateCalls" (CONCURRENT_KERNEL). KinetoPlugin_register keeps a copy of the registry and
 * registers its profiler; profilerCreate calls registerProfiler through the kept copy, after
 * registration returned. processEvents emits valid_kernel and after_broken_call (whose
 * broken_call_rc is 0: nothing is misused during the call) and keeps a copy of the builder;
 * profilerDestroy calls addEvent through that copy, after processEvents returned. Every
 * event it emits lies in the capture window, and no call fails: only the two late calls are
 * wrong.
 *
 * Expected host behaviour: both late calls are refused (-1) and counted
 * (omniprof::plugin::late_calls), never touching host memory; `omniprof plugins check`
 * says FAIL, naming the refused calls.
 */
#include "broken_plugin.h"

static struct KinetoPlugin_Registry kept_registry;
static struct KinetoPlugin_TraceBuilder kept_builder;
static bool have_kept_builder;

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "LateCalls");
}

static int create(struct KinetoPlugin_ProfilerCreate_Params *params) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, NULL);
  (void)kept_registry.registerProfiler(kept_registry.pRegistryHandle, &iface);
  return broken_create(params);
}

/* Nothing misused during the call: the builder is only copied, for destroy. */
static int keep_builder(const struct KinetoPlugin_TraceBuilder *tb,
                        const struct BrokenSession *s) {
  (void)s;
  kept_builder = *tb;
  have_kept_builder = true;
  return 0;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, keep_builder);
}

static int destroy(struct KinetoPlugin_ProfilerDestroy_Params *params) {
  if (have_kept_builder && params != NULL && params->pProfilerHandle != NULL) {
    const struct BrokenSession *s = (const struct BrokenSession *)params->pProfilerHandle;
    struct KinetoPlugin_ProfileEvent late = broken_kernel(s, 4, 5, 3);
    (void)kept_builder.addEvent(kept_builder.pTraceBuilderHandle, &late);
  }
  return broken_destroy(params);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  if (!broken_registry_ok(registry)) {
    return -1;
  }
  kept_registry = *registry;
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.profilerCreate = create;
  iface.profilerDestroy = destroy;
  return broken_register_one(registry, &iface);
}
