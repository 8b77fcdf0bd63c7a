/*
 * count_plugin.c - a second profiler plugin for the chaining tests: it counts what NCCL (or the
 * harness, or the recorder forwarding to it) hands it, and checks that every parent and handle
 * it receives is one it made. Run once alone and once behind the recorder
 * (FORENSICS_RECORDER_CHAIN): the counts must be equal.
 *
 *   COUNT_PLUGIN_OUT    file to append one JSON line per communicator to, at finalize
 *   COUNT_PLUGIN_MASK   activation mask it asks for (default 0x5f: Group Coll P2p ProxyOp ProxyStep KernelCh)
 *
 * Exports interfaces v2 to v6 (the descriptor head, type then parentObj at offset 8, is alike in all).
 * Built with -DCOUNT_NOOP it counts nothing and returns one static handle: the cheapest second
 * plugin there is, for measuring what chaining itself costs (benchmarks/recorder_event_cost.py).
 *
 * It also says in which order NCCL runs a send's steps (issue 44: the recorder's cost differs): per
 * send proxy op, the most of its steps in SendWait at once. "overlap" in its line: send ops, those
 * of two steps or more, and those whose steps were in SendWait together (pipelined), by log2 of the
 * op's bytes (nSteps x chunkSize).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_profiler_abi.h"

#define EV_MAGIC 0xC0C0A11EC0C0A11Eull
#define NTYPES 16
#define NSTATES 32
#define NBUCKETS 40 /* log2 of a send op's bytes */

struct counts {
  long start[NTYPES], stop[NTYPES], state[NSTATES];
  long bad_parent, open;
  long send_ops[NBUCKETS], multi_step[NBUCKETS], pipelined[NBUCKETS];
  int rank, index;
  uint64_t comm;
};

struct ev {
  uint64_t magic;
  int type_bit;
  int stopped;
  struct counts* c;
  /* a send proxy op: its steps in SendWait now and at most; a step: its op, and whether it is in SendWait */
  struct ev* op;
  int is_send, n_steps, in_wait, most_in_wait, bucket;
};

static int log2_bucket(long long bytes) {
  int b = 0;
  while (bytes > 1 && b < NBUCKETS - 1) bytes >>= 1, b++;
  return b;
}

static int g_index;
#define MAX_LIVE 256
static struct counts* g_live[MAX_LIVE]; /* not yet finalized: written at exit if NCCL never finalizes them */
static long g_bad_handle; /* a stop/record with a handle this plugin never made */

static int bit_of(uint64_t type) {
  for (int b = 0; b < NTYPES; b++)
    if (type == (1ull << b)) return b;
  return NTYPES - 1;
}

static ncclResult_t common_init(void** context, int* mask, uint64_t comm, int rank) {
  struct counts* c = calloc(1, sizeof *c);
  if (c == NULL) return ncclSystemError;
  c->comm = comm;
  c->rank = rank;
  c->index = __atomic_fetch_add(&g_index, 1, __ATOMIC_RELAXED);
  if (c->index < MAX_LIVE) __atomic_store_n(&g_live[c->index], c, __ATOMIC_RELEASE);
  const char* m = getenv("COUNT_PLUGIN_MASK");
  *mask = m && *m ? (int)strtol(m, NULL, 0) : 0x5f;
  *context = c;
  return ncclSuccess;
}

static ncclResult_t init_v2(void** ctx, int* mask) { return common_init(ctx, mask, 0, -1); }
static ncclResult_t init_v4(void** ctx, int* mask, const char* n, uint64_t h, int nn, int nr, int r,
                            ncclDebugLogger_t l) {
  (void)n, (void)nn, (void)nr, (void)l;
  return common_init(ctx, mask, h, r);
}
static ncclResult_t init_v5(void** ctx, uint64_t id, int* mask, const char* n, int nn, int nr, int r,
                            ncclDebugLogger_t l) {
  (void)n, (void)nn, (void)nr, (void)l;
  return common_init(ctx, mask, id, r);
}

/* A parent must be one of our events, except a PXN proxy op's, which comes from another process. */
static void check_parent(struct counts* c, uint64_t type, void* parent, const void* u) {
  if (parent == NULL) return;
  if (type == HF_PROFILE_PROXY_OP && ((const struct hf_descr_proxy_op*)u)->pid != getpid()) return;
  if (((struct ev*)parent)->magic != EV_MAGIC) __atomic_add_fetch(&c->bad_parent, 1, __ATOMIC_RELAXED);
}

static ncclResult_t common_start(void* context, void** handle, uint64_t type, void* parent, const void* u) {
  struct counts* c = context;
#ifdef COUNT_NOOP
  static struct ev noop = {EV_MAGIC, NTYPES - 1, 1, NULL};
  (void)c, (void)type, (void)parent, (void)u;
  *handle = &noop;
  return ncclSuccess;
#endif
  *handle = NULL;
  if (c == NULL) return ncclSuccess;
  check_parent(c, type, parent, u);
  struct ev* e = malloc(sizeof *e);
  if (e == NULL) return ncclSuccess;
  memset(e, 0, sizeof *e);
  e->magic = EV_MAGIC;
  e->type_bit = bit_of(type);
  e->c = c;
  if (type == HF_PROFILE_PROXY_OP) {
    const struct hf_descr_proxy_op* d = u;
    e->is_send = d->isSend;
    e->n_steps = d->nSteps;
    e->bucket = log2_bucket((long long)d->nSteps * d->chunkSize);
  } else if (type == HF_PROFILE_PROXY_STEP && parent != NULL && ((struct ev*)parent)->magic == EV_MAGIC &&
             ((struct ev*)parent)->is_send) {
    e->op = parent;
  }
  __atomic_add_fetch(&c->start[e->type_bit], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->open, 1, __ATOMIC_RELAXED);
  *handle = e;
  return ncclSuccess;
}

static ncclResult_t start_v2(void* c, void** h, ncclProfilerEventDescr_v2_t* d) {
  return common_start(c, h, d->type, d->parentObj, &d->coll);
}
static ncclResult_t start_v3(void* c, void** h, ncclProfilerEventDescr_v3_t* d) {
  return common_start(c, h, d->type, d->parentObj, &d->coll);
}
static ncclResult_t start_v4(void* c, void** h, ncclProfilerEventDescr_v4_t* d) {
  return common_start(c, h, d->type, d->parentObj, &d->coll);
}
static ncclResult_t start_v5(void* c, void** h, ncclProfilerEventDescr_v5_t* d) {
  return common_start(c, h, d->type, d->parentObj, &d->coll);
}
static ncclResult_t start_v6(void* c, void** h, ncclProfilerEventDescr_v6_t* d) {
  return common_start(c, h, d->type, d->parentObj, &d->coll);
}

static struct ev* mine(void* handle) {
  struct ev* e = handle;
  if (e == NULL) return NULL;
  if (e->magic != EV_MAGIC) {
    __atomic_add_fetch(&g_bad_handle, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  return e;
}

/* A send step enters or leaves SendWait: its op's count of steps there, and the most it reached. */
static void send_wait(struct ev* step, int entering) {
  if (step->op == NULL || step->in_wait == entering) return;
  step->in_wait = entering;
  int now = __atomic_add_fetch(&step->op->in_wait, entering ? 1 : -1, __ATOMIC_RELAXED);
  int most = __atomic_load_n(&step->op->most_in_wait, __ATOMIC_RELAXED);
  while (now > most && !__atomic_compare_exchange_n(&step->op->most_in_wait, &most, now, 0, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED)) {
  }
}

static void send_op_done(struct ev* e) {
  if (e->type_bit != bit_of(HF_PROFILE_PROXY_OP) || !e->is_send) return;
  __atomic_add_fetch(&e->c->send_ops[e->bucket], 1, __ATOMIC_RELAXED);
  if (e->n_steps >= 2) __atomic_add_fetch(&e->c->multi_step[e->bucket], 1, __ATOMIC_RELAXED);
  if (__atomic_load_n(&e->most_in_wait, __ATOMIC_RELAXED) >= 2)
    __atomic_add_fetch(&e->c->pipelined[e->bucket], 1, __ATOMIC_RELAXED);
}

static ncclResult_t stop(void* handle) {
#ifdef COUNT_NOOP
  (void)handle;
  return ncclSuccess;
#endif
  struct ev* e = mine(handle);
  if (e == NULL) return ncclSuccess;
  if (__atomic_exchange_n(&e->stopped, 1, __ATOMIC_RELAXED)) { /* stopped twice */
    __atomic_add_fetch(&g_bad_handle, 1, __ATOMIC_RELAXED);
    return ncclSuccess;
  }
  send_wait(e, 0);
  send_op_done(e);
  __atomic_add_fetch(&e->c->stop[e->type_bit], 1, __ATOMIC_RELAXED);
  __atomic_sub_fetch(&e->c->open, 1, __ATOMIC_RELAXED);
  return ncclSuccess; /* never freed: NCCL names a stopped Coll as the parent of later events */
}

static ncclResult_t record(void* handle, ncclProfilerEventState_t state, void* args) {
  (void)args;
#ifdef COUNT_NOOP
  (void)handle, (void)state;
  return ncclSuccess;
#endif
  struct ev* e = mine(handle);
  if (e == NULL) return ncclSuccess;
  __atomic_add_fetch(&e->c->state[(unsigned)state % NSTATES], 1, __ATOMIC_RELAXED);
  send_wait(e, state == HF_STATE_STEP_SEND_WAIT);
  return ncclSuccess;
}

static void put_array(char* buf, size_t n, size_t* at, const char* key, const long* v, int len) {
  *at += (size_t)snprintf(buf + *at, n - *at, "\"%s\": {", key);
  int first = 1;
  for (int i = 0; i < len && *at < n; i++) {
    if (v[i] == 0) continue;
    *at += (size_t)snprintf(buf + *at, n - *at, "%s\"%d\": %ld", first ? "" : ", ", i, v[i]);
    first = 0;
  }
  *at += (size_t)snprintf(buf + *at, n - *at, "}, ");
}

static void dump(struct counts* c, int finalized) {
  const char* out = getenv("COUNT_PLUGIN_OUT");
  if (out && *out) {
    char buf[8192];
    size_t at = (size_t)snprintf(buf, sizeof buf, "{\"pid\": %d, \"index\": %d, \"rank\": %d, \"comm\": \"0x%llx\", ",
                                 (int)getpid(), c->index, c->rank, (unsigned long long)c->comm);
    put_array(buf, sizeof buf, &at, "start", c->start, NTYPES);
    put_array(buf, sizeof buf, &at, "stop", c->stop, NTYPES);
    put_array(buf, sizeof buf, &at, "state", c->state, NSTATES);
    at += (size_t)snprintf(buf + at, sizeof buf - at, "\"overlap\": {");
    put_array(buf, sizeof buf, &at, "send_ops", c->send_ops, NBUCKETS);
    put_array(buf, sizeof buf, &at, "multi_step", c->multi_step, NBUCKETS);
    put_array(buf, sizeof buf, &at, "pipelined", c->pipelined, NBUCKETS);
    at -= 2; /* the last ", " */
    at += (size_t)snprintf(buf + at, sizeof buf - at, "}, ");
    at += (size_t)snprintf(buf + at, sizeof buf - at,
                           "\"bad_parent\": %ld, \"bad_handle\": %ld, \"open\": %ld, \"finalized\": %d}\n",
                           c->bad_parent, __atomic_load_n(&g_bad_handle, __ATOMIC_RELAXED), c->open, finalized);
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (write(fd, buf, at < sizeof buf ? at : sizeof buf - 1) < 0) { /* nothing more to do */ }
      close(fd);
    }
  }
}

static ncclResult_t fini(void* context) {
  struct counts* c = context;
  if (c == NULL) return ncclSuccess;
  if (c->index < MAX_LIVE) __atomic_store_n(&g_live[c->index], NULL, __ATOMIC_RELEASE);
  dump(c, 1);
  free(c);
  return ncclSuccess;
}

/* A process that exits without finalizing a communicator (an abort) still leaves its counts. */
__attribute__((destructor)) static void at_unload(void) {
  for (int i = 0; i < MAX_LIVE; i++) {
    struct counts* c = __atomic_exchange_n(&g_live[i], NULL, __ATOMIC_ACQ_REL);
    if (c) dump(c, 0);
  }
}

#define EXPORT __attribute__((visibility("default")))
EXPORT const ncclProfiler_v2_t ncclProfiler_v2 = {"count", init_v2, start_v2, stop, (void*)record, fini};
EXPORT const ncclProfiler_v3_t ncclProfiler_v3 = {"count", init_v2, start_v3, stop, (void*)record, fini};
EXPORT const ncclProfiler_v4_t ncclProfiler_v4 = {"count", init_v4, start_v4, stop, (void*)record, fini};
#ifndef COUNT_WITHOUT_V5 /* the chaining test of a plugin that lacks the version NCCL picked */
EXPORT const ncclProfiler_v5_t ncclProfiler_v5 = {"count", init_v5, start_v5, stop, (void*)record, fini};
#endif
EXPORT const ncclProfiler_v6_t ncclProfiler_v6 = {"count", init_v5, start_v6, stop, (void*)record, fini};
