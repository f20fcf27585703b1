//! `/sys/devices/system/cpu/cpuidle` and CPU 0's `cpuidle/stateN`: the
//! idle driver and governor, and the idle states with their exit latency
//! and whether they are disabled; with haltpoll's `guest_halt_poll_ns`
//! (`/sys/module/haltpoll/parameters`), how long a guest polls before it
//! halts.
//!
//! Every file is one value. [`parse`] turns the texts read into the model;
//! [`read`] reads them.

use crate::base::Root;
use crate::error::KernelError;

use super::model::{CpuIdle, IdleState};

const CPUIDLE: &str = "/sys/devices/system/cpu/cpuidle";
const CPU0_STATES: &str = "/sys/devices/system/cpu/cpu0/cpuidle";
const HALTPOLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// The cpuidle files as read (trimmed; `None` where absent).
#[derive(Debug, Default)]
pub struct CpuidleFiles {
    pub driver: Option<String>,
    /// `current_governor`, or `current_governor_ro` where the governor
    /// cannot be changed.
    pub governor: Option<String>,
    pub guest_halt_poll_ns: Option<String>,
    pub states: Vec<StateFiles>,
}

/// One `stateN` directory's files.
#[derive(Debug, Default)]
pub struct StateFiles {
    /// The directory's name (`state1`): the state's name when `name` is absent.
    pub dir: String,
    pub name: Option<String>,
    pub latency: Option<String>,
    pub disable: Option<String>,
}

/// The `stateN` entries of a cpuidle directory in state order (`state10`
/// sorts before `state2` as text).
pub fn state_dirs(mut names: Vec<String>) -> Vec<String> {
    names.sort_by_key(|n| {
        n.trim_start_matches("state")
            .parse::<u32>()
            .unwrap_or(u32::MAX)
    });
    names.retain(|n| n.starts_with("state"));
    names
}

/// The model of the files read: numbers that are not numbers are unknown.
pub fn parse(files: CpuidleFiles) -> CpuIdle {
    CpuIdle {
        driver: files.driver,
        governor: files.governor,
        guest_halt_poll_ns: files.guest_halt_poll_ns.and_then(|v| v.parse().ok()),
        states: files
            .states
            .into_iter()
            .map(|s| IdleState {
                name: s.name.unwrap_or(s.dir),
                latency_us: s.latency.and_then(|v| v.parse().ok()),
                disabled: s.disable.as_deref() == Some("1"),
            })
            .collect(),
    }
}

/// Read the cpuidle files of the host under `root`.
pub fn read(root: &Root) -> Result<CpuIdle, KernelError> {
    let governor = match root.read_value(&format!("{CPUIDLE}/current_governor"))? {
        Some(g) => Some(g),
        None => root.read_value(&format!("{CPUIDLE}/current_governor_ro"))?,
    };
    let mut states = Vec::new();
    for dir in state_dirs(root.list(CPU0_STATES)?.unwrap_or_default()) {
        let path = format!("{CPU0_STATES}/{dir}");
        states.push(StateFiles {
            name: root.read_value(&format!("{path}/name"))?,
            latency: root.read_value(&format!("{path}/latency"))?,
            disable: root.read_value(&format!("{path}/disable"))?,
            dir,
        });
    }
    Ok(parse(CpuidleFiles {
        driver: root.read_value(&format!("{CPUIDLE}/current_driver"))?,
        governor,
        guest_halt_poll_ns: root.read_value(HALTPOLL_NS)?,
        states,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vm-2cpu-virtio (a Firecracker guest on Linux 6.18): the haltpoll
    /// driver and governor (`current_governor_ro`), POLL and haltpoll
    /// states, `guest_halt_poll_ns` 0.
    fn cpuidle_vm_6_18() -> CpuidleFiles {
        let state = |dir: &str, name: &str| StateFiles {
            dir: dir.into(),
            name: Some(name.into()),
            latency: Some("0".into()),
            disable: Some("0".into()),
        };
        CpuidleFiles {
            driver: Some("haltpoll".into()),
            governor: Some("haltpoll".into()),
            guest_halt_poll_ns: Some("0".into()),
            states: vec![state("state0", "POLL"), state("state1", "haltpoll")],
        }
    }

    #[test]
    fn a_guest_polls_with_haltpoll() {
        let idle = parse(cpuidle_vm_6_18());
        assert_eq!(idle.driver.as_deref(), Some("haltpoll"));
        assert_eq!(idle.governor.as_deref(), Some("haltpoll"));
        assert_eq!(idle.guest_halt_poll_ns, Some(0));
        let names: Vec<&str> = idle.states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["POLL", "haltpoll"]);
        assert!(idle
            .states
            .iter()
            .all(|s| !s.disabled && s.latency_us == Some(0)));
    }

    /// two-socket-smt-8q (Debian 12, 6.1 on a Xeon): intel_idle with the
    /// menu governor, POLL, C1, C1E and C6.
    fn cpuidle_xeon_6_1() -> CpuidleFiles {
        let state = |n: usize, name: &str, latency: &str| StateFiles {
            dir: format!("state{n}"),
            name: Some(name.into()),
            latency: Some(latency.into()),
            disable: Some("0".into()),
        };
        CpuidleFiles {
            driver: Some("intel_idle".into()),
            governor: Some("menu".into()),
            guest_halt_poll_ns: None,
            states: vec![
                state(0, "POLL", "0"),
                state(1, "C1", "2"),
                state(2, "C1E", "10"),
                state(3, "C6", "133"),
            ],
        }
    }

    #[test]
    fn intel_idle_states_keep_their_exit_latencies() {
        let idle = parse(cpuidle_xeon_6_1());
        assert_eq!(idle.driver.as_deref(), Some("intel_idle"));
        assert_eq!(idle.guest_halt_poll_ns, None);
        let states: Vec<(&str, Option<u64>)> = idle
            .states
            .iter()
            .map(|s| (s.name.as_str(), s.latency_us))
            .collect();
        assert_eq!(
            states,
            [
                ("POLL", Some(0)),
                ("C1", Some(2)),
                ("C1E", Some(10)),
                ("C6", Some(133))
            ]
        );
    }

    #[test]
    fn a_disabled_state_and_one_without_a_name() {
        let mut files = cpuidle_xeon_6_1();
        files.states[3].disable = Some("1".into());
        files.states[2].name = None;
        files.states[1].latency = Some("soon".into());
        let idle = parse(files);
        assert!(idle.states[3].disabled && !idle.states[0].disabled);
        assert_eq!(idle.states[2].name, "state2");
        assert_eq!(idle.states[1].latency_us, None);
        let dirs = ["state10", "state2", "power", "state0"].map(String::from);
        assert_eq!(
            state_dirs(dirs.to_vec()),
            ["state0", "state2", "state10"].map(String::from)
        );
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("two-socket-smt-8q");
        let idle = read(&root).expect("cpuidle");
        assert_eq!(idle.driver.as_deref(), Some("intel_idle"));
        assert_eq!(idle.governor.as_deref(), Some("menu"));
        let latencies: Vec<Option<u64>> = idle.states.iter().map(|s| s.latency_us).collect();
        assert_eq!(latencies, [Some(0), Some(2), Some(10), Some(133)]);
    }
}
