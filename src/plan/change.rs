//! A plan as data: the changes it makes, the settings it leaves alone and
//! the host-wide values only the host can set. Made by [`super::plan`]
//! (and `steer`, and saved-plan loading), printed by [`super::render`],
//! written by `apply`.
//!
//! Values are typed ([`Value`]); a plan read from a file holds them as
//! text (`Plan<String>`) until [`super::saved::admit`] types them.

use serde::{Deserialize, Serialize};

use super::irqbalance::IrqbalanceWarning;
use super::made_for::MadeFor;
use super::profile::Profile;
use super::target::Target;
use super::value::Value;

/// One setting to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change<V = Value> {
    /// The setting, typed; in JSON its text: the kernel path, or
    /// `ethtool:IFACE:KEY` / `qdisc:IFACE:root`.
    pub target: Target,
    /// The current value as text.
    pub from: String,
    /// The value that will be written; in JSON its exact text.
    pub to: V,
    pub reason: String,
    /// The interface name, or `kernel`.
    pub group: String,
    /// With a site profile: the file and line that set the value, or the
    /// built-in profile it comes from and the line that included it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

impl<V> Change<V> {
    /// The same change with its value given as `to` (typed once admitted).
    pub fn with_value<W>(self, to: W) -> Change<W> {
        Change {
            target: self.target,
            from: self.from,
            to,
            reason: self.reason,
            group: self.group,
            origin: self.origin,
        }
    }
}

/// A setting the profile would change but leaves alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub target: Target,
    pub reason: String,
    pub group: String,
}

/// A host-wide value the profile wants that a network namespace cannot
/// set (it exists in the host's namespace only, or is a read-only mirror of
/// the host's value): it is set on the host, with [`Plan::host_command`].
/// Each is also in `skipped`, whose reason names the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostWide<V = Value> {
    pub target: Target,
    /// The host's value, when it can be seen from here.
    pub from: Option<String>,
    /// The value the profile wants.
    pub to: V,
    pub reason: String,
}

impl<V> HostWide<V> {
    /// The same value given as `to` (typed once admitted).
    pub fn with_value<W>(self, to: W) -> HostWide<W> {
        HostWide {
            target: self.target,
            from: self.from,
            to,
            reason: self.reason,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan<V = Value> {
    pub profile: Profile,
    /// The site profile laid over `profile`: its name, file and includes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<SiteRef>,
    /// The CPUs network work may use (after `--cpus` and the defaults).
    pub cpus: Vec<u32>,
    /// The interfaces planned for.
    pub interfaces: Vec<String>,
    pub changes: Vec<Change<V>>,
    pub skipped: Vec<Skipped>,
    /// Set when irqbalance runs and the plan pins IRQs: it will move them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqbalance: Option<IrqbalanceWarning>,
    /// The host and namespace (or tree) the plan was made for, so that a
    /// saved plan is never applied elsewhere (`apply --plan FILE`). Set by
    /// whoever reads the host; `None` in a plan computed from a model alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_for: Option<MadeFor>,
    /// Inside a network namespace: the host-wide values the profile wants
    /// that only the host can set.
    #[serde(default)]
    pub host_wide: Vec<HostWide<V>>,
    /// The shell command that sets every `host_wide` value, run on the host.
    #[serde(default)]
    pub host_command: Option<String>,
}

impl Plan {
    /// A plan of exactly `changes`, made by no profile (experiment search's
    /// candidates): nothing skipped, no host-wide part, made for no host.
    pub fn custom(cpus: Vec<u32>, interfaces: Vec<String>, changes: Vec<Change>) -> Plan {
        Plan {
            profile: Profile::Custom,
            site: None,
            cpus,
            interfaces,
            changes,
            skipped: Vec::new(),
            irqbalance: None,
            made_for: None,
            host_wide: Vec::new(),
            host_command: None,
        }
    }
}

/// A site profile as a plan names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteRef {
    pub name: String,
    pub file: String,
    /// The profiles it includes, down to the built-in one.
    pub includes: Vec<String>,
}

/// The group of host-wide settings.
pub const KERNEL_GROUP: &str = "kernel";
