/*
 * name_before_event.c -- BROKEN: setLastEventName before any addEvent.
 *
 * "NameBeforeEvent" (CONCURRENT_KERNEL) starts processEvents with
 * setLastEventName("orphan_name"), when there is no last event, and only then emits
 * valid_kernel and after_broken_call (broken_call_rc = that setLastEventName's code). The
 * order differs from the other plugins because the defect needs an empty builder.
 *
 * Expected host behaviour (docs/plugin-abi.md section 5 and its conformance vectors):
 * setLastEventName returns -1, broken_call_rc is -1, no event is named "orphan_name", and
 * both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "NameBeforeEvent");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s == NULL) {
    return -1;
  }
  int broken = tb->setLastEventName(tb->pTraceBuilderHandle, "orphan_name"); /* the defect */
  int rc = broken_emit_valid_before(tb, s);
  if (rc != 0) {
    return rc;
  }
  return broken_emit_valid_after(tb, s, broken);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
