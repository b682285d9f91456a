/*
 * invalid_type_flood.c -- BROKEN: 100,000 addEvent calls, each with a different invalid type.
 *
 * "InvalidTypeFlood" (CONCURRENT_KERNEL) emits valid_kernel, then 100,000 events of types
 * 1000, 1001, ... (none valid), then after_broken_call with the code of the last of them.
 *
 * Expected host behaviour: each call is refused (-1); the problem is reported once, as a
 * count with the first few examples, not once per call or per distinct value.
 */
#include "broken_plugin.h"

#define FLOOD_EVENTS 100000

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "InvalidTypeFlood");
}

static int flood(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  int rc = 0;
  for (int i = 0; i < FLOOD_EVENTS; i++) {
    struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 3, 4, 3);
    event.eventType = (BrokenEventType)(1000 + i); /* the defect */
    rc = tb->addEvent(tb->pTraceBuilderHandle, &event);
  }
  return rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, flood);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
