//! nettune's fuzz targets: one libFuzzer binary, the target chosen by
//! `NETTUNE_FUZZ_TARGET` (`list` prints the names). scripts/fuzz builds it
//! with SanitizerCoverage on stable Rust and runs every target in turn;
//! docs/fuzzing.md says how to run one, replay a finding and add a target.
//!
//! Beyond "no panic", every run checks two things whatever the target: no
//! single allocation larger than [`MAX_ALLOC`] (an input of a few KiB that
//! asks for more is an unbounded read or an amplification), and no input
//! takes longer than the `-timeout` scripts/fuzz passes.

#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::OnceLock;

mod common;
mod targets;

/// The largest single allocation any target may make. Inputs are at most
/// a few hundred KiB, the largest fixed buffers nettune uses are a few MiB.
const MAX_ALLOC: usize = 64 << 20;

/// The system allocator, refusing allocations above [`MAX_ALLOC`] with an
/// abort that libFuzzer reports as a crash (with the input that caused it).
struct Bounded;

unsafe impl GlobalAlloc for Bounded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

/// Abort on an oversized allocation. An allocator must not unwind, and
/// formatting would allocate: write a fixed message with write(2).
fn check(size: usize) {
    if size > MAX_ALLOC {
        let msg = b"nettune-fuzz: an allocation above 64 MiB (unbounded input?)\n";
        // SAFETY: writing a static buffer to stderr.
        unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
        std::process::abort();
    }
}

#[global_allocator]
static ALLOC: Bounded = Bounded;

/// The target this process runs.
static TARGET: OnceLock<fn(&[u8])> = OnceLock::new();

fn choose() -> fn(&[u8]) {
    let name = std::env::var("NETTUNE_FUZZ_TARGET").unwrap_or_default();
    if name == "list" {
        for (name, _) in targets::ALL {
            println!("{name}");
        }
        std::process::exit(0);
    }
    match targets::ALL.iter().find(|(n, _)| *n == name) {
        Some((_, run)) => *run,
        None => {
            eprintln!(
                "nettune-fuzz: NETTUNE_FUZZ_TARGET='{name}' is not a target; \
                 NETTUNE_FUZZ_TARGET=list names them"
            );
            std::process::exit(2);
        }
    }
}

libfuzzer_sys::fuzz_target!(
    init: {
        let run = choose();
        common::quiet_stdout();
        let _ = TARGET.set(run);
    },
    |data: &[u8]| {
        if let Some(run) = TARGET.get() {
            run(data);
        }
    }
);
