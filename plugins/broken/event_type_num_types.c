/*
 * event_type_num_types.c -- BROKEN: addEvent with eventType 25,
 * KINETO_PLUGIN_PROFILE_EVENT_NUM_TYPES (the count, not a type).
 *
 * "BadEventType25" records CONCURRENT_KERNEL. processEvents emits valid_kernel, then an otherwise
 * complete event (id 3) whose eventType is 25, named "garbage_type_25" only if the host
 * accepts it, then after_broken_call, whose metadata broken_call_rc is addEvent's code.
 *
 * Expected host behaviour (docs/plugin-abi.md defect 5): addEvent returns -1 and the event is
 * dropped (and counted); Kineto silently turned it into a kernel. broken_call_rc is -1 and
 * both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "BadEventType25");
}

static int bad_type(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 4, 5, 3);
  event.eventType = (enum KinetoPlugin_ProfileEventType)25; /* the defect */
  int rc = tb->addEvent(tb->pTraceBuilderHandle, &event);
  if (rc == 0) {
    tb->setLastEventName(tb->pTraceBuilderHandle, "garbage_type_25");
  }
  return rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, bad_type);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
