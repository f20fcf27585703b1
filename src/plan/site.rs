//! Site profiles: a TOML file that `include`s a built-in profile (or
//! another site profile) and overrides or drops single values, as tuned's
//! profiles do with `include=`. Site policy lives in
//! /etc/nettune/profiles, profiles shipped with a distribution in
//! /usr/lib/nettune/profiles; a file in /etc overrides one of the same
//! name in /usr/lib. Every value a file sets passes the allow-list of
//! [`super::admit`] when the file is read: a site profile sets only what
//! a saved plan may set.
//!
//! ```toml
//! include = "pps"
//! description = "DNS front ends"
//! rps = "off"                              # leave RPS masks alone
//! irq.cpus = "2-15"                        # queue IRQs (and XPS, RPS) on these CPUs
//! sysctl."net.core.rmem_max" = 67108864    # override one value
//! sysctl."net.core.busy_poll" = "off"      # drop one value
//! driver."coalesce.rx-usecs" = 50          # a driver setting, every interface
//! driver."rings" = "off"                   # leave a group of them alone
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::admit::{admit_value, driver_groups, sysctl_rule, Limits, DRIVER_KEYS};
use super::profile::Profile;
pub use super::profile::{Origin, Part, Setting, SiteProfile};
use crate::base::cpuset::{parse_list, MAX_CPUS};
use crate::base::driver::{gro_as_one, DriverKey};
use crate::base::fsio;
use crate::base::text::excerpt;

/// The environment variable naming the profile directories (separated by
/// `:`, the first holding a name wins) instead of [`DEFAULT_DIRS`].
pub const PATH_ENV: &str = "NETTUNE_PROFILE_PATH";

/// Where site profiles are looked for, the first holding a name winning:
/// the site's own, then those a package ships.
pub const DEFAULT_DIRS: [&str; 2] = ["/etc/nettune/profiles", "/usr/lib/nettune/profiles"];

/// The largest profile file read (a profile is a few lines).
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// The longest include chain: a loop is caught before, this bounds depth.
const MAX_DEPTH: usize = 16;

/// Every built-in profile, in the order `nettune profiles` lists them.
pub const BUILT_IN: [Profile; 5] = [
    Profile::Pps,
    Profile::Latency,
    Profile::Throughput,
    Profile::Http,
    Profile::Baseline,
];

/// The built-in profile called `name`.
pub fn built_in(name: &str) -> Option<Profile> {
    BUILT_IN.iter().copied().find(|p| p.name() == name)
}

/// The directories searched: `$NETTUNE_PROFILE_PATH`, else the defaults.
pub fn dirs() -> Vec<PathBuf> {
    match std::env::var_os(PATH_ENV) {
        Some(path) => std::env::split_paths(&path)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        None => DEFAULT_DIRS.iter().map(PathBuf::from).collect(),
    }
}

/// Whether `name` may name a profile file (`NAME.toml`).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.')
}

/// A profile file found in a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub name: String,
    pub file: PathBuf,
    /// Files of the same name further down the search path, which this one
    /// hides.
    pub hides: Vec<PathBuf>,
}

/// Every site profile file in `dirs`, by name; the first directory holding
/// a name wins.
pub fn find_all(dirs: &[PathBuf]) -> Vec<Found> {
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<(String, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let path = e.path();
                let name = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".toml")?
                    .to_string();
                valid_name(&name).then_some((name, path))
            })
            .collect();
        names.sort();
        for (name, path) in names {
            match found.get_mut(&name) {
                Some(first) => first.hides.push(path),
                None => {
                    found.insert(
                        name.clone(),
                        Found {
                            name,
                            file: path,
                            hides: Vec::new(),
                        },
                    );
                }
            }
        }
    }
    found.into_values().collect()
}

/// The file of site profile `name` in `dirs`.
pub fn find(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    if !valid_name(name) {
        return None;
    }
    dirs.iter()
        .map(|d| d.join(format!("{name}.toml")))
        .find(|p| p.is_file())
}

/// The error for a profile name that is neither built-in nor a site file.
pub fn unknown(name: &str, dirs: &[PathBuf]) -> String {
    let site: Vec<String> = find_all(dirs).into_iter().map(|f| f.name).collect();
    let builtin: Vec<&str> = BUILT_IN.iter().map(|p| p.name()).collect();
    let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    format!(
        "unknown profile {}: the built-in ones are {}; site profiles ({}): {}; see `nettune profiles`",
        excerpt(name),
        builtin.join(", "),
        if searched.is_empty() {
            "no directory searched".to_string()
        } else {
            searched.join(", ")
        },
        if site.is_empty() {
            "none".to_string()
        } else {
            site.join(", ")
        }
    )
}

/// Read site profile `name` (`file`), following its includes by name in
/// `dirs`.
pub fn load(name: &str, file: &Path, dirs: &[PathBuf]) -> anyhow::Result<SiteProfile> {
    let mut seen = Vec::new();
    load_chain(name, file, dirs, &mut seen)
}

fn load_chain(
    name: &str,
    file: &Path,
    dirs: &[PathBuf],
    seen: &mut Vec<String>,
) -> anyhow::Result<SiteProfile> {
    seen.push(name.to_string());
    let shown = file.display().to_string();
    let text = fsio::read_text_bounded(file, MAX_FILE_BYTES, "a profile file")?;
    let parsed = parse(&text, &shown)?;
    let (include, at) = parsed.include.clone();
    let base = if let Some(profile) = built_in(&include) {
        SiteProfile {
            name: include.clone(),
            file: String::new(),
            base: profile,
            chain: vec![include.clone()],
            include: at.clone(),
            description: None,
            off: BTreeMap::new(),
            irq_cpus: None,
            sysctls: BTreeMap::new(),
            driver: BTreeMap::new(),
        }
    } else if seen.contains(&include) {
        anyhow::bail!(
            "{}:{}: include = {}: the profile includes itself ({} -> {include}); include a \
             built-in profile or another site profile",
            at.file,
            at.line,
            excerpt(&include),
            seen.join(" -> ")
        );
    } else if seen.len() >= MAX_DEPTH {
        anyhow::bail!(
            "{}:{}: include = {}: more than {MAX_DEPTH} profiles in the chain",
            at.file,
            at.line,
            excerpt(&include)
        );
    } else {
        match find(dirs, &include) {
            Some(next) => load_chain(&include, &next, dirs, seen)?,
            None => anyhow::bail!(
                "{}:{}: include: {}",
                at.file,
                at.line,
                unknown(&include, dirs)
            ),
        }
    };
    // This file's values win over those it includes.
    let mut chain = vec![name.to_string()];
    chain.extend(base.chain.iter().cloned());
    let mut off = base.off;
    off.extend(parsed.off);
    let mut sysctls = base.sysctls;
    sysctls.extend(parsed.sysctls);
    // A group this file names ("off" or "on") replaces what the files it
    // includes say of the group and of each setting in it.
    let mut driver = base.driver;
    for group in &parsed.driver_groups {
        let prefix = format!("{group}.");
        driver.retain(|name, _| name != group && !name.starts_with(&prefix));
    }
    driver.extend(parsed.driver);
    Ok(SiteProfile {
        name: name.to_string(),
        file: shown,
        base: base.base,
        chain,
        include: if base.file.is_empty() {
            at
        } else {
            base.include
        },
        description: parsed.description.or(base.description),
        off,
        irq_cpus: parsed.irq_cpus.or(base.irq_cpus),
        sysctls,
        driver,
    })
}

/// One file's own content, includes not followed.
#[derive(Debug)]
struct Parsed {
    include: (String, Origin),
    description: Option<String>,
    off: BTreeMap<Part, Origin>,
    irq_cpus: Option<(Vec<u32>, Origin)>,
    sysctls: BTreeMap<String, (Setting, Origin)>,
    driver: BTreeMap<String, (Setting, Origin)>,
    /// The driver groups the file names, "off" or "on".
    driver_groups: Vec<String>,
}

/// The keys a profile file may hold, for errors.
const KEYS: &str =
    "include, description, rps, rfs, xps, irq.cpus, irq.affinity, sysctl.\"NAME\", driver.\"NAME\"";

/// Parse one profile file's text; `file` names it in errors.
fn parse(text: &str, file: &str) -> anyhow::Result<Parsed> {
    let line_of = |span: Option<std::ops::Range<usize>>| -> usize {
        let at = span.map_or(0, |s| s.start).min(text.len());
        text.as_bytes()[..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    };
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let line = line_of(e.span());
        let msg = e.message().lines().next().unwrap_or("").trim().to_string();
        anyhow::anyhow!("{file}:{line}: not TOML: {msg}")
    })?;
    let origin = |item: &toml_edit::Item, key: &str| Origin {
        file: file.to_string(),
        line: line_of(item.span()),
        key: key.to_string(),
    };
    let bad = |o: &Origin, why: String| anyhow::anyhow!("{}:{}: {}: {why}", o.file, o.line, o.key);
    let mut include = None;
    let mut description = None;
    let mut off = BTreeMap::new();
    let mut irq_cpus = None;
    let mut sysctls = BTreeMap::new();
    let mut driver: BTreeMap<String, (Setting, Origin)> = BTreeMap::new();
    let mut groups_named = Vec::new();
    for (key, item) in doc.iter() {
        let at = origin(item, key);
        match key {
            "include" => match item.as_str() {
                Some(name) if !name.is_empty() => include = Some((name.to_string(), at)),
                _ => {
                    return Err(bad(
                        &at,
                        "give a profile name, such as include = \"pps\"".into(),
                    ))
                }
            },
            "description" => match item.as_str() {
                Some(text) if text.len() <= 200 && !text.chars().any(char::is_control) => {
                    description = Some(text.to_string())
                }
                _ => {
                    return Err(bad(
                        &at,
                        "give one line of text (200 characters at most)".into(),
                    ))
                }
            },
            "rps" | "rfs" | "xps" => {
                let part = match key {
                    "rps" => Part::Rps,
                    "rfs" => Part::Rfs,
                    _ => Part::Xps,
                };
                if on_off(item).map_err(|why| bad(&at, why))? {
                    off.remove(&part);
                } else {
                    off.insert(part, at);
                }
            }
            "irq" => {
                let Some(table) = item.as_table_like() else {
                    return Err(bad(
                        &at,
                        "write irq.cpus = \"LIST\" or irq.affinity = \"off\"".into(),
                    ));
                };
                for (sub, value) in table.iter() {
                    let at = origin(value, &format!("irq.{sub}"));
                    match sub {
                        "cpus" => {
                            let list = value.as_str().unwrap_or("");
                            match parse_list(list) {
                                Ok(cpus)
                                    if !cpus.is_empty() && cpus.iter().all(|&c| c < MAX_CPUS) =>
                                {
                                    irq_cpus = Some((cpus, at))
                                }
                                _ => {
                                    return Err(bad(
                                        &at,
                                        format!(
                                            "{} is not a CPU list (such as \"2-15\" or \"0-3,8\")",
                                            excerpt(&value_text(value))
                                        ),
                                    ))
                                }
                            }
                        }
                        "affinity" => {
                            if on_off(value).map_err(|why| bad(&at, why))? {
                                off.remove(&Part::Irq);
                            } else {
                                off.insert(Part::Irq, at);
                            }
                        }
                        other => {
                            return Err(bad(
                                &at,
                                format!(
                                    "unknown key {} under irq (it takes cpus and affinity)",
                                    excerpt(other)
                                ),
                            ))
                        }
                    }
                }
            }
            "sysctl" => {
                let Some(table) = item.as_table_like() else {
                    return Err(bad(
                        &at,
                        "write sysctl.\"net.core.rmem_max\" = VALUE".into(),
                    ));
                };
                for (name, value) in table.iter() {
                    let at = origin(value, &format!("sysctl.\"{}\"", shown_name(name)));
                    let setting = sysctl_setting(name, value).map_err(|why| bad(&at, why))?;
                    sysctls.insert(name.to_string(), (setting, at));
                }
            }
            "driver" => {
                let Some(table) = item.as_table_like() else {
                    return Err(bad(
                        &at,
                        "write driver.\"coalesce.rx-usecs\" = VALUE or driver.\"rings\" = \"off\""
                            .into(),
                    ));
                };
                for (name, value) in table.iter() {
                    let at = origin(value, &format!("driver.\"{}\"", shown_name(name)));
                    let setting = driver_setting(name, value).map_err(|why| bad(&at, why))?;
                    if driver_groups().contains(&name) {
                        groups_named.push(name.to_string());
                    }
                    let Some(setting) = setting else {
                        continue;
                    };
                    // GRO has two names, one setting: kept under the first,
                    // so that a file including this one overrides it by
                    // either name.
                    let name = gro_as_one(name);
                    if let Some((_, other)) = driver.get(&name) {
                        return Err(bad(
                            &at,
                            format!(
                                "GRO is given twice, here and as {} (line {}): keep one of its \
                                 two names",
                                other.key, other.line
                            ),
                        ));
                    }
                    driver.insert(name, (setting, at));
                }
            }
            other => {
                return Err(bad(
                    &at,
                    format!(
                        "unknown key {} (a profile file holds {KEYS})",
                        excerpt(other)
                    ),
                ))
            }
        }
    }
    let Some(include) = include else {
        anyhow::bail!(
            "{file}:1: include: missing; a site profile starts from a built-in or site profile: \
             include = \"pps\""
        );
    };
    Ok(Parsed {
        include,
        description,
        off,
        irq_cpus,
        sysctls,
        driver,
        driver_groups: groups_named,
    })
}

/// A key's name as the file wrote it, cut and escaped when it is odd.
fn shown_name(name: &str) -> String {
    if name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && name.len() <= 80
    {
        name.to_string()
    } else {
        excerpt(name)
    }
}

/// `"on"` (true) or `"off"` (false).
fn on_off(item: &toml_edit::Item) -> Result<bool, String> {
    match item.as_str() {
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        _ => Err(format!(
            "{} is neither \"on\" (as the profile plans it) nor \"off\" (leave it alone)",
            excerpt(&value_text(item))
        )),
    }
}

/// A value as the user wrote it, for errors.
fn value_text(item: &toml_edit::Item) -> String {
    match item.as_value() {
        Some(toml_edit::Value::String(s)) => s.value().to_string(),
        Some(toml_edit::Value::Integer(i)) => i.value().to_string(),
        Some(toml_edit::Value::Boolean(b)) => b.value().to_string(),
        Some(v) => v.type_name().to_string(),
        None => "a table".to_string(),
    }
}

/// A sysctl's value from a file, through the plan-file allow-list.
fn sysctl_setting(name: &str, item: &toml_edit::Item) -> Result<Setting, String> {
    if sysctl_rule(name).is_none() {
        return Err(
            "no nettune profile changes this sysctl, so no profile file may (the ones profiles \
             change: docs/profiles.md)"
                .to_string(),
        );
    }
    let text = match item.as_value() {
        Some(toml_edit::Value::Integer(i)) => i.value().to_string(),
        Some(toml_edit::Value::String(s)) if s.value() == "off" => return Ok(Setting::Off),
        Some(toml_edit::Value::String(s)) => s.value().to_string(),
        _ => {
            return Err(format!(
                "{} is not a value: give a number, a string (\"4096 131072 6291456\", \"bbr\") or \"off\"",
                excerpt(&value_text(item))
            ))
        }
    };
    let limits = Limits { cpus: MAX_CPUS };
    admit_value(&super::Target::sysctl(name), &text, &limits)
        .map_err(|refusal| refusal.why.clone())?;
    Ok(Setting::Value(text))
}

/// A driver setting's (or group's) value from a file, through the
/// plan-file allow-list. `"off"` leaves it alone; an on/off setting is
/// given `true` or `false` (or `"on"`), so that `"off"` keeps one meaning.
/// `None`: a group's `"on"`, which only undoes what included files say.
fn driver_setting(name: &str, item: &toml_edit::Item) -> Result<Option<Setting>, String> {
    let groups = driver_groups();
    let is_group = groups.contains(&name);
    if !is_group && !DRIVER_KEYS.contains(&name) {
        return Err(format!(
            "no nettune profile changes this driver setting, so no profile file may (the ones \
             profiles change: {}; or a group: {})",
            DRIVER_KEYS.join(", "),
            groups.join(", ")
        ));
    }
    let text = match item.as_value() {
        // `driver.coalesce.rx-usecs = 50` (unquoted) is a table in TOML.
        None => {
            return Err(format!(
                "quote the setting's name, which holds a dot: driver.\"{name}.NAME\" = VALUE"
            ))
        }
        Some(toml_edit::Value::String(s)) if s.value() == "off" => return Ok(Some(Setting::Off)),
        Some(toml_edit::Value::String(s)) if is_group && s.value() == "on" => return Ok(None),
        _ if is_group => {
            let example = DRIVER_KEYS
                .iter()
                .find(|k| k.split_once('.').is_some_and(|(g, _)| g == name))
                .unwrap_or(&name);
            return Err(format!(
                "{} is neither \"off\" nor \"on\": a group is only left alone (or planned \
                 again) as a whole; give a value to one setting of it, such as \
                 driver.\"{example}\"",
                excerpt(&value_text(item))
            ));
        }
        Some(toml_edit::Value::String(s)) => s.value().to_string(),
        // A hash is letters: `true` would read as the text "on".
        Some(_) if name.starts_with("rx-flow-hash.") => {
            return Err(format!(
                "{} is not a hash: give the letters of the fields to hash on, such as \"sdfn\" \
                 (m v t s d f n r), or \"off\"",
                excerpt(&value_text(item))
            ))
        }
        Some(toml_edit::Value::Integer(i)) => i.value().to_string(),
        Some(toml_edit::Value::Boolean(b)) => if *b.value() { "on" } else { "off" }.to_string(),
        _ => {
            return Err(format!(
                "{} is not a value: give a number, true or false, a hash (\"sdfn\") or \"off\"",
                excerpt(&value_text(item))
            ))
        }
    };
    let key = DriverKey::parse(name).ok_or_else(|| format!("'{name}' is not a driver setting"))?;
    let limits = Limits { cpus: MAX_CPUS };
    admit_value(&super::Target::driver("IFACE", key), &text, &limits).map_err(|refusal| {
        // An on/off setting takes true or false here: "off" leaves it alone.
        refusal
            .why
            .replace("is not on or off", "is not true or false")
    })?;
    Ok(Some(Setting::Value(text)))
}

/// What `nettune profiles` shows of one profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    pub name: String,
    /// `built-in` or `site`.
    pub kind: &'static str,
    /// The file (site), or `built into nettune`.
    pub origin: String,
    /// For a site profile, its chain down to the built-in one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub includes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Files of the same name this one hides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hides: Vec<String>,
    /// Why the profile cannot be used (a bad file, a name taken by a
    /// built-in profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every profile: the built-in ones, then each site file (read, so that a
/// bad one shows its error).
pub fn list(dirs: &[PathBuf]) -> Vec<Listed> {
    let mut out: Vec<Listed> = BUILT_IN
        .iter()
        .map(|p| Listed {
            name: p.name().to_string(),
            kind: "built-in",
            origin: "built into nettune".to_string(),
            includes: Vec::new(),
            description: Some(p.summary().to_string()),
            hides: Vec::new(),
            error: None,
        })
        .collect();
    for found in find_all(dirs) {
        let loaded = if built_in(&found.name).is_some() {
            Err(format!(
                "'{}' is a built-in profile's name, which wins: rename the file",
                found.name
            ))
        } else {
            load(&found.name, &found.file, dirs).map_err(|e| crate::error::message(&e))
        };
        let (includes, description, error) = match loaded {
            Ok(site) => (site.chain[1..].to_vec(), site.description, None),
            Err(e) => (Vec::new(), None, Some(e)),
        };
        out.push(Listed {
            name: found.name,
            kind: "site",
            origin: found.file.display().to_string(),
            includes,
            description,
            hides: found
                .hides
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            error,
        });
    }
    out
}
