/*
 * metadata_invalid_json.c -- BROKEN: a metadata value that is not JSON.
 *
 * Values are raw JSON inserted verbatim into the event's args, so a bad one corrupts the
 * whole trace file of a host that trusts it. "InvalidJsonMetadata" (CONCURRENT_KERNEL) emits
 * valid_kernel, then adds to it the metadata  blob = {"unclosed": [1, 2  (truncated JSON),
 * then after_broken_call with addLastEventMetadata's code in broken_call_rc.
 *
 * Expected host behaviour: the value is rejected (addLastEventMetadata returns -1) or kept
 * as a JSON string; either way the trace file stays valid JSON, valid_kernel has no
 * unparsed "blob", and both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "InvalidJsonMetadata");
}

static int bad_json(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  (void)s;
  return tb->addLastEventMetadata(tb->pTraceBuilderHandle, "blob", "{\"unclosed\": [1, 2");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, bad_json);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
