//! Reading and writing the targets of `nettune steer` and of an XDP
//! program: the RSS indirection table (the whole table, byte for byte), an
//! ntuple rule slot (a rule, or `none`), and whether a recorded XDP program
//! is attached (`attached` / `not attached`).

use super::target::{classify_driver, Backend, WriteError};
use crate::base::driver::flow;
use crate::base::driver::xdp::XdpMode;
use crate::base::driver::{Ethtool, SteeringSet};
use crate::base::records::{NO_RULE, XDP_ATTACHED, XDP_DETACHED};
use crate::base::Probe;
use crate::nic::live::xdp_link::{self, Detached};
use crate::nic::live::LiveEthtool;
use crate::nic::recorded::{DriverFile, Recorded, RecordedWriter};
use crate::plan::{Target, Typed, Value};

impl Backend {
    fn steering_set(&self) -> Box<dyn SteeringSet> {
        if self.root().is_live() {
            Box::new(LiveEthtool)
        } else {
            Box::new(RecordedWriter::new(self.root()))
        }
    }

    fn recorded(&self) -> anyhow::Result<Recorded> {
        match DriverFile::load(self.root())? {
            Some(file) => Ok(Recorded::from(file)),
            None => anyhow::bail!(
                "{} has no driver file (nettune/driver.json): its RSS table, ntuple rules and XDP \
                 programs are unknown",
                self.root().base().display()
            ),
        }
    }

    /// The current value of a steering target (see the module comment).
    pub(super) fn read_steering(&self, target: &Target) -> anyhow::Result<String> {
        match target {
            Target::RssIndirection { iface } => {
                let settings = if self.root().is_live() {
                    LiveEthtool.query(iface)
                } else {
                    self.recorded()?.query(iface)
                };
                match settings.rss_indirection {
                    Probe::Value(table) => Ok(flow::table_text(&table)),
                    missing => anyhow::bail!(
                        "cannot read the RSS indirection table of '{iface}': {}",
                        missing.missing_text().unwrap_or("unknown")
                    ),
                }
            }
            Target::NtupleRule { iface, location } => {
                let rule = if self.root().is_live() {
                    LiveEthtool.rule_at(iface, *location).map_err(|e| {
                        anyhow::anyhow!("cannot read ntuple rule {location} of '{iface}': {e}")
                    })?
                } else {
                    match self.recorded()?.query(iface).ntuple {
                        Probe::Value(table) => {
                            table.rules.into_iter().find(|r| r.location == *location)
                        }
                        missing => anyhow::bail!(
                            "cannot read the ntuple rules of '{iface}': {}",
                            missing.missing_text().unwrap_or("unknown")
                        ),
                    }
                };
                Ok(rule.map_or_else(|| NO_RULE.to_string(), |r| r.value_text()))
            }
            Target::XdpProgram { iface, id } => Ok(if self.attached_mode(iface, *id)?.is_some() {
                XDP_ATTACHED.to_string()
            } else {
                XDP_DETACHED.to_string()
            }),
            _ => anyhow::bail!("{target} is not a steering target"),
        }
    }

    /// The mode program `id` is attached to `iface` in, if it is.
    fn attached_mode(&self, iface: &str, id: u32) -> anyhow::Result<Option<XdpMode>> {
        let programs = if self.root().is_live() {
            match xdp_link::state(iface) {
                Probe::Value(state) => state.programs,
                // The interface is gone, and its programs with it.
                _ if nix::net::if_::if_nametoindex(iface).is_err() => Vec::new(),
                _ => anyhow::bail!("cannot read the XDP programs of '{iface}'"),
            }
        } else {
            match crate::base::driver::Netlink::xdp(&self.recorded()?, iface) {
                Probe::Value(state) => state.programs,
                _ => Vec::new(),
            }
        };
        Ok(programs.iter().find(|p| p.id == id).map(|p| p.mode))
    }

    /// Write a steering target's value (a planned value or an original).
    pub(super) fn write_steering(&self, target: &Target, value: &Value) -> Result<(), WriteError> {
        match (target, value.typed()) {
            (Target::RssIndirection { iface }, Typed::RssTable(table)) => self
                .steering_set()
                .set_indirection(iface, &self.as_written(iface, table.clone()))
                .map_err(|e| classify_driver(target, &e)),
            (Target::NtupleRule { iface, location }, Typed::Ntuple(rule)) => {
                let current = self
                    .read_steering(target)
                    .map_err(|e| WriteError::Failed(format!("{e:#}")))?;
                let set = self.steering_set();
                let Some(rule) = rule else {
                    if current == NO_RULE {
                        return Ok(());
                    }
                    return set
                        .delete_rule(iface, *location)
                        .map_err(|e| classify_driver(target, &e));
                };
                if current != NO_RULE && current != value.as_str().trim() {
                    return Err(WriteError::Failed(format!(
                        "ntuple location {location} of '{iface}' holds another rule ('{current}'); \
                         nettune never replaces a rule it did not write"
                    )));
                }
                set.insert_rule(iface, rule)
                    .map_err(|e| classify_driver(target, &e))
            }
            (Target::XdpProgram { iface, id }, Typed::Xdp(attached)) => {
                if *attached {
                    return Err(WriteError::Failed(
                        "an XDP program is attached only by the benchmark that loaded it"
                            .to_string(),
                    ));
                }
                if !self.root().is_live() {
                    return Err(WriteError::Failed(
                        "XDP programs live on a running kernel, not in a tree".to_string(),
                    ));
                }
                let Some(mode) = self
                    .attached_mode(iface, *id)
                    .map_err(|e| WriteError::Failed(format!("{e:#}")))?
                else {
                    return Ok(());
                };
                match xdp_link::detach_expected(iface, *id, mode) {
                    Ok(Detached::Removed | Detached::NotAttached) => Ok(()),
                    Err(e) => Err(WriteError::Failed(format!(
                        "cannot detach XDP program {id} from '{iface}': {e}"
                    ))),
                }
            }
            _ => Err(WriteError::Failed(format!(
                "'{value}' is not a value of {target}, a steering target"
            ))),
        }
    }

    /// The table to send: empty (the driver's default spread, which also
    /// tells the kernel the table is not the user's any more) when `table`
    /// is exactly the default for the interface's RX rings.
    fn as_written(&self, iface: &str, table: Vec<u32>) -> Vec<u32> {
        let settings = if self.root().is_live() {
            LiveEthtool.query(iface)
        } else {
            match self.recorded() {
                Ok(r) => r.query(iface),
                Err(_) => return table,
            }
        };
        match settings.rx_rings {
            Probe::Value(rings)
                if !table.is_empty() && table == flow::default_table(table.len() as u32, rings) =>
            {
                Vec::new()
            }
            _ => table,
        }
    }
}
