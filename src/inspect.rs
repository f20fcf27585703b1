//! The human form of the host model that `nettune inspect` prints: compact
//! (one line per queue, CPU sets as ranges); `--json` prints the model whole.

use std::fmt::Write as _;

use crate::base::cpuset::format_list;
use crate::base::driver::netdev::{Napi, NetdevState, RxNapi};
use crate::base::driver::{DriverSettings, QueueStats};
use crate::base::Probe;
use crate::host::{self, Host, Interface, VectorRole};

/// `-` for an empty set or missing value: keeps columns readable.
fn cpus(set: &[u32]) -> String {
    if set.is_empty() {
        "-".to_string()
    } else {
        format_list(set)
    }
}

fn opt_cpus(set: &Option<Vec<u32>>) -> String {
    set.as_deref().map(cpus).unwrap_or_else(|| "?".to_string())
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(T::to_string)
        .unwrap_or_else(|| "unknown".to_string())
}

fn probe<T>(p: &Probe<T>, show: impl FnOnce(&T) -> String) -> String {
    match p.value() {
        Some(v) => show(v),
        None => p.missing_text().unwrap_or("unknown").to_string(),
    }
}

/// The human report. Writing to a String cannot fail, hence the `let _`.
/// `detail_down`: print full detail for interfaces that are down too
/// (otherwise a down interface gets one line, to keep small hosts on one screen).
pub fn render(host: &Host, detail_down: bool) -> String {
    let mut out = String::new();
    let o = &mut out;
    let place = match &host.source.netns {
        Some(ns) => format!("network namespace {ns}"),
        None if host.source.root == "/" => "this host".to_string(),
        None => format!("capture {}", host.source.root),
    };
    let _ = writeln!(o, "nettune inspect: {place}, kernel {}", opt(&host.kernel));
    render_cpus(o, host);
    for iface in &host.interfaces {
        if iface.operstate.as_deref() == Some("down") && !detail_down {
            let _ = writeln!(
                o,
                "\n{}  driver {}  down  mtu {}  {} rx / {} tx queues  (down: details with --iface {})",
                iface.name,
                opt(&iface.driver),
                opt(&iface.mtu),
                iface.rx_queues.len(),
                iface.tx_queues.len(),
                iface.name
            );
        } else {
            render_interface(o, iface);
        }
    }
    render_kernel(o, host);
    render_counters(o, host);
    render_sources(o, host);
    out
}

/// What could not be read: each source with its file and error, so a
/// partial host (a container, an old kernel, a capture without root) says
/// what its picture lacks.
fn render_sources(o: &mut String, host: &Host) {
    if host.sources.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "
sources not read ({}): the parts they feed are empty or partial",
        host.sources.len()
    );
    for issue in &host.sources {
        let path = if issue.path.is_empty() {
            String::new()
        } else {
            format!(" {}", issue.path)
        };
        let _ = writeln!(
            o,
            "  {:<18} {}{path}: {}",
            issue.section,
            issue.kind.word(),
            issue.error
        );
    }
}

fn render_cpus(o: &mut String, host: &Host) {
    let _ = writeln!(o, "\nCPU");
    render_cpu_sets(o, host);
    render_numa(o, host);
    render_cpuidle(o, host);
    render_cpufreq(o, host);
    render_mitigations(o, host);
}

/// Online, isolated and nohz_full CPUs, and the SMT sibling groups.
fn render_cpu_sets(o: &mut String, host: &Host) {
    let smt = smt_groups(host);
    let _ = writeln!(
        o,
        "  online {}   isolated {}   nohz_full {}   SMT {}",
        cpus(&host.online_cpus),
        cpus(&host.isolated_cpus),
        cpus(&host.nohz_full_cpus),
        if smt.is_empty() {
            "off".to_string()
        } else {
            format!(
                "{} sibling groups ({}{})",
                smt.len(),
                smt[..smt.len().min(4)].join(" "),
                if smt.len() > 4 { " ..." } else { "" }
            )
        }
    );
}

/// Each distinct group of SMT siblings (more than one CPU), as a CPU list.
fn smt_groups(host: &Host) -> Vec<String> {
    let mut groups: Vec<Vec<u32>> = host
        .cpus
        .iter()
        .filter(|c| c.siblings.len() > 1)
        .map(|c| c.siblings.clone())
        .collect();
    groups.sort();
    groups.dedup();
    groups.iter().map(|g| format_list(g)).collect()
}

fn render_numa(o: &mut String, host: &Host) {
    let nodes: Vec<String> = host
        .numa_nodes
        .iter()
        .map(|n| format!("node{} {}", n.id, cpus(&n.cpus)))
        .collect();
    let _ = writeln!(
        o,
        "  NUMA   {}",
        if nodes.is_empty() {
            "unknown (no NUMA information)".to_string()
        } else {
            nodes.join("   ")
        }
    );
}

/// The cpuidle driver and governor, guest halt-polling, and each C-state
/// with its exit latency.
fn render_cpuidle(o: &mut String, host: &Host) {
    let idle = &host.cpuidle;
    let states: Vec<String> = idle
        .states
        .iter()
        .map(|s| {
            let lat = s.latency_us.map(|l| format!("{l}us")).unwrap_or_default();
            format!(
                "{}{}{}",
                s.name,
                if lat.is_empty() {
                    String::new()
                } else {
                    format!(" {lat}")
                },
                if s.disabled { " (off)" } else { "" }
            )
        })
        .collect();
    let _ = writeln!(
        o,
        "  idle   driver {}  governor {}{}{}",
        opt(&idle.driver),
        opt(&idle.governor),
        idle.guest_halt_poll_ns
            .map(|ns| format!("  guest_halt_poll_ns {ns}"))
            .unwrap_or_default(),
        if states.is_empty() {
            String::new()
        } else {
            format!("  states: {}", states.join(", "))
        }
    );
}

fn render_cpufreq(o: &mut String, host: &Host) {
    let freq = if host.cpufreq.governors.is_empty() {
        "none (no cpufreq)".to_string()
    } else {
        let govs: Vec<String> = host
            .cpufreq
            .governors
            .iter()
            .map(|(g, c)| format!("{g} on {}", cpus(c)))
            .collect();
        format!("driver {}  {}", opt(&host.cpufreq.driver), govs.join(", "))
    };
    let _ = writeln!(o, "  freq   {freq}");
}

/// The mitigations= boot parameter and how many CPU vulnerabilities are
/// mitigated, naming those left vulnerable.
fn render_mitigations(o: &mut String, host: &Host) {
    let m = &host.mitigations;
    let vulnerable: Vec<&String> = m
        .vulnerabilities
        .iter()
        .filter(|(_, v)| v.starts_with("Vulnerable"))
        .map(|(k, _)| k)
        .collect();
    let mitigated = m
        .vulnerabilities
        .values()
        .filter(|v| v.starts_with("Mitigation"))
        .count();
    let _ = writeln!(
        o,
        "  mitigations {}: {mitigated} mitigated, {} vulnerable{}",
        m.boot_param
            .as_deref()
            .map(|p| format!("mitigations={p}"))
            .unwrap_or_else(|| "default".to_string()),
        vulnerable.len(),
        if vulnerable.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                vulnerable
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
}

fn render_interface(o: &mut String, iface: &Interface) {
    render_interface_header(o, iface);
    render_driver(o, &iface.driver_settings);
    render_steering(o, iface);
    render_queue_table(o, iface);
    render_other_irqs(o, iface);
    render_napi(o, iface);
    render_interface_stats(o, iface);
}

/// Name, driver, state, MTU, speed and qdisc; then the device (PCI address,
/// NUMA node, local CPUs) and the queue counts.
fn render_interface_header(o: &mut String, iface: &Interface) {
    let qdisc = probe(&iface.root_qdisc, |q| q.kind.clone());
    let _ = writeln!(
        o,
        "\n{}  driver {}  {}  mtu {}  speed {}  qdisc {}",
        iface.name,
        opt(&iface.driver),
        opt(&iface.operstate),
        opt(&iface.mtu),
        iface
            .speed_mbps
            .map(|s| format!("{s}Mb/s"))
            .unwrap_or_else(|| "unknown".to_string()),
        qdisc,
    );
    let queues = format!(
        "{} rx / {} tx queues",
        iface.rx_queues.len(),
        iface.tx_queues.len()
    );
    if iface.physical {
        let _ = writeln!(
            o,
            "  device {}  NUMA node {}  local CPUs {}  {queues}",
            opt(&iface.pci_address),
            opt(&iface.numa_node),
            opt_cpus(&iface.local_cpus),
        );
    } else {
        let _ = writeln!(o, "  device virtual  {queues}");
    }
}

/// One line per queue index: the RX queue's IRQ, affinity and RPS beside
/// the TX queue's IRQ, XPS and rate limit.
fn render_queue_table(o: &mut String, iface: &Interface) {
    let count = iface.rx_queues.len().max(iface.tx_queues.len());
    if count > 0 {
        let _ = writeln!(
            o,
            "  queue  rxirq affinity  effective hint      rps_cpus  flows | txirq affinity  xps_cpus  xps_rxqs  maxrate"
        );
    }
    for index in 0..count as u32 {
        let rx = iface.rx_queues.iter().find(|q| q.index == index);
        let tx = iface.tx_queues.iter().find(|q| q.index == index);
        let rx_part = match rx {
            Some(q) => rx_queue_columns(q),
            None => format!(
                "{:>5} {:<9} {:<9} {:<9} {:<9} {:>5}",
                "", "", "", "", "", ""
            ),
        };
        let tx_part = tx.map(tx_queue_columns).unwrap_or_default();
        let _ = writeln!(o, "  q{index:<5} {rx_part} | {tx_part}");
    }
}

fn rx_queue_columns(q: &host::RxQueue) -> String {
    format!(
        "{:>5} {:<9} {:<9} {:<9} {:<9} {:>5}",
        q.irq.map(|i| i.to_string()).unwrap_or_else(|| "-".into()),
        q.irq
            .map(|_| opt_cpus(&q.affinity))
            .unwrap_or_else(|| "-".into()),
        q.irq
            .map(|_| opt_cpus(&q.effective))
            .unwrap_or_else(|| "-".into()),
        q.affinity_hint
            .as_deref()
            .map(cpus)
            .unwrap_or_else(|| "-".into()),
        opt_cpus(&q.rps_cpus),
        opt(&q.rps_flow_cnt),
    )
}

fn tx_queue_columns(q: &host::TxQueue) -> String {
    format!(
        "{:>5} {:<9} {:<9} {:<9} {}",
        q.irq.map(|i| i.to_string()).unwrap_or_else(|| "-".into()),
        q.irq
            .map(|_| opt_cpus(&q.affinity))
            .unwrap_or_else(|| "-".into()),
        opt_cpus(&q.xps_cpus),
        opt_cpus(&q.xps_rxqs),
        q.tx_maxrate
            .map(|r| if r == 0 {
                "-".to_string()
            } else {
                format!("{r}Mbit")
            })
            .unwrap_or_else(|| "?".into()),
    )
}

/// IRQ vectors that serve no queue (config, mailbox), and a physical
/// device's lack of any IRQ.
fn render_other_irqs(o: &mut String, iface: &Interface) {
    let others: Vec<String> = iface
        .irq_vectors
        .iter()
        .filter(|v| v.role == VectorRole::Other)
        .map(|v| format!("{} {} (CPUs {})", v.irq, v.name, opt_cpus(&v.affinity)))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(o, "  other IRQs: {}", others.join(", "));
    }
    if iface.physical && iface.irq_vectors.is_empty() {
        let _ = writeln!(o, "  IRQs: none found for this device in /proc/interrupts");
    }
}

/// Packet totals, and every non-zero error or drop counter.
fn render_interface_stats(o: &mut String, iface: &Interface) {
    let stats: Vec<String> = iface
        .statistics
        .iter()
        .filter(|(k, v)| **v > 0 && !k.ends_with("_packets"))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let packets = format!(
        "rx {} / tx {} packets",
        opt(&iface.statistics.get("rx_packets")),
        opt(&iface.statistics.get("tx_packets"))
    );
    let _ = writeln!(
        o,
        "  stats  {packets}; {}",
        if stats.is_empty() {
            "no errors or drops".to_string()
        } else {
            stats.join(", ")
        }
    );
}

/// NAPI: the device's sysfs defaults, then per queue what the netdev
/// netlink family says (its NAPI, the NAPI's IRQ, thread and settings) and
/// the queue's standard counters (qstats).
fn render_napi(o: &mut String, iface: &Interface) {
    render_napi_device(o, iface);
    let n = &iface.netdev;
    let listed = matches!(n.queues, Probe::Value(_)) || matches!(n.qstats, Probe::Value(_));
    if !listed {
        let why = match (&n.queues, &n.qstats) {
            (Probe::Missing(crate::base::Missing::NotSupported), _) => {
                "not supported by this kernel (queue-get/napi-get: Linux 6.8+)"
            }
            _ => "unknown",
        };
        let _ = writeln!(o, "  napi   per queue (netdev netlink): {why}");
        return;
    }
    render_napi_queues(o, iface);
}

/// The device-wide NAPI defaults from sysfs, and whether the kernel takes
/// per-NAPI settings (napi-set).
fn render_napi_device(o: &mut String, iface: &Interface) {
    let mut device: Vec<String> = [
        iface
            .napi_defer_hard_irqs
            .map(|v| format!("napi_defer_hard_irqs {v}")),
        iface
            .gro_flush_timeout
            .map(|v| format!("gro_flush_timeout {v}")),
        iface.threaded.as_ref().map(|v| format!("threaded {v}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Probe::Value(set) = iface.netdev.napi_set {
        device.push(format!(
            "napi-set {}",
            if set { "yes" } else { "no (Linux 6.13+)" }
        ));
    }
    if !device.is_empty() {
        let _ = writeln!(o, "  napi   device {}", device.join("  "));
    }
}

/// The per-queue NAPI table (netdev netlink): each RX then TX queue with
/// its NAPI's columns and qstats, then the NAPIs no queue names.
fn render_napi_queues(o: &mut String, iface: &Interface) {
    let n = &iface.netdev;
    let napis = n.napis.value().map_or(&[][..], Vec::as_slice);
    if napis.is_empty() && n.napis.value().is_some() {
        let _ = writeln!(
            o,
            "  napi   no NAPI instance (veth has NAPI only with GRO or XDP on)"
        );
    }
    let qstats = n.qstats.value();
    if napis.is_empty() && qstats.is_none() {
        let _ = writeln!(o, "  qstats {}", probe(&n.qstats, |_| String::new()));
        return;
    }
    let _ = writeln!(
        o,
        "  {:<6} {:<6} {:>4} {:>7} {:>6} {:>10} {:>12}  qstats",
        "queue", "napi", "irq", "thread", "defer", "gro-flush", "irq-suspend"
    );
    let mut shown = Vec::new();
    let queues: Vec<(&str, u32)> = iface
        .rx_queues
        .iter()
        .map(|q| ("rx", q.index))
        .chain(iface.tx_queues.iter().map(|q| ("tx", q.index)))
        .collect();
    let mut by_position = false;
    for (direction, index) in queues {
        let napi_part = match queue_napi(n, napis, direction, index) {
            Some(rx) => {
                shown.push(rx.napi.id);
                by_position |= rx.by_position;
                napi_columns(rx.napi, rx.by_position)
            }
            None => format!(
                "{:<6} {:>4} {:>7} {:>6} {:>10} {:>12}",
                "-", "", "", "", "", ""
            ),
        };
        let stats = queue_stats_text(qstats, direction, index);
        let queue = format!("{direction}-{index}");
        let _ = writeln!(o, "  {queue:<6} {napi_part}  {stats}");
    }
    let others: Vec<String> = napis
        .iter()
        .filter(|x| !shown.contains(&x.id))
        .map(|x| napi_columns(x, false))
        .collect();
    for other in others {
        let _ = writeln!(o, "  {:<6} {other}", "other");
    }
    if qstats.is_none() {
        let _ = writeln!(o, "  qstats {}", probe(&n.qstats, |_| String::new()));
    }
    if by_position {
        let _ = writeln!(
            o,
            "  * the driver names no queue's NAPI: one NAPI per RX queue, matched in id order"
        );
    }
}

/// The NAPI serving a queue: an RX queue's as `napi_of_rx` finds it (named,
/// or by position); a TX queue's only as queue-get names it.
fn queue_napi<'a>(
    n: &'a NetdevState,
    napis: &'a [Napi],
    direction: &str,
    index: u32,
) -> Option<RxNapi<'a>> {
    if direction == "rx" {
        n.napi_of_rx(index).ok()
    } else {
        n.queues
            .value()
            .and_then(|qs| qs.iter().find(|q| q.direction == "tx" && q.index == index))
            .and_then(|q| q.napi_id)
            .and_then(|id| napis.iter().find(|x| x.id == id))
            .map(|napi| RxNapi {
                napi,
                by_position: false,
            })
    }
}

/// A queue's qstats counters without their direction prefix, or `-`.
fn queue_stats_text(qstats: Option<&Vec<QueueStats>>, direction: &str, index: u32) -> String {
    qstats
        .and_then(|all| {
            all.iter()
                .find(|s| s.direction == direction && s.index == index)
        })
        .map(|s| {
            s.counters
                .iter()
                .map(|(k, v)| format!("{} {v}", k.trim_start_matches(&format!("{direction}-"))))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "-".to_string())
}

/// A NAPI's id, IRQ, thread and settings as columns (`-`: none; `?`: this
/// kernel does not report it).
fn napi_columns(napi: &Napi, by_position: bool) -> String {
    let id = format!("{}{}", napi.id, if by_position { "*" } else { "" });
    let dash = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let known = |v: Option<u64>, show: fn(u64) -> String| v.map_or("?".to_string(), show);
    format!(
        "{:<6} {:>4} {:>7} {:>6} {:>10} {:>12}",
        id,
        dash(napi.irq),
        dash(napi.thread_pid),
        known(napi.defer_hard_irqs.map(u64::from), |v| v.to_string()),
        known(napi.gro_flush_timeout_ns, nanos),
        known(napi.irq_suspend_timeout_ns, nanos),
    )
}

/// Nanoseconds the short way: `0`, `20us`, `20ms`, `1500ns`.
fn nanos(ns: u64) -> String {
    match ns {
        0 => "0".to_string(),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

fn render_driver(o: &mut String, d: &DriverSettings) {
    render_channels_rings_coalesce(o, d);
    render_offloads(o, d);
    render_rss(o, d);
    render_queue_packets(o, d);
}

/// Channel counts against their maximum, ring sizes, interrupt coalescing.
fn render_channels_rings_coalesce(o: &mut String, d: &DriverSettings) {
    let channels = probe(&d.channels, |c| {
        let parts: Vec<String> = [
            ("combined", c.combined, c.max_combined),
            ("rx", c.rx, c.max_rx),
            ("tx", c.tx, c.max_tx),
            ("other", c.other, c.max_other),
        ]
        .iter()
        .filter(|(_, cur, max)| *cur > 0 || *max > 0)
        .map(|(n, cur, max)| format!("{n} {cur}/{max}"))
        .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(" ")
        }
    });
    let rings = probe(&d.rings, |r| {
        format!("rx {}/{} tx {}/{}", r.rx, r.rx_max, r.tx, r.tx_max)
    });
    let coalesce = probe(&d.coalesce, |c| {
        format!(
            "rx-usecs {} rx-frames {} tx-usecs {} tx-frames {} adaptive rx {} tx {}",
            c.rx_usecs,
            c.rx_frames,
            c.tx_usecs,
            c.tx_frames,
            on_off(c.adaptive_rx),
            on_off(c.adaptive_tx)
        )
    });
    let _ = writeln!(o, "  channels {channels}   rings {rings}");
    let _ = writeln!(o, "  coalesce {coalesce}");
}

/// The offloads worth a look, on or off, marked where the driver fixes them.
fn render_offloads(o: &mut String, d: &DriverSettings) {
    let features = probe(&d.features, |f| {
        // The offloads the tuning articles talk about, by their kernel names.
        const SHOWN: &[(&str, &str)] = &[
            ("rx-gro", "generic-receive-offload"),
            ("gro-hw", "rx-gro-hw"),
            ("lro", "large-receive-offload"),
            ("ntuple", "ntuple-filters"),
            ("rxhash", "receive-hashing"),
            ("tso", "tcp-segmentation-offload"),
            ("gso", "generic-segmentation-offload"),
            ("rx-udp-gro-fwd", "rx-udp-gro-forwarding"),
        ];
        SHOWN
            .iter()
            .filter_map(|(short, name)| {
                f.get(*name).map(|feat| {
                    format!(
                        "{short} {}{}",
                        on_off(feat.active),
                        if feat.changeable { "" } else { "(fixed)" }
                    )
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    });
    let _ = writeln!(o, "  offload {features}");
}

/// How the RSS indirection table spreads over the queues, and the fields
/// each flow type hashes.
fn render_rss(o: &mut String, d: &DriverSettings) {
    let rss = probe(&d.rss_indirection, |table| {
        let mut per_queue: std::collections::BTreeMap<u32, usize> = Default::default();
        for q in table {
            *per_queue.entry(*q).or_default() += 1;
        }
        let weights: Vec<String> = per_queue.iter().map(|(q, n)| format!("q{q}:{n}")).collect();
        format!("{} entries ({})", table.len(), weights.join(" "))
    });
    let hashes: Vec<String> = ["tcp4", "udp4", "tcp6", "udp6"]
        .iter()
        .map(|flow| {
            let text = d
                .rx_flow_hash
                .get(*flow)
                .map(|p| {
                    probe(p, |h| {
                        if h.fields.is_empty() {
                            "none".to_string()
                        } else {
                            h.fields.join("+")
                        }
                    })
                })
                .unwrap_or_else(|| "unknown".to_string());
            format!("{flow} {text}")
        })
        .collect();
    let _ = writeln!(o, "  rss    {rss}   flow-hash {}", hashes.join("  "));
}

/// Packets per queue from the driver's per-queue statistics.
fn render_queue_packets(o: &mut String, d: &DriverSettings) {
    let qstats = probe(&d.queue_stats, |qs| {
        let mut parts = Vec::new();
        for q in qs {
            if let Some(p) = q.counters.get("packets") {
                parts.push(format!("{}{} {p}", q.direction, q.index));
            }
        }
        if parts.is_empty() {
            "no per-queue packet counters".to_string()
        } else {
            parts.join(" ")
        }
    });
    let _ = writeln!(o, "  queue packets {qstats}");
}

/// XDP programs and features, and the ntuple rules.
fn render_steering(o: &mut String, iface: &Interface) {
    let xdp = probe(&iface.xdp, |x| {
        let programs = if x.programs.is_empty() {
            "no program".to_string()
        } else {
            x.programs
                .iter()
                .map(|p| {
                    format!(
                        "{} {} (id {})",
                        p.mode.name(),
                        p.name.as_deref().unwrap_or("?"),
                        p.id
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let features = probe(&x.features, |f| {
            if f.actions.is_empty() {
                "none".to_string()
            } else {
                f.actions.join(" ")
            }
        });
        format!("{programs}   features {features}")
    });
    let _ = writeln!(o, "  xdp    {xdp}");
    let ntuple = probe(&iface.driver_settings.ntuple, |t| {
        let mut text = format!("{} rule(s) of {}", t.rules.len(), t.size);
        for r in t.rules.iter().take(8) {
            let _ = write!(text, "; loc {} {}", r.location, r.value_text());
        }
        if t.rules.len() > 8 {
            text.push_str("; ... (--json lists all)");
        }
        text
    });
    let _ = writeln!(o, "  ntuple {ntuple}");
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn render_kernel(o: &mut String, host: &Host) {
    let _ = writeln!(o, "\nkernel");
    // Group by prefix so the block stays short: one line per prefix, wrapped.
    let mut groups: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for (name, value) in &host.sysctls {
        let (prefix, short) = name.rsplit_once('.').unwrap_or(("", name));
        let shown = if value.contains(' ') {
            format!("{short}=\"{value}\"")
        } else {
            format!("{short}={value}")
        };
        groups.entry(prefix).or_default().push(shown);
    }
    for (prefix, items) in groups {
        let mut line = format!("  {prefix:<9}");
        for item in items {
            if line.len() + item.len() + 1 > 110 {
                let _ = writeln!(o, "{line}");
                line = format!("  {:<9}", "");
            }
            line.push(' ');
            line.push_str(&item);
        }
        let _ = writeln!(o, "{line}");
    }
    let irqbalance = if host.irqbalance.running {
        format!(
            "running (pid {})",
            host.irqbalance
                .pids
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else {
        "not running".to_string()
    };
    let conntrack = if host.conntrack.loaded {
        format!(
            "tracking {} of max {}",
            opt(&host.conntrack.count),
            opt(&host.conntrack.max)
        )
    } else {
        "not loaded".to_string()
    };
    let _ = writeln!(
        o,
        "  irqbalance {irqbalance}   AF_PACKET sockets {}   AF_XDP sockets {}   conntrack {conntrack}",
        host.packet_sockets.len(),
        host.af_xdp_sockets
            .map_or("unknown".to_string(), |n| n.to_string())
    );
}

/// Above this many CPUs the per-CPU table shows only the busiest ones;
/// `--json` has them all.
const CPU_ROWS_SHOWN: usize = 16;

fn render_counters(o: &mut String, host: &Host) {
    let scope = if host.in_netns() {
        " (per CPU: the whole host's, not only this namespace's; udp/tcp: this namespace's)"
    } else {
        ""
    };
    let _ = writeln!(o, "\ncounters since boot{scope}");
    render_cpu_counters(o, host);
    render_protocol_counters(o, &host.counters);
}

/// The per-CPU table: NET_RX/NET_TX softirqs, the share of RX, IRQ and
/// softirq time, and softnet's processed, dropped and squeezed; on a big
/// host the busiest rows, with the rest summed on one line.
fn render_cpu_counters(o: &mut String, host: &Host) {
    let c = &host.counters;
    let total_rx: u64 = c.softirqs.iter().map(|s| s.net_rx).sum();
    let rx_of = |cpu: u32| c.softirqs.iter().find(|s| s.cpu == cpu).map(|s| s.net_rx);
    let (shown, hidden) = cpu_rows_shown(host);
    let _ = writeln!(
        o,
        "  {:<5} {:>12} {:>5} {:>12} {:>6} {:>6} {:>12} {:>9} {:>9}",
        "cpu", "NET_RX", "rx%", "NET_TX", "irq%", "soft%", "processed", "dropped", "squeezed"
    );
    for cpu in &shown {
        render_cpu_counter_row(o, c, *cpu, total_rx);
    }
    if !hidden.is_empty() {
        let rx: u64 = hidden.iter().filter_map(|cpu| rx_of(*cpu)).sum();
        let share = if total_rx > 0 {
            100.0 * rx as f64 / total_rx as f64
        } else {
            0.0
        };
        let _ = writeln!(
            o,
            "  CPUs {} ({} more, no drops or squeezes): NET_RX {rx} ({share:.0}%) together",
            format_list(&hidden),
            hidden.len()
        );
    }
}

/// Which online CPUs get a row, and which are only summed: all of them up
/// to CPU_ROWS_SHOWN, else the busiest by NET_RX plus every CPU that
/// dropped or squeezed.
fn cpu_rows_shown(host: &Host) -> (Vec<u32>, Vec<u32>) {
    let c = &host.counters;
    let rx_of = |cpu: u32| c.softirqs.iter().find(|s| s.cpu == cpu).map(|s| s.net_rx);
    let net_of = |cpu: u32| c.softnet.iter().find(|s| s.cpu == cpu);
    let shown: Vec<u32> = host.online_cpus.clone();
    if shown.len() <= CPU_ROWS_SHOWN {
        return (shown, Vec::new());
    }
    let mut by_rx = shown.clone();
    by_rx.sort_by_key(|cpu| std::cmp::Reverse(rx_of(*cpu).unwrap_or(0)));
    let busiest: Vec<u32> = by_rx.into_iter().take(CPU_ROWS_SHOWN / 2).collect();
    shown.iter().partition(|cpu| {
        busiest.contains(cpu) || net_of(**cpu).is_some_and(|n| n.dropped > 0 || n.time_squeeze > 0)
    })
}

fn render_cpu_counter_row(o: &mut String, c: &host::Counters, cpu: u32, total_rx: u64) {
    let soft = c.softirqs.iter().find(|s| s.cpu == cpu);
    let time = c.cpu_time.iter().find(|t| t.cpu == cpu);
    let net = c.softnet.iter().find(|s| s.cpu == cpu);
    let pct = |part: fn(&host::CpuTime) -> u64| {
        time.filter(|t| t.total() > 0)
            .map(|t| format!("{:.1}", 100.0 * part(t) as f64 / t.total() as f64))
            .unwrap_or_else(|| "?".into())
    };
    let share = match (soft, total_rx) {
        (Some(s), total) if total > 0 => {
            format!("{:.0}", 100.0 * s.net_rx as f64 / total as f64)
        }
        _ => "?".to_string(),
    };
    let _ = writeln!(
        o,
        "  {:<5} {:>12} {:>5} {:>12} {:>6} {:>6} {:>12} {:>9} {:>9}",
        cpu,
        opt(&soft.map(|s| s.net_rx)),
        share,
        opt(&soft.map(|s| s.net_tx)),
        pct(|t| t.irq),
        pct(|t| t.softirq),
        opt(&net.map(|n| n.processed)),
        opt(&net.map(|n| n.dropped)),
        opt(&net.map(|n| n.time_squeeze)),
    );
}

/// The UDP and TCP counters where sockets lose datagrams and connections.
fn render_protocol_counters(o: &mut String, c: &host::Counters) {
    let pick = |map: &std::collections::BTreeMap<String, i64>, names: &[&str]| -> String {
        names
            .iter()
            .filter_map(|n| map.get(*n).map(|v| format!("{n} {v}")))
            .collect::<Vec<_>>()
            .join("  ")
    };
    let _ = writeln!(
        o,
        "  udp    {}",
        pick(
            &c.udp,
            &[
                "InDatagrams",
                "NoPorts",
                "InErrors",
                "RcvbufErrors",
                "SndbufErrors"
            ]
        )
    );
    if !c.udp6.is_empty() {
        let _ = writeln!(
            o,
            "  udp6   {}",
            pick(
                &c.udp6,
                &[
                    "InDatagrams",
                    "NoPorts",
                    "InErrors",
                    "RcvbufErrors",
                    "SndbufErrors"
                ]
            )
        );
    }
    let _ = writeln!(
        o,
        "  tcp    {}  {}",
        pick(&c.tcp, &["RetransSegs"]),
        pick(
            &c.tcp_ext,
            &[
                "ListenOverflows",
                "ListenDrops",
                "TCPBacklogDrop",
                "TCPRcvQDrop",
                "TCPZeroWindowDrop"
            ]
        )
    );
}
