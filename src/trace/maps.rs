//! The tracers' per-CPU maps, as user space reads them: every key with
//! one row of 64-bit words per possible CPU. The programs only ever add
//! to them and nothing deletes, so a value read later is never smaller.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::base::bpf;

/// A per-CPU hash or array map of u64 words.
#[derive(Debug)]
pub struct PerCpuMap {
    fd: OwnedFd,
    key_size: usize,
    /// Words per CPU.
    words: usize,
    entries: usize,
    cpus: usize,
}

/// One key's words, per possible CPU (in the order of the possible list).
pub type PerCpu = Vec<Vec<u64>>;

impl PerCpuMap {
    /// BPF_MAP_CREATE of `kind` (per-CPU hash or array) with `entries`
    /// keys of `key_size` bytes and `words` u64 words per CPU; `cpus` is the
    /// number of possible CPUs the kernel copies values for.
    pub fn create(
        kind: u32,
        key_size: usize,
        words: usize,
        entries: usize,
        cpus: usize,
        name: &str,
    ) -> io::Result<PerCpuMap> {
        let fd = bpf::map_create(
            kind,
            key_size as u32,
            (words * 8) as u32,
            entries as u32,
            name,
        )?;
        Ok(PerCpuMap {
            fd,
            key_size,
            words,
            entries,
            cpus: cpus.max(1),
        })
    }

    /// The descriptor a program names the map by.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn split(&self, raw: &[u8]) -> PerCpu {
        raw.chunks_exact(self.words * 8)
            .map(|cpu| {
                cpu.chunks_exact(8)
                    .map(|w| u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
                    .collect()
            })
            .collect()
    }

    /// Set `key` to `words` on every CPU (the same on each): for tests
    /// and for measuring the cost of reading.
    pub fn set(&self, key: &[u8], words: &[u64]) -> io::Result<()> {
        let mut raw = Vec::with_capacity(self.words * 8 * self.cpus);
        for _ in 0..self.cpus {
            for i in 0..self.words {
                raw.extend_from_slice(&words.get(i).copied().unwrap_or(0).to_ne_bytes());
            }
        }
        bpf::map_update(&self.fd, key, &raw, 0)
    }

    /// The words of `key` on every CPU; `None` when the key is not there.
    pub fn get(&self, key: &[u8]) -> io::Result<Option<PerCpu>> {
        let mut raw = vec![0u8; self.words * 8 * self.cpus];
        Ok(bpf::map_lookup(&self.fd, key, &mut raw)?.then(|| self.split(&raw)))
    }

    /// Every key and its words. A hash map is walked key by key; the walk
    /// stops after as many keys as the map holds, so keys added meanwhile
    /// cannot keep it going.
    pub fn all(&self) -> io::Result<Vec<(Vec<u8>, PerCpu)>> {
        let mut out = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        let mut next = vec![0u8; self.key_size];
        while out.len() < self.entries && bpf::map_next_key(&self.fd, key.as_deref(), &mut next)? {
            if let Some(values) = self.get(&next)? {
                out.push((next.clone(), values));
            }
            key = Some(next.clone());
        }
        Ok(out)
    }
}

/// The word at `index` summed over CPUs.
pub fn sum(values: &PerCpu, index: usize) -> u64 {
    values
        .iter()
        .filter_map(|cpu| cpu.get(index))
        .fold(0u64, |a, &b| a.wrapping_add(b))
}
