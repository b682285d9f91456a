/*
 * name_huge.c -- BROKEN: an event name of 1 MiB.
 *
 * "HugeName" (CONCURRENT_KERNEL) emits valid_kernel, then a valid kernel (id 3) named with
 * 1,048,576 'k' characters (plus the NUL), then after_broken_call with setLastEventName's
 * code in broken_call_rc (or addEvent's, or -12 if the plugin could not allocate the name).
 *
 * Expected host behaviour: nothing in the ABI limits a name's length, so the host must copy
 * it without overflowing anything. It may accept it (broken_call_rc 0, the event named in
 * full or truncated to a documented limit) or reject the name (-1); either way nothing
 * crashes and both valid kernels survive.
 */
#include "broken_plugin.h"

#define HUGE_NAME_LEN ((size_t)1 << 20)

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "HugeName");
}

static int huge_name(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  char *name = malloc(HUGE_NAME_LEN + 1);
  if (name == NULL) {
    return -12;
  }
  memset(name, 'k', HUGE_NAME_LEN);
  name[HUGE_NAME_LEN] = '\0';
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 4, 5, 3);
  int rc = broken_add_named(tb, &event, name); /* the defect */
  free(name); /* the host copied what it keeps: strings are valid only during the call */
  return rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, huge_name);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
