/* A simulated CUPTI for tests/simulated.rs: the activity API's functions, with the
 * signatures and record layouts of the installed CUPTI headers, over a pretend runtime.
 * `sim_launch` plays a runtime call on the calling thread: an API record, the external ids
 * pushed on that thread, and (for a kernel) the kernel's record, all kept until a flush hands
 * them to the buffers omniprof lends, as CUPTI does. `sim_memcpy`, `sim_memset` and
 * `sim_sync` play calls that copy, set or wait (a copy's, set's or synchronization's record
 * beside the call's), `sim_event_record` a `cudaEventRecord` (the event's record beside the
 * call's), and `sim_overhead` CUPTI's own overhead: every kind of record omniprof reads.
 * `sim_external_calls` counts the pushes and pops of external ids made so far. Environment:
 * SIM_CUPTI_VERSION (cuptiGetVersion's answer, default CUPTI_API_VERSION),
 * SIM_CUPTI_FIRST_CORRELATION (the first call's correlation id, default 1). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
/* As tests/layout.c: the versions CUPTI fills for the other kinds. */
#if CUPTI_API_VERSION >= 26
typedef CUpti_ActivityMemcpy6 Memcpy;
typedef CUpti_ActivitySynchronization2 Sync;
typedef CUpti_ActivityCudaEvent2 CudaEvent;
#else
typedef CUpti_ActivityMemcpy5 Memcpy;
typedef CUpti_ActivitySynchronization Sync;
typedef CUpti_ActivityCudaEvent CudaEvent;
#endif
typedef CUpti_ActivityMemset4 Memset;
typedef CUpti_ActivityOverhead3 Overhead;

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
    case CUPTI_ACTIVITY_KIND_MEMCPY: n = sizeof(Memcpy); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: n = sizeof(Memset); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: n = sizeof(Sync); break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: n = sizeof(Overhead); break;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: n = sizeof(CudaEvent); break;
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
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 41) *name = "cudaMemcpyAsync_v3020";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 51) *name = "cudaMemsetAsync_v3020";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 131) *name = "cudaStreamSynchronize_v3020";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 135) *name = "cudaEventRecord_v3020";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 137) *name = "cudaEventSynchronize_v3020";
  else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 147) *name = "cudaStreamWaitEvent_v3020";
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 307) *name = "cuLaunchKernel";
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 9) *name = "cuCtxGetCurrent";
  else return CUPTI_ERROR_INVALID_PARAMETER;
  return SUCCESS;
}

/* The device work a call makes, besides its API record: none, a kernel, a copy, a set, a
 * wait, of `duration_ns` on `stream` (a wait on no stream: UINT32_MAX), or an event recorded
 * on `stream`. */
typedef struct {
  CUpti_ActivityKind kind; /* CUPTI_ACTIVITY_KIND_INVALID for none */
  uint32_t stream;
  uint64_t duration_ns;
  const char* name;                  /* a kernel's (mangled) */
  uint8_t copy_kind, src_kind, dst_kind; /* a copy's */
  uint16_t memory_kind;              /* a set's */
  uint32_t value;                    /* a set's */
  uint64_t bytes;                    /* a copy's or set's */
  uint32_t sync_type, event;         /* a wait's; a recorded event's `event` */
} Work;

/* When each stream's last work ends: a stream runs its work one after the other. */
static uint64_t stream_busy_until[256];

/* Keeps `work`'s record, launched by the call of `correlation` at `start`, if its kind is on.
 * A kernel, copy or set begins 5 µs after its launch, or when its stream is free. */
static void keep_work(const Work* work, uint32_t correlation, uint64_t start) {
  if (work->kind == CUPTI_ACTIVITY_KIND_INVALID || !enabled[work->kind & 63]) return;
  uint64_t begin = start + 5000, end;
  if (work->kind == CUPTI_ACTIVITY_KIND_CUDA_EVENT) {
    CudaEvent v;
    memset(&v, 0, sizeof v);
    v.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    v.correlationId = correlation;
    v.contextId = 1;
    v.streamId = work->stream;
    v.eventId = work->event;
    keep(&v, sizeof v);
    return;
  }
  if (work->kind != CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
    uint64_t* busy = &stream_busy_until[work->stream & 255];
    if (begin < *busy) begin = *busy;
    *busy = begin + work->duration_ns;
  }
  end = begin + work->duration_ns;
  if (work->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
    Kernel k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.registersPerThread = 32;
    k.start = begin;
    k.end = end;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = work->stream;
    k.gridX = 264;
    k.gridY = k.gridZ = 1;
    k.blockX = 256;
    k.blockY = k.blockZ = 1;
    k.correlationId = correlation;
    k.name = work->name;
    keep(&k, sizeof k);
  } else if (work->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    Memcpy m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = work->copy_kind;
    m.srcKind = work->src_kind;
    m.dstKind = work->dst_kind;
    m.bytes = work->bytes;
    m.start = begin;
    m.end = end;
    m.deviceId = 0;
    m.contextId = 1;
    m.streamId = work->stream;
    m.correlationId = correlation;
    keep(&m, sizeof m);
  } else if (work->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
    Memset m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = work->value;
    m.bytes = work->bytes;
    m.start = begin;
    m.end = end;
    m.deviceId = 0;
    m.contextId = 1;
    m.streamId = work->stream;
    m.correlationId = correlation;
    m.memoryKind = work->memory_kind;
    keep(&m, sizeof m);
  } else if (work->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
    Sync y;
    memset(&y, 0, sizeof y);
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = (CUpti_ActivitySynchronizationType)work->sync_type;
    /* The host waits from within the call. */
    y.start = start + 1000;
    y.end = y.start + work->duration_ns;
    y.correlationId = correlation;
    y.contextId = 1;
    y.streamId = work->stream;
    y.cudaEventId = work->event;
    keep(&y, sizeof y);
  }
}

/* The pretend runtime. A call `cbid` of the runtime (or with `driver`, of the driver) on
 * the calling thread, which makes `work`. Its record says it ran from `start` to `end`
 * (CUPTI's clock), or, where they are 0, from its entry to its return. */
static void call(int driver, uint32_t cbid, const Work* work, uint64_t start, uint64_t end) {
  if (!start) start = now();
  pthread_mutex_lock(&lock);
  if (next_correlation == 1) {
    const char* first = getenv("SIM_CUPTI_FIRST_CORRELATION");
    if (first) next_correlation = (uint32_t)strtoul(first, NULL, 10);
  }
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
  keep_work(work, correlation, start);
  api.end = end ? end : now();
  if (on) {
    keep(&api, sizeof api);
    api_records++;
  }
  pthread_mutex_unlock(&lock);
}

/* A kernel `name` launched on `stream`, or no work where `name` is null. */
static Work kernel(const char* name, uint32_t stream, uint64_t duration_ns) {
  Work w;
  memset(&w, 0, sizeof w);
  w.kind = name ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_INVALID;
  w.name = name;
  w.stream = stream;
  w.duration_ns = duration_ns;
  return w;
}

void sim_launch(uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns) {
  Work w = kernel(name, stream, duration_ns);
  call(0, cbid, &w, 0, 0);
}

void sim_driver_call(uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns) {
  Work w = kernel(name, stream, duration_ns);
  call(1, cbid, &w, 0, 0);
}

/* A runtime launch whose record says it ran from `start` to `end` (CUPTI's clock). */
void sim_launch_at(uint32_t cbid, const char* name, uint32_t stream, uint64_t duration_ns,
                   uint64_t start, uint64_t end) {
  Work w = kernel(name, stream, duration_ns);
  call(0, cbid, &w, start, end);
}

/* A runtime call `cbid` copying `bytes` (CUpti_ActivityMemcpyKind `copy_kind`, from and to
 * CUpti_ActivityMemoryKind `src_kind` and `dst_kind`) on `stream`. */
void sim_memcpy(uint32_t cbid, uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind, uint64_t bytes,
                uint32_t stream, uint64_t duration_ns) {
  Work w = kernel(NULL, stream, duration_ns);
  w.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  w.copy_kind = copy_kind;
  w.src_kind = src_kind;
  w.dst_kind = dst_kind;
  w.bytes = bytes;
  call(0, cbid, &w, 0, 0);
}

/* A runtime call `cbid` setting `bytes` of CUpti_ActivityMemoryKind `memory_kind` to `value`
 * on `stream`. */
void sim_memset(uint32_t cbid, uint16_t memory_kind, uint32_t value, uint64_t bytes, uint32_t stream,
                uint64_t duration_ns) {
  Work w = kernel(NULL, stream, duration_ns);
  w.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  w.memory_kind = memory_kind;
  w.value = value;
  w.bytes = bytes;
  call(0, cbid, &w, 0, 0);
}

/* A runtime call `cbid` that waits `duration_ns` (CUpti_ActivitySynchronizationType
 * `sync_type`) on `stream` and CUDA event `event` (UINT32_MAX: none). */
void sim_sync(uint32_t cbid, uint32_t sync_type, uint32_t stream, uint32_t event, uint64_t duration_ns) {
  Work w = kernel(NULL, stream, duration_ns);
  w.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  w.sync_type = sync_type;
  w.event = event;
  call(0, cbid, &w, 0, 0);
}

/* A runtime call `cbid` (cudaEventRecord) recording CUDA event `event` on `stream`. */
void sim_event_record(uint32_t cbid, uint32_t stream, uint32_t event) {
  Work w = kernel(NULL, stream, 0);
  w.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  w.event = event;
  call(0, cbid, &w, 0, 0);
}

/* CUPTI's own overhead of CUpti_ActivityOverheadKind `overhead_kind` on the calling thread
 * (CUPTI_ACTIVITY_OBJECT_THREAD, this process), lasting `duration_ns` from now. */
void sim_overhead(uint32_t overhead_kind, uint64_t duration_ns) {
  pthread_mutex_lock(&lock);
  if (enabled[CUPTI_ACTIVITY_KIND_OVERHEAD]) {
    Overhead o;
    memset(&o, 0, sizeof o);
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = (CUpti_ActivityOverheadKind)overhead_kind;
    o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    o.objectId.pt.processId = (uint32_t)getpid();
    o.objectId.pt.threadId = (uint32_t)pthread_self();
    o.start = now();
    o.end = o.start + duration_ns;
    keep(&o, sizeof o);
  }
  pthread_mutex_unlock(&lock);
}

/* CUPTI's clock now, as cuptiGetTimestamp reads it. */
uint64_t sim_now(void) { return now(); }

/* Pushes and pops of external correlation ids made so far, on every thread. */
size_t sim_external_calls(void) { return __atomic_load_n(&external_calls, __ATOMIC_RELAXED); }

/* API records made so far (not left out at the source). */
size_t sim_api_records(void) { return api_records; }

/* The next ask for dropped records answers `n`. */
void sim_drop(size_t n) { dropped_next = n; }
