/*
 * event_end_before_start.c -- BROKEN: an event whose end is before its start.
 *
 * "EndBeforeStart" (CONCURRENT_KERNEL) emits valid_kernel, then the kernel
 * "reversed_kernel" (id 3) starting 6/10 and ending 4/10 of the way through its start
 * bracket (both inside the capture window), then after_broken_call with the code of that
 * addEvent in broken_call_rc.
 *
 * Expected host behaviour (docs/plugin-abi.md defect 11): accepted (addEvent returns 0, so
 * broken_call_rc is 0), its duration clamped to 0 and the clamp counted; the trace stays
 * loadable. Both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "EndBeforeStart");
}

static int reversed(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 6, 4, 3);
  return broken_add_named(tb, &event, "reversed_kernel");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, reversed);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
