//! A recorded series of snapshots, for `monitor --root DIR`:
//! `nettune capture --samples N --interval S DIR` writes it, [`Series`]
//! reads it back.
//!
//! Layout: DIR is an ordinary capture (the first snapshot, complete, so
//! `inspect` and `doctor` work on it), and each later snapshot is a tree
//! of its own under `DIR/nettune/samples/NNNN/` holding exactly the files
//! (and `nettune/driver.json` answers) the sampler read for it. The list
//! is `DIR/nettune/series.json` (docs/monitor.md):
//!
//! ```json
//! {"schema_version": 1, "interval_secs": 1.0, "settings_every_secs": 10.0,
//!  "samples": [{"dir": ".", "elapsed_secs": 0.0, "unix_ms": 1795570000000},
//!              {"dir": "nettune/samples/0001", "elapsed_secs": 1.0002, "unix_ms": ...}]}
//! ```
//!
//! A replay drives the same [`Sampler`] with each snapshot's tree and
//! recorded time, and the period the capture used for re-reading the
//! settings, so it reads the settings where the capture recorded them.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::base::fsio::{self, FileError};
use crate::base::stop::Stop;
use crate::base::Root;
use crate::gather::capture::{copy_recorded, prepare_destination, write_info, CaptureSummary};
use crate::host::{Inputs, Selection};
use crate::nic::live::{LiveEthtool, LiveNetdev, LiveNetlink};
use crate::nic::recorded::Recorder;

use super::sample::Sample;
use super::sampler::{unix_ms_now, Sampler, Stamp};

/// Where the list of snapshots lives inside a capture.
pub const SERIES_FILE: &str = "nettune/series.json";
/// Where the snapshots after the first live inside a capture.
pub const SAMPLES_DIR: &str = "nettune/samples";
/// Bumped when a field changes meaning or is removed.
pub const SERIES_VERSION: u32 = 1;

/// The most snapshots one capture takes.
pub const MAX_SAMPLES: u32 = 100_000;

/// `DIR/nettune/series.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesFile {
    pub schema_version: u32,
    /// Seconds asked for between snapshots.
    pub interval_secs: f64,
    /// How often the capture's sampler re-read the settings.
    pub settings_every_secs: f64,
    /// The network namespace captured, if any.
    #[serde(default)]
    pub netns: Option<String>,
    pub samples: Vec<SeriesEntry>,
}

/// One snapshot of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesEntry {
    /// Its tree, relative to the capture (`.` for the first).
    pub dir: String,
    /// When it was read, seconds since the first (monotonic clock).
    pub elapsed_secs: f64,
    /// When it was read, ms since the Unix epoch.
    pub unix_ms: u64,
}

/// A recorded series, ready to replay.
#[derive(Debug)]
pub struct Series {
    base: PathBuf,
    pub file: SeriesFile,
}

impl Series {
    /// The series recorded in `dir`. A capture of one snapshot, or a
    /// series of fewer than two, is an error saying how to record one.
    pub fn load(dir: &Path) -> anyhow::Result<Series> {
        // The same checks and messages as every --root.
        Root::at(dir)?;
        let path = dir.join(SERIES_FILE);
        let text = match fsio::read_text_bounded(&path, fsio::RECORD_LIMIT, "a nettune series") {
            Ok(text) => text,
            Err(e) if e.not_found() => anyhow::bail!(
                "'{}' holds one snapshot (it has no {SERIES_FILE}); monitor needs a series of \
                 two or more: record one with `nettune capture --samples 10 --interval 1 NEWDIR`",
                dir.display()
            ),
            Err(FileError::Io { source, .. }) => {
                return Err(source).with_context(|| format!("cannot read {}", path.display()))
            }
            Err(refused) => {
                anyhow::bail!("{refused}; record it again with `nettune capture --samples`")
            }
        };
        let file: SeriesFile = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a nettune series: {e}; record it again with `nettune capture --samples`",
                path.display()
            )
        })?;
        if file.schema_version != SERIES_VERSION {
            anyhow::bail!(
                "{} has schema_version '{}', this nettune reads {SERIES_VERSION}; record the \
                 series again with this nettune",
                path.display(),
                file.schema_version
            );
        }
        if file.samples.len() < 2 {
            anyhow::bail!(
                "{} lists {} snapshot(s); monitor needs two or more: record with \
                 `nettune capture --samples N` (N at least 2)",
                path.display(),
                file.samples.len()
            );
        }
        for pair in file.samples.windows(2) {
            if pair[1].elapsed_secs <= pair[0].elapsed_secs {
                anyhow::bail!(
                    "{}: snapshot '{}' is not later than '{}' (elapsed_secs {} then {})",
                    path.display(),
                    pair[1].dir,
                    pair[0].dir,
                    pair[0].elapsed_secs,
                    pair[1].elapsed_secs
                );
            }
        }
        for entry in &file.samples {
            let inside = Path::new(&entry.dir)
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
            if !inside {
                anyhow::bail!(
                    "{}: snapshot directory '{}' is not inside the capture",
                    path.display(),
                    entry.dir
                );
            }
        }
        Ok(Series {
            base: dir.to_path_buf(),
            file,
        })
    }

    /// The number of snapshots.
    pub fn len(&self) -> usize {
        self.file.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.samples.is_empty()
    }

    /// A sampler that re-reads the settings where the capture did.
    pub fn sampler(&self, selection: Selection) -> Sampler {
        Sampler::new(selection).settings_every(self.file.settings_every_secs)
    }

    /// Read snapshot `index` with `sampler`.
    pub fn sample(&self, sampler: &mut Sampler, index: usize) -> anyhow::Result<Sample> {
        let entry = self
            .file
            .samples
            .get(index)
            .ok_or_else(|| anyhow::anyhow!("the series has no snapshot {index}"))?;
        let dir = self.base.join(&entry.dir);
        let root = Root::at(&dir).with_context(|| {
            format!(
                "snapshot {index} of {}",
                self.base.join(SERIES_FILE).display()
            )
        })?;
        let (ethtool, netlink) = crate::nic::sources(&root)?;
        let netdev = crate::nic::netdev_source(&root)?;
        let src = Inputs {
            root: &root,
            ethtool: ethtool.as_ref(),
            netlink: netlink.as_ref(),
            netdev: netdev.as_ref(),
            netns: self.file.netns.clone(),
        };
        let mut sample = sampler.sample(
            &src,
            Stamp {
                elapsed_secs: entry.elapsed_secs,
                unix_ms: entry.unix_ms,
            },
        )?;
        // Where it came from, as the user named it: the capture.
        sample.source.root = self.base.display().to_string();
        Ok(sample)
    }
}

/// How a series capture goes, for the caller's progress line.
pub trait CaptureProgress {
    /// Snapshot `done` of `total` is written.
    fn taken(&mut self, done: usize, total: usize);
}

impl<F: FnMut(usize, usize)> CaptureProgress for F {
    fn taken(&mut self, done: usize, total: usize) {
        self(done, total)
    }
}

/// Record `samples` snapshots `interval` apart (each an interval after the
/// previous one was read) into `dest` (new or empty):
/// the first as a complete capture, the others as the files each sample
/// read. Stopping early (`stop`) keeps the snapshots taken so far, listed
/// in the series file, which is rewritten after every snapshot so that the
/// capture is whole at any moment.
pub fn capture_series(
    dest: &Path,
    netns: Option<String>,
    samples: u32,
    interval: Duration,
    stop: &Stop,
    progress: &mut dyn CaptureProgress,
) -> anyhow::Result<CaptureSummary> {
    prepare_destination(dest)?;
    let mut sampler = Sampler::new(Selection {
        all: true,
        iface: None,
    });
    let mut file = SeriesFile {
        schema_version: SERIES_VERSION,
        interval_secs: interval.as_secs_f64(),
        settings_every_secs: sampler.settings_every_secs(),
        netns: netns.clone(),
        samples: Vec::new(),
    };
    let start = Instant::now();
    let total = samples as usize;
    let mut files = 0;
    let mut interfaces = Vec::new();
    let mut last = start;
    for k in 0..total {
        // Each snapshot an interval after the one before: copying the
        // first (the whole capture) takes longer than an interval may.
        if k > 0 && stop.sleep_until(last + interval) {
            break;
        }
        last = Instant::now();
        let dir = if k == 0 {
            ".".to_string()
        } else {
            format!("{SAMPLES_DIR}/{k:04}")
        };
        let tree = dest.join(&dir);
        let root = Root::live_recording();
        let recorder = Recorder::new(&LiveEthtool, &LiveNetlink, &LiveNetdev);
        let src = Inputs {
            root: &root,
            ethtool: &recorder,
            netlink: &recorder,
            netdev: &recorder,
            netns: netns.clone(),
        };
        let sample = sampler.sample(&src, Stamp::since(start))?;
        files += copy_recorded(&tree, &root)?;
        recorder.into_file().write(&tree)?;
        if k == 0 {
            let kernel = sampler.host().and_then(|h| h.kernel.clone());
            write_info(dest, kernel, netns.clone())?;
            interfaces = sample.interfaces.iter().map(|i| i.name.clone()).collect();
        }
        file.samples.push(SeriesEntry {
            dir,
            elapsed_secs: sample.elapsed_secs,
            unix_ms: if sample.unix_ms == 0 {
                unix_ms_now()
            } else {
                sample.unix_ms
            },
        });
        write_series(dest, &file)?;
        progress.taken(k + 1, total);
    }
    Ok(CaptureSummary {
        dir: dest.to_path_buf(),
        files,
        interfaces,
        samples: file.samples.len(),
    })
}

/// Write the series file whole or not at all (a temp file renamed).
fn write_series(dest: &Path, file: &SeriesFile) -> anyhow::Result<()> {
    let path = dest.join(SERIES_FILE);
    let tmp = dest.join(format!("{SERIES_FILE}.tmp"));
    let text = serde_json::to_string_pretty(file)? + "\n";
    fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}
