/* A simulated CUDA driver (libcuda.so.1) for tests/simulated.rs: one device with an H100's
 * limits, named "Simulated GPU". Only the calls omniprof's CUPTI backend makes. */
#include <string.h>

typedef int CUresult;
typedef int CUdevice;

CUresult cuInit(unsigned int flags) { (void)flags; return 0; }

CUresult cuDeviceGetCount(int* count) { *count = 1; return 0; }

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *device = 0;
  return 0;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  (void)device;
  strncpy(name, "Simulated GPU", (size_t)len - 1);
  name[len - 1] = 0;
  return 0;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  (void)device;
  *bytes = (size_t)80 << 30;
  return 0;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  (void)device;
  switch (attribute) {
    case 1: *value = 1024; break;    /* max threads per block */
    case 8: *value = 49152; break;   /* shared memory per block */
    case 10: *value = 32; break;     /* warp size */
    case 12: *value = 65536; break;  /* registers per block */
    case 16: *value = 132; break;    /* multiprocessors */
    case 39: *value = 2048; break;   /* max threads per multiprocessor */
    case 75: *value = 9; break;      /* compute capability */
    case 76: *value = 0; break;
    case 81: *value = 233472; break; /* shared memory per multiprocessor */
    case 82: *value = 65536; break;  /* registers per multiprocessor */
    case 97: *value = 232448; break; /* opt-in shared memory per block */
    case 106: *value = 32; break;    /* max blocks per multiprocessor */
    default: return 1;
  }
  return 0;
}

CUresult cuDriverGetVersion(int* version) { *version = 13000; return 0; }
