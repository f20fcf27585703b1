//! The XDP program of the AF_XDP sink, assembled as BPF bytecode here (no
//! C or BPF toolchain at build time; docs/bypass.md says why).
//!
//! It does what the single-RX-queue method needs of the kernel side:
//! packets that arrive on queue Q and belong to the steered flow go to the
//! AF_XDP socket bound to Q (bpf_redirect_map on an XSKMAP); everything
//! else, and anything it cannot parse, goes on to the kernel stack
//! (XDP_PASS). In C it would read:
//!
//! ```c
//! if (ctx->rx_queue_index != Q) goto pass;
//! if (data + ETH + IP + L4 > data_end) goto pass;
//! if (eth->h_proto != htons(ETH_P_IP)) goto pass;          // or ETH_P_IPV6
//! if (ip->ihl_version != 0x45 || ip->frag_off & htons(0x3fff)) goto pass;
//! if (ip->protocol != PROTO) goto pass;                     // each given field:
//! if (ip->saddr != SRC || ip->daddr != DST) goto pass;
//! if (l4->source != SPORT || l4->dest != DPORT) goto pass;
//! counters[0]++;
//! return bpf_redirect_map(&xsks, Q, XDP_PASS);               // no socket: pass
//! pass: counters[1]++; return XDP_PASS;
//! ```
//!
//! IPv4 packets with options, fragments, IPv6 packets with extension
//! headers and VLAN-tagged frames are passed to the kernel, never
//! redirected. Loads are host order (x86 and arm64: little-endian); the
//! network-order constants are swapped accordingly.

use std::net::IpAddr;

use crate::base::bpf::asm::*;
use crate::base::driver::flow::FlowSpec;

/// XDP_PASS: hand the packet to the kernel stack.
pub const XDP_PASS: i32 = 2;
/// Counter slots of the program's per-CPU array.
pub const REDIRECTED: u32 = 0;
pub const PASSED: u32 = 1;

const HELPER_REDIRECT_MAP: i32 = 51;

// struct xdp_md offsets.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

const ETH_LEN: i16 = 14;
const ETH_TYPE: i16 = 12;

/// The XDP program's assembler: the shared one, with the pass path's label.
struct Prog {
    a: Asm,
    pass: Label,
}

impl Prog {
    /// counters[slot]++ on this CPU (clobbers r0-r5).
    fn count(&mut self, counters_fd: i32, slot: u32) {
        self.a.store_imm(W, R10, -4, slot as i32);
        self.a.load_map(R1, counters_fd);
        self.a.mov_reg(R2, R10);
        self.a.add_imm(R2, -4);
        self.a.call(HELPER_MAP_LOOKUP_ELEM);
        let done = self.a.label();
        self.a.jump_imm(JEQ, R0, 0, done);
        self.a.load(DW, R1, R0, 0);
        self.a.add_imm(R1, 1);
        self.a.store(DW, R0, R1, 0);
        self.a.bind(done);
    }

    /// Compare the packet field of `size` at `off` (from the frame start,
    /// r7) with `network`: the field's bytes in network order.
    fn match_field(&mut self, size: u8, off: i16, network: &[u8]) {
        let value = match size {
            B => u32::from(network[0]),
            H => u32::from(u16::from_ne_bytes([network[0], network[1]])),
            _ => u32::from_ne_bytes([network[0], network[1], network[2], network[3]]),
        };
        self.a.load(size, R2, R7, off);
        self.a.jump32_imm(JNE, R2, value, self.pass);
    }
}

/// The maps the program uses, by descriptor (valid while it loads).
#[derive(Debug, Clone, Copy)]
pub struct Maps {
    pub xsks: i32,
    pub counters: i32,
}

/// The instructions of the program for `queue` and `flow`.
pub fn build(queue: u32, flow: &FlowSpec, maps: Maps) -> Result<Vec<u64>, String> {
    let mut a = Asm::new();
    let pass = a.label();
    let mut p = Prog { a, pass };
    p.a.mov_reg(R6, R1);
    p.a.load(W, R2, R6, MD_RX_QUEUE_INDEX);
    p.a.jump32_imm(JNE, R2, queue, pass);
    p.a.load(W, R7, R6, MD_DATA);
    p.a.load(W, R8, R6, MD_DATA_END);
    let (l3, ethertype): (i16, u16) = if flow.ipv6 {
        (40, 0x86dd)
    } else {
        (20, 0x0800)
    };
    // Every byte read below lies before data + ETH + L3 + 8.
    p.a.mov_reg(R2, R7);
    p.a.add_imm(R2, i32::from(ETH_LEN + l3 + 8));
    p.a.jump_reg(JGT, R2, R8, pass);
    p.match_field(H, ETH_TYPE, &ethertype.to_be_bytes());
    let ip = ETH_LEN;
    let (proto_at, src_at, dst_at) = if flow.ipv6 {
        (ip + 6, ip + 8, ip + 24)
    } else {
        // Version 4, header length 5 words: no options. Not a fragment:
        // fragment offset and "more fragments" zero.
        p.match_field(B, ip, &[0x45]);
        p.a.load(H, R2, R7, ip + 6);
        p.a.push(Insn::new(
            ALU32 | AND | K,
            R2,
            0,
            0,
            i32::from(u16::from_ne_bytes([0x3f, 0xff])),
        ));
        p.a.jump32_imm(JNE, R2, 0, pass);
        (ip + 9, ip + 12, ip + 16)
    };
    p.match_field(B, proto_at, &[flow.proto.number()]);
    for (at, addr) in [(src_at, flow.src_ip), (dst_at, flow.dst_ip)] {
        let bytes = match addr {
            Some(IpAddr::V4(a)) => a.octets().to_vec(),
            Some(IpAddr::V6(a)) => a.octets().to_vec(),
            None => continue,
        };
        for (i, word) in bytes.chunks_exact(4).enumerate() {
            p.match_field(W, at + 4 * i as i16, word);
        }
    }
    let l4 = ETH_LEN + l3;
    for (at, port) in [(l4, flow.src_port), (l4 + 2, flow.dst_port)] {
        if let Some(port) = port {
            p.match_field(H, at, &port.to_be_bytes());
        }
    }
    p.count(maps.counters, REDIRECTED);
    p.a.load_map(R1, maps.xsks);
    p.a.mov_imm(R2, queue as i32);
    // The low bits of the flags: what to return when no socket is there.
    p.a.mov_imm(R3, XDP_PASS);
    p.a.call(HELPER_REDIRECT_MAP);
    p.a.exit();
    p.a.bind(pass);
    p.count(maps.counters, PASSED);
    p.a.mov_imm(R0, XDP_PASS);
    p.a.exit();
    p.a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(word: u64) -> Insn {
        Insn::decode(word)
    }

    fn build(queue: u32, flow: &FlowSpec, maps: Maps) -> Vec<u64> {
        super::build(queue, flow, maps).expect("assembles")
    }

    const MAPS: Maps = Maps {
        xsks: 7,
        counters: 8,
    };

    #[test]
    fn every_jump_lands_inside_and_the_program_ends_in_exit() {
        let flow = FlowSpec::parse("udp dst-ip 10.1.0.2 dst-port 9000").expect("flow");
        let insns: Vec<Insn> = build(3, &flow, MAPS).into_iter().map(decode).collect();
        assert_eq!(insns.last().map(|i| i.code), Some(JMP | EXIT));
        for (i, insn) in insns.iter().enumerate() {
            if insn.is_jump() {
                let target = i as i64 + 1 + i64::from(insn.off);
                assert!(
                    target > i as i64 && (target as usize) < insns.len(),
                    "jump at {i} to {target}"
                );
            }
        }
        // The queue check comes first, against 3.
        assert_eq!(insns[2].code, JMP32 | JNE | K);
        assert_eq!(insns[2].imm, 3);
        // The destination port, in network order as a host-order u16 load.
        let port = 9000u16.to_be_bytes();
        assert!(insns
            .iter()
            .any(|i| i.code == JMP32 | JNE | K && i.imm == i32::from(u16::from_ne_bytes(port))));
        // Both maps are named by their descriptors.
        let maps: Vec<i32> = insns
            .iter()
            .filter(|i| i.code == LD | DW | IMM)
            .map(|i| i.imm)
            .collect();
        assert_eq!(maps, [8, 7, 8]);
        assert!(insns
            .iter()
            .any(|i| i.code == JMP | CALL && i.imm == HELPER_REDIRECT_MAP));
    }

    #[test]
    fn fields_left_out_are_not_compared() {
        let any = FlowSpec::parse("udp").expect("flow");
        let full = FlowSpec::parse("udp src-ip 10.0.0.1 dst-ip 10.0.0.2 src-port 1 dst-port 2")
            .expect("flow");
        let v6 = FlowSpec::parse("udp6 src-ip fd00::1 dst-port 2").expect("flow");
        let (a, f, s) = (
            build(0, &any, MAPS).len(),
            build(0, &full, MAPS).len(),
            build(0, &v6, MAPS).len(),
        );
        // Two instructions per compared 32-bit word or port.
        assert_eq!(f - a, 2 * 4);
        // IPv6: no header-length (2) or fragment (3) checks, a 4-word
        // address and a port (10 more).
        assert_eq!(s - a, 10 - 5);
    }
}
