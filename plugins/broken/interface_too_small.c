/*
 * interface_too_small.c -- BROKEN: the profiler interface declares unpaddedStructSize 80.
 *
 * 80 bytes is the interface without its last field, profilerProcessEvents: what a plugin
 * built against an older, smaller version of the struct would declare. Every entry is
 * actually filled in (the struct passed is the full 88-byte one), so a host that ignores the
 * size would run "TooSmallInterface" normally and see valid_kernel; a host that checks it
 * reads none of it.
 *
 * Expected host behaviour (docs/plugin-abi.md section 6): the interface is older than the oldest
 * supported, so the profiler is disabled (rejected at registration or at instantiation) and
 * never queried, created or asked for events.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "TooSmallInterface");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  return s == NULL ? -1 : broken_emit_valid_before(tb, s);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.unpaddedStructSize = 80; /* the defect: 8 bytes short of the 88 required */
  return broken_register_one(registry, &iface);
}
