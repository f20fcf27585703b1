//! A change's value, typed once where it is made, of the kind its target
//! takes: the planners make it from what they computed, [`super::admit`]
//! from a saved plan's text (within this host's bounds), [`Value::parse`]
//! from a journal or a value read back from the kernel. `apply` writes the
//! typed value (a driver setting, a qdisc, a NAPI number, an RSS table, an
//! ntuple rule) without reading text again; the text is what `plan`
//! prints, the journal keeps and a kernel file is given.
//!
//! A value keeps the text it was made from, so a saved plan or a journal
//! reads back and is written out again byte for byte (`1,0` stays `1,0`,
//! `fq maxrate 8000mbit` stays so); a value the planner makes is given the
//! text its kind prints.

use std::fmt;

use serde::{Serialize, Serializer};

use super::target::{RxFile, Target};
use crate::base::cpuset::{format_list, format_mask, parse_list, parse_mask};
use crate::base::driver::flow::{self, NtupleRule};
use crate::base::driver::netdev::parse_napi_value;
use crate::base::driver::setting::flow_hash_in_letters;
use crate::base::driver::{DriverSetting, QdiscSpec};
use crate::base::records::{NO_RULE, XDP_ATTACHED, XDP_DETACHED};
use crate::base::units::format_tc_rate;

/// What a value is, by its target's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// A whole number: a sysctl, a queue's RFS share, haltpoll's window,
    /// a NAPI setting.
    Number(u64),
    /// `min default max`: tcp_rmem, tcp_wmem.
    Triple([u64; 3]),
    /// A name, which is the value's text: a governor, a congestion
    /// control (any sysctl text that is not numbers).
    Name,
    /// A CPU list (`0-3,8`): an IRQ's affinity.
    CpuList(Vec<u32>),
    /// A hex mask (`3`, `ff,ffffffff`): the CPUs of RPS and XPS, the RX
    /// queues of xps_rxqs.
    CpuMask(Vec<u32>),
    /// A driver setting (`ethtool -G/-C/-N/-L/-K`).
    Driver(DriverSetting),
    /// A root qdisc.
    Qdisc(QdiscSpec),
    /// A whole RSS indirection table.
    RssTable(Vec<u32>),
    /// An ntuple rule slot: the rule, or none.
    Ntuple(Option<NtupleRule>),
    /// Whether an XDP program is attached.
    Xdp(bool),
}

/// A value a change writes: typed, with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    typed: Typed,
    text: String,
}

impl Value {
    /// A value and the text it was given, checked by the caller to say
    /// the same (admission parses a saved plan's text into it).
    pub(super) fn given(typed: Typed, text: &str) -> Value {
        Value {
            typed,
            text: text.to_string(),
        }
    }

    pub fn number(n: u64) -> Value {
        Value::given(Typed::Number(n), &n.to_string())
    }

    pub fn triple(fields: [u64; 3]) -> Value {
        let [min, default, max] = fields;
        Value::given(Typed::Triple(fields), &format!("{min} {default} {max}"))
    }

    /// A governor or congestion control by name.
    pub fn name(name: &str) -> Value {
        Value::given(Typed::Name, name)
    }

    /// A sysctl's value by its shape: a whole number, three of them
    /// separated by single spaces, or else a name.
    pub fn sysctl(text: &str) -> Value {
        Value::given(sysctl_shape(text), text)
    }

    pub fn cpu_list(cpus: &[u32]) -> Value {
        Value::given(Typed::CpuList(cpus.to_vec()), &format_list(cpus))
    }

    pub fn cpu_mask(cpus: &[u32]) -> Value {
        Value::given(Typed::CpuMask(cpus.to_vec()), &format_mask(cpus))
    }

    pub fn driver(setting: DriverSetting) -> Value {
        let text = setting.value_text();
        // A hash is written as its letters say it (the text shown).
        let setting = match setting {
            DriverSetting::FlowHash { flow_type, hash } => DriverSetting::FlowHash {
                flow_type,
                hash: flow_hash_in_letters(&hash),
            },
            other => other,
        };
        Value::given(Typed::Driver(setting), &text)
    }

    /// A root qdisc of `kind`, with fq's per-flow cap in bits per second
    /// (given to the kernel in bytes per second, at most 32 bits of
    /// them: the planner keeps the cap below that).
    pub fn qdisc(kind: &str, maxrate_bits: Option<u64>) -> Value {
        let text = match maxrate_bits {
            Some(bits) => format!("{kind} maxrate {}", format_tc_rate(bits)),
            None => kind.to_string(),
        };
        let spec = QdiscSpec {
            kind: kind.to_string(),
            maxrate_bytes: maxrate_bits.map(|bits| u32::try_from(bits / 8).unwrap_or(u32::MAX)),
        };
        Value::given(Typed::Qdisc(spec), &text)
    }

    pub fn rss_table(table: Vec<u32>) -> Value {
        let text = flow::table_text(&table);
        Value::given(Typed::RssTable(table), &text)
    }

    /// An ntuple slot holding `rule`, or no rule.
    pub fn ntuple(rule: Option<NtupleRule>) -> Value {
        let text = rule
            .as_ref()
            .map_or_else(|| NO_RULE.to_string(), NtupleRule::value_text);
        Value::given(Typed::Ntuple(rule), &text)
    }

    /// An XDP program attached, or not.
    pub fn xdp(attached: bool) -> Value {
        let text = if attached { XDP_ATTACHED } else { XDP_DETACHED };
        Value::given(Typed::Xdp(attached), text)
    }

    /// `text` as a value of `target`, of the kind the target takes, with
    /// no bound but the kind's own (a journal's value, a value read back
    /// from the kernel to be written again). A saved plan's values are
    /// admitted instead, within this host's bounds ([`super::admit`]).
    pub fn parse(target: &Target, text: &str) -> Result<Value, String> {
        let whole_number = |text: &str| {
            whole(text).ok_or_else(|| {
                format!("{} is not a whole number", crate::base::text::excerpt(text))
            })
        };
        let typed = match target {
            Target::Sysctl(_) => return Ok(Value::sysctl(text)),
            Target::Governor(_) => Typed::Name,
            Target::IrqAffinity(_) => Typed::CpuList(parse_list(text).map_err(|e| e.to_string())?),
            Target::RxQueue {
                file: RxFile::RpsCpus,
                ..
            }
            | Target::TxQueue { .. } => {
                Typed::CpuMask(parse_mask(text).map_err(|e| e.to_string())?)
            }
            Target::RxQueue {
                file: RxFile::RpsFlowCnt,
                ..
            }
            | Target::HaltPoll => Typed::Number(whole_number(text)?),
            Target::Driver { key, .. } => Typed::Driver(key.setting(text)?),
            Target::RootQdisc { .. } => Typed::Qdisc(QdiscSpec::parse(text)?),
            Target::Napi { key, .. } => Typed::Number(parse_napi_value(*key, text)?),
            Target::RssIndirection { .. } => Typed::RssTable(flow::parse_table(text)?),
            Target::NtupleRule { .. } if text == NO_RULE => Typed::Ntuple(None),
            Target::NtupleRule { location, .. } => {
                Typed::Ntuple(Some(NtupleRule::parse_value(*location, text)?))
            }
            Target::XdpProgram { .. } => match text {
                XDP_ATTACHED => Typed::Xdp(true),
                XDP_DETACHED => Typed::Xdp(false),
                _ => {
                    return Err(format!(
                        "{} is not '{XDP_ATTACHED}' or '{XDP_DETACHED}'",
                        crate::base::text::excerpt(text)
                    ))
                }
            },
            Target::Queues { .. } | Target::Cpufreq | Target::Interfaces => {
                return Err(format!(
                    "{target} is a scope, not a setting: nothing to write"
                ))
            }
        };
        Ok(Value::given(typed, text))
    }

    /// What the value is.
    pub fn typed(&self) -> &Typed {
        &self.typed
    }

    /// Its text, as `plan` prints it and a kernel file is given it.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// What a sysctl's text is by its shape (see [`Value::sysctl`]).
pub(super) fn sysctl_shape(text: &str) -> Typed {
    let fields: Vec<Option<u64>> = text.split(' ').map(whole).collect();
    match fields[..] {
        [Some(n)] => Typed::Number(n),
        [Some(min), Some(default), Some(max)] => Typed::Triple([min, default, max]),
        _ => Typed::Name,
    }
}

/// A whole number: digits only (no sign, no space), within 64 bits.
pub fn whole(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl AsRef<str> for Value {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// A value equals its text: `change.to == "3"`.
impl PartialEq<str> for Value {
    fn eq(&self, text: &str) -> bool {
        self.text == text
    }
}

impl PartialEq<&str> for Value {
    fn eq(&self, text: &&str) -> bool {
        self.text == *text
    }
}

/// In JSON a value is its text, as plans and journals have always held it.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::driver::NapiKey;

    fn t(text: &str) -> Target {
        text.parse().expect("target")
    }

    #[test]
    fn values_made_by_kind_print_as_their_tools_take_them() {
        assert_eq!(Value::number(16777216), "16777216");
        assert_eq!(
            Value::triple([4096, 131072, 6291456]),
            "4096 131072 6291456"
        );
        assert_eq!(Value::cpu_list(&[0, 1, 2, 5]), "0-2,5");
        assert_eq!(Value::cpu_mask(&[0, 1]), "3");
        assert_eq!(Value::cpu_mask(&[]), "0");
        assert_eq!(Value::qdisc("fq", None), "fq");
        let fq = Value::qdisc("fq", Some(8_000_000_000));
        assert_eq!(fq, "fq maxrate 8gbit");
        assert_eq!(
            fq.typed(),
            &Typed::Qdisc(QdiscSpec {
                kind: "fq".to_string(),
                maxrate_bytes: Some(1_000_000_000)
            })
        );
        assert_eq!(Value::ntuple(None), NO_RULE);
        assert_eq!(Value::xdp(false), XDP_DETACHED);
        assert_eq!(Value::rss_table(vec![0, 1, 0, 1]), "0 1 0 1");
    }

    #[test]
    fn a_parsed_value_is_typed_by_its_target_and_keeps_its_text() {
        for (target, text, typed) in [
            (
                "/proc/sys/net/core/rmem_max",
                "212992",
                Typed::Number(212992),
            ),
            (
                "/proc/sys/net/ipv4/tcp_rmem",
                "4096 131072 6291456",
                Typed::Triple([4096, 131072, 6291456]),
            ),
            (
                "/proc/sys/net/ipv4/tcp_congestion_control",
                "bbr",
                Typed::Name,
            ),
            (
                "/proc/irq/74/smp_affinity_list",
                "1,0",
                Typed::CpuList(vec![0, 1]),
            ),
            (
                "/sys/class/net/eth0/queues/rx-0/rps_cpus",
                "00000003",
                Typed::CpuMask(vec![0, 1]),
            ),
            (
                "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt",
                "4096",
                Typed::Number(4096),
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "performance",
                Typed::Name,
            ),
            (
                "ethtool:eth0:rings.rx",
                "4096",
                Typed::Driver(DriverSetting::RingRx(4096)),
            ),
            ("napi:eth0:rx-0:defer-hard-irqs", "100", Typed::Number(100)),
            (
                "rss:eth0:indirection",
                "0 1 1 0",
                Typed::RssTable(vec![0, 1, 1, 0]),
            ),
            ("ntuple:eth0:7", NO_RULE, Typed::Ntuple(None)),
            ("xdp:eth0:42", XDP_ATTACHED, Typed::Xdp(true)),
        ] {
            let value = Value::parse(&t(target), text).expect(target);
            assert_eq!(value.typed(), &typed, "{target}");
            assert_eq!(value.as_str(), text, "{target}");
            assert_eq!(
                serde_json::to_string(&value).expect("json"),
                format!("{text:?}")
            );
        }
        let rule = Value::parse(&t("ntuple:eth0:7"), "udp4 dst-port 53 action 4").expect("rule");
        assert!(matches!(rule.typed(), Typed::Ntuple(Some(r)) if r.location == 7));
        let fq = Value::parse(&t("qdisc:eth0:root"), "fq maxrate 8000mbit").expect("fq");
        assert_eq!(fq, "fq maxrate 8000mbit");
        assert_eq!(fq.typed(), Value::qdisc("fq", Some(8_000_000_000)).typed());
    }

    #[test]
    fn a_text_not_of_its_targets_kind_is_refused() {
        for (target, text) in [
            ("/proc/irq/74/smp_affinity_list", "x"),
            ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "xyz"),
            ("/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "+1"),
            ("ethtool:eth0:features.rx-gro", "yes"),
            ("qdisc:eth0:root", "fq; rm -rf /"),
            ("napi:eth0:rx-0:defer-hard-irqs", "2\nrm -rf /"),
            ("ntuple:eth0:7", "udp4 dst-port 53"),
            ("xdp:eth0:42", "detached"),
            ("/sys/class/net/eth0/queues", "1"),
        ] {
            assert!(
                Value::parse(&t(target), text).is_err(),
                "{target} = {text:?}"
            );
        }
        assert_eq!(
            Value::parse(
                &Target::napi("eth0", 0, NapiKey::DeferHardIrqs),
                "2147483648"
            )
            .map_err(|e| e.contains("limit")),
            Err(true)
        );
    }

    #[test]
    fn sysctls_are_typed_by_their_shape() {
        assert_eq!(Value::sysctl("0").typed(), &Typed::Number(0));
        assert_eq!(Value::sysctl("1 2 3").typed(), &Typed::Triple([1, 2, 3]));
        for name in ["cubic", "1  2 3", "+5", "1 2", ""] {
            assert_eq!(Value::sysctl(name).typed(), &Typed::Name, "{name:?}");
        }
    }
}
