/*
 * recorder_core.c - state files in shared memory, their records, the heartbeat
 * thread and the text snapshots. See recorder_format.h for the layout and
 * README.md for the environment variables.
 */
#define _GNU_SOURCE
#include "recorder_core.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REC_MAX_COMMS 4096
#define REC_WRITER_NAME "hang-forensics recorder 1"

static pthread_once_t g_config_once = PTHREAD_ONCE_INIT;
static struct rec_config g_config;

static pthread_mutex_t g_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec_comm* g_comms[REC_MAX_COMMS]; /* guarded by g_registry_lock */
static int g_ncomms;
static uint32_t g_next_index;                  /* n in file names, per process */
static int g_thread_started;
static volatile sig_atomic_t g_snapshot_requested;
static struct sigaction g_prev_action;

/* ---------------------------------------------------------------- config */

/* The vDSO's clock_gettime, called directly: glibc's wrapper adds about 1.4 ns to the 3.3 of a
 * coarse read, which events make whenever the heartbeat thread does not publish their clock. */
rec_clock_fn rec_vdso_clock = clock_gettime;

static void find_vdso_clock(void) {
  void* vdso = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (vdso == NULL) return;
#if defined(__aarch64__)
  void* fn = dlsym(vdso, "__kernel_clock_gettime");
#else
  void* fn = dlsym(vdso, "__vdso_clock_gettime");
#endif
  struct timespec ts;
  if (fn != NULL && ((rec_clock_fn)fn)(CLOCK_REALTIME_COARSE, &ts) == 0) rec_vdso_clock = (rec_clock_fn)fn;
}


static long env_long(const char* name, long dflt, long lo, long hi) {
  const char* s = getenv(name);
  if (s == NULL || *s == '\0') return dflt;
  char* end = NULL;
  long v = strtol(s, &end, 0);
  if (end == s || v < lo || v > hi) return dflt;
  return v;
}

/* Where the state is copied when the job dies: FORENSICS_RECORDER_COPY_DIR ("none":
 * nowhere), else the folder of NCCL_DEBUG_FILE, so a logs folder on shared storage
 * holds what /dev/shm held on the host (issue 39). May keep NCCL's %h and %p. */
static void copy_dir_config(char* out, size_t n) {
  out[0] = '\0';
  const char* dir = getenv("FORENSICS_RECORDER_COPY_DIR");
  if (dir && *dir) {
    if (strcmp(dir, "none") != 0) snprintf(out, n, "%s", dir);
    return;
  }
  const char* file = getenv("NCCL_DEBUG_FILE");
  const char* slash = file ? strrchr(file, '/') : NULL;
  if (slash == NULL) return;
  size_t len = (size_t)(slash - file);
  if (len == 0) len = 1; /* a file in / */
  if (len >= n) return;
  memcpy(out, file, len);
  out[len] = '\0';
}

static void load_config(void) {
  const char* dir = getenv("FORENSICS_RECORDER_DIR");
  snprintf(g_config.dir, sizeof g_config.dir, "%s", (dir && *dir) ? dir : "/dev/shm");
  g_config.ring_len = (uint32_t)env_long("FORENSICS_RECORDER_RING", 256, 8, 65536);
  g_config.proxy_slots = (uint32_t)env_long("FORENSICS_RECORDER_PROXY_SLOTS", 1024, 16, 1 << 20);
  g_config.signal = (int)env_long("FORENSICS_RECORDER_SIGNAL", SIGUSR2, 0, 64);
  g_config.heartbeat_ms = (uint32_t)env_long("FORENSICS_RECORDER_HEARTBEAT_MS", 200, 10, 60000);
  g_config.tick_ms = (uint32_t)env_long("FORENSICS_RECORDER_TICK_MS", 4, 0, 100);
  g_config.send_wait_every =
      (uint32_t)env_long("FORENSICS_RECORDER_SEND_WAIT_EVERY", REC_SEND_WAIT_EVERY_DEFAULT, 1, 64);
  g_config.keep = (int)env_long("FORENSICS_RECORDER_KEEP", 0, 0, 1);
  g_config.mask = (int)env_long("FORENSICS_RECORDER_MASK", -1, 0, 0x7fffffff);
  g_config.snapshot_on_finalize = (int)env_long("FORENSICS_RECORDER_SNAPSHOT_ON_FINALIZE", 1, 0, 1);
  copy_dir_config(g_config.copy_dir, sizeof g_config.copy_dir);
  find_vdso_clock();
}

const struct rec_config* rec_config(void) {
  pthread_once(&g_config_once, load_config);
  return &g_config;
}

uint64_t rec_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


/* ------------------------------------------------------- the fast clock */

/* Why: the precise clock (vDSO CLOCK_REALTIME) costs 15-20 ns, four times the coarse one, and
 * the recorder reads it 19 times per collective of one channel (enter/enqueue/complete stamps,
 * each send step entering and leaving SendWait). The counter itself costs about half of that;
 * converting it is one multiply. The heartbeat thread rebases it on CLOCK_REALTIME every beat
 * (two slots, published by index: a reader never sees half a base), so it follows NTP slews
 * to within microseconds. */
struct tick_base rec_tick_base[2];
uint32_t rec_tick_slot;
int rec_ticks_ok;

static inline uint64_t read_ticks(void) { return rec_read_ticks(); }

/* The kernel's clocksource, "" when unknown. */
static __attribute__((unused)) void kernel_clocksource(char* out, size_t n) {
  out[0] = '\0';
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == NULL) return;
  if (fgets(out, (int)n, f) == NULL) out[0] = '\0';
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
}

/* The counter runs at a constant rate across cores and sleep states: x86 says so in /proc/cpuinfo
 * (constant_tsc and nonstop_tsc), or the kernel does by timing itself with it: clocksource "tsc"
 * (the kernel checked it is synchronised across CPUs and watches it), or "kvm-clock" with
 * constant_tsc (a KVM guest: its clock is the same counter scaled, and the host keeps it running
 * whatever the guest's sleep states; hypervisors often leave nonstop_tsc out of a guest's flags,
 * and then every precise stamp was a clock_gettime, ~30 ns, not ~7). Whatever the reason, the
 * heartbeat checks the conversion every beat and gives the counter up if it strays (tick_rebase).
 * aarch64's generic timer is always invariant. */
static int ticks_invariant(void) {
#if defined(REC_NO_COUNTER)
  return 0; /* breakdown build: precise stamps through the vDSO, as where the counter is not trusted */
#elif defined(__x86_64__)
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return 0;
  char line[4096], source[64];
  int constant = 0, nonstop = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    constant = strstr(line, " constant_tsc") != NULL;
    nonstop = strstr(line, " nonstop_tsc") != NULL;
    break;
  }
  fclose(f);
  kernel_clocksource(source, sizeof source);
  if (strcmp(source, "tsc") == 0) return 1;
  return constant && (nonstop || strcmp(source, "kvm-clock") == 0);
#elif defined(__aarch64__)
  return 1;
#else
  return 0;
#endif
}

/* A new base from a fresh (ticks, ns) pair; the rate from the previous base when it is at
 * least `min_ns` old (else kept). Called at calibration and by the heartbeat thread only. */
/* One (ticks, ns) pair read together: of 5 tries, the one whose ns read was bracketed most tightly
 * by two counter reads (a thread preempted mid-pair would skew the base by its time off the CPU). */
static void tick_pair(uint64_t* t, uint64_t* ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t t1 = read_ticks(), n = rec_now_ns(), t2 = read_ticks();
    if (t2 >= t1 && t2 - t1 < best) {
      best = t2 - t1;
      *t = t1 + (t2 - t1) / 2;
      *ns = n;
    }
  }
}

/* How far a converted counter may stray from CLOCK_REALTIME between two beats: far above an NTP
 * slew over a beat (500 ppm x 200 ms = 100 us), far below what a reader could be misled by (ms).
 * A stray beat is taken as a step of the wall clock (settimeofday, an NTP step): a new base at the
 * old rate. Three in a row say the counter itself cannot be trusted: it is given up for good and
 * every precise stamp is a clock_gettime from then on. */
#define REC_TICK_STRAY_NS 1000000
#define REC_TICK_STRAYS 3
static uint32_t g_tick_strays; /* heartbeat thread only */

static void tick_rebase(uint64_t min_ns) {
  const struct tick_base* old = &rec_tick_base[__atomic_load_n(&rec_tick_slot, __ATOMIC_ACQUIRE)];
  uint64_t t = 0, ns = 0;
  tick_pair(&t, &ns);
  struct tick_base nb = {t, ns, old->mult};
  int stray = 0;
  if (__atomic_load_n(&rec_ticks_ok, __ATOMIC_RELAXED) && t > old->ticks) {
    int64_t off = (int64_t)(old->ns + (uint64_t)(((unsigned __int128)(t - old->ticks) * old->mult) >> 32) - ns);
    stray = off > REC_TICK_STRAY_NS || off < -REC_TICK_STRAY_NS;
  }
  g_tick_strays = stray ? g_tick_strays + 1 : 0;
  if (g_tick_strays >= REC_TICK_STRAYS) {
    __atomic_store_n(&rec_ticks_ok, 0, __ATOMIC_RELEASE);
    return;
  }
  if (!stray && ns - old->ns >= min_ns && t > old->ticks)
    nb.mult = (uint64_t)((((unsigned __int128)(ns - old->ns)) << 32) / (t - old->ticks));
  uint32_t next = __atomic_load_n(&rec_tick_slot, __ATOMIC_RELAXED) ^ 1u;
  rec_tick_base[next] = nb;
  __atomic_store_n(&rec_tick_slot, next, __ATOMIC_RELEASE);
}

/* Once per process (first communicator): 2 ms of sleep to measure the rate. */
static void tick_calibrate(void) {
  if (!ticks_invariant()) return;
  tick_pair(&rec_tick_base[0].ticks, &rec_tick_base[0].ns);
  struct timespec ts = {0, 2000000L};
  nanosleep(&ts, NULL);
  tick_rebase(1000000u);
  if (rec_tick_base[rec_tick_slot].mult == 0) return;
  __atomic_store_n(&rec_ticks_ok, 1, __ATOMIC_RELEASE);
}

#ifdef REC_COUNT
__attribute__((visibility("default"))) __thread struct rec_counts hf_recorder_counts;
#endif

uint64_t rec_fast_ns(void) {
#ifdef REC_ABLATE_PRECISE
  return rec_event_ns();
#endif
  REC_COUNTED(precise);
  if (!__atomic_load_n(&rec_ticks_ok, __ATOMIC_RELAXED)) {
    struct timespec ts;
    rec_vdso_clock(CLOCK_REALTIME, &ts); /* the vDSO's own entry: glibc's wrapper adds ~1.4 ns */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  }
  const struct tick_base* b = &rec_tick_base[__atomic_load_n(&rec_tick_slot, __ATOMIC_ACQUIRE)];
  uint64_t t = read_ticks();
  uint64_t d = t > b->ticks ? t - b->ticks : 0; /* another core's counter a hair behind: no step back */
  return b->ns + (uint64_t)(((unsigned __int128)d * b->mult) >> 32);
}

uint64_t rec_span_clock_slow(uint8_t* ticks) {
  *ticks = 0;
#ifdef REC_ABLATE_PRECISE
  return rec_event_ns();
#endif
  REC_COUNTED(precise);
  struct timespec ts;
  rec_vdso_clock(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rec_touch(struct rec_comm* c, uint64_t now) {
#ifdef REC_ABLATE_TOUCH
  (void)c, (void)now;
  return;
#endif
  if (now > __atomic_load_n(&c->hdr->last_event_ns, __ATOMIC_RELAXED) + REC_TOUCH_NS)
    __atomic_store_n(&c->hdr->last_event_ns, now, __ATOMIC_RELEASE);
}

/* NUL-padded copy into a fixed field (libc's strnlen/memcpy/memset are vectorised: a byte loop
 * over the four names of a record cost ~30 ns per collective). */
static void copy_str(char* dst, size_t n, const char* src) {
  size_t len = src ? strnlen(src, n - 1) : 0;
  if (len) memcpy(dst, src, len);
  memset(dst + len, 0, n - len);
}

/* ------------------------------------------------------ heartbeat thread */

static void snapshot_all(const char* reason) {
  pthread_mutex_lock(&g_registry_lock);
  for (int i = 0; i < g_ncomms; i++) rec_snapshot(g_comms[i], reason);
  pthread_mutex_unlock(&g_registry_lock);
}

/* The clock events read (rec_event_ns), published by the heartbeat thread while events come. */
struct rec_tick rec_tick;

/* A forked child has no heartbeat thread: its events read the vDSO's clock again. */
static void tick_forget(void) { __atomic_store_n(&rec_tick.ns, 0, __ATOMIC_RELAXED); }

static void publish_tick(void) { __atomic_store_n(&rec_tick.ns, rec_now_ns(), __ATOMIC_RELAXED); }

/* One look at the event clock: publishes a fresh time while events come; after REC_TICK_IDLE
 * ticks without one, stops (events read the vDSO then, and mark it used). Returns whether the
 * clock ticks, i.e. whether to sleep tick_ms rather than a beat's step. */
static int tick_step(int ticking, uint32_t* idle) {
  int used = __atomic_load_n(&rec_tick.used, __ATOMIC_RELAXED);
  if (used) __atomic_store_n(&rec_tick.used, 0, __ATOMIC_RELAXED);
  *idle = used ? 0 : *idle + 1;
  if (!used && (!ticking || *idle >= REC_TICK_IDLE)) {
    tick_forget();
    return 0;
  }
  publish_tick();
  return 1;
}

/* Beats every heartbeat_ms so a reader can tell a live process (fresh beat) from a
 * frozen one (SIGSTOP, stuck in the kernel): the beat stops with the process.
 * While NCCL's threads record events, also publishes their clock every tick_ms (stamps lag it
 * by at most that plus the time this thread waits for a CPU; the coarse clock itself lags by its
 * 1-4 ms tick), with a timer slack of 1 ms so the kernel can fold the wake-up into others; idle,
 * it wakes every min(heartbeat_ms, 100) ms as before. Also writes the snapshots a signal asked
 * for, outside the signal handler. */
static void* heartbeat_main(void* arg) {
  (void)arg;
  const struct rec_config* cfg = rec_config();
  prctl(PR_SET_TIMERSLACK, 1000000UL, 0, 0, 0);
  uint32_t idle_ms = cfg->heartbeat_ms < 100 ? cfg->heartbeat_ms : 100;
  uint32_t since_beat = cfg->heartbeat_ms, idle = 0;
  int ticking = cfg->tick_ms > 0;
  for (;;) {
    if (cfg->tick_ms > 0) ticking = tick_step(ticking, &idle);
    if (since_beat >= cfg->heartbeat_ms) {
      if (__atomic_load_n(&rec_ticks_ok, __ATOMIC_RELAXED)) tick_rebase(50000000u);
      uint64_t now = rec_now_ns();
      pthread_mutex_lock(&g_registry_lock);
      for (int i = 0; i < g_ncomms; i++) {
        REC_ATOMIC_STORE(&g_comms[i]->hdr->heartbeat_ns, now);
        REC_ATOMIC_ADD(&g_comms[i]->hdr->heartbeat_count, 1);
      }
      pthread_mutex_unlock(&g_registry_lock);
      since_beat = 0;
    }
    if (g_snapshot_requested) {
      g_snapshot_requested = 0;
      snapshot_all("signal");
    }
    uint32_t ms = ticking && cfg->tick_ms < idle_ms ? cfg->tick_ms : idle_ms;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    since_beat += ms;
  }
  return NULL;
}

/* Hands a signal on to the handler that was there before ours. */
static void chain(const struct sigaction* prev, int sig, siginfo_t* info, void* uctx) {
  if (prev->sa_flags & SA_SIGINFO) {
    if (prev->sa_sigaction) prev->sa_sigaction(sig, info, uctx);
  } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN && prev->sa_handler != NULL) {
    prev->sa_handler(sig);
  }
}

static void on_signal(int sig, siginfo_t* info, void* uctx) {
  g_snapshot_requested = 1; /* the heartbeat thread writes it: only async-signal-safe work here */
  chain(&g_prev_action, sig, info, uctx);
}

static pid_t g_owner_pid;
static struct sigaction g_prev_abort;
static volatile sig_atomic_t g_abort_copied;

/* Copies every registered communicator's state. Called from at_exit and from the
 * SIGABRT handler: the registry is read without its lock (a mutex is not
 * async-signal-safe); its count is bounded and entries are only removed at a
 * clean finalize, which has nothing left to tell. */
static void copy_all(void) {
  int n = g_ncomms;
  if (n > REC_MAX_COMMS) n = REC_MAX_COMMS;
  for (int i = 0; i < n; i++) {
    struct rec_comm* c = g_comms[i];
    if (c != NULL) rec_copy_out(c, RECORDER_FLAG_DEATH_COPY);
  }
}

/* SIGABRT (torch's watchdog takes the process down with abort()): copy the state
 * beside the NCCL logs, then hand the signal on: to the previous handler (Python's
 * faulthandler, say), or, where that was the default action, to the default. */
static void on_abort(int sig, siginfo_t* info, void* uctx) {
  int saved = errno;
  if (!g_abort_copied && getpid() == g_owner_pid) {
    g_abort_copied = 1;
    copy_all();
  }
  errno = saved;
  if (!(g_prev_abort.sa_flags & SA_SIGINFO) && g_prev_abort.sa_handler == SIG_DFL) {
    sigaction(sig, &g_prev_abort, NULL); /* delivered again, with the default action, when we return */
    raise(sig);
    return;
  }
  chain(&g_prev_abort, sig, info, uctx);
}

static void install_abort_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_abort;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGABRT, &sa, &g_prev_abort);
}

/* Only the process that opened the files writes exit snapshots: a forked child
 * (a DataLoader worker, say) shares the mappings but must not overwrite them. */
static void at_exit(void) {
  if (getpid() != g_owner_pid) return;
  snapshot_all("exit");
  pthread_mutex_lock(&g_registry_lock);
  copy_all();
  pthread_mutex_unlock(&g_registry_lock);
}

/* Called with g_registry_lock held, once per process. */
static void start_background(void) {
  if (g_thread_started) return;
  g_thread_started = 1;
  g_owner_pid = getpid();
  tick_calibrate();
  const struct rec_config* cfg = rec_config();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t tid;
  /* Block every signal in the new thread so signals keep going where they went. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  if (cfg->tick_ms > 0) publish_tick(); /* events of the first communicator read it from now on */
  pthread_atfork(NULL, NULL, tick_forget);
  if (pthread_create(&tid, &attr, heartbeat_main, NULL) == 0) pthread_setname_np(tid, "nccl-recorder");
  else tick_forget();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (cfg->signal > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(cfg->signal, &sa, &g_prev_action);
  }
  if (cfg->copy_dir[0]) install_abort_handler();
  atexit(at_exit);
}

/* ----------------------------------------------------------- state file */

static void short_hostname(char* out, size_t n) {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) snprintf(buf, sizeof buf, "unknown");
  char* dot = strchr(buf, '.');
  if (dot) *dot = '\0';
  for (char* p = buf; *p; p++)
    if (*p == '/' || *p == ' ') *p = '_';
  copy_str(out, n, buf);
}

/* Create the state directory and its parents when missing (like mkdir -p), so a
 * configured FORENSICS_RECORDER_DIR that nobody made yet does not silently turn
 * the recorder off. Sticky like /tmp: ranks of several users can share it. */
static void ensure_dir(const char* dir) {
  char path[512];
  snprintf(path, sizeof path, "%s", dir);
  for (char* p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 01777) != 0 && errno != EEXIST) return;
    *p = '/';
  }
  if (mkdir(path, 01777) != 0 && errno != EEXIST) return;
}

/* Expands NCCL's %h (host) and %p (pid) in the copy folder, as NCCL_DEBUG_FILE does. */
static void expand_dir(char* out, size_t n, const char* tmpl, const char* host, int pid) {
  size_t o = 0;
  for (const char* p = tmpl; *p && o + 1 < n; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      int w = p[1] == 'h' ? snprintf(out + o, n - o, "%s", host) : snprintf(out + o, n - o, "%d", pid);
      if (w < 0 || (size_t)w >= n - o) break;
      o += (size_t)w;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o < n ? o : n - 1] = '\0';
}

static void set_copy_path(struct rec_comm* c, const char* host, int pid, uint32_t index) {
  const struct rec_config* cfg = rec_config();
  c->copy_path[0] = '\0';
  if (!cfg->copy_dir[0]) return;
  char dir[300];
  expand_dir(dir, sizeof dir, cfg->copy_dir, host, pid);
  if (strcmp(dir, cfg->dir) == 0) return; /* the state is there already */
  ensure_dir(dir);
  snprintf(c->copy_path, sizeof c->copy_path, "%s/nccl-recorder.%s.%d.%u.bin", dir, host, pid, index);
  snprintf(c->copy_tmp, sizeof c->copy_tmp, "%s.tmp", c->copy_path);
}

/* write(2) until all of `len` is written: 1, or 0 on an error (async-signal-safe). */
static int write_all(int fd, const char* p, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    p += w;
    len -= (size_t)w;
  }
  return 1;
}

/* Bytes of the copy: the whole file for a death copy; for a finalize copy the header and the ring
 * (rounded up as the proxy area's offset is), with the header saying so: no proxy slots, that size. */
static size_t copy_size(const struct rec_comm* c, uint32_t flag, struct recorder_header* h) {
  if (flag != RECORDER_FLAG_FINALIZE_COPY || h->proxy_offset > c->size) return c->size;
  h->proxy_slots = 0;
  h->file_size = h->proxy_offset;
  return h->proxy_offset;
}

void rec_copy_out(const struct rec_comm* c, uint32_t flag) {
  if (c == NULL || c->copy_path[0] == '\0' || c->hdr == NULL) return;
  /* Safe in a folder others can write (the logs folder, made sticky 01777): a stale or planted
   * temporary name is removed, then created anew and never followed (O_EXCL | O_NOFOLLOW); the
   * copy is the rank's own (0600); rename replaces a link at the final name instead of following it. */
  unlink(c->copy_tmp);
  int fd = open(c->copy_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  /* The header as it is, marked a copy and stamped with this moment (memcpy and clock_gettime
   * are async-signal-safe); the rest straight from the mapping. */
  struct recorder_header h;
  memcpy(&h, c->hdr, sizeof h);
  h.flags |= flag;
  h.heartbeat_ns = rec_now_ns();
  size_t size = copy_size(c, flag, &h);
  int whole = write_all(fd, (const char*)&h, sizeof h) &&
              write_all(fd, (const char*)c->hdr + sizeof h, size - sizeof h);
  close(fd);
  if (whole) rename(c->copy_tmp, c->copy_path);
  else unlink(c->copy_tmp);
}

struct rec_comm* rec_comm_open(uint32_t writer_kind, uint32_t abi_version, uint64_t comm_id, const char* name,
                               int nnodes, int nranks, int rank, uint32_t mask, char* err, size_t errlen) {
  const struct rec_config* cfg = rec_config();
  /* proxy_slots is at most 2^20 (rec_config): the spans take at most 32 MiB (32 KiB by default) */
  struct rec_comm* c = calloc(1, sizeof *c + (size_t)cfg->proxy_slots * sizeof(struct rec_send_span));
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  char host[64];
  short_hostname(host, sizeof host);
  uint32_t index = __atomic_fetch_add(&g_next_index, 1, __ATOMIC_RELAXED);
  int pid = (int)getpid();
  snprintf(c->path, sizeof c->path, "%.255s/nccl-recorder.%s.%d.%u.bin", cfg->dir, host, pid, index);
  snprintf(c->txt_path, sizeof c->txt_path, "%.255s/nccl-recorder.%s.%d.%u.txt", cfg->dir, host, pid, index);
  set_copy_path(c, host, pid, index);
  c->ring_len = cfg->ring_len;
  c->proxy_slots = cfg->proxy_slots;
  c->ring_mask = rec_mask(c->ring_len);
  c->proxy_mask = rec_mask(c->proxy_slots);
  c->send_wait_every = cfg->send_wait_every;
  size_t ring_off = RECORDER_HEADER_SIZE;
  /* Proxy records start on a multiple of their size (the mapping is page-aligned), so a step's
   * op is its address rounded down: no load on the step path (readers take proxy_offset as is). */
  size_t proxy_off = ring_off + (size_t)c->ring_len * sizeof(struct recorder_coll);
  proxy_off = (proxy_off + sizeof(struct recorder_proxy) - 1) / sizeof(struct recorder_proxy) *
              sizeof(struct recorder_proxy);
  c->size = proxy_off + (size_t)c->proxy_slots * sizeof(struct recorder_proxy);

  /* Built under a temporary name and renamed when whole: a reader listing the
   * directory never meets a half-made file. */
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
  ensure_dir(cfg->dir);
  int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create %s: %s", c->path, strerror(errno));
    free(c);
    return NULL;
  }
  /* Reserve the pages now: a full /dev/shm must fail here, not as SIGBUS later. */
  int rc = posix_fallocate(fd, 0, (off_t)c->size);
  if (rc != 0) {
    snprintf(err, errlen, "cannot reserve %zu bytes for %s: %s", c->size, c->path, strerror(rc));
    close(fd);
    unlink(tmp);
    free(c);
    return NULL;
  }
  void* base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(err, errlen, "cannot map %s: %s", c->path, strerror(errno));
    unlink(tmp);
    free(c);
    return NULL;
  }
  memset(base, 0, c->size); /* touch every page: no page faults on the hot path */
  c->hdr = (struct recorder_header*)base;
  c->ring = (struct recorder_coll*)((char*)base + ring_off);
  c->proxy = (struct recorder_proxy*)((char*)base + proxy_off);
  c->kch_enabled = (mask & 0x40) != 0;
  /* each slot's companion knows its comm; writing them now touches their pages, as the file's: no page
   * faults on the hot path */
  for (uint32_t i = 0; i < c->proxy_slots; i++) c->spans[i].comm = c;

  struct recorder_header* h = c->hdr;
  h->format_version = RECORDER_FORMAT_VERSION;
  h->header_size = RECORDER_HEADER_SIZE;
  h->file_size = c->size;
  h->coll_rec_size = sizeof(struct recorder_coll);
  h->coll_ring_len = c->ring_len;
  h->proxy_rec_size = sizeof(struct recorder_proxy);
  h->proxy_slots = c->proxy_slots;
  h->coll_ring_offset = (uint32_t)ring_off;
  h->proxy_offset = (uint32_t)proxy_off;
  h->writer_kind = writer_kind;
  h->abi_version = abi_version;
  h->pid = pid;
  h->comm_id = comm_id;
  h->rank = rank;
  h->nranks = nranks;
  h->nnodes = nnodes;
  h->env_rank = (int32_t)env_long("RANK", -1, 0, 1 << 30);
  h->start_ns = rec_now_ns();
  h->heartbeat_ns = h->start_ns;
  h->last_event_ns = h->start_ns;
  h->event_mask = mask;
  h->heartbeat_ms = cfg->heartbeat_ms;
  copy_str(h->host, sizeof h->host, host);
  copy_str(h->hostid, sizeof h->hostid, getenv("NCCL_HOSTID"));
  copy_str(h->comm_name, sizeof h->comm_name, name);
  copy_str(h->writer, sizeof h->writer, REC_WRITER_NAME);
  h->comm_index = index;
  h->flags = RECORDER_FLAG_PRECISE_OP_TIMES | RECORDER_FLAG_SEND_WAIT_UNION;
  h->send_wait_every = c->send_wait_every;
  if (c->send_wait_every > 1) h->flags |= RECORDER_FLAG_SEND_WAIT_SAMPLED;
  h->comm_state = RECORDER_COMM_ACTIVE;
  __atomic_thread_fence(__ATOMIC_RELEASE);
  memcpy(h->magic, RECORDER_MAGIC, 8); /* last: a reader never sees a half-made header as valid */
  if (rename(tmp, c->path) != 0) {
    snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, c->path, strerror(errno));
    munmap(base, c->size);
    unlink(tmp);
    free(c);
    return NULL;
  }

  pthread_mutex_lock(&g_registry_lock);
  if (g_ncomms < REC_MAX_COMMS) g_comms[g_ncomms++] = c;
  start_background();
  pthread_mutex_unlock(&g_registry_lock);
  return c;
}

static int has_in_flight(const struct rec_comm* c) {
  for (uint32_t i = 0; i < c->proxy_slots; i++)
    if (REC_ATOMIC_LOAD(&c->proxy[i].state) == RECORDER_PROXY_ACTIVE) return 1;
  uint64_t n = REC_ATOMIC_LOAD(&c->hdr->coll_next);
  uint64_t first = n > c->ring_len ? n - c->ring_len : 0;
  for (uint64_t k = first; k < n; k++) {
    const struct recorder_coll* r = &c->ring[k % c->ring_len];
    if (r->index == k && r->kind != RECORDER_KIND_EMPTY && REC_ATOMIC_LOAD(&r->complete_ns) == 0) return 1;
  }
  return 0;
}

void rec_comm_close(struct rec_comm* c) {
  if (c == NULL) return;
  const struct rec_config* cfg = rec_config();
  pthread_mutex_lock(&g_registry_lock);
  for (int i = 0; i < g_ncomms; i++) {
    if (g_comms[i] == c) {
      g_comms[i] = g_comms[--g_ncomms];
      break;
    }
  }
  pthread_mutex_unlock(&g_registry_lock);
  c->hdr->finalize_ns = rec_now_ns();
  REC_ATOMIC_STORE(&c->hdr->comm_state, RECORDER_COMM_FINALIZED);
  int busy = has_in_flight(c);
  if (cfg->snapshot_on_finalize || busy) rec_snapshot(c, busy ? "finalize (ops still in flight)" : "finalize");
  msync(c->hdr, c->size, MS_ASYNC);
  /* An abort mid-hang (torch's watchdog): the logs folder gets the whole state. A clean finalize leaves the
   * header and ring there too: what a rank called is the evidence of an order mismatch it finished. */
  rec_copy_out(c, busy ? RECORDER_FLAG_DEATH_COPY : RECORDER_FLAG_FINALIZE_COPY);
  if (busy) {
    /* Ops still open (an abort mid-hang): NCCL may yet stop their handles, which
     * point into this mapping, so it stays mapped (and the .bin stays on disk). */
    c->finalized = 1;
    return;
  }
  munmap(c->hdr, c->size);
  if (!cfg->keep) unlink(c->path);
  free(c);
}

/* ------------------------------------------------------------- records */

static inline void seq_begin(uint32_t* gen) {
  uint32_t g = __atomic_load_n(gen, __ATOMIC_RELAXED);
  __atomic_store_n(gen, g | 1u, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void seq_end(uint32_t* gen) {
  uint32_t g = __atomic_load_n(gen, __ATOMIC_RELAXED);
  __atomic_store_n(gen, (g | 1u) + 1u, __ATOMIC_RELEASE);
}

_Static_assert(sizeof(((struct recorder_coll*)0)->func) == sizeof(((struct rec_names*)0)->func) &&
                   sizeof(((struct recorder_coll*)0)->dtype) == sizeof(((struct rec_names*)0)->dtype) &&
                   sizeof(((struct recorder_coll*)0)->algo) == sizeof(((struct rec_names*)0)->algo) &&
                   sizeof(((struct recorder_coll*)0)->proto) == sizeof(((struct rec_names*)0)->proto),
               "a record's names and their images are the same size");

/* A record's four names: the images of the previous record where NCCL passed the same addresses
 * (its constant strings), else copied and remembered (struct rec_names says why). */
static inline void copy_names(struct rec_names* n, struct recorder_coll* r, const char* func, const char* dtype,
                              const char* algo, const char* proto) {
  if (__builtin_expect(func != n->src[0] || dtype != n->src[1] || algo != n->src[2] || proto != n->src[3], 0)) {
    copy_str(n->func, sizeof n->func, func);
    copy_str(n->dtype, sizeof n->dtype, dtype);
    copy_str(n->algo, sizeof n->algo, algo);
    copy_str(n->proto, sizeof n->proto, proto);
    n->src[0] = func, n->src[1] = dtype, n->src[2] = algo, n->src[3] = proto;
  }
  memcpy(r->func, n->func, sizeof r->func); /* fixed sizes: a few moves, no call */
  memcpy(r->dtype, n->dtype, sizeof r->dtype);
  memcpy(r->algo, n->algo, sizeof r->algo);
  memcpy(r->proto, n->proto, sizeof r->proto);
}

struct recorder_coll* rec_coll_begin(struct rec_comm* c, uint8_t kind, uint64_t seq, const char* func, uint64_t count,
                                     const char* dtype, int root_or_peer, uint8_t n_channels, uint8_t n_warps,
                                     const char* algo, const char* proto) {
  /* Enter and completion stamps tell a straggler by a few ms: the precise clock, once
   * each per operation (tens of ns); per-step stamps stay on the coarse clock. */
  uint64_t now = rec_fast_ns();
  uint64_t index = REC_FETCH_ADD(&c->hdr->coll_next, 1, __ATOMIC_ACQ_REL);
  struct recorder_coll* r = &c->ring[rec_slot(index, c->ring_len, c->ring_mask)];
  seq_begin(&r->gen);
  r->kind = kind;
  r->n_channels = n_channels;
  r->n_warps = n_warps;
  REC_ATOMIC_STORE(&r->index, index);
  r->seq = seq;
  r->count = count;
  r->root_or_peer = root_or_peer;
  REC_ATOMIC_STORE(&r->proxy_started, 0);
  REC_ATOMIC_STORE(&r->proxy_done, 0);
  REC_ATOMIC_STORE(&r->kch_started, 0);
  REC_ATOMIC_STORE(&r->kch_done, 0);
  r->start_ns = now;
  REC_ATOMIC_STORE(&r->enqueued_ns, 0);
  REC_ATOMIC_STORE(&r->last_progress_ns, now);
  REC_ATOMIC_STORE(&r->complete_ns, 0);
  copy_names(&c->names, r, func, dtype, algo, proto);
  r->writer_private = (uint64_t)(uintptr_t)c; /* the owning comm, for stop handlers */
  seq_end(&r->gen);
  rec_touch(c, now);
  return r;
}


void rec_comm_identify(struct rec_comm* c, uint64_t comm_id, const char* name, int rank) {
  if (REC_ATOMIC_LOAD(&c->hdr->comm_id) != 0 || comm_id == 0) return;
  copy_str(c->hdr->comm_name, sizeof c->hdr->comm_name, name);
  c->hdr->rank = rank;
  REC_ATOMIC_STORE(&c->hdr->comm_id, comm_id);
}


void rec_coll_complete(struct rec_comm* c, struct recorder_coll* r, uint64_t when_ns) {
  uint64_t zero = 0;
  REC_CAS(&r->complete_ns, &zero, when_ns);
  rec_touch(c, when_ns);
}

/* Completion is inferred: the op was enqueued, every proxy op it started has
 * stopped, and (when KernelCh events are on) every channel's kernel has stopped. */
static void maybe_complete(struct rec_comm* c, struct recorder_coll* r, uint64_t now) {
  if (REC_ATOMIC_LOAD(&r->complete_ns) != 0 || REC_ATOMIC_LOAD(&r->enqueued_ns) == 0) return;
  uint32_t ps = REC_ATOMIC_LOAD(&r->proxy_started), pd = REC_ATOMIC_LOAD(&r->proxy_done);
  uint32_t ks = REC_ATOMIC_LOAD(&r->kch_started), kd = REC_ATOMIC_LOAD(&r->kch_done);
  if (pd != ps || kd != ks) return;
  if (r->kind == RECORDER_KIND_P2P || !c->kch_enabled) {
    if (ps == 0 && ks == 0) return; /* nothing started yet: not done, just not begun */
  } else if (kd < r->n_channels) {
    return; /* a collective runs on n_channels channels: wait for each kernel channel */
  }
  (void)now;
  rec_coll_complete(c, r, rec_fast_ns()); /* precise, once per op: wait = complete - start tells a straggler */
}

void rec_coll_enqueued(struct rec_comm* c, struct recorder_coll* r) {
  /* The event clock, not the precise one: a reader tells from it that the op left the user's call
   * (enqueued_ns != 0) and how long ago, in tenths of a second (parsers' recorder judge); the
   * precise stamps a live read compares across ranks are start and completion. Never before the
   * start, so start <= enqueued <= complete still holds. One precise read (~7-30 ns) less per op. */
  uint64_t now = rec_event_ns();
  if (now < r->start_ns) now = r->start_ns;
  REC_ATOMIC_STORE(&r->enqueued_ns, now);
  rec_touch(c, now);
  maybe_complete(c, r, now);
}

void rec_coll_child(struct rec_comm* c, struct recorder_coll* r, uint64_t expect_index, int kernel, int done,
                    uint64_t now) {
  if (REC_ATOMIC_LOAD(&r->index) != expect_index) return; /* the ring moved on: the slot is another op now */
  if (now == 0) now = rec_event_ns();
  if (kernel) REC_ATOMIC_ADD(done ? &r->kch_done : &r->kch_started, 1);
  else REC_ATOMIC_ADD(done ? &r->proxy_done : &r->proxy_started, 1);
  REC_ATOMIC_STORE(&r->last_progress_ns, now);
  rec_touch(c, now);
  if (done) maybe_complete(c, r, now);
}

struct recorder_proxy* rec_proxy_begin(struct rec_comm* c, struct recorder_coll* parent, int rank, int pid,
                                       int peer, int channel, int is_send, int n_steps, int chunk_size) {
  uint64_t op_index = REC_FETCH_ADD(&c->hdr->proxy_next, 1, __ATOMIC_ACQ_REL);
  struct recorder_proxy* p = NULL;
  for (uint32_t probe = 0; probe < 16; probe++) {
    struct recorder_proxy* q = &c->proxy[rec_slot(op_index + probe, c->proxy_slots, c->proxy_mask)];
    uint32_t st = REC_ATOMIC_LOAD(&q->state);
    if (st == RECORDER_PROXY_ACTIVE) continue; /* still in flight: never overwrite it */
    if (REC_CAS(&q->state, &st, RECORDER_PROXY_ACTIVE)) {
      p = q;
      break;
    }
  }
  if (p == NULL) {
    REC_ATOMIC_ADD(&c->hdr->dropped_proxy, 1);
    return NULL;
  }
  uint64_t now = rec_event_ns();
  uint64_t idx = UINT64_MAX;
  if (parent != NULL) {
    /* The parent's count first, before this record's stores: a locked add waits until every store
     * before it is written, here ~30 to lines the slot pool has let go cold. */
    idx = REC_ATOMIC_LOAD(&parent->index);
    rec_coll_child(c, parent, idx, 0, 0, now); /* the op's own stamp: one clock read, not two */
  }
  seq_begin(&p->gen);
  p->op_index = op_index;
  p->pid = pid;
  p->rank = rank;
  p->peer = peer;
  p->channel = (uint8_t)channel;
  p->is_send = (uint8_t)(is_send != 0);
  p->last_state = 0;
  p->in_progress = 0;
  p->n_steps = n_steps;
  p->chunk_size = chunk_size;
  p->steps_started = 0;
  p->steps_done = 0;
  p->last_step = -1;
  p->start_ns = now;
  p->last_progress_ns = now;
  p->stop_ns = 0;
  p->trans_bytes = 0;
  p->send_wait_union_us = 0;
  /* the slot's companion (p is c->proxy[slot]); its previous op may have ended with a span open */
  struct rec_send_span* sp = &c->spans[p - c->proxy];
  if (is_send) {
    memset((char*)sp + sizeof sp->comm, 0, sizeof *sp - sizeof sp->comm);
    sp->every = (uint16_t)c->send_wait_every;
  } else {
    sp->in_wait = 0; /* a receive never moves its span; a send op's stop closes one it left open */
  }
  p->writer_private = (uint64_t)(uintptr_t)sp; /* for stop/record handlers: the span and the owning comm */
  /* each slot's head (step -1, state 0, done 0, slot i) as one word, then its time: 2 stores, not 5 */
  for (int i = 0; i < RECORDER_STEP_SLOTS; i++) {
    __atomic_store_n((uint64_t*)(void*)&p->steps[i], (uint64_t)UINT32_MAX | (uint64_t)i << 48, __ATOMIC_RELAXED);
    p->steps[i].ts_ns = 0;
  }
  if (parent != NULL) {
    p->coll_index = idx;
    p->coll_seq = parent->seq;
    /* the parent's func is NUL-padded: its first 16 bytes, cut at 15, are what copy_str would write */
    memcpy(p->func, parent->func, sizeof p->func);
    p->func[sizeof p->func - 1] = '\0';
  } else {
    p->coll_index = UINT64_MAX;
    p->coll_seq = UINT64_MAX;
    memset(p->func, 0, sizeof p->func);
  }
  seq_end(&p->gen);
  rec_touch(c, now);
  return p;
}

/* An op stopped with a step still in SendWait (NCCL stops every step first; an abort may not): its
 * span is closed at the stop, so the field holds what was seen rather than nothing. */
static void close_open_span(struct recorder_proxy* p) {
  struct rec_send_span* sp = rec_span(p);
  if (sp->in_wait != 0) {
    sp->in_wait = 0;
    rec_span_close(p, sp);
  }
  rec_span_final(p, sp);
}

void rec_span_final(struct recorder_proxy* p, struct rec_send_span* sp) {
  if (sp->untimed == 0) return; /* every span timed: the field is exact already */
  rec_span_store(p, sp, sp->singles ? sp->single_ns / sp->singles : sp->last_single);
}

void rec_proxy_end(struct recorder_proxy* p) {
  struct rec_comm* c = rec_span(p)->comm;
  if (p->is_send) close_open_span(p);
  uint64_t now = rec_event_ns();
  REC_ATOMIC_STORE(&p->stop_ns, now);
  REC_ATOMIC_STORE(&p->last_progress_ns, now);
  REC_ATOMIC_STORE(&p->state, RECORDER_PROXY_DONE);
  if (p->coll_index != UINT64_MAX)
    rec_coll_child(c, &c->ring[rec_slot(p->coll_index, c->ring_len, c->ring_mask)], p->coll_index, 0, 1, now);
  rec_touch(c, now);
}

/* -------------------------------------------------------------- snapshot */

static const char* step_state_name(int s) {
  switch (s) {
    case 0: return "Started";
    case 8: return "SendGPUWait";
    case 9: return "SendWait";
    case 10: return "RecvWait";
    case 11: return "RecvFlushWait";
    case 12: return "RecvGPUWait";
    case 20: return "SendPeerWait";
    default: return "Unknown";
  }
}

static double ms_ago(uint64_t now, uint64_t t) { return t == 0 ? -1.0 : (double)((int64_t)(now - t)) / 1e6; }

int rec_snapshot(struct rec_comm* c, const char* reason) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", c->txt_path);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) return -1;
  const struct recorder_header* h = c->hdr;
  uint64_t now = rec_now_ns();
  fprintf(f, "# hang-forensics NCCL recorder snapshot (format %u)\n", h->format_version);
  fprintf(f, "reason %s\ntime_ns %llu\npid %d host %s hostid %s env_rank %d\n", reason, (unsigned long long)now,
          h->pid, h->host, h->hostid, h->env_rank);
  fprintf(f, "comm 0x%llx name \"%s\" rank %d nranks %d nnodes %d state %s\n", (unsigned long long)h->comm_id,
          h->comm_name, h->rank, h->nranks, h->nnodes, h->comm_state == RECORDER_COMM_FINALIZED ? "finalized" : "active");
  fprintf(f, "heartbeat %.1f ms ago, last event %.1f ms ago, records %llu, proxy ops %llu, dropped %llu\n",
          ms_ago(now, h->heartbeat_ns), ms_ago(now, h->last_event_ns), (unsigned long long)h->coll_next,
          (unsigned long long)h->proxy_next, (unsigned long long)h->dropped_proxy);
  uint64_t n = REC_ATOMIC_LOAD(&h->coll_next);
  uint64_t first = n > 16 ? n - 16 : 0;
  if (n > c->ring_len && first < n - c->ring_len) first = n - c->ring_len;
  fprintf(f, "## recent operations (oldest first)\n");
  for (uint64_t k = first; k < n; k++) {
    const struct recorder_coll* r = &c->ring[k % c->ring_len];
    if (r->index != k) continue;
    const char* st = r->complete_ns ? "complete" : (r->enqueued_ns ? "in-flight" : "enqueuing");
    fprintf(f,
            "op %llu %s %s seq %llu count %llu dtype %s algo %s proto %s nch %u peer/root %d %s "
            "proxy %u/%u kernel %u/%u started %.1f ms ago last progress %.1f ms ago\n",
            (unsigned long long)k, r->kind == RECORDER_KIND_P2P ? "p2p" : "coll", r->func,
            (unsigned long long)r->seq, (unsigned long long)r->count, r->dtype, r->algo, r->proto, r->n_channels,
            r->root_or_peer, st, r->proxy_done, r->proxy_started, r->kch_done, r->kch_started, ms_ago(now, r->start_ns),
            ms_ago(now, r->last_progress_ns));
  }
  fprintf(f, "## proxy ops in flight\n");
  for (uint32_t i = 0; i < c->proxy_slots; i++) {
    const struct recorder_proxy* p = &c->proxy[i];
    if (p->state != RECORDER_PROXY_ACTIVE) continue;
    fprintf(f,
            "proxy %llu %s seq %lld channel %u peer %d %s state %s step %d done %d/%d pid %d last progress %.1f ms ago\n",
            (unsigned long long)p->op_index, p->func[0] ? p->func : "?",
            p->coll_seq == UINT64_MAX ? -1LL : (long long)p->coll_seq, p->channel, p->peer, p->is_send ? "send" : "recv",
            step_state_name(p->last_state), p->last_step, p->steps_done, p->n_steps, p->pid,
            ms_ago(now, p->last_progress_ns));
  }
  fclose(f);
  return rename(tmp, c->txt_path);
}
