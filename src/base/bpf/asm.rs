//! A small BPF assembler: instructions as the kernel reads them (`struct
//! bpf_insn`, include/uapi/linux/bpf.h), and forward or backward jumps to
//! labels whose offsets are filled in at the end. nettune writes its
//! programs with it rather than building C at compile time, so users need
//! no BPF toolchain.

/// Instruction classes, sizes, modes and operations.
pub const LD: u8 = 0x00;
pub const LDX: u8 = 0x01;
pub const ST: u8 = 0x02;
pub const STX: u8 = 0x03;
pub const ALU32: u8 = 0x04;
pub const JMP: u8 = 0x05;
pub const JMP32: u8 = 0x06;
pub const ALU64: u8 = 0x07;
pub const W: u8 = 0x00;
pub const H: u8 = 0x08;
pub const B: u8 = 0x10;
pub const DW: u8 = 0x18;
pub const IMM: u8 = 0x00;
pub const MEM: u8 = 0x60;
pub const K: u8 = 0x00;
pub const X: u8 = 0x08;
pub const ADD: u8 = 0x00;
pub const SUB: u8 = 0x10;
pub const AND: u8 = 0x50;
pub const LSH: u8 = 0x60;
pub const RSH: u8 = 0x70;
pub const MOV: u8 = 0xb0;
pub const JA: u8 = 0x00;
pub const JEQ: u8 = 0x10;
pub const JGT: u8 = 0x20;
pub const JGE: u8 = 0x30;
pub const JNE: u8 = 0x50;
pub const JSGE: u8 = 0x70;
pub const CALL: u8 = 0x80;
pub const EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load that names a map by its fd.
pub const PSEUDO_MAP_FD: u8 = 1;

/// Helper functions (enum bpf_func_id).
pub const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
pub const HELPER_MAP_UPDATE_ELEM: i32 = 2;
pub const HELPER_KTIME_GET_NS: i32 = 5;
pub const HELPER_PROBE_READ_KERNEL: i32 = 113;

// Registers: r0 return value, r1-r5 arguments (clobbered by calls), r6-r9
// kept across calls, r10 the frame pointer.
pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
pub const R10: u8 = 10;

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
    pub fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
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

    /// The inverse of [`Insn::encode`].
    pub fn decode(word: u64) -> Insn {
        let b = word.to_ne_bytes();
        Insn {
            code: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_ne_bytes([b[2], b[3]]),
            imm: i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// A jump other than call and exit: its target is `index + 1 + off`.
    pub fn is_jump(self) -> bool {
        let class = self.code & 0x07;
        let op = self.code & 0xf0;
        (class == JMP || class == JMP32) && op != CALL && op != EXIT
    }
}

/// A place in the program that jumps name before it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// An assembler: instructions, labels and the jumps to patch.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    /// Where each label was bound.
    labels: Vec<Option<usize>>,
    /// Jumps to patch: (index, label).
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    /// The instructions so far.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    pub fn push(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    /// A new label, bound later with [`Asm::bind`].
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Place `label` here.
    pub fn bind(&mut self, label: Label) {
        self.labels[label.0] = Some(self.insns.len());
    }

    /// dst = src (64-bit).
    pub fn mov_reg(&mut self, dst: u8, src: u8) {
        self.push(Insn::new(ALU64 | MOV | X, dst, src, 0, 0));
    }

    pub fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.push(Insn::new(ALU64 | MOV | K, dst, 0, 0, imm));
    }

    /// dst op= imm (64-bit).
    pub fn alu_imm(&mut self, op: u8, dst: u8, imm: i32) {
        self.push(Insn::new(ALU64 | op | K, dst, 0, 0, imm));
    }

    /// dst op= src (64-bit).
    pub fn alu_reg(&mut self, op: u8, dst: u8, src: u8) {
        self.push(Insn::new(ALU64 | op | X, dst, src, 0, 0));
    }

    pub fn add_imm(&mut self, dst: u8, imm: i32) {
        self.alu_imm(ADD, dst, imm);
    }

    /// dst = *(size *)(src + off)
    pub fn load(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.push(Insn::new(LDX | MEM | size, dst, src, off, 0));
    }

    /// *(size *)(dst + off) = imm
    pub fn store_imm(&mut self, size: u8, dst: u8, off: i16, imm: i32) {
        self.push(Insn::new(ST | MEM | size, dst, 0, off, imm));
    }

    /// *(size *)(dst + off) = src
    pub fn store(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.push(Insn::new(STX | MEM | size, dst, src, off, 0));
    }

    /// dst = the map whose descriptor is `fd` (two instruction slots).
    pub fn load_map(&mut self, dst: u8, fd: i32) {
        self.push(Insn::new(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, fd));
        self.push(Insn::new(0, 0, 0, 0, 0));
    }

    /// dst = a pointer to the stack slot at r10 + off.
    pub fn stack_ptr(&mut self, dst: u8, off: i16) {
        self.mov_reg(dst, R10);
        self.add_imm(dst, i32::from(off));
    }

    pub fn call(&mut self, helper: i32) {
        self.push(Insn::new(JMP | CALL, 0, 0, 0, helper));
    }

    pub fn exit(&mut self) {
        self.push(Insn::new(JMP | EXIT, 0, 0, 0, 0));
    }

    fn jump(&mut self, insn: Insn, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.push(insn);
    }

    /// goto label
    pub fn goto(&mut self, to: Label) {
        self.jump(Insn::new(JMP | JA, 0, 0, 0, 0), to);
    }

    /// if reg op imm goto label (64-bit compare; `op` one of JEQ, JNE,
    /// JGT, JGE, JSGE...).
    pub fn jump_imm(&mut self, op: u8, reg: u8, imm: i32, to: Label) {
        self.jump(Insn::new(JMP | op | K, reg, 0, 0, imm), to);
    }

    /// if (u32)reg op imm goto label
    pub fn jump32_imm(&mut self, op: u8, reg: u8, imm: u32, to: Label) {
        self.jump(Insn::new(JMP32 | op | K, reg, 0, 0, imm as i32), to);
    }

    /// if dst op src goto label (64-bit)
    pub fn jump_reg(&mut self, op: u8, dst: u8, src: u8, to: Label) {
        self.jump(Insn::new(JMP | op | X, dst, src, 0, 0), to);
    }

    /// The program's words for BPF_PROG_LOAD, every jump patched. Fails on
    /// a label never bound or a jump too far for its 16-bit offset: a bug
    /// in the program's builder, said before the kernel sees it.
    pub fn finish(mut self) -> Result<Vec<u64>, String> {
        for &(at, label) in &self.fixups {
            let Some(target) = self.labels[label.0] else {
                return Err(format!("jump at {at} to a label never placed"));
            };
            let off = target as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off)
                .map_err(|_| format!("jump at {at} is too far ({off} instructions)"))?;
        }
        Ok(self.insns.iter().map(|i| i.encode()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_as_struct_bpf_insn() {
        // r0 = 2: BPF_ALU64 | BPF_MOV | BPF_K, dst 0, imm 2.
        let mov = Insn::new(ALU64 | MOV | K, R0, 0, 0, 2).encode();
        assert_eq!(mov.to_ne_bytes(), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        // r2 = *(u32 *)(r6 + 16): BPF_LDX | BPF_MEM | BPF_W, dst 2, src 6.
        let ldx = Insn::new(LDX | MEM | W, R2, R6, 16, 0).encode();
        assert_eq!(ldx.to_ne_bytes(), [0x61, 0x62, 16, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::decode(ldx), Insn::new(0x61, 2, 6, 16, 0));
    }

    #[test]
    fn jumps_land_on_their_labels_both_ways() {
        let mut a = Asm::new();
        let back = a.label();
        let ahead = a.label();
        a.bind(back);
        a.mov_imm(R0, 0); // 0
        a.jump_imm(JEQ, R0, 1, ahead); // 1 -> 4
        a.goto(back); // 2 -> 0
        a.mov_imm(R0, 1); // 3
        a.bind(ahead);
        a.exit(); // 4
        let insns: Vec<Insn> = a
            .finish()
            .expect("finish")
            .into_iter()
            .map(Insn::decode)
            .collect();
        assert_eq!(insns[1].off, 2);
        assert_eq!(insns[2].off, -3);
        assert!(insns[1].is_jump() && !insns[4].is_jump());
    }

    #[test]
    fn an_unplaced_label_is_refused() {
        let mut a = Asm::new();
        let nowhere = a.label();
        a.goto(nowhere);
        assert!(a.finish().is_err());
    }
}
