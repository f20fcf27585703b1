//! Driver settings (ethtool) and the root qdisc of one interface.

use super::draft::Draft;
use super::profile::{Origin, PlanOptions, Profile, Setting, SiteProfile};
use super::target::Target;
use super::value::Value;
use crate::base::driver::setting::current_text;
use crate::base::driver::FlowHash;
use crate::base::driver::{ChannelKind, DriverKey, DriverSetting, GRO_NAMES};
use crate::base::units::format_tc_rate as format_rate;
use crate::base::Probe;
use crate::host::Interface;

/// fq at the root caps each flow at this share of the link when no
/// `--pace` is given: 8gbit on a 10G host (fasterdata.es.net, fq pacing).
const PACE_SHARE_PERCENT: u64 = 80;

pub(super) fn plan_driver(d: &mut Draft, iface: &Interface, opts: &PlanOptions) {
    let settings = &iface.driver_settings;
    match opts.profile {
        Profile::Pps => {
            for flow in ["udp4", "udp6"] {
                match settings.rx_flow_hash.get(flow) {
                    Some(Probe::Value(hash)) => {
                        if let Some(wider) = with_ports(hash) {
                            want(
                                d,
                                iface,
                                DriverSetting::FlowHash {
                                    flow_type: flow.to_string(),
                                    hash: wider,
                                },
                                &format!("{flow} hashes on addresses only: all flows between two hosts land on one queue; add the ports (Cloudflare 1M pps)"),
                            );
                        }
                    }
                    other => skip_missing(
                        d,
                        iface,
                        DriverKey::FlowHash(flow.to_string()),
                        other.cloned().unwrap_or_default().map(|_| String::new()),
                    ),
                }
            }
        }
        Profile::Latency => {
            want(
                d,
                iface,
                DriverSetting::AdaptiveRx(false),
                "low coalescing: adaptive moderation holds interrupts back under load (talawah.io)",
            );
            want(
                d,
                iface,
                DriverSetting::RxUsecs(0),
                "low coalescing: interrupt at once for each packet (talawah.io)",
            );
        }
        Profile::Throughput => {
            match &settings.rings {
                Probe::Value(r) => {
                    if r.rx < r.rx_max {
                        want(
                            d,
                            iface,
                            DriverSetting::RingRx(r.rx_max),
                            "rings to maximum: absorb bursts at 40/100G (fasterdata 100G tuning)",
                        );
                    }
                    if r.tx < r.tx_max {
                        want(
                            d,
                            iface,
                            DriverSetting::RingTx(r.tx_max),
                            "rings to maximum (fasterdata 100G tuning)",
                        );
                    }
                }
                missing => skip_missing(
                    d,
                    iface,
                    DriverKey::RingRx,
                    missing.clone().map(|_| String::new()),
                ),
            }
            want(
                d,
                iface,
                DriverSetting::AdaptiveRx(true),
                "adaptive coalescing on: fewer interrupts for bulk traffic (fasterdata 100G tuning)",
            );
            want(
                d,
                iface,
                DriverSetting::AdaptiveTx(true),
                "adaptive coalescing on (fasterdata 100G tuning)",
            );
            gro_on(d, iface);
            root_fq(d, iface, opts);
        }
        Profile::Http | Profile::Baseline | Profile::Custom => {}
    }
}

/// The hash with both port fields added; `None` when ports are in already
/// (or the hash is not over addresses at all: leave such a choice alone).
fn with_ports(hash: &FlowHash) -> Option<FlowHash> {
    let has = |f: &str| hash.fields.iter().any(|x| x == f);
    if !hash.ips_only() || !has("ip_src") || !has("ip_dst") || has("discard") {
        return None;
    }
    let mut fields = hash.fields.clone();
    fields.push("l4_src_port".to_string());
    fields.push("l4_dst_port".to_string());
    Some(FlowHash { fields })
}

fn target(iface: &Interface, key: DriverKey) -> Target {
    Target::driver(&iface.name, key)
}

/// Plan a driver setting from its current value in the model, or say why not.
fn want(d: &mut Draft, iface: &Interface, setting: DriverSetting, reason: &str) {
    let key = setting.key();
    match current_text(&key, &iface.driver_settings) {
        Probe::Value(current) => d.want(
            &iface.name,
            target(iface, key),
            &current,
            Value::driver(setting),
            reason.to_string(),
        ),
        missing => skip_missing(d, iface, key, missing),
    }
}

fn skip_missing(d: &mut Draft, iface: &Interface, key: DriverKey, probe: Probe<String>) {
    let driver = iface.driver.as_deref().unwrap_or("the driver");
    let reason = match probe {
        Probe::Missing(crate::base::Missing::NotSupported) => {
            format!("{driver} does not support this setting on {}", iface.name)
        }
        _ => "unknown: no driver data (a capture without nettune/driver.json, or the query failed)"
            .to_string(),
    };
    d.skip(&iface.name, &target(iface, key), &reason);
}

/// GRO on where the driver lets it be switched (part of the kernel path's
/// tuning in talawah.io's HTTP showdown; it merges a bulk flow's segments).
fn gro_on(d: &mut Draft, iface: &Interface) {
    let Some(features) = iface.driver_settings.features.value() else {
        skip_missing(
            d,
            iface,
            DriverKey::Feature("rx-gro".to_string()),
            iface
                .driver_settings
                .features
                .clone()
                .map(|_| String::new()),
        );
        return;
    };
    let Some((name, gro)) = GRO_NAMES
        .iter()
        .find_map(|n| features.get(*n).map(|f| (*n, f)))
    else {
        return;
    };
    if gro.active {
        return;
    }
    if !gro.changeable {
        d.skip(
            &iface.name,
            &target(iface, DriverKey::Feature(name.to_string())),
            "GRO is off and fixed by the driver",
        );
        return;
    }
    want(
        d,
        iface,
        DriverSetting::Feature {
            name: name.to_string(),
            on: true,
        },
        "GRO on: merge a bulk flow's segments before the stack (talawah.io; fasterdata)",
    );
}

/// `http`: as many queues as network CPUs (up to the driver's maximum).
/// Returns whether the queue count changes.
fn channels_change(d: &mut Draft, iface: &Interface, n_cpus: usize) -> bool {
    let channels = match &iface.driver_settings.channels {
        Probe::Value(c) => *c,
        missing => {
            skip_missing(
                d,
                iface,
                DriverKey::Channels(ChannelKind::Combined),
                missing.clone().map(|_| String::new()),
            );
            return false;
        }
    };
    if channels.combined == 0 {
        d.skip(
            &iface.name,
            &target(iface, DriverKey::Channels(ChannelKind::Combined)),
            "separate RX and TX channels: nettune only sets combined queue counts",
        );
        return false;
    }
    let kind = ChannelKind::Combined;
    let wanted = (n_cpus as u32).min(kind.max(&channels)).max(1);
    if wanted == kind.count(&channels) {
        return false;
    }
    want(
        d,
        iface,
        DriverSetting::Channels { kind, count: wanted },
        &format!(
            "perfect locality: one queue per network CPU ({n_cpus} CPUs, driver maximum {}) (talawah.io HTTP tuning)",
            kind.max(&channels)
        ),
    );
    true
}

/// `throughput`: fq at the root, pacing each flow (fasterdata.es.net).
fn root_fq(d: &mut Draft, iface: &Interface, opts: &PlanOptions) {
    let group = iface.name.as_str();
    let target = Target::root_qdisc(group);
    let current = match &iface.root_qdisc {
        Probe::Value(q) => q,
        Probe::Missing(_) => {
            d.skip(group, &target, "the root qdisc is unknown (no driver data)");
            return;
        }
    };
    if current.kind == "fq" {
        return;
    }
    if current.handle != "0:" {
        d.skip(
            group,
            &target,
            &format!(
                "root qdisc {} {} was set up by hand: nettune does not replace it (a rollback could not rebuild its classes and filters)",
                current.kind, current.handle
            ),
        );
        return;
    }
    let streams = u64::from(opts.streams.unwrap_or(1));
    let (rate, why) = match (opts.pace_bits, iface.speed_mbps) {
        (Some(pace), _) => (Some(pace), format!("--pace {}", format_rate(pace))),
        (None, Some(mbps)) => {
            // A capture may claim any speed: saturate rather than overflow.
            let bits = mbps.saturating_mul(1_000_000);
            let rate = bits.saturating_mul(PACE_SHARE_PERCENT) / 100 / streams.max(1);
            (
                Some(rate),
                format!(
                    "{PACE_SHARE_PERCENT}% of the {} link / {streams} stream(s)",
                    format_rate(bits)
                ),
            )
        }
        (None, None) => (None, "link speed unknown: no per-flow cap".to_string()),
    };
    // fq takes the cap as 32-bit bytes per second (~34 Gbit/s at most).
    let (to, why) = match rate {
        Some(bits) if bits / 8 <= u64::from(u32::MAX - 1) => (Value::qdisc("fq", Some(bits)), why),
        Some(bits) => (
            Value::qdisc("fq", None),
            format!(
                "{why} = {}, above fq's 32-bit maxrate: no per-flow cap",
                format_rate(bits)
            ),
        ),
        None => (Value::qdisc("fq", None), why),
    };
    d.want(
        group,
        target,
        &current.kind,
        to,
        format!("fq paces each flow ({why}); pacing gains 2-4x on 50-80 ms paths (fasterdata)"),
    );
}

/// What site profile `site` says of driver setting `key`: its own entry
/// (under either name of GRO), else its group's.
pub(super) fn site_entry<'s>(
    site: &'s SiteProfile,
    key: &DriverKey,
) -> Option<&'s (Setting, Origin)> {
    site.driver_choice(&key.to_string())
}

/// Whether `key` is GRO, by either name.
fn is_gro(key: &DriverKey) -> bool {
    matches!(key, DriverKey::Feature(name) if GRO_NAMES.contains(&name.as_str()))
}

/// `key` as this interface's driver names it: GRO by the first name its
/// features show, the one [`gro_on`] plans (a host showing both names has
/// one setting).
fn as_driver_names(iface: &Interface, key: DriverKey) -> DriverKey {
    if !is_gro(&key) {
        return key;
    }
    match iface.driver_settings.features.value() {
        Some(features) => GRO_NAMES
            .iter()
            .find(|n| features.contains_key(**n))
            .map_or(key, |n| DriverKey::Feature(n.to_string())),
        None => key,
    }
}

/// Forget what the plan holds for `key` on `iface`: GRO under both names.
fn forget_setting(d: &mut Draft, iface: &Interface, key: &DriverKey) {
    if is_gro(key) {
        for name in GRO_NAMES {
            d.forget(&target(iface, DriverKey::Feature(name.to_string())));
        }
    } else {
        d.forget(&target(iface, key.clone()));
    }
}

/// Why a site value cannot be given to this driver, if it cannot: above
/// the driver's maximum, or a feature the driver fixes.
fn out_of_reach(iface: &Interface, setting: &DriverSetting) -> Option<String> {
    let settings = &iface.driver_settings;
    let driver = iface.driver.as_deref().unwrap_or("the driver");
    let above = |max: u32| format!("above {driver}'s maximum on {} ({max})", iface.name);
    match setting {
        DriverSetting::RingRx(n) => match settings.rings.value() {
            Some(r) if *n > r.rx_max => Some(above(r.rx_max)),
            _ => None,
        },
        DriverSetting::RingTx(n) => match settings.rings.value() {
            Some(r) if *n > r.tx_max => Some(above(r.tx_max)),
            _ => None,
        },
        DriverSetting::Channels { kind, count } => match settings.channels.value() {
            Some(c) if c.combined == 0 => Some(
                "separate RX and TX channels: nettune only sets combined queue counts".to_string(),
            ),
            Some(c) if *count > kind.max(c) => Some(above(kind.max(c))),
            _ => None,
        },
        DriverSetting::Feature { name, .. } => match settings.features.value() {
            Some(features) => features
                .get(name)
                .filter(|f| !f.changeable)
                .map(|_| format!("{name} is fixed by {driver} on {}", iface.name)),
            None => None,
        },
        _ => None,
    }
}

/// Plan a site profile's value of driver setting `key` on `iface`, in
/// place of whatever the profile planned for it. Returns whether a change
/// is planned.
fn site_value(
    d: &mut Draft,
    iface: &Interface,
    site: &SiteProfile,
    key: DriverKey,
    value: &str,
    at: &Origin,
) -> bool {
    let key = as_driver_names(iface, key);
    let target = target(iface, key.clone());
    forget_setting(d, iface, &key);
    // The file's value passed the allow-list when it was read.
    let Ok(setting) = key.setting(value) else {
        return false;
    };
    if let Some(why) = out_of_reach(iface, &setting) {
        d.skip(
            &iface.name,
            &target,
            &format!("{why}: {value} ({}:{}) is left unset", at.file, at.line),
        );
        return false;
    }
    let before = d.changes.len();
    want(
        d,
        iface,
        setting,
        &format!("set by site profile {}", site.set_by(at)),
    );
    d.changes.len() > before
}

/// A site profile's driver values on `iface`: each value in place of the
/// profile's (also a setting the profile leaves alone), each setting or
/// group the file turns "off" left alone with its line. The queue count
/// (`channels.combined`) is planned with the queues ([`site_channels`]).
pub(super) fn site_values(d: &mut Draft, iface: &Interface, site: &SiteProfile) {
    for (name, (setting, at)) in &site.driver {
        let (Setting::Value(value), Some(key)) = (setting, DriverKey::parse(name)) else {
            continue;
        };
        if !matches!(key, DriverKey::Channels(_)) {
            site_value(d, iface, site, key, value, at);
        }
    }
    let mine = |t: &Target| match t {
        Target::Driver { iface: i, key } if *i == iface.name => match site_entry(site, key) {
            Some((Setting::Off, at)) => Some(at.clone()),
            _ => None,
        },
        _ => None,
    };
    let mut left: Vec<(Target, Origin)> = d
        .changes
        .iter()
        .map(|c| &c.target)
        .chain(d.skipped.iter().map(|s| &s.target))
        .filter_map(|t| mine(t).map(|at| (t.clone(), at)))
        .collect();
    // A single setting turned off is listed even when the profile plans
    // nothing for it here, as a sysctl is.
    for (name, (setting, at)) in &site.driver {
        if let (Setting::Off, Some(key)) = (setting, DriverKey::parse(name)) {
            let t = target(iface, as_driver_names(iface, key));
            if !left.iter().any(|(l, _)| *l == t) {
                left.push((t, at.clone()));
            }
        }
    }
    for (t, at) in left {
        d.forget(&t);
        d.skip(
            &iface.name,
            &t,
            &format!("left alone: {} = \"off\" ({}:{})", at.key, at.file, at.line),
        );
    }
    for (usecs, adaptive) in COALESCE_PAIRS {
        hold_under_adaptive(d, iface, site, usecs, adaptive);
    }
    adaptive_off_first(d, iface);
}

/// Each fixed interrupt coalescing time and the adaptive moderation that
/// overrides it.
const COALESCE_PAIRS: [(DriverKey, DriverKey); 2] = [
    (DriverKey::RxUsecs, DriverKey::AdaptiveRx),
    (DriverKey::TxUsecs, DriverKey::AdaptiveTx),
];

/// Whether adaptive moderation `adaptive` is on once the plan is applied:
/// planned on, or on now and not planned off.
fn on_after_plan(d: &Draft, iface: &Interface, adaptive: &DriverKey) -> bool {
    let t = target(iface, adaptive.clone());
    match d.changes.iter().find(|c| c.target == t) {
        Some(c) => c.to.as_str() == "on",
        None => matches!(
            current_text(adaptive, &iface.driver_settings),
            Probe::Value(ref v) if v == "on"
        ),
    }
}

/// A coalescing time (`usecs`) planned while adaptive moderation stays on
/// is left unset, with the line to add: drivers refuse it then (ice:
/// "interrupt throttling cannot be changed if adaptive-rx is enabled") or
/// override it at once. A site file's value, or the profile's own where
/// the file leaves adaptive moderation alone.
fn hold_under_adaptive(
    d: &mut Draft,
    iface: &Interface,
    site: &SiteProfile,
    usecs: DriverKey,
    adaptive: DriverKey,
) {
    let t = target(iface, usecs.clone());
    let Some(planned) = d.changes.iter().find(|c| c.target == t) else {
        return;
    };
    if !on_after_plan(d, iface, &adaptive) {
        return;
    }
    let value = match site.driver.get(&usecs.to_string()) {
        Some((Setting::Value(value), at)) => format!("{value} ({}:{})", at.file, at.line),
        _ => format!("{}'s {}", site.base.name(), planned.to),
    };
    d.forget(&t);
    let (usecs_name, adaptive_name) = (usecs.to_string(), adaptive.to_string());
    let short = |full: &str| full.trim_start_matches("coalesce.").to_string();
    // Whether this plan turns it on (an included profile) or it is on now.
    let adaptive_target = target(iface, adaptive.clone());
    let state = if d.changes.iter().any(|c| c.target == adaptive_target) {
        "is turned on by this plan"
    } else {
        "stays on"
    };
    // Where the file already names the setting, point at that line rather
    // than ask for a second key (a TOML error).
    let fix = match site.driver.get(&adaptive_name) {
        Some((_, at)) => format!(
            "set driver.\"{adaptive_name}\" = false ({}:{}) to set it",
            at.file, at.line
        ),
        None => format!("add driver.\"{adaptive_name}\" = false to set it"),
    };
    d.skip(
        &iface.name,
        &t,
        &format!(
            "{} {state}, and while it is on the driver chooses {} itself (ice refuses a fixed \
             value): {value} is left unset; {fix}",
            short(&adaptive_name),
            short(&usecs_name),
        ),
    );
}

/// Turning adaptive moderation off is written before a fixed coalescing
/// time on the same interface, which the driver refuses while adaptive
/// moderation is on: a site value of one moves it after the other.
fn adaptive_off_first(d: &mut Draft, iface: &Interface) {
    for (usecs, adaptive) in COALESCE_PAIRS {
        let (usecs, adaptive) = (target(iface, usecs), target(iface, adaptive));
        let at = |t: &Target| d.changes.iter().position(|c| c.target == *t);
        if let (Some(u), Some(a)) = (at(&usecs), at(&adaptive)) {
            if a > u && d.changes[a].to.as_str() == "off" {
                let change = d.changes.remove(a);
                d.changes.insert(u, change);
            }
        }
    }
}

/// The queue count of `iface` (`channels.combined`): a site profile's
/// value, else `http`'s (one queue per network CPU on a physical NIC).
/// Returns whether the count changes (the per-queue settings then wait
/// for the new queues). A site's "off" still lets `http` plan its count,
/// for [`site_values`] to list it as left alone.
pub(super) fn plan_channels(
    d: &mut Draft,
    iface: &Interface,
    opts: &PlanOptions,
    n_cpus: usize,
) -> bool {
    let key = DriverKey::Channels(ChannelKind::Combined);
    let site = opts.site.as_deref();
    let http = opts.profile == Profile::Http && iface.physical;
    match site.and_then(|s| site_entry(s, &key).map(|e| (s, e))) {
        Some((site, (Setting::Value(value), at))) => site_value(d, iface, site, key, value, at),
        Some((_, (Setting::Off, _))) => {
            if http {
                channels_change(d, iface, n_cpus);
            }
            false
        }
        None => http && channels_change(d, iface, n_cpus),
    }
}
