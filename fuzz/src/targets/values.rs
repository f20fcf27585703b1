//! Small value syntaxes that arrive from kernel files, captures, saved
//! plans and journals: CPU lists and masks, units, driver settings, ntuple
//! rules, indirection tables, NAPI values and plan targets. Where nettune
//! prints a value back, printing and parsing again must give the same.

use std::time::Duration;

use nettune::base::cpuset::{format_list, format_mask, parse_list, parse_list_within, parse_mask};
use nettune::base::driver::flow::{parse_table, table_text, FlowSpec, NtupleRule};
use nettune::base::driver::netdev::parse_napi_value;
use nettune::base::driver::setting::parse_flow_hash;
use nettune::base::driver::{DriverKey, DriverSetting, NapiKey};
use nettune::base::units;
use nettune::plan::target::Target;
use nettune::plan::Value;

use crate::common::{split, text};

/// CPU lists (`0-3,8`) and masks (`ff,00000000`), both ways.
pub fn cpuset(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(cpus) = parse_list(text) {
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        assert_eq!(parse_list(&format_list(&cpus)).ok(), Some(cpus.clone()));
        assert_eq!(parse_mask(&format_mask(&cpus)).ok(), Some(cpus));
    }
    if let Ok(cpus) = parse_list_within(text, 64) {
        assert!(cpus.iter().all(|&c| c < 64));
    }
    if let Ok(cpus) = parse_mask(text) {
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        assert_eq!(parse_mask(&format_mask(&cpus)).ok(), Some(cpus.clone()));
        assert_eq!(parse_list(&format_list(&cpus)).ok(), Some(cpus));
    }
}

/// Rates, sizes, counts and durations as flags and files give them.
pub fn units(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(bits) = units::parse_rate(text) {
        let _ = units::format_rate(bits);
        let _ = units::format_tc_rate(bits);
    }
    let _ = units::parse_rate_within(text, 1000, 1 << 40);
    let _ = units::parse_bytes_within(text, 1, 1 << 30).map(units::format_bytes);
    let _ = units::parse_count_within(text, 1, 1 << 20).map(units::format_count);
    for d in [
        units::parse_time(text).ok(),
        units::parse_duration(text).ok(),
        units::parse_duration_or_zero(text).ok(),
        units::parse_time_within(text, Duration::from_micros(1), Duration::from_secs(10)).ok(),
    ]
    .into_iter()
    .flatten()
    {
        let _ = units::format_time(d.as_secs_f64());
    }
}

/// A driver setting as a saved plan or journal holds it: `KEY=VALUE`.
pub fn driver_values(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let (key, value) = text.split_once('=').unwrap_or((text, ""));
    if let Some(parsed) = DriverKey::parse(key) {
        assert_eq!(parsed.to_string(), key, "printed back: {parsed:?}");
    }
    if let Ok(setting) = DriverSetting::parse(key, value) {
        let again = DriverSetting::parse(&setting.key().to_string(), &setting.value_text());
        assert_eq!(again.as_ref(), Ok(&setting), "printed back: {setting:?}");
        let _ = setting.ethtool_command("eth0");
    }
    if let Ok(hash) = parse_flow_hash(text) {
        let _ = nettune::base::driver::setting::flow_hash_text(&hash);
    }
    if let Ok(flow) = FlowSpec::parse(text) {
        let printed = flow.to_string();
        assert_eq!(FlowSpec::parse(&printed).ok(), Some(flow), "'{printed}'");
    }
    if let Ok(rule) = NtupleRule::parse_value(7, text) {
        let printed = rule.value_text();
        assert_eq!(
            NtupleRule::parse_value(7, &printed).ok(),
            Some(rule),
            "'{printed}'"
        );
    }
    if let Ok(table) = parse_table(text) {
        assert_eq!(parse_table(&table_text(&table)).ok(), Some(table));
    }
    for key in NapiKey::ALL {
        if let Ok(v) = parse_napi_value(key, text) {
            assert!(v <= key.max());
        }
    }
    let _ = NapiKey::parse(key);
}

/// What a saved plan or journal names as a target (`/proc/sys/...`,
/// `ethtool:eth0:rings.rx`, `napi:...`), then the target's other views.
pub fn plan_target(data: &[u8]) {
    let (name, value) = split(data, b'\n');
    let Some(name) = text(name) else { return };
    let Ok(target) = name.parse::<Target>() else {
        return;
    };
    let printed = target.to_string();
    assert_eq!(
        printed.parse::<Target>().ok().as_ref(),
        Some(&target),
        "'{printed}'"
    );
    let _ = target.path();
    let _ = target.short_name();
    let _ = target.iface();
    let _ = target.irq();
    let _ = target.sysctl_name();
    let _ = target.is_writable();
    if let Some(value) = text(value) {
        if let Ok(to) = Value::parse(&target, value) {
            assert_eq!(to.as_str(), value, "a value keeps its text");
            let change = nettune::plan::Change {
                target: target.clone(),
                from: String::new(),
                to,
                reason: String::new(),
                group: String::new(),
                origin: None,
            };
            let _ = nettune::plan::render::command(&change);
        }
    }
}
