//! `--pin CPUS`: which CPU each benchmark thread runs on.
//!
//! Thread `i` runs on the `i`-th CPU of the list, wrapping around, so
//! `--pin 1` puts every thread on CPU 1 and `--pin 0-3` with 4 threads gives
//! each its own. The list is checked before anything starts: every CPU must
//! be online (`/sys/devices/system/cpu/online`) and allowed for this process
//! (its affinity, which a cpuset cgroup or `taskset` may narrow).

use anyhow::Context;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::base::cpuset;
use crate::base::Root;

/// The CPUs benchmark threads are pinned to; empty means not pinned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinning {
    cpus: Vec<u32>,
}

impl Pinning {
    /// Not pinned: the scheduler places threads.
    pub fn none() -> Pinning {
        Pinning::default()
    }

    /// Resolve `--pin` against the live host: parse the list (bounded by
    /// the host's possible CPUs), check every CPU is online and allowed.
    pub fn resolve(arg: Option<&str>, root: &Root) -> anyhow::Result<Pinning> {
        let Some(text) = arg else {
            return Ok(Pinning::none());
        };
        let cpus = crate::host::parse_user_cpus("--pin", text, root)?;
        if cpus.is_empty() {
            anyhow::bail!("--pin '{text}' names no CPU; give a list such as 0 or 0-1,4");
        }
        Pinning::new(cpus, root)
    }

    /// Pin thread i to the i-th of `cpus` (an engine's config); each must be
    /// online and allowed for this process. Empty: not pinned.
    pub fn new(cpus: Vec<u32>, root: &Root) -> anyhow::Result<Pinning> {
        if cpus.is_empty() {
            return Ok(Pinning::none());
        }
        let text = cpuset::format_list(&cpus);
        let online = root.parse("/sys/devices/system/cpu/online", cpuset::parse_list)?;
        let allowed = allowed_cpus()?;
        check(&text, &cpus, &online, &allowed)?;
        Ok(Pinning { cpus })
    }

    /// Every CPU this process may run on, in order: twrk's `--pin-cpus`
    /// (thread i on the i-th of them, wrapping).
    pub fn all_allowed() -> anyhow::Result<Pinning> {
        Ok(Pinning {
            cpus: allowed_cpus()?,
        })
    }

    /// The CPU for thread `index`, if pinning.
    pub fn cpu_for(&self, index: usize) -> Option<u32> {
        if self.cpus.is_empty() {
            None
        } else {
            Some(self.cpus[index % self.cpus.len()])
        }
    }

    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }
}

/// Every CPU of the list must be online and allowed; the error names the
/// first one that is not and what is available.
fn check(text: &str, cpus: &[u32], online: &[u32], allowed: &[u32]) -> anyhow::Result<()> {
    for cpu in cpus {
        if !online.contains(cpu) {
            anyhow::bail!(
                "--pin '{text}': CPU {cpu} is not online (online: {}); pick CPUs from that list",
                cpuset::format_list(online)
            );
        }
        if !allowed.contains(cpu) {
            anyhow::bail!(
                "--pin '{text}': CPU {cpu} is online but this process may not run on it \
                 (allowed: {}; a cpuset or taskset narrows it)",
                cpuset::format_list(allowed)
            );
        }
    }
    Ok(())
}

/// The CPUs this process may run on.
fn allowed_cpus() -> anyhow::Result<Vec<u32>> {
    let set =
        sched_getaffinity(Pid::from_raw(0)).context("cannot read this process's CPU affinity")?;
    let mut cpus = Vec::new();
    for cpu in 0..CpuSet::count() {
        if set.is_set(cpu).unwrap_or(false) {
            cpus.push(cpu as u32);
        }
    }
    Ok(cpus)
}

/// Pin the calling thread to one CPU (sched_setaffinity on thread id 0 =
/// the caller).
pub fn pin_current_thread(cpu: u32) -> anyhow::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu as usize)
        .with_context(|| format!("CPU {cpu} is beyond what sched_setaffinity can address"))?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .with_context(|| format!("cannot pin a thread to CPU {cpu}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_wrap_around_the_list() {
        let pin = Pinning {
            cpus: vec![0, 2, 3],
        };
        assert_eq!(pin.cpu_for(0), Some(0));
        assert_eq!(pin.cpu_for(2), Some(3));
        assert_eq!(pin.cpu_for(3), Some(0));
        assert_eq!(Pinning::none().cpu_for(0), None);
    }

    #[test]
    fn offline_or_forbidden_cpus_are_named() {
        let err = check("0-2", &[0, 1, 2], &[0, 1], &[0, 1]).expect_err("cpu 2 offline");
        let msg = err.to_string();
        assert!(msg.contains("CPU 2 is not online"), "{msg}");
        assert!(
            msg.contains("'0-2'") && msg.contains("online: 0-1"),
            "{msg}"
        );
        let err = check("1", &[1], &[0, 1], &[0]).expect_err("cpu 1 not allowed");
        assert!(err.to_string().contains("allowed: 0"), "{err}");
        assert!(check("0,1", &[0, 1], &[0, 1], &[0, 1]).is_ok());
    }

    #[test]
    fn resolves_against_a_fixture_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sys = dir.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(&sys).expect("mkdir");
        std::fs::write(sys.join("online"), "0\n").expect("write");
        std::fs::write(sys.join("possible"), "0-7\n").expect("write");
        let root = Root::at(dir.path()).expect("root");
        let err = Pinning::resolve(Some("7"), &root).expect_err("cpu 7 offline");
        assert!(err.to_string().contains("CPU 7 is not online"), "{err}");
        // Beyond the possible CPUs: refused before the list is expanded.
        let err = Pinning::resolve(Some("0-2000000000"), &root).expect_err("huge");
        assert!(
            err.to_string().contains("2000000000") && err.to_string().contains("CPUs 0-7"),
            "{err}"
        );
        let err = Pinning::resolve(Some("x"), &root).expect_err("garbled");
        assert!(err.to_string().contains("'x'"), "{err}");
        assert_eq!(
            Pinning::resolve(None, &root).expect("none"),
            Pinning::none()
        );
    }
}
