/*
 * event_too_small.c -- BROKEN: addEvent with an event declaring unpaddedStructSize 24.
 *
 * 24 is the size of the ProcessEvents parameters, which Kineto compared against instead of
 * the event's 48 (docs/plugin-abi.md, defect 1). "EventTooSmall" (CONCURRENT_KERNEL) emits
 * valid_kernel, then a complete 48-byte event (id 3) whose size field says 24, named
 * "truncated_event" only if the host accepts it, then after_broken_call with addEvent's code
 * in broken_call_rc.
 *
 * Expected host behaviour (docs/plugin-abi.md defect 1): an event smaller than 48 bytes is
 * rejected: addEvent returns -1, broken_call_rc is -1, both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "EventTooSmall");
}

static int too_small(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 4, 5, 3);
  event.unpaddedStructSize = 24; /* the defect */
  int rc = tb->addEvent(tb->pTraceBuilderHandle, &event);
  if (rc == 0) {
    tb->setLastEventName(tb->pTraceBuilderHandle, "truncated_event");
  }
  return rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, too_small);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
