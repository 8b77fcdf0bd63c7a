/*
 * recorder_format.h - layout of the hang-forensics NCCL recorder state file.
 *
 * One file per communicator per process, mmap'ed MAP_SHARED from a directory in
 * shared memory (default /dev/shm), named
 *     nccl-recorder.<host>.<pid>.<n>.bin      (n = communicator index in the process)
 * A reader in another process maps or reads it while the owner runs, hangs or is
 * SIGSTOPped: nothing here needs the owner's cooperation.
 *
 * Everything is little-endian x86-64/aarch64 native layout with fixed-size fields;
 * parsers/readers/recorder.py mirrors it. Bump RECORDER_FORMAT_VERSION on any change
 * a reader could misread. The layout is documented in nccl_patches/README.md.
 *
 * Consistency without locks: each record starts with a generation counter `gen`.
 * The writer makes it odd before it changes the record's identity fields and even
 * after (a seqlock). A reader copies a record between two reads of gen and retries
 * when they differ or are odd. Progress counters (steps, timestamps, states) are
 * single aligned words stored atomically outside the seqlock: each is always a
 * value the writer really stored, possibly a moment old.
 */
#ifndef HF_RECORDER_FORMAT_H
#define HF_RECORDER_FORMAT_H

#include <stdint.h>

#define RECORDER_MAGIC "HFNCREC\0"   /* 8 bytes, includes the NUL */
#define RECORDER_FORMAT_VERSION 1u
#define RECORDER_HEADER_SIZE 512u
/* Header flags. PRECISE_OP_TIMES: a collective record's start_ns and complete_ns come from
 * CLOCK_REALTIME (ns), not the coarse clock, so a rank's wait in each op (and who arrived
 * last) is known at sub-millisecond precision. enqueued_ns is on the event clock (a few ms),
 * never before start_ns (it was precise too until 2026-12-07; readers only ever used it to ms). */
#define RECORDER_FLAG_PRECISE_OP_TIMES 1u
/* SEND_WAIT (files written until 2026-12-07): a proxy record's microseconds field at 116 held the SUM
 * of its steps' times in SendWait (the data handed to the network, its completion not yet seen), timed
 * with CLOCK_REALTIME. Steps in SendWait together were each counted, so the sum overstates the time on
 * the wire by about the number of steps in flight. Only the network is in that state: a sender waiting
 * for its GPU or for the peer's buffer is in SendGPUWait / SendPeerWait. Current writers set
 * SEND_WAIT_UNION instead; readers keep reading this flag's meaning for old files. */
#define RECORDER_FLAG_SEND_WAIT 2u
/* SEND_WAIT_UNION: the field at 116 (send_wait_union_us) holds the microseconds during which at least
 * one of the op's steps was in SendWait: the union of its steps' SendWait intervals, not their sum
 * (overlapping steps count once, a time with none in SendWait not at all). Why the union: it is the op's
 * time on the network, in the same units as every other time, and it needs the precise clock only when
 * the op's count of steps in SendWait goes 0 -> 1 and 1 -> 0 (NCCL keeps up to 8 steps on the network
 * at once), not twice per step. A span still open is not in the field yet (a hung op's steps show it).
 * The spans' sub-microsecond rests carry from one to the next (files written before 2026-12-07's evening
 * cut each span to whole us). Every step's ts_ns is on the event clock (a few ms; until 2026-12-07's
 * evening a send step's was precise where it opened or closed a span): readers use it for "how long ago". */
#define RECORDER_FLAG_SEND_WAIT_UNION 16u
/* SEND_WAIT_SAMPLED (with SEND_WAIT_UNION): the header's send_wait_every (N > 1) says that where an op's
 * steps enter SendWait one after another (each span holds one step: a fast network, the GPU's pace), the
 * counter timed one such span in N; each span left untimed follows a timed one-step span and counts as the
 * mean of the op's timed one-step spans (while the op runs: as the latest). Spans that hold two steps or
 * more (steps on the network together) are all timed, so an op whose steps overlap, or whose one-step spans
 * number at most 1, is exact. Why: in that order every step is a span of its own, two counter reads a step
 * (~16 ns each on the H100 host's CPU: ~250 ns a collective of 1 channel, half the 0.5 us budget); a link's
 * slowness shows in every span of its ops, so a sample of them says it. */
#define RECORDER_FLAG_SEND_WAIT_SAMPLED 32u
/* DEATH_COPY: this file is the copy the recorder wrote beside the NCCL logs as its process died (a finalize
 * with ops in flight, SIGABRT, exit), its heartbeat_ns the moment of the copy: the process ran then. A reader
 * never calls it frozen: the copies of a job are written when each rank dies, not at one moment. */
#define RECORDER_FLAG_DEATH_COPY 4u
/* FINALIZE_COPY: the copy the recorder wrote beside the NCCL logs at a clean finalize (nothing in flight):
 * the header and the ring of operations only. Its proxy area is left out (proxy_slots 0, file_size the end of
 * the ring), since every proxy op had stopped. Why: a rank that called another collective than its peers (an
 * order mismatch) may finish it and exit 0; this copy is then the only record of what it called. */
#define RECORDER_FLAG_FINALIZE_COPY 8u
#define RECORDER_STEP_SLOTS 8         /* NCCL_STEPS: NCCL keeps at most 8 step handles per op */

enum recorder_writer_kind {
  RECORDER_WRITER_PROFILER = 1,       /* NCCL profiler plugin (NCCL >= 2.23) */
  RECORDER_WRITER_PRELOAD = 2,        /* LD_PRELOAD shim over the public API (older NCCL) */
};

enum recorder_comm_state {
  RECORDER_COMM_ACTIVE = 1,
  RECORDER_COMM_FINALIZED = 2,
};

enum recorder_coll_kind {
  RECORDER_KIND_EMPTY = 0,
  RECORDER_KIND_COLL = 1,
  RECORDER_KIND_P2P = 2,
};

enum recorder_proxy_state {
  RECORDER_PROXY_FREE = 0,
  RECORDER_PROXY_ACTIVE = 1,
  RECORDER_PROXY_DONE = 2,
};

/* Step states are NCCL's own numbers (ncclProfilerProxyStep*), stored as is:
 * 8 SendGPUWait, 9 SendWait, 10 RecvWait, 11 RecvFlushWait, 12 RecvGPUWait,
 * 20 SendPeerWait. 0 means "step started, no state yet". */

struct recorder_header {              /* 512 bytes at offset 0 */
  char magic[8];                      /*   0 "HFNCREC\0" */
  uint32_t format_version;            /*   8 */
  uint32_t header_size;               /*  12 */
  uint64_t file_size;                 /*  16 */
  uint32_t coll_rec_size;             /*  24 */
  uint32_t coll_ring_len;             /*  28 */
  uint32_t proxy_rec_size;            /*  32 */
  uint32_t proxy_slots;               /*  36 */
  uint32_t coll_ring_offset;          /*  40 */
  uint32_t proxy_offset;              /*  44 */
  uint32_t writer_kind;               /*  48 recorder_writer_kind */
  uint32_t abi_version;               /*  52 profiler interface version, or NCCL version code (shim) */
  int32_t pid;                        /*  56 */
  uint32_t comm_state;                /*  60 recorder_comm_state */
  uint64_t comm_id;                   /*  64 commId / commHash as NCCL gives it */
  int32_t rank;                       /*  72 rank in the communicator */
  int32_t nranks;                     /*  76 */
  int32_t nnodes;                     /*  80 */
  int32_t env_rank;                   /*  84 RANK from the environment, -1 if unset */
  uint64_t start_ns;                  /*  88 CLOCK_REALTIME at init */
  uint64_t heartbeat_ns;              /*  96 CLOCK_REALTIME, refreshed by a thread */
  uint64_t heartbeat_count;           /* 104 */
  uint64_t coll_next;                 /* 112 collective/p2p records ever started */
  uint64_t proxy_next;                /* 120 proxy ops ever started */
  uint64_t last_event_ns;             /* 128 time of the latest event of any kind, to within 1 ms */
  uint64_t dropped_proxy;             /* 136 proxy ops not recorded: all probed slots busy */
  uint64_t finalize_ns;               /* 144 */
  uint32_t event_mask;                /* 152 activation mask handed to NCCL */
  uint32_t heartbeat_ms;              /* 156 */
  char host[64];                      /* 160 gethostname, cut at the first dot */
  char hostid[64];                    /* 224 NCCL_HOSTID if set */
  char comm_name[128];                /* 288 */
  char writer[32];                    /* 416 writer name and version */
  uint32_t comm_index;                /* 448 n in the file name */
  uint32_t flags;                     /* 452 RECORDER_FLAG_* */
  uint64_t p2p_next;                  /* 456 p2p ops ever started (their seq numbers) */
  uint32_t send_wait_every;           /* 464 FLAG_SEND_WAIT_SAMPLED: one one-step SendWait span in N timed */
  uint8_t reserved[44];               /* 468 .. 512 */
};

struct recorder_coll {                /* 160 bytes, ring slot = index % coll_ring_len */
  uint32_t gen;                       /*   0 seqlock */
  uint8_t kind;                       /*   4 recorder_coll_kind */
  uint8_t n_channels;                 /*   5 */
  uint8_t n_warps;                    /*   6 */
  uint8_t pad0;                       /*   7 */
  uint64_t index;                     /*   8 record number in this communicator */
  uint64_t seq;                       /*  16 NCCL seqNumber (per collective type); p2p: our counter */
  uint64_t count;                     /*  24 elements */
  int32_t root_or_peer;               /*  32 */
  uint32_t proxy_started;             /*  36 child proxy ops started */
  uint32_t proxy_done;                /*  40 child proxy ops stopped */
  uint32_t kch_started;               /*  44 kernel channel events started */
  uint32_t kch_done;                  /*  48 kernel channel events stopped */
  uint32_t pad1;                      /*  52 */
  uint64_t start_ns;                  /*  56 startEvent: the op is being enqueued */
  uint64_t enqueued_ns;               /*  64 stopEvent: enqueued (not finished!) */
  uint64_t last_progress_ns;          /*  72 latest child event */
  uint64_t complete_ns;               /*  80 inferred from the children; 0 = not (yet) */
  char func[24];                      /*  88 */
  char dtype[16];                     /* 112 */
  char algo[16];                      /* 128 */
  char proto[8];                      /* 144 */
  uint64_t writer_private;            /* 152 writer's own use (an address): readers ignore it */
};

struct recorder_step {                /* 16 bytes: one of the last 8 steps of a proxy op */
  int32_t step;                       /*   0 */
  uint8_t state;                      /*   4 NCCL step state, 0 = started */
  uint8_t done;                       /*   5 1 once stopped */
  uint8_t slot;                       /*   6 position in the op's step array */
  uint8_t pad;                        /*   7 */
  uint64_t ts_ns;                     /*   8 time of the latest change */
};

struct recorder_proxy {               /* 256 bytes */
  uint32_t gen;                       /*   0 seqlock */
  uint32_t state;                     /*   4 recorder_proxy_state */
  uint64_t coll_index;                /*   8 parent record index, UINT64_MAX if unknown (PXN) */
  uint64_t coll_seq;                  /*  16 parent seq, UINT64_MAX if unknown */
  uint64_t op_index;                  /*  24 proxy op number in this communicator */
  int32_t pid;                        /*  32 process that posted the op (PXN: another one) */
  int32_t peer;                       /*  36 remote rank in the communicator */
  uint8_t channel;                    /*  40 */
  uint8_t is_send;                    /*  41 */
  uint8_t last_state;                 /*  42 latest NCCL step state of any step */
  uint8_t in_progress;                /*  43 ProxyOpInProgress seen */
  int32_t n_steps;                    /*  44 */
  int32_t chunk_size;                 /*  48 */
  int32_t steps_started;              /*  52 */
  int32_t steps_done;                 /*  56 */
  int32_t last_step;                  /*  60 step of the latest state change */
  uint64_t start_ns;                  /*  64 */
  uint64_t last_progress_ns;          /*  72 */
  uint64_t stop_ns;                   /*  80 */
  uint64_t trans_bytes;               /*  88 latest transSize reported with a step state */
  char func[16];                      /*  96 parent's func, if known */
  int32_t rank;                       /* 112 rank that posted the op (descriptor rank; PXN may differ) */
  uint32_t send_wait_union_us;        /* 116 us with a step in SendWait (FLAG_SEND_WAIT_UNION; FLAG_SEND_WAIT: sum) */
  uint64_t writer_private;            /* 120 writer's own use (an address): readers ignore it */
  struct recorder_step steps[RECORDER_STEP_SLOTS]; /* 128 .. 256 */
};

_Static_assert(sizeof(struct recorder_header) == RECORDER_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct recorder_coll) == 160, "coll record size");
_Static_assert(sizeof(struct recorder_step) == 16, "step size");
_Static_assert(sizeof(struct recorder_proxy) == 256, "proxy record size");

#endif
