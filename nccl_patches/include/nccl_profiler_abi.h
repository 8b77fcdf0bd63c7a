/*
 * nccl_profiler_abi.h - the NCCL profiler plugin interface, declared here.
 *
 * NCCL installs no profiler header (the wheels ship nccl.h and nccl_device*.h
 * only), so we declare the structures ourselves from the documented layout of
 * each interface version. Field order, types and unions must match NCCL's
 * exactly: the offsets that matter are pinned with _Static_assert below.
 *
 *   interface   first NCCL    init signature
 *   v2          2.24          (ctx, mask): the comm's identity comes with its first Coll/P2p
 *   v3          2.26          as v2; adds kernel channel events
 *   v4          2.27          (ctx, mask, name, commHash, nNodes, nranks, rank, log)
 *   v5          2.28          (ctx, commId, mask, name, nNodes, nranks, rank, log)
 *   v6          2.29/2.30     as v5; descriptor adds copy-engine events
 *
 * The descriptor head (type, parentObj, rank) is followed by a union that is
 * 8-byte aligned, so the union starts at offset 24 in every version; the members
 * we read (coll, p2p, proxyOp, proxyStep, kernelCh) have the same layout in v4,
 * v5 and v6 (v5/v6 only append parentGroup to coll and p2p). v2/v3 coll and p2p
 * start with the communicator's name and hash and differ after; proxyOp and
 * proxyStep are as in v4.
 */
#ifndef HF_NCCL_PROFILER_ABI_H
#define HF_NCCL_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

#define NCCL_LOGFLAG_INIT 0x1UL
#define NCCL_LOGFLAG_ENV 0x1000UL

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

typedef pid_t ncclPid_t;

/* Event type bits (activation mask). */
enum {
  HF_PROFILE_GROUP = 1 << 0,
  HF_PROFILE_COLL = 1 << 1,
  HF_PROFILE_P2P = 1 << 2,
  HF_PROFILE_PROXY_OP = 1 << 3,
  HF_PROFILE_PROXY_STEP = 1 << 4,
  HF_PROFILE_PROXY_CTRL = 1 << 5,
  HF_PROFILE_KERNEL_CH = 1 << 6,
  HF_PROFILE_NET_PLUGIN = 1 << 7,
  HF_PROFILE_GROUP_API = 1 << 8,     /* v5+ */
  HF_PROFILE_COLL_API = 1 << 9,      /* v5+ */
  HF_PROFILE_P2P_API = 1 << 10,      /* v5+ */
  HF_PROFILE_KERNEL_LAUNCH = 1 << 11,/* v5+ */
  HF_PROFILE_CE_COLL = 1 << 12,      /* v6 */
  HF_PROFILE_CE_SYNC = 1 << 13,      /* v6 */
  HF_PROFILE_CE_BATCH = 1 << 14,     /* v6 */
};

/* Event states (one enum shared by every interface version). */
typedef enum {
  HF_STATE_PROXY_OP_IN_PROGRESS = 19,
  HF_STATE_STEP_SEND_GPU_WAIT = 8,
  HF_STATE_STEP_SEND_WAIT = 9,
  HF_STATE_STEP_RECV_WAIT = 10,
  HF_STATE_STEP_RECV_FLUSH_WAIT = 11,
  HF_STATE_STEP_RECV_GPU_WAIT = 12,
  HF_STATE_STEP_SEND_PEER_WAIT = 20,
  HF_STATE_CTRL_IDLE = 13,
  HF_STATE_CTRL_ACTIVE = 14,
  HF_STATE_CTRL_SLEEP = 15,
  HF_STATE_CTRL_WAKEUP = 16,
  HF_STATE_CTRL_APPEND = 17,
  HF_STATE_CTRL_APPEND_END = 18,
  HF_STATE_NET_PLUGIN_UPDATE = 21,
  HF_STATE_KERNEL_CH_STOP = 22,
  HF_STATE_GROUP_START_API_STOP = 23,
  HF_STATE_GROUP_END_API_START = 24,
} ncclProfilerEventState_t;

/* Union members shared by v4..v6. */
struct hf_descr_coll_v4 {
  uint64_t seqNumber;
  const char* func;
  void const* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct hf_descr_coll_v5 {
  uint64_t seqNumber;
  const char* func;
  void const* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;
};

struct hf_descr_p2p_v4 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
};

struct hf_descr_p2p_v5 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
};

struct hf_descr_proxy_op {
  ncclPid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
};

struct hf_descr_proxy_step {
  int step;
};

struct hf_descr_kernel_ch {
  uint8_t channelId;
  uint64_t pTimer;
};

struct hf_descr_net_plugin {
  int64_t id;
  void* data;
};

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct hf_descr_coll_v4 coll;
    struct hf_descr_p2p_v4 p2p;
    struct hf_descr_proxy_op proxyOp;
    struct hf_descr_proxy_step proxyStep;
    struct hf_descr_kernel_ch kernelCh;
    struct hf_descr_net_plugin netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

struct hf_descr_group_api { bool graphCaptured; int groupDepth; };
struct hf_descr_coll_api { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured; };
struct hf_descr_p2p_api { const char* func; size_t count; const char* datatype; void* stream; bool graphCaptured; };
struct hf_descr_kernel_launch { void* stream; };

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct hf_descr_group_api groupApi;
    struct hf_descr_coll_api collApi;
    struct hf_descr_p2p_api p2pApi;
    struct hf_descr_kernel_launch kernelLaunch;
    struct hf_descr_coll_v5 coll;
    struct hf_descr_p2p_v5 p2p;
    struct hf_descr_proxy_op proxyOp;
    struct hf_descr_proxy_step proxyStep;
    struct hf_descr_kernel_ch kernelCh;
    struct hf_descr_net_plugin netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

struct hf_descr_kernel_step {
  uint8_t channelId;
  uint8_t isSend;
  uint8_t peer;
  uint32_t step;
  uint32_t size;
  uint64_t startTs;
  uint64_t readyTs;
};

struct hf_descr_ce_coll {
  uint64_t seqNumber;
  const char* func;
  void const* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
};

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct hf_descr_group_api groupApi;
    struct hf_descr_coll_api collApi;
    struct hf_descr_p2p_api p2pApi;
    struct hf_descr_kernel_launch kernelLaunch;
    struct hf_descr_coll_v5 coll;
    struct hf_descr_p2p_v5 p2p;
    struct hf_descr_proxy_op proxyOp;
    struct hf_descr_proxy_step proxyStep;
    struct hf_descr_kernel_ch kernelCh;
    struct hf_descr_kernel_step kernelStep;
    struct hf_descr_net_plugin netPlugin;
    struct hf_descr_ce_coll ceColl;
    struct { bool isComplete; int nRanks; } ceCollSync;
    struct { int numOps; size_t totalBytes; bool useIntraSync; } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

/* State arguments: a union of 8-byte members in every version we export. */
typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
  struct { uint64_t pTimer; } kernelStep;
} ncclProfilerEventStateArgs_v5_t;

typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

/* v2 (NCCL 2.24, 2.25) and v3 (2.26): no comm identity at init; coll/p2p carry it. */
struct hf_descr_coll_v2 {
  const char* name;
  uint64_t commHash;
  uint64_t seqNumber;
  const char* func;
  void const* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  size_t trafficBytes;
  uint8_t nMaxChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct hf_descr_coll_v3 {
  const char* name;
  uint64_t commHash;
  uint64_t seqNumber;
  const char* func;
  void const* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nMaxChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct hf_descr_p2p_v2 {
  const char* name;
  uint64_t commHash;
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
};

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct hf_descr_coll_v2 coll;
    struct hf_descr_p2p_v2 p2p;
    struct hf_descr_proxy_op proxyOp;
    struct hf_descr_proxy_step proxyStep;
  };
} ncclProfilerEventDescr_v2_t;

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct hf_descr_coll_v3 coll;
    struct hf_descr_p2p_v2 p2p;
    struct hf_descr_proxy_op proxyOp;
    struct hf_descr_proxy_step proxyStep;
    struct { uint8_t channelId; } kernelCh;
    struct hf_descr_net_plugin netPlugin;
  };
} ncclProfilerEventDescr_v3_t;

typedef union {
  struct { size_t transSize; int steps; } proxyOp;
  struct { int appendedProxyOps; } proxyCtrl;
} ncclProfilerEventStateArgs_v2_t;
typedef ncclProfilerEventStateArgs_v2_t ncclProfilerEventStateArgs_v3_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v2_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v2_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v2_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v3_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v3_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v3_t;

_Static_assert(offsetof(ncclProfilerEventDescr_v2_t, coll) == 24, "v2 union");
_Static_assert(offsetof(ncclProfilerEventDescr_v3_t, coll) == 24, "v3 union");
_Static_assert(offsetof(struct hf_descr_coll_v2, nMaxChannels) == 80, "v2 coll nMaxChannels");
_Static_assert(offsetof(struct hf_descr_coll_v3, nMaxChannels) == 72, "v3 coll nMaxChannels");
_Static_assert(offsetof(struct hf_descr_p2p_v2, peer) == 48, "v2 p2p peer");

/* The offsets the plugin relies on (x86-64 / aarch64 LP64). */
_Static_assert(offsetof(ncclProfilerEventDescr_v4_t, parentObj) == 8, "v4 parentObj");
_Static_assert(offsetof(ncclProfilerEventDescr_v4_t, rank) == 16, "v4 rank");
_Static_assert(offsetof(ncclProfilerEventDescr_v4_t, coll) == 24, "v4 union");
_Static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll) == 24, "v5 union");
_Static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll) == 24, "v6 union");
_Static_assert(offsetof(struct hf_descr_coll_v4, datatype) == 48, "coll datatype");
_Static_assert(offsetof(struct hf_descr_coll_v4, nChannels) == 56, "coll nChannels");
_Static_assert(offsetof(struct hf_descr_coll_v4, algo) == 64, "coll algo");
_Static_assert(offsetof(struct hf_descr_coll_v4, proto) == 72, "coll proto");
_Static_assert(offsetof(struct hf_descr_coll_v5, parentGroup) == 80, "coll parentGroup");
_Static_assert(offsetof(struct hf_descr_p2p_v4, peer) == 32, "p2p peer");
_Static_assert(offsetof(struct hf_descr_p2p_v4, nChannels) == 36, "p2p nChannels");
_Static_assert(offsetof(struct hf_descr_proxy_op, channelId) == 4, "proxyOp channelId");
_Static_assert(offsetof(struct hf_descr_proxy_op, peer) == 8, "proxyOp peer");
_Static_assert(offsetof(struct hf_descr_proxy_op, isSend) == 20, "proxyOp isSend");
_Static_assert(offsetof(struct hf_descr_kernel_ch, pTimer) == 8, "kernelCh pTimer");
_Static_assert(sizeof(ncclProfilerEventStateArgs_v5_t) == 8, "state args");

#endif
