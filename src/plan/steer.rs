//! `nettune steer`: the changes that hand one RX queue and one flow to a
//! user-space reader, the single-RX-queue method of Cloudflare's "Single
//! RX queue kernel bypass in Netmap for high packet rate networking":
//!
//! 1. ntuple filters on, LRO and (unless kept) GRO off
//!    (`ethtool -K eth3 ntuple on`, `ethtool -K eth3 lro off gro off`);
//! 2. the RSS indirection table rewritten to give the queue weight 0, so
//!    the NIC hashes no other flow there (`ethtool -X eth3 weight 1 1 1 1
//!    0 1 1 1 1 1`);
//! 3. an ntuple rule that sends the flow to the queue (`ethtool -N eth3
//!    flow-type udp4 dst-port 53 action 4`), at a location chosen here so
//!    rollback deletes exactly that rule;
//! 4. the reader's CPU: where the queue's IRQ is delivered.
//!
//! Pure: a host model in, changes out. A driver without RSS control or
//! ntuple filters (veth, virtio_net) is refused before anything is changed.

use std::fmt::Write as _;

use super::{Change, Target, Typed, Value};
use crate::base::driver::flow::{self, FlowSpec, NtupleRule, RuleAction};
use crate::base::driver::{DriverKey, DriverSetting, DriverSettings};
use crate::base::records::{SteerRecord, NO_RULE};
use crate::base::Probe;
use crate::host::{Host, Interface};

/// What to steer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerRequest {
    pub iface: String,
    pub queue: u32,
    pub flow: FlowSpec,
    /// Leave software GRO on (the article turns it off).
    pub keep_gro: bool,
}

/// The changes and what they set up.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SteerPlan {
    pub record: SteerRecord,
    pub driver: String,
    /// RX rings RSS spreads over.
    pub rings: u32,
    pub changes: Vec<Change>,
    /// The queue's IRQ, if it has one of its own.
    pub irq: Option<u32>,
}

/// The changes `req` makes on `host`, or why the interface cannot do it.
pub fn plan_steer(host: &Host, req: &SteerRequest) -> anyhow::Result<SteerPlan> {
    let iface = find(host, &req.iface)?;
    let d = &iface.driver_settings;
    let driver = driver_name(iface);
    let table = match &d.rss_indirection {
        Probe::Value(t) if !t.is_empty() => t.clone(),
        Probe::Value(_) | Probe::Missing(crate::base::Missing::NotSupported) => {
            anyhow::bail!(
                "'{}': not supported by driver {driver}: it has no RSS indirection table \
                 (ETHTOOL_GRXFHINDIR); the single-RX-queue method needs RSS control and ntuple \
                 filters (see docs/bypass.md); nothing was changed",
                iface.name
            )
        }
        Probe::Missing(_) => anyhow::bail!(
            "cannot read the RSS indirection table of '{}' (driver {driver}): unknown; nothing \
             was changed",
            iface.name
        ),
    };
    let rules = ntuple_table(iface, &driver)?;
    let rings = rx_rings(d, &table);
    if req.queue >= rings {
        anyhow::bail!(
            "--queue {}: '{}' has {}; nothing was changed",
            req.queue,
            iface.name,
            flow::queues_text(rings)
        );
    }
    if rings < 2 {
        anyhow::bail!(
            "'{}' has one RX queue: giving it to one flow would leave none for the kernel; raise \
             the queue count (`ethtool -L {} combined N`) first; nothing was changed",
            iface.name,
            iface.name
        );
    }
    let mut changes = Vec::new();
    features(iface, &driver, req.keep_gro, &mut changes)?;
    let new_table = flow::without_queue(table.len() as u32, rings, req.queue).ok_or_else(|| {
        anyhow::anyhow!(
            "the RSS table of '{}' has {} entries, fewer than its {rings} queues; nothing was \
             changed",
            iface.name,
            table.len()
        )
    })?;
    if new_table != table {
        let mut weights = vec![1u32; rings as usize];
        weights[req.queue as usize] = 0;
        changes.push(change(
            iface,
            Target::RssIndirection {
                iface: iface.name.clone(),
            },
            flow::table_text(&table),
            Value::rss_table(new_table),
            format!(
                "weight 0 for queue {}, 1 for the others: RSS hashes no other flow there \
                 (`ethtool -X {} weight {}`)",
                req.queue,
                iface.name,
                weights
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        ));
    }
    let location = rule_location(iface, &rules, req)?;
    if let Some(location) = location.new {
        let rule = NtupleRule {
            location,
            flow: Some(req.flow.clone()),
            flow_type: 0,
            action: RuleAction::Queue(req.queue),
        };
        let reason = format!(
            "send {} to queue {} (`ethtool -N {} {} loc {location}`)",
            req.flow,
            req.queue,
            iface.name,
            ethtool_rule(&rule)
        );
        changes.push(change(
            iface,
            Target::NtupleRule {
                iface: iface.name.clone(),
                location,
            },
            NO_RULE.to_string(),
            Value::ntuple(Some(rule)),
            reason,
        ));
    }
    let (irq, reader_cpu) = match iface.queue_irq_cpu(req.queue) {
        Some((irq, cpu)) => (Some(irq), cpu),
        None => (None, None),
    };
    Ok(SteerPlan {
        record: SteerRecord {
            iface: iface.name.clone(),
            queue: req.queue,
            flow: req.flow.clone(),
            location: location.at,
            reader_cpu,
        },
        driver,
        rings,
        changes,
        irq,
    })
}

fn find<'h>(host: &'h Host, name: &str) -> anyhow::Result<&'h Interface> {
    host.interfaces
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| {
            let present: Vec<&str> = host.interfaces.iter().map(|i| i.name.as_str()).collect();
            anyhow::anyhow!(
                "--iface '{name}': no such interface{} (present: {}); nothing was changed",
                host.source
                    .netns
                    .as_deref()
                    .map(|ns| format!(" in network namespace '{ns}'"))
                    .unwrap_or_default(),
                present.join(", ")
            )
        })
}

fn driver_name(iface: &Interface) -> String {
    iface
        .driver
        .clone()
        .or_else(|| iface.driver_settings.info.value().map(|i| i.driver.clone()))
        .unwrap_or_else(|| "(unknown)".to_string())
}

fn ntuple_table(iface: &Interface, driver: &str) -> anyhow::Result<flow::NtupleTable> {
    let d = &iface.driver_settings;
    let fixed_off = d
        .features
        .value()
        .and_then(|f| f.get("rx-ntuple-filter"))
        .is_none_or(|f| !f.active && !f.changeable);
    match &d.ntuple {
        Probe::Value(t) if t.size > 0 && !fixed_off => Ok(t.clone()),
        Probe::Value(_) | Probe::Missing(crate::base::Missing::NotSupported) => anyhow::bail!(
            "'{}': not supported by driver {driver}: it has no ntuple filters (ETHTOOL_GRXCLSRLCNT, \
             `ethtool -K {} ntuple on`) to steer a flow to one queue; the single-RX-queue method \
             needs RSS control and ntuple filters (see docs/bypass.md); nothing was changed",
            iface.name,
            iface.name
        ),
        Probe::Missing(_) => anyhow::bail!(
            "cannot read the ntuple rules of '{}' (driver {driver}): unknown; nothing was changed",
            iface.name
        ),
    }
}

/// RX rings: ETHTOOL_GRXRINGS, else the channels, else the table's span.
fn rx_rings(d: &DriverSettings, table: &[u32]) -> u32 {
    if let Probe::Value(n) = d.rx_rings {
        return n;
    }
    if let Probe::Value(c) = &d.channels {
        if c.combined.saturating_add(c.rx) > 0 {
            return c.combined.saturating_add(c.rx);
        }
    }
    table.iter().max().map_or(0, |m| m.saturating_add(1))
}

/// Feature changes: ntuple on; LRO, hardware GRO and (unless kept) GRO off.
fn features(
    iface: &Interface,
    driver: &str,
    keep_gro: bool,
    out: &mut Vec<Change>,
) -> anyhow::Result<()> {
    let Some(features) = iface.driver_settings.features.value() else {
        anyhow::bail!(
            "cannot read the offload features of '{}' (driver {driver}); nothing was changed",
            iface.name
        );
    };
    let mut wanted = vec![
        (
            "rx-ntuple-filter",
            true,
            "ntuple filters steer the flow to its queue",
        ),
        (
            "rx-lro",
            false,
            "LRO merges frames in the NIC: the reader must see them as sent, and XDP refuses LRO",
        ),
        (
            "rx-gro-hw",
            false,
            "hardware GRO merges frames like LRO; XDP refuses it",
        ),
    ];
    if !keep_gro {
        wanted.push((
            "rx-gro",
            false,
            "off as the method does it; --keep-gro keeps it on",
        ));
    }
    for (name, on, why) in wanted {
        let Some(f) = features.get(name) else {
            continue;
        };
        if f.active == on {
            continue;
        }
        if !f.changeable {
            anyhow::bail!(
                "'{}': {name} is {} and fixed (driver {driver}): the single-RX-queue method needs \
                 it {}; nothing was changed",
                iface.name,
                if f.active { "on" } else { "off" },
                if on { "on" } else { "off" }
            );
        }
        out.push(change(
            iface,
            Target::driver(&iface.name, DriverKey::Feature(name.to_string())),
            if f.active { "on" } else { "off" }.to_string(),
            Value::driver(DriverSetting::Feature {
                name: name.to_string(),
                on,
            }),
            why.to_string(),
        ));
    }
    Ok(())
}

/// Where the rule goes: an identical rule already there, or a new one at
/// the last free location.
struct Location {
    at: u32,
    /// Set when a rule must be inserted there.
    new: Option<u32>,
}

fn rule_location(
    iface: &Interface,
    rules: &flow::NtupleTable,
    req: &SteerRequest,
) -> anyhow::Result<Location> {
    for rule in &rules.rules {
        if rule.flow.as_ref() != Some(&req.flow) {
            continue;
        }
        if rule.action == RuleAction::Queue(req.queue) {
            return Ok(Location {
                at: rule.location,
                new: None,
            });
        }
        anyhow::bail!(
            "'{}' has a rule for {} already, at location {} ({}); delete it first \
             (`ethtool -N {} delete {}`); nothing was changed",
            iface.name,
            req.flow,
            rule.location,
            rule.value_text(),
            iface.name,
            rule.location
        );
    }
    let at = rules.free_location().ok_or_else(|| {
        anyhow::anyhow!(
            "the ntuple table of '{}' is full ({} rules); nothing was changed",
            iface.name,
            rules.size
        )
    })?;
    Ok(Location { at, new: Some(at) })
}

fn change(iface: &Interface, target: Target, from: String, to: Value, reason: String) -> Change {
    Change {
        target,
        from,
        to,
        reason,
        group: iface.name.clone(),
        origin: None,
    }
}

/// `flow-type udp4 dst-port 53 action 4`: a rule in ethtool's words.
fn ethtool_rule(rule: &NtupleRule) -> String {
    let text = rule.value_text();
    format!("flow-type {text}")
}

/// The `ethtool` command with the effect of a steering change (for
/// `--format sh` and the dry-run's notes).
pub fn command(target: &Target, to: &Value) -> String {
    let word = |iface: &str| crate::base::text::sh_word(iface).into_owned();
    let comment = |text: String| crate::base::text::sh_comment_line(&text);
    match (target, to.typed()) {
        (Target::RssIndirection { iface }, Typed::RssTable(table)) => {
            let rings = table.iter().max().map_or(0, |m| m.saturating_add(1));
            if *table == flow::default_table(table.len() as u32, rings) {
                return format!("ethtool -X {} default", word(iface));
            }
            // A weight per queue up to the highest the table names: past
            // the most queues a device can have, no weight list writes it.
            if rings > flow::MAX_QUEUES {
                return comment(format!("{target}: no ethtool -X command writes this table"));
            }
            let weights: Vec<u32> = (0..rings).map(|q| u32::from(table.contains(&q))).collect();
            if flow::weighted_table(table.len() as u32, &weights).as_ref() == Some(table) {
                let words: Vec<String> = weights.iter().map(ToString::to_string).collect();
                return format!("ethtool -X {} weight {}", word(iface), words.join(" "));
            }
            comment(format!("{target}: no ethtool -X command writes this table"))
        }
        (Target::NtupleRule { iface, location }, Typed::Ntuple(rule)) => match rule {
            None => format!("ethtool -N {} delete {location}", word(iface)),
            Some(rule) => format!(
                "ethtool -N {} {} loc {location}",
                word(iface),
                ethtool_rule(rule)
            ),
        },
        (Target::XdpProgram { iface, id }, _) => comment(format!(
            "XDP program {id} on {iface}: attached by nettune bench udp-sink --xdp"
        )),
        (other, _) => comment(format!("{other}: not a steering change")),
    }
}

/// RSS table text in people's terms: `128 entries, q0:16 q1:16 ...`.
pub fn table_summary(text: &str) -> String {
    let Ok(table) = flow::parse_table(text) else {
        return text.to_string();
    };
    let mut per_queue = std::collections::BTreeMap::<u32, usize>::new();
    for q in &table {
        *per_queue.entry(*q).or_default() += 1;
    }
    let mut out = format!("{} entries,", table.len());
    for (q, n) in per_queue {
        let _ = write!(out, " q{q}:{n}");
    }
    out
}
