/*
 * recorder_core.h - the state file and its records, shared by the profiler plugin
 * and the LD_PRELOAD shim so both write the very same format.
 *
 * Hot-path rules: after rec_comm_open() nothing here allocates, locks or blocks.
 * Records live inside the mmap'ed file; handles given to NCCL point into it.
 */
#ifndef HF_RECORDER_CORE_H
#define HF_RECORDER_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "recorder_format.h"

#define REC_ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define REC_ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define REC_ATOMIC_LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define REC_RELAXED_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* Breakdown builds (benchmarks/recorder_event_cost.py --breakdown; never the library NCCL loads), so
 * where the time goes is measured, not guessed:
 *   REC_COUNT           counts, per thread in hf_recorder_counts, the precise clock reads, the loads of
 *                       the published tick, the vDSO coarse reads and the atomic read-modify-writes
 *   REC_ABLATE_PRECISE  the precise clock returns the event clock (what the precise stamps cost)
 *   REC_ABLATE_RMW      a read-modify-write is a relaxed load and store (what the atomics cost)
 *   REC_ABLATE_TOUCH    the header's last_event_ns is left alone (what the header's line costs)
 *   REC_NO_COUNTER      precise stamps read the vDSO's CLOCK_REALTIME, as on a machine whose counter is
 *                       not trusted (what the counter saves; negative in the breakdown) */
#ifdef REC_COUNT
struct rec_counts {
  uint64_t precise, tick, coarse, rmw;
};
extern __thread struct rec_counts hf_recorder_counts;
#define REC_COUNTED(field) (hf_recorder_counts.field++)
#else
#define REC_COUNTED(field) ((void)0)
#endif
#ifdef REC_ABLATE_RMW
#define REC_FETCH_ADD(p, v, order)                                          \
  __extension__({                                                           \
    __typeof__(*(p)) rec_old_ = __atomic_load_n((p), __ATOMIC_RELAXED);     \
    __atomic_store_n((p), rec_old_ + (v), __ATOMIC_RELAXED);                \
    rec_old_;                                                               \
  })
#define REC_CAS(p, expected, desired)                                       \
  __extension__({                                                           \
    __typeof__(*(p)) rec_cur_ = __atomic_load_n((p), __ATOMIC_RELAXED);     \
    int rec_ok_ = rec_cur_ == *(expected);                                  \
    if (rec_ok_) __atomic_store_n((p), (desired), __ATOMIC_RELAXED);        \
    else *(expected) = rec_cur_;                                            \
    rec_ok_;                                                                \
  })
#else
#define REC_FETCH_ADD(p, v, order) (REC_COUNTED(rmw), __atomic_fetch_add((p), (v), (order)))
#define REC_CAS(p, expected, desired) \
  (REC_COUNTED(rmw), __atomic_compare_exchange_n((p), (expected), (desired), 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
#endif
#define REC_ATOMIC_ADD(p, v) ((void)REC_FETCH_ADD((p), (v), __ATOMIC_ACQ_REL))

/* A step's first word (step, state, done, slot) is written with one store: at a step's start
 * (profiler_plugin.c) and when a proxy op's slots are cleared (rec_proxy_begin). */
_Static_assert(offsetof(struct recorder_step, step) == 0 && offsetof(struct recorder_step, state) == 4 &&
                   offsetof(struct recorder_step, done) == 5 && offsetof(struct recorder_step, slot) == 6,
               "step head layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the state file is little-endian");

/* FORENSICS_RECORDER_SEND_WAIT_EVERY's default (breakdown builds set it: -DREC_SEND_WAIT_EVERY_DEFAULT=1). */
#ifndef REC_SEND_WAIT_EVERY_DEFAULT
#define REC_SEND_WAIT_EVERY_DEFAULT 4
#endif

struct rec_config {
  char dir[256];
  uint32_t ring_len;
  uint32_t proxy_slots;
  int signal;          /* 0: no snapshot signal */
  uint32_t heartbeat_ms;
  uint32_t tick_ms;     /* period of the event clock while events come; 0: events read the vDSO */
  uint32_t send_wait_every; /* one one-step SendWait span in N timed (RECORDER_FLAG_SEND_WAIT_SAMPLED) */
  int keep;            /* keep the .bin after a clean finalize */
  int mask;            /* -1: writer's default */
  int snapshot_on_finalize;
  char copy_dir[256];  /* where a copy of the state goes when the job dies ("" = none); may hold %h, %p */
};

/* The four names of the latest record begun (func, dtype, algo, proto), by the address NCCL passed and
 * as copied into a record. Why: NCCL passes its own constant strings (ncclFuncToString and the like),
 * so the next record almost always names the same addresses, and copying a remembered image of fixed
 * size is a few moves where measuring and padding each name is three libc calls (12 per collective).
 * Written by the thread that begins records of the communicator (one at a time: NCCL does not let
 * two threads use one communicator at once). */
struct rec_names {
  const char* src[4];
  char func[24];
  char dtype[16];
  char algo[16];
  char proto[8];
};

/* A proxy slot's private companion (rec_comm.spans, one per slot): its communicator, and for a send
 * op its SendWait span: how many of its steps are in SendWait now, since when that count is above 0, and
 * the op's timed and untimed spans (RECORDER_FLAG_SEND_WAIT_SAMPLED). The record's writer_private points
 * here. Why not in the file: the 256-byte record has no free word, and a reader needs none of it (a hung
 * op's steps show their states). Why a pointer in the record: a SendWait edge then reaches its span with
 * one load from a line it already holds, not through the communicator's base and the slot's index.
 * Written by the one proxy thread that drives the op. */
struct rec_send_span {
  struct rec_comm* comm;
  uint64_t since;       /* rec_span_clock() when in_wait went 0 -> 1 (timing): counter ticks, or ns (since_ticks 0) */
  uint64_t timed_ns;    /* the op's closed timed spans, ns */
  uint64_t single_ns;   /* of which spans of one step */
  uint64_t last_single; /* the latest timed one-step span, ns: an untimed span's worth while the op runs */
  uint32_t in_wait;     /* steps in SendWait now, at most RECORDER_STEP_SLOTS */
  uint8_t since_ticks;  /* 1: `since` is the counter's ticks */
  uint8_t timing;       /* the open span is timed */
  uint8_t peak;         /* most steps in SendWait at once in the open span */
  uint8_t pad8;
  uint32_t singles;     /* timed one-step spans */
  uint32_t untimed;     /* one-step spans left untimed */
  uint16_t skip;        /* one-step spans still to leave untimed before the next is timed */
  uint16_t every;       /* one one-step span in `every` timed (1: all) */
  uint32_t pad;         /* 64 bytes: one to a cache line */
};
_Static_assert(sizeof(struct rec_send_span) == 64, "a span companion is one cache line");

/* One communicator's mapping. Private memory; the file holds the shared part. */
struct rec_comm {
  struct rec_names names; /* rec_coll_begin's */
  struct recorder_header* hdr;
  struct recorder_coll* ring;
  struct recorder_proxy* proxy;
  uint32_t ring_len;
  uint32_t proxy_slots;
  uint32_t ring_mask;    /* ring_len - 1 where ring_len is a power of two (the default), else 0 */
  uint32_t proxy_mask;   /* the same for proxy_slots */
  uint32_t send_wait_every; /* one one-step SendWait span in N timed (FORENSICS_RECORDER_SEND_WAIT_EVERY) */
  size_t size;
  int kch_enabled;       /* KernelCh events are on and nChannels is exact: completion waits for each */
  int finalized;
  char path[512];
  char txt_path[512];
  char copy_path[512];   /* "" = no copy: the copy of the .bin beside the NCCL logs */
  char copy_tmp[520];
  struct rec_send_span spans[]; /* proxy_slots of them, allocated with the struct */
};

const struct rec_config* rec_config(void);
uint64_t rec_now_ns(void);
typedef int (*rec_clock_fn)(clockid_t, struct timespec*);
extern rec_clock_fn rec_vdso_clock; /* set by rec_config() */

/* Event times: a hang is seconds long, so a few milliseconds are precision enough. While NCCL
 * is busy, the heartbeat thread publishes CLOCK_REALTIME in rec_tick.ns every tick_ms (4): an
 * event's stamp is then one load (~0.3 ns) instead of a vDSO call (~3 ns), and a collective of one
 * channel takes ~60. After REC_TICK_IDLE ticks without an event the thread stops ticking (ns = 0):
 * events read the vDSO's coarse clock and mark the tick used, which starts it again within one
 * beat. A forked child, which has no heartbeat thread, reads the vDSO's clock too. The line is the
 * tick's alone: NCCL's threads read it, and nothing they write often may share it. */
#define REC_TICK_IDLE 25
struct rec_tick {
  _Alignas(64) uint64_t ns; /* 0: not ticking */
  uint32_t used;            /* an event read the clock since the thread last looked */
  char pad[52];
};
extern struct rec_tick rec_tick;
static inline uint64_t rec_event_ns(void) {
  REC_COUNTED(tick);
  uint64_t t = __atomic_load_n(&rec_tick.ns, __ATOMIC_RELAXED);
  if (__builtin_expect(!__atomic_load_n(&rec_tick.used, __ATOMIC_RELAXED), 0))
    __atomic_store_n(&rec_tick.used, 1, __ATOMIC_RELAXED); /* once a tick: the first event after it */
  if (__builtin_expect(t != 0, 1)) return t;
  struct timespec ts;
  REC_COUNTED(coarse);
  rec_vdso_clock(CLOCK_REALTIME_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME at ns precision from the CPU's tick counter (TSC / cntvct), rebased on the
 * precise clock by the heartbeat thread; rec_now_ns() where no invariant counter exists. Not inline:
 * inlined into the step path it measured ~3 ns a call slower (AMD EPYC; the rdtsc's placement). */
uint64_t rec_fast_ns(void);

/* The counter's conversion to CLOCK_REALTIME (recorder_core.c, "the fast clock"): two bases published by
 * index, written by calibration and the heartbeat thread only; rec_ticks_ok while the counter is trusted. */
struct tick_base {
  uint64_t ticks;
  uint64_t ns;
  uint64_t mult; /* ns per tick, fixed point << 32 */
};
extern struct tick_base rec_tick_base[2];
extern uint32_t rec_tick_slot;
extern int rec_ticks_ok;

static inline uint64_t rec_read_ticks(void) {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

/* A SendWait span's edge: the counter's raw ticks where it is trusted (*ticks = 1), else CLOCK_REALTIME ns
 * through the vDSO. Why raw: a span needs only its length, so the close converts one difference (one
 * multiply) and the open converts nothing; a precise stamp (rec_fast_ns) is a call, two loads of the base
 * and a multiply on top of the counter read. The edges' steps are stamped with the event clock instead. */
uint64_t rec_span_clock_slow(uint8_t* ticks);
static inline uint64_t rec_span_clock(uint8_t* ticks) {
#if defined(REC_ABLATE_PRECISE) || !(defined(__x86_64__) || defined(__aarch64__))
  return rec_span_clock_slow(ticks);
#else
  if (__builtin_expect(!__atomic_load_n(&rec_ticks_ok, __ATOMIC_RELAXED), 0)) return rec_span_clock_slow(ticks);
  REC_COUNTED(precise);
  *ticks = 1;
  return rec_read_ticks();
#endif
}

/* ns between two span edges read by rec_span_clock; 0 where they are on different clocks (the counter was
 * given up mid-span: the span is lost, not misread) or the second is not later. */
static inline uint64_t rec_span_ns(uint64_t since, uint32_t since_ticks, uint64_t now, uint32_t now_ticks) {
  if (since_ticks != now_ticks || now <= since) return 0;
  if (!now_ticks) return now - since;
  uint64_t mult = rec_tick_base[__atomic_load_n(&rec_tick_slot, __ATOMIC_ACQUIRE)].mult;
  return (uint64_t)(((unsigned __int128)(now - since) * mult) >> 32);
}

/* Stamps hdr->last_event_ns only when `now` is newer by REC_TOUCH_NS: the header's cache line is then
 * written about once a millisecond, not at every precise stamp (each is newer by some ns), so the user
 * and proxy threads do not pass it to each other per event. Readers show it in ms ("last event 3.0 ms
 * ago" in snapshots); the event clock itself lags by up to its 4 ms tick. */
#ifndef REC_TOUCH_NS
#define REC_TOUCH_NS 1000000ull
#endif
void rec_touch(struct rec_comm* c, uint64_t now);

/* i's slot among `len` (ring_mask, proxy_mask): a mask where the length is a power of two, as by default.
 * Why: `%` by a length known only at run time is a divide, 20-40 cycles on x86, and the hot path
 * took one per record and two per proxy op (begin, end). */
static inline uint64_t rec_slot(uint64_t i, uint32_t len, uint32_t mask) {
  return __builtin_expect(mask != 0, 1) ? (i & mask) : i % len;
}
static inline uint32_t rec_mask(uint32_t len) { return (len & (len - 1)) == 0 ? len - 1 : 0; }

/* Creates and maps the state file of one communicator; registers it with the
 * heartbeat thread (started on first use). Returns NULL and fills err on failure. */
struct rec_comm* rec_comm_open(uint32_t writer_kind, uint32_t abi_version, uint64_t comm_id, const char* name,
                               int nnodes, int nranks, int rank, uint32_t mask, char* err, size_t errlen);

/* Marks the communicator finalized, writes a text snapshot when asked to (or when
 * something was still in flight), unmaps; removes the .bin after a clean run unless
 * FORENSICS_RECORDER_KEEP=1. */
void rec_comm_close(struct rec_comm* c);

/* Writes a copy of the state file (the mapping's bytes) to copy_path, under a
 * temporary name renamed when whole. Async-signal-safe (unlink, open, write, rename).
 * `flag`: RECORDER_FLAG_DEATH_COPY (the whole file) or RECORDER_FLAG_FINALIZE_COPY
 * (header and ring only: a clean finalize has no proxy op in flight). */
void rec_copy_out(const struct rec_comm* c, uint32_t flag);

/* Writes <file>.txt, a human-readable view of the state. Not for the hot path. */
int rec_snapshot(struct rec_comm* c, const char* reason);

/* Collective / p2p records (ring, oldest overwritten). */
struct recorder_coll* rec_coll_begin(struct rec_comm* c, uint8_t kind, uint64_t seq, const char* func, uint64_t count,
                                     const char* dtype, int root_or_peer, uint8_t n_channels, uint8_t n_warps,
                                     const char* algo, const char* proto);
void rec_coll_enqueued(struct rec_comm* c, struct recorder_coll* r);
void rec_coll_complete(struct rec_comm* c, struct recorder_coll* r, uint64_t when_ns);
/* True when `p` points at the start of a ring slot of this communicator. */
static inline int rec_is_coll(const struct rec_comm* c, const void* p) {
  const char* b = (const char*)c->ring;
  const char* q = (const char*)p;
  if (q < b || q >= b + (size_t)c->ring_len * sizeof(struct recorder_coll)) return 0;
  return ((size_t)(q - b) % sizeof(struct recorder_coll)) == 0;
}
/* Interfaces v2/v3 name the communicator only in Coll/P2p events: fill it in late. */
void rec_comm_identify(struct rec_comm* c, uint64_t comm_id, const char* name, int rank);
static inline struct rec_comm* rec_coll_owner(const struct recorder_coll* r) {
  return (struct rec_comm*)(uintptr_t)r->writer_private;
}
/* A child of r (proxy op or kernel channel) started or stopped at `now` (0: read the clock here). */
void rec_coll_child(struct rec_comm* c, struct recorder_coll* r, uint64_t expect_index, int kernel, int done,
                    uint64_t now);

/* Proxy ops: a slot pool probed lock-free; NULL when every probed slot is busy. */
struct recorder_proxy* rec_proxy_begin(struct rec_comm* c, struct recorder_coll* parent, int rank, int pid,
                                       int peer, int channel, int is_send, int n_steps, int chunk_size);
void rec_proxy_end(struct recorder_proxy* p);
/* Proxy record `p`'s companion (set by rec_proxy_begin, before NCCL gets a handle to `p`). */
static inline struct rec_send_span* rec_span(const struct recorder_proxy* p) {
  return (struct rec_send_span*)(uintptr_t)p->writer_private;
}
/* Writes the op's send_wait_union_us from its span companion, saturating: the timed spans and each untimed
 * one at `each` ns. One proxy thread drives an op, so no read-modify-write; the store is whole for readers. */
static inline void rec_span_store(struct recorder_proxy* p, const struct rec_send_span* sp, uint64_t each) {
  uint64_t us = (sp->timed_ns + (uint64_t)sp->untimed * each) / 1000u;
  REC_RELAXED_STORE(&p->send_wait_union_us, us > UINT32_MAX ? UINT32_MAX : (uint32_t)us);
}
/* A span closes (its op's count of steps in SendWait went 1 -> 0, or the op ended with one open): a timed
 * span's length is read and added (a one-step span's also sets how many to leave untimed next); an untimed
 * one is counted, to be valued at the op's end (rec_span_final). */
static inline void rec_span_close(struct recorder_proxy* p, struct rec_send_span* sp) {
  if (!sp->timing) {
    sp->untimed++;
    return;
  }
  uint8_t ticks;
  uint64_t now = rec_span_clock(&ticks);
  uint64_t len = rec_span_ns(sp->since, sp->since_ticks, now, ticks);
  sp->timing = 0;
  sp->timed_ns += len;
  if (sp->peak == 1) {
    sp->single_ns += len;
    sp->singles++;
    sp->last_single = len;
    sp->skip = (uint16_t)(sp->every - 1);
  }
  rec_span_store(p, sp, sp->last_single);
}
/* The op's SendWait as it ends (rec_proxy_end): its untimed spans at the mean of its timed one-step spans. */
void rec_span_final(struct recorder_proxy* p, struct rec_send_span* sp);
static inline int rec_is_proxy(const struct rec_comm* c, const void* p) {
  const char* b = (const char*)c->proxy;
  const char* q = (const char*)p;
  if (q < b || q >= b + (size_t)c->proxy_slots * sizeof(struct recorder_proxy)) return 0;
  return ((size_t)(q - b) % sizeof(struct recorder_proxy)) == 0;
}

#endif
