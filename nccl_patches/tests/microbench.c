/*
 * microbench.c - CPU cost of the recorder's entry points per NCCL event, against
 * a baseline of empty entry points called the same way in the same run.
 *   microbench PLUGIN.so ITERATIONS
 * One "iteration" is one collective as NCCL reports it with 1 channel: group,
 * coll, kernel channel, a send and a recv proxy op with 8 steps each and their
 * states: 100 calls. Prints ns per call for the plugin and the baseline.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_profiler_abi.h"

static char g_dummy[64];
static ncclResult_t e_init(void** c, uint64_t id, int* m, const char* n, int a, int b, int r, ncclDebugLogger_t l) {
  (void)id; (void)n; (void)a; (void)b; (void)r; (void)l; *c = g_dummy; *m = 0x5f; return ncclSuccess; }
static ncclResult_t e_start(void* c, void** h, ncclProfilerEventDescr_v5_t* d) { (void)c; (void)d; *h = g_dummy; return ncclSuccess; }
static ncclResult_t e_stop(void* h) { (void)h; return ncclSuccess; }
static ncclResult_t e_rec(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v5_t* a) { (void)h; (void)s; (void)a; return ncclSuccess; }
static ncclResult_t e_fin(void* c) { (void)c; return ncclSuccess; }
static const ncclProfiler_v5_t empty = {"empty", e_init, e_start, e_stop, e_rec, e_fin};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double run(const ncclProfiler_v5_t* p, long iters) {
  void* ctx;
  int mask;
  p->init(&ctx, 42, &mask, "bench", 2, 2, 0, NULL);
  ncclProfilerEventDescr_v5_t d;
  ncclProfilerEventStateArgs_v5_t a = {0};
  double t0 = now();
  for (long i = 0; i < iters; i++) {
    void *g, *c, *k, *op, *st;
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
    d.coll.nChannels = 1;
    p->startEvent(ctx, &c, &d);
    p->stopEvent(c);
    p->stopEvent(g);
    memset(&d, 0, sizeof d);
    d.type = HF_PROFILE_KERNEL_CH;
    d.parentObj = c;
    p->startEvent(ctx, &k, &d);
    for (int send = 0; send < 2; send++) {
      memset(&d, 0, sizeof d);
      d.type = HF_PROFILE_PROXY_OP;
      d.parentObj = c;
      d.proxyOp.pid = getpid();
      d.proxyOp.peer = 1;
      d.proxyOp.nSteps = 8;
      d.proxyOp.isSend = send;
      p->startEvent(ctx, &op, &d);
      p->recordEventState(op, HF_STATE_PROXY_OP_IN_PROGRESS, &a);
      for (int s = 0; s < 8; s++) {
        memset(&d, 0, sizeof d);
        d.type = HF_PROFILE_PROXY_STEP;
        d.parentObj = op;
        d.proxyStep.step = s;
        p->startEvent(ctx, &st, &d);
        p->recordEventState(st, send ? HF_STATE_STEP_SEND_GPU_WAIT : HF_STATE_STEP_RECV_WAIT, &a);
        p->recordEventState(st, send ? HF_STATE_STEP_SEND_PEER_WAIT : HF_STATE_STEP_RECV_FLUSH_WAIT, &a);
        p->recordEventState(st, send ? HF_STATE_STEP_SEND_WAIT : HF_STATE_STEP_RECV_GPU_WAIT, &a);
        p->stopEvent(st);
      }
      p->stopEvent(op);
    }
    p->recordEventState(k, HF_STATE_KERNEL_CH_STOP, &a);
    p->stopEvent(k);
  }
  double dt = now() - t0;
  p->finalize(ctx);
  return dt * 1e9 / ((double)iters * 100.0);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) return 2;
  const ncclProfiler_v5_t* p = dlsym(lib, "ncclProfiler_v5");
  long iters = atol(argv[2]);
  run(p, iters / 10 + 1); /* warm */
  double base = run(&empty, iters), plug = run(p, iters);
  printf("{\"calls_per_iteration\": 100, \"iterations\": %ld, \"ns_per_call_baseline\": %.2f, "
         "\"ns_per_call_plugin\": %.2f}\n", iters, base, plug);
  return 0;
}
