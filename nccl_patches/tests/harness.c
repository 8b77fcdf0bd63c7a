/*
 * harness.c - drives the recorder plugin's entry points the way NCCL does, with
 * no GPU and no NCCL: init per communicator, Group/Coll/P2p events from a "user"
 * thread, ProxyOp/ProxyStep/KernelCh events from a "proxy" thread, states and
 * stops in NCCL's order, finalize. Used by tests/unit/recorder and
 * tests/integration/recorder.
 *
 *   harness PLUGIN.so VERSION run   NCOMMS NCOLLS NCHANNELS NSTEPS
 *     (env HARNESS_RANK: this process's rank in every comm; HARNESS_TIME_FINALIZE: print each finalize's
 *     wall time as FINALIZE_NS <ns>; HARNESS_SEND_WAIT_US: each send step's
 *     time in SendWait)
 *   harness PLUGIN.so VERSION hang  RANK NRANKS NDONE RECV_STEPS SEND_STEPS RECV_STATE SEND_STATE [COMMID]
 *     (env HARNESS_LAST_FUNC=FUNC:COUNT: the last op is that collective instead, it completes, and the
 *     rank finalizes and exits 0: the rank of an order mismatch that finished its own call; HARNESS_AFTER_LAST=N:
 *     N more all-reduces complete after it)
 *
 *   harness PLUGIN.so VERSION overlap FIRST_US BOTH_US SECOND_US GAP_US THIRD_US
 *     (one collective whose send op has 3 steps: step 0 alone in SendWait FIRST_US, then steps 0 and 1
 *     together BOTH_US, step 1 alone SECOND_US; then none GAP_US (step 2 in SendGPUWait), step 2 alone
 *     THIRD_US. The op's SendWait union is FIRST+BOTH+SECOND+THIRD; the steps' sum counts BOTH twice.)
 *   harness PLUGIN.so VERSION join ALONE_US ZERO_US BOTH_US LAST_US
 *     (one collective whose send op has 3 steps: step 0 alone in SendWait ALONE_US, then none ZERO_US, step 1
 *     alone ALONE_US, steps 1 and 2 together BOTH_US, step 2 alone LAST_US. Step 1's span opens after a timed
 *     one-step span, so by default it is left untimed until step 2 joins it: the union is
 *     2 x ALONE + BOTH + LAST, its first ALONE counted as the op's timed one-step span.)
 *   harness PLUGIN.so VERSION spans NSTEPS SPAN_NS
 *     (one collective whose send op has NSTEPS steps one after another, each SPAN_NS in SendWait by a busy
 *     wait on CLOCK_REALTIME; prints INNER_NS, the sum of the times from each SendWait call's return to its
 *     stop call, and OUTER_NS, from each SendWait call to its stop's return: the union lies between them.)
 *
 * "run" finishes everything and finalizes; "hang" completes NDONE all-reduces,
 * then starts one more whose recv op (from RANK-1) stops after RECV_STEPS steps
 * in RECV_STATE and whose send op (to RANK+1) stops after SEND_STEPS steps in
 * SEND_STATE, prints READY and sleeps until killed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_profiler_abi.h"

static int g_version;
static const ncclProfiler_v2_t* g_v2;
static const ncclProfiler_v3_t* g_v3;
static const ncclProfiler_v4_t* g_v4;
static const ncclProfiler_v5_t* g_v5;
static const ncclProfiler_v6_t* g_v6;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  (void)file;
  (void)line;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "harness NCCL %s ", level == NCCL_LOG_WARN ? "WARN" : "INFO");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void own_handler(int sig) {
  (void)sig;
  static const char msg[] = "harness own SIGUSR2 handler ran\n";
  if (write(2, msg, sizeof msg - 1) < 0) return;
}

/* v2/v3 carry the communicator's name and hash in every Coll/P2p: remember them per context. */
static struct { void* ctx; uint64_t id; char name[32]; } g_ident[64];
static int g_nident;

static void remember(void* ctx, uint64_t id, const char* name) {
  int i = __atomic_fetch_add(&g_nident, 1, __ATOMIC_SEQ_CST);
  g_ident[i].ctx = ctx;
  g_ident[i].id = id;
  snprintf(g_ident[i].name, sizeof g_ident[i].name, "%s", name);
}

static int ident_of(void* ctx) {
  for (int i = 0; i < g_nident; i++)
    if (g_ident[i].ctx == ctx) return i;
  return 0;
}

/* v2/v3: fill the v5 layout, then translate Coll/P2p; other unions are laid out alike. */
static void* start_old(void* ctx, uint64_t type, void* parent, int rank, void (*fill)(void* u, void* arg), void* arg) {
  ncclProfilerEventDescr_v5_t d5;
  memset(&d5, 0, sizeof d5);
  fill(&d5.coll, arg);
  int who = ident_of(ctx);
  void* h = NULL;
  ncclProfilerEventDescr_v3_t d3;
  ncclProfilerEventDescr_v2_t d2;
  memset(&d3, 0, sizeof d3);
  memset(&d2, 0, sizeof d2);
  d3.type = d2.type = (uint8_t)type;
  d3.parentObj = d2.parentObj = parent;
  d3.rank = d2.rank = rank;
  if (type == HF_PROFILE_COLL) {
    struct hf_descr_coll_v3 c = {g_ident[who].name, g_ident[who].id, d5.coll.seqNumber, d5.coll.func,
                                 NULL, NULL, d5.coll.count, d5.coll.root, d5.coll.datatype, 32, d5.coll.nWarps,
                                 d5.coll.algo, d5.coll.proto};
    d3.coll = c;
    struct hf_descr_coll_v2 c2 = {g_ident[who].name, g_ident[who].id, d5.coll.seqNumber, d5.coll.func, NULL, NULL,
                                  d5.coll.count, d5.coll.root, d5.coll.datatype, 0, 32, d5.coll.nWarps, d5.coll.algo,
                                  d5.coll.proto};
    d2.coll = c2;
  } else if (type == HF_PROFILE_P2P) {
    struct hf_descr_p2p_v2 p = {g_ident[who].name, g_ident[who].id, d5.p2p.func, NULL, d5.p2p.datatype,
                                d5.p2p.count, d5.p2p.peer};
    d3.p2p = p;
    d2.p2p = p;
  } else {
    memcpy(&d3.coll, &d5.coll, sizeof(struct hf_descr_proxy_op)); /* the largest of proxyOp/Step, kernelCh */
    memcpy(&d2.coll, &d5.coll, sizeof(struct hf_descr_proxy_op));
  }
  if (g_version == 3) g_v3->startEvent(ctx, &h, &d3);
  else g_v2->startEvent(ctx, &h, &d2);
  return h;
}

/* HARNESS_HONOR_MASK=1: send only the event types of the mask init returned, as NCCL does (the
 * chaining tests compare a plugin's counts alone and behind the recorder). */
static int g_honor_mask;
static int g_mask;

/* One descriptor type big enough for every version; filled per version below. */
static void* start(void* ctx, uint64_t type, void* parent, int rank, void (*fill)(void* u, void* arg), void* arg) {
  void* h = NULL;
  if (g_honor_mask && !(type & (uint64_t)g_mask)) return NULL; /* as NCCL: only the types the plugin asked for */
  if (g_version <= 3) return start_old(ctx, type, parent, rank, fill, arg);
  if (g_version == 4) {
    ncclProfilerEventDescr_v4_t d;
    memset(&d, 0, sizeof d);
    d.type = (uint8_t)type;
    d.parentObj = parent;
    d.rank = rank;
    fill(&d.coll, arg);
    g_v4->startEvent(ctx, &h, &d);
  } else if (g_version == 5) {
    ncclProfilerEventDescr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.parentObj = parent;
    d.rank = rank;
    fill(&d.coll, arg);
    g_v5->startEvent(ctx, &h, &d);
  } else {
    ncclProfilerEventDescr_v6_t d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.parentObj = parent;
    d.rank = rank;
    fill(&d.coll, arg);
    g_v6->startEvent(ctx, &h, &d);
  }
  return h;
}

static void stop(void* h) {
  if (h == NULL && g_honor_mask) return; /* NCCL stops only events that started */
  if (g_version == 2) g_v2->stopEvent(h);
  else if (g_version == 3) g_v3->stopEvent(h);
  else if (g_version == 4) g_v4->stopEvent(h);
  else if (g_version == 5) g_v5->stopEvent(h);
  else g_v6->stopEvent(h);
}

static void state(void* h, int s, size_t trans) {
  if (h == NULL && g_honor_mask) return;
  ncclProfilerEventStateArgs_v5_t a;
  memset(&a, 0, sizeof a);
  a.proxyStep.transSize = trans;
  if (g_version == 2) g_v2->recordEventState(h, (ncclProfilerEventState_t)s, (ncclProfilerEventStateArgs_v2_t*)&a);
  else if (g_version == 3) g_v3->recordEventState(h, (ncclProfilerEventState_t)s, (ncclProfilerEventStateArgs_v3_t*)&a);
  else if (g_version == 4) g_v4->recordEventState(h, (ncclProfilerEventState_t)s, (ncclProfilerEventStateArgs_v4_t*)&a);
  else if (g_version == 5) g_v5->recordEventState(h, (ncclProfilerEventState_t)s, &a);
  else g_v6->recordEventState(h, (ncclProfilerEventState_t)s, &a);
}

static void* init(uint64_t id, const char* name, int nnodes, int nranks, int rank, int* mask) {
  void* ctx = NULL;
  ncclResult_t rc;
  if (g_version == 2) rc = g_v2->init(&ctx, mask);
  else if (g_version == 3) rc = g_v3->init(&ctx, mask);
  else if (g_version == 4) rc = g_v4->init(&ctx, mask, name, id, nnodes, nranks, rank, logger);
  else if (g_version == 5) rc = g_v5->init(&ctx, id, mask, name, nnodes, nranks, rank, logger);
  else rc = g_v6->init(&ctx, id, mask, name, nnodes, nranks, rank, logger);
  if (rc != ncclSuccess) {
    fprintf(stderr, "init failed: %d\n", rc);
    exit(3);
  }
  remember(ctx, id, name);
  g_mask = *mask;
  return ctx;
}

static void finalize(void* ctx) {
  if (g_version == 2) g_v2->finalize(ctx);
  else if (g_version == 3) g_v3->finalize(ctx);
  else if (g_version == 4) g_v4->finalize(ctx);
  else if (g_version == 5) g_v5->finalize(ctx);
  else g_v6->finalize(ctx);
}

/* ------------------------------------------------------- descriptor fills */

struct coll_arg { uint64_t seq; size_t count; int nch; const char* func; /* NULL: AllReduce */ };
static void fill_coll(void* u, void* arg) {
  struct coll_arg* a = arg;
  struct hf_descr_coll_v5* c = u; /* v4 is the same minus parentGroup */
  c->seqNumber = a->seq;
  c->func = a->func ? a->func : "AllReduce";
  c->count = a->count;
  c->root = 0;
  c->datatype = "ncclFloat32";
  c->nChannels = (uint8_t)a->nch;
  c->nWarps = 8;
  c->algo = "RING";
  c->proto = "SIMPLE";
}
struct p2p_arg { int peer; size_t count; int send; };
static void fill_p2p(void* u, void* arg) {
  struct p2p_arg* a = arg;
  struct hf_descr_p2p_v5* p = u;
  p->func = a->send ? "Send" : "Recv";
  p->count = a->count;
  p->datatype = "ncclInt8";
  p->peer = a->peer;
  p->nChannels = 1;
}
struct op_arg { int pid; int ch; int peer; int nsteps; int send; };
static void fill_op(void* u, void* arg) {
  struct op_arg* a = arg;
  struct hf_descr_proxy_op* o = u;
  o->pid = a->pid;
  o->channelId = (uint8_t)a->ch;
  o->peer = a->peer;
  o->nSteps = a->nsteps;
  o->chunkSize = 1 << 19;
  o->isSend = a->send;
}
static void fill_step(void* u, void* arg) { ((struct hf_descr_proxy_step*)u)->step = *(int*)arg; }
static void fill_kch(void* u, void* arg) { ((struct hf_descr_kernel_ch*)u)->channelId = (uint8_t)*(int*)arg; }
static void fill_none(void* u, void* arg) { (void)u; (void)arg; }

/* HARNESS_SEND_WAIT_US: every send step stays this long in SendWait (recorder send_wait_us tests). */
static long g_send_wait_us = 0;

/* One proxy op with `nsteps` steps, of which the first `upto` complete; when
 * upto < nsteps the next step is left in `hang_state` and the op stays open. */
static void* proxy_op(void* ctx, void* coll, int rank, int ch, int peer, int send, int nsteps, int upto, int hang_state) {
  struct op_arg oa = {getpid(), ch, peer, nsteps, send};
  void* op = start(ctx, HF_PROFILE_PROXY_OP, coll, rank, fill_op, &oa);
  state(op, HF_STATE_PROXY_OP_IN_PROGRESS, 0);
  for (int s = 0; s < nsteps && s <= upto; s++) {
    void* st = start(ctx, HF_PROFILE_PROXY_STEP, op, rank, fill_step, &s);
    if (s == upto) {
      state(st, hang_state, 4096);
      return op; /* left hanging */
    }
    if (send) {
      state(st, HF_STATE_STEP_SEND_GPU_WAIT, 0);
      state(st, HF_STATE_STEP_SEND_PEER_WAIT, 0);
      state(st, HF_STATE_STEP_SEND_WAIT, 1 << 19);
      if (g_send_wait_us > 0) usleep((useconds_t)g_send_wait_us); /* time on the 'wire' */
    } else {
      state(st, HF_STATE_STEP_RECV_WAIT, 0);
      state(st, HF_STATE_STEP_RECV_FLUSH_WAIT, 1 << 19);
      state(st, HF_STATE_STEP_RECV_GPU_WAIT, 1 << 19);
    }
    stop(st);
  }
  stop(op);
  return NULL;
}

/* ----------------------------------------------------------------- "run" */

#define QUEUE 64
struct comm_run {
  void* ctx;
  int rank, nranks, ncolls, nch, nsteps;
  void* queue[QUEUE];      /* SPSC: user thread -> proxy thread */
  int head, tail;          /* accessed with atomics */
};

static void* user_main(void* arg) {
  struct comm_run* r = arg;
  for (int i = 0; i < r->ncolls; i++) {
    void* g = start(r->ctx, HF_PROFILE_GROUP, NULL, r->rank, fill_none, NULL);
    void* coll;
    if (i % 5 == 4) {
      struct p2p_arg pa = {(r->rank + 1) % r->nranks, 1024, 1};
      coll = start(r->ctx, HF_PROFILE_P2P, g, r->rank, fill_p2p, &pa);
    } else {
      struct coll_arg ca = {(uint64_t)i, 1u << 20, r->nch, NULL};
      coll = start(r->ctx, HF_PROFILE_COLL, g, r->rank, fill_coll, &ca);
    }
    stop(coll); /* enqueued: NCCL stops a Coll when it is enqueued, not finished */
    stop(g);
    while (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= QUEUE)
      usleep(10);
    r->queue[r->tail % QUEUE] = coll;
    __atomic_add_fetch(&r->tail, 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void* proxy_main(void* arg) {
  struct comm_run* r = arg;
  for (int i = 0; i < r->ncolls; i++) {
    while (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) usleep(10);
    void* coll = r->queue[r->head % QUEUE];
    __atomic_add_fetch(&r->head, 1, __ATOMIC_RELEASE);
    int nch = (i % 5 == 4) ? 1 : r->nch;
    for (int ch = 0; ch < nch; ch++) {
      void* k = start(r->ctx, HF_PROFILE_KERNEL_CH, coll, r->rank, fill_kch, &ch);
      proxy_op(r->ctx, coll, r->rank, ch, (r->rank + 1) % r->nranks, 1, r->nsteps, r->nsteps, 0);
      proxy_op(r->ctx, coll, r->rank, ch, (r->rank + r->nranks - 1) % r->nranks, 0, r->nsteps, r->nsteps, 0);
      state(k, HF_STATE_KERNEL_CH_STOP, 0);
      stop(k);
    }
  }
  return NULL;
}

static int run(int ncomms, int ncolls, int nch, int nsteps) {
  struct comm_run* runs = calloc((size_t)ncomms, sizeof *runs);
  pthread_t* th = calloc((size_t)ncomms * 2, sizeof *th);
  for (int i = 0; i < ncomms; i++) {
    int mask = 0;
    char name[32];
    snprintf(name, sizeof name, "comm%d", i);
    /* HARNESS_RANK: every comm of this process has that rank, so 4 harness processes form 4-rank comms */
    int rank = getenv("HARNESS_RANK") ? atoi(getenv("HARNESS_RANK")) % 4 : i % 4;
    runs[i] = (struct comm_run){.rank = rank, .nranks = 4, .ncolls = ncolls, .nch = nch, .nsteps = nsteps};
    runs[i].ctx = init(0x1000u + (uint64_t)i, name, 2, 4, rank, &mask);
  }
  for (int i = 0; i < ncomms; i++) {
    pthread_create(&th[2 * i], NULL, user_main, &runs[i]);
    pthread_create(&th[2 * i + 1], NULL, proxy_main, &runs[i]);
  }
  for (int i = 0; i < 2 * ncomms; i++) pthread_join(th[i], NULL);
  if (getenv("HARNESS_NO_FINALIZE") == NULL)
    for (int i = 0; i < ncomms; i++) {
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      finalize(runs[i].ctx);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      /* HARNESS_TIME_FINALIZE: each finalize's wall time (benchmarks/recorder_finalize_copy.py) */
      if (getenv("HARNESS_TIME_FINALIZE"))
        printf("FINALIZE_NS %lld\n", (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    }
  free(th);
  free(runs);
  printf("DONE\n");
  fflush(stdout);
  return 0;
}

/* ---------------------------------------------------------------- "hang" */

/* HARNESS_LAST_FUNC=FUNC:COUNT: after the all-reduces this rank calls FUNC (its own seq 0: NCCL counts
 * seqNumber per function), which completes; it then finalizes cleanly and exits 0. */
static int finish_other(void* ctx, int rank, int next, int prev, int ndone, const char* last) {
  char func[32];
  const char* colon = strchr(last, ':');
  snprintf(func, sizeof func, "%.*s", (int)(colon - last), last);
  struct coll_arg ca = {0, (size_t)strtoull(colon + 1, NULL, 0), 1, func};
  void* coll = start(ctx, HF_PROFILE_COLL, NULL, rank, fill_coll, &ca);
  stop(coll);
  int ch = 0;
  void* k = start(ctx, HF_PROFILE_KERNEL_CH, coll, rank, fill_kch, &ch);
  proxy_op(ctx, coll, rank, 0, next, 1, 16, 16, 0);
  proxy_op(ctx, coll, rank, 0, prev, 0, 16, 16, 0);
  state(k, HF_STATE_KERNEL_CH_STOP, 0);
  stop(k);
  /* HARNESS_AFTER_LAST=N: N more all-reduces complete after it (NCCL 2.28.9 on the device: the rank that called
   * broadcast also finished the next all_reduce, while the others' all_reduce at its position completed too) */
  int after = getenv("HARNESS_AFTER_LAST") ? atoi(getenv("HARNESS_AFTER_LAST")) : 0;
  for (int i = 0; i < after && i < 64; i++) {
    struct coll_arg more = {(uint64_t)(ndone + i), 1u << 22, 1, NULL};
    void* c2 = start(ctx, HF_PROFILE_COLL, NULL, rank, fill_coll, &more);
    stop(c2);
    void* k2 = start(ctx, HF_PROFILE_KERNEL_CH, c2, rank, fill_kch, &ch);
    proxy_op(ctx, c2, rank, 0, next, 1, 16, 16, 0);
    proxy_op(ctx, c2, rank, 0, prev, 0, 16, 16, 0);
    state(k2, HF_STATE_KERNEL_CH_STOP, 0);
    stop(k2);
  }
  finalize(ctx);
  printf("DONE\n");
  fflush(stdout);
  return 0;
}

static int hang(int rank, int nranks, int ndone, int recv_steps, int send_steps, int recv_state, int send_state,
                uint64_t comm_id) {
  int mask = 0;
  if (getenv("HARNESS_OWN_SIGUSR2")) signal(SIGUSR2, own_handler); /* the app's handler, installed first */
  void* ctx = init(comm_id, "hang_pg", nranks, nranks, rank, &mask);
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  const int nsteps = 16;
  for (int i = 0; i < ndone; i++) {
    struct coll_arg ca = {(uint64_t)i, 1u << 22, 1, NULL};
    void* coll = start(ctx, HF_PROFILE_COLL, NULL, rank, fill_coll, &ca);
    stop(coll);
    int ch = 0;
    void* k = start(ctx, HF_PROFILE_KERNEL_CH, coll, rank, fill_kch, &ch);
    proxy_op(ctx, coll, rank, 0, next, 1, nsteps, nsteps, 0);
    proxy_op(ctx, coll, rank, 0, prev, 0, nsteps, nsteps, 0);
    stop(k);
  }
  const char* last = getenv("HARNESS_LAST_FUNC");
  if (last && strchr(last, ':')) return finish_other(ctx, rank, next, prev, ndone, last);
  struct coll_arg ca = {(uint64_t)ndone, 1u << 22, 1, NULL};
  void* coll = start(ctx, HF_PROFILE_COLL, NULL, rank, fill_coll, &ca);
  stop(coll);
  int ch = 0;
  (void)start(ctx, HF_PROFILE_KERNEL_CH, coll, rank, fill_kch, &ch);
  void* hung_send = proxy_op(ctx, coll, rank, 0, next, 1, nsteps, send_steps, send_state);
  void* hung_recv = proxy_op(ctx, coll, rank, 0, prev, 0, nsteps, recv_steps, recv_state);
  /* extra ops left open on more channels: fills the proxy slot pool */
  int extra = getenv("HARNESS_EXTRA_OPEN_OPS") ? atoi(getenv("HARNESS_EXTRA_OPEN_OPS")) : 0;
  for (int i = 0; i < extra; i++) proxy_op(ctx, coll, rank, 1 + i % 31, next, 1, nsteps, 0, HF_STATE_STEP_SEND_GPU_WAIT);
  if (getenv("HARNESS_PXN")) {
    /* an op posted by another process of the node (PXN): its parent is that process's pointer */
    struct op_arg oa = {getpid() + 100000, 2, next, nsteps, 1};
    void* op = start(ctx, HF_PROFILE_PROXY_OP, (void*)0xdeadbeef0, rank, fill_op, &oa);
    int s0 = 0;
    void* st = start(ctx, HF_PROFILE_PROXY_STEP, op, rank, fill_step, &s0);
    state(st, HF_STATE_STEP_SEND_WAIT, 0);
  }
  if (getenv("HARNESS_ABORT")) {
    /* like ncclCommAbort mid-hang: finalize, then NCCL may still stop open handles */
    finalize(ctx);
    if (hung_send) stop(hung_send);
    if (hung_recv) stop(hung_recv);
  }
  printf("READY\n");
  fflush(stdout);
  for (;;) pause();
  return 0;
}

/* A send step through SendGPUWait and SendPeerWait into SendWait, as NCCL's send proxy records it. */
static void* send_step_into_wait(void* ctx, void* op, int s) {
  void* st = start(ctx, HF_PROFILE_PROXY_STEP, op, 0, fill_step, &s);
  state(st, HF_STATE_STEP_SEND_GPU_WAIT, 0);
  state(st, HF_STATE_STEP_SEND_PEER_WAIT, 0);
  state(st, HF_STATE_STEP_SEND_WAIT, 1 << 19);
  return st;
}

/* One communicator with one enqueued collective whose send op of `nsteps` steps is in progress (the
 * "overlap", "join" and "spans" modes); *ctx gets the communicator's context. */
static void* one_send_op(uint32_t comm_id, const char* name, int nsteps, void** ctx) {
  int mask = 0;
  *ctx = init(comm_id, name, 1, 2, 0, &mask);
  struct coll_arg ca = {0, 1u << 20, 1, NULL};
  void* coll = start(*ctx, HF_PROFILE_COLL, NULL, 0, fill_coll, &ca);
  stop(coll);
  struct op_arg oa = {getpid(), 0, 1, nsteps, 1};
  void* op = start(*ctx, HF_PROFILE_PROXY_OP, coll, 0, fill_op, &oa);
  state(op, HF_STATE_PROXY_OP_IN_PROGRESS, 0);
  return op;
}

/* "overlap": steps of one send op in SendWait together, then apart with a gap (the usage above). */
static int overlap(long first_us, long both_us, long second_us, long gap_us, long third_us) {
  void* ctx = NULL;
  void* op = one_send_op(0x2000u, "overlap", 3, &ctx);
  void* s0 = send_step_into_wait(ctx, op, 0);
  usleep((useconds_t)first_us);
  void* s1 = send_step_into_wait(ctx, op, 1);
  usleep((useconds_t)both_us);
  stop(s0);
  usleep((useconds_t)second_us);
  stop(s1);
  int two = 2;
  void* s2 = start(ctx, HF_PROFILE_PROXY_STEP, op, 0, fill_step, &two);
  state(s2, HF_STATE_STEP_SEND_GPU_WAIT, 0);
  usleep((useconds_t)gap_us); /* waiting for the GPU: not on the network */
  state(s2, HF_STATE_STEP_SEND_PEER_WAIT, 0);
  state(s2, HF_STATE_STEP_SEND_WAIT, 1 << 19);
  usleep((useconds_t)third_us);
  stop(s2);
  stop(op);
  printf("DONE\n");
  fflush(stdout);
  return 0; /* not finalized: the test reads the state file (HARNESS_NO_FINALIZE is the run mode's) */
}

/* "join": an untimed one-step span that a second step joins (the usage above). */
static int join(long alone_us, long zero_us, long both_us, long last_us) {
  void* ctx = NULL;
  void* op = one_send_op(0x2002u, "join", 3, &ctx);
  void* s0 = send_step_into_wait(ctx, op, 0);
  usleep((useconds_t)alone_us);
  stop(s0);
  usleep((useconds_t)zero_us);
  void* s1 = send_step_into_wait(ctx, op, 1);
  usleep((useconds_t)alone_us);
  void* s2 = send_step_into_wait(ctx, op, 2);
  usleep((useconds_t)both_us);
  stop(s1);
  usleep((useconds_t)last_us);
  stop(s2);
  stop(op);
  printf("DONE\n");
  fflush(stdout);
  return 0; /* not finalized: the test reads the state file */
}

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "spans": sequential send steps of a known time in SendWait (the usage above). */
static int spans(int nsteps, long span_ns) {
  void* ctx = NULL;
  void* op = one_send_op(0x2001u, "spans", nsteps, &ctx);
  uint64_t inner = 0, outer = 0;
  for (int s = 0; s < nsteps; s++) {
    void* st = start(ctx, HF_PROFILE_PROXY_STEP, op, 0, fill_step, &s);
    state(st, HF_STATE_STEP_SEND_GPU_WAIT, 0);
    state(st, HF_STATE_STEP_SEND_PEER_WAIT, 0);
    uint64_t t0 = wall_ns();
    state(st, HF_STATE_STEP_SEND_WAIT, 1 << 19);
    uint64_t t1 = wall_ns();
    while (wall_ns() - t1 < (uint64_t)span_ns) {
    }
    uint64_t t2 = wall_ns();
    stop(st);
    uint64_t t3 = wall_ns();
    inner += t2 - t1;
    outer += t3 - t0;
  }
  stop(op);
  printf("INNER_NS %llu\nOUTER_NS %llu\n", (unsigned long long)inner, (unsigned long long)outer);
  fflush(stdout);
  return 0; /* not finalized: the test reads the state file */
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: harness PLUGIN VERSION run|hang ...\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  g_version = atoi(argv[2]);
  g_honor_mask = getenv("HARNESS_HONOR_MASK") != NULL;
  if (getenv("HARNESS_SEND_WAIT_US")) g_send_wait_us = atol(getenv("HARNESS_SEND_WAIT_US"));
  char sym[32];
  snprintf(sym, sizeof sym, "ncclProfiler_v%d", g_version);
  void* p = dlsym(lib, sym);
  if (p == NULL) {
    fprintf(stderr, "no %s\n", sym);
    return 2;
  }
  g_v2 = p;
  g_v3 = p;
  g_v4 = p;
  g_v5 = p;
  g_v6 = p;
  if (strcmp(argv[3], "run") == 0 && argc >= 8)
    return run(atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
  if (strcmp(argv[3], "hang") == 0 && argc >= 11)
    return hang(atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), atoi(argv[8]), atoi(argv[9]),
                atoi(argv[10]), argc > 11 ? strtoull(argv[11], NULL, 0) : 0xabcdef12345678ull);
  if (strcmp(argv[3], "join") == 0 && argc >= 8)
    return join(atol(argv[4]), atol(argv[5]), atol(argv[6]), atol(argv[7]));
  if (strcmp(argv[3], "spans") == 0 && argc >= 6) return spans(atoi(argv[4]), atol(argv[5]));
  if (strcmp(argv[3], "overlap") == 0 && argc >= 9)
    return overlap(atol(argv[4]), atol(argv[5]), atol(argv[6]), atol(argv[7]), atol(argv[8]));
  fprintf(stderr, "bad arguments\n");
  return 2;
}
