/*
 * register_error_after_register.c -- BROKEN: registers a profiler, then returns -7.
 *
 * The profiler, "RegisteredThenFailed", is complete and valid (it emits valid_kernel), but
 * the entry point fails after registerProfiler accepted it.
 *
 * Expected host behaviour: the failed entry point makes the host close the library, so it
 * must also forget every profiler the library registered during the call; keeping one would
 * leave the host holding function pointers into unmapped code. No "RegisteredThenFailed"
 * profiler exists afterwards, and nothing crashes.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "RegisteredThenFailed");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  return s == NULL ? -1 : broken_emit_valid_before(tb, s);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  int rc = broken_register_one(registry, &iface);
  (void)rc; /* whatever the host said, the entry point fails */
  return -7;
}
