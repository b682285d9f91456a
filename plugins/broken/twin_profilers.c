/*
 * twin_profilers.c -- VALID: one library registering two profilers, "TwinA" and "TwinB".
 *
 * Both record CONCURRENT_KERNEL. Each session emits one valid kernel in its start bracket:
 * TwinA "twin_a_kernel" (id 1, device 0, resource 1), TwinB "twin_b_kernel" (id 2,
 * device 0, resource 2).
 *
 * Expected host behaviour (docs/plugin-abi.md section 2): two profilers from one library, each
 * queried, created, started, stopped and processed independently; both kernels appear.
 */
#include "broken_plugin.h"

static int query_a(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "TwinA");
}

static int query_b(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "TwinB");
}

/* Emits one kernel named `name` with `id` on `resource`. */
static int emit(struct KinetoPlugin_ProfilerProcessEvents_Params *params, const char *name,
                int64_t id, int32_t resource) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s == NULL) {
    return -1;
  }
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 2, 6, id);
  event.resourceId = resource;
  return broken_add_named(tb, &event, name);
}

static int process_a(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return emit(params, "twin_a_kernel", 1, 1);
}

static int process_b(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return emit(params, "twin_b_kernel", 2, 2);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface a = broken_interface(query_a, process_a);
  struct KinetoPlugin_ProfilerInterface b = broken_interface(query_b, process_b);
  int rc_a = broken_register_one(registry, &a);
  int rc_b = broken_register_one(registry, &b);
  return rc_a != 0 ? rc_a : rc_b;
}
