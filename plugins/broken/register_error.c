/*
 * register_error.c -- BROKEN: KinetoPlugin_register returns -7 and registers nothing.
 *
 * A plugin whose initialization failed (say, no device found) reports it through the entry
 * point's return code.
 *
 * Expected host behaviour (docs/plugin-abi.md section 2): the host logs the error with the code
 * -7, closes the library and skips it; no profiler is registered.
 */
#include "omniprof_plugin.h"

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  (void)registry;
  return -7;
}
