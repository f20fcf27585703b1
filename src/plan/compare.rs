//! When two value texts of a target mean the same thing: CPU lists and
//! masks as sets (`0-1` = `0,1`, `00000003` = `3`), sysctls with runs of
//! whitespace folded (`4096\t131072` = `4096 131072`), a qdisc by its kind.
//! Plan uses it to leave satisfied settings alone; apply to check each
//! write by reading it back.

use super::target::{RxFile, Target};
use crate::base::cpuset::{parse_list, parse_mask};
use crate::base::driver::setting::parse_flow_hash;
use crate::base::driver::DriverKey;

/// How a target's text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    CpuList,
    CpuMask,
    Words,
    FlowHash,
    QdiscKind,
}

fn form(target: &Target) -> Form {
    match target {
        Target::RootQdisc { .. } => Form::QdiscKind,
        Target::Driver {
            key: DriverKey::FlowHash(_),
            ..
        } => Form::FlowHash,
        Target::IrqAffinity(_) => Form::CpuList,
        Target::RxQueue {
            file: RxFile::RpsCpus,
            ..
        } => Form::CpuMask,
        Target::TxQueue { .. } => Form::CpuMask,
        _ => Form::Words,
    }
}

/// Whether `a` and `b`, both texts of `target`, mean the same value.
pub fn same_value(target: &Target, a: &str, b: &str) -> bool {
    match form(target) {
        Form::CpuList => match (parse_list(a), parse_list(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => words(a) == words(b),
        },
        Form::CpuMask => match (parse_mask(a), parse_mask(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => words(a) == words(b),
        },
        Form::FlowHash => match (parse_flow_hash(a.trim()), parse_flow_hash(b.trim())) {
            (Ok(x), Ok(y)) => x == y,
            _ => words(a) == words(b),
        },
        // `fq maxrate 2gbit` reads back as `fq`: the kind is what the
        // kernel reports.
        Form::QdiscKind => a.split_whitespace().next() == b.split_whitespace().next(),
        Form::Words => words(a) == words(b),
    }
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Target {
        text.parse().expect("target")
    }

    #[test]
    fn cpu_sets_compare_as_sets() {
        let irq = &t("/proc/irq/74/smp_affinity_list");
        assert!(same_value(irq, "0-1\n", "0,1"));
        assert!(!same_value(irq, "0-1", "0"));
        let rps = &t("/sys/class/net/eth0/queues/rx-0/rps_cpus");
        assert!(same_value(rps, "00000003\n", "3"));
        assert!(same_value(rps, "00000000,00000000", "0"));
        assert!(same_value(
            rps,
            "1,00000000,00000001",
            "00000001,00000000,00000001"
        ));
        assert!(!same_value(rps, "3", "1"));
    }

    #[test]
    fn sysctls_fold_whitespace() {
        let rmem = &t("/proc/sys/net/ipv4/tcp_rmem");
        assert!(same_value(
            rmem,
            "4096\t131072\t6291456\n",
            "4096 131072 6291456"
        ));
        assert!(!same_value(
            rmem,
            "4096 131072 6291456",
            "4096 131072 33554432"
        ));
        let cc = &t("/proc/sys/net/ipv4/tcp_congestion_control");
        assert!(same_value(cc, "bbr\n", "bbr"));
    }

    #[test]
    fn driver_values_by_meaning() {
        assert!(same_value(
            &t("ethtool:eth0:rx-flow-hash.udp4"),
            "sdfn",
            "nfds"
        ));
        assert!(!same_value(
            &t("ethtool:eth0:rx-flow-hash.udp4"),
            "sd",
            "sdfn"
        ));
        assert!(same_value(&t("qdisc:eth0:root"), "fq maxrate 2gbit", "fq"));
        assert!(!same_value(&t("qdisc:eth0:root"), "fq", "mq"));
        assert!(same_value(&t("ethtool:eth0:rings.rx"), "4096", "4096\n"));
    }
}
