/*
 * flow_too_small.c -- BROKEN: setLastEventFlow with a flow declaring unpaddedStructSize 16.
 *
 * A flow is 24 bytes in memory but 17 unpadded (its last field is a 1-byte bool); 16 cuts
 * that field off. "FlowTooSmall" (CONCURRENT_KERNEL) emits valid_kernel, then sets on it an
 * otherwise complete ac2g flow end (id 42, start point) whose size says 16, then
 * after_broken_call with setLastEventFlow's code in broken_call_rc.
 *
 * Expected host behaviour (docs/plugin-abi.md section 5): setLastEventFlow returns -1,
 * broken_call_rc is -1, valid_kernel has no flow, and both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "FlowTooSmall");
}

static int small_flow(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  (void)s;
  struct KinetoPlugin_ProfileEventFlow flow;
  memset(&flow, 0, sizeof flow);
  flow.unpaddedStructSize = 16; /* the defect: 17 required */
  flow.flowType = KINETO_PLUGIN_PROFILE_EVENT_FLOW_TYPE_ASYNC_CPU_GPU;
  flow.flowId = 42;
  flow.isStartPoint = true;
  return tb->setLastEventFlow(tb->pTraceBuilderHandle, &flow);
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, small_flow);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
