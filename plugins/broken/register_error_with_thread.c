/*
 * register_error_with_thread.c -- BROKEN: starts a thread running its own code, then fails
 * registration (returns -7).
 *
 * The thread wakes every millisecond in this library's code, for as long as the process
 * runs. A host that unloads the library after the failed registration unmaps that code
 * under the running thread, which then crashes the process.
 *
 * Expected host behaviour: the error is reported with -7 and the library is skipped, but a
 * library that was loaded is never unloaded, so the thread runs on harmlessly.
 */
#include "broken_plugin.h"

#include <pthread.h>

static volatile unsigned long ticks;

static void *tick_forever(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    ticks++;
  }
  return NULL;
}

int KinetoPlugin_register(const struct KinetoPlugin_Registry *registry) {
  (void)registry;
  pthread_t thread;
  if (pthread_create(&thread, NULL, tick_forever, NULL) == 0) {
    pthread_detach(thread);
  }
  return -7; /* the defect, after the thread started */
}
