/* udp_sender ADDR:PORT THREADS BATCH SIZE CPUS DURATION_S
 * Each thread: one connected socket, sendmmsg of BATCH packets of SIZE
 * bytes in a loop, as fast as it can. */
#include "common.h"

struct worker {
    struct sockaddr_in to;
    int cpu, batch, size;
    struct counter *counter;
};

static void *send_loop(void *arg) {
    struct worker *w = arg;
    if (w->cpu >= 0)
        pin(w->cpu);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&w->to, sizeof(w->to)) != 0)
        die("socket/connect");
    char *buf = calloc(1, w->size);
    struct iovec iov = {.iov_base = buf, .iov_len = w->size};
    struct mmsghdr *msgs = calloc(w->batch, sizeof(*msgs));
    for (int i = 0; i < w->batch; i++) {
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    unsigned long long packets = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int n = sendmmsg(fd, msgs, w->batch, 0);
        if (n <= 0)
            continue; /* ECONNREFUSED, ENOBUFS: keep going */
        packets += n;
        atomic_store_explicit(&w->counter->packets, packets, memory_order_relaxed);
        atomic_store_explicit(&w->counter->bytes, packets * w->size, memory_order_relaxed);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s ADDR:PORT THREADS BATCH SIZE CPUS DURATION\n", argv[0]);
        return 2;
    }
    struct sockaddr_in to = parse_addr(argv[1]);
    int threads = atoi(argv[2]), batch = atoi(argv[3]), size = atoi(argv[4]);
    int cpus[MAX_THREADS], ncpus = parse_cpus(argv[5], cpus);
    double seconds = atof(argv[6]);
    if (threads < 1 || threads > MAX_THREADS || batch < 1 || batch > 1024 || size < 1)
        return 2;
    static struct counter counters[MAX_THREADS];
    struct worker workers[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        workers[i] = (struct worker){
            .to = to,
            .cpu = ncpus ? cpus[i % ncpus] : -1,
            .batch = batch,
            .size = size,
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
