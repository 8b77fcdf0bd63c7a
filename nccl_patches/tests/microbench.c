/*
 * microbench.c - CPU cost of profiler plugins per collective, against empty entry points called
 * the same way, alternating in one process so drift and load hit every variant alike.
 *
 *   microbench ITERATIONS REPEATS CHANNELS LABEL=PLUGIN.so [LABEL=PLUGIN.so ...]
 *   (env MICROBENCH_STEPS: steps per proxy op, default 8; 5 calls each. MICROBENCH_IDLE=1: init, then
 *   sleep 60 s: the recorder's own thread, idle, for benchmarks/recorder_event_cost.py to time.
 *   MICROBENCH_COUNT=1: one collective per variant, printing what a counting build (REC_COUNT, exporting
 *   hf_recorder_counts) did on the launch path and in the whole collective: clock reads and atomics.
 *   MICROBENCH_THREADS=2: the proxy path on a second thread, as in NCCL (see run_threads).
 *   MICROBENCH_PRIMITIVES=1: ns per call of the pieces a recorder is made of on this machine, no plugin.
 *   MICROBENCH_PIPELINED=1: a send step is stopped only after the next one entered SendWait, as NCCL's
 *   send proxy does while the network is behind (net.cc: up to NCCL_STEPS steps transmitted, not done);
 *   default: each send step leaves SendWait before the next enters it. Same calls either way.)
 *
 * One collective as NCCL reports it with CHANNELS channels:
 *   launch path (user thread): Group start, Coll start, Coll stop, Group stop       4 calls
 *   proxy path (proxy thread), per channel: KernelCh start, a send and a recv proxy op with
 *     InProgress, 8 steps of start + 3 states + stop each, op stop, KernelChStop, KernelCh stop
 *                                                                                 89 calls (9 + 10 per step)
 * (93 calls at 1 channel). Each repeat times ITERATIONS collectives per variant, launch path
 * alone and whole, in a rotating order; the output gives per variant the min and median
 * ns per collective (whole, launch path) over the repeats, as one JSON line.
 * LABEL=RECORDER.so+OTHER.so loads RECORDER.so with FORENSICS_RECORDER_CHAIN=OTHER.so (read at
 * load: RECORDER.so must then be a copy of the file the unchained variant loads).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_profiler_abi.h"

#define MAX_VARIANTS 10
#define MAX_REPEATS 1000

static char g_dummy[64];
static ncclResult_t e_init(void** c, uint64_t id, int* m, const char* n, int a, int b, int r, ncclDebugLogger_t l) {
  (void)id; (void)n; (void)a; (void)b; (void)r; (void)l; *c = g_dummy; *m = 0x5f; return ncclSuccess; }
static ncclResult_t e_start(void* c, void** h, ncclProfilerEventDescr_v5_t* d) { (void)c; (void)d; *h = g_dummy; return ncclSuccess; }
static ncclResult_t e_stop(void* h) { (void)h; return ncclSuccess; }
static ncclResult_t e_rec(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v5_t* a) { (void)h; (void)s; (void)a; return ncclSuccess; }
static ncclResult_t e_fin(void* c) { (void)c; return ncclSuccess; }
static const ncclProfiler_v5_t empty = {"empty", e_init, e_start, e_stop, e_rec, e_fin};

struct counts {
  unsigned long long precise, tick, coarse, rmw;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void* launch(const ncclProfiler_v5_t* p, void* ctx, long i, int nch) {
  ncclProfilerEventDescr_v5_t d;
  void *g, *c;
  memset(&d, 0, sizeof d);
  d.type = HF_PROFILE_GROUP;
  p->startEvent(ctx, &g, &d);
  d.type = HF_PROFILE_COLL;
  d.parentObj = g;
  d.coll.seqNumber = (uint64_t)i;
  d.coll.func = "AllReduce";
  d.coll.datatype = "ncclFloat32";
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  d.coll.count = 1 << 20;
  d.coll.nChannels = (uint8_t)nch;
  d.coll.parentGroup = g;
  p->startEvent(ctx, &c, &d);
  p->stopEvent(c);
  p->stopEvent(g);
  return c;
}

static int g_steps = 8;
static int g_pipelined = 0; /* MICROBENCH_PIPELINED */

static void proxy(const ncclProfiler_v5_t* p, void* ctx, void* c, int ch) {
  ncclProfilerEventDescr_v5_t d;
  ncclProfilerEventStateArgs_v5_t a = {0};
  void *k, *op, *st, *prev = NULL;
  memset(&d, 0, sizeof d);
  d.type = HF_PROFILE_KERNEL_CH;
  d.parentObj = c;
  d.kernelCh.channelId = (uint8_t)ch;
  p->startEvent(ctx, &k, &d);
  for (int send = 0; send < 2; send++) {
    memset(&d, 0, sizeof d);
    d.type = HF_PROFILE_PROXY_OP;
    d.parentObj = c;
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = (uint8_t)ch;
    d.proxyOp.peer = 1;
    d.proxyOp.nSteps = g_steps;
    d.proxyOp.isSend = send;
    p->startEvent(ctx, &op, &d);
    p->recordEventState(op, HF_STATE_PROXY_OP_IN_PROGRESS, &a);
    for (int s = 0; s < g_steps; s++) {
      memset(&d, 0, sizeof d);
      d.type = HF_PROFILE_PROXY_STEP;
      d.parentObj = op;
      d.proxyStep.step = s;
      p->startEvent(ctx, &st, &d);
      a.proxyStep.transSize = 4096;
      p->recordEventState(st, send ? HF_STATE_STEP_SEND_GPU_WAIT : HF_STATE_STEP_RECV_WAIT, &a);
      p->recordEventState(st, send ? HF_STATE_STEP_SEND_PEER_WAIT : HF_STATE_STEP_RECV_FLUSH_WAIT, &a);
      p->recordEventState(st, send ? HF_STATE_STEP_SEND_WAIT : HF_STATE_STEP_RECV_GPU_WAIT, &a);
      if (send && g_pipelined) { /* the previous step completes once this one is on the network */
        if (prev) p->stopEvent(prev);
        prev = st;
      } else {
        p->stopEvent(st);
      }
    }
    if (prev) p->stopEvent(prev);
    prev = NULL;
    p->stopEvent(op);
  }
  p->recordEventState(k, HF_STATE_KERNEL_CH_STOP, &a);
  p->stopEvent(k);
}

/* MICROBENCH_THREADS=2: the proxy path runs on a thread of its own, as NCCL's proxy thread does, fed
 * the launched collectives through a queue of PIPE_LEN; what the two threads write to the same cache
 * lines (a record, the header) then costs what it costs on NCCL's threads. Time per collective is
 * the pipeline's: from the first launch to the last proxy path done. */
#define PIPE_LEN 8
struct pipe {
  _Alignas(64) unsigned long head; /* launcher */
  _Alignas(64) unsigned long tail; /* proxy thread */
  _Alignas(64) void* slot[PIPE_LEN];
  const ncclProfiler_v5_t* p;
  void* ctx;
  int nch;
  unsigned long total;
};

static inline void relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static void* proxy_thread(void* arg) {
  struct pipe* q = arg;
  for (unsigned long t = 0; t < q->total; t++) {
    while (__atomic_load_n(&q->head, __ATOMIC_ACQUIRE) == t) relax();
    void* c = q->slot[t % PIPE_LEN];
    for (int ch = 0; ch < q->nch; ch++) proxy(q->p, q->ctx, c, ch);
    __atomic_store_n(&q->tail, t + 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

static double run_threads(const ncclProfiler_v5_t* p, void* ctx, long iters, int nch) {
  static struct pipe q;
  q.head = q.tail = 0;
  q.p = p, q.ctx = ctx, q.nch = nch, q.total = (unsigned long)iters;
  pthread_t tid;
  if (pthread_create(&tid, NULL, proxy_thread, &q) != 0) return -1.0;
  double t0 = now();
  for (long i = 0; i < iters; i++) {
    void* c = launch(p, ctx, i, nch);
    while (q.head - __atomic_load_n(&q.tail, __ATOMIC_ACQUIRE) >= PIPE_LEN) relax();
    q.slot[q.head % PIPE_LEN] = c;
    __atomic_store_n(&q.head, q.head + 1, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(&q.tail, __ATOMIC_ACQUIRE) < (unsigned long)iters) relax();
  double t = (now() - t0) * 1e9 / (double)iters;
  pthread_join(tid, NULL);
  return t;
}

static int g_threads = 1;

/* ns per collective: whole (launch + proxy) when `whole`, else the launch path alone. */
static double run(const ncclProfiler_v5_t* p, void* ctx, long iters, int nch, int whole) {
  if (whole && g_threads == 2) return run_threads(p, ctx, iters, nch);
  double t0 = now();
  for (long i = 0; i < iters; i++) {
    void* c = launch(p, ctx, i, nch);
    if (whole)
      for (int ch = 0; ch < nch; ch++) proxy(p, ctx, c, ch);
  }
  return (now() - t0) * 1e9 / (double)iters;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void summary(const char* label, double* v, int n, const char* sep) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  printf("\"%s\": {\"min\": %.1f, \"median\": %.1f, \"max\": %.1f}%s", label, v[0], v[n / 2], v[n - 1], sep);
}

/* What one collective did, read from a counting build's per-thread counters (the calling thread's). */
static int count_calls(int nv, const char** labels, const ncclProfiler_v5_t** plugins, void** libs, void** ctx,
                       int nch) {
  printf("{\"channels\": %d, \"steps\": %d, \"counts\": {", nch, g_steps);
  const char* sep = "";
  for (int v = 0; v < nv; v++) {
    struct counts* k = libs[v] ? dlsym(libs[v], "hf_recorder_counts") : NULL;
    if (k == NULL) continue;
    struct counts a = *k;
    void* c = launch(plugins[v], ctx[v], 1000000, nch);
    struct counts b = *k;
    for (int ch = 0; ch < nch; ch++) proxy(plugins[v], ctx[v], c, ch);
    struct counts e = *k;
    printf("%s\"%s\": {\"launch\": [%llu, %llu, %llu, %llu], \"whole\": [%llu, %llu, %llu, %llu]}", sep, labels[v],
           b.precise - a.precise, b.tick - a.tick, b.coarse - a.coarse, b.rmw - a.rmw, e.precise - a.precise,
           e.tick - a.tick, e.coarse - a.coarse, e.rmw - a.rmw);
    sep = ", ";
  }
  printf("}, \"order\": [\"precise\", \"tick\", \"coarse\", \"rmw\"]}\n");
  return 0;
}

static inline unsigned long long ticks(void) {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  unsigned long long v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

static volatile unsigned long long g_sink;
static unsigned long long g_word;

/* ns per call of each piece, min of 21 timings of `n` calls: the machine's prices, next to the breakdown. */
#define PRICE(name, body)                                      \
  do {                                                         \
    double best = 1e30;                                        \
    for (int r = 0; r < 21; r++) {                             \
      double t0 = now();                                       \
      for (long i = 0; i < n; i++) { body; }                   \
      double t = (now() - t0) * 1e9 / (double)n;               \
      if (t < best) best = t;                                  \
    }                                                          \
    printf("%s\"%s\": %.2f", first ? "" : ", ", name, best);    \
    first = 0;                                                 \
  } while (0)

static int primitives(long n) {
  struct timespec ts;
  int first = 1;
  printf("{\"ns_per_call\": {");
  PRICE("loop", g_sink = (unsigned long long)i);
  PRICE("clock_gettime_realtime", (clock_gettime(CLOCK_REALTIME, &ts), g_sink = (unsigned long long)ts.tv_nsec));
  PRICE("clock_gettime_realtime_coarse",
        (clock_gettime(CLOCK_REALTIME_COARSE, &ts), g_sink = (unsigned long long)ts.tv_nsec));
  PRICE("counter", g_sink = ticks());
  PRICE("atomic_add", __atomic_fetch_add(&g_word, 1, __ATOMIC_ACQ_REL));
  PRICE("plain_add", __atomic_store_n(&g_word, __atomic_load_n(&g_word, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED));
  printf("}}\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && getenv("MICROBENCH_PRIMITIVES") && atoi(getenv("MICROBENCH_PRIMITIVES")))
    return primitives(atol(argv[1]));
  if (argc < 5) {
    fprintf(stderr, "usage: microbench ITERATIONS REPEATS CHANNELS LABEL=PLUGIN.so...\n");
    return 2;
  }
  long iters = atol(argv[1]);
  if (getenv("MICROBENCH_STEPS")) g_steps = atoi(getenv("MICROBENCH_STEPS"));
  if (getenv("MICROBENCH_THREADS")) g_threads = atoi(getenv("MICROBENCH_THREADS"));
  if (getenv("MICROBENCH_PIPELINED")) g_pipelined = atoi(getenv("MICROBENCH_PIPELINED"));
  int repeats = atoi(argv[2]), nch = atoi(argv[3]);
  if (repeats > MAX_REPEATS) repeats = MAX_REPEATS;
  int nv = 1;
  const char* labels[MAX_VARIANTS] = {"empty"};
  const ncclProfiler_v5_t* plugins[MAX_VARIANTS] = {&empty};
  void* libs[MAX_VARIANTS] = {NULL};
  for (int i = 4; i < argc && nv < MAX_VARIANTS; i++, nv++) {
    char* eq = strchr(argv[i], '=');
    if (eq == NULL) return 2;
    *eq = '\0';
    labels[nv] = argv[i];
    char* plus = strchr(eq + 1, '+');
    if (plus) {
      *plus = '\0';
      setenv("FORENSICS_RECORDER_CHAIN", plus + 1, 1);
    }
    void* lib = dlopen(eq + 1, RTLD_NOW | RTLD_LOCAL);
    unsetenv("FORENSICS_RECORDER_CHAIN");
    libs[nv] = lib;
    plugins[nv] = lib ? dlsym(lib, "ncclProfiler_v5") : NULL;
    if (plugins[nv] == NULL) {
      fprintf(stderr, "cannot load %s: %s\n", eq + 1, dlerror());
      return 2;
    }
  }
  void* ctx[MAX_VARIANTS];
  for (int v = 0; v < nv; v++) {
    int mask;
    plugins[v]->init(&ctx[v], 42 + (uint64_t)v, &mask, "bench", 2, 2, 0, NULL);
    run(plugins[v], ctx[v], iters / 10 + 1, nch, 1); /* warm */
  }
  if (getenv("MICROBENCH_COUNT") && atoi(getenv("MICROBENCH_COUNT"))) return count_calls(nv, labels, plugins, libs, ctx, nch);
  if (getenv("MICROBENCH_IDLE") && atoi(getenv("MICROBENCH_IDLE"))) {
    sleep(60);
    return 0;
  }
  static double whole[MAX_VARIANTS][MAX_REPEATS], launch_only[MAX_VARIANTS][MAX_REPEATS];
  for (int r = 0; r < repeats; r++)
    for (int k = 0; k < nv; k++) {
      int v = (k + r) % nv; /* rotate the order */
      whole[v][r] = run(plugins[v], ctx[v], iters, nch, 1);
      launch_only[v][r] = run(plugins[v], ctx[v], iters, nch, 0);
    }
  printf("{\"iterations\": %ld, \"repeats\": %d, \"channels\": %d, \"steps\": %d, \"calls_per_collective\": %d, "
         "\"ns_per_collective\": {", iters, repeats, nch, g_steps, 4 + (9 + 10 * g_steps) * nch);
  for (int v = 0; v < nv; v++) {
    printf("\"%s\": {", labels[v]);
    summary("whole", whole[v], repeats, ", ");
    summary("launch", launch_only[v], repeats, "}");
    printf("%s", v + 1 < nv ? ", " : "");
  }
  printf("}}\n");
  for (int v = 0; v < nv; v++) plugins[v]->finalize(ctx[v]);
  return 0;
}
