/*
 * slow_send.c - a slow link for the device scenarios (issue 15): an LD_PRELOAD library that
 * makes one process's socket sends slow, so NCCL's socket transport out of that rank runs at a
 * set rate while its GPU, CPU and every other rank run at full speed.
 *
 *   HF_SLOW_SEND_NS_PER_BYTE  after each send()/sendmsg() that moved at least HF_SLOW_SEND_MIN
 *                             bytes (default 4096: bootstrap and store messages are smaller),
 *                             sleep this many ns per byte moved (4 = about 250 MB/s)
 *
 * Build: gcc -O2 -shared -fPIC slow_send.c -o slow_send.so -ldl
 * Not part of hang-forensics itself: a fault injector for the scenario driver.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

static ssize_t (*real_send)(int, const void*, size_t, int);
static ssize_t (*real_sendmsg)(int, const struct msghdr*, int);
static double ns_per_byte = 0.0;
static size_t min_bytes = 4096;

__attribute__((constructor)) static void slow_send_init(void) {
  real_send = (ssize_t(*)(int, const void*, size_t, int))dlsym(RTLD_NEXT, "send");
  real_sendmsg = (ssize_t(*)(int, const struct msghdr*, int))dlsym(RTLD_NEXT, "sendmsg");
  const char* rate = getenv("HF_SLOW_SEND_NS_PER_BYTE");
  const char* least = getenv("HF_SLOW_SEND_MIN");
  if (rate) ns_per_byte = atof(rate);
  if (least) min_bytes = (size_t)atol(least);
}

static void pace(ssize_t moved) {
  if (ns_per_byte <= 0.0 || moved < (ssize_t)min_bytes) return;
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* the default 50 us slack would round short sleeps up */
  double ns = ns_per_byte * (double)moved;
  struct timespec ts = {(time_t)(ns / 1e9), (long)(ns - (double)(time_t)(ns / 1e9) * 1e9)};
  nanosleep(&ts, NULL);
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  ssize_t moved = real_send(fd, buf, len, flags);
  pace(moved);
  return moved;
}

ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  ssize_t moved = real_sendmsg(fd, msg, flags);
  pace(moved);
  return moved;
}
