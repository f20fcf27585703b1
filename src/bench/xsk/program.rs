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

use crate::base::driver::flow::FlowSpec;

/// XDP_PASS: hand the packet to the kernel stack.
pub const XDP_PASS: i32 = 2;
/// Counter slots of the program's per-CPU array.
pub const REDIRECTED: u32 = 0;
pub const PASSED: u32 = 1;

// Instruction classes, sizes, modes, operations (include/uapi/linux/bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU64: u8 = 0x07;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const ALU32: u8 = 0x04;
const W: u8 = 0x00;
const H: u8 = 0x08;
const B: u8 = 0x10;
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const AND: u8 = 0x50;
const MOV: u8 = 0xb0;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load that names a map by its fd.
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;

// Registers: r0 return value, r1-r5 arguments (clobbered by calls), r6-r9
// kept across calls, r10 the frame pointer.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const R10: u8 = 10;

// struct xdp_md offsets.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

const ETH_LEN: i16 = 14;
const ETH_TYPE: i16 = 12;

/// One instruction: opcode, dst and src registers, offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// `struct bpf_insn` as the kernel reads it (host order, dst in the low
    /// nibble of the register byte).
    pub fn encode(self) -> u64 {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.src << 4) | (self.dst & 0x0f);
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        u64::from_ne_bytes(b)
    }
}

/// Where a jump goes before its offset is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Pass,
}

/// An assembler with one forward label (the pass path).
#[derive(Debug, Default)]
struct Asm {
    insns: Vec<Insn>,
    /// Jumps to patch: (index, label).
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    fn push(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    /// dst = src (64-bit).
    fn mov_reg(&mut self, dst: u8, src: u8) {
        self.push(Insn::new(ALU64 | MOV | X, dst, src, 0, 0));
    }

    fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.push(Insn::new(ALU64 | MOV | K, dst, 0, 0, imm));
    }

    fn add_imm(&mut self, dst: u8, imm: i32) {
        self.push(Insn::new(ALU64 | ADD | K, dst, 0, 0, imm));
    }

    /// dst = *(size *)(src + off)
    fn load(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.push(Insn::new(LDX | MEM | size, dst, src, off, 0));
    }

    /// *(size *)(dst + off) = imm
    fn store_imm(&mut self, size: u8, dst: u8, off: i16, imm: i32) {
        self.push(Insn::new(ST | MEM | size, dst, 0, off, imm));
    }

    /// *(size *)(dst + off) = src
    fn store(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.push(Insn::new(STX | MEM | size, dst, src, off, 0));
    }

    /// dst = the map whose descriptor is `fd` (two instruction slots).
    fn load_map(&mut self, dst: u8, fd: i32) {
        self.push(Insn::new(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, fd));
        self.push(Insn::new(0, 0, 0, 0, 0));
    }

    fn call(&mut self, helper: i32) {
        self.push(Insn::new(JMP | CALL, 0, 0, 0, helper));
    }

    fn exit(&mut self) {
        self.push(Insn::new(JMP | EXIT, 0, 0, 0, 0));
    }

    /// if (u32)reg != imm goto label
    fn jne32(&mut self, reg: u8, imm: u32, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.push(Insn::new(JMP32 | JNE | K, reg, 0, 0, imm as i32));
    }

    /// if dst > src goto label (64-bit, unsigned)
    fn jgt_reg(&mut self, dst: u8, src: u8, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.push(Insn::new(JMP | JGT | X, dst, src, 0, 0));
    }

    /// Place `label` here: every jump to it gets its offset.
    fn bind(&mut self, label: Label) {
        let here = self.insns.len();
        for (at, _) in self.fixups.iter().filter(|(_, l)| *l == label) {
            self.insns[*at].off = (here - at - 1) as i16;
        }
        self.fixups.retain(|(_, l)| *l != label);
    }

    /// counters[slot]++ on this CPU (clobbers r0-r5).
    fn count(&mut self, counters_fd: i32, slot: u32) {
        self.store_imm(W, R10, -4, slot as i32);
        self.load_map(R1, counters_fd);
        self.mov_reg(R2, R10);
        self.add_imm(R2, -4);
        self.call(HELPER_MAP_LOOKUP_ELEM);
        // if r0 == 0 skip the three instructions of the increment.
        self.push(Insn::new(JMP | JEQ | K, R0, 0, 3, 0));
        self.load(DW, R1, R0, 0);
        self.add_imm(R1, 1);
        self.store(DW, R0, R1, 0);
    }

    /// Compare the packet field of `size` at `off` (from the frame start,
    /// r7) with `network`: the field's bytes in network order.
    fn match_field(&mut self, size: u8, off: i16, network: &[u8]) {
        let value = match size {
            B => u32::from(network[0]),
            H => u32::from(u16::from_ne_bytes([network[0], network[1]])),
            _ => u32::from_ne_bytes([network[0], network[1], network[2], network[3]]),
        };
        self.load(size, R2, R7, off);
        self.jne32(R2, value, Label::Pass);
    }
}

/// The maps the program uses, by descriptor (valid while it loads).
#[derive(Debug, Clone, Copy)]
pub struct Maps {
    pub xsks: i32,
    pub counters: i32,
}

/// The instructions of the program for `queue` and `flow`.
pub fn build(queue: u32, flow: &FlowSpec, maps: Maps) -> Vec<u64> {
    let mut a = Asm::default();
    a.mov_reg(R6, R1);
    a.load(W, R2, R6, MD_RX_QUEUE_INDEX);
    a.jne32(R2, queue, Label::Pass);
    a.load(W, R7, R6, MD_DATA);
    a.load(W, R8, R6, MD_DATA_END);
    let (l3, ethertype): (i16, u16) = if flow.ipv6 {
        (40, 0x86dd)
    } else {
        (20, 0x0800)
    };
    // Every byte read below lies before data + ETH + L3 + 8.
    a.mov_reg(R2, R7);
    a.add_imm(R2, i32::from(ETH_LEN + l3 + 8));
    a.jgt_reg(R2, R8, Label::Pass);
    a.match_field(H, ETH_TYPE, &ethertype.to_be_bytes());
    let ip = ETH_LEN;
    let (proto_at, src_at, dst_at) = if flow.ipv6 {
        (ip + 6, ip + 8, ip + 24)
    } else {
        // Version 4, header length 5 words: no options. Not a fragment:
        // fragment offset and "more fragments" zero.
        a.match_field(B, ip, &[0x45]);
        a.load(H, R2, R7, ip + 6);
        a.push(Insn::new(
            ALU32 | AND | K,
            R2,
            0,
            0,
            i32::from(u16::from_ne_bytes([0x3f, 0xff])),
        ));
        a.jne32(R2, 0, Label::Pass);
        (ip + 9, ip + 12, ip + 16)
    };
    a.match_field(B, proto_at, &[flow.proto.number()]);
    for (at, addr) in [(src_at, flow.src_ip), (dst_at, flow.dst_ip)] {
        let bytes = match addr {
            Some(IpAddr::V4(a)) => a.octets().to_vec(),
            Some(IpAddr::V6(a)) => a.octets().to_vec(),
            None => continue,
        };
        for (i, word) in bytes.chunks_exact(4).enumerate() {
            a.match_field(W, at + 4 * i as i16, word);
        }
    }
    let l4 = ETH_LEN + l3;
    for (at, port) in [(l4, flow.src_port), (l4 + 2, flow.dst_port)] {
        if let Some(port) = port {
            a.match_field(H, at, &port.to_be_bytes());
        }
    }
    a.count(maps.counters, REDIRECTED);
    a.load_map(R1, maps.xsks);
    a.mov_imm(R2, queue as i32);
    // The low bits of the flags: what to return when no socket is there.
    a.mov_imm(R3, XDP_PASS);
    a.call(HELPER_REDIRECT_MAP);
    a.exit();
    a.bind(Label::Pass);
    a.count(maps.counters, PASSED);
    a.mov_imm(R0, XDP_PASS);
    a.exit();
    debug_assert!(a.fixups.is_empty());
    a.insns.iter().map(|i| i.encode()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(word: u64) -> Insn {
        let b = word.to_ne_bytes();
        Insn {
            code: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_ne_bytes([b[2], b[3]]),
            imm: i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    const MAPS: Maps = Maps {
        xsks: 7,
        counters: 8,
    };

    #[test]
    fn instructions_encode_as_struct_bpf_insn() {
        // r0 = 2 (XDP_PASS): BPF_ALU64 | BPF_MOV | BPF_K, dst 0, imm 2.
        let mov = Insn::new(ALU64 | MOV | K, R0, 0, 0, 2).encode();
        assert_eq!(mov.to_ne_bytes(), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        // r2 = *(u32 *)(r6 + 16): BPF_LDX | BPF_MEM | BPF_W, dst 2, src 6.
        let ldx = Insn::new(LDX | MEM | W, R2, R6, 16, 0).encode();
        assert_eq!(ldx.to_ne_bytes(), [0x61, 0x62, 16, 0, 0, 0, 0, 0]);
        assert_eq!(decode(ldx), Insn::new(0x61, 2, 6, 16, 0));
    }

    #[test]
    fn every_jump_lands_inside_and_the_program_ends_in_exit() {
        let flow = FlowSpec::parse("udp dst-ip 10.1.0.2 dst-port 9000").expect("flow");
        let insns: Vec<Insn> = build(3, &flow, MAPS).into_iter().map(decode).collect();
        assert_eq!(insns.last().map(|i| i.code), Some(JMP | EXIT));
        for (i, insn) in insns.iter().enumerate() {
            let class = insn.code & 0x07;
            let op = insn.code & 0xf0;
            if (class == JMP || class == JMP32) && op != CALL && op != EXIT {
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
