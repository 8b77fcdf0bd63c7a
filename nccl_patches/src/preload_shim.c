/*
 * preload_shim.c - the recorder for NCCL without a profiler interface (< 2.23),
 * loaded with LD_PRELOAD over the public API.
 *
 * Every exported nccl* call forwards to its pnccl* twin in the real library
 * (NCCL exports both names). Around the forward we record each enqueued
 * operation of each communicator in the same state file the profiler plugin
 * writes, and a CUDA event after it on the same stream; a poller thread queries
 * those events off the hot path and stamps completion. There is no proxy-op
 * detail here (older NCCL has no hook for it): the reader and the analysis see
 * operations, enqueue and completion times, and the heartbeat.
 *
 * CUDA is reached through the driver API, loaded with dlopen at runtime
 * (libcuda.so.1, or FORENSICS_RECORDER_CUDA_LIB), so this builds without CUDA
 * headers; the few types are declared below.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder_core.h"

/* ---- the NCCL and CUDA types we need (public, stable) ---- */
typedef int ncclResult_t;
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef void* cudaStream_t;
#define NCCL_SUCCESS 0
#define NCCL_IN_PROGRESS 7

typedef int CUresult;
typedef void* CUcontext;
typedef void* CUevent;
typedef void* CUstream;
typedef int CUdevice;
#define CUDA_SUCCESS 0
#define CU_EVENT_DISABLE_TIMING 0x2

static struct {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*primary_retain)(CUcontext*, CUdevice);
  CUresult (*push)(CUcontext);
  CUresult (*pop)(CUcontext*);
  CUresult (*event_create)(CUevent*, unsigned);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_query)(CUevent);
  int ok;
} cu;

static const char* dtype_name(ncclDataType_t t) {
  static const char* names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return (t >= 0 && t < (int)(sizeof names / sizeof names[0])) ? names[t] : "unknown";
}

enum { F_BROADCAST, F_REDUCE, F_ALLGATHER, F_REDUCESCATTER, F_ALLREDUCE, F_SEND, F_RECV, F_NFUNCS };
static const char* func_names[F_NFUNCS] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "Send",
                                           "Recv"};

/* ---- per communicator ---- */
struct shim_comm {
  struct rec_comm* rc;
  ncclComm_t comm;
  CUcontext ctx;
  CUevent* events;           /* one per ring slot, made at init */
  uint64_t* recorded;        /* index+1 of the op whose event was recorded in that slot */
  uint64_t seq[F_NFUNCS];    /* per-function counters, like NCCL's seqNumber */
  int closed;
};

#define TABLE 4096
static struct shim_comm* g_table[TABLE]; /* open addressing by comm pointer; writers hold g_lock */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static inline unsigned slot_of(ncclComm_t c) { return (unsigned)(((uintptr_t)c >> 4) * 2654435761u) % TABLE; }

static struct shim_comm* lookup(ncclComm_t c) {
  unsigned h = slot_of(c);
  for (unsigned i = 0; i < TABLE; i++) {
    struct shim_comm* s = __atomic_load_n(&g_table[(h + i) % TABLE], __ATOMIC_ACQUIRE);
    if (s == NULL) return NULL;
    if (s->comm == c && !s->closed) return s;
  }
  return NULL;
}

/* ---- forwarding ---- */
/* The real pnccl* function. RTLD_NEXT finds it when the application linked NCCL into
 * the global scope. PyTorch does not: libnccl is a dependency of libtorch_cuda, which
 * Python dlopens RTLD_LOCAL, so RTLD_NEXT finds nothing (seen on real NCCL 2.28.9: every
 * rank died of a NULL call). Then ask the loader for the NCCL already in the process
 * (RTLD_NOLOAD; FORENSICS_RECORDER_NCCL_LIB names another file). No NCCL at all is a
 * misconfiguration we cannot recover from: say so and abort, rather than crash. */
static void* real_symbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn != NULL) return fn;
  const char* lib = getenv("FORENSICS_RECORDER_NCCL_LIB");
  void* handle = dlopen(lib && *lib ? lib : "libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL && lib && *lib) handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle != NULL) fn = dlsym(handle, name);
  if (fn == NULL) {
    fprintf(stderr, "hang-forensics recorder shim: %s not found in this process's NCCL "
                    "(set FORENSICS_RECORDER_NCCL_LIB to the libnccl.so.2 in use); aborting\n", name);
    abort();
  }
  return fn;
}

#define REAL(name, ret, args)                                        \
  static ret(*real_##name) args;                                     \
  static ret(*get_##name(void)) args {                               \
    if (real_##name == NULL) real_##name = real_symbol("p" #name);   \
    return real_##name;                                              \
  }

REAL(ncclCommInitRank, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int))
REAL(ncclCommInitRankConfig, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int, void*))
REAL(ncclCommInitAll, ncclResult_t, (ncclComm_t*, int, const int*))
REAL(ncclCommSplit, ncclResult_t, (ncclComm_t, int, int, ncclComm_t*, void*))
REAL(ncclCommDestroy, ncclResult_t, (ncclComm_t))
REAL(ncclCommAbort, ncclResult_t, (ncclComm_t))
REAL(ncclCommCount, ncclResult_t, (const ncclComm_t, int*))
REAL(ncclCommUserRank, ncclResult_t, (const ncclComm_t, int*))
REAL(ncclCommCuDevice, ncclResult_t, (const ncclComm_t, int*))
REAL(ncclGetVersion, ncclResult_t, (int*))
REAL(ncclAllReduce, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
REAL(ncclBroadcast, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
REAL(ncclReduce, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))
REAL(ncclAllGather, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
REAL(ncclReduceScatter, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
REAL(ncclSend, ncclResult_t, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
REAL(ncclRecv, ncclResult_t, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
REAL(ncclGroupStart, ncclResult_t, (void))
REAL(ncclGroupEnd, ncclResult_t, (void))

/* ---- CUDA driver, loaded at runtime ---- */
static void load_cuda(void) {
  const char* name = getenv("FORENSICS_RECORDER_CUDA_LIB");
  void* lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return;
  cu.init = dlsym(lib, "cuInit");
  cu.device_get = dlsym(lib, "cuDeviceGet");
  cu.primary_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  cu.push = dlsym(lib, "cuCtxPushCurrent_v2");
  cu.pop = dlsym(lib, "cuCtxPopCurrent_v2");
  cu.event_create = dlsym(lib, "cuEventCreate");
  cu.event_record = dlsym(lib, "cuEventRecord");
  cu.event_query = dlsym(lib, "cuEventQuery");
  cu.ok = cu.init && cu.device_get && cu.primary_retain && cu.push && cu.pop && cu.event_create && cu.event_record &&
          cu.event_query && cu.init(0) == CUDA_SUCCESS;
}

/* Polls the events of ops not yet known complete, every 2 ms, off NCCL's threads. */
static void* poller_main(void* arg) {
  (void)arg;
  for (;;) {
    struct timespec ts = {0, 2000000L};
    nanosleep(&ts, NULL);
    for (unsigned i = 0; i < TABLE; i++) {
      struct shim_comm* s = __atomic_load_n(&g_table[i], __ATOMIC_ACQUIRE);
      if (s == NULL || s->closed || s->events == NULL) continue;
      pthread_mutex_lock(&g_lock); /* untrack() unmaps under this lock: never read a closed comm */
      if (s->closed) {
        pthread_mutex_unlock(&g_lock);
        continue;
      }
      struct rec_comm* rc = s->rc;
      uint64_t n = REC_ATOMIC_LOAD(&rc->hdr->coll_next);
      uint64_t first = n > rc->ring_len ? n - rc->ring_len : 0;
      int pushed = 0;
      for (uint64_t k = first; k < n; k++) {
        uint32_t slot = (uint32_t)(k % rc->ring_len);
        struct recorder_coll* r = &rc->ring[slot];
        if (REC_ATOMIC_LOAD(&r->complete_ns) != 0 || REC_ATOMIC_LOAD(&s->recorded[slot]) != k + 1) continue;
        if (!pushed) {
          if (cu.push(s->ctx) != CUDA_SUCCESS) break;
          pushed = 1;
        }
        if (cu.event_query(s->events[slot]) == CUDA_SUCCESS && REC_ATOMIC_LOAD(&r->index) == k)
          rec_coll_complete(rc, r, rec_now_ns());
      }
      if (pushed) {
        CUcontext dummy;
        cu.pop(&dummy);
      }
      pthread_mutex_unlock(&g_lock);
    }
  }
  return NULL;
}

static void start_once(void) {
  load_cuda();
  if (!cu.ok) return;
  pthread_t t;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  if (pthread_create(&t, NULL, poller_main, NULL) == 0) {
    pthread_detach(t);
    pthread_setname_np(t, "nccl-rec-poll");
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* DJB2a over the bytes as (signed) chars, the hash NCCL derives commHash from, so
 * a shim file of a ncclCommInitRank communicator carries the same id the profiler
 * plugin would. (NCCL's INFO lines print another hash of the id as `commId`.) */
static uint64_t hash_bytes(uint64_t h, const void* p, size_t n) {
  const signed char* b = p;
  for (size_t i = 0; i < n; i++) h = ((h << 5) + h) ^ (uint64_t)(int64_t)b[i];
  return h;
}

/* Not the hot path: allocation and locks are fine here. */
static void track(ncclComm_t comm, uint64_t comm_id, const char* name) {
  pthread_once(&g_once, start_once);
  int nranks = -1, rank = -1, dev = -1, version = 0;
  if (get_ncclCommCount()) get_ncclCommCount()(comm, &nranks);
  if (get_ncclCommUserRank()) get_ncclCommUserRank()(comm, &rank);
  if (get_ncclCommCuDevice()) get_ncclCommCuDevice()(comm, &dev);
  if (get_ncclGetVersion()) get_ncclGetVersion()(&version);
  char err[640];
  struct rec_comm* rc =
      rec_comm_open(RECORDER_WRITER_PRELOAD, (uint32_t)version, comm_id, name, -1, nranks, rank, 0, err, sizeof err);
  if (rc == NULL) {
    fprintf(stderr, "hang-forensics recorder shim disabled for a communicator: %s\n", err);
    return;
  }
  struct shim_comm* s = calloc(1, sizeof *s);
  s->rc = rc;
  s->comm = comm;
  s->recorded = calloc(rc->ring_len, sizeof *s->recorded);
  CUdevice d;
  if (cu.ok && dev >= 0 && cu.device_get(&d, dev) == CUDA_SUCCESS && cu.primary_retain(&s->ctx, d) == CUDA_SUCCESS &&
      cu.push(s->ctx) == CUDA_SUCCESS) {
    CUevent* ev = calloc(rc->ring_len, sizeof *ev);
    int ok = 1;
    for (uint32_t i = 0; i < rc->ring_len && ok; i++) ok = cu.event_create(&ev[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
    CUcontext dummy;
    cu.pop(&dummy);
    if (ok) s->events = ev;
    else free(ev);
  }
  pthread_mutex_lock(&g_lock);
  unsigned h = slot_of(comm);
  for (unsigned i = 0; i < TABLE; i++) {
    struct shim_comm** e = &g_table[(h + i) % TABLE];
    if (*e == NULL || (*e)->closed) {
      __atomic_store_n(e, s, __ATOMIC_RELEASE); /* a closed entry's memory is leaked on purpose: the poller may read it */
      break;
    }
  }
  pthread_mutex_unlock(&g_lock);
}

static void untrack(ncclComm_t comm) {
  pthread_mutex_lock(&g_lock);
  struct shim_comm* s = lookup(comm);
  if (s) {
    __atomic_store_n(&s->closed, 1, __ATOMIC_RELEASE);
    rec_comm_close(s->rc);
  }
  pthread_mutex_unlock(&g_lock);
}

/* ---- the hot path: record, forward, mark ---- */
struct pending { struct shim_comm* s; struct recorder_coll* r; uint64_t index; cudaStream_t stream; };
static __thread int t_group_depth;
static __thread struct pending t_pending[256];
static __thread int t_npending;

static void mark_enqueued(struct shim_comm* s, struct recorder_coll* r, uint64_t index, cudaStream_t stream) {
  if (s->events) {
    uint32_t slot = (uint32_t)(index % s->rc->ring_len);
    if (cu.event_record(s->events[slot], stream) == CUDA_SUCCESS) REC_ATOMIC_STORE(&s->recorded[slot], index + 1);
  }
  rec_coll_enqueued(s->rc, r);
}

static struct recorder_coll* begin(struct shim_comm* s, int f, size_t count, ncclDataType_t dt, int root_or_peer) {
  uint64_t seq = __atomic_fetch_add(&s->seq[f], 1, __ATOMIC_RELAXED);
  return rec_coll_begin(s->rc, f >= F_SEND ? RECORDER_KIND_P2P : RECORDER_KIND_COLL, seq, func_names[f], count,
                        dtype_name(dt), root_or_peer, 0, 0, "", "");
}

static void after(struct shim_comm* s, struct recorder_coll* r, ncclResult_t rc, cudaStream_t stream) {
  if (r == NULL) return;
  uint64_t index = REC_ATOMIC_LOAD(&r->index);
  if (rc != NCCL_SUCCESS && rc != NCCL_IN_PROGRESS) return; /* rejected: stays 'enqueuing' with its time */
  if (t_group_depth > 0 && t_npending < 256) {
    t_pending[t_npending++] = (struct pending){s, r, index, stream}; /* launched at ncclGroupEnd */
    return;
  }
  mark_enqueued(s, r, index, stream);
}

#define EXPORT __attribute__((visibility("default")))
#define COLL_CALL(fname, F, count, dt, rootpeer, comm, stream, ...)                  \
  struct shim_comm* s = lookup(comm);                                               \
  struct recorder_coll* r = s ? begin(s, F, count, dt, rootpeer) : NULL;            \
  ncclResult_t res = get_##fname()(__VA_ARGS__);                                    \
  if (s) after(s, r, res, stream);                                                  \
  return res;

EXPORT ncclResult_t ncclAllReduce(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t st) {
  COLL_CALL(ncclAllReduce, F_ALLREDUCE, count, dt, 0, comm, st, sb, rb, count, dt, op, comm, st)
}
EXPORT ncclResult_t ncclBroadcast(const void* sb, void* rb, size_t count, ncclDataType_t dt, int root,
                                  ncclComm_t comm, cudaStream_t st) {
  COLL_CALL(ncclBroadcast, F_BROADCAST, count, dt, root, comm, st, sb, rb, count, dt, root, comm, st)
}
EXPORT ncclResult_t ncclReduce(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                               ncclComm_t comm, cudaStream_t st) {
  COLL_CALL(ncclReduce, F_REDUCE, count, dt, root, comm, st, sb, rb, count, dt, op, root, comm, st)
}
EXPORT ncclResult_t ncclAllGather(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                                  cudaStream_t st) {
  COLL_CALL(ncclAllGather, F_ALLGATHER, count, dt, 0, comm, st, sb, rb, count, dt, comm, st)
}
EXPORT ncclResult_t ncclReduceScatter(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                      ncclComm_t comm, cudaStream_t st) {
  COLL_CALL(ncclReduceScatter, F_REDUCESCATTER, count, dt, 0, comm, st, sb, rb, count, dt, op, comm, st)
}
EXPORT ncclResult_t ncclSend(const void* sb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                             cudaStream_t st) {
  COLL_CALL(ncclSend, F_SEND, count, dt, peer, comm, st, sb, count, dt, peer, comm, st)
}
EXPORT ncclResult_t ncclRecv(void* rb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st) {
  COLL_CALL(ncclRecv, F_RECV, count, dt, peer, comm, st, rb, count, dt, peer, comm, st)
}

EXPORT ncclResult_t ncclGroupStart(void) {
  t_group_depth++;
  return get_ncclGroupStart()();
}

EXPORT ncclResult_t ncclGroupEnd(void) {
  ncclResult_t res = get_ncclGroupEnd()();
  if (t_group_depth > 0) t_group_depth--;
  if (t_group_depth == 0) {
    for (int i = 0; i < t_npending; i++) {
      struct pending* p = &t_pending[i];
      if (REC_ATOMIC_LOAD(&p->r->index) == p->index) mark_enqueued(p->s, p->r, p->index, p->stream);
    }
    t_npending = 0;
  }
  return res;
}

/* ---- communicator life cycle ---- */
EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  ncclResult_t res = get_ncclCommInitRank()(comm, nranks, id, rank);
  if ((res == NCCL_SUCCESS || res == NCCL_IN_PROGRESS) && comm && *comm)
    track(*comm, hash_bytes(5381, id.internal, sizeof id.internal), "");
  return res;
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, void* config) {
  ncclResult_t res = get_ncclCommInitRankConfig()(comm, nranks, id, rank, config);
  if ((res == NCCL_SUCCESS || res == NCCL_IN_PROGRESS) && comm && *comm)
    track(*comm, hash_bytes(5381, id.internal, sizeof id.internal), "");
  return res;
}

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ncclResult_t res = get_ncclCommInitAll()(comms, ndev, devlist);
  if (res == NCCL_SUCCESS) {
    uint64_t id = hash_bytes(5381, &comms, sizeof comms); /* one id for the clique, unique in this process */
    for (int i = 0; i < ndev; i++) track(comms[i], id, "");
  }
  return res;
}

EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, void* config) {
  ncclResult_t res = get_ncclCommSplit()(comm, color, key, newcomm, config);
  struct shim_comm* parent = lookup(comm);
  if ((res == NCCL_SUCCESS || res == NCCL_IN_PROGRESS) && newcomm && *newcomm) {
    uint64_t pid = parent ? parent->rc->hdr->comm_id : 0;
    uint64_t id = hash_bytes(hash_bytes(5381, &pid, sizeof pid), &color, sizeof color);
    track(*newcomm, id, "");
  }
  return res;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  untrack(comm);
  return get_ncclCommDestroy()(comm);
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  untrack(comm);
  return get_ncclCommAbort()(comm);
}
