/*
 * event_flood.c -- BROKEN: sends 100,000 events in one processEvents call.
 *
 * "EventFlood" (CONCURRENT_KERNEL) emits valid_kernel, then 100,000 valid kernels named
 * "flood_kernel" (ids 3, 4, ...), then after_broken_call with the code of the last flood
 * addEvent.
 *
 * Expected host behaviour: a plugin gets a budget of events per trace (omniprof:
 * OMNIPROF_MAX_EVENTS_PER_BACKEND), like Kineto's device buffer limit; past it addEvent is
 * refused (-1) and each dropped event is counted and reported, so that memory stays bounded
 * whatever the plugin sends.
 */
#include "broken_plugin.h"

#define FLOOD_EVENTS 100000

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "EventFlood");
}

static int flood(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  int rc = 0;
  for (int64_t i = 0; i < FLOOD_EVENTS; i++) {
    struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 3, 4, 3 + i);
    rc = broken_add_named(tb, &event, "flood_kernel"); /* the defect: no end to it */
  }
  return rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  /* Once the budget is spent after_broken_call is refused too; the session still succeeds. */
  (void)broken_process_around(params, flood);
  return 0;
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
