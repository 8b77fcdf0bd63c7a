/*
 * fake_nccl.c - a stand-in libnccl.so.2 for CPU tests of the LD_PRELOAD shim.
 * It exports the public calls the shim wraps with their real signatures, under
 * both names as NCCL does (pnccl* and nccl* as an alias), and does no work.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int ncclResult_t;
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef void* cudaStream_t;
struct ncclComm { int rank, nranks; };

#define ALIAS(name) __attribute__((weak, alias("p" #name)))

ncclResult_t pncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof *id);
  memcpy(id->internal, "fake-nccl-id", 12);
  return 0;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) ALIAS(ncclGetUniqueId);

ncclResult_t pncclGetVersion(int* v) { *v = 21805; return 0; }
ncclResult_t ncclGetVersion(int* v) ALIAS(ncclGetVersion);

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  *comm = calloc(1, sizeof **comm);
  (*comm)->rank = rank;
  (*comm)->nranks = nranks;
  return 0;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, void* cfg) {
  (void)cfg;
  return pncclCommInitRank(comm, nranks, id, rank);
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* c, int n, ncclUniqueId id, int r, void* cfg) ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  (void)devlist;
  ncclUniqueId id;
  for (int i = 0; i < ndev; i++) pncclCommInitRank(&comms[i], ndev, id, i);
  return 0;
}
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) ALIAS(ncclCommInitAll);

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, void* cfg) {
  (void)color; (void)cfg;
  ncclUniqueId id;
  return pncclCommInitRank(newcomm, comm->nranks, id, key);
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* nc, void* cfg) ALIAS(ncclCommSplit);

ncclResult_t pncclCommDestroy(ncclComm_t comm) { free(comm); return 0; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) ALIAS(ncclCommDestroy);
ncclResult_t pncclCommAbort(ncclComm_t comm) { free(comm); return 0; }
ncclResult_t ncclCommAbort(ncclComm_t comm) ALIAS(ncclCommAbort);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* n) { *n = comm->nranks; return 0; }
ncclResult_t ncclCommCount(const ncclComm_t comm, int* n) ALIAS(ncclCommCount);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* r) { *r = comm->rank; return 0; }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* r) ALIAS(ncclCommUserRank);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* d) { (void)comm; *d = 0; return 0; }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* d) ALIAS(ncclCommCuDevice);

ncclResult_t pncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c,
                            cudaStream_t st) { (void)s; (void)r; (void)n; (void)t; (void)o; (void)c; (void)st; return 0; }
ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c,
                           cudaStream_t st) ALIAS(ncclAllReduce);
ncclResult_t pncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                            cudaStream_t st) { (void)s; (void)r; (void)n; (void)t; (void)root; (void)c; (void)st; return 0; }
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t st) ALIAS(ncclBroadcast);
ncclResult_t pncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, int root, ncclComm_t c,
                         cudaStream_t st) { (void)s; (void)r; (void)n; (void)t; (void)o; (void)root; (void)c; (void)st; return 0; }
ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, int root, ncclComm_t c,
                        cudaStream_t st) ALIAS(ncclReduce);
ncclResult_t pncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)n; (void)t; (void)c; (void)st; return 0; }
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st)
    ALIAS(ncclAllGather);
ncclResult_t pncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c,
                                cudaStream_t st) { (void)s; (void)r; (void)n; (void)t; (void)o; (void)c; (void)st; return 0; }
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c,
                               cudaStream_t st) ALIAS(ncclReduceScatter);
ncclResult_t pncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)n; (void)t; (void)peer; (void)c; (void)st; return 0; }
ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st)
    ALIAS(ncclSend);
ncclResult_t pncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)r; (void)n; (void)t; (void)peer; (void)c; (void)st; return 0; }
ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) ALIAS(ncclRecv);
ncclResult_t pncclGroupStart(void) { return 0; }
ncclResult_t ncclGroupStart(void) ALIAS(ncclGroupStart);
ncclResult_t pncclGroupEnd(void) { return 0; }
ncclResult_t ncclGroupEnd(void) ALIAS(ncclGroupEnd);
