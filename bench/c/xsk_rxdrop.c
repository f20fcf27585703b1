/* The receive loop of xdpsock's "rxdrop" mode (the kernel's AF_XDP sample,
 * Documentation/networking/af_xdp.rst), written against libxdp's xsk API
 * for bench/xdp.sh: one AF_XDP socket on one queue, frames taken from the
 * RX ring and given straight back to the fill ring, a per-second line
 * "0.352M pps". As xdpsock -p (poll mode) it sleeps in poll() when the
 * ring is empty (xdpsock's default, spinning, measured slower on shared
 * vCPUs). Its XDP program is xdpsock's default, assembled here (five
 * instructions, libbpf's loader): every packet of the queue, not one flow,
 * goes to the socket (libxdp's own default program needs a bpffs this
 * machine lacks), so a TCP connection through the queue breaks while it runs.
 *
 *   xsk_rxdrop IFACE QUEUE CPU SECONDS
 *
 * Build: gcc -O2 -o xsk_rxdrop xsk_rxdrop.c -lxdp -lbpf */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_link.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <xdp/xsk.h>

#define FRAMES 16384
#define FRAME_SIZE 2048
#define BATCH 256

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: xsk_rxdrop IFACE QUEUE CPU SECONDS\n");
        return 2;
    }
    const char *iface = argv[1];
    int queue = atoi(argv[2]), cpu = atoi(argv[3]);
    double seconds = atof(argv[4]);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    void *area = mmap(NULL, (size_t)FRAMES * FRAME_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    struct xsk_ring_prod fill;
    struct xsk_ring_cons comp, rx;
    struct xsk_umem *umem;
    struct xsk_umem_config ucfg = {
        .fill_size = FRAMES,
        .comp_size = 64,
        .frame_size = FRAME_SIZE,
        .frame_headroom = 0,
    };
    int err = xsk_umem__create(&umem, area, (__u64)FRAMES * FRAME_SIZE, &fill, &comp, &ucfg);
    if (err) {
        fprintf(stderr, "xsk_umem__create: %s\n", strerror(-err));
        return 2;
    }
    /* return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS); */
    int ifindex = if_nametoindex(iface);
    int map = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "xsks", 4, 4, 64, NULL);
    if (!ifindex || map < 0) {
        fprintf(stderr, "no interface %s, or no XSKMAP: %s\n", iface, strerror(errno));
        return 2;
    }
    struct bpf_insn prog[] = {
        {.code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 2, .src_reg = 1, .off = 16},
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map},
        {.code = 0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 3, .imm = XDP_PASS},
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_redirect_map},
        {.code = BPF_JMP | BPF_EXIT},
    };
    int prog_fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "xsk_rxdrop", "GPL", prog,
                                sizeof(prog) / sizeof(prog[0]), NULL);
    if (prog_fd < 0 || bpf_xdp_attach(ifindex, prog_fd, XDP_FLAGS_DRV_MODE, NULL) < 0) {
        fprintf(stderr, "cannot load or attach the XDP program: %s\n", strerror(errno));
        return 2;
    }
    struct xsk_socket_config cfg = {
        .rx_size = FRAMES,
        .tx_size = 0,
        .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
        .xdp_flags = XDP_FLAGS_DRV_MODE,
        .bind_flags = XDP_USE_NEED_WAKEUP,
    };
    struct xsk_socket *xsk;
    err = xsk_socket__create(&xsk, iface, queue, umem, &rx, NULL, &cfg);
    if (!err)
        err = xsk_socket__update_xskmap(xsk, map);
    if (err) {
        fprintf(stderr, "xsk_socket__create: %s\n", strerror(-err));
        bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, NULL);
        return 2;
    }
    __u32 idx;
    if (xsk_ring_prod__reserve(&fill, FRAMES, &idx) != FRAMES) {
        fprintf(stderr, "cannot fill the fill ring\n");
        return 2;
    }
    for (int i = 0; i < FRAMES; i++)
        *xsk_ring_prod__fill_addr(&fill, idx++) = (__u64)i * FRAME_SIZE;
    xsk_ring_prod__submit(&fill, FRAMES);
    fprintf(stderr, "xsk_rxdrop: reading %s queue %d\n", iface, queue);

    struct pollfd pfd = {.fd = xsk_socket__fd(xsk), .events = POLLIN};
    double start = now(), tick = start + 1;
    unsigned long long total = 0, last = 0;
    while (now() - start < seconds) {
        __u32 at;
        unsigned int n = xsk_ring_cons__peek(&rx, BATCH, &at);
        if (n == 0) {
            if (xsk_ring_prod__needs_wakeup(&fill))
                recvfrom(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
            poll(&pfd, 1, 50);
        } else {
            __u32 fidx;
            while (xsk_ring_prod__reserve(&fill, n, &fidx) != n)
                ;
            for (unsigned int i = 0; i < n; i++) {
                __u64 addr = xsk_ring_cons__rx_desc(&rx, at + i)->addr;
                *xsk_ring_prod__fill_addr(&fill, fidx + i) = xsk_umem__extract_addr(addr);
            }
            xsk_ring_prod__submit(&fill, n);
            xsk_ring_cons__release(&rx, n);
            total += n;
        }
        double t = now();
        if (t >= tick) {
            printf("%.3fM pps\n", (total - last) / 1e6);
            fflush(stdout);
            last = total;
            tick += 1;
        }
    }
    printf("total %llu\n", total);
    bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, NULL);
    xsk_socket__delete(xsk);
    xsk_umem__delete(umem);
    return 0;
}
