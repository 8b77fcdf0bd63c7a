/*
 * fake_cuda.c - a stand-in for the few CUDA driver calls the LD_PRELOAD shim makes.
 * Events complete at once, except those recorded from the FAKE_CUDA_HANG_FROM-th
 * record on (0-based), which never do: a collective that never finishes.
 */
#include <stdlib.h>

struct ev { long seq; };
static long g_records;

int cuInit(unsigned f) { (void)f; return 0; }
int cuDeviceGet(int* d, int ordinal) { *d = ordinal; return 0; }
int cuDevicePrimaryCtxRetain(void** ctx, int d) { (void)d; *ctx = (void*)0x1000; return 0; }
int cuCtxPushCurrent_v2(void* ctx) { (void)ctx; return 0; }
int cuCtxPopCurrent_v2(void** ctx) { *ctx = (void*)0x1000; return 0; }
int cuEventCreate(void** e, unsigned flags) {
  (void)flags;
  struct ev* v = calloc(1, sizeof *v);
  v->seq = -1;
  *e = v;
  return 0;
}
int cuEventRecord(void* e, void* stream) {
  (void)stream;
  ((struct ev*)e)->seq = __atomic_fetch_add(&g_records, 1, __ATOMIC_SEQ_CST);
  return 0;
}
int cuEventQuery(void* e) {
  const char* s = getenv("FAKE_CUDA_HANG_FROM");
  long hang = s ? atol(s) : -1;
  long seq = __atomic_load_n(&((struct ev*)e)->seq, __ATOMIC_SEQ_CST);
  return (hang >= 0 && seq >= hang) ? 600 /* CUDA_ERROR_NOT_READY */ : 0;
}
