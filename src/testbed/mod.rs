//! The testbed: two network namespaces joined by a multi-queue veth pair,
//! so that a benchmark (and an experiment) runs end to end on any host and
//! in CI without touching the host's own interfaces. The server side of a
//! benchmark runs in one namespace, the client in the other, and tuning is
//! applied inside the server's.
//!
//! Names carry a fixed prefix ([`PREFIX`]), so `testbed down --all` finds
//! every testbed left behind (after a kill -9) and nothing else. Addresses
//! come from 198.18.0.0/15, the range RFC 2544 reserves for benchmarking
//! (never routed); each testbed has its own namespaces, so all can use the
//! same two addresses.

pub mod delay_line;
pub mod host_values;
pub mod netns;
pub mod scenario;

use std::net::Ipv4Addr;
use std::os::fd::AsFd as _;

use anyhow::Context as _;
use serde::Serialize;

use crate::nic::live::link::{self, VethEnd};

/// Every testbed's name starts with this.
pub const PREFIX: &str = "ntb-";
/// The server namespace's address and the client's, in 198.18.0.0/15.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const PREFIX_LEN: u8 = 30;
/// The veth end in each namespace.
pub const SERVER_IFACE: &str = "tb-server";
pub const CLIENT_IFACE: &str = "tb-client";
/// The most queues per veth end (the kernel's limit for veth is 4096; more
/// than this helps nothing on any host nettune tunes).
pub const MAX_QUEUES: u32 = 256;

/// One side of a testbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Side {
    pub netns: String,
    pub iface: String,
    pub address: Ipv4Addr,
    pub prefix_len: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Testbed {
    pub name: String,
    /// RX and TX queues of each veth end (known when made by this process).
    pub queues: Option<u32>,
    /// Where servers run and tuning is applied.
    pub server: Side,
    /// Where load generators run.
    pub client: Side,
    /// The scenario it was made with (known when made by this process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<&'static str>,
    /// Host-wide values its scenario changed (restored by `testbed down`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_values: Vec<host_values::HostValue>,
    /// The delay line between its sides, when its scenario has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_line: Option<delay_line::Running>,
}

impl Testbed {
    /// The testbed called `name` (the prefix is added when missing).
    pub fn named(name: &str) -> anyhow::Result<Testbed> {
        let bare = name.strip_prefix(PREFIX).unwrap_or(name);
        let valid = !bare.is_empty()
            && bare.len() <= 40
            && bare
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            anyhow::bail!(
                "testbed name '{name}' is not usable: give 1 to 40 letters, digits, '-' or '_'"
            );
        }
        let name = format!("{PREFIX}{bare}");
        let side = |role: &str, iface: &str, address| Side {
            netns: format!("{name}-{role}"),
            iface: iface.to_string(),
            address,
            prefix_len: PREFIX_LEN,
        };
        Ok(Testbed {
            server: side("server", SERVER_IFACE, SERVER_ADDR),
            client: side("client", CLIENT_IFACE, CLIENT_ADDR),
            name,
            queues: None,
            scenario: None,
            host_values: Vec::new(),
            delay_line: None,
        })
    }

    /// A name of this process's own: `ntb-PID`.
    pub fn default_name() -> String {
        format!("{PREFIX}{}", std::process::id())
    }

    /// Where a scenario's commands run on it.
    pub fn at(&self) -> scenario::Where<'_> {
        scenario::Where {
            server_netns: &self.server.netns,
            server_address: self.server.address,
            client_netns: &self.client.netns,
            server_iface: &self.server.iface,
            client_iface: &self.client.iface,
        }
    }

    /// Where its delay line runs.
    pub fn sides(&self) -> delay_line::Sides<'_> {
        delay_line::Sides {
            testbed: &self.name,
            server_netns: &self.server.netns,
            server_addr: self.server.address,
            client_netns: &self.client.netns,
            client_addr: self.client.address,
        }
    }

    /// Whether any of its namespaces, host-wide values its scenario
    /// changed, or its delay line, exist.
    pub fn exists(&self) -> bool {
        netns::exists(&self.server.netns)
            || netns::exists(&self.client.netns)
            || !host_values::changed(&self.name).is_empty()
            || delay_line::recorded(&self.name).is_some()
    }

    /// An existing, whole testbed (for `experiment run --testbed NAME`).
    pub fn check(&self) -> anyhow::Result<()> {
        for side in [&self.server, &self.client] {
            if !netns::exists(&side.netns) {
                anyhow::bail!(
                    "testbed '{}' does not exist or is incomplete (network namespace {} is \
                     missing); make it with `nettune testbed up --name {}`",
                    self.name,
                    side.netns,
                    self.name
                );
            }
        }
        Ok(())
    }
}

fn require_root(verb: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("nettune testbed {verb} makes network namespaces and needs root (sudo)");
    }
    Ok(())
}

/// Make testbed `tb` with `queues` RX/TX queues on each veth end. Refused
/// (nothing made) when its name is in use; on any failure whatever was
/// made is removed again.
pub fn up(tb: &Testbed, queues: u32) -> anyhow::Result<Testbed> {
    up_with(tb, queues, None)
}

/// [`up`], then scenario `scenario` made real on it (its queue count
/// replaces `queues`). On any failure whatever was made is removed and
/// every host-wide value put back.
pub fn up_with(
    tb: &Testbed,
    queues: u32,
    scenario: Option<&'static scenario::Scenario>,
) -> anyhow::Result<Testbed> {
    let queues = scenario.map_or(queues, |s| s.queues);
    if !(1..=MAX_QUEUES).contains(&queues) {
        anyhow::bail!("--queues '{queues}' is out of range: give 1 to {MAX_QUEUES}");
    }
    require_root("up")?;
    if !host_values::changed(&tb.name).is_empty() {
        anyhow::bail!(
            "testbed '{}' still has host-wide values to put back ({}/{}.json); run `nettune \
             testbed down {}` first; nothing was changed",
            tb.name,
            host_values::DIR,
            tb.name,
            tb.name
        );
    }
    if let Some(running) = delay_line::recorded(&tb.name) {
        anyhow::bail!(
            "testbed '{}' is in use: its delay line runs (PID {}); remove it with `nettune \
             testbed down {}` or choose another --name; nothing was changed",
            tb.name,
            running.pid,
            tb.name
        );
    }
    if let Some(side) = [&tb.server, &tb.client]
        .into_iter()
        .find(|s| netns::exists(&s.netns))
    {
        anyhow::bail!(
            "testbed '{}' is in use: network namespace {} exists; remove it with `nettune \
             testbed down {}` or choose another --name; nothing was changed",
            tb.name,
            side.netns,
            tb.name
        );
    }
    let mut host_values = Vec::new();
    let mut line = None;
    let made = build(tb, queues).and_then(|()| match scenario {
        Some(s) => {
            scenario::build(s, tb.at())?;
            host_values = host_values::set(&tb.name, s.host)?;
            if let Some(wanted) = s.delay_line {
                line = Some(delay_line::start(&tb.sides(), wanted)?);
            }
            Ok(())
        }
        None => Ok(()),
    });
    if let Err(e) = made {
        let _ = down(tb);
        return Err(e.context(format!(
            "cannot make testbed '{}' (whatever was made is removed)",
            tb.name
        )));
    }
    let mut tb = tb.clone();
    tb.queues = Some(queues);
    tb.scenario = scenario.map(|s| s.name);
    tb.host_values = host_values;
    tb.delay_line = line;
    Ok(tb)
}

fn build(tb: &Testbed, queues: u32) -> anyhow::Result<()> {
    netns::create(&tb.server.netns)?;
    netns::create(&tb.client.netns)?;
    let open = |name: &str| {
        std::fs::File::open(netns::path(name))
            .with_context(|| format!("cannot open network namespace {name}"))
    };
    let (server_ns, client_ns) = (open(&tb.server.netns)?, open(&tb.client.netns)?);
    link::add_veth(
        &VethEnd {
            name: &tb.server.iface,
            netns: server_ns.as_fd(),
            queues,
        },
        &VethEnd {
            name: &tb.client.iface,
            netns: client_ns.as_fd(),
            queues,
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "cannot create the veth pair {}/{}: {}",
            tb.server.iface,
            tb.client.iface,
            e.message
        )
    })?;
    for side in [&tb.server, &tb.client] {
        crate::bench::netns::within(Some(&side.netns), || {
            let why = |what: String| {
                move |e: crate::base::driver::SetError| {
                    anyhow::anyhow!("{what} in network namespace {}: {}", side.netns, e.message)
                }
            };
            link::set_up("lo").map_err(why("cannot bring lo up".to_string()))?;
            link::set_up(&side.iface).map_err(why(format!("cannot bring {} up", side.iface)))?;
            link::add_address(&side.iface, side.address, side.prefix_len).map_err(why(format!(
                "cannot add {}/{} to {}",
                side.address, side.prefix_len, side.iface
            )))
        })?;
    }
    Ok(())
}

/// Remove testbed `tb`: its delay line's forwarder (first: it holds the
/// namespaces), both namespaces, with the veth pair, and put back the
/// host-wide values its scenario changed. Removing one that does not exist
/// is not an error (it was half made, or removed).
pub fn down(tb: &Testbed) -> anyhow::Result<Vec<host_values::Restored>> {
    let mut errors = Vec::new();
    if let Err(e) = delay_line::stop(&tb.name) {
        errors.push(crate::error::message(&e));
    }
    let restored = host_values::restore(&tb.name).unwrap_or_else(|e| {
        errors.push(crate::error::message(&e));
        Vec::new()
    });
    for side in [&tb.server, &tb.client] {
        if let Err(e) = netns::delete(&side.netns) {
            errors.push(crate::error::message(&e));
        }
    }
    if !errors.is_empty() {
        anyhow::bail!("cannot remove testbed '{}': {}", tb.name, errors.join("; "));
    }
    Ok(restored)
}

/// Remove `tb` as a command asked for it: an error when it does not exist.
pub fn down_existing(tb: &Testbed) -> anyhow::Result<Vec<host_values::Restored>> {
    require_root("down")?;
    if !tb.exists() {
        let others = all();
        anyhow::bail!(
            "testbed '{}' does not exist (testbeds present: {})",
            tb.name,
            if others.is_empty() {
                "none".to_string()
            } else {
                others
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    down(tb)
}

/// Every testbed present: namespaces named `ntb-NAME-server` or
/// `ntb-NAME-client`.
pub fn all() -> Vec<Testbed> {
    let mut names: Vec<String> = netns::list()
        .into_iter()
        .filter(|n| n.starts_with(PREFIX))
        .filter_map(|n| {
            n.strip_suffix("-server")
                .or_else(|| n.strip_suffix("-client"))
                .map(str::to_string)
        })
        .collect();
    // A testbed whose namespaces are gone may still have host-wide values
    // to put back.
    if let Ok(dir) = std::fs::read_dir(host_values::DIR) {
        names.extend(dir.filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_string)
        }));
    }
    // Or a delay line whose namespaces were removed by other means.
    names.extend(delay_line::testbeds());
    names.sort();
    names.dedup();
    names
        .iter()
        .filter_map(|n| Testbed::named(n).ok())
        .collect()
}

/// Remove every testbed present (`testbed down --all`); the ones removed.
pub fn down_all() -> anyhow::Result<Vec<(Testbed, Vec<host_values::Restored>)>> {
    require_root("down")?;
    let mut removed = Vec::new();
    for tb in all() {
        let restored = down(&tb)?;
        removed.push((tb, restored));
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_the_prefix_once_and_bad_names_are_refused() {
        let tb = Testbed::named("a").expect("a");
        assert_eq!(tb.name, "ntb-a");
        assert_eq!(tb.server.netns, "ntb-a-server");
        assert_eq!(tb.client.netns, "ntb-a-client");
        assert_eq!(Testbed::named("ntb-a").expect("prefixed"), tb);
        for bad in ["", "ntb-", "a/b", "a b", &"x".repeat(41)] {
            assert!(Testbed::named(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn addresses_are_in_the_benchmarking_range() {
        for addr in [SERVER_ADDR, CLIENT_ADDR] {
            let o = addr.octets();
            assert!(o[0] == 198 && (o[1] & 0xfe) == 18, "{addr}");
        }
    }
}
