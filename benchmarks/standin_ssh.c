/*
 * Benchmark-only stand-in for ssh, the same contract as benchmarks/standin_ssh (perl), in C.
 * benchmarks/fleet_fanout.py compiles it (statically when it can) into its temp folder at start
 * and passes the binary as ssh_path; it is never on the production path.
 *
 * ClusterShell runs it as `ssh [options] HOST COMMAND`. For a target host it ignores all of
 * that, waits $FORENSICS_STANDIN_LATENCY seconds (default 1) and copies the real, wire-encoded
 * host answer in $FORENSICS_STANDIN_ANSWER to stdout (when that names a folder: its file named
 * after the host, else its file 'default'). For a ClusterShell gateway (COMMAND runs
 * `-m ClusterShell.Gateway`, tree mode; or `-m forensics.fleet.reduce`, the reduced tree) it execs that
 * real gateway here through /bin/sh, as sshd would on the gateway host.
 *
 * Why C: the perl stand-in cost ~4.4 ms of CPU a host here (perl's start-up), 18 s of the
 * 2 cores at 4,096 hosts, all of it spent by the stand-in and none by the orchestrator being
 * measured. A static binary starts in well under a millisecond. Still one real process per
 * host, exec'd by the orchestrator's transport exactly as ssh would be.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GATEWAY "-m ClusterShell.Gateway"
#define REDUCER "-m forensics.fleet.reduce"

/* COMMAND holds WORDS ("-m ClusterShell.Gateway") as whole words (the perl version's regex). */
static int holds(const char *command, const char *words) {
    size_t n = strlen(words);
    for (const char *at = strstr(command, words); at != NULL; at = strstr(at + 1, words)) {
        int starts = at == command || at[-1] == ' ' || at[-1] == '\t' || at[-1] == '\n';
        char after = at[n];
        if (starts && (after == '\0' || after == ' ' || after == '\t' || after == '\n'))
            return 1;
    }
    return 0;
}

/* A host name that may name a file in the answers folder: [A-Za-z0-9._-]+ */
static int plain_name(const char *s) {
    if (*s == '\0')
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static void wait_latency(void) {
    const char *text = getenv("FORENSICS_STANDIN_LATENCY");
    double seconds = text ? strtod(text, NULL) : 1.0;
    if (!(seconds > 0))
        return;
    struct timespec left = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

static int copy_out(int fd) {
    char buf[1 << 16];
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got == 0)
            return 0;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (ssize_t done = 0; done < got;) {
            ssize_t put = write(1, buf + done, (size_t)(got - done));
            if (put < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            done += put;
        }
    }
}

int main(int argc, char **argv) {
    const char *command = argc > 1 ? argv[argc - 1] : "";
    if (holds(command, GATEWAY) || holds(command, REDUCER)) {
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        return 255;
    }
    wait_latency();
    const char *host = argc > 2 ? argv[argc - 2] : "";
    const char *file = getenv("FORENSICS_STANDIN_ANSWER");
    if (file == NULL)
        return 255;
    char path[4096];
    struct stat st;
    if (stat(file, &st) == 0 && S_ISDIR(st.st_mode)) {
        int n = -1;
        if (plain_name(host)) {
            n = snprintf(path, sizeof path, "%s/%s", file, host);
            if (n >= (int)sizeof path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                n = -1;
        }
        if (n < 0 && snprintf(path, sizeof path, "%s/default", file) >= (int)sizeof path)
            return 255;
        file = path;
    }
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 255;
    return copy_out(fd) == 0 ? 0 : 255;
}
