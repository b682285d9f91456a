/*
 * query_error.c -- BROKEN: profilerQuery fills in the name and types, then returns -3.
 *
 * The buffers hold a plausible answer ("QueryError", CONCURRENT_KERNEL), but the call
 * failed, so none of it can be trusted. The rest of the profiler is valid (its
 * processEvents would emit valid_kernel).
 *
 * Expected host behaviour (docs/plugin-abi.md section 7): the failure is logged and the name
 * "QueryError" is not used: Kineto names the profiler "N/A"; a stricter host disables it.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  broken_query_kernels(params, "QueryError");
  return -3; /* the defect */
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  return s == NULL ? -1 : broken_emit_valid_before(tb, s);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
