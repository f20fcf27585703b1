//! One driver setting as plan and apply name it: `rings.rx`,
//! `coalesce.adaptive-rx`, `rx-flow-hash.udp4`, `channels.combined`,
//! `features.rx-gro`; its value as text (`4096`, `on`, `sdfn`), the text
//! `ethtool` itself takes.

use std::fmt;

use crate::base::driver::{Channels, DriverSettings, FlowHash};
use crate::base::Probe;

/// A driver setting with the value to give it: what one `ethtool -G/-C/-N/-L/-K`
/// word pair sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverSetting {
    RingRx(u32),
    RingTx(u32),
    RxUsecs(u32),
    TxUsecs(u32),
    AdaptiveRx(bool),
    AdaptiveTx(bool),
    /// rx-flow-hash of a flow type (`udp4`) over these fields.
    FlowHash {
        flow_type: String,
        hash: FlowHash,
    },
    /// Queue count of one kind.
    Channels {
        kind: ChannelKind,
        count: u32,
    },
    /// An offload by the name `ethtool -k` shows (either spelling).
    Feature {
        name: String,
        on: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    Rx,
    Tx,
    Combined,
}

impl ChannelKind {
    pub fn name(self) -> &'static str {
        match self {
            ChannelKind::Rx => "rx",
            ChannelKind::Tx => "tx",
            ChannelKind::Combined => "combined",
        }
    }

    pub fn count(self, c: &Channels) -> u32 {
        match self {
            ChannelKind::Rx => c.rx,
            ChannelKind::Tx => c.tx,
            ChannelKind::Combined => c.combined,
        }
    }

    pub fn max(self, c: &Channels) -> u32 {
        match self {
            ChannelKind::Rx => c.max_rx,
            ChannelKind::Tx => c.max_tx,
            ChannelKind::Combined => c.max_combined,
        }
    }
}

/// The two names drivers give GRO (`ethtool -k` shows either, or both):
/// one setting.
pub const GRO_NAMES: [&str; 2] = ["rx-gro", "generic-receive-offload"];

/// A driver setting's key (`features.generic-receive-offload`) under the
/// one name GRO is kept by (`features.rx-gro`); any other key as it is.
pub fn gro_as_one(key: &str) -> String {
    match key.strip_prefix("features.") {
        Some(feature) if GRO_NAMES.contains(&feature) => format!("features.{}", GRO_NAMES[0]),
        _ => key.to_string(),
    }
}

/// A driver setting's name within an interface, typed: `rings.rx`,
/// `coalesce.adaptive-rx`, `rx-flow-hash.udp4`, `channels.combined`,
/// `features.rx-gro` (what a target `ethtool:IFACE:KEY` names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DriverKey {
    RingRx,
    RingTx,
    RxUsecs,
    TxUsecs,
    AdaptiveRx,
    AdaptiveTx,
    /// rx-flow-hash of a flow type (`udp4`).
    FlowHash(String),
    /// Queue count of one kind.
    Channels(ChannelKind),
    /// An offload by the name `ethtool -k` shows (either spelling).
    Feature(String),
}

/// The keys without a name in them, by their text.
const FIXED_KEYS: [(&str, DriverKey); 9] = [
    ("rings.rx", DriverKey::RingRx),
    ("rings.tx", DriverKey::RingTx),
    ("coalesce.rx-usecs", DriverKey::RxUsecs),
    ("coalesce.tx-usecs", DriverKey::TxUsecs),
    ("coalesce.adaptive-rx", DriverKey::AdaptiveRx),
    ("coalesce.adaptive-tx", DriverKey::AdaptiveTx),
    ("channels.rx", DriverKey::Channels(ChannelKind::Rx)),
    ("channels.tx", DriverKey::Channels(ChannelKind::Tx)),
    (
        "channels.combined",
        DriverKey::Channels(ChannelKind::Combined),
    ),
];

impl DriverKey {
    /// The key `text` names, if nettune knows it.
    pub fn parse(text: &str) -> Option<DriverKey> {
        if let Some((_, key)) = FIXED_KEYS.iter().find(|(name, _)| *name == text) {
            return Some(key.clone());
        }
        // A flow type or feature name as ethtool spells them.
        let named = |suffix: &str| {
            (!suffix.is_empty()
                && suffix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .then(|| suffix.to_string())
        };
        if let Some(flow_type) = text.strip_prefix("rx-flow-hash.") {
            return named(flow_type).map(DriverKey::FlowHash);
        }
        named(text.strip_prefix("features.")?).map(DriverKey::Feature)
    }

    /// The setting of this key with the value `text` (as
    /// [`DriverSetting::value_text`] prints it).
    pub fn setting(&self, text: &str) -> Result<DriverSetting, String> {
        Ok(match self {
            DriverKey::RingRx => DriverSetting::RingRx(parse_count(text)?),
            DriverKey::RingTx => DriverSetting::RingTx(parse_count(text)?),
            DriverKey::RxUsecs => DriverSetting::RxUsecs(parse_count(text)?),
            DriverKey::TxUsecs => DriverSetting::TxUsecs(parse_count(text)?),
            DriverKey::AdaptiveRx => DriverSetting::AdaptiveRx(parse_on_off(text)?),
            DriverKey::AdaptiveTx => DriverSetting::AdaptiveTx(parse_on_off(text)?),
            DriverKey::FlowHash(flow_type) => DriverSetting::FlowHash {
                flow_type: flow_type.clone(),
                hash: parse_flow_hash(text)?,
            },
            DriverKey::Channels(kind) => DriverSetting::Channels {
                kind: *kind,
                count: parse_count(text)?,
            },
            DriverKey::Feature(name) => DriverSetting::Feature {
                name: name.clone(),
                on: parse_on_off(text)?,
            },
        })
    }
}

impl fmt::Display for DriverKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((name, _)) = FIXED_KEYS.iter().find(|(_, key)| key == self) {
            return f.write_str(name);
        }
        match self {
            DriverKey::FlowHash(flow_type) => write!(f, "rx-flow-hash.{flow_type}"),
            DriverKey::Feature(name) => write!(f, "features.{name}"),
            _ => Ok(()),
        }
    }
}

/// Keys sort by their text, as targets are listed.
impl Ord for DriverKey {
    fn cmp(&self, other: &DriverKey) -> std::cmp::Ordering {
        self.to_string().cmp(&other.to_string())
    }
}

impl PartialOrd for DriverKey {
    fn partial_cmp(&self, other: &DriverKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// rx-flow-hash fields and the letter `ethtool -N ... rx-flow-hash` uses for
/// each, in the order ethtool prints them.
const FLOW_HASH_LETTERS: [(char, &str); 8] = [
    ('m', "l2_dst"),
    ('v', "vlan"),
    ('t', "l3_proto"),
    ('s', "ip_src"),
    ('d', "ip_dst"),
    ('f', "l4_src_port"),
    ('n', "l4_dst_port"),
    ('r', "discard"),
];

/// `sdfn` for ip_src+ip_dst+l4_src_port+l4_dst_port. `None` when a field has
/// no ethtool letter (a hash bit newer than this code).
pub fn flow_hash_text(hash: &FlowHash) -> Option<String> {
    let mut text = String::new();
    for (letter, field) in FLOW_HASH_LETTERS {
        if hash.fields.iter().any(|f| f == field) {
            text.push(letter);
        }
    }
    let known = hash
        .fields
        .iter()
        .all(|f| FLOW_HASH_LETTERS.iter().any(|(_, name)| name == f));
    known.then_some(text)
}

/// `hash` as its letters say it, what writing [`flow_hash_text`] sets: its
/// fields in ethtool's order; none at all when one has no letter (the
/// text is then empty).
pub fn flow_hash_in_letters(hash: &FlowHash) -> FlowHash {
    let fields = match flow_hash_text(hash) {
        Some(_) => FLOW_HASH_LETTERS
            .iter()
            .filter(|(_, field)| hash.fields.iter().any(|f| f == field))
            .map(|(_, field)| field.to_string())
            .collect(),
        None => Vec::new(),
    };
    FlowHash { fields }
}

pub fn parse_flow_hash(text: &str) -> Result<FlowHash, String> {
    let mut fields = Vec::new();
    for (letter, field) in FLOW_HASH_LETTERS {
        if text.contains(letter) {
            fields.push(field.to_string());
        }
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !FLOW_HASH_LETTERS.iter().any(|(l, _)| l == c))
    {
        return Err(format!(
            "'{bad}' in rx-flow-hash '{text}' is not one of m v t s d f n r"
        ));
    }
    Ok(FlowHash { fields })
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{text}' is not on or off")),
    }
}

fn parse_count(text: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("'{text}' is not a whole number"))
}

impl DriverSetting {
    /// The setting's name within an interface: `rings.rx`.
    pub fn key(&self) -> DriverKey {
        match self {
            DriverSetting::RingRx(_) => DriverKey::RingRx,
            DriverSetting::RingTx(_) => DriverKey::RingTx,
            DriverSetting::RxUsecs(_) => DriverKey::RxUsecs,
            DriverSetting::TxUsecs(_) => DriverKey::TxUsecs,
            DriverSetting::AdaptiveRx(_) => DriverKey::AdaptiveRx,
            DriverSetting::AdaptiveTx(_) => DriverKey::AdaptiveTx,
            DriverSetting::FlowHash { flow_type, .. } => DriverKey::FlowHash(flow_type.clone()),
            DriverSetting::Channels { kind, .. } => DriverKey::Channels(*kind),
            DriverSetting::Feature { name, .. } => DriverKey::Feature(name.clone()),
        }
    }

    /// The value as text, the way `ethtool` takes it.
    pub fn value_text(&self) -> String {
        match self {
            DriverSetting::RingRx(n)
            | DriverSetting::RingTx(n)
            | DriverSetting::RxUsecs(n)
            | DriverSetting::TxUsecs(n)
            | DriverSetting::Channels { count: n, .. } => n.to_string(),
            DriverSetting::AdaptiveRx(on)
            | DriverSetting::AdaptiveTx(on)
            | DriverSetting::Feature { on, .. } => on_off(*on).to_string(),
            DriverSetting::FlowHash { hash, .. } => flow_hash_text(hash).unwrap_or_default(),
        }
    }

    /// Parse a key and value text (as `key` and `value_text` print them).
    pub fn parse(key: &str, value: &str) -> Result<DriverSetting, String> {
        DriverKey::parse(key)
            .ok_or_else(|| format!("'{key}' is not a driver setting nettune knows"))?
            .setting(value)
    }

    /// The `ethtool` command that makes this setting (for `--format sh`).
    /// The interface is one shell word (quoted when it needs it); keys
    /// and values are plain by construction.
    pub fn ethtool_command(&self, iface: &str) -> String {
        let value = self.value_text();
        let iface = crate::base::text::sh_word(iface);
        match self {
            DriverSetting::RingRx(_) => format!("ethtool -G {iface} rx {value}"),
            DriverSetting::RingTx(_) => format!("ethtool -G {iface} tx {value}"),
            DriverSetting::RxUsecs(_) => format!("ethtool -C {iface} rx-usecs {value}"),
            DriverSetting::TxUsecs(_) => format!("ethtool -C {iface} tx-usecs {value}"),
            DriverSetting::AdaptiveRx(_) => format!("ethtool -C {iface} adaptive-rx {value}"),
            DriverSetting::AdaptiveTx(_) => format!("ethtool -C {iface} adaptive-tx {value}"),
            DriverSetting::FlowHash { flow_type, .. } => {
                format!("ethtool -N {iface} rx-flow-hash {flow_type} {value}")
            }
            DriverSetting::Channels { kind, .. } => {
                format!("ethtool -L {iface} {} {value}", kind.name())
            }
            DriverSetting::Feature { name, .. } => format!("ethtool -K {iface} {name} {value}"),
        }
    }
}

impl fmt::Display for DriverSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.key(), self.value_text())
    }
}

/// The current value text of a setting key, from what the driver reported.
pub fn current_text(key: &DriverKey, settings: &DriverSettings) -> Probe<String> {
    let number = |p: Probe<u32>| p.map(|n| n.to_string());
    let switch = |p: Probe<bool>| p.map(|on| on_off(on).to_string());
    let rings = settings.rings.clone();
    let coalesce = settings.coalesce.clone();
    match key {
        DriverKey::RingRx => number(rings.map(|r| r.rx)),
        DriverKey::RingTx => number(rings.map(|r| r.tx)),
        DriverKey::RxUsecs => number(coalesce.map(|c| c.rx_usecs)),
        DriverKey::TxUsecs => number(coalesce.map(|c| c.tx_usecs)),
        DriverKey::AdaptiveRx => switch(coalesce.map(|c| c.adaptive_rx)),
        DriverKey::AdaptiveTx => switch(coalesce.map(|c| c.adaptive_tx)),
        DriverKey::FlowHash(flow_type) => match settings.rx_flow_hash.get(flow_type) {
            Some(Probe::Value(hash)) => flow_hash_text(hash).into(),
            Some(Probe::Missing(m)) => Probe::Missing(*m),
            None => Probe::UNKNOWN,
        },
        DriverKey::Channels(kind) => number(settings.channels.clone().map(|c| kind.count(&c))),
        DriverKey::Feature(name) => match settings.features.value() {
            Some(features) => features
                .get(name)
                .map(|f| on_off(f.active).to_string())
                .into(),
            None => match settings.features {
                Probe::Missing(m) => Probe::Missing(m),
                Probe::Value(_) => Probe::UNKNOWN,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::driver::{Coalesce, Rings};

    #[test]
    fn flow_hash_letters_match_ethtool() {
        // `ethtool -N eth2 rx-flow-hash udp4 sdfn`, as in "How to receive a
        // million packets per second".
        let hash = parse_flow_hash("sdfn").expect("sdfn");
        assert_eq!(
            hash.fields,
            ["ip_src", "ip_dst", "l4_src_port", "l4_dst_port"]
        );
        assert_eq!(flow_hash_text(&hash).as_deref(), Some("sdfn"));
        let ips = FlowHash {
            fields: vec!["ip_dst".to_string(), "ip_src".to_string()],
        };
        assert_eq!(flow_hash_text(&ips).as_deref(), Some("sd"));
        assert!(parse_flow_hash("sdx").is_err());
        let odd = FlowHash {
            fields: vec!["ip_src".to_string(), "bit_9".to_string()],
        };
        assert_eq!(flow_hash_text(&odd), None);
        for hash in [&ips, &odd] {
            let text = flow_hash_text(hash).unwrap_or_default();
            assert_eq!(
                flow_hash_in_letters(hash),
                parse_flow_hash(&text).expect("text")
            );
        }
    }

    #[test]
    fn keys_and_values_round_trip() {
        let settings = [
            DriverSetting::RingRx(4096),
            DriverSetting::AdaptiveRx(true),
            DriverSetting::RxUsecs(0),
            DriverSetting::FlowHash {
                flow_type: "udp4".to_string(),
                hash: parse_flow_hash("sdfn").expect("hash"),
            },
            DriverSetting::Channels {
                kind: ChannelKind::Combined,
                count: 16,
            },
            DriverSetting::Feature {
                name: "rx-gro".to_string(),
                on: false,
            },
        ];
        for s in settings {
            let back = DriverSetting::parse(&s.key().to_string(), &s.value_text()).expect("parse");
            assert_eq!(back, s);
            assert_eq!(DriverKey::parse(&s.key().to_string()), Some(s.key()));
        }
        for bad in [
            "rings.rx2",
            "features.",
            "rx-flow-hash.udp 4",
            "channels.other",
        ] {
            assert_eq!(DriverKey::parse(bad), None, "{bad}");
        }
        assert!(DriverSetting::parse("rings.rx", "many").is_err());
        assert!(DriverSetting::parse("coalesce.adaptive-rx", "yes").is_err());
        assert!(DriverSetting::parse("bogus", "1").is_err());
        assert_eq!(
            DriverSetting::RingRx(4096).ethtool_command("eth0"),
            "ethtool -G eth0 rx 4096"
        );
    }

    #[test]
    fn current_text_reads_the_model() {
        let settings = DriverSettings {
            rings: Probe::Value(Rings {
                rx: 512,
                rx_max: 4096,
                rx_mini: 0,
                rx_mini_max: 0,
                rx_jumbo: 0,
                rx_jumbo_max: 0,
                tx: 256,
                tx_max: 4096,
            }),
            coalesce: Probe::Value(Coalesce {
                rx_usecs: 8,
                rx_frames: 0,
                tx_usecs: 0,
                tx_frames: 0,
                adaptive_rx: true,
                adaptive_tx: false,
            }),
            ..DriverSettings::default()
        };
        assert_eq!(
            current_text(&DriverKey::RingRx, &settings),
            Probe::Value("512".to_string())
        );
        assert_eq!(
            current_text(&DriverKey::AdaptiveRx, &settings),
            Probe::Value("on".to_string())
        );
        assert_eq!(
            current_text(&DriverKey::Channels(ChannelKind::Combined), &settings),
            Probe::UNKNOWN
        );
        assert_eq!(
            current_text(&DriverKey::FlowHash("udp4".to_string()), &settings),
            Probe::UNKNOWN
        );
    }
}
