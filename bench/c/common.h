/* Shared bits of the minimal C reference tools for bench/udp.sh, written
 * from the pseudocode of "How to receive a million packets per second"
 * (Cloudflare, 2015): sendmmsg/recvmmsg batches, one connected socket per
 * sender thread, SO_REUSEPORT receivers, pinning, a per-second line
 * "0.352M pps 10.730MiB / 90.010Mb". IPv4 only, no error recovery. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

static void die(const char *what) {
    perror(what);
    exit(2);
}

/* "A.B.C.D:PORT" */
static struct sockaddr_in parse_addr(const char *text) {
    char host[64];
    struct sockaddr_in sa = {.sin_family = AF_INET};
    const char *colon = strrchr(text, ':');
    if (!colon || colon - text >= (long)sizeof(host)) {
        fprintf(stderr, "bad address '%s'\n", text);
        exit(2);
    }
    memcpy(host, text, colon - text);
    host[colon - text] = 0;
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "bad address '%s'\n", text);
        exit(2);
    }
    sa.sin_port = htons(atoi(colon + 1));
    return sa;
}

/* "0,1,3" -> cpus[]; "-" means no pinning. Returns the count. */
static int parse_cpus(const char *text, int *cpus) {
    int n = 0;
    if (strcmp(text, "-") == 0)
        return 0;
    for (const char *p = text; *p && n < MAX_THREADS;) {
        cpus[n++] = atoi(p);
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    return n;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        die("sched_setaffinity");
}

/* Per-thread counters on their own cache lines; read by main each second. */
struct counter {
    _Atomic unsigned long long packets, bytes;
    char pad[128 - 2 * sizeof(unsigned long long)];
};

static atomic_int stop;

static void on_alarm(int sig) {
    (void)sig;
    atomic_store(&stop, 1);
}

/* Print a line per second from the counters until `seconds` have passed. */
static void report_loop(struct counter *counters, int threads, double seconds) {
    unsigned long long last_p = 0, last_b = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int second = 1;; second++) {
        struct timespec tick = {.tv_sec = start.tv_sec + second, .tv_nsec = start.tv_nsec};
        double left = seconds - (second - 1);
        if (left <= 0)
            break;
        if (left < 1) {
            usleep((useconds_t)(left * 1e6));
            break;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL);
        unsigned long long p = 0, b = 0;
        for (int i = 0; i < threads; i++) {
            p += atomic_load_explicit(&counters[i].packets, memory_order_relaxed);
            b += atomic_load_explicit(&counters[i].bytes, memory_order_relaxed);
        }
        double pps = p - last_p, bps = b - last_b;
        printf("%.3fM pps %.3fMiB / %.3fMb\n", pps / 1e6, bps / 1024 / 1024, bps * 8 / 1e6);
        fflush(stdout);
        last_p = p;
        last_b = b;
    }
    atomic_store(&stop, 1);
}
