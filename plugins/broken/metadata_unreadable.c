/*
 * metadata_unreadable.c -- BROKEN: metadata that parses nowhere or nests without end.
 *
 * "UnreadableMetadata" (CONCURRENT_KERNEL) emits valid_kernel with the metadata
 * huge = 1e400, tiny = -1e400 (beyond a double), surrogate = "\ud800" (a lone surrogate),
 * deep = 40 nested lists and abyss = 100,000 nested lists; then after_broken_call with the
 * code the host returned for abyss.
 *
 * Expected host behaviour: only metadata every reader reads reaches the trace (omniprof's
 * reader, Python's json, Perfetto). The numbers and the surrogate are refused or kept as
 * strings; the nested values are refused (-1), counted, and never written.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "UnreadableMetadata");
}

/* `depth` nested empty lists, or NULL when out of memory. */
static char *nested(size_t depth) {
  char *text = malloc(2 * depth + 1);
  if (text != NULL) {
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[2 * depth] = '\0';
  }
  return text;
}

static int unreadable(const struct KinetoPlugin_TraceBuilder *tb, const struct BrokenSession *s) {
  (void)s;
  /* The calls land on valid_kernel, the last event added. */
  tb->addLastEventMetadata(tb->pTraceBuilderHandle, "huge", "1e400");
  tb->addLastEventMetadata(tb->pTraceBuilderHandle, "tiny", "-1e400");
  tb->addLastEventMetadata(tb->pTraceBuilderHandle, "surrogate", "\"\\ud800\"");
  char *deep = nested(40);
  char *abyss = nested(100000);
  if (deep == NULL || abyss == NULL) {
    free(deep);
    free(abyss);
    return -12;
  }
  tb->addLastEventMetadata(tb->pTraceBuilderHandle, "deep", deep);
  int rc = tb->addLastEventMetadata(tb->pTraceBuilderHandle, "abyss", abyss);
  free(deep);
  free(abyss);
  return rc;
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  return broken_process_around(params, unreadable);
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
