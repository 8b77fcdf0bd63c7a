/*
 * chain.c - forward every profiler call to a second profiler plugin, so a job can run NCCL's
 * Inspector (or any other profiler) and the recorder at once: NCCL loads one profiler plugin
 * per process, and the recorder takes that seat.
 *
 *   FORENSICS_RECORDER_CHAIN=/abs/path/libnccl-profiler-x.so   (in every rank's environment)
 *
 * How: when the variable is set, a constructor puts the wrappers below into the exported
 * ncclProfiler_vN tables before NCCL reads them (unset, nothing here runs: the recorder's own
 * entry points stay in the tables and cost nothing more). The second plugin is dlopen'ed at the
 * first init, and only its ncclProfiler_vN of the version NCCL picked for the recorder is used.
 *
 * Every handle given to NCCL is then a link {ours, theirs}; a parent handle is
 * translated to each plugin's own before its startEvent (NCCL's Inspector dereferences its
 * parents), and each plugin sees only the event types of its own activation mask, so its
 * output is what it would write alone. A plugin whose init fails is left out for that
 * communicator; the other one runs on.
 *
 * Link lifetimes: NCCL stops a Group, Coll or P2p event (and the v5 API events) when it is
 * enqueued, then still names it as the parent of the ProxyOp and KernelCh events that follow.
 * So links of those types come from a ring and are never freed at stop, only reused 64K such
 * events later (far beyond NCCL's queue depth); links of the other types (proxy ops, steps,
 * kernel channels) are claimed from a pool and freed at their stop.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_profiler_abi.h"
#include "plugin_entry.h"

#define CHAIN_ENV "FORENSICS_RECORDER_CHAIN"
#define LINK_SLOTS 65536u /* events open at once in a process; 24 bytes each: 1.5 MiB */
#define LINK_PROBES 256u
#define PARENT_TYPES                                                                                        \
  (HF_PROFILE_GROUP | HF_PROFILE_COLL | HF_PROFILE_P2P | HF_PROFILE_GROUP_API | HF_PROFILE_COLL_API | \
   HF_PROFILE_P2P_API | HF_PROFILE_KERNEL_LAUNCH)

struct chain_link {
  void* ours;
  void* theirs;
  uint32_t busy;
  uint32_t pad;
};

struct chain_ctx {
  void* ours;
  void* theirs;
  int our_mask;
  int their_mask;
  int ours_on;
  int theirs_on;
};

typedef ncclResult_t (*start_fn)(void* ctx, void** handle, void* descr);
typedef ncclResult_t (*stop_fn)(void* handle);
typedef ncclResult_t (*record_fn)(void* handle, ncclProfilerEventState_t state, void* args);
typedef ncclResult_t (*fini_fn)(void* ctx);

static char g_path[1024];
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static char g_load_error[512];
static const void* g_their[7]; /* their ncclProfiler_vN, by N */
static struct chain_link* g_links;        /* pool: proxy ops, steps, kernel channels */
static struct chain_link* g_parent_links; /* ring: events that stay parents after their stop */
static uint64_t g_link_next;
static uint64_t g_parent_next;
static uint64_t g_link_dropped;
/* NCCL uses one interface version per process: set at the first init, the same for every comm */
static stop_fn g_their_stop;
static record_fn g_their_record;
static fini_fn g_their_fini;
static start_fn g_their_start;

/* ------------------------------------------------------------- loading */

static void load(void) {
  g_links = calloc(LINK_SLOTS, sizeof *g_links);
  g_parent_links = calloc(LINK_SLOTS, sizeof *g_parent_links);
  if (g_links == NULL || g_parent_links == NULL) {
    snprintf(g_load_error, sizeof g_load_error, "out of memory for %u links", LINK_SLOTS);
    return;
  }
  void* lib = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(g_load_error, sizeof g_load_error, "cannot load it: %s", dlerror());
    return;
  }
  static const char* names[7] = {NULL, NULL, "ncclProfiler_v2", "ncclProfiler_v3", "ncclProfiler_v4",
                                 "ncclProfiler_v5", "ncclProfiler_v6"};
  static const void* ours[7] = {NULL, NULL, &ncclProfiler_v2, &ncclProfiler_v3, &ncclProfiler_v4, &ncclProfiler_v5,
                                &ncclProfiler_v6};
  for (int v = 2; v <= 6; v++) {
    const void* t = dlsym(lib, names[v]);
    if (t == ours[v]) { /* the recorder itself: forwarding to it would loop */
      snprintf(g_load_error, sizeof g_load_error, "it is the recorder itself");
      return;
    }
    g_their[v] = t;
  }
}

/* The second plugin's table of `version`, or NULL (with a warning through NCCL's logger). */
static const void* their_table(int version, ncclDebugLogger_t logfn) {
  pthread_once(&g_load_once, load);
  const void* t = g_load_error[0] ? NULL : g_their[version];
  if (t == NULL) {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
      char why[600];
      if (g_load_error[0]) snprintf(why, sizeof why, "%s", g_load_error);
      else snprintf(why, sizeof why, "it exports no ncclProfiler_v%d (the version NCCL uses here)", version);
      if (logfn) logfn(NCCL_LOG_WARN, NCCL_LOGFLAG_INIT, __FILE__, __LINE__,
                       "hang-forensics recorder: " CHAIN_ENV "=%s not chained: %s", g_path, why);
      else fprintf(stderr, "hang-forensics recorder: " CHAIN_ENV "=%s not chained: %s\n", g_path, why);
    }
  }
  return t;
}

/* --------------------------------------------------------------- links */

static struct chain_link* link_claim(uint64_t type) {
  if (type & PARENT_TYPES) {
    struct chain_link* l = &g_parent_links[__atomic_fetch_add(&g_parent_next, 1, __ATOMIC_RELAXED) % LINK_SLOTS];
    l->busy = 2; /* never freed: a later child may still name it */
    return l;
  }
  uint64_t i = __atomic_fetch_add(&g_link_next, 1, __ATOMIC_RELAXED);
  for (uint32_t k = 0; k < LINK_PROBES; k++) {
    struct chain_link* l = &g_links[(i + k) % LINK_SLOTS];
    uint32_t free_ = 0;
    if (__atomic_load_n(&l->busy, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&l->busy, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return l;
  }
  __atomic_add_fetch(&g_link_dropped, 1, __ATOMIC_RELAXED);
  return NULL;
}

static void link_release(struct chain_link* l) {
  if (l->busy == 2) return; /* a ring link: kept for the children still to come */
  l->ours = NULL;
  l->theirs = NULL;
  __atomic_store_n(&l->busy, 0, __ATOMIC_RELEASE);
}

/* `p` as one of our links, or NULL: a parent may be a PXN op's handle from another process. */
static struct chain_link* in_area(struct chain_link* area, void* p) {
  const char* b = (const char*)area;
  const char* q = (const char*)p;
  if (b == NULL || q < b || q >= b + (size_t)LINK_SLOTS * sizeof(struct chain_link)) return NULL;
  if ((size_t)(q - b) % sizeof(struct chain_link) != 0) return NULL;
  return (struct chain_link*)p;
}

static struct chain_link* as_link(void* p) {
  struct chain_link* l = in_area(g_links, p);
  return l ? l : in_area(g_parent_links, p);
}

/* ---------------------------------------------------------------- init */

static struct chain_ctx* ctx_new(int version, ncclDebugLogger_t logfn, const void** table) {
  *table = their_table(version, logfn);
  if (*table != NULL) {
    g_their_stop = (stop_fn)((const ncclProfiler_v5_t*)*table)->stopEvent; /* same place in every version */
    g_their_record = (record_fn)((const ncclProfiler_v5_t*)*table)->recordEventState;
    g_their_fini = (fini_fn)((const ncclProfiler_v5_t*)*table)->finalize;
    g_their_start = (start_fn)((const ncclProfiler_v5_t*)*table)->startEvent;
  }
  return calloc(1, sizeof(struct chain_ctx));
}

static ncclResult_t ctx_done(struct chain_ctx* cc, void** context, int* mask, ncclDebugLogger_t logfn, int version) {
  if (!cc->ours_on) cc->our_mask = 0;
  if (!cc->theirs_on) cc->their_mask = 0;
  if (!cc->ours_on && !cc->theirs_on) {
    free(cc);
    *context = NULL;
    return ncclSystemError;
  }
  *mask = cc->our_mask | cc->their_mask;
  *context = cc;
  if (logfn && cc->theirs_on)
    logfn(NCCL_LOG_INFO, NCCL_LOGFLAG_INIT, __FILE__, __LINE__,
          "hang-forensics recorder chains %s (ncclProfiler_v%d): its mask 0x%x, the recorder's 0x%x", g_path, version,
          cc->their_mask, cc->our_mask);
  return ncclSuccess;
}

/* v2 and v3 share init's signature, as v5 and v6 do: one body each, the version picks the tables. */
static ncclResult_t init_v23(int v, void** context, int* mask) {
  const void* t;
  ncclResult_t (*ours)(void**, int*) = v == 2 ? init_v2 : init_v3;
  struct chain_ctx* cc = ctx_new(v, NULL, &t);
  if (cc == NULL) return ours(context, mask);
  cc->our_mask = cc->their_mask = *mask; /* what NCCL passed in: a plugin that leaves it alone keeps it */
  cc->ours_on = ours(&cc->ours, &cc->our_mask) == ncclSuccess;
  cc->theirs_on = t && ((const ncclProfiler_v2_t*)t)->init(&cc->theirs, &cc->their_mask) == ncclSuccess;
  return ctx_done(cc, context, mask, NULL, v);
}

static ncclResult_t chain_init_v2(void** context, int* mask) { return init_v23(2, context, mask); }
static ncclResult_t chain_init_v3(void** context, int* mask) { return init_v23(3, context, mask); }

static ncclResult_t chain_init_v4(void** context, int* mask, const char* name, uint64_t hash, int nnodes, int nranks,
                                  int rank, ncclDebugLogger_t logfn) {
  const void* t;
  struct chain_ctx* cc = ctx_new(4, logfn, &t);
  if (cc == NULL) return init_v4(context, mask, name, hash, nnodes, nranks, rank, logfn);
  cc->our_mask = cc->their_mask = *mask; /* what NCCL passed in: a plugin that leaves it alone keeps it */
  cc->ours_on = init_v4(&cc->ours, &cc->our_mask, name, hash, nnodes, nranks, rank, logfn) == ncclSuccess;
  cc->theirs_on = t && ((const ncclProfiler_v4_t*)t)->init(&cc->theirs, &cc->their_mask, name, hash, nnodes, nranks,
                                                           rank, logfn) == ncclSuccess;
  return ctx_done(cc, context, mask, logfn, 4);
}

static ncclResult_t init_v56(int v, void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks,
                             int rank, ncclDebugLogger_t logfn) {
  const void* t;
  ncclResult_t (*ours)(void**, uint64_t, int*, const char*, int, int, int, ncclDebugLogger_t) =
      v == 5 ? init_v5 : init_v6;
  struct chain_ctx* cc = ctx_new(v, logfn, &t);
  if (cc == NULL) return ours(context, id, mask, name, nnodes, nranks, rank, logfn);
  cc->our_mask = cc->their_mask = *mask; /* what NCCL passed in: a plugin that leaves it alone keeps it */
  cc->ours_on = ours(&cc->ours, id, &cc->our_mask, name, nnodes, nranks, rank, logfn) == ncclSuccess;
  cc->theirs_on = t && ((const ncclProfiler_v5_t*)t)->init(&cc->theirs, id, &cc->their_mask, name, nnodes, nranks,
                                                           rank, logfn) == ncclSuccess;
  return ctx_done(cc, context, mask, logfn, v);
}

static ncclResult_t chain_init_v5(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks,
                                  int rank, ncclDebugLogger_t logfn) {
  return init_v56(5, context, id, mask, name, nnodes, nranks, rank, logfn);
}

static ncclResult_t chain_init_v6(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks,
                                  int rank, ncclDebugLogger_t logfn) {
  return init_v56(6, context, id, mask, name, nnodes, nranks, rank, logfn);
}

/* --------------------------------------------------------------- events */

/* Starts the event in each plugin whose mask has its type, each seeing its own parent (and, v5+,
 * its own parentGroup in Coll/P2p). The descriptor is NCCL's: its pointers are swapped in place
 * for each call and put back, so no copy of a layout we might know only in part is made. */
static ncclResult_t chain_start(struct chain_ctx* cc, void** handle, uint64_t type, void** parent_field,
                                void** group_field, void* descr, start_fn ours) {
  *handle = NULL;
  if (cc == NULL) return ncclSuccess;
  void* parent = *parent_field;
  void* group = group_field ? *group_field : NULL;
  struct chain_link* pl = as_link(parent);
  struct chain_link* gl = as_link(group);
  void *h_ours = NULL, *h_theirs = NULL;
  if (cc->ours_on && (type & (uint64_t)cc->our_mask)) {
    *parent_field = pl ? pl->ours : parent;
    if (group_field) *group_field = gl ? gl->ours : group;
    ours(cc->ours, &h_ours, descr);
  }
  if (cc->theirs_on && (type & (uint64_t)cc->their_mask)) {
    *parent_field = pl ? pl->theirs : parent;
    if (group_field) *group_field = gl ? gl->theirs : group;
    g_their_start(cc->theirs, &h_theirs, descr);
  }
  *parent_field = parent;
  if (group_field) *group_field = group;
  if (h_ours == NULL && h_theirs == NULL) return ncclSuccess;
  struct chain_link* l = link_claim(type);
  if (l == NULL) { /* pool exhausted: close the event in both rather than leak it */
    if (h_ours) stop_event(h_ours);
    if (h_theirs) g_their_stop(h_theirs);
    return ncclSuccess;
  }
  l->ours = h_ours;
  l->theirs = h_theirs;
  *handle = l;
  return ncclSuccess;
}

static ncclResult_t chain_start_v2(void* c, void** h, ncclProfilerEventDescr_v2_t* d) {
  if (d == NULL) return h ? (*h = NULL, ncclSuccess) : ncclSuccess;
  return chain_start(c, h, d->type, &d->parentObj, NULL, d, (start_fn)start_v2);
}

static ncclResult_t chain_start_v3(void* c, void** h, ncclProfilerEventDescr_v3_t* d) {
  if (d == NULL) return h ? (*h = NULL, ncclSuccess) : ncclSuccess;
  return chain_start(c, h, d->type, &d->parentObj, NULL, d, (start_fn)start_v3);
}

static ncclResult_t chain_start_v4(void* c, void** h, ncclProfilerEventDescr_v4_t* d) {
  if (d == NULL) return h ? (*h = NULL, ncclSuccess) : ncclSuccess;
  return chain_start(c, h, d->type, &d->parentObj, NULL, d, (start_fn)start_v4);
}

static ncclResult_t chain_start_v5(void* c, void** h, ncclProfilerEventDescr_v5_t* d) {
  if (d == NULL) return h ? (*h = NULL, ncclSuccess) : ncclSuccess;
  void** group = d->type == HF_PROFILE_COLL ? &d->coll.parentGroup : d->type == HF_PROFILE_P2P ? &d->p2p.parentGroup : NULL;
  return chain_start(c, h, d->type, &d->parentObj, group, d, (start_fn)start_v5);
}

static ncclResult_t chain_start_v6(void* c, void** h, ncclProfilerEventDescr_v6_t* d) {
  if (d == NULL) return h ? (*h = NULL, ncclSuccess) : ncclSuccess;
  void** group = d->type == HF_PROFILE_COLL ? &d->coll.parentGroup : d->type == HF_PROFILE_P2P ? &d->p2p.parentGroup : NULL;
  return chain_start(c, h, d->type, &d->parentObj, group, d, (start_fn)start_v6);
}

static ncclResult_t chain_stop(void* handle) {
  struct chain_link* l = as_link(handle);
  if (l == NULL) return ncclSuccess;
  if (l->ours) stop_event(l->ours);
  if (l->theirs) g_their_stop(l->theirs);
  link_release(l);
  return ncclSuccess;
}

/* The recorder's record_vN differ only in the args' declared type: one call serves all. */
static ncclResult_t chain_record(void* handle, ncclProfilerEventState_t state, void* args) {
  struct chain_link* l = as_link(handle);
  if (l == NULL) return ncclSuccess;
  if (l->ours) record_v5(l->ours, state, args);
  if (l->theirs) g_their_record(l->theirs, state, args);
  return ncclSuccess;
}

static ncclResult_t chain_finalize(void* context) {
  struct chain_ctx* cc = context;
  if (cc == NULL) return ncclSuccess;
  if (cc->ours_on) finalize(cc->ours);
  if (cc->theirs_on) g_their_fini(cc->theirs);
  free(cc);
  return ncclSuccess;
}

/* --------------------------------------------------------------- setup */

__attribute__((constructor)) static void chain_setup(void) {
  const char* path = getenv(CHAIN_ENV);
  if (path == NULL || *path == '\0') return;
  snprintf(g_path, sizeof g_path, "%s", path);
  /* every table, whichever version NCCL will pick: the same wrappers, each with its own init/start */
#define CHAIN_TABLE(v)                                     \
  do {                                                     \
    ncclProfiler_v##v.init = chain_init_v##v;              \
    ncclProfiler_v##v.startEvent = chain_start_v##v;       \
    ncclProfiler_v##v.stopEvent = chain_stop;              \
    ncclProfiler_v##v.recordEventState = (void*)chain_record; \
    ncclProfiler_v##v.finalize = chain_finalize;           \
  } while (0)
  CHAIN_TABLE(2);
  CHAIN_TABLE(3);
  CHAIN_TABLE(4);
  CHAIN_TABLE(5);
  CHAIN_TABLE(6);
#undef CHAIN_TABLE
}
