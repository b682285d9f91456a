/*
 * name_null.c -- BROKEN: setLastEventName(NULL).
 *
 * "NullEventName" (CONCURRENT_KERNEL) emits valid_kernel, then adds a valid kernel (id 3)
 * and names it with a NULL pointer, then after_broken_call with setLastEventName's code in
 * broken_call_rc.
 *
 * Expected host behaviour (docs/plugin-abi.md section 5): setLastEventName returns -1 without
 * dereferencing the pointer; broken_call_rc is -1. The kernel added before the call stays
 * unnamed (the host keeps it with an empty or placeholder name, or drops it); both valid
 * kernels survive with their names.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "NullEventName");
}

static int null_name(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 4, 5, 3);
  int rc = tb->addEvent(tb->pTraceBuilderHandle, &event);
  if (rc != 0) {
    return rc;
  }
  return tb->setLastEventName(tb->pTraceBuilderHandle, NULL); /* the defect */
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, null_name);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
