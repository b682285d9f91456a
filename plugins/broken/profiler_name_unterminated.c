/*
 * profiler_name_unterminated.c -- BROKEN: profilerQuery fills the whole name buffer with 'U'
 * and writes no NUL.
 *
 * It writes profilerNameMaxLen + 1 bytes (32 with the host buffer of the ABI), staying inside
 * the buffer but leaving no terminator; the supported types (CONCURRENT_KERNEL) are fine,
 * and so is the rest of the profiler: its sessions emit the usual valid_kernel,
 * after_broken_call pair (broken_call_rc 0, there being no broken builder call).
 *
 * Expected host behaviour (docs/plugin-abi.md defect 9): the host zeroes the buffer before the
 * call and forces a NUL at index profilerNameMaxLen after it, so the name is the first 31
 * 'U's, and nothing past the buffer is read. The profiler then works normally.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  int rc = broken_query_kernels(params, "");
  if (rc == 0 && params->pProfilerName != NULL) {
    memset(params->pProfilerName, 'U', params->profilerNameMaxLen + 1); /* the defect */
  }
  return rc;
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
