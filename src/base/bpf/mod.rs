//! BPF from user space, without a toolchain: the bpf(2) system call
//! ([`sys`]), an assembler for the programs nettune writes by hand
//! ([`asm`]), and a reader of the kernel's type information ([`btf`]),
//! which says where a field sits in a kernel structure on the running
//! kernel.

pub mod asm;
pub mod btf;
pub mod sys;

pub use sys::*;
