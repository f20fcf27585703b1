//! `/sys/devices/system/cpu/cpuN/cpufreq`: each online CPU's frequency
//! governor (`scaling_governor`) and the scaling driver. A VM without
//! cpufreq has neither file.
//!
//! [`parse`] groups the texts read into the model; [`read`] reads them.

use std::collections::BTreeMap;

use crate::base::Root;
use crate::error::KernelError;

use super::model::CpuFreq;

/// One CPU's cpufreq files as read (trimmed; `None` where absent).
#[derive(Debug, Default)]
pub struct CpuFreqFiles {
    pub cpu: u32,
    pub scaling_governor: Option<String>,
    /// Read only until one CPU has it: every CPU has the same driver.
    pub scaling_driver: Option<String>,
}

/// The CPUs grouped by governor, and the first driver named.
pub fn parse(files: Vec<CpuFreqFiles>) -> CpuFreq {
    let mut governors: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut driver = None;
    for file in files {
        if let Some(gov) = file.scaling_governor {
            governors.entry(gov).or_default().push(file.cpu);
        }
        if driver.is_none() {
            driver = file.scaling_driver;
        }
    }
    CpuFreq { driver, governors }
}

/// Read the cpufreq files of the `online` CPUs.
pub fn read(root: &Root, online: &[u32]) -> Result<CpuFreq, KernelError> {
    let mut files = Vec::with_capacity(online.len());
    let mut driver_found = false;
    for &cpu in online {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let scaling_governor = root.read_value(&format!("{dir}/scaling_governor"))?;
        let scaling_driver = if driver_found {
            None
        } else {
            root.read_value(&format!("{dir}/scaling_driver"))?
        };
        driver_found |= scaling_driver.is_some();
        files.push(CpuFreqFiles {
            cpu,
            scaling_governor,
            scaling_driver,
        });
    }
    Ok(parse(files))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// two-socket-smt-8q (Debian 12, 6.1 on a Xeon): intel_pstate with the
    /// powersave governor on every CPU.
    fn cpufreq_xeon_6_1(cpus: u32) -> Vec<CpuFreqFiles> {
        (0..cpus)
            .map(|cpu| CpuFreqFiles {
                cpu,
                scaling_governor: Some("powersave".into()),
                scaling_driver: Some("intel_pstate".into()),
            })
            .collect()
    }

    #[test]
    fn cpus_are_grouped_by_governor() {
        let freq = parse(cpufreq_xeon_6_1(32));
        assert_eq!(freq.driver.as_deref(), Some("intel_pstate"));
        assert_eq!(freq.governors.len(), 1);
        assert_eq!(freq.governors["powersave"].len(), 32);
        let mut mixed = cpufreq_xeon_6_1(4);
        mixed[2].scaling_governor = Some("performance".into());
        let freq = parse(mixed);
        assert_eq!(freq.governors["performance"], vec![2]);
        assert_eq!(freq.governors["powersave"], vec![0, 1, 3]);
    }

    #[test]
    fn a_vm_without_cpufreq_has_none() {
        // vm-2cpu-virtio: no cpufreq directory.
        let none = (0..2).map(|cpu| CpuFreqFiles {
            cpu,
            ..CpuFreqFiles::default()
        });
        assert_eq!(parse(none.collect()), CpuFreq::default());
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("two-socket-smt-8q");
        let online: Vec<u32> = (0..32).collect();
        let freq = read(&root, &online).expect("cpufreq");
        assert_eq!(freq.driver.as_deref(), Some("intel_pstate"));
        assert_eq!(freq.governors["powersave"], online);
    }
}
