/*
 * profiler_plugin.c - NCCL profiler plugin entry points (interfaces v2 to v6)
 * that keep the in-flight state of every communicator in a shared-memory file.
 *
 * Handles returned to NCCL are pointers into the mapped file, tagged in their
 * low 3 bits with the kind of event (records are at least 16-byte aligned):
 *   0 collective / p2p record          1 kernel channel of that record
 *   2 proxy op record                  3 step slot inside a proxy op record
 *   4 an event we accept but do not record (group, API events)
 * so stopEvent/recordEventState need no lookup, lock or allocation.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nccl_profiler_abi.h"
#include "recorder_core.h"
#include "plugin_entry.h"

#define TAG_COLL 0u
#define TAG_KERNEL 1u
#define TAG_PROXY 2u
#define TAG_STEP 3u
#define TAG_OTHER 4u
#define TAG_MASK 7u

#define DEFAULT_MASK \
  (HF_PROFILE_GROUP | HF_PROFILE_COLL | HF_PROFILE_P2P | HF_PROFILE_PROXY_OP | HF_PROFILE_PROXY_STEP | \
   HF_PROFILE_KERNEL_CH)

static _Alignas(64) char g_other_event[64];

static pid_t g_pid;

static inline void* tag(void* p, unsigned t) { return (void*)((uintptr_t)p | t); }
static inline unsigned tag_of(void* h) { return (unsigned)((uintptr_t)h & TAG_MASK); }
static inline void* untag(void* h) { return (void*)((uintptr_t)h & ~(uintptr_t)TAG_MASK); }

/* ------------------------------------------------------------------ init */

static ncclResult_t common_init(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
                                int rank, ncclDebugLogger_t logfn, uint32_t abi) {
  const struct rec_config* cfg = rec_config();
  g_pid = getpid();
  int m = cfg->mask >= 0 ? cfg->mask : DEFAULT_MASK;
  if (abi < 3) m &= ~HF_PROFILE_KERNEL_CH; /* v2 has no kernel channel events */
  char err[640] = {0};
  struct rec_comm* c = rec_comm_open(RECORDER_WRITER_PROFILER, abi, comm_id, name, nnodes, nranks, rank, (uint32_t)m,
                                     err, sizeof err);
  if (c == NULL) {
    if (logfn) logfn(NCCL_LOG_WARN, NCCL_LOGFLAG_INIT, __FILE__, __LINE__, "hang-forensics recorder disabled: %s", err);
    *context = NULL;
    return ncclSystemError; /* NCCL then runs on without the plugin */
  }
  if (abi < 4) c->kch_enabled = 0; /* v2/v3 give nMaxChannels, not the channels used */
  *mask = m;
  *context = c;
  if (logfn)
    logfn(NCCL_LOG_INFO, NCCL_LOGFLAG_INIT, __FILE__, __LINE__,
          "hang-forensics recorder (profiler v%u): comm 0x%llx rank %d/%d nNodes %d mask 0x%x state file %s", abi,
          (unsigned long long)comm_id, rank, nranks, nnodes, m, c->path);
  return ncclSuccess;
}

ncclResult_t init_v2(void** context, int* mask) {
  return common_init(context, 0, mask, "", -1, -1, -1, NULL, 2);
}

ncclResult_t init_v3(void** context, int* mask) {
  return common_init(context, 0, mask, "", -1, -1, -1, NULL, 3);
}

ncclResult_t init_v4(void** context, int* mask, const char* name, uint64_t hash, int nnodes, int nranks,
                            int rank, ncclDebugLogger_t logfn) {
  return common_init(context, hash, mask, name, nnodes, nranks, rank, logfn, 4);
}

ncclResult_t init_v5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
                            int rank, ncclDebugLogger_t logfn) {
  return common_init(context, comm_id, mask, name, nnodes, nranks, rank, logfn, 5);
}

ncclResult_t init_v6(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
                            int rank, ncclDebugLogger_t logfn) {
  return common_init(context, comm_id, mask, name, nnodes, nranks, rank, logfn, 6);
}

ncclResult_t finalize(void* context) {
  rec_comm_close((struct rec_comm*)context);
  return ncclSuccess;
}

/* ----------------------------------------------------------- startEvent */

/* A step's start: its slot's head and time, the op's count of started steps. No clock read here:
 * NCCL records a step's first state (SendGPUWait, RecvWait) right after starting it, in the same
 * block of its proxy loop (net.cc send/recvProxyProgress), and that state stamps the step. Until
 * then it carries its op's latest time, a lower bound. */
static inline __attribute__((always_inline)) void start_step(struct rec_comm* c, void** handle, void* parent,
                                                             const char* u) {
  *handle = NULL;
  if (parent == NULL || tag_of(parent) != TAG_PROXY) return;
  struct recorder_proxy* p = untag(parent);
  if (!rec_is_proxy(c, p)) return;
  int step = ((const struct hf_descr_proxy_step*)u)->step;
  unsigned slot = (unsigned)step % RECORDER_STEP_SLOTS;
  struct recorder_step* s = &p->steps[slot];
  uint64_t then = REC_ATOMIC_LOAD_RELAXED(&p->last_progress_ns);
  /* step, state 0, done 0 and slot share one aligned word: one store (little-endian layout) */
  uint64_t head = (uint64_t)(uint32_t)step | (uint64_t)slot << 48;
  __atomic_store_n((uint64_t*)(void*)s, head, __ATOMIC_RELAXED);
  REC_RELAXED_STORE(&s->ts_ns, then);
  /* one proxy thread drives an op's steps: a plain add, stored whole for readers */
  REC_RELAXED_STORE(&p->steps_started, REC_ATOMIC_LOAD_RELAXED(&p->steps_started) + 1);
  *handle = tag(s, TAG_STEP);
}

/* The descriptor fields every version shares; `u` points at the union (offset 24). Inlined into each
 * version's entry point: one call less on the busiest path (a step's start). */
static inline __attribute__((always_inline)) void start_common(struct rec_comm* c, void** handle, uint64_t type,
                                                               void* parent, int rank, const char* u) {
  *handle = NULL;
  switch (type) {
    case HF_PROFILE_COLL: {
      const struct hf_descr_coll_v4* d = (const struct hf_descr_coll_v4*)u;
      *handle = rec_coll_begin(c, RECORDER_KIND_COLL, d->seqNumber, d->func, d->count, d->datatype, d->root,
                               d->nChannels, d->nWarps, d->algo, d->proto);
      return;
    }
    case HF_PROFILE_P2P: {
      const struct hf_descr_p2p_v4* d = (const struct hf_descr_p2p_v4*)u;
      uint64_t seq = REC_FETCH_ADD(&c->hdr->p2p_next, 1, __ATOMIC_RELAXED);
      *handle = rec_coll_begin(c, RECORDER_KIND_P2P, seq, d->func, d->count, d->datatype, d->peer, d->nChannels, 0,
                               "", "");
      return;
    }
    case HF_PROFILE_PROXY_OP: {
      const struct hf_descr_proxy_op* d = (const struct hf_descr_proxy_op*)u;
      /* A PXN op may carry a parent from another process: only trust our own. */
      struct recorder_coll* pr = (d->pid == g_pid && parent && rec_is_coll(c, parent)) ? parent : NULL;
      struct recorder_proxy* p =
          rec_proxy_begin(c, pr, rank, d->pid, d->peer, d->channelId, d->isSend, d->nSteps, d->chunkSize);
      *handle = p ? tag(p, TAG_PROXY) : NULL;
      return;
    }
    case HF_PROFILE_PROXY_STEP:
      start_step(c, handle, parent, u);
      return;
    case HF_PROFILE_KERNEL_CH: {
      if (parent == NULL || !rec_is_coll(c, parent)) return;
      struct recorder_coll* r = parent;
      rec_coll_child(c, r, REC_ATOMIC_LOAD(&r->index), 1, 0, 0);
      *handle = tag(r, TAG_KERNEL);
      return;
    }
    case HF_PROFILE_GROUP:
    default:
      *handle = tag(g_other_event, TAG_OTHER);
      return;
  }
}

/* Every event but a step's (v4 to v6). Why out of line: 16 of a collective's 21 startEvent calls at one
 * channel are a step's, and the step path then needs no call, so no stack frame (as in stopEvent). */
static __attribute__((noinline)) ncclResult_t start_other(struct rec_comm* c, void** handle, uint64_t type,
                                                          void* parent, int rank, const char* u) {
  start_common(c, handle, type, parent, rank, u);
  return ncclSuccess;
}

/* v2/v3: Coll and P2p differ from v4 (identity first); the rest is shared. */
static ncclResult_t start_v23(struct rec_comm* c, void** handle, uint8_t type, void* parent, int rank,
                              const char* u, int v3) {
  if (type == HF_PROFILE_COLL) {
    uint64_t hash, seq;
    const char *name, *func, *dtype, *algo, *proto;
    size_t count;
    int root;
    uint8_t nwarps;
    if (v3) {
      const struct hf_descr_coll_v3* d = (const struct hf_descr_coll_v3*)u;
      hash = d->commHash, name = d->name, seq = d->seqNumber, func = d->func, count = d->count, root = d->root;
      dtype = d->datatype, nwarps = d->nWarps, algo = d->algo, proto = d->proto;
    } else {
      const struct hf_descr_coll_v2* d = (const struct hf_descr_coll_v2*)u;
      hash = d->commHash, name = d->name, seq = d->seqNumber, func = d->func, count = d->count, root = d->root;
      dtype = d->datatype, nwarps = d->nWarps, algo = d->algo, proto = d->proto;
    }
    rec_comm_identify(c, hash, name, rank);
    *handle = rec_coll_begin(c, RECORDER_KIND_COLL, seq, func, count, dtype, root, 0, nwarps, algo, proto);
    return ncclSuccess;
  }
  if (type == HF_PROFILE_P2P) {
    const struct hf_descr_p2p_v2* d = (const struct hf_descr_p2p_v2*)u;
    rec_comm_identify(c, d->commHash, d->name, rank);
    uint64_t seq = REC_FETCH_ADD(&c->hdr->p2p_next, 1, __ATOMIC_RELAXED);
    *handle = rec_coll_begin(c, RECORDER_KIND_P2P, seq, d->func, d->count, d->datatype, d->peer, 0, 0, "", "");
    return ncclSuccess;
  }
  start_common(c, handle, type, parent, rank, u);
  return ncclSuccess;
}

ncclResult_t start_v2(void* context, void** handle, ncclProfilerEventDescr_v2_t* d) {
  if (context == NULL || d == NULL) {
    if (handle) *handle = NULL;
    return ncclSuccess;
  }
  return start_v23(context, handle, d->type, d->parentObj, d->rank, (const char*)&d->coll, 0);
}

ncclResult_t start_v3(void* context, void** handle, ncclProfilerEventDescr_v3_t* d) {
  if (context == NULL || d == NULL) {
    if (handle) *handle = NULL;
    return ncclSuccess;
  }
  return start_v23(context, handle, d->type, d->parentObj, d->rank, (const char*)&d->coll, 1);
}

ncclResult_t start_v4(void* context, void** handle, ncclProfilerEventDescr_v4_t* d) {
  if (context == NULL || d == NULL) {
    if (handle) *handle = NULL;
    return ncclSuccess;
  }
  if (__builtin_expect(d->type == HF_PROFILE_PROXY_STEP, 1)) {
    start_step(context, handle, d->parentObj, (const char*)&d->coll);
    return ncclSuccess;
  }
  return start_other(context, handle, d->type, d->parentObj, d->rank, (const char*)&d->coll);
}

ncclResult_t start_v5(void* context, void** handle, ncclProfilerEventDescr_v5_t* d) {
  if (context == NULL || d == NULL) {
    if (handle) *handle = NULL;
    return ncclSuccess;
  }
  if (__builtin_expect(d->type == HF_PROFILE_PROXY_STEP, 1)) {
    start_step(context, handle, d->parentObj, (const char*)&d->coll);
    return ncclSuccess;
  }
  return start_other(context, handle, d->type, d->parentObj, d->rank, (const char*)&d->coll);
}

ncclResult_t start_v6(void* context, void** handle, ncclProfilerEventDescr_v6_t* d) {
  if (context == NULL || d == NULL) {
    if (handle) *handle = NULL;
    return ncclSuccess;
  }
  if (__builtin_expect(d->type == HF_PROFILE_PROXY_STEP, 1)) {
    start_step(context, handle, d->parentObj, (const char*)&d->coll);
    return ncclSuccess;
  }
  return start_other(context, handle, d->type, d->parentObj, d->rank, (const char*)&d->coll);
}

/* ------------------------------------------------------------ stopEvent */

/* Proxy records are 256 bytes and start on a multiple of 256 (rec_comm_open): a step's op is its
 * address rounded down, with no load before the op's fields can be read. */
_Static_assert(sizeof(struct recorder_proxy) == 256, "step_owner rounds down to 256");
static inline struct recorder_proxy* step_owner(struct recorder_step* s) {
  return (struct recorder_proxy*)((uintptr_t)s & ~(uintptr_t)(sizeof(struct recorder_proxy) - 1));
}

/* A send step's SendWait edge that reads no counter (a span left untimed opens or closes, a step joins or
 * leaves a timed span that stays open), done here: returns 1. 0: the edge needs the counter, and nothing is
 * changed (send_wait_edge, out of line, does the rest). Why: where one-step spans are sampled, 3 of a
 * timed span's 4 neighbours' edges need no read, and the out-of-line path costs a call and its saved
 * registers. The count of steps in SendWait stops at the 8 step handles NCCL keeps; more would mean a
 * step's slot was reused while it was in SendWait (never seen from NCCL): the span then stays open until
 * the op ends (rec_proxy_end). */
static inline int span_edge_cheap(struct recorder_proxy* op, int entering) {
  struct rec_send_span* sp = rec_span(op);
  uint32_t n = sp->in_wait;
  if (entering) {
    if (n == 0) {
      if (sp->skip == 0) return 0; /* a timed span opens */
      sp->in_wait = 1, sp->peak = 1, sp->timing = 0, sp->skip--;
      return 1;
    }
    if (!sp->timing) return 0; /* a step joins an untimed span: timed from here */
    if (n < RECORDER_STEP_SLOTS) sp->in_wait = n + 1;
    if (sp->peak < RECORDER_STEP_SLOTS) sp->peak++;
    return 1;
  }
  if (n == 1 && sp->timing) return 0; /* a timed span closes */
  if (n == 0) return 1;
  sp->in_wait = n - 1;
  if (n == 1) sp->untimed++;
  return 1;
}

/* A send step entering (`entering`) or leaving SendWait: the op's count of steps there moves, and only
 * where it goes 0 -> 1 (a span opens) or 1 -> 0 (it closes, adding to send_wait_union_us) is the counter
 * read, raw (rec_span_clock: the close converts the span's length, the open converts nothing). Why a span
 * per op: NCCL's send proxy keeps up to 8 steps on the network at once (net.cc: transmitted may run
 * NCCL_STEPS ahead of done), so a pipelined op opens and closes one span, not one per step; and the
 * union is the op's time on the wire, which a sum of overlapping steps overstates. Why SendWait only:
 * in it the data is on the network and nothing else is awaited, so a slow link shows as one sender's
 * long SendWait while its peers wait in SendGPUWait/RecvWait for the data it carries. Where each span holds
 * one step (steps one after another), one span in `every` is timed (RECORDER_FLAG_SEND_WAIT_SAMPLED says
 * how the others count). The span is private to the one proxy thread that drives the op: plain loads
 * and stores. */
static void send_wait_edge(struct recorder_proxy* op, int entering) {
  if (span_edge_cheap(op, entering)) return;
  struct rec_send_span* sp = rec_span(op);
  if (!entering) { /* a timed span closes */
    sp->in_wait = 0;
    rec_span_close(op, sp);
    return;
  }
  if (sp->in_wait == 0) { /* a timed span opens */
    sp->in_wait = 1, sp->peak = 1, sp->timing = 1;
    sp->since = rec_span_clock(&sp->since_ticks);
    return;
  }
  /* an untimed span that a second step joins: steps on the network together are always timed; its first
   * step's lone time counts as an untimed one-step span, and the rest is timed from here */
  if (sp->in_wait < RECORDER_STEP_SLOTS) sp->in_wait++;
  if (sp->peak < RECORDER_STEP_SLOTS) sp->peak++;
  sp->untimed++;
  sp->skip = 0;
  sp->timing = 1;
  sp->since = rec_span_clock(&sp->since_ticks);
}

/* A step's change to `next` (-1: its stop). A send step's SendWait edges move the op's span
 * (send_wait_edge, which reads the counter only where the span opens or closes); the step itself, like
 * every step, is stamped with the event clock: a reader uses a step's time to tell how long ago it moved
 * (ms), never to sub-ms. Why: a precise stamp costs 7-20 ns (the counter and its conversion) against
 * ~0.3 (a published tick). Progress words are stored relaxed: each is whole for a reader, and no reader
 * orders one against another. */
static inline uint64_t step_change(struct recorder_step* s, int next) {
  struct recorder_proxy* op = step_owner(s);
  int was_wait = REC_ATOMIC_LOAD_RELAXED(&s->state) == HF_STATE_STEP_SEND_WAIT;
  int is_wait = next == HF_STATE_STEP_SEND_WAIT;
  if (op->is_send && was_wait != is_wait) send_wait_edge(op, is_wait);
  uint64_t now = rec_event_ns();
  REC_RELAXED_STORE(&s->ts_ns, now);
  REC_RELAXED_STORE(&op->last_progress_ns, now);
  return now;
}

/* The published tick when it can stamp this change (the tick runs and is marked used, and a send step's
 * SendWait edge, if any, needs no counter read: span_edge_cheap), else 0: the caller then takes the
 * out-of-line path. Why split: with no call on it, the common path needs no saved registers (5 pushes and
 * pops a call less). */
static inline uint64_t step_tick(const struct recorder_step* s, struct recorder_proxy* op, int next) {
  REC_COUNTED(tick);
  uint64_t t = __atomic_load_n(&rec_tick.ns, __ATOMIC_RELAXED);
  if (!__atomic_load_n(&rec_tick.used, __ATOMIC_RELAXED) || t == 0) return 0;
  if (op->is_send) {
    int was_wait = REC_ATOMIC_LOAD_RELAXED(&s->state) == HF_STATE_STEP_SEND_WAIT;
    int is_wait = next == HF_STATE_STEP_SEND_WAIT;
    if (was_wait != is_wait && !span_edge_cheap(op, is_wait)) return 0;
  }
  return t;
}

static inline void step_done(struct recorder_step* s, struct recorder_proxy* op) {
  REC_RELAXED_STORE(&s->done, 1);
  REC_RELAXED_STORE(&op->steps_done, REC_ATOMIC_LOAD_RELAXED(&op->steps_done) + 1);
}

static inline void step_state(struct recorder_step* s, struct recorder_proxy* op, ncclProfilerEventState_t state,
                              const void* args) {
  REC_RELAXED_STORE(&s->state, (uint8_t)state);
  REC_RELAXED_STORE(&op->last_state, (uint8_t)state);
  REC_RELAXED_STORE(&op->last_step, REC_ATOMIC_LOAD_RELAXED(&s->step));
  if (args)
    REC_RELAXED_STORE(&op->trans_bytes, (uint64_t)((const ncclProfilerEventStateArgs_v5_t*)args)->proxyStep.transSize);
}

static __attribute__((noinline)) ncclResult_t stop_step_slow(struct recorder_step* s) {
  step_change(s, -1);
  step_done(s, step_owner(s));
  return ncclSuccess;
}

static __attribute__((noinline)) ncclResult_t record_step_slow(struct recorder_step* s, ncclProfilerEventState_t state,
                                                               const void* args) {
  step_change(s, (int)state);
  step_state(s, step_owner(s), state, args);
  return ncclSuccess;
}

/* Steps first: 80 of a collective's 93 calls at one channel are a step's (NULL is tag 0, not a step). */
ncclResult_t stop_event(void* handle) {
  if (__builtin_expect(tag_of(handle) == TAG_STEP, 1)) {
    struct recorder_step* s = untag(handle);
    struct recorder_proxy* op = step_owner(s);
    uint64_t now = step_tick(s, op, -1);
    if (__builtin_expect(now == 0, 0)) return stop_step_slow(s);
    REC_RELAXED_STORE(&s->ts_ns, now);
    REC_RELAXED_STORE(&op->last_progress_ns, now);
    step_done(s, op);
    return ncclSuccess;
  }
  if (handle == NULL) return ncclSuccess;
  void* p = untag(handle);
  switch (tag_of(handle)) {
    case TAG_COLL: {
      struct recorder_coll* r = p;
      rec_coll_enqueued(rec_coll_owner(r), r);
      return ncclSuccess;
    }
    case TAG_KERNEL: {
      struct recorder_coll* r = p;
      rec_coll_child(rec_coll_owner(r), r, REC_ATOMIC_LOAD(&r->index), 1, 1, 0);
      return ncclSuccess;
    }
    case TAG_PROXY:
      rec_proxy_end(p);
      return ncclSuccess;
    default:
      return ncclSuccess;
  }
}

/* ----------------------------------------------------- recordEventState */

static inline __attribute__((always_inline)) ncclResult_t record_state(void* handle, ncclProfilerEventState_t state,
                                                                        const void* args) {
  if (__builtin_expect(tag_of(handle) == TAG_STEP, 1)) {
    struct recorder_step* s = untag(handle);
    struct recorder_proxy* op = step_owner(s);
    uint64_t now = step_tick(s, op, (int)state);
    if (__builtin_expect(now == 0, 0)) return record_step_slow(s, state, args);
    REC_RELAXED_STORE(&s->ts_ns, now);
    REC_RELAXED_STORE(&op->last_progress_ns, now);
    step_state(s, op, state, args);
    return ncclSuccess;
  }
  if (tag_of(handle) == TAG_PROXY && state == HF_STATE_PROXY_OP_IN_PROGRESS) {
    struct recorder_proxy* op = untag(handle);
    REC_ATOMIC_STORE(&op->in_progress, 1);
    REC_ATOMIC_STORE(&op->last_progress_ns, rec_event_ns());
  }
  return ncclSuccess; /* KernelChStop is followed by stopEvent, which counts it */
}

/* v2/v3 state args begin with transSize too (proxyOp.transSize). */
ncclResult_t record_v2(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v2_t* a) {
  return record_state(h, s, a);
}

ncclResult_t record_v4(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v4_t* a) {
  return record_state(h, s, a);
}
ncclResult_t record_v5(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v5_t* a) {
  return record_state(h, s, a);
}

/* ------------------------------------------------------------- exports */

__attribute__((visibility("default"))) ncclProfiler_v2_t ncclProfiler_v2 = {
    "hang-forensics-recorder", init_v2, start_v2, stop_event, record_v2, finalize};
__attribute__((visibility("default"))) ncclProfiler_v3_t ncclProfiler_v3 = {
    "hang-forensics-recorder", init_v3, start_v3, stop_event, record_v2, finalize};
__attribute__((visibility("default"))) ncclProfiler_v4_t ncclProfiler_v4 = {
    "hang-forensics-recorder", init_v4, start_v4, stop_event, record_v4, finalize};
__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
    "hang-forensics-recorder", init_v5, start_v5, stop_event, record_v5, finalize};
__attribute__((visibility("default"))) ncclProfiler_v6_t ncclProfiler_v6 = {
    "hang-forensics-recorder", init_v6, start_v6, stop_event, record_v5, finalize};
