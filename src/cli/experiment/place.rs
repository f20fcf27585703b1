//! Where an experiment runs (`--testbed`, `--netns`, `--remote`, ...),
//! shared by `experiment run` and `experiment search`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::apply::StateDir;
use crate::cli::apply::state_dir;
use crate::cli::bench::{pin_list, CpuList};
use crate::experiment::bench::Sides;
use crate::experiment::results::Settings;
use crate::experiment::tune::Tuner;
use crate::testbed::{self, Testbed};

/// Where an experiment runs: shared by `run` and `search`.
#[derive(Debug, Clone, clap::Args)]
pub struct WhereArgs {
    /// Run on testbed NAME (`nettune testbed up`): servers and tuning in its
    /// server namespace, clients in its client namespace. Without NAME, a
    /// testbed is made for this experiment and removed afterwards.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    pub testbed: Option<String>,
    /// RX/TX queues of a testbed made for this experiment. Default: the
    /// number of online CPUs.
    #[arg(long, value_name = "N", requires = "testbed")]
    pub queues: Option<u32>,
    /// Without a testbed: tune this network namespace and run the servers
    /// in it (default: this host).
    #[arg(long, value_name = "NAME", conflicts_with = "testbed")]
    pub netns: Option<String>,
    /// Without a testbed: run the clients in this network namespace
    /// (default: where nettune runs).
    #[arg(long, value_name = "NAME", conflicts_with = "testbed")]
    pub client_netns: Option<String>,
    /// Without a testbed: the address the servers listen on. Default:
    /// 127.0.0.1.
    #[arg(long, value_name = "ADDR", conflicts_with = "testbed")]
    pub server_addr: Option<IpAddr>,
    /// Ask `nettune serve` at ADDR:PORT (another host) for the server side
    /// of every run, instead of starting it here; configs are applied here
    /// (or in --netns), where the clients run (docs/serve.md).
    #[arg(long, value_name = "ADDR:PORT", value_parser = crate::bench::addr::parse_destination, conflicts_with_all = ["testbed", "server_addr"])]
    pub remote: Option<std::net::SocketAddr>,
    /// The daemon's shared secret (mode 0600); without it only a daemon on
    /// loopback (or one that takes client certificates) answers.
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub tls: crate::cli::bench::TlsClientArgs,
    /// Pin the server side's threads, one per CPU of this list (udp-sink,
    /// rr-server, http-server); the search steers packets to these CPUs.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub server_pin: Option<CpuList>,
    /// The interfaces profiles and the search tune (repeatable). Default: a
    /// testbed's server interface, else the profile's default.
    #[arg(long = "iface", value_name = "NAME")]
    pub ifaces: Vec<String>,
    /// The CPUs network work may use (as `nettune plan --cpus`).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Where journals go (as `nettune apply --state-dir`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Set IRQ affinity even though irqbalance runs.
    #[arg(long)]
    pub allow_irqbalance: bool,
    /// Seed of the shuffles and the bootstrap (default: from the clock);
    /// recorded in the results.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

pub fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "nettune experiment applies configs to the live host (or a namespace) and needs root \
             (sudo); nothing was changed"
        );
    }
    Ok(())
}

/// Where an experiment runs, resolved; undone by [`Place::leave`].
pub struct Place {
    pub testbed: Option<Testbed>,
    /// A testbed made for this experiment, removed afterwards.
    made: bool,
    pub sides: Sides,
    pub tuned_netns: Option<String>,
    pub ifaces: Vec<String>,
    pub state: StateDir,
    pub allow_irqbalance: bool,
    origin: Option<crate::base::netns::Origin>,
}

impl Place {
    /// Resolve `args`: make or check the testbed, then enter the namespace
    /// to tune (this must come before any thread starts).
    pub fn enter(args: &WhereArgs) -> anyhow::Result<Place> {
        let state = state_dir(args.state_dir.as_deref(), None)?;
        let server_pin = CpuList::of(&args.server_pin);
        let mut place = match &args.testbed {
            Some(name) => {
                let made = name.is_empty();
                let name = if made {
                    Testbed::default_name()
                } else {
                    name.clone()
                };
                let tb = Testbed::named(&name)?;
                let tb = if made {
                    testbed::up(
                        &tb,
                        args.queues.unwrap_or_else(crate::cli::testbed::online_cpus),
                    )?
                } else {
                    tb.check()?;
                    tb
                };
                let ifaces = if args.ifaces.is_empty() {
                    vec![tb.server.iface.clone()]
                } else {
                    args.ifaces.clone()
                };
                Place {
                    sides: Sides {
                        server_addr: IpAddr::V4(tb.server.address),
                        server_netns: Some(tb.server.netns.clone()),
                        server_pin,
                        client_netns: Some(tb.client.netns.clone()),
                        remote: None,
                    },
                    tuned_netns: Some(tb.server.netns.clone()),
                    testbed: Some(tb),
                    made,
                    ifaces,
                    state,
                    allow_irqbalance: args.allow_irqbalance,
                    origin: None,
                }
            }
            None => Place {
                sides: Sides {
                    server_addr: args
                        .server_addr
                        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
                    server_netns: args.netns.clone(),
                    server_pin,
                    client_netns: args.client_netns.clone(),
                    remote: args
                        .remote
                        .map(|daemon| {
                            crate::cli::bench::remote(daemon, args.token_file.as_deref(), &args.tls)
                        })
                        .transpose()?,
                },
                tuned_netns: args.netns.clone(),
                testbed: None,
                made: false,
                ifaces: args.ifaces.clone(),
                state,
                allow_irqbalance: args.allow_irqbalance,
                origin: None,
            },
        };
        if let Some(ns) = place.tuned_netns.clone() {
            match crate::base::netns::enter_returnable(&ns) {
                Ok(origin) => place.origin = Some(origin),
                Err(e) => {
                    let _ = place.leave();
                    return Err(e);
                }
            }
        }
        Ok(place)
    }

    /// A tuner for this place, journaling in its state directory as
    /// `experiment`; `buffers=throughput` sized for `path`.
    pub fn tuner(
        &self,
        experiment: String,
        allow_host: bool,
        path: crate::experiment::tune::BufferPath,
    ) -> anyhow::Result<Tuner> {
        let host_net = match &self.origin {
            Some(origin) => Some(origin.net()?),
            None => None,
        };
        Ok(Tuner::new(
            self.state.clone(),
            self.tuned_netns.clone(),
            experiment,
            self.allow_irqbalance,
        )
        .with_host_net(host_net)
        .with_scope(crate::experiment::tune::Scope {
            ifaces: self.ifaces.clone(),
            app_cpus: self.sides.server_pin.clone(),
            allow_host,
            path,
        }))
    }

    /// Whether the testbed was made for this command (and goes with it).
    pub fn made_testbed(&self) -> bool {
        self.made
    }

    /// Back to the host's namespaces; remove a testbed made for this run.
    pub fn leave(mut self) -> anyhow::Result<()> {
        if let Some(origin) = self.origin.take() {
            origin.leave()?;
        }
        if let (true, Some(tb)) = (self.made, &self.testbed) {
            testbed::down(tb)?;
        }
        Ok(())
    }

    pub fn settings(
        &self,
        repeat: u32,
        duration: Duration,
        warmup: Duration,
        seed: u64,
    ) -> Settings {
        Settings {
            repeat,
            duration_s: duration.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            seed,
            testbed: self.testbed.as_ref().map(|t| t.name.clone()),
            tuned_netns: self.tuned_netns.clone(),
            server_netns: self.sides.server_netns.clone(),
            client_netns: self.sides.client_netns.clone(),
            server_addr: self.sides.server_addr.to_string(),
            remote: self.sides.remote.as_ref().map(|r| r.daemon.to_string()),
            server_pin: self.sides.server_pin.clone(),
            ifaces: self.ifaces.clone(),
        }
    }
}

pub fn absolute(path: &Path) -> PathBuf {
    std::env::current_dir()
        .map(|d| d.join(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

pub fn seed_or_clock(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    })
}
