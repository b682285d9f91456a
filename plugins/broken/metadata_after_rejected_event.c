/*
 * metadata_after_rejected_event.c -- BROKEN: annotates an event the host rejected.
 *
 * "MetadataAfterRejected" records CONCURRENT_KERNEL. processEvents emits valid_kernel, then
 * an otherwise complete event (id 3) with eventType 99, then, as if it had been accepted,
 * addLastEventMetadata("rejected_event_key", "1"), then after_broken_call, whose metadata
 * broken_call_rc is that addLastEventMetadata's code.
 *
 * Expected host behaviour: addEvent returns -1; addLastEventMetadata returns -1 too, and the
 * problem reported names the rejected addEvent (not "before any addEvent", as earlier
 * events were accepted); valid_kernel does not get the key; both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "MetadataAfterRejected");
}

static int annotate_rejected(const struct KinetoPlugin_TraceBuilder *tb,
                             const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 4, 5, 3);
  event.eventType = (enum KinetoPlugin_ProfileEventType)99;
  tb->addEvent(tb->pTraceBuilderHandle, &event);
  /* the defect: the code above is ignored */
  return tb->addLastEventMetadata(tb->pTraceBuilderHandle, "rejected_event_key", "1");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, annotate_rejected);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
