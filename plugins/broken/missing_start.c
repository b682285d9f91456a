/*
 * missing_start.c -- BROKEN: the required entry profilerStart is NULL.
 *
 * Everything else of "MissingStart" is valid (its processEvents would emit valid_kernel if
 * a session ever got that far).
 *
 * Expected host behaviour (docs/plugin-abi.md section 6, conformance vector "Validation: required
 * entry missing"): the profiler is disabled; configuring a trace with its types yields no
 * session for it, and profilerCreate is never called.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "MissingStart");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  return s == NULL ? -1 : broken_emit_valid_before(tb, s);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.profilerStart = NULL; /* the defect */
  return broken_register_one(registry, &iface);
}
