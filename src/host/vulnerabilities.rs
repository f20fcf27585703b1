//! `/sys/devices/system/cpu/vulnerabilities`: one file per CPU
//! vulnerability saying whether this CPU is affected and how the kernel
//! mitigates it; with the `mitigations=` boot parameter from
//! `/proc/cmdline` (`mitigations=off` turns them all off).
//!
//! [`parse`] builds the model from the texts read; [`read`] reads them.

use std::collections::BTreeMap;

use crate::base::Root;
use crate::error::KernelError;

use super::model::Mitigations;

const DIR: &str = "/sys/devices/system/cpu/vulnerabilities";

/// The value of `mitigations=` on a kernel command line, if given.
pub fn boot_param(cmdline: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .find_map(|arg| arg.strip_prefix("mitigations=").map(str::to_string))
}

/// The model of `/proc/cmdline` and the vulnerability files (name, text).
pub fn parse(cmdline: Option<&str>, files: BTreeMap<String, String>) -> Mitigations {
    Mitigations {
        boot_param: cmdline.and_then(boot_param),
        vulnerabilities: files,
    }
}

/// Read `/proc/cmdline` and every vulnerability file.
pub fn read(root: &Root) -> Result<Mitigations, KernelError> {
    let cmdline = root.read_value("/proc/cmdline")?;
    let mut files = BTreeMap::new();
    for name in root.list(DIR)?.unwrap_or_default() {
        if let Some(text) = root.read_value(&format!("{DIR}/{name}"))? {
            files.insert(name, text);
        }
    }
    Ok(parse(cmdline.as_deref(), files))
}

#[cfg(test)]
mod tests {
    use super::*;

    // vm-2cpu-virtio (a Firecracker guest on Linux 6.18).
    const CMDLINE_VM_6_18: &str = "console=ttyS0 reboot=k panic=1 pci=off";
    const VULNERABILITIES_VM_6_18: &[(&str, &str)] = &[
        ("meltdown", "Not affected"),
        (
            "retbleed",
            "Mitigation: untrained return thunk; SMT disabled",
        ),
        ("spec_rstack_overflow", "Mitigation: Safe RET"),
        (
            "spectre_v2",
            "Mitigation: Retpolines; IBPB: conditional; STIBP: disabled; RSB filling; \
             PBRSB-eIBRS: Not affected; BHI: Not affected",
        ),
    ];

    #[test]
    fn the_vulnerabilities_are_kept_as_the_kernel_words_them() {
        let files = VULNERABILITIES_VM_6_18
            .iter()
            .map(|(name, text)| (name.to_string(), text.to_string()))
            .collect();
        let m = parse(Some(CMDLINE_VM_6_18), files);
        assert_eq!(m.boot_param, None);
        assert_eq!(m.vulnerabilities["meltdown"], "Not affected");
        assert!(m.vulnerabilities["spectre_v2"].starts_with("Mitigation: Retpolines"));
    }

    #[test]
    fn the_boot_parameter_comes_from_the_command_line() {
        // two-socket-nic-node1's command line, with mitigations turned off.
        let cmdline =
            "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro isolcpus=15 nohz_full=15 mitigations=off";
        assert_eq!(boot_param(cmdline).as_deref(), Some("off"));
        assert_eq!(boot_param(CMDLINE_VM_6_18), None);
        assert_eq!(parse(None, BTreeMap::new()), Mitigations::default());
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("vm-2cpu-virtio");
        let m = read(&root).expect("vulnerabilities");
        assert_eq!(m.vulnerabilities.len(), 13);
        assert_eq!(
            m.vulnerabilities["spec_rstack_overflow"],
            "Mitigation: Safe RET"
        );
    }
}
