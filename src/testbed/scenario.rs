//! Testbed scenarios: a testbed made with one of the receive problems the
//! source articles fix, so that doctor can name it, a profile can fix it
//! and a benchmark can show the difference, on any host with two CPUs.
//!
//! On a quiet two-CPU host a plain veth testbed has none of these
//! problems: the receive softirq runs on the sender's CPU (veth has no
//! interrupt: `netif_rx` queues the packet on the CPU that sent it) and
//! the reader has the other CPU to itself. A scenario builds the problem:
//! the settings go into the server's namespace (they vanish with it),
//! host-wide ones through [`super::host_values`] (restored by `testbed
//! down`), and the workload that shows it (which CPU the reader and the
//! sender run on) is printed as commands to run.

use std::net::Ipv4Addr;

/// What a scenario writes to the server's veth RX queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rps {
    /// Left as the testbed makes it.
    Unchanged,
    /// rps_cpus 0 on every RX queue: packets are processed on the sending
    /// CPU (a namespace's `rps_default_mask` could have set a mask).
    Off,
    /// rps_cpus = this one CPU on every RX queue.
    OneCpu(u32),
}

/// The traffic that shows a scenario's problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Many small UDP packets (`bench udp-flood` into `bench udp-sink`),
    /// the reader and the sender pinned; `flood_options` are the flood's
    /// flows and, where the sender must cost little per packet (as a NIC
    /// does), its UDP GSO and rate.
    Udp {
        reader_cpu: u32,
        sender_cpu: u32,
        flood_options: &'static str,
    },
    /// One bulk TCP stream (`bench stream` into `bench stream-server`).
    Stream,
    /// Request-response over one TCP connection (`bench rr` into `bench
    /// rr-server`), the server and the client pinned to different CPUs.
    Rr { server_cpu: u32, client_cpu: u32 },
}

/// IRQ deferral written to the server's veth (its per-device sysfs files,
/// which set every NAPI of the device and are the defaults of NAPIs made
/// later), after NAPI is switched on at both ends: GRO on, and TSO off so
/// that locally sent TCP goes through the peer's NAPI instead of the
/// backlog (veth_skb_is_eligible_for_gro in drivers/net/veth.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferral {
    /// Empty polls the device IRQ stays masked after a poll found packets.
    pub defer_hard_irqs: u32,
    /// The timer that polls while it is masked, nanoseconds.
    pub gro_flush_timeout_ns: u64,
}

/// One scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    /// One line, for `testbed scenarios`.
    pub summary: &'static str,
    /// The problem and how it arises, for people.
    pub problem: &'static str,
    /// The public source whose starting point this is.
    pub source: &'static str,
    /// RX/TX queues per veth end.
    pub queues: u32,
    pub rps: Rps,
    /// Sysctls written in the server's namespace (dotted name, value).
    pub sysctls: &'static [(&'static str, &'static str)],
    /// Host-wide values lowered to at most this (snapshot and restore).
    pub host: &'static [super::host_values::AtMost],
    pub workload: Workload,
    /// The doctor finding that names the problem.
    pub finding: &'static str,
    /// The profile whose plan fixes it.
    pub profile: &'static str,
    /// Options `doctor` and `apply` need to see it (the path's bandwidth
    /// and round-trip time for buffer sizes), or "".
    pub path: &'static str,
    /// Plan options the fix needs beyond the profile, or "": the CPUs
    /// network work may use, kept off the reader's CPU.
    pub fix_options: &'static str,
    /// A delay line between the testbed's sides (a real round-trip time
    /// and rate), run while the testbed is up.
    pub delay_line: Option<super::delay_line::Line>,
    /// NAPI on the veth and this IRQ deferral on the server's end.
    pub deferral: Option<Deferral>,
}

/// Every scenario, in the order `testbed scenarios` lists them.
pub const ALL: &[Scenario] = &[
    Scenario {
        name: "reader-on-softirq-cpu",
        summary: "the UDP reader pinned to the CPU that runs the receive softirq (RPS off)",
        problem: "RPS is off on the server's veth, so each packet is processed on the CPU that \
                  sent it (veth has no interrupt), and the reader is pinned to that CPU: the \
                  reader, the softirq and the sender share CPU 0 while CPU 1 idles. RPS onto the \
                  CPUs the reader does not use (the plan's --cpus), which moves the protocol \
                  work there, or moving the reader, is the fix.",
        source: "Cloudflare, \"How to receive a million packets per second\"",
        queues: 2,
        rps: Rps::Off,
        sysctls: &[],
        host: &[],
        workload: Workload::Udp {
            reader_cpu: 0,
            sender_cpu: 0,
            flood_options: "--flows 16",
        },
        finding: "rps.off",
        profile: "pps",
        path: "",
        fix_options: "--cpus 1",
        delay_line: None,
        deferral: None,
    },
    Scenario {
        name: "softirq-on-app-cpu",
        summary: "RPS steers all receive work to the reader's CPU (the CPU0 pile-up)",
        problem: "RPS on every RX queue of the server's veth names CPU 1, where the reader is \
                  pinned: all receive processing piles up on the reader's CPU while the \
                  sender's CPU could take half of it. RPS stands in for queue interrupts, which \
                  a veth does not have; spreading RPS over both CPUs is the fix. The local \
                  sender stands in for a NIC, whose packets cost the receiving host nothing to \
                  send: with UDP GSO (--gso 64) one send carries 64 packets, which cross the \
                  veth as one and are cut into datagrams on the CPU that RPS picks, so CPU 0 \
                  has room for the receive work the fix gives it (a sender paying for every \
                  packet would keep CPU 0 busy, and the fix would only move work onto it). \
                  Like a NIC at its line rate it sends at a fixed rate (--rate 1800000), well \
                  above what CPU 1 takes alone (about 1 million packets/s): the receive \
                  softirq then starves the reader, as the softirqs piled on CPU0 did.",
        source: "\"SMP IRQ affinity\" (igi, 2013): softirqs piled on CPU0",
        queues: 2,
        rps: Rps::OneCpu(1),
        sysctls: &[],
        host: &[],
        workload: Workload::Udp {
            reader_cpu: 1,
            sender_cpu: 0,
            flood_options: "--flows 16 --gso 64 --rate 1800000",
        },
        finding: "rps.one-cpu",
        profile: "pps",
        path: "",
        fix_options: "",
        delay_line: None,
        deferral: None,
    },
    Scenario {
        name: "bulk-small-buffers",
        summary: "bulk TCP over a 30 ms, 50 Mbit/s delay line, the receive buffer far below \
                  its bandwidth-delay product",
        problem: "The testbed's sides talk through a delay line (two TUN devices and a \
                  forwarder: 30 ms round trip, 50 Mbit/s each way, so 187.5 kB in flight when \
                  full), and the server's namespace caps TCP receive buffers at 32 KiB \
                  (net.ipv4.tcp_rmem 4096 16384 32768): the receiver's window, not the line, \
                  limits a bulk flow to a few Mbit/s. Buffer maxima at or above bandwidth x \
                  RTT are the fix. The path is kept below the kernel's default \
                  net.core.rmem_max and wmem_max (212992), which a namespace cannot change.",
        source: "ESnet fasterdata, Linux host tuning (buffers from bandwidth x RTT)",
        queues: 2,
        rps: Rps::Unchanged,
        sysctls: &[("net.ipv4.tcp_rmem", "4096 16384 32768")],
        host: &[],
        workload: Workload::Stream,
        finding: "tcp.buffers-small",
        profile: "throughput",
        path: "--bandwidth 50mbit --rtt 30ms",
        fix_options: "",
        delay_line: Some(super::delay_line::Line {
            rtt_us: 30_000,
            rate_bps: 50_000_000,
        }),
        deferral: None,
    },
    Scenario {
        name: "rr-irq-deferral",
        summary: "TCP request-response across a veth with NAPI, its IRQ deferral set for \
                  throughput (100 polls, 200 us timer), nothing busy polling",
        problem: "GRO is on and TSO off at both ends of the veth, so each RX queue has a NAPI \
                  and TCP goes through it, and the server's veth defers its IRQ (the software \
                  one: veth has no hardware IRQ or ethtool coalescing) for up to 100 empty \
                  polls with a 200 us timer, as a bulk receiver would set it. Once a poll has \
                  found a packet the queue is not woken again until the timer polls it: with \
                  nobody busy polling, every request waits up to 200 us, longer than a \
                  whole round trip across the veth without deferral. The latency profile is \
                  the fix: with nothing to busy poll (a namespace cannot turn it on, and the \
                  host has it off) it turns the deferral off per NAPI; where the host busy \
                  polls it sets a short one (2 polls, 20 us).",
        source: "kernel Documentation/networking/napi.rst, \"IRQ mitigation\"; talawah.io, \
                 \"Linux Kernel vs DPDK: HTTP Performance Showdown\" (interrupt moderation)",
        queues: 2,
        rps: Rps::Unchanged,
        sysctls: &[],
        host: &[],
        workload: Workload::Rr {
            server_cpu: 0,
            client_cpu: 1,
        },
        finding: "napi.deferral-delays",
        profile: "latency",
        path: "",
        fix_options: "",
        delay_line: None,
        deferral: Some(Deferral {
            defer_hard_irqs: 100,
            gro_flush_timeout_ns: 200_000,
        }),
    },
];

/// The scenario called `name`, or an error that lists them.
pub fn find(name: &str) -> anyhow::Result<&'static Scenario> {
    ALL.iter().find(|s| s.name == name).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown scenario '{name}': choose one of {} (`nettune testbed scenarios` says what \
             each builds)",
            ALL.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )
    })
}

/// `testbed scenarios`: one line each.
pub fn list() -> String {
    let width = ALL.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::from("scenarios (nettune testbed up --scenario NAME):\n");
    for s in ALL {
        out.push_str(&format!("  {:width$}  {}\n", s.name, s.summary));
    }
    out
}

/// The commands that show, judge and fix a scenario on testbed `tb`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Commands {
    /// Start first: the receiving side (the reader, pinned, for UDP).
    pub server: String,
    /// The sending side.
    pub client: String,
    pub doctor: String,
    pub fix: String,
}

/// Where the commands run: the server's namespace and address, the
/// client's namespace (a testbed's sides, without naming the type, which
/// lives in the module that uses this one).
#[derive(Debug, Clone, Copy)]
pub struct Where<'a> {
    pub server_netns: &'a str,
    pub server_address: Ipv4Addr,
    pub client_netns: &'a str,
    /// The veth end in each namespace.
    pub server_iface: &'a str,
    pub client_iface: &'a str,
}

pub fn commands(s: &Scenario, at: Where<'_>) -> Commands {
    let join = |parts: &[&str]| {
        parts
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (server_cmd, client_cmd) = match s.workload {
        Workload::Udp {
            reader_cpu,
            sender_cpu,
            flood_options,
        } => (
            format!(
                "nettune bench udp-sink --netns {} --bind {}:9000 --pin {reader_cpu} --duration \
                 10",
                at.server_netns, at.server_address
            ),
            join(&[
                &format!(
                    "nettune bench udp-flood --netns {} --to {}:9000 --pin {sender_cpu} \
                     --duration 10",
                    at.client_netns, at.server_address
                ),
                flood_options,
            ]),
        ),
        Workload::Stream => (
            format!(
                "nettune bench stream-server --netns {} --bind {}:5201 --duration 15",
                at.server_netns, at.server_address
            ),
            format!(
                "nettune bench stream --netns {} --to {}:5201 --duration 10",
                at.client_netns, at.server_address
            ),
        ),
        Workload::Rr {
            server_cpu,
            client_cpu,
        } => (
            format!(
                "nettune bench rr-server --netns {} --bind {}:7000 --pin {server_cpu} \
                 --duration 15",
                at.server_netns, at.server_address
            ),
            format!(
                "nettune bench rr --netns {} --to {}:7000 --proto tcp --pin {client_cpu} \
                 --duration 10",
                at.client_netns, at.server_address
            ),
        ),
    };
    Commands {
        server: server_cmd,
        client: client_cmd,
        doctor: join(&["nettune doctor --netns", at.server_netns, s.path]),
        fix: join(&[
            "nettune apply --profile",
            s.profile,
            "--netns",
            at.server_netns,
            s.path,
            s.fix_options,
        ]),
    }
}

/// Make scenario `s` real on the testbed just built (at `at`): its
/// sysctls, RPS and IRQ deferral in the server's namespace, NAPI at both
/// veth ends (host-wide values are set by the caller, with their
/// snapshot).
pub fn build(s: &Scenario, at: Where<'_>) -> anyhow::Result<()> {
    let mask = match s.rps {
        Rps::Unchanged => None,
        Rps::Off => Some("0".to_string()),
        Rps::OneCpu(cpu) => Some(crate::base::cpuset::format_mask(&[cpu])),
    };
    let iface = at.server_iface;
    if s.deferral.is_some() {
        in_netns(s, at.client_netns, |_| napi_on(at.client_iface))?;
    }
    in_netns(s, at.server_netns, |root| {
        for (name, value) in s.sysctls {
            root.write(&format!("/proc/sys/{}", name.replace('.', "/")), value)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        if let Some(mask) = &mask {
            let queues = root
                .list(&format!("/sys/class/net/{iface}/queues"))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .unwrap_or_default();
            for q in queues.iter().filter(|q| q.starts_with("rx-")) {
                root.write(&format!("/sys/class/net/{iface}/queues/{q}/rps_cpus"), mask)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        if let Some(d) = s.deferral {
            napi_on(iface)?;
            // After GRO made the NAPIs: a write to these files sets every
            // NAPI of the device, and NAPIs made later (GRO off and on)
            // start from them.
            for (file, value) in [
                ("napi_defer_hard_irqs", d.defer_hard_irqs.to_string()),
                ("gro_flush_timeout", d.gro_flush_timeout_ns.to_string()),
            ] {
                root.write(&format!("/sys/class/net/{iface}/{file}"), &value)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Ok(())
    })
}

/// Run `f` on a thread of its own inside network namespace `netns`, with
/// a sysfs that shows it (the host's /sys does not show the namespace's
/// veth).
fn in_netns(
    s: &Scenario,
    netns: &str,
    f: impl FnOnce(&crate::base::Root) -> anyhow::Result<()> + Send,
) -> anyhow::Result<()> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> anyhow::Result<()> {
                crate::base::netns::enter(netns)?;
                f(&crate::base::Root::live())
                    .map_err(|e| anyhow::anyhow!("in network namespace {netns}: {e:#}"))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(anyhow::anyhow!(
                    "the thread setting up scenario '{}' panicked",
                    s.name
                ))
            })
    })
}

/// Features that give a veth end NAPI for TCP sent across the pair (`ethtool
/// -K IF gro on tso off`): GRO on makes one NAPI per RX queue; TSO off
/// (every TCP segmentation kind) lets the peer hand locally sent segments
/// to that NAPI (veth_skb_is_eligible_for_gro, drivers/net/veth.c).
const NAPI_FEATURES: &[(&str, bool)] = &[
    ("rx-gro", true),
    ("tx-tcp-segmentation", false),
    ("tx-tcp-ecn-segmentation", false),
    ("tx-tcp-mangleid-segmentation", false),
    ("tx-tcp6-segmentation", false),
];

/// [`NAPI_FEATURES`] on `iface` in this thread's namespace, through the
/// ethtool ioctls nettune uses everywhere (never the ethtool program).
fn napi_on(iface: &str) -> anyhow::Result<()> {
    use crate::base::driver::{DriverSetting, Ethtool as _, EthtoolSet as _};
    let ethtool = crate::nic::live::LiveEthtool;
    let features = match ethtool.query(iface).features {
        crate::base::Probe::Value(f) => f,
        crate::base::Probe::Missing(m) => anyhow::bail!(
            "cannot read the offload features of {iface}: {}",
            match m {
                crate::base::Missing::NotSupported => "the driver does not report them",
                crate::base::Missing::Unknown => "the ethtool query failed",
            }
        ),
    };
    for &(name, on) in NAPI_FEATURES {
        match features.get(name) {
            Some(f) if f.active == on => continue,
            // A segmentation kind this kernel does not have is off.
            None if !on => continue,
            _ => {}
        }
        ethtool
            .set(
                iface,
                &DriverSetting::Feature {
                    name: name.to_string(),
                    on,
                },
            )
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot switch {name} {} on {iface}: {}",
                    if on { "on" } else { "off" },
                    e.message
                )
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_unknown_ones_list_the_choices() {
        let mut names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert_eq!(
            find("softirq-on-app-cpu").map(|s| s.finding).ok(),
            Some("rps.one-cpu")
        );
        let err = find("nope").expect_err("unknown").to_string();
        assert!(
            err.contains("'nope'") && err.contains("reader-on-softirq-cpu"),
            "{err}"
        );
    }

    #[test]
    fn every_scenario_names_a_doctor_rule_and_a_profile() {
        for s in ALL {
            assert!(crate::doctor::RULE_IDS.contains(&s.finding), "{}", s.name);
            assert!(
                <crate::plan::Profile as clap::ValueEnum>::from_str(s.profile, false).is_ok(),
                "{}",
                s.name
            );
            if let Workload::Udp {
                reader_cpu,
                sender_cpu,
                ..
            } = s.workload
            {
                assert!(reader_cpu < 2 && sender_cpu < 2, "{}: two CPUs", s.name);
            }
            if let Workload::Rr {
                server_cpu,
                client_cpu,
            } = s.workload
            {
                assert!(server_cpu < 2 && client_cpu < 2, "{}: two CPUs", s.name);
                assert_ne!(server_cpu, client_cpu, "{}", s.name);
            }
            assert!(list().contains(s.summary));
        }
    }

    #[test]
    fn a_delay_line_is_the_path_doctor_judges_and_fits_the_default_maxima() {
        for s in ALL {
            let Some(line) = s.delay_line else {
                continue;
            };
            let words: Vec<&str> = s.path.split_whitespace().collect();
            let value = |flag: &str| {
                let at = words.iter().position(|w| *w == flag).expect(flag);
                words[at + 1]
            };
            let rate = crate::base::units::parse_rate(value("--bandwidth")).expect("rate");
            let rtt = crate::base::units::parse_time(value("--rtt")).expect("rtt");
            assert_eq!(rate, line.rate_bps, "{}", s.name);
            assert_eq!(rtt, line.rtt(), "{}", s.name);
            // rmem_max/wmem_max are the host's: a namespace's profile
            // cannot raise them, so the line must fit their default.
            assert!(line.bdp_bytes() < 212_992, "{}", s.name);
            // And the scenario's buffers are far below it.
            let (_, tcp_rmem) = s
                .sysctls
                .iter()
                .find(|(n, _)| *n == "net.ipv4.tcp_rmem")
                .expect("tcp_rmem");
            let max: u64 = tcp_rmem
                .split_whitespace()
                .last()
                .and_then(|m| m.parse().ok())
                .expect("max");
            assert!(max * 4 < line.bdp_bytes(), "{}", s.name);
        }
    }

    #[test]
    fn a_deferral_is_long_enough_for_doctor_and_the_fix_shortens_it() {
        use crate::plan::values::{HTTP_NAPI, LATENCY_NAPI};
        let long = crate::doctor::thresholds::LONG_DEFERRAL_TIMER_NS;
        for s in ALL {
            let Some(d) = s.deferral else {
                continue;
            };
            assert!(d.defer_hard_irqs > 0, "{}", s.name);
            // Doctor names it, and the profile's own timer would not be.
            assert!(d.gro_flush_timeout_ns >= long, "{}", s.name);
            assert_eq!(s.finding, "napi.deferral-delays", "{}", s.name);
            assert_eq!(s.profile, "latency", "{}", s.name);
            assert!(LATENCY_NAPI.gro_flush_timeout_ns < long);
            assert!(HTTP_NAPI.gro_flush_timeout_ns < long);
        }
    }

    #[test]
    fn commands_pin_the_reader_and_the_sender_on_the_testbed() {
        let tb = Where {
            server_netns: "ntb-x-server",
            server_address: Ipv4Addr::new(198, 18, 0, 1),
            client_netns: "ntb-x-client",
            server_iface: "tb-server",
            client_iface: "tb-client",
        };
        let s = find("softirq-on-app-cpu").expect("scenario");
        let c = commands(s, tb);
        assert_eq!(
            c.server,
            "nettune bench udp-sink --netns ntb-x-server --bind 198.18.0.1:9000 --pin 1 \
             --duration 10"
        );
        assert_eq!(
            c.client,
            "nettune bench udp-flood --netns ntb-x-client --to 198.18.0.1:9000 --pin 0 \
             --duration 10 --flows 16 --gso 64 --rate 1800000"
        );
        // The reader is a plain recvmmsg sink: UDP GRO would hand it the
        // sender's 64-packet sends whole and hide the per-packet receive
        // work the scenario piles up.
        assert!(!c.server.contains("--gro"), "{}", c.server);
        assert_eq!(c.fix, "nettune apply --profile pps --netns ntb-x-server");
        // A buffer scenario passes the path on to doctor and apply.
        let c = commands(find("bulk-small-buffers").expect("scenario"), tb);
        assert_eq!(
            c.doctor,
            "nettune doctor --netns ntb-x-server --bandwidth 50mbit --rtt 30ms"
        );
        assert!(c
            .fix
            .starts_with("nettune apply --profile throughput --netns ntb-x-server --bandwidth"));
        assert!(c.server.contains("stream-server") && c.client.contains("--to 198.18.0.1:5201"));
        // Request-response: server and client on different CPUs, over TCP.
        let c = commands(find("rr-irq-deferral").expect("scenario"), tb);
        assert_eq!(
            c.server,
            "nettune bench rr-server --netns ntb-x-server --bind 198.18.0.1:7000 --pin 0 \
             --duration 15"
        );
        assert_eq!(
            c.client,
            "nettune bench rr --netns ntb-x-client --to 198.18.0.1:7000 --proto tcp --pin 1 \
             --duration 10"
        );
        assert_eq!(
            c.fix,
            "nettune apply --profile latency --netns ntb-x-server"
        );
    }
}
