/* Prints what tests/layout.rs checks omniprof's CUPTI record decoding against, from the CUPTI
 * headers this is compiled with: the API version, each record's size, the offset and size of
 * every field omniprof reads (named as in src/records.rs), and one record of each kind with
 * known values, as hex bytes. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cupti_activity.h>
#include <cupti_version.h>

/* The record versions CUPTI fills for each kind, by API version. */
#if CUPTI_API_VERSION >= 130101
typedef CUpti_ActivityKernel11 Kernel;
#elif CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 Kernel;
#else
typedef CUpti_ActivityKernel9 Kernel;
#endif
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
typedef CUpti_ActivityAPI Api;
typedef CUpti_ActivityOverhead3 Overhead;
typedef CUpti_ActivityExternalCorrelation External;

#define FIELD(record, type, field) \
  printf("field %s %s %zu %zu\n", record, #field, offsetof(type, field), sizeof(((type*)0)->field))
#define SIZE(record, type) printf("size %s %zu\n", record, sizeof(type))

static void hex(const char* record, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  printf("record %s ", record);
  for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
  printf("\n");
}

int main(void) {
  printf("version %u\n", (unsigned)CUPTI_API_VERSION);

  SIZE("kernel", Kernel);
  FIELD("kernel", Kernel, registersPerThread);
  FIELD("kernel", Kernel, start);
  FIELD("kernel", Kernel, end);
  FIELD("kernel", Kernel, deviceId);
  FIELD("kernel", Kernel, contextId);
  FIELD("kernel", Kernel, streamId);
  FIELD("kernel", Kernel, gridX);
  FIELD("kernel", Kernel, gridY);
  FIELD("kernel", Kernel, gridZ);
  FIELD("kernel", Kernel, blockX);
  FIELD("kernel", Kernel, blockY);
  FIELD("kernel", Kernel, blockZ);
  FIELD("kernel", Kernel, staticSharedMemory);
  FIELD("kernel", Kernel, dynamicSharedMemory);
  FIELD("kernel", Kernel, correlationId);
  FIELD("kernel", Kernel, name);
  FIELD("kernel", Kernel, queued);

  SIZE("memcpy", Memcpy);
  FIELD("memcpy", Memcpy, copyKind);
  FIELD("memcpy", Memcpy, srcKind);
  FIELD("memcpy", Memcpy, dstKind);
  FIELD("memcpy", Memcpy, bytes);
  FIELD("memcpy", Memcpy, start);
  FIELD("memcpy", Memcpy, end);
  FIELD("memcpy", Memcpy, deviceId);
  FIELD("memcpy", Memcpy, contextId);
  FIELD("memcpy", Memcpy, streamId);
  FIELD("memcpy", Memcpy, correlationId);

  SIZE("memset", Memset);
  FIELD("memset", Memset, value);
  FIELD("memset", Memset, bytes);
  FIELD("memset", Memset, start);
  FIELD("memset", Memset, end);
  FIELD("memset", Memset, deviceId);
  FIELD("memset", Memset, contextId);
  FIELD("memset", Memset, streamId);
  FIELD("memset", Memset, correlationId);
  FIELD("memset", Memset, memoryKind);

  SIZE("api", Api);
  FIELD("api", Api, cbid);
  FIELD("api", Api, start);
  FIELD("api", Api, end);
  FIELD("api", Api, processId);
  FIELD("api", Api, threadId);
  FIELD("api", Api, correlationId);

  SIZE("overhead", Overhead);
  FIELD("overhead", Overhead, overheadKind);
  FIELD("overhead", Overhead, objectKind);
  FIELD("overhead", Overhead, objectId);
  FIELD("overhead", Overhead, start);
  FIELD("overhead", Overhead, end);

  SIZE("sync", Sync);
  FIELD("sync", Sync, type);
  FIELD("sync", Sync, start);
  FIELD("sync", Sync, end);
  FIELD("sync", Sync, correlationId);
  FIELD("sync", Sync, contextId);
  FIELD("sync", Sync, streamId);
  FIELD("sync", Sync, cudaEventId);

  SIZE("cuda_event", CudaEvent);
  FIELD("cuda_event", CudaEvent, correlationId);
  FIELD("cuda_event", CudaEvent, contextId);
  FIELD("cuda_event", CudaEvent, streamId);
  FIELD("cuda_event", CudaEvent, eventId);

  SIZE("external", External);
  FIELD("external", External, externalKind);
  FIELD("external", External, externalId);
  FIELD("external", External, correlationId);

  /* One record of each kind, with the values tests/layout.rs expects. */
  Kernel k;
  memset(&k, 0xAB, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.registersPerThread = 40;
  k.start = 1000000001ull;
  k.end = 1000002002ull;
  k.deviceId = 1;
  k.contextId = 2;
  k.streamId = 7;
  k.gridX = 120; k.gridY = 2; k.gridZ = 1;
  k.blockX = 256; k.blockY = 1; k.blockZ = 1;
  k.staticSharedMemory = 4096;
  k.dynamicSharedMemory = 8192;
  k.correlationId = 31337;
  k.name = (const char*)(uintptr_t)0x1234567890ull;
  k.queued = 999999999ull;
  hex("kernel", &k, sizeof k);

  Memcpy m;
  memset(&m, 0xCD, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 1ull << 33;
  m.start = 5000;
  m.end = 6000;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 13;
  m.correlationId = 77;
  hex("memcpy", &m, sizeof m);

  Memset s;
  memset(&s, 0xEF, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.value = 0;
  s.bytes = 4096;
  s.start = 7000;
  s.end = 7100;
  s.deviceId = 3;
  s.contextId = 4;
  s.streamId = 21;
  s.correlationId = 78;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  hex("memset", &s, sizeof s);

  Api a;
  memset(&a, 0x11, sizeof a);
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = 211;
  a.start = 100;
  a.end = 250;
  a.processId = 4242;
  a.threadId = 0xDEADBEEFu;
  a.correlationId = 31337;
  hex("api", &a, sizeof a);

  Overhead o;
  memset(&o, 0x22, sizeof o);
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.processId = 4242;
  o.objectId.pt.threadId = 4243;
  o.start = 300;
  o.end = 400;
  hex("overhead", &o, sizeof o);

  Sync y;
  memset(&y, 0x33, sizeof y);
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = 500;
  y.end = 900;
  y.correlationId = 79;
  y.contextId = 1;
  y.streamId = 7;
  y.cudaEventId = 0xFFFFFFFFu;
  hex("sync", &y, sizeof y);

  CudaEvent v;
  memset(&v, 0x55, sizeof v);
  v.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  v.correlationId = 80;
  v.contextId = 1;
  v.streamId = 9;
  v.eventId = 3;
  hex("cuda_event", &v, sizeof v);

  External e;
  memset(&e, 0x44, sizeof e);
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = 1ull << 40;
  e.correlationId = 31337;
  hex("external", &e, sizeof e);
  return 0;
}
