/*
 * hangs.c -- BROKEN: five profilers, each blocking for good in one call.
 *
 * "HangInCreate", "HangInStart", "HangInStop", "HangInProcessEvents" and "HangInDestroy"
 * (CONCURRENT_KERNEL) behave as the skeleton except that the named call never returns (it
 * sleeps in a loop). Before blocking, processEvents of "HangInProcessEvents" emits
 * valid_kernel; "HangInDestroy" emits valid_kernel and after_broken_call (rc 0) normally.
 *
 * Expected host behaviour: every call into a plugin runs under a deadline; past it the
 * profiler is abandoned (its thread left blocked, the library kept loaded), named in the
 * session's errors and the trace metadata, and never called again; the host's own trace and
 * the other profilers go on.
 */
#include "broken_plugin.h"

/* Blocks the calling thread for good. */
static int hang(void) {
  for (;;) {
    struct timespec second = {1, 0};
    nanosleep(&second, NULL);
  }
  return -1;
}

static int query_create(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HangInCreate");
}
static int query_start(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HangInStart");
}
static int query_stop(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HangInStop");
}
static int query_process(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HangInProcessEvents");
}
static int query_destroy(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HangInDestroy");
}

static int create_hangs(struct KinetoPlugin_ProfilerCreate_Params *params) {
  (void)params;
  return hang();
}
static int start_hangs(struct KinetoPlugin_ProfilerStart_Params *params) {
  (void)params;
  return hang();
}
static int stop_hangs(struct KinetoPlugin_ProfilerStop_Params *params) {
  (void)params;
  return hang();
}
static int destroy_hangs(struct KinetoPlugin_ProfilerDestroy_Params *params) {
  (void)params;
  return hang();
}

static int no_call(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  (void)tb;
  (void)s;
  return 0;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, no_call);
}

static int process_hangs(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s != NULL) {
    broken_emit_valid_before(tb, s);
  }
  return hang();
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface ifaces[5];
  ifaces[0] = broken_interface(query_create, process);
  ifaces[0].profilerCreate = create_hangs;
  ifaces[1] = broken_interface(query_start, process);
  ifaces[1].profilerStart = start_hangs;
  ifaces[2] = broken_interface(query_stop, process);
  ifaces[2].profilerStop = stop_hangs;
  ifaces[3] = broken_interface(query_process, process_hangs);
  ifaces[4] = broken_interface(query_destroy, process);
  ifaces[4].profilerDestroy = destroy_hangs;
  for (size_t i = 0; i < 5; i++) {
    int rc = broken_register_one(registry, &ifaces[i]);
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}
