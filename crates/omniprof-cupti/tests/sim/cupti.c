/* A simulated CUPTI for tests/simulated.rs: the activity API's functions, with the
 * signatures and record layouts of the installed CUPTI headers, over a pretend runtime.
 * `sim_launch` plays a runtime call on the calling thread: an API record, the external ids
 * pushed on that thread, and (for a kernel) the kernel's record, all kept until a flush hands
 * them to the buffers omniprof lends, as CUPTI does. `sim_external_calls` counts the pushes
 * and pops of external ids made so far. Environment: SIM_CUPTI_VERSION (cuptiGetVersion's
 * answer, default CUPTI_API_VERSION). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_version.h>

#if CUPTI_API_VERSION >= 130101
typedef CUpti_ActivityKernel11 Kernel;
#elif CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 Kernel;
#else
typedef CUpti_ActivityKernel9 Kernel;
#endif

#define SUCCESS CUPTI_SUCCESS
#define MAX_PENDING (1 << 16)
#define STACK 64

static CUpti_BuffersCallbackRequestFunc request_cb;
static CUpti_BuffersCallbackCompleteFunc complete_cb;
static int enabled[64];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Records not yet flushed, each rounded up to 8 bytes. */
static unsigned char* pending;
static size_t pending_len;
static size_t dropped_next;
static uint32_t next_correlation = 1;

/* Per-call recording (cuptiActivityEnableRuntimeApi/DriverApi): -1 off, 1 on, 0 as the kind. */
static int runtime_pick[1024];
static int driver_pick[1024];
static size_t api_records;
static size_t external_calls;

static __thread uint64_t stacks[6][STACK];
static __thread int depth[6];

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t record_size(const CUpti_Activity* r) {
  size_t n;
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: n = sizeof(Kernel); break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: n = sizeof(CUpti_ActivityAPI); break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: n = sizeof(CUpti_ActivityExternalCorrelation); break;
    default: n = 8; break;
  }
  return (n + 7) & ~(size_t)7;
}

static void keep(const void* record, size_t n) {
  if (!pending) pending = malloc(MAX_PENDING * 64);
  size_t rounded = (n + 7) & ~(size_t)7;
  memset(pending + pending_len, 0, rounded);
  memcpy(pending + pending_len, record, n);
  pending_len += rounded;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  const char* v = getenv("SIM_CUPTI_VERSION");
  *version = v ? (uint32_t)strtoul(v, NULL, 10) : CUPTI_API_VERSION;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_SIMULATED";
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  request_cb = request;
  complete_cb = complete;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  enabled[kind & 63] = 1;
  /* As CUPTI documents: enabling the kind overrides per-call settings made before. */
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) memset(runtime_pick, 0, sizeof runtime_pick);
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) memset(driver_pick, 0, sizeof driver_pick);
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  runtime_pick[cbid & 1023] = enable ? 1 : -1;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  driver_pick[cbid & 1023] = enable ? 1 : -1;
  return SUCCESS;
}

static int recorded(int kind_on, int pick) { return pick == 1 || (pick == 0 && kind_on); }

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  enabled[kind & 63] = 0;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  pthread_mutex_lock(&lock);
  size_t at = 0;
  while (at < pending_len) {
    uint8_t* buffer = NULL;
    size_t size = 0, max = 0;
    request_cb(&buffer, &size, &max);
    size_t used = 0;
    while (at + used < pending_len) {
      size_t n = record_size((const CUpti_Activity*)(pending + at + used));
      if (used + n > size) break;
      used += n;
    }
    if (buffer) memcpy(buffer, pending + at, used);
    complete_cb(NULL, 0, buffer, size, buffer ? used : 0);
    at += used ? used : pending_len - at;
  }
  pending_len = 0;
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* next = *record ? (uint8_t*)*record + record_size(*record) : buffer;
  if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity*)next;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream, size_t* dropped) {
  (void)context;
  (void)stream;
  *dropped = dropped_next;
  dropped_next = 0;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  __atomic_fetch_add(&external_calls, 1, __ATOMIC_RELAXED);
  if (depth[kind] < STACK) stacks[kind][depth[kind]] = id;
  depth[kind]++;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  __atomic_fetch_add(&external_calls, 1, __ATOMIC_RELAXED);
  if (depth[kind] == 0) return CUPTI_ERROR_QUEUE_EMPTY;
  depth[kind]--;
  if (last) *last = depth[kind] < STACK ? stacks[kind][depth[kind]] : 0;
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = now();
  return SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 211) *name = "cudaLaunchKernel_v7000";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 165) *name = "cudaDeviceSynchronize_v3020";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 17) *name = "cudaGetDevice_v3020";
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 307) *name = "cuLaunchKernel";
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 9) *name = "cuCtxGetCurrent";
  else return CUPTI_ERROR_INVALID_PARAMETER;
  return SUCCESS;
}

/* The pretend runtime. A call `cbid` of the runtime (or with `driver`, of the driver) on
 * the calling thread, which launches a kernel `name` (mangled) of `duration_ns` on `stream`
 * when `name` is not null. Its record says it ran from `start` to `end` (CUPTI's clock),
 * or, where they are 0, from its entry to its return. */
static void call(int driver, uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns,
                 uint64_t start, uint64_t end) {
  if (!start) start = now();
  pthread_mutex_lock(&lock);
  uint32_t correlation = next_correlation++;
  CUpti_ActivityAPI api;
  memset(&api, 0, sizeof api);
  api.kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = cbid;
  api.start = start;
  api.processId = 1;
  api.threadId = (uint32_t)pthread_self();
  api.correlationId = correlation;
  int on = driver ? recorded(enabled[CUPTI_ACTIVITY_KIND_DRIVER], driver_pick[cbid & 1023])
                  : recorded(enabled[CUPTI_ACTIVITY_KIND_RUNTIME], runtime_pick[cbid & 1023]);
  CUpti_ExternalCorrelationKind kinds[2] = {CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                             CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1};
  for (int i = 0; i < 2; i++) {
    int d = depth[kinds[i]];
    if (d == 0 || d > STACK || !enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) continue;
    CUpti_ActivityExternalCorrelation e;
    memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = kinds[i];
    e.externalId = stacks[kinds[i]][d - 1];
    e.correlationId = correlation;
    keep(&e, sizeof e);
  }
  if (name && enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) {
    Kernel k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.registersPerThread = 32;
    k.start = start + 5000;
    k.end = k.start + duration_ns;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = stream;
    k.gridX = 264;
    k.gridY = k.gridZ = 1;
    k.blockX = 256;
    k.blockY = k.blockZ = 1;
    k.correlationId = correlation;
    k.name = name;
    keep(&k, sizeof k);
  }
  api.end = end ? end : now();
  if (on) {
    keep(&api, sizeof api);
    api_records++;
  }
  pthread_mutex_unlock(&lock);
}

void sim_launch(uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns) {
  call(0, cbid, name, stream, duration_ns, 0, 0);
}

void sim_driver_call(uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns) {
  call(1, cbid, name, stream, duration_ns, 0, 0);
}

/* A runtime launch whose record says it ran from `start` to `end` (CUPTI's clock). */
void sim_launch_at(uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns,
                   uint64_t start, uint64_t end) {
  call(0, cbid, name, stream, duration_ns, start, end);
}

/* CUPTI's clock now, as cuptiGetTimestamp reads it. */
uint64_t sim_now(void) { return now(); }

/* Pushes and pops of external correlation ids made so far, on every thread. */
size_t sim_external_calls(void) { return __atomic_load_n(&external_calls, __ATOMIC_RELAXED); }

/* API records made so far (not left out at the source). */
size_t sim_api_records(void) { return api_records; }

/* The next ask for dropped records answers `n`. */
void sim_drop(size_t n) { dropped_next = n; }
