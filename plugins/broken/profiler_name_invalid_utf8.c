/*
 * profiler_name_invalid_utf8.c -- BROKEN: profilerQuery writes a name that is not UTF-8.
 *
 * The name is "Bad" 0xFF 0xFE "Name" (NUL-terminated): 0xFF and 0xFE never occur in UTF-8.
 * The types (CONCURRENT_KERNEL) and the rest of the profiler are valid: its sessions emit
 * the usual valid_kernel, after_broken_call pair (broken_call_rc 0).
 *
 * Expected host behaviour (docs/plugin-abi.md defect 9): the name must be valid UTF-8, so the
 * host rejects it: the profiler is disabled or named "N/A" (a host may instead repair the
 * name lossily, "Bad\uFFFD\uFFFDName"); invalid UTF-8 never reaches a trace or a log as is.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "Bad\xff\xfeName"); /* the defect */
}

static int nothing(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  (void)tb;
  (void)s;
  return 0;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, nothing);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
