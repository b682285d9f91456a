/*
 * name_invalid_utf8.c -- BROKEN: an event name that is not UTF-8.
 *
 * "InvalidUtf8Name" (CONCURRENT_KERNEL) emits valid_kernel, then a valid kernel (id 3)
 * named "bad" 0xFF 0xFE "_kernel" 0xC0 0xAF 0xED 0xA0 0x80: bytes that never occur in
 * UTF-8, an overlong encoding of '/', and an encoded surrogate. Then after_broken_call with
 * setLastEventName's code in broken_call_rc.
 *
 * Expected host behaviour (docs/plugin-abi.md section 1: strings are UTF-8): the name is
 * rejected (setLastEventName returns -1, the event unnamed or dropped) or repaired lossily
 * (each bad sequence replaced by U+FFFD); invalid UTF-8 never reaches the trace file, which
 * stays valid JSON. Both valid kernels survive.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "InvalidUtf8Name");
}

static int bad_utf8(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  struct KinetoPlugin_ProfileEvent event = broken_kernel(s, 4, 5, 3);
  /* Split literals: a hex escape would otherwise swallow the letters after it. */
  return broken_add_named(tb, &event, "bad\xff\xfe" "_kernel" "\xc0\xaf" "\xed\xa0\x80");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, bad_utf8);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
