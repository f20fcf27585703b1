//! The drop reasons of the running kernel, read at run time (the enum
//! changes between kernels): from the `skb:kfree_skb` tracepoint's format
//! file when tracefs is mounted, else from the kernel's type information
//! (`enum skb_drop_reason` in /sys/kernel/btf/vmlinux). Both list the
//! same names; the format file drops the `SKB_DROP_REASON_` prefix.

use std::collections::BTreeMap;

use serde::Serialize;

use super::catalog::{self, Mapping};
use crate::base::bpf::btf::Btf;
use crate::base::drop_layer::Layer;
use crate::base::Root;
use crate::error::ParseError;

/// Where tracefs shows the tracepoint's format: its own mount, or under
/// debugfs.
pub const FORMAT_FILES: [&str; 2] = [
    "/sys/kernel/tracing/events/skb/kfree_skb/format",
    "/sys/kernel/debug/tracing/events/skb/kfree_skb/format",
];
const PREFIX: &str = "SKB_DROP_REASON_";
/// Not reasons: the enum's markers.
const NOT_REASONS: [&str; 4] = ["SKB_NOT_DROPPED_YET", "SKB_CONSUMED", "MAX", "SUBSYS_MASK"];

/// The kernel's reasons, by their code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reasons {
    by_code: BTreeMap<u32, String>,
    /// The file they were read from.
    pub source: String,
}

/// One reason as `trace reasons` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonInfo {
    pub code: u32,
    pub name: String,
    /// `IPv4/IPv6`, `UDP/TCP` for reasons whose layer depends on the packet.
    pub layer: String,
    pub what: String,
    pub fix: Option<String>,
    pub source: String,
    pub mapping: Mapping,
}

/// The `{ 2, "NOT_SPECIFIED" }, ...` list of `__print_symbolic(REC->reason,
/// ...)` in a tracepoint's format file.
pub fn parse_format(text: &str) -> Result<BTreeMap<u32, String>, ParseError> {
    let start = text
        .find("__print_symbolic(REC->reason")
        .ok_or_else(|| ParseError::new("no reason list (a kernel older than 5.17 has none)"))?;
    let mut rest = &text[start..];
    let mut out = BTreeMap::new();
    while let Some(open) = rest.find('{') {
        // The list ends at the call's closing parenthesis.
        if rest[..open].contains(')') {
            break;
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| ParseError::new("an unclosed { in the reason list"))?;
        let item = &rest[open + 1..open + close];
        let (code, name) = item.split_once(',').ok_or_else(|| {
            ParseError::new(format!("'{}' is not {{ code, \"NAME\" }}", item.trim()))
        })?;
        let code = parse_code(code.trim())
            .ok_or_else(|| ParseError::new(format!("'{}' is not a reason code", code.trim())))?;
        let name = name.trim().trim_matches('"').to_string();
        if !NOT_REASONS.contains(&name.as_str()) {
            out.insert(code, name);
        }
        rest = &rest[open + close + 1..];
    }
    if out.is_empty() {
        return Err(ParseError::new("an empty reason list"));
    }
    Ok(out)
}

fn parse_code(text: &str) -> Option<u32> {
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The reasons of `enum skb_drop_reason`.
pub fn from_btf(btf: &Btf) -> Option<BTreeMap<u32, String>> {
    let values = btf.enum_values("skb_drop_reason")?;
    let out: BTreeMap<u32, String> = values
        .into_iter()
        .filter_map(|(name, value)| {
            let short = name.strip_prefix(PREFIX).unwrap_or(&name);
            (!NOT_REASONS.contains(&short) && !NOT_REASONS.contains(&name.as_str()))
                .then(|| Some((u32::try_from(value).ok()?, short.to_string())))?
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

impl Reasons {
    pub fn new(by_code: BTreeMap<u32, String>, source: impl Into<String>) -> Reasons {
        Reasons {
            by_code,
            source: source.into(),
        }
    }

    /// Read them: the format file through `root` if tracefs is mounted,
    /// else `btf`. `None` when neither lists them (a kernel before 5.17).
    pub fn read(root: &Root, btf: Option<&Btf>) -> Option<Reasons> {
        for path in FORMAT_FILES {
            if let Ok(Some(text)) = root.read_optional(path) {
                if let Ok(list) = parse_format(&text) {
                    return Some(Reasons::new(list, path));
                }
            }
        }
        let list = from_btf(btf?)?;
        Some(Reasons::new(
            list,
            "/sys/kernel/btf/vmlinux, enum skb_drop_reason",
        ))
    }

    /// The reason's name; one the kernel did not list (a subsystem's, with
    /// its id in the high 16 bits) is named by its code.
    pub fn name(&self, code: u32) -> String {
        match self.by_code.get(&code) {
            Some(name) => name.clone(),
            None if code >> 16 != 0 => {
                format!("SUBSYS_{}_REASON_{}", code >> 16, code & 0xffff)
            }
            None => format!("REASON_{code}"),
        }
    }

    /// The code of reason `name` (either spelling), if the kernel has it.
    pub fn code(&self, name: &str) -> Option<u32> {
        let upper = name.trim().to_ascii_uppercase();
        let short = upper.strip_prefix(PREFIX).unwrap_or(&upper);
        self.by_code
            .iter()
            .find(|(_, n)| n.as_str() == short)
            .map(|(&c, _)| c)
    }

    pub fn len(&self) -> usize {
        self.by_code.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_code.is_empty()
    }

    /// Every reason with what nettune says of it, in code order.
    pub fn describe(&self) -> Vec<ReasonInfo> {
        self.by_code
            .iter()
            .map(|(&code, name)| {
                let e = catalog::entry(name);
                ReasonInfo {
                    code,
                    name: name.clone(),
                    layer: e.place.title().to_string(),
                    what: e.what.to_string(),
                    fix: e.fix.map(str::to_string),
                    source: e.source.to_string(),
                    mapping: e.mapping,
                }
            })
            .collect()
    }

    /// The reasons nettune has no layer for.
    pub fn unmapped(&self) -> Vec<String> {
        self.by_code
            .values()
            .filter(|n| catalog::entry(n).mapping == Mapping::Unmapped)
            .cloned()
            .collect()
    }
}

/// The layer of a drop with reason `name`, for a packet of `ethertype`
/// and IP protocol `l4`.
pub fn layer_of(name: &str, ethertype: u16, l4: u8) -> Layer {
    catalog::entry(name).place.layer(ethertype, l4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of /sys/kernel/tracing/events/skb/kfree_skb/format on
    /// Linux 6.18 (trimmed in the middle).
    const FORMAT_6_18: &str = r#"name: kfree_skb
ID: 2310
format:
	field:void * skbaddr;	offset:8;	size:8;	signed:0;
	field:enum skb_drop_reason reason;	offset:36;	size:4;	signed:0;

print fmt: "skbaddr=%p rx_sk=%p protocol=%u location=%pS reason: %s", REC->skbaddr, REC->rx_sk, REC->protocol, REC->location, __print_symbolic(REC->reason, { 2, "NOT_SPECIFIED" }, { 3, "NO_SOCKET" }, { 4, "SOCKET_CLOSE" }, { 6, "SOCKET_RCVBUFF" }, { 12, "NETFILTER_DROP" }, { 64, "QDISC_DROP" }, { 71, "CPU_BACKLOG" }, { 127, "RECURSION_LIMIT" }, { 128, "MAX" })
"#;

    #[test]
    fn the_format_file_lists_the_reasons_without_the_marker() {
        let list = parse_format(FORMAT_6_18).expect("parse");
        assert_eq!(list.len(), 8);
        assert_eq!(list[&6], "SOCKET_RCVBUFF");
        assert_eq!(list[&127], "RECURSION_LIMIT");
        assert!(!list.values().any(|n| n == "MAX"));
    }

    #[test]
    fn a_kernel_without_reasons_says_so() {
        let old = "print fmt: \"skbaddr=%p protocol=%u location=%p\", REC->skbaddr";
        let err = parse_format(old).expect_err("no list");
        assert!(err.0.contains("5.17"), "{err}");
        assert!(parse_format("__print_symbolic(REC->reason, { x, \"A\" })").is_err());
    }

    #[test]
    fn names_and_codes_go_both_ways() {
        let reasons = Reasons::new(parse_format(FORMAT_6_18).expect("parse"), "test");
        assert_eq!(reasons.code("socket_rcvbuff"), Some(6));
        assert_eq!(reasons.code("SKB_DROP_REASON_NO_SOCKET"), Some(3));
        assert_eq!(reasons.code("NO_SUCH"), None);
        assert_eq!(reasons.name(71), "CPU_BACKLOG");
        assert_eq!(reasons.name(1000), "REASON_1000");
        assert_eq!(reasons.name((3 << 16) | 2), "SUBSYS_3_REASON_2");
        assert!(reasons.unmapped().is_empty());
        let described = reasons.describe();
        assert_eq!(described[0].name, "NOT_SPECIFIED");
        assert!(described.iter().all(|r| r.mapping == Mapping::Exact));
    }

    #[test]
    fn the_btf_enum_gives_the_same_names() {
        use crate::base::bpf::btf::testing::Builder;
        let mut b = Builder::new();
        let _ = b.enumeration(
            "skb_drop_reason",
            &[
                ("SKB_NOT_DROPPED_YET", 0),
                ("SKB_CONSUMED", 1),
                ("SKB_DROP_REASON_NOT_SPECIFIED", 2),
                ("SKB_DROP_REASON_NO_SOCKET", 3),
                ("SKB_DROP_REASON_MAX", 128),
                ("SKB_DROP_REASON_SUBSYS_MASK", -65536),
            ],
        );
        let btf = Btf::parse(b.build()).expect("btf");
        let list = from_btf(&btf).expect("enum");
        assert_eq!(
            list.into_iter().collect::<Vec<_>>(),
            [
                (2, "NOT_SPECIFIED".to_string()),
                (3, "NO_SOCKET".to_string())
            ]
        );
    }
}
