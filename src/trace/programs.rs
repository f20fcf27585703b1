//! The tracers' BPF programs, assembled here (no toolchain at build
//! time). Each runs on a raw tracepoint and only adds to per-CPU map
//! entries; nothing is sent to user space per packet.
//!
//! Drops (`kfree_skb(skb, location, reason[, rx_sk])`), in C:
//!
//! ```c
//! if (filter_ifindex && (!skb->dev || skb->dev->ifindex != IFINDEX)) return 0;
//! if (filter_netns && netns_of(skb->dev or rx_sk or skb->sk) != INUM) return 0;
//! key = { location, reason, skb->protocol, ip_protocol(skb) };
//! if (v = lookup(counts, key)) (*v)++;
//! else if (update(counts, key, 1, NOEXIST) && !(v = lookup(counts, key))) stats[LOST]++;
//! ```
//!
//! NET_RX softirq (`softirq_raise/entry/exit(vec)`), per CPU: the first
//! raise since the last run is stamped; entry takes raise-to-entry (how
//! long the softirq waited) into a log2 histogram and stamps the start;
//! exit takes the run time into another.
//!
//! NAPI (`napi_poll(napi, work, budget)`): per (NAPI id, device), polls,
//! packets, and polls that used the whole budget.
//!
//! Kernel memory is read at offsets from the kernel's BTF
//! ([`super::layout`]): with plain loads in a BTF-typed (tp_btf) program,
//! which the verifier checks against the kernel's types and guards against
//! faults, else with bpf_probe_read_kernel in a raw-tracepoint program
//! ([`Access`]). bpf_probe_read_kernel is a GPL-only helper: the programs
//! are offered under a GPL-compatible license, "Dual MIT/GPL".

use crate::base::bpf::asm::*;
use crate::base::bpf::BPF_NOEXIST;

use super::layout::{DropLayout, NapiLayout};

pub const LICENSE: &str = "Dual MIT/GPL";

/// The drop map's key: location (8), reason (4), ethertype as the packet
/// holds it (2, network order), IP protocol (1), padding (1).
pub const DROP_KEY_LEN: usize = 16;
/// Stats slots (a per-CPU array of one word each).
pub const STAT_LOST: u32 = 0;
pub const STATS: usize = 1;

/// Words of the per-CPU softirq state (one entry).
pub const SOFTIRQ_RAISE_TS: usize = 0;
pub const SOFTIRQ_ENTRY_TS: usize = 1;
pub const SOFTIRQ_RAISES: usize = 2;
pub const SOFTIRQ_RUNS: usize = 3;
pub const SOFTIRQ_RUN_NS: usize = 4;
pub const SOFTIRQ_WAIT_NS: usize = 5;
pub const SOFTIRQ_WAITS: usize = 6;
/// log2 buckets of nanoseconds: bucket b holds [2^b, 2^(b+1)).
pub const BUCKETS: usize = 64;
pub const SOFTIRQ_WAIT_HIST: usize = 8;
pub const SOFTIRQ_RUN_HIST: usize = SOFTIRQ_WAIT_HIST + BUCKETS;
pub const SOFTIRQ_WORDS: usize = SOFTIRQ_RUN_HIST + BUCKETS;

/// The NAPI map's key: NAPI id (4), ifindex (4), namespace inode (4),
/// padding (4), device name (16).
pub const NAPI_KEY_LEN: usize = 32;
pub const NAPI_POLLS: usize = 0;
pub const NAPI_PACKETS: usize = 1;
pub const NAPI_FULL: usize = 2;
pub const NAPI_WORDS: usize = 3;

/// What the drop program keeps (the rest is counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only drops in this network namespace (its inode number).
    pub netns_inum: Option<u32>,
    /// Only drops whose device has this ifindex (in `netns_inum`).
    pub ifindex: Option<u32>,
}

// The ethertypes as a little-endian 16-bit load of the network-order field
// reads them.
const ETH_IP_LOADED: u32 = 0x0008;
const ETH_IPV6_LOADED: u32 = 0xdd86;
/// `network_header` when no network header was set.
const NO_HEADER: u32 = 0xffff;

/// *(size *)(r10 + dst) = *(size *)(src + off), through
/// bpf_probe_read_kernel (zeroes dst when the read faults).
/// `src` may be any register: it is taken first.
fn read(a: &mut Asm, dst: i16, size: i32, src: u8, off: u32) {
    a.mov_reg(R3, src);
    if off != 0 {
        a.add_imm(R3, off as i32);
    }
    a.stack_ptr(R1, dst);
    a.mov_imm(R2, size);
    a.call(HELPER_PROBE_READ_KERNEL);
}

/// How a program reads kernel memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Plain loads, in a tp_btf program: the verifier checks each against
    /// the kernel's types and guards it against faults; a few
    /// nanoseconds each.
    Direct,
    /// bpf_probe_read_kernel through a stack slot, in a raw-tracepoint
    /// program: any kernel, a helper call each.
    ProbeRead,
}

fn bytes(size: u8) -> i32 {
    match size {
        B => 1,
        H => 2,
        W => 4,
        _ => 8,
    }
}

/// dst = *(size *)(src + off). With [`Access::ProbeRead`] through the
/// stack slot at r10 + `slot` (clobbers r1-r5 unless dst is one of them).
fn field(a: &mut Asm, access: Access, size: u8, dst: u8, src: u8, off: u32, slot: i16) {
    match access {
        Access::Direct => a.load(size, dst, src, off as i16),
        Access::ProbeRead => {
            read(a, slot, bytes(size), src, off);
            a.load(size, dst, R10, slot);
        }
    }
}

/// r0 = lookup(map, r10 + key); jumps to `found` when there.
fn lookup(a: &mut Asm, map: i32, key: i16, found: Label) {
    a.load_map(R1, map);
    a.stack_ptr(R2, key);
    a.call(HELPER_MAP_LOOKUP_ELEM);
    a.jump_imm(JNE, R0, 0, found);
}

/// *(u64 *)(reg + 8 * word) += 1
fn bump(a: &mut Asm, reg: u8, word: usize) {
    let off = (8 * word) as i16;
    a.load(DW, R1, reg, off);
    a.add_imm(R1, 1);
    a.store(DW, reg, R1, off);
}

/// *(u64 *)(reg + 8 * word) += src
fn add_to(a: &mut Asm, reg: u8, word: usize, src: u8) {
    let off = (8 * word) as i16;
    a.load(DW, R1, reg, off);
    a.alu_reg(ADD, R1, src);
    a.store(DW, reg, R1, off);
}

/// The drop program. `counts` is the per-CPU hash of drops, `stats` the
/// per-CPU array of [`STATS`] words. Kernel memory is read as `access`
/// says, except the packet's IP protocol byte (behind `skb->head`, which
/// the verifier does not type), always through bpf_probe_read_kernel.
pub fn drops(
    layout: &DropLayout,
    filter: Filter,
    access: Access,
    counts: i32,
    stats: i32,
) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let out = a.label();
    let count = a.label();
    let arg = |i: u8| i16::from(i) * 8;
    // Stack: key at -16 (location -16, reason -8, ethertype -4, l4 -2),
    // scratch at -24 and -32, the first value at -40.
    a.mov_reg(R6, R1);
    a.load(DW, R7, R6, arg(layout.skb_arg));
    a.load(DW, R1, R6, arg(layout.location_arg));
    a.store(DW, R10, R1, -16);
    a.load(DW, R1, R6, arg(layout.reason_arg));
    a.store(W, R10, R1, -8);
    a.store_imm(W, R10, -4, 0);
    if let Some(f) = layout.fields {
        if filter.ifindex.is_some() || filter.netns_inum.is_some() {
            field(&mut a, access, DW, R8, R7, f.skb_dev, -24);
        }
        if let Some(ifindex) = filter.ifindex {
            a.jump_imm(JEQ, R8, 0, out);
            field(&mut a, access, W, R1, R8, f.dev.ifindex, -24);
            a.jump32_imm(JNE, R1, ifindex, out);
        }
        if let Some(inum) = filter.netns_inum {
            // The device's namespace; without a device (or with one that
            // cannot be read: UDP reuses the field for its own scratch
            // once a datagram is queued), the receiving socket's (the
            // tracepoint's rx_sk, else skb->sk).
            let from_sock = a.label();
            let sock_net = a.label();
            let have_net = a.label();
            a.jump_imm(JEQ, R8, 0, from_sock);
            field(&mut a, access, DW, R9, R8, f.dev.nd_net, -24);
            a.jump_imm(JNE, R9, 0, have_net);
            a.bind(from_sock);
            if let Some(sk) = layout.rx_sk_arg {
                a.load(DW, R9, R6, arg(sk));
                a.jump_imm(JNE, R9, 0, sock_net);
            }
            field(&mut a, access, DW, R9, R7, f.skb_sk, -24);
            a.jump_imm(JEQ, R9, 0, out);
            a.bind(sock_net);
            field(&mut a, access, DW, R9, R9, f.sk_net, -24);
            a.jump_imm(JEQ, R9, 0, out);
            a.bind(have_net);
            field(&mut a, access, W, R1, R9, f.dev.net_inum, -24);
            a.jump32_imm(JNE, R1, inum, out);
        }
        // The ethertype, and the IP protocol behind the network header.
        field(&mut a, access, H, R1, R7, f.skb_protocol, -24);
        a.store(H, R10, R1, -4);
        let v4 = a.label();
        let l4 = a.label();
        a.jump32_imm(JEQ, R1, ETH_IP_LOADED, v4);
        a.jump32_imm(JNE, R1, ETH_IPV6_LOADED, count);
        a.mov_imm(R9, 6); // IPv6 next header
        a.goto(l4);
        a.bind(v4);
        a.mov_imm(R9, 9); // IPv4 protocol
        a.bind(l4);
        // The receiving socket says it without reading the packet.
        if let (Some(sk), Some(proto), Access::Direct) = (layout.rx_sk_arg, f.sk_protocol, access) {
            let no_sock = a.label();
            a.load(DW, R1, R6, arg(sk));
            a.jump_imm(JEQ, R1, 0, no_sock);
            a.load(H, R1, R1, proto as i16);
            a.store(B, R10, R1, -2);
            a.goto(count);
            a.bind(no_sock);
        }
        field(&mut a, access, H, R8, R7, f.skb_network_header, -32);
        a.jump32_imm(JEQ, R8, NO_HEADER, count);
        field(&mut a, access, DW, R1, R7, f.skb_head, -24);
        a.alu_reg(ADD, R8, R1);
        a.alu_reg(ADD, R8, R9);
        read(&mut a, -24, 1, R8, 0);
        a.load(B, R1, R10, -24);
        a.store(B, R10, R1, -2);
    }
    a.bind(count);
    let inc = a.label();
    lookup(&mut a, counts, -16, inc);
    a.store_imm(DW, R10, -40, 1);
    a.load_map(R1, counts);
    a.stack_ptr(R2, -16);
    a.stack_ptr(R3, -40);
    a.mov_imm(R4, BPF_NOEXIST as i32);
    a.call(HELPER_MAP_UPDATE_ELEM);
    a.jump_imm(JEQ, R0, 0, out);
    // Another CPU made the key meanwhile, or the map is full.
    lookup(&mut a, counts, -16, inc);
    a.store_imm(W, R10, -24, STAT_LOST as i32);
    lookup(&mut a, stats, -24, inc);
    a.goto(out);
    a.bind(inc);
    bump(&mut a, R0, 0);
    a.bind(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// r6 = the softirq state, or go to `out`; also goes to `out` unless the
/// tracepoint's vector (ctx[0]) is `net_rx`.
fn softirq_prologue(a: &mut Asm, net_rx: u32, state: i32, out: Label) {
    a.load(DW, R1, R1, 0);
    a.jump32_imm(JNE, R1, net_rx, out);
    a.store_imm(W, R10, -4, 0);
    let found = a.label();
    lookup(a, state, -4, found);
    a.goto(out);
    a.bind(found);
    a.mov_reg(R6, R0);
}

/// r2 = floor(log2(reg)), 0 for 0 (clobbers reg and r3).
fn log2(a: &mut Asm, reg: u8) {
    a.mov_imm(R2, 0);
    for shift in [32, 16, 8, 4, 2, 1] {
        let skip = a.label();
        a.mov_reg(R3, reg);
        a.alu_imm(RSH, R3, shift);
        a.jump_imm(JEQ, R3, 0, skip);
        a.mov_reg(reg, R3);
        a.add_imm(R2, shift);
        a.bind(skip);
    }
    a.alu_imm(AND, R2, (BUCKETS - 1) as i32);
}

/// hist[r2]++ for the histogram starting at word `first` of r6.
/// (clobbers r1-r3)
fn bump_bucket(a: &mut Asm, first: usize) {
    a.alu_imm(LSH, R2, 3);
    a.mov_reg(R3, R6);
    a.alu_reg(ADD, R3, R2);
    let off = (8 * first) as i16;
    a.load(DW, R1, R3, off);
    a.add_imm(R1, 1);
    a.store(DW, R3, R1, off);
}

/// softirq_raise: count, and stamp the first raise since the last run.
pub fn softirq_raise(net_rx: u32, state: i32) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let out = a.label();
    softirq_prologue(&mut a, net_rx, state, out);
    bump(&mut a, R6, SOFTIRQ_RAISES);
    a.load(DW, R1, R6, (8 * SOFTIRQ_RAISE_TS) as i16);
    a.jump_imm(JNE, R1, 0, out);
    a.call(HELPER_KTIME_GET_NS);
    a.store(DW, R6, R0, (8 * SOFTIRQ_RAISE_TS) as i16);
    a.bind(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// softirq_entry: count the run, stamp its start, and take the wait since
/// the raise.
pub fn softirq_entry(net_rx: u32, state: i32) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let out = a.label();
    softirq_prologue(&mut a, net_rx, state, out);
    a.call(HELPER_KTIME_GET_NS);
    a.mov_reg(R7, R0);
    a.store(DW, R6, R7, (8 * SOFTIRQ_ENTRY_TS) as i16);
    bump(&mut a, R6, SOFTIRQ_RUNS);
    a.load(DW, R8, R6, (8 * SOFTIRQ_RAISE_TS) as i16);
    a.jump_imm(JEQ, R8, 0, out);
    a.store_imm(DW, R6, (8 * SOFTIRQ_RAISE_TS) as i16, 0);
    a.alu_reg(SUB, R7, R8);
    add_to(&mut a, R6, SOFTIRQ_WAIT_NS, R7);
    bump(&mut a, R6, SOFTIRQ_WAITS);
    log2(&mut a, R7);
    bump_bucket(&mut a, SOFTIRQ_WAIT_HIST);
    a.bind(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// softirq_exit: take the run time since entry.
pub fn softirq_exit(net_rx: u32, state: i32) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let out = a.label();
    softirq_prologue(&mut a, net_rx, state, out);
    a.load(DW, R7, R6, (8 * SOFTIRQ_ENTRY_TS) as i16);
    a.jump_imm(JEQ, R7, 0, out);
    a.store_imm(DW, R6, (8 * SOFTIRQ_ENTRY_TS) as i16, 0);
    a.call(HELPER_KTIME_GET_NS);
    a.alu_reg(SUB, R0, R7);
    a.mov_reg(R7, R0);
    add_to(&mut a, R6, SOFTIRQ_RUN_NS, R7);
    log2(&mut a, R7);
    bump_bucket(&mut a, SOFTIRQ_RUN_HIST);
    a.bind(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

/// napi_poll: per NAPI instance, polls, packets and full-budget polls.
/// The device name (an array the verifier will not load whole) is always
/// read through bpf_probe_read_kernel.
pub fn napi_poll(
    layout: &NapiLayout,
    netns_inum: Option<u32>,
    access: Access,
    napis: i32,
) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let out = a.label();
    let arg = |i: u8| i16::from(i) * 8;
    // Stack: key at -32 (id -32, ifindex -28, netns -24, pad -20, name
    // -16), scratch at -40, the first value at -64.
    a.mov_reg(R6, R1);
    a.load(DW, R7, R6, arg(layout.napi_arg));
    for off in [-32, -24, -16, -8] {
        a.store_imm(DW, R10, off, 0);
    }
    field(&mut a, access, W, R1, R7, layout.napi_id, -40);
    a.store(W, R10, R1, -32);
    field(&mut a, access, DW, R8, R7, layout.napi_dev, -40);
    let keyed = a.label();
    a.jump_imm(JEQ, R8, 0, keyed);
    field(&mut a, access, W, R1, R8, layout.dev.ifindex, -40);
    a.store(W, R10, R1, -28);
    read(&mut a, -16, 16, R8, layout.dev.name);
    field(&mut a, access, DW, R9, R8, layout.dev.nd_net, -40);
    a.jump_imm(JEQ, R9, 0, keyed);
    field(&mut a, access, W, R1, R9, layout.dev.net_inum, -40);
    a.store(W, R10, R1, -24);
    a.bind(keyed);
    if let Some(inum) = netns_inum {
        a.load(W, R1, R10, -24);
        a.jump32_imm(JNE, R1, inum, out);
    }
    a.load(DW, R8, R6, arg(layout.work_arg));
    a.load(DW, R9, R6, arg(layout.budget_arg));
    let inc = a.label();
    lookup(&mut a, napis, -32, inc);
    for off in [-64, -56, -48] {
        a.store_imm(DW, R10, off, 0);
    }
    a.load_map(R1, napis);
    a.stack_ptr(R2, -32);
    a.stack_ptr(R3, -64);
    a.mov_imm(R4, BPF_NOEXIST as i32);
    a.call(HELPER_MAP_UPDATE_ELEM);
    lookup(&mut a, napis, -32, inc);
    a.goto(out);
    a.bind(inc);
    a.mov_reg(R6, R0);
    bump(&mut a, R6, NAPI_POLLS);
    add_to(&mut a, R6, NAPI_PACKETS, R8);
    // A poll with no budget (netpoll) never counts as using it all.
    a.jump_imm(JEQ, R9, 0, out);
    let full = a.label();
    a.jump_reg(JSGE, R8, R9, full);
    a.goto(out);
    a.bind(full);
    bump(&mut a, R6, NAPI_FULL);
    a.bind(out);
    a.mov_imm(R0, 0);
    a.exit();
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::layout::{DevFields, SkbFields};

    fn layout() -> DropLayout {
        DropLayout {
            btf_id: None,
            skb_arg: 0,
            location_arg: 1,
            reason_arg: 2,
            rx_sk_arg: Some(3),
            fields: Some(SkbFields {
                skb_dev: 16,
                skb_sk: 24,
                skb_protocol: 180,
                skb_head: 192,
                skb_network_header: 184,
                dev: DevFields {
                    ifindex: 224,
                    name: 0,
                    nd_net: 280,
                    net_inum: 152,
                },
                sk_net: 48,
                sk_protocol: Some(532),
            }),
        }
    }

    fn decoded(words: &[u64]) -> Vec<Insn> {
        words.iter().map(|&w| Insn::decode(w)).collect()
    }

    fn check(insns: &[Insn]) {
        assert_eq!(insns.last().map(|i| i.code), Some(JMP | EXIT));
        for (i, insn) in insns.iter().enumerate() {
            if insn.is_jump() {
                let target = i as i64 + 1 + i64::from(insn.off);
                assert!(
                    target >= 0 && (target as usize) < insns.len(),
                    "jump at {i}"
                );
            }
        }
    }

    #[test]
    fn the_drop_program_compares_only_what_is_filtered() {
        let plain =
            decoded(&drops(&layout(), Filter::default(), Access::ProbeRead, 7, 8).expect("asm"));
        let filtered = decoded(
            &drops(
                &layout(),
                Filter {
                    netns_inum: Some(4026532177),
                    ifindex: Some(5),
                },
                Access::Direct,
                7,
                8,
            )
            .expect("asm"),
        );
        check(&plain);
        check(&filtered);
        let compares = |insns: &[Insn], imm: i32| {
            insns
                .iter()
                .any(|i| i.code == JMP32 | JNE | K && i.imm == imm)
        };
        assert!(compares(&filtered, 4026532177u32 as i32) && compares(&filtered, 5));
        assert!(!compares(&plain, 4026532177u32 as i32));
        // Both name the two maps by descriptor, and read the key's fields
        // through probe_read_kernel only when BTF gave offsets.
        let maps: Vec<i32> = plain
            .iter()
            .filter(|i| i.code == LD | DW | IMM)
            .map(|i| i.imm)
            .collect();
        assert!(maps.contains(&7) && maps.contains(&8));
        let no_btf = DropLayout {
            fields: None,
            ..layout()
        };
        let bare =
            decoded(&drops(&no_btf, Filter::default(), Access::ProbeRead, 7, 8).expect("asm"));
        check(&bare);
        assert!(!bare
            .iter()
            .any(|i| i.code == JMP | CALL && i.imm == HELPER_PROBE_READ_KERNEL));
    }

    #[test]
    fn the_softirq_and_napi_programs_assemble() {
        for words in [softirq_raise(3, 9), softirq_entry(3, 9), softirq_exit(3, 9)] {
            let insns = decoded(&words.expect("asm"));
            check(&insns);
            assert_eq!(insns[1].code, JMP32 | JNE | K);
            assert_eq!(insns[1].imm, 3);
        }
        let napi = NapiLayout {
            btf_id: None,
            napi_arg: 0,
            work_arg: 1,
            budget_arg: 2,
            napi_id: 380,
            napi_dev: 48,
            dev: DevFields {
                ifindex: 224,
                name: 0,
                nd_net: 280,
                net_inum: 152,
            },
        };
        check(&decoded(
            &napi_poll(&napi, Some(1), Access::Direct, 9).expect("asm"),
        ));
        check(&decoded(
            &napi_poll(&napi, None, Access::ProbeRead, 9).expect("asm"),
        ));
    }
}
