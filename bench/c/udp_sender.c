/* udp_sender [-g SEGMENTS] [-f FLOWS] [-P] [-r PPS] [-s] ADDR:PORT THREADS BATCH SIZE CPUS DURATION_S
 * Each thread: FLOWS connected sockets (1 unless -f), to PORT, PORT+1, ...,
 * PORT+FLOWS-1 (all to PORT with -P), each with a source port of its own; sendmmsg of BATCH
 * packets of SIZE bytes on one socket after the other, as fast as it can.
 *   -g SEGMENTS  UDP_SEGMENT (udp(7), Linux 4.18): each message holds
 *                SEGMENTS packets of SIZE bytes in one buffer and the stack
 *                cuts it into SEGMENTS datagrams, so one call of BATCH
 *                packets is BATCH / SEGMENTS messages (BATCH a multiple of
 *                SEGMENTS; SEGMENTS x SIZE at most 65507 bytes, SEGMENTS at
 *                most the kernel's UDP_MAX_SEGMENTS, 64 or 128).
 *   -f FLOWS     connected sockets per thread, one destination port each.
 *   -P           every flow to PORT: one receiving socket takes them all,
 *                as `nettune bench udp-sink` without --reuseport does.
 *   -r PPS       at most PPS packets per second in all (split over the
 *                threads): each call sends the whole messages due by then,
 *                at most BATCH packets, and a thread that fell behind
 *                catches up at most 10 ms of them.
 *   -s           start every packet with sockperf's message header (14
 *                bytes: sequence, the "client" flag, the length), so that
 *                `sockperf sr` reads the datagrams as it reads those of
 *                `sockperf tp` (it parses each one by that header). */
#include "common.h"

#include <endian.h>
#include <netinet/udp.h>
#include <stdint.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#define MAX_FLOWS 1024
#define MAX_DATAGRAM 65507
/* sockperf's header: 8-byte sequence, 2-byte flags, 4-byte length, all in
 * network order; flag 1 marks a client's message. */
#define SOCKPERF_HEADER 14
#define SOCKPERF_CLIENT 1

struct worker {
    struct sockaddr_in to;
    int cpu, batch, size, segments, flows, one_port, sockperf;
    double rate; /* packets per second for this thread; 0: as fast as it can */
    struct counter *counter;
};

/* One packet's sockperf header at `p`. */
static void sockperf_header(unsigned char *p, int size) {
    uint64_t seq = htobe64(0);
    uint16_t flags = htobe16(SOCKPERF_CLIENT);
    uint32_t length = htobe32((uint32_t)size);
    memcpy(p, &seq, sizeof(seq));
    memcpy(p + 8, &flags, sizeof(flags));
    memcpy(p + 10, &length, sizeof(length));
}

static void *send_loop(void *arg) {
    struct worker *w = arg;
    if (w->cpu >= 0)
        pin(w->cpu);
    int fds[MAX_FLOWS];
    for (int k = 0; k < w->flows; k++) {
        struct sockaddr_in to = w->to;
        to.sin_port = htons(ntohs(w->to.sin_port) + (w->one_port ? 0 : k));
        fds[k] = socket(AF_INET, SOCK_DGRAM, 0);
        if (fds[k] < 0 || connect(fds[k], (struct sockaddr *)&to, sizeof(to)) != 0)
            die("socket/connect");
        if (w->segments > 1 &&
            setsockopt(fds[k], SOL_UDP, UDP_SEGMENT, &w->size, sizeof(w->size)) != 0)
            die("setsockopt UDP_SEGMENT (Linux 4.18 or later)");
    }
    /* Every message carries the same bytes: one buffer of one message's
     * packets serves them all. */
    int messages = w->batch / w->segments;
    size_t message_len = (size_t)w->segments * w->size;
    unsigned char *buf = calloc(1, message_len);
    if (!buf)
        die("calloc");
    if (w->sockperf)
        for (int i = 0; i < w->segments; i++)
            sockperf_header(buf + (size_t)i * w->size, w->size);
    struct iovec iov = {.iov_base = buf, .iov_len = message_len};
    struct mmsghdr *msgs = calloc(messages, sizeof(*msgs));
    if (!msgs)
        die("calloc");
    for (int i = 0; i < messages; i++) {
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    unsigned long long packets = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    double skipped = 0; /* packets due but given up: a thread off its CPU */
    for (int k = 0; !atomic_load_explicit(&stop, memory_order_relaxed); k = (k + 1) % w->flows) {
        int count = messages;
        if (w->rate > 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double due = ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9) * w->rate;
            double owed = due - skipped - (double)packets;
            if (owed > w->rate / 100) { /* more than 10 ms behind */
                skipped += owed - w->rate / 100;
                owed = w->rate / 100;
            }
            count = (int)(owed / w->segments);
            if (count > messages)
                count = messages;
            if (count < 1) {
                usleep(100);
                continue;
            }
        }
        int n = sendmmsg(fds[k], msgs, count, 0);
        if (n < 0 && errno == EINVAL)
            die("sendmmsg (with -g: SEGMENTS x SIZE above 65507 bytes, SEGMENTS above the "
                "kernel's UDP_MAX_SEGMENTS, or SIZE above the path MTU)");
        if (n <= 0)
            continue; /* ECONNREFUSED, ENOBUFS: keep going */
        packets += (unsigned long long)n * w->segments;
        atomic_store_explicit(&w->counter->packets, packets, memory_order_relaxed);
        atomic_store_explicit(&w->counter->bytes, packets * w->size, memory_order_relaxed);
    }
    return NULL;
}

static void usage(const char *name) {
    fprintf(stderr,
            "usage: %s [-g SEGMENTS] [-f FLOWS] [-P] [-r PPS] [-s] ADDR:PORT THREADS BATCH SIZE CPUS DURATION\n"
            "  -g SEGMENTS  UDP_SEGMENT: SEGMENTS packets per message, cut by the stack\n"
            "  -f FLOWS     sockets per thread, to ports PORT .. PORT+FLOWS-1\n"
            "  -P           every flow to PORT (one receiving socket)\n"
            "  -r PPS       at most PPS packets per second in all\n"
            "  -s           a sockperf message header in every packet (for sockperf sr)\n",
            name);
    exit(2);
}

int main(int argc, char **argv) {
    int segments = 1, flows = 1, one_port = 0, sockperf = 0, opt;
    double rate = 0;
    while ((opt = getopt(argc, argv, "g:f:Pr:s")) != -1) {
        switch (opt) {
        case 'g':
            segments = atoi(optarg);
            break;
        case 'f':
            flows = atoi(optarg);
            break;
        case 'P':
            one_port = 1;
            break;
        case 'r':
            rate = atof(optarg);
            if (rate < 1)
                usage(argv[0]);
            break;
        case 's':
            sockperf = 1;
            break;
        default:
            usage(argv[0]);
        }
    }
    if (argc - optind != 6)
        usage(argv[0]);
    char **arg = argv + optind;
    struct sockaddr_in to = parse_addr(arg[0]);
    int threads = atoi(arg[1]), batch = atoi(arg[2]), size = atoi(arg[3]);
    int cpus[MAX_THREADS], ncpus = parse_cpus(arg[4], cpus);
    double seconds = atof(arg[5]);
    if (threads < 1 || threads > MAX_THREADS || batch < 1 || batch > 1024 || size < 1)
        usage(argv[0]);
    if (segments < 1 || batch % segments != 0 || (long)segments * size > MAX_DATAGRAM) {
        fprintf(stderr, "-g %d: give a divisor of BATCH (%d) whose multiple of SIZE (%d) is at most %d bytes\n",
                segments, batch, size, MAX_DATAGRAM);
        return 2;
    }
    if (flows < 1 || flows > MAX_FLOWS || ntohs(to.sin_port) + flows - 1 > 65535) {
        fprintf(stderr, "-f %d: give 1 to %d flows, all ports within 65535\n", flows, MAX_FLOWS);
        return 2;
    }
    if (sockperf && size < SOCKPERF_HEADER) {
        fprintf(stderr, "-s: SIZE (%d) must hold sockperf's %d-byte header\n", size, SOCKPERF_HEADER);
        return 2;
    }
    static struct counter counters[MAX_THREADS];
    struct worker workers[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        workers[i] = (struct worker){
            .to = to,
            .cpu = ncpus ? cpus[i % ncpus] : -1,
            .batch = batch,
            .size = size,
            .segments = segments,
            .flows = flows,
            .one_port = one_port,
            .sockperf = sockperf,
            .rate = rate / threads,
            .counter = &counters[i],
        };
        pthread_create(&tids[i], NULL, send_loop, &workers[i]);
    }
    signal(SIGINT, on_alarm);
    report_loop(counters, threads, seconds);
    unsigned long long total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        total += counters[i].packets;
    }
    printf("total %llu packets\n", total);
    return 0;
}
