/*
 * counter_non_numeric.c -- BROKEN: a counter sample whose value is not a JSON number.
 *
 * "NonNumericCounter" records GPU_PM_COUNTER and CONCURRENT_KERNEL. processEvents emits
 * valid_kernel, then three GPU_PM_COUNTER samples named "sm_activity" on (device 0,
 * resource 1), at 3/10, 5/10 and 7/10 of its start bracket, each with one metadata pair:
 *   sm_active_pct = 42          valid
 *   sm_active_pct = "high"      the defect: a JSON string, not a number
 *   sm_active_pct = 58          valid
 * then after_broken_call, whose broken_call_rc is the code addLastEventMetadata returned
 * for "high".
 *
 * Expected host behaviour (docs/plugin-abi.md defect 15): the non-numeric value is dropped and
 * counted (at addLastEventMetadata, which may then return -1, or when the counter is
 * written); the two numeric samples form the sm_activity series; both kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  static const BrokenEventType kTypes[] = {KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER,
                                           KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL};
  return broken_query(params, "NonNumericCounter", kTypes, 2);
}

/* One sm_activity sample at `num`/10 of the bracket; the metadata call's code. */
static int sample(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s,
                  int64_t num, const char *value) {
  int64_t t = broken_at(s, num, 10);
  struct KinetoPlugin_ProfileEvent event =
      broken_event(KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER, t, t, 0);
  int rc = broken_add_named(tb, &event, "sm_activity");
  if (rc != 0) {
    return rc;
  }
  return tb->addLastEventMetadata(tb->pTraceBuilderHandle, "sm_active_pct", value);
}

static int counters(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  sample(tb, s, 3, "42");
  int broken = sample(tb, s, 5, "\"high\""); /* the defect */
  sample(tb, s, 7, "58");
  return broken;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, counters);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
