//! `nettune trace`: drops of known reasons provoked in namespaces of the
//! test's own, counted by nettune and, in the same run, by bpftrace on the
//! same tracepoint and by the kernel's own counters (RcvbufErrors, the
//! netfilter rule's counter, the qdisc's dropped); NAPI polls across a
//! veth; nothing left in the kernel after kill -9; bad input refused
//! before anything is loaded.
//!
//! Other tests run at the same time on the machine: every count here is
//! of the test's own namespace (nettune --netns, bpftrace on the same
//! namespace inode), never host-wide.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::net::UdpSocket;
use std::os::unix::fs::MetadataExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A process of the test's, with its output read on threads; the line
/// `marker` (on stdout or stderr) says it is ready.
struct Running {
    child: Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Running {
    /// Start `cmd` and wait (at most 20 s) for a line starting with `marker`.
    fn start(mut cmd: Command, marker: &str) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let (tx, rx) = mpsc::channel::<String>();
        let read = |pipe: Box<dyn std::io::Read + Send>, tx: mpsc::Sender<String>| {
            std::thread::spawn(move || {
                let mut all = String::new();
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line.clone());
                    all.push_str(&line);
                    all.push('\n');
                }
                all
            })
        };
        let stdout = read(Box::new(child.stdout.take().expect("stdout")), tx.clone());
        let stderr = read(Box::new(child.stderr.take().expect("stderr")), tx);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.starts_with(marker) => break,
                Ok(line) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("no '{marker}' within 20 s; it said: {seen:?}");
                }
            }
        }
        Running {
            child,
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Send `signal` (to this process only, by its PID) and wait at most
    /// 30 s: exit code, stdout, stderr.
    fn finish(mut self, signal: i32) -> (Option<i32>, String, String) {
        // SAFETY: kill(2) on a child of ours that has not been waited for.
        unsafe { libc::kill(self.pid(), signal) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("pid {} did not end within 30 s", self.pid());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (
            status.code(),
            self.stdout.join().expect("stdout"),
            self.stderr.join().expect("stderr"),
        )
    }
}

fn inode(ns: &Netns) -> u64 {
    std::fs::metadata(format!("/run/netns/{}", ns.name))
        .expect("netns file")
        .ino()
}

/// bpftrace counting skb:kfree_skb per reason for packets whose device is
/// in namespace `ns` (tracefs mounted in a mount namespace of its own, so
/// the host's mounts stay as they are).
fn bpftrace_judge(ns: &Netns) -> Running {
    assert!(
        Command::new("bpftrace").arg("--version").output().is_ok(),
        "bpftrace is missing (scripts/test installs it)"
    );
    let program = format!(
        "tracepoint:skb:kfree_skb {{ $dev = ((struct sk_buff *)args->skbaddr)->dev; \
         if ($dev != 0 && $dev->nd_net.net->ns.inum == {}) {{ @[args->reason] = count(); }} }}",
        inode(ns)
    );
    let mut cmd = Command::new("timeout");
    cmd.args([
        "120",
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
    ])
    .arg(format!(
        "mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace -e '{program}'"
    ));
    Running::start(cmd, "Attaching")
}

/// `@[12]: 150` lines: reason code -> count.
fn bpftrace_counts(out: &str) -> BTreeMap<u64, u64> {
    out.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("@[")?;
            let (code, count) = rest.split_once("]: ")?;
            Some((code.parse().ok()?, count.trim().parse().ok()?))
        })
        .collect()
}

/// A nettune report's drops per reason (all layers), keyed by `key` of
/// each row (its name or its code).
fn by_reason<K: Ord>(report: &Value, key: impl Fn(&Value) -> K) -> BTreeMap<K, u64> {
    let mut out = BTreeMap::new();
    for row in report["rows"].as_array().expect("rows") {
        *out.entry(key(row)).or_default() += row["count"].as_u64().expect("count");
    }
    out
}

fn name(row: &Value) -> String {
    row["reason"].as_str().expect("reason").to_string()
}

fn code(row: &Value) -> u64 {
    row["code"].as_u64().expect("code")
}

fn tracer(args: &[&str]) -> Running {
    let mut cmd = nettune();
    cmd.args(args);
    Running::start(cmd, "trace ")
}

fn json_report(run: (Option<i32>, String, String), what: &str) -> Value {
    let (code, out, err) = run;
    assert_eq!(code, Some(1), "{what}: drops were seen, so exit 1: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: bad JSON {e}: {out}"))
}

/// `Udp: ... RcvbufErrors` of the calling thread's namespace.
fn rcvbuf_errors() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp").expect("snmp");
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let names: Vec<&str> = udp.next().expect("Udp header").split_whitespace().collect();
    let values: Vec<&str> = udp.next().expect("Udp values").split_whitespace().collect();
    let at = names
        .iter()
        .position(|n| *n == "RcvbufErrors")
        .expect("RcvbufErrors");
    values[at].parse().expect("number")
}

/// The qdisc's `dropped N` as `tc -s qdisc show` prints it.
fn qdisc_dropped(ns: &Netns, dev: &str) -> u64 {
    let out = sh(&[
        "ip", "netns", "exec", &ns.name, "tc", "-s", "qdisc", "show", "dev", dev,
    ]);
    let at = out.find("dropped ").expect("dropped");
    out[at + 8..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count")
}

/// The packets counter of the rule in table `table`.
fn nft_counter(ns: &Netns, table: &str) -> u64 {
    let out = sh(&[
        "ip", "netns", "exec", &ns.name, "nft", "list", "table", "inet", table,
    ]);
    let at = out.find("packets ").expect("counter");
    out[at + 8..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count")
}

/// Two namespaces of the test's, a sender and a receiver, joined by a
/// one-queue veth (10.NET.0.1 -> 10.NET.0.2), without IPv6: its neighbour
/// discovery and multicast reports come at any time, and would fall
/// between the moments two tracers stop. Returns them and the two ends.
fn sender_and_receiver(net: u8) -> (Netns, Netns, String, String) {
    let tx = Netns::new("trt");
    let rx = Netns::new("trr");
    for ns in [&tx, &rx] {
        for scope in ["all", "default"] {
            ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{scope}.disable_ipv6=1"),
            ]);
        }
    }
    let (a, b) = veth_pair(&tx, &rx, net, Some(1));
    tx.wait_up(&[a.as_str()]);
    (tx, rx, a, b)
}

/// Drops of four known reasons, in one run, counted by two nettune tracers
/// at once, bpftrace and the kernel's counters: NO_SOCKET (datagrams to a
/// closed port), SOCKET_RCVBUFF (a flood into a tiny buffer; RcvbufErrors),
/// NETFILTER_DROP (an nftables rule; its counter), QDISC_DROP (tbf with a
/// tiny limit; the qdisc's dropped).
#[test]
fn drops_of_known_reasons_agree_with_bpftrace_and_the_kernel_counters() {
    if skip_unless_root("drops_of_known_reasons_agree_with_bpftrace_and_the_kernel_counters") {
        return;
    }
    let _serial = measuring();
    let (tx, _rx, a, _b) = sender_and_receiver(61);
    tx.exec(&[
        "tc", "qdisc", "add", "dev", &a, "root", "tbf", "rate", "1mbit", "burst", "3000", "limit",
        "3000",
    ]);
    let table = "nettune_trace_test";
    tx.exec(&["nft", "add", "table", "inet", table]);
    tx.exec(&[
        "nft",
        "add",
        "chain",
        "inet",
        table,
        "input",
        "{ type filter hook input priority 0 ; }",
    ]);
    // The ports: one closed (bound, then released), one the rule drops,
    // one with a reader that never reads.
    let (closed, filtered, sink, rcvbuf_before) = tx.inside(|| {
        let closed = UdpSocket::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let filtered = UdpSocket::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let sink = UdpSocket::bind("127.0.0.1:0").expect("bind");
        nix::sys::socket::setsockopt(&sink, nix::sys::socket::sockopt::RcvBuf, &1).expect("rcvbuf");
        (closed, filtered, sink, rcvbuf_errors())
    });
    let filtered_s = filtered.to_string();
    tx.exec(&[
        "nft",
        "add",
        "rule",
        "inet",
        table,
        "input",
        "udp",
        "dport",
        &filtered_s,
        "counter",
        "drop",
    ]);
    let qdisc_before = qdisc_dropped(&tx, &a);

    let judge = bpftrace_judge(&tx);
    let all = tracer(&[
        "trace",
        "drops",
        "--netns",
        &tx.name,
        "--duration",
        "60",
        "--interval",
        "0.5",
        "--json",
    ]);
    let some = tracer(&[
        "trace",
        "drops",
        "--netns",
        &tx.name,
        "--duration",
        "60",
        "--json",
        "--reason",
        "NO_SOCKET,NETFILTER_DROP",
        "--protocol",
        "udp",
        "--iface",
        "lo",
    ]);

    let (sent_closed, sent_filtered, sent_sink, sent_veth) = (200u64, 150u64, 400u64, 300u64);
    let sink_addr = sink.local_addr().expect("addr");
    let rcvbuf_after = tx.inside(|| {
        let out = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let payload = [7u8; 1000];
        for _ in 0..sent_closed {
            let _ = out.send_to(&payload[..32], ("127.0.0.1", closed));
        }
        for _ in 0..sent_filtered {
            out.send_to(&payload[..32], ("127.0.0.1", filtered))
                .expect("send");
        }
        for _ in 0..sent_sink {
            out.send_to(&payload, sink_addr).expect("send");
        }
        let far = UdpSocket::bind("10.61.0.1:0").expect("bind");
        for _ in 0..sent_veth {
            // The qdisc's drops come back as ENOBUFS on some sends.
            let _ = far.send_to(&payload, "10.61.0.2:9");
        }
        std::thread::sleep(Duration::from_millis(300));
        rcvbuf_errors()
    });
    let qdisc = qdisc_dropped(&tx, &a) - qdisc_before;
    let nft = nft_counter(&tx, table);

    let all = json_report(all.finish(libc::SIGINT), "trace drops");
    let some = json_report(some.finish(libc::SIGTERM), "trace drops --reason");
    let (_, judge_out, judge_err) = judge.finish(libc::SIGINT);
    // Closing the sink frees what it never read: only now, after the
    // tracers (bpftrace cannot see through UDP's reuse of skb->dev).
    drop(sink);
    let judge = bpftrace_counts(&judge_out);
    assert!(
        !judge.is_empty(),
        "bpftrace counted nothing: {judge_out} {judge_err}"
    );

    let counts = by_reason(&all, name);
    let count = |reason: &str| counts.get(reason).copied().unwrap_or(0);
    // The kernel's own counters and what was sent.
    assert_eq!(count("NO_SOCKET"), sent_closed, "{counts:?}");
    assert_eq!(count("NETFILTER_DROP"), sent_filtered, "{counts:?}");
    assert_eq!(count("NETFILTER_DROP"), nft);
    assert_eq!(
        count("SOCKET_RCVBUFF"),
        rcvbuf_after - rcvbuf_before,
        "{counts:?}"
    );
    assert!(
        count("SOCKET_RCVBUFF") > 0,
        "the tiny buffer overflowed: {counts:?}"
    );
    assert_eq!(count("QDISC_DROP"), qdisc, "{counts:?}");
    assert!(qdisc > 0, "the tbf limit dropped: {counts:?}");
    // bpftrace on the same tracepoint: every reason alike.
    assert_eq!(
        by_reason(&all, code),
        judge,
        "nettune {counts:?} vs bpftrace {judge:?}"
    );
    // Layers and fixes.
    let row = |reason: &str| {
        all["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["reason"] == reason)
            .unwrap_or_else(|| panic!("no {reason}"))
            .clone()
    };
    assert_eq!(row("SOCKET_RCVBUFF")["layer"], "udp");
    assert_eq!(row("NETFILTER_DROP")["layer"], "netfilter");
    assert_eq!(row("QDISC_DROP")["layer"], "qdisc");
    assert!(row("SOCKET_RCVBUFF")["advice"]["fix"]
        .as_str()
        .is_some_and(|f| f.contains("SO_RCVBUF")));
    let location = row("SOCKET_RCVBUFF")["locations"][0]["location"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(location.contains("+0x"), "a function+offset: {location}");
    // Snapshots add up to the report.
    let snapshots: u64 = all["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["total"].as_u64().expect("total"))
        .sum();
    assert_eq!(snapshots, all["total"].as_u64().expect("total"));
    // The second tracer, at the same time, kept its reasons, protocol and
    // interface (both reasons happen on lo) and saw exactly as many.
    let other = by_reason(&some, name);
    assert_eq!(
        other,
        [
            ("NETFILTER_DROP".to_string(), sent_filtered),
            ("NO_SOCKET".to_string(), sent_closed)
        ]
        .into_iter()
        .collect()
    );
}

/// The ids of the BPF programs and maps process `pid` holds, from
/// /proc/PID/fdinfo.
fn bpf_objects(pid: i32) -> (Vec<u32>, Vec<u32>) {
    let (mut progs, mut maps) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .expect("fdinfo")
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            if let Some(id) = line.strip_prefix("prog_id:") {
                progs.push(id.trim().parse().expect("id"));
            }
            if let Some(id) = line.strip_prefix("map_id:") {
                maps.push(id.trim().parse().expect("id"));
            }
        }
    }
    progs.sort();
    progs.dedup();
    maps.sort();
    maps.dedup();
    (progs, maps)
}

fn bpftool_lists(kind: &str, id: u32) -> bool {
    Command::new("bpftool")
        .args([kind, "show", "id", &id.to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Two tracers at once, both killed with SIGKILL: every program, map and
/// attachment they made is gone (bpftool finds none of their ids).
#[test]
fn nothing_stays_in_the_kernel_after_kill_9() {
    if skip_unless_root("nothing_stays_in_the_kernel_after_kill_9") {
        return;
    }
    assert!(
        Command::new("bpftool").arg("version").output().is_ok(),
        "bpftool is missing (scripts/test installs it)"
    );
    let ns = Netns::new("trk");
    let drops = tracer(&["trace", "drops", "--netns", &ns.name, "--duration", "60"]);
    let softirq = tracer(&["trace", "softirq", "--netns", &ns.name, "--duration", "60"]);
    let mut held = Vec::new();
    for run in [&drops, &softirq] {
        let (progs, maps) = bpf_objects(run.pid());
        assert!(
            !progs.is_empty() && !maps.is_empty(),
            "pid {} holds no BPF objects",
            run.pid()
        );
        for &id in &progs {
            assert!(bpftool_lists("prog", id), "program {id} is loaded");
        }
        held.push((progs, maps));
    }
    // One program per tracepoint: kfree_skb; softirq raise/entry/exit and
    // napi_poll.
    assert_eq!(held[0].0.len(), 1);
    assert_eq!(held[1].0.len(), 4);
    let attachments = sh(&["bpftool", "perf"]);
    for (progs, _) in &held {
        for id in progs {
            assert!(
                attachments.contains(&format!("prog_id {id} ")),
                "{id} attached: {attachments}"
            );
        }
    }
    for run in [drops, softirq] {
        let (code, _, _) = run.finish(libc::SIGKILL);
        assert_eq!(code, None, "killed by a signal");
    }
    // Maps are freed after an RCU grace period: allow a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<(String, u32)> = held
            .iter()
            .flat_map(|(progs, maps)| {
                progs
                    .iter()
                    .map(|&id| ("prog".to_string(), id))
                    .chain(maps.iter().map(|&id| ("map".to_string(), id)))
            })
            .filter(|(kind, id)| bpftool_lists(kind, *id))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still in the kernel after kill -9: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let attachments = sh(&["bpftool", "perf"]);
    for (progs, _) in &held {
        for id in progs {
            assert!(
                !attachments.contains(&format!("prog_id {id} ")),
                "{id} still attached"
            );
        }
    }
}

/// NAPI polls of a veth with GRO on (one NAPI per RX queue), across two
/// namespaces: the receiving device and its RX queue, every datagram
/// counted as a packet, NET_RX runs on some CPU.
#[test]
fn softirq_shows_the_veth_napi_and_its_queue() {
    if skip_unless_root("softirq_shows_the_veth_napi_and_its_queue") {
        return;
    }
    let _serial = measuring();
    let (tx, rx, a, b) = sender_and_receiver(62);
    for (ns, dev) in [(&tx, &a), (&rx, &b)] {
        ns.exec(&["ethtool", "-K", dev, "gro", "on", "tso", "off"]);
    }
    let run = tracer(&[
        "trace",
        "softirq",
        "--netns",
        &rx.name,
        "--iface",
        &b,
        "--duration",
        "60",
        "--json",
    ]);
    let sent = 2_000u64;
    tx.inside(|| {
        let out = UdpSocket::bind("10.62.0.1:0").expect("bind");
        for _ in 0..sent {
            out.send_to(&[1u8; 64], "10.62.0.2:9").expect("send");
        }
        std::thread::sleep(Duration::from_millis(300));
    });
    let (code, out, err) = run.finish(libc::SIGINT);
    assert_eq!(code, Some(0), "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let napis = report["napis"].as_array().expect("napis");
    assert_eq!(napis.len(), 1, "only {b}'s NAPI: {napis:?}");
    let napi = &napis[0];
    assert_eq!(napi["device"], b.as_str());
    assert_eq!(napi["queue"], 0);
    assert!(napi["napi_id"].as_u64().is_some_and(|id| id > 0));
    let packets = napi["packets"].as_u64().expect("packets");
    assert!(packets >= sent, "{packets} packets of {sent} datagrams");
    let polls = napi["polls"].as_u64().expect("polls");
    assert!(polls > 0 && polls <= packets);
    let runs: u64 = report["cpus"]
        .as_array()
        .expect("cpus")
        .iter()
        .map(|c| c["runs"].as_u64().expect("runs"))
        .sum();
    assert!(runs > 0, "NET_RX ran");
}

/// Bad input is one line and exit 2, found before anything is loaded: an
/// unprivileged run gets the same answer as root.
#[test]
fn bad_input_is_refused_before_anything_is_loaded() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["trace", "drops", "--reason", "NO_SUCH_REASON"],
            "not one of this kernel's",
        ),
        (
            &["trace", "drops", "--netns", "nettune-no-such-ns"],
            "'nettune-no-such-ns' does not exist",
        ),
        (
            &["trace", "drops", "--iface", "nettune-nosuch0"],
            "interface 'nettune-nosuch0' does not exist",
        ),
        (
            &["trace", "softirq", "--iface", "nettune-nosuch0"],
            "interface 'nettune-nosuch0' does not exist",
        ),
        (&["trace", "drops", "--duration", "50ms"], "out of range"),
        (&["trace", "drops", "--duration", "48h"], "out of range"),
        (&["trace", "softirq", "--interval", "0"], "not an interval"),
        (&["trace", "drops", "--protocol", "sctp"], "possible values"),
    ];
    for (args, expected) in cases {
        for unprivileged in [false, true] {
            if unprivileged && !is_root() {
                continue;
            }
            let mut cmd = nettune();
            cmd.args(*args);
            if unprivileged {
                std::os::unix::process::CommandExt::uid(&mut cmd, 65534);
                std::os::unix::process::CommandExt::gid(&mut cmd, 65534);
            }
            let (code, _, err) = split(cmd.output().expect("run"));
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(expected), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        }
    }
}

/// Without permission to load BPF: one line naming what is needed, exit 2.
#[test]
fn no_permission_says_what_is_needed() {
    if skip_unless_root("no_permission_says_what_is_needed") {
        return;
    }
    for args in [["trace", "drops"], ["trace", "softirq"]] {
        let mut cmd = nettune();
        cmd.args(args).args(["--duration", "1"]);
        std::os::unix::process::CommandExt::uid(&mut cmd, 65534);
        std::os::unix::process::CommandExt::gid(&mut cmd, 65534);
        let (code, _, err) = split(cmd.output().expect("run"));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("needs root"), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// Every reason the running kernel lists is in docs/trace.md's table with
/// the layer nettune gives it (or among the unmapped ones).
#[test]
fn the_docs_list_every_reason_of_this_kernel() {
    let listing = run_json(&["trace", "reasons", "--json"]);
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/trace.md"),
    )
    .expect("docs/trace.md");
    let reasons = listing["reasons"].as_array().expect("reasons");
    assert!(reasons.len() > 50, "{} reasons", reasons.len());
    for r in reasons {
        let name = r["name"].as_str().expect("name");
        let layer = r["layer"].as_str().expect("layer");
        let row = format!("| `{name}` | {layer} |");
        assert!(
            docs.contains(&row),
            "docs/trace.md lacks the row starting {row}"
        );
    }
    assert_eq!(
        listing["unmapped"],
        serde_json::json!([]),
        "every reason placed"
    );
}

/// The raw-tracepoint program that reads through bpf_probe_read_kernel
/// (what a kernel that refuses the typed program gets) counts what the
/// typed one counts: loaded and attached here by hand beside a nettune
/// tracer, both filtered to the test's namespace.
#[test]
fn the_probe_read_fallback_counts_like_the_typed_program() {
    use nettune::base::bpf;
    use nettune::base::Root;
    use nettune::trace::drops::DropKey;
    use nettune::trace::layout::DropLayout;
    use nettune::trace::maps::PerCpuMap;
    use nettune::trace::programs::{self, Access, Filter};
    if skip_unless_root("the_probe_read_fallback_counts_like_the_typed_program") {
        return;
    }
    let ns = Netns::new("trp");
    let btf = nettune::trace::read_btf(&Root::live()).expect("btf");
    let layout = DropLayout::read(&btf).expect("layout");
    let cpus = nettune::host::topology::possible_cpus(&Root::live())
        .expect("cpus")
        .len();
    let counts = PerCpuMap::create(
        bpf::BPF_MAP_TYPE_PERCPU_HASH,
        programs::DROP_KEY_LEN,
        1,
        64,
        cpus,
        "nt_test_drops",
    )
    .expect("map");
    let stats = PerCpuMap::create(
        bpf::BPF_MAP_TYPE_PERCPU_ARRAY,
        4,
        1,
        programs::STATS,
        cpus,
        "nt_test_stats",
    )
    .expect("map");
    let filter = Filter {
        netns_inum: Some(inode(&ns) as u32),
        ifindex: None,
    };
    let insns = programs::drops(
        &layout,
        filter,
        Access::ProbeRead,
        counts.raw_fd(),
        stats.raw_fd(),
    )
    .expect("assemble");
    let prog = bpf::prog_load(&bpf::Program {
        prog_type: bpf::BPF_PROG_TYPE_RAW_TRACEPOINT,
        expected_attach_type: 0,
        attach_btf_id: 0,
        insns: &insns,
        name: "nt_test_drops",
        license: programs::LICENSE,
        what: "tracing",
    })
    .expect("the verifier takes the probe-read program");
    let link = bpf::raw_tracepoint_open(Some("kfree_skb"), &prog).expect("attach");
    let typed = tracer(&[
        "trace",
        "drops",
        "--netns",
        &ns.name,
        "--duration",
        "60",
        "--json",
    ]);
    let sent = 120u64;
    ns.inside(|| {
        let out = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let closed = UdpSocket::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr");
        for _ in 0..sent {
            let _ = out.send_to(b"x", closed);
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    let typed = json_report(typed.finish(libc::SIGINT), "trace drops");
    drop(link);
    let mut fallback: BTreeMap<u64, u64> = BTreeMap::new();
    let mut udp = 0;
    for (raw, per_cpu) in counts.all().expect("read") {
        let key = DropKey::decode(&raw).expect("key");
        let n: u64 = per_cpu.iter().map(|c| c[0]).sum();
        *fallback.entry(u64::from(key.reason)).or_default() += n;
        if key.l4 == 17 {
            udp += n;
        }
    }
    assert_eq!(fallback, by_reason(&typed, code));
    assert_eq!(fallback.values().sum::<u64>(), sent);
    assert_eq!(udp, sent, "the protocol read from the packet");
}
