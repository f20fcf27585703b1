//! `nettune plan` arguments, shared with `apply` ([`TuneArgs`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::apply::Backend;
use crate::base::cpuset::parse_list;
use crate::error::Status;
use crate::host::{self, Host, Selection};
use crate::plan::admit::{Limits, Scope};
use crate::plan::saved::{self, MadeFor};

use super::host_args::HostArgs;
use crate::base::units::{parse_rate_within, parse_time_within};
use crate::plan::{render, site, Plan, PlanOptions, Profile};

/// The path bandwidth a user may give (`--bandwidth` of plan, apply and
/// doctor): 1 Mbit/s to 10 Tbit/s.
pub const BANDWIDTH_RANGE: (u64, u64) = (1_000_000, 10_000_000_000_000);
/// `--pace`: fq's maxrate is 32-bit bytes per second (about 34.3 Gbit/s).
pub const PACE_RANGE: (u64, u64) = (1_000_000, 34_000_000_000);
/// `--rtt`: a loopback path to a geostationary satellite hop, and then some.
pub const RTT_RANGE: (Duration, Duration) = (Duration::from_micros(1), Duration::from_secs(10));
/// `--streams`.
pub const MAX_STREAMS: u32 = 1024;

/// `--bandwidth` where it is parsed as it is typed (doctor, experiment
/// search): a rate within [`BANDWIDTH_RANGE`], bits per second.
pub fn bandwidth_arg(text: &str) -> Result<u64, String> {
    let (lo, hi) = BANDWIDTH_RANGE;
    parse_rate_within(text, lo, hi).map_err(|e| format!("{e:#}"))
}

/// `--rtt` where it is parsed as it is typed: a time within [`RTT_RANGE`].
pub fn rtt_arg(text: &str) -> Result<Duration, String> {
    parse_time_within(text, RTT_RANGE.0, RTT_RANGE.1).map_err(|e| format!("{e:#}"))
}

/// What to tune and for what: shared by `plan` and `apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// The profile: a built-in one (pps, latency, throughput, http,
    /// baseline) or a site profile from /etc/nettune/profiles or
    /// /usr/lib/nettune/profiles (`nettune profiles` lists them; what each
    /// sets, and why: docs/profiles.md).
    #[arg(long, value_name = "NAME", value_parser = ProfileName, required_unless_present_any = ["plan_file", "profile_file"])]
    pub profile: Option<String>,
    /// A site profile file (TOML) to use instead of a profile by name; its
    /// includes are looked up by name as for --profile.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["profile", "plan_file"])]
    pub profile_file: Option<PathBuf>,
    /// A saved plan instead of a profile (`nettune plan --json > FILE`,
    /// `nettune experiment search --out FILE`): refused when it was made
    /// for another host or namespace, when a value it changes no longer
    /// holds what it held when the plan was made, or when it changes what
    /// no profile could (another sysctl, a value of the wrong kind; with
    /// --netns anything the namespace does not own: docs/apply.md).
    #[arg(long = "plan", value_name = "FILE", conflicts_with_all = ["profile", "cpus", "bandwidth", "rtt", "pace", "streams", "ifaces"])]
    pub plan_file: Option<PathBuf>,
    /// An interface to tune; repeat for several. Default: every physical
    /// interface that is up; inside a network namespace (--netns, a
    /// container) every interface that is up but lo, veths included.
    #[arg(long = "iface", value_name = "NAME")]
    pub ifaces: Vec<String>,
    /// The CPUs network work may use (`0-7,16-23`). Default: every online
    /// CPU except isolated and nohz_full ones.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// throughput: the path's bandwidth for buffer sizes (`10gbit`, `2.5G`:
    /// bits per second; 1mbit to 10tbit). Default: the fastest selected link.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub bandwidth: Option<String>,
    /// throughput: the path's round-trip time (`100ms`, `0.2s`; 1us to 10s).
    /// Default: 100ms.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub rtt: Option<String>,
    /// throughput: fq's per-flow pacing cap (`2gbit`; 1mbit to 34gbit, fq's
    /// limit). Default: 80% of the link speed / --streams.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub pace: Option<String>,
    /// throughput: parallel streams sharing the path (1 to 1024). Default: 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_STREAMS as i64))]
    pub streams: Option<u32>,
    #[command(flatten)]
    pub target: HostArgs,
}

impl TuneArgs {
    /// Check what the user typed and turn it into plan options.
    pub fn options(&self) -> anyhow::Result<PlanOptions> {
        let site = self.site_profile()?;
        let profile = match (&site, self.profile.as_deref()) {
            (Some(site), _) => site.base,
            (None, Some(name)) => match site::built_in(name) {
                Some(p) => p,
                None => anyhow::bail!("{}", site::unknown(name, &site::dirs())),
            },
            (None, None) => anyhow::bail!("give --profile NAME (or --plan FILE)"),
        };
        let sized = [
            ("--bandwidth", self.bandwidth.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--pace", self.pace.is_some()),
            ("--streams", self.streams.is_some()),
        ];
        if profile != Profile::Throughput {
            if let Some((flag, _)) = sized.iter().find(|(_, given)| *given) {
                anyhow::bail!(
                    "{flag} sizes the throughput profile only; drop it or use --profile throughput"
                );
            }
        }
        let rate = |flag: &str, v: &Option<String>, (lo, hi): (u64, u64)| {
            v.as_deref()
                .map(|t| parse_rate_within(t, lo, hi).map_err(|e| anyhow::anyhow!("{flag}: {e:#}")))
                .transpose()
        };
        let cpus = match &self.cpus {
            Some(text) => Some(parse_list(text).map_err(|e| {
                anyhow::anyhow!("--cpus '{text}': {e}; write a CPU list such as 0-3,8")
            })?),
            None => None,
        };
        Ok(PlanOptions {
            profile,
            ifaces: self.ifaces.clone(),
            cpus,
            bandwidth_bits: rate("--bandwidth", &self.bandwidth, BANDWIDTH_RANGE)?,
            rtt_us: self
                .rtt
                .as_deref()
                .map(|t| {
                    parse_time_within(t, RTT_RANGE.0, RTT_RANGE.1)
                        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
                        .map_err(|e| anyhow::anyhow!("--rtt: {e:#}"))
                })
                .transpose()?,
            pace_bits: rate("--pace", &self.pace, PACE_RANGE)?,
            streams: self.streams,
            site: site.map(Box::new),
        })
    }

    /// The site profile named by --profile or given by --profile-file,
    /// read with its includes; `None` for a built-in profile.
    fn site_profile(&self) -> anyhow::Result<Option<site::SiteProfile>> {
        let dirs = site::dirs();
        if let Some(file) = &self.profile_file {
            let name = file
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|n| site::valid_name(n))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--profile-file '{}': name the file NAME.toml, NAME of letters, digits, \
                         '-', '_' and '.'",
                        file.display()
                    )
                })?;
            return site::load(name, file, &dirs).map(Some);
        }
        let Some(name) = self.profile.as_deref() else {
            return Ok(None);
        };
        if site::built_in(name).is_some() {
            return Ok(None);
        }
        match site::find(&dirs, name) {
            Some(file) => site::load(name, &file, &dirs).map(Some),
            None => Ok(None),
        }
    }

    /// Read the host model (every interface, `lo` included).
    pub fn read_host(&self) -> anyhow::Result<Host> {
        let selection = Selection {
            all: true,
            iface: None,
        };
        crate::gather::read_target(
            self.target.root.as_deref(),
            self.target.netns.as_deref(),
            &selection,
        )
    }

    pub fn place(&self) -> String {
        let root = self.target.root.as_ref().map(|p| p.display().to_string());
        render::place(root.as_deref(), self.target.netns.as_deref())
    }
}

/// A profile name: any text, resolved when the command runs (a site
/// profile may be added at any time); the built-in names are offered to
/// shell completion and shown in the man page.
#[derive(Debug, Clone, Copy)]
pub struct ProfileName;

impl clap::builder::TypedValueParser for ProfileName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::NonEmptyStringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(site::BUILT_IN.iter().map(|p| {
            clap::builder::PossibleValue::new(p.name()).help(p.summary())
        })))
    }
}

/// The `plan`/`apply` options that give `opts` again: `--profile pps
/// --iface eth0 --cpus 0-3`, for hints that repeat an apply.
pub fn option_flags(opts: &PlanOptions) -> String {
    use crate::base::cpuset::format_list;
    use crate::base::units::format_tc_rate;
    let mut flags = format!("--profile {}", opts.name());
    for iface in &opts.ifaces {
        flags.push_str(&format!(" --iface {iface}"));
    }
    if let Some(cpus) = &opts.cpus {
        flags.push_str(&format!(" --cpus {}", format_list(cpus)));
    }
    if let Some(bits) = opts.bandwidth_bits {
        flags.push_str(&format!(" --bandwidth {}", format_tc_rate(bits)));
    }
    if let Some(us) = opts.rtt_us {
        flags.push_str(&format!(" --rtt {us}us"));
    }
    if let Some(bits) = opts.pace_bits {
        flags.push_str(&format!(" --pace {}", format_tc_rate(bits)));
    }
    if let Some(n) = opts.streams {
        flags.push_str(&format!(" --streams {n}"));
    }
    flags
}

/// How `plan` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A diff grouped by interface and kernel.
    #[default]
    Text,
    /// `{"changes": [...], "skipped": [...]}`.
    Json,
    /// An equivalent shell script (echo, sysctl, ethtool, tc).
    Sh,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub tune: TuneArgs,
    /// Print the plan as JSON (same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// text, json or sh. Default: text.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Whether the host already matches: exit 0 when nothing would change,
    /// 1 when changes are pending (printed as usual), 2 when the plan
    /// cannot be made. For configuration management ("would this change
    /// anything?"). Inside a network namespace only what the namespace
    /// can change counts: the host-wide values it names are listed apart.
    #[arg(long)]
    pub check: bool,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Sh => "sh",
        }
    }
}

impl PlanArgs {
    pub fn format(&self) -> Format {
        chosen_format(self.json, self.format)
    }
}

/// `--json` or `--format F` (clap refuses both together), text by default.
pub fn chosen_format(json: bool, format: Option<Format>) -> Format {
    match (json, format) {
        (true, _) => Format::Json,
        (false, Some(f)) => f,
        (false, None) => Format::Text,
    }
}

/// Compute the plan as `apply` would: the model's plan, then the checks
/// that need the kernel files themselves (read-only files, governors).
pub fn resolve(tune: &TuneArgs) -> anyhow::Result<(PlanOptions, Plan)> {
    let (opts, plan, _) = resolve_with_host(tune)?;
    Ok((opts, plan))
}

/// [`resolve`], also giving the host model the plan was made from.
pub fn resolve_with_host(tune: &TuneArgs) -> anyhow::Result<(PlanOptions, Plan, Host)> {
    if let Some(file) = &tune.plan_file {
        return saved_plan(tune, file);
    }
    let opts = tune.options()?;
    let host = tune.read_host()?;
    let mut plan = crate::plan::plan(&host, &opts)?;
    let root = host::open_root(tune.target.root.as_deref())?;
    crate::plan::preflight::preflight(&mut plan, &root);
    plan.made_for = Some(MadeFor::of(
        &root,
        tune.target.root.as_deref(),
        tune.target.netns.as_deref(),
    ));
    Ok((opts, plan, host))
}

/// `--plan FILE`: the saved plan, checked against this place.
fn saved_plan(
    tune: &TuneArgs,
    file: &std::path::Path,
) -> anyhow::Result<(PlanOptions, Plan, Host)> {
    let plan = saved::load(file)?;
    let host = tune.read_host()?;
    let name = format!("'{}'", file.display());
    // Admitted before any of its targets is read: only what a profile
    // could change, and in a namespace only what the namespace owns.
    let scope = Scope::of(&host);
    let plan = saved::admit(plan, &name, &|_| scope.clone(), &Limits::of(&host))?;
    let root = host::open_root(tune.target.root.as_deref())?;
    let here = MadeFor::of(
        &root,
        tune.target.root.as_deref(),
        tune.target.netns.as_deref(),
    );
    let backend = Backend::new(root);
    saved::check(&plan, &name, &here, &|t| backend.read(t))?;
    Ok((saved::options(&plan), plan, host))
}

pub fn print(plan: &Plan, tune: &TuneArgs, format: Format) -> anyhow::Result<()> {
    let text = match format {
        Format::Text => render::text(plan, &tune.place()),
        Format::Json => render::json(plan)?,
        Format::Sh => render::shell(plan, &tune.place(), tune.target.netns.as_deref()),
    };
    crate::output::print(&text)?;
    Ok(())
}

pub fn run(args: PlanArgs) -> anyhow::Result<Status> {
    let (_, plan) = resolve(&args.tune)?;
    print(&plan, &args.tune, args.format())?;
    if !args.check {
        return Ok(Status::Clean);
    }
    let pending = plan.changes.len();
    if args.format() == Format::Text {
        let line = if pending == 0 {
            format!("check: {} already matches\n", args.tune.place())
        } else {
            format!(
                "check: {pending} change(s) pending on {}\n",
                args.tune.place()
            )
        };
        crate::output::print(&line)?;
    }
    Ok(if pending == 0 {
        Status::Clean
    } else {
        Status::Findings
    })
}
