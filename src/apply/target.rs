//! Reading and writing one planned target: a kernel file through the
//! `Root`, a driver setting through `EthtoolSet`, the root qdisc through
//! `QdiscSet`, a NAPI setting through `NapiSet` (by interface and RX
//! queue). Live for `/`, the tree's files and driver file for `--root`.
//! A planned value is written as it was typed when the plan was made
//! ([`Value`]); reading gives the kernel's text, and only a value read
//! back to be restored is parsed here.
//!
//! A write the kernel refuses for what it is (a managed IRQ's affinity, a
//! qdisc kind the kernel lacks, a driver without the operation) changes
//! nothing: it is reported as [`WriteError::Refused`] and apply records it
//! as skipped. Any other error is a failure that undoes the apply.

use crate::base::driver::setting::current_text;
use crate::base::driver::{Ethtool, EthtoolSet, Netlink, Qdisc, QdiscSet, QdiscSpec, SetError};
use crate::base::{Probe, Root};
use crate::nic::live::{LiveEthtool, LiveNetlink};
use crate::nic::recorded::{DriverFile, Recorded, RecordedWriter};
use crate::plan::compare::same_value;
use crate::plan::{Target, Typed, Value};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The kernel will not do this; nothing changed.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
}

/// Where changes go: the live kernel, or a tree and its driver file.
pub struct Backend {
    root: Root,
}

impl Backend {
    pub fn new(root: Root) -> Backend {
        Backend { root }
    }

    /// The tree (or `/`) it reads and writes.
    pub fn root(&self) -> &Root {
        &self.root
    }

    fn ethtool(&self) -> anyhow::Result<Box<dyn Ethtool>> {
        if self.root.is_live() {
            return Ok(Box::new(LiveEthtool));
        }
        Ok(match DriverFile::load(&self.root)? {
            Some(file) => Box::new(Recorded::from(file)),
            None => Box::new(crate::base::driver::NoDriverData),
        })
    }

    fn netlink(&self) -> anyhow::Result<Box<dyn Netlink>> {
        if self.root.is_live() {
            return Ok(Box::new(LiveNetlink));
        }
        Ok(match DriverFile::load(&self.root)? {
            Some(file) => Box::new(Recorded::from(file)),
            None => Box::new(crate::base::driver::NoDriverData),
        })
    }

    fn ethtool_set(&self) -> Box<dyn EthtoolSet> {
        if self.root.is_live() {
            Box::new(LiveEthtool)
        } else {
            Box::new(RecordedWriter::new(&self.root))
        }
    }

    fn qdisc_set(&self) -> Box<dyn QdiscSet> {
        if self.root.is_live() {
            Box::new(LiveNetlink)
        } else {
            Box::new(RecordedWriter::new(&self.root))
        }
    }

    /// The current value exactly as read: a file's whole text (newline
    /// included, so that writing it back restores the same bytes); a driver
    /// setting's value text; a qdisc as `KIND HANDLE` (`mq 0:`).
    pub fn read(&self, target: &Target) -> anyhow::Result<String> {
        if let Some(path) = target.path() {
            return Ok(self.root.read(&path)?);
        }
        match target {
            Target::Driver { iface, key } => {
                match current_text(key, &self.ethtool()?.query(iface)) {
                    Probe::Value(v) => Ok(v),
                    missing => anyhow::bail!(
                        "cannot read {key} of '{iface}': {}",
                        missing.missing_text().unwrap_or("unknown")
                    ),
                }
            }
            Target::RootQdisc { iface } => match self.netlink()?.root_qdisc(iface) {
                Probe::Value(q) => Ok(format!("{} {}", q.kind, q.handle)),
                _ => anyhow::bail!("cannot read the root qdisc of '{iface}'"),
            },
            Target::Napi { iface, queue, key } => {
                let state = crate::nic::netdev_source(&self.root)?.state(iface);
                let napi = state.napi_of_rx(*queue).map_err(|why| {
                    anyhow::anyhow!("cannot read {key}: {}", why.reason(iface, *queue))
                })?;
                match key.value_in(napi.napi) {
                    Some(v) => Ok(v.to_string()),
                    None => anyhow::bail!(
                        "cannot read {key} of rx queue {queue} of '{iface}': this kernel does not \
                         report it (Linux 6.13+)"
                    ),
                }
            }
            Target::RssIndirection { .. }
            | Target::NtupleRule { .. }
            | Target::XdpProgram { .. } => self.read_steering(target),
            _ => anyhow::bail!("{target} is a scope, not a setting: nothing to read"),
        }
    }

    /// Write a planned value (`to` of a change).
    pub fn write(&self, target: &Target, value: &Value) -> Result<(), WriteError> {
        if let Some(path) = target.path() {
            // As `echo VALUE > FILE` writes it.
            return self.write_file(&path, &format!("{value}\n"));
        }
        match (target, value.typed()) {
            (Target::Driver { iface, .. }, Typed::Driver(setting)) => self
                .ethtool_set()
                .set(iface, setting)
                .map_err(|e| classify_driver(target, &e)),
            (Target::RootQdisc { iface }, Typed::Qdisc(spec)) => self
                .qdisc_set()
                .replace_root(iface, spec)
                .map_err(|e| classify_qdisc(&spec.kind, &e)),
            (Target::Napi { iface, queue, key }, Typed::Number(number)) => {
                crate::nic::napi_setter(&self.root)
                    .set_napi(iface, *queue, *key, *number)
                    .map_err(|e| classify_napi(target, &e))
            }
            (
                Target::RssIndirection { .. }
                | Target::NtupleRule { .. }
                | Target::XdpProgram { .. },
                _,
            ) => self.write_steering(target, value),
            (Target::Queues { .. } | Target::Cpufreq | Target::Interfaces, _) => {
                Err(WriteError::Failed(format!(
                    "{target} is a scope, not a setting: nothing to write"
                )))
            }
            _ => Err(WriteError::Failed(format!(
                "'{value}' is not a value of {target}"
            ))),
        }
    }

    /// Put back a value read by [`Backend::read`].
    pub fn write_original(&self, target: &Target, original: &str) -> Result<(), WriteError> {
        if let Some(path) = target.path() {
            return self.write_file(&path, original);
        }
        match target {
            Target::RootQdisc { iface } => {
                let mut words = original.split_whitespace();
                let kind = words.next().unwrap_or_default().to_string();
                let handle = words.next().unwrap_or("0:").to_string();
                let set = self.qdisc_set();
                let result = if handle == "0:" {
                    set.reset_root(iface, &Qdisc { kind, handle })
                } else {
                    set.replace_root(
                        iface,
                        &QdiscSpec {
                            kind,
                            maxrate_bytes: None,
                        },
                    )
                };
                result.map_err(|e| WriteError::Failed(e.to_string()))
            }
            _ => {
                let value = Value::parse(target, original.trim()).map_err(WriteError::Failed)?;
                self.write(target, &value)
            }
        }
    }

    fn write_file(&self, path: &str, text: &str) -> Result<(), WriteError> {
        self.root.write(path, text).map_err(|e| {
            let errno = match &e {
                crate::error::KernelError::Write { source, .. } => source.raw_os_error(),
                _ => None,
            };
            classify_file(path, errno, &e.to_string())
        })
    }

    /// Read a target back and compare it with what was written (a planned
    /// value, or an original's text).
    pub fn check(&self, target: &Target, value: &str) -> Result<(), WriteError> {
        let back = self
            .read(target)
            .map_err(|e| WriteError::Failed(format!("{e:#}")))?;
        if same_value(target, &back, value) {
            Ok(())
        } else {
            Err(WriteError::Failed(format!(
                "wrote '{}' but it reads back '{}'",
                value.trim(),
                back.trim()
            )))
        }
    }
}

fn classify_file(path: &str, errno: Option<i32>, message: &str) -> WriteError {
    let errno = errno.unwrap_or(0);
    if path.starts_with("/proc/irq/") && matches!(errno, libc::EIO | libc::EPERM) {
        return WriteError::Refused(format!(
            "the kernel does not let this IRQ's affinity be set (a managed IRQ): {message}"
        ));
    }
    if path.starts_with("/proc/sys/")
        && matches!(
            errno,
            libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT
        )
    {
        return WriteError::Refused(format!(
            "the kernel refuses this sysctl here (read-only, or the value is not allowed or not built in): {message}"
        ));
    }
    if path.ends_with("/scaling_governor") && errno == libc::EINVAL {
        return WriteError::Refused(format!("this CPU has no such governor: {message}"));
    }
    WriteError::Failed(message.to_string())
}

/// The kernel-internal ENOTSUPP some drivers let through.
const ENOTSUPP: i32 = 524;

pub(super) fn classify_driver(target: &Target, e: &SetError) -> WriteError {
    if matches!(e.errno, libc::EOPNOTSUPP | ENOTSUPP) {
        let what = match target {
            Target::Driver { iface, key } => format!("{key} on '{iface}'"),
            Target::RssIndirection { iface } => format!("the RSS indirection table of '{iface}'"),
            Target::NtupleRule { iface, .. } => format!("ntuple rules on '{iface}'"),
            _ => "this setting".to_string(),
        };
        return WriteError::Refused(format!("the driver does not support changing {what}: {e}"));
    }
    WriteError::Failed(e.to_string())
}

/// napi-set refused for what the kernel is (no napi-set, a setting it does
/// not have): nothing changed. A queue without a NAPI is a failure: plan
/// saw one, so the device changed since.
fn classify_napi(target: &Target, e: &SetError) -> WriteError {
    if matches!(e.errno, libc::EOPNOTSUPP | ENOTSUPP) {
        return WriteError::Refused(format!("the kernel does not support {target}: {e}"));
    }
    WriteError::Failed(e.to_string())
}

fn classify_qdisc(kind: &str, e: &SetError) -> WriteError {
    if matches!(e.errno, libc::ENOENT | libc::EOPNOTSUPP) {
        return WriteError::Refused(format!(
            "the kernel lacks the '{kind}' qdisc: {e}; build or load sch_{kind} to use it"
        ));
    }
    WriteError::Failed(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qdisc_text_becomes_a_spec() {
        assert_eq!(
            QdiscSpec::parse("fq maxrate 8gbit"),
            Ok(QdiscSpec {
                kind: "fq".to_string(),
                maxrate_bytes: Some(1_000_000_000)
            })
        );
        assert!(QdiscSpec::parse("fq maxrate 100gbit").is_err());
        assert!(QdiscSpec::parse("fq limit 3").is_err());
        assert!(QdiscSpec::parse("fq; rm -rf /").is_err());
        assert!(QdiscSpec::parse("fq\nx").is_err());
    }

    #[test]
    fn refusals_are_told_from_failures() {
        let managed = classify_file("/proc/irq/24/smp_affinity_list", Some(libc::EIO), "EIO");
        assert!(matches!(managed, WriteError::Refused(_)));
        let dir = classify_file(
            "/proc/irq/24/smp_affinity_list",
            Some(libc::EISDIR),
            "EISDIR",
        );
        assert!(matches!(dir, WriteError::Failed(_)));
        let fq = classify_qdisc("fq", &SetError::from_errno(libc::ENOENT));
        assert!(fq.to_string().contains("sch_fq"), "{fq}");
    }
}
