/*
 * shim_app.c - a program that uses NCCL's public API the way a framework does,
 * linked against the stand-in libnccl, run under LD_PRELOAD=the shim.
 *   shim_app RANK NRANKS NALLREDUCE hang|exit
 * Does NALLREDUCE all-reduces, one grouped send/recv pair, one all-gather on a
 * split communicator, then hangs (prints READY) or destroys and prints DONE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int ncclResult_t;
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
ncclResult_t ncclGetUniqueId(ncclUniqueId*);
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int);
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t*, void*);
ncclResult_t ncclCommDestroy(ncclComm_t);
ncclResult_t ncclAllReduce(const void*, void*, size_t, int, int, ncclComm_t, void*);
ncclResult_t ncclAllGather(const void*, void*, size_t, int, ncclComm_t, void*);
ncclResult_t ncclSend(const void*, size_t, int, int, ncclComm_t, void*);
ncclResult_t ncclRecv(void*, size_t, int, int, ncclComm_t, void*);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  int rank = atoi(argv[1]), nranks = atoi(argv[2]), n = atoi(argv[3]);
  ncclUniqueId id;
  ncclComm_t comm, sub;
  void* stream = (void*)0x10;
  ncclGetUniqueId(&id);
  if (ncclCommInitRank(&comm, nranks, id, rank) != 0) return 3;
  for (int i = 0; i < n; i++) ncclAllReduce(NULL, NULL, 1 << 20, 7, 0, comm, stream);
  ncclGroupStart();
  ncclSend(NULL, 256, 0, (rank + 1) % nranks, comm, stream);
  ncclRecv(NULL, 256, 0, (rank + nranks - 1) % nranks, comm, stream);
  ncclGroupEnd();
  ncclCommSplit(comm, 1, rank, &sub, NULL);
  ncclAllGather(NULL, NULL, 64, 9, sub, stream);
  if (strcmp(argv[4], "hang") == 0) {
    printf("READY\n");
    fflush(stdout);
    for (;;) pause();
  }
  usleep(50000); /* let the poller see the events complete */
  ncclCommDestroy(sub);
  ncclCommDestroy(comm);
  printf("DONE\n");
  return 0;
}
