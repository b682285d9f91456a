/*
 * foreign_ids.c -- BROKEN: event ids of its own instead of the ids the host pushed.
 *
 * "ForeignIds" (PRIVATEUSE1_RUNTIME, CONCURRENT_KERNEL) has push and pop correlation entries
 * that do nothing, and its processEvents emits, with the id 42 whatever was pushed:
 * "foreign_launch" (PRIVATEUSE1_RUNTIME, device 0, resource 4242) in the first half of the
 * start bracket and "foreign_kernel" (CONCURRENT_KERNEL, device 0, resource 1) in the
 * second half.
 *
 * Expected host behaviour: a host whose op with correlation id 42 ran at another time, or on
 * another thread, does not link either event to that op: the launch lies outside the op, so
 * the link is refused and counted (the trace's refused_links and backend_warnings), and
 * `omniprof plugins check` says WARN.
 */
#include "broken_plugin.h"

#define FOREIGN_ID 42

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  static const BrokenEventType kTypes[] = {
      KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME,
      KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL,
  };
  return broken_query(params, "ForeignIds", kTypes, 2);
}

static int ignore_push(struct KinetoPlugin_ProfilerPushCorrelationId_Params *params) {
  (void)params; /* the defect: the pushed id is not kept */
  return 0;
}

static int ignore_pop(struct KinetoPlugin_ProfilerPopCorrelationId_Params *params) {
  (void)params;
  return 0;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s == NULL) {
    return -1;
  }
  struct KinetoPlugin_ProfileEvent launch =
      broken_event(KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME, broken_at(s, 1, 10),
                   broken_at(s, 4, 10), FOREIGN_ID);
  launch.resourceId = 4242;
  int rc = broken_add_named(tb, &launch, "foreign_launch");
  if (rc != 0) {
    return rc;
  }
  struct KinetoPlugin_ProfileEvent kernel = broken_kernel(s, 6, 9, FOREIGN_ID);
  return broken_add_named(tb, &kernel, "foreign_kernel");
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.profilerPushCorrelationId = ignore_push;
  iface.profilerPopCorrelationId = ignore_pop;
  return broken_register_one(registry, &iface);
}
