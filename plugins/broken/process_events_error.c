/*
 * process_events_error.c -- BROKEN: profilerProcessEvents fails with -1.
 *
 * "ProcessEventsError" (CONCURRENT_KERNEL) emits valid_kernel, then returns -1 as if it had
 * lost the rest of its data.
 *
 * Expected host behaviour (docs/plugin-abi.md defect 10): the failure is reported in the
 * session's errors and the trace metadata, not only logged; the trace is still produced.
 * What was added before the failure is valid, and a host that keeps it shows valid_kernel.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "ProcessEventsError");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s == NULL) {
    return -1;
  }
  int rc = broken_emit_valid_before(tb, s);
  if (rc != 0) {
    return rc;
  }
  return -1; /* the defect */
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
