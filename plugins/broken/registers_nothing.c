/*
 * registers_nothing.c -- ODD: KinetoPlugin_register returns 0 without registering anything.
 *
 * Valid per the ABI, but useless: the library provides no profiler.
 *
 * Expected host behaviour (docs/plugin-abi.md section 2, omniprof addition): the library loads
 * without error, contributes no profiler, and the host reports a library that registered
 * nothing.
 */
#include "omniprof_plugin.h"

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  (void)registry;
  return 0;
}
