/*
 * handle_misuse.c -- BROKEN: calls the registry and the trace builder from another thread
 * and after the call that handed them out returned.
 *
 * "HandleMisuse" (CONCURRENT_KERNEL). KinetoPlugin_register keeps a copy of the registry,
 * registers its profiler, then calls registerProfiler again from a thread of its own
 * (joined). profilerCreate calls registerProfiler through the kept copy, after registration
 * returned. processEvents emits valid_kernel; calls addEvent from a thread of its own
 * (joined) with the builder it was given; calls addEvent and setLastEventName through the
 * copy of the builder kept from the previous processEvents (none in the first session); then
 * emits after_broken_call with broken_call_rc = the other thread's addEvent code and the
 * metadata late_builder_rc (the late addEvent's code, 1 in the first session),
 * thread_registry_rc and late_registry_rc (the codes of the two misused registerProfiler
 * calls).
 *
 * Expected host behaviour: every misused call is refused (-1) and counted without touching
 * host memory; nothing crashes; both valid kernels survive.
 */
#include "broken_plugin.h"

#include <pthread.h>

static struct KinetoPlugin_Registry kept_registry;
static struct KinetoPlugin_TraceBuilder kept_builder;
static bool have_kept_builder;
static int thread_registry_rc = 1;
static int late_registry_rc = 1;

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HandleMisuse");
}

static int create(struct KinetoPlugin_ProfilerCreate_Params *params) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, NULL);
  late_registry_rc = kept_registry.registerProfiler(kept_registry.pRegistryHandle, &iface);
  return broken_create(params);
}

/* A call made from a thread of the plugin's own. */
struct ThreadCall {
  const struct KinetoPlugin_TraceBuilder *tb;
  struct KinetoPlugin_ProfileEvent event;
  int rc;
};

static void *add_from_thread(void *arg) {
  struct ThreadCall *call = arg;
  call->rc = call->tb->addEvent(call->tb->pTraceBuilderHandle, &call->event);
  return NULL;
}

static void *register_from_thread(void *arg) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, NULL);
  *(int *)arg = kept_registry.registerProfiler(kept_registry.pRegistryHandle, &iface);
  return NULL;
}

/* The late addEvent's code, for after_broken_call's metadata. */
static int late_builder_rc = 1;

/* The misused builder calls: addEvent from another thread (its code is returned), then
 * addEvent and setLastEventName through the previous session's builder. */
static int misuse(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  struct ThreadCall call = {tb, broken_kernel(s, 3, 4, 3), 1};
  pthread_t thread;
  if (pthread_create(&thread, NULL, add_from_thread, &call) != 0) {
    return -12;
  }
  pthread_join(thread, NULL);
  late_builder_rc = 1;
  if (have_kept_builder) {
    struct KinetoPlugin_ProfileEvent late = broken_kernel(s, 5, 6, 4);
    late_builder_rc = kept_builder.addEvent(kept_builder.pTraceBuilderHandle, &late);
    int named = kept_builder.setLastEventName(kept_builder.pTraceBuilderHandle, "late_kernel");
    if (named != -1) {
      late_builder_rc = named;
    }
  }
  kept_builder = *tb;
  have_kept_builder = true;
  return call.rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  int rc = broken_process_around(params, misuse);
  /* after_broken_call, the last event, also carries the other misused calls' codes. */
  const struct KinetoPlugin_TraceBuilder *tb = params->pTraceBuilder;
  char text[16];
  const char *keys[] = {"late_builder_rc", "thread_registry_rc", "late_registry_rc"};
  int codes[] = {late_builder_rc, thread_registry_rc, late_registry_rc};
  for (size_t i = 0; rc == 0 && i < 3; i++) {
    snprintf(text, sizeof text, "%d", codes[i]);
    rc = tb->addLastEventMetadata(tb->pTraceBuilderHandle, keys[i], text);
  }
  return rc;
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  if (!broken_registry_ok(registry)) {
    return -1;
  }
  kept_registry = *registry;
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.profilerCreate = create;
  int rc = broken_register_one(registry, &iface);
  pthread_t thread;
  if (rc == 0 && pthread_create(&thread, NULL, register_from_thread, &thread_registry_rc) == 0) {
    pthread_join(thread, NULL);
  }
  return rc;
}
