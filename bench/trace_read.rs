//! The cost of reading a tracer's per-CPU counters, for bench/trace.sh:
//! per-CPU hash maps of KEYS keys, read whole (every key, one value per
//! possible CPU) as `trace drops` reads its counters each interval, with
//! values of 1 word (what the drop counters hold) and of 16 and 64 words.
//! The kernel copies value size x possible CPUs per key, so a 64-word value
//! here copies what a 1-word value copies on a host with 64 times the CPUs:
//! the difference gives the cost per key and CPU, from which the cost on a
//! larger host follows. Needs root (BPF maps).
//!
//! Usage: cargo run --release --example trace_read -- [KEYS] [ROUNDS]

use std::time::Instant;

use nettune::base::bpf;
use nettune::base::Root;
use nettune::trace::maps::PerCpuMap;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().map_or(Ok(50), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let cpus = nettune::host::topology::possible_cpus(&Root::live())?.len();
    println!("possible CPUs: {cpus}; {keys} keys; median of {rounds} reads");
    let mut per_word = Vec::new();
    for words in [1usize, 16, 64] {
        let map = PerCpuMap::create(
            bpf::BPF_MAP_TYPE_PERCPU_HASH,
            16,
            words,
            keys.max(1),
            cpus,
            "nettune_bench",
        )?;
        for k in 0..keys {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&(k as u64).to_ne_bytes());
            map.set(&key, &[k as u64])?;
        }
        let mut times: Vec<f64> = (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let read = map.all().map(|all| all.len()).unwrap_or(0);
                assert_eq!(read, keys);
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "value {words:>2} words ({:>5} bytes copied per key): read all {median:>8.1} us, {:.2} us per key",
            words * 8 * cpus,
            median / keys.max(1) as f64
        );
        per_word.push((words, median));
    }
    let (w1, t1) = per_word[0];
    let (w64, t64) = per_word[2];
    let per_key_cpu_us = (t64 - t1) / keys.max(1) as f64 / ((w64 - w1) * cpus) as f64;
    let per_key_us = t1 / keys.max(1) as f64;
    println!(
        "per key and CPU: {:.4} us (one 8-byte value copied)",
        per_key_cpu_us
    );
    for n in [cpus, 64, 128, 256] {
        let per_key = per_key_us + (n as f64 - cpus as f64) * per_key_cpu_us;
        println!(
            "estimated read of {keys} one-word keys on {n:>3} CPUs: {:.3} ms",
            per_key * keys as f64 / 1e3
        );
    }
    Ok(())
}
