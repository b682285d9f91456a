/*
 * missing_register.c -- BROKEN: the library has no KinetoPlugin_register symbol.
 *
 * It defines KinetoPlugin_Register (capital R), an easy typo: the dynamic linker's lookup is
 * case-sensitive, so dlsym(handle, "KinetoPlugin_register") finds nothing. The misspelled
 * function would register a working profiler, "MissingRegister", if it were ever called.
 *
 * Expected host behaviour (docs/plugin-abi.md section 2): the symbol lookup fails, the host logs
 * it, closes the library and skips it; no profiler is registered.
 */
#include "broken_plugin.h"

static int query(struct KinetoPlugin_ProfilerQuery_Params *params) {
  return broken_query_kernels(params, "MissingRegister");
}

static int process(struct KinetoPlugin_ProfilerProcessEvents_Params *params) {
  const struct KinetoPlugin_TraceBuilder *tb = NULL;
  const struct BrokenSession *s = broken_process_args(params, &tb);
  return s == NULL ? -1 : broken_emit_valid_before(tb, s);
}

/* Exported like the real entry point, but under the wrong name. */
OMNIPROF_PLUGIN_EXPORT int KinetoPlugin_Register(const struct KinetoPlugin_Registry *registry);

int KinetoPlugin_Register(const struct KinetoPlugin_Registry *registry) {
  struct KinetoPlugin_ProfilerInterface iface = broken_interface(query, process);
  return broken_register_one(registry, &iface);
}
