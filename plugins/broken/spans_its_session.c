/*
 * spans_its_session.c -- *valid*: timestamps its events across its own session, as a device
 * whose work runs while the host profiles does.
 *
 * "SpansItsSession" (CONCURRENT_KERNEL). profilerStart records the time it was called and
 * profilerStop the time it was called (CLOCK_REALTIME, no waiting); processEvents emits up to
 * 8 kernels "span_kernel" (event id 0: no host op launched them), the k-th from k ms to
 * k + 1/2 ms after start, each only if it ended before stop: a device's work timestamped as
 * it ran during the session.
 *
 * Expected host behaviour: each call into a plugin runs on a thread of its own, so start is
 * called a little after the capture window opens and stop a little after it closes. In a
 * session of 20 ms of host work (`omniprof plugins check`) all 8 kernels lie inside the
 * window: PASS with 8 events. (In the ~1.5 ms session the check once ran, only the first
 * two were emitted, or they fell after the window.)
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "SpansItsSession");
}

static int start(struct KinetoPlugin_ProfilerStart_Params *params) {
  if (!BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_START_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  struct BrokenSession *session = (struct BrokenSession *)params->pProfilerHandle;
  session->beginNs = broken_now_ns();
  session->started = true;
  return 0;
}

static int stop(struct KinetoPlugin_ProfilerStop_Params *params) {
  if (!BROKEN_HOST_STRUCT_OK(params, KINETO_PLUGIN_PROFILER_STOP_PARAMS_UNPADDED_STRUCT_SIZE) ||
      params->pProfilerHandle == NULL) {
    return -1;
  }
  struct BrokenSession *session = (struct BrokenSession *)params->pProfilerHandle;
  session->endNs = broken_now_ns();
  return 0;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  if (s == NULL) {
    return -1;
  }
  const int64_t ms = INT64_C(1000000);
  for (int64_t k = 0; k < 8 && s->beginNs + k * ms + ms / 2 <= s->endNs; k++) {
    struct KinetoPlugin_ProfileEvent event =
        broken_event(KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL, s->beginNs + k * ms,
                     s->beginNs + k * ms + ms / 2, 0);
    int rc = broken_add_named(tb, &event, "span_kernel");
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  iface.profilerStart = start;
  iface.profilerStop = stop;
  return broken_register_one(registry, &iface);
}
