/* udp_receiver ADDR:PORT THREADS REUSEPORT(0|1) BATCH CPUS DURATION_S
 * recvmmsg(MSG_WAITFORONE) batches into 2048-byte buffers; one socket per
 * thread with SO_REUSEPORT, else all threads on one socket. */
#include "common.h"

#define MTU 2048

struct worker {
    int fd, cpu, batch;
    struct counter *counter;
};

static void *receive(void *arg) {
    struct worker *w = arg;
    if (w->cpu >= 0)
        pin(w->cpu);
    char *buf = malloc((size_t)w->batch * MTU);
    struct iovec *iov = calloc(w->batch, sizeof(*iov));
    struct mmsghdr *msgs = calloc(w->batch, sizeof(*msgs));
    for (int i = 0; i < w->batch; i++) {
        iov[i].iov_base = buf + (size_t)i * MTU;
        iov[i].iov_len = MTU;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    unsigned long long packets = 0, bytes = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int n = recvmmsg(w->fd, msgs, w->batch, MSG_WAITFORONE, NULL);
        if (n <= 0)
            continue; /* timeout or signal: look at stop */
        for (int i = 0; i < n; i++)
            bytes += msgs[i].msg_len;
        packets += n;
        atomic_store_explicit(&w->counter->packets, packets, memory_order_relaxed);
        atomic_store_explicit(&w->counter->bytes, bytes, memory_order_relaxed);
    }
    return NULL;
}

static int open_socket(struct sockaddr_in *sa, int reuseport) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
    if (fd < 0)
        die("socket");
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
        die("SO_REUSEPORT");
    if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) != 0)
        die("bind");
    struct timeval tv = {.tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    socklen_t len = sizeof(*sa);
    getsockname(fd, (struct sockaddr *)sa, &len); /* port 0 -> the real one */
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s ADDR:PORT THREADS REUSEPORT BATCH CPUS DURATION\n", argv[0]);
        return 2;
    }
    struct sockaddr_in sa = parse_addr(argv[1]);
    int threads = atoi(argv[2]), reuseport = atoi(argv[3]), batch = atoi(argv[4]);
    int cpus[MAX_THREADS], ncpus = parse_cpus(argv[5], cpus);
    double seconds = atof(argv[6]);
    if (threads < 1 || threads > MAX_THREADS || batch < 1 || batch > 1024)
        return 2;
    static struct counter counters[MAX_THREADS];
    struct worker workers[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    int shared = open_socket(&sa, reuseport);
    char host[32];
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
    fprintf(stderr, "udp_receiver: listening on %s:%d\n", host, ntohs(sa.sin_port));
    for (int i = 0; i < threads; i++) {
        workers[i] = (struct worker){
            .fd = (reuseport && i > 0) ? open_socket(&sa, 1) : shared,
            .cpu = ncpus ? cpus[i % ncpus] : -1,
            .batch = batch,
            .counter = &counters[i],
        };
        pthread_create(&tids[i], NULL, receive, &workers[i]);
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
