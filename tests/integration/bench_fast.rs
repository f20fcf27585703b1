//! The fast paths: UDP GSO/GRO (`udp-flood --gso`, `udp-sink --gro`) and
//! the io_uring engines' start-up check, run as a user runs them.
//!
//! GSO/GRO accounting is checked exactly: every segment carries its own
//! sequence number, and in a namespace of its own a sent packet is either
//! received or dropped at the socket, which the kernel counts per
//! datagram it queues: a whole super-datagram for a UDP_GRO socket, each
//! segment for a plain one.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::bench_udp::{i, nettune, sink_and_flood, u, Running};
use crate::common::{measuring, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_nettune");
const SEGMENTS: u64 = 64;

/// A paced flood of 64-segment sends into a UDP_GRO sink and a plain one:
/// every segment arrives and is numbered; the GRO sink takes them 64 to a
/// receive, the plain one one by one.
///
/// Nothing here depends on how fast this machine is at the moment: a
/// loaded machine makes the pacer send fewer (a sender off its CPU for
/// longer than the pacer's 10 ms of depth loses that time), never more
/// than asked, and whatever it sends must arrive, counted exactly. The
/// sink listens 3 s for a 1 s flood: 2 s for the flood to start.
fn gso_segments_arrive_whole_into_gro_and_plain_sinks(engine: &str) {
    let _serial = measuring();
    for gro in [true, false] {
        let mut sink_args = vec![
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "3",
            "--rcvbuf",
            "8388608",
        ];
        if gro {
            sink_args.push("--gro");
        }
        let (sink, flood) = sink_and_flood(
            engine,
            None,
            &sink_args,
            None,
            // 64,000 packets/s: one 64-segment send per millisecond.
            &["--gso", "64", "--rate", "64000", "--duration", "1"],
            None,
        );
        let sent = u(&flood, "/packets");
        // Whole 64-segment sends, at most about the rate asked (64,000 in
        // 1 s, the pacer's first call and the end of the last interval).
        assert!(sent > 0 && sent <= 66_000, "sent {sent}");
        assert_eq!(sent % SEGMENTS, 0, "whole sends only: {flood:#}");
        assert!(f64_at(&flood, "/pps") <= 70_400.0, "{flood:#}");
        assert_eq!(u(&flood, "/gso_segments"), SEGMENTS);
        assert_eq!(u(&sink, "/packets"), sent, "gro {gro}: {sink:#}");
        assert_eq!(u(&sink, "/bytes"), sent * 32);
        assert_eq!(u(&sink, "/sequence/received"), sent);
        assert_eq!(u(&sink, "/sequence/lost"), 0);
        assert_eq!(u(&sink, "/sequence/without_header"), 0);
        assert_eq!(sink["gro"], Value::Bool(gro));
        assert_eq!(sink["engine"], engine);
        let datagrams = u(&sink, "/datagrams");
        if gro {
            assert_eq!(datagrams * SEGMENTS, sent, "{sink:#}");
        } else {
            assert_eq!(datagrams, sent, "{sink:#}");
        }
        assert!(f64_at(&sink, "/cpu_ns_per_packet") > 0.0, "{sink:#}");
        assert!(f64_at(&flood, "/cpu_ns_per_packet") > 0.0, "{flood:#}");
    }
}

fn f64_at(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

/// An unpaced 64-segment flood into a socket buffer of a few datagrams, in
/// a namespace of its own. The flood sends whole 64-segment messages; each
/// one is received whole or dropped whole (a UDP_GRO socket queues the
/// super-datagram as one: RcvbufErrors counts it once), so:
/// - sent = received + 64 x the socket's drops (+ 64 x CPU backlog drops,
///   a count shared with every namespace);
/// - loss by sequence is whole messages (a multiple of 64), at most the
///   socket's drops: what was lost after the last packet received cannot
///   be told from packets still to come.
///
/// A plain socket has the kernel cut each message into 64 datagrams first,
/// each queued or dropped on its own: sent = received + drops.
fn gso_gro_accounting_is_exact_under_loss(engine: &str) {
    let test = format!("gso_gro_accounting_is_exact_under_loss ({engine})");
    if crate::common::skip_unless_root(&test) {
        return;
    }
    let _serial = measuring();
    for gro in [true, false] {
        let ns = Netns::new("bg");
        let mut sink_args = vec![
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "2.5",
            "--rcvbuf",
            "2048",
        ];
        if gro {
            sink_args.push("--gro");
        }
        let (sink, flood) = sink_and_flood(
            engine,
            Some(&ns),
            &sink_args,
            Some(&ns),
            &["--gso", "64", "--duration", "1"],
            None,
        );
        let sent = u(&flood, "/packets");
        let received = u(&sink, "/packets");
        let lost = u(&sink, "/sequence/lost");
        let drops =
            (i(&sink, "/kernel/udp_rcvbuf_errors") + i(&sink, "/kernel/udp_mem_errors")) as u64;
        let backlog = u(&sink, "/kernel/softnet_dropped");
        assert_eq!(sent % SEGMENTS, 0, "whole messages only: {flood:#}");
        assert!(
            drops > 0,
            "gro {gro}: no drops with a tiny buffer: {sink:#}"
        );
        assert_eq!(u(&sink, "/sequence/received"), received);
        assert_eq!(u(&sink, "/sequence/duplicates"), 0);
        assert_eq!(u(&sink, "/sequence/without_header"), 0);
        let per_drop = if gro { SEGMENTS } else { 1 };
        assert!(
            received + per_drop * drops <= sent,
            "gro {gro}: {received} + {per_drop} x {drops} > {sent}"
        );
        assert!(
            sent <= received + per_drop * drops + SEGMENTS * backlog,
            "gro {gro}: {sent} unaccounted: {received} received, {drops} drops, {backlog} backlog"
        );
        assert!(
            lost <= per_drop * drops + SEGMENTS * backlog,
            "gro {gro}: lost {lost} > drops"
        );
        if gro {
            assert_eq!(received % SEGMENTS, 0, "{sink:#}");
            assert_eq!(lost % SEGMENTS, 0, "lost {lost}: not whole messages");
            assert_eq!(u(&sink, "/datagrams") * SEGMENTS, received);
        }
        assert!(lost > 0, "gro {gro}: {sink:#}");
    }
}

each_engine!(
    gso_segments_arrive_whole_into_gro_and_plain_sinks,
    gso_gro_accounting_is_exact_under_loss,
);

/// Segment counts the kernel or a datagram cannot carry: exit 2 naming the
/// value and the limit, before anything is sent.
#[test]
fn gso_beyond_the_kernel_or_the_datagram_exits_2() {
    let cases: [(&[&str], &str); 3] = [
        (&["--gso", "200"], "UDP_MAX_SEGMENTS"),
        (&["--gso", "64", "--size", "1200"], "76800 bytes"),
        (&["--gso", "0"], "'0'"),
    ];
    for (args, expected) in cases {
        let out = Command::new(BIN)
            .args([
                "bench",
                "udp-flood",
                "--to",
                "127.0.0.1:9",
                "--duration",
                "1",
            ])
            .args(args)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(expected), "{args:?}: {stderr}");
    }
    // At 1200 bytes 54 segments fit one datagram: accepted (and sent to a
    // port where nothing listens, so the flood itself fails with exit 1).
    let out = Command::new(BIN)
        .args([
            "bench",
            "udp-flood",
            "--to",
            "127.0.0.1:9",
            "--duration",
            "0.3",
        ])
        .args(["--gso", "54", "--size", "1200", "--rate", "1000"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// A command run under a seccomp filter that refuses io_uring_setup with
/// EPERM, as container runtimes' default profiles do.
fn without_io_uring(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: between fork and exec only async-signal-safe calls (prctl)
    // on data prepared before the fork.
    unsafe {
        cmd.pre_exec(|| {
            const IO_URING_SETUP: u32 = 425;
            let filter = [
                // A = the system call number.
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 1,
                    k: IO_URING_SETUP,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                },
            ];
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Where io_uring is blocked: an explicit `--engine io_uring` is one clear
/// line and exit 2, before any socket serves; `--engine auto` runs epoll,
/// and says why in a warning where its rule would have run io_uring.
#[test]
fn io_uring_blocked_by_seccomp_is_refused_or_falls_back_to_epoll() {
    use nettune::bench::backend::{measured_faster, Backend, Workload};
    let _serial = measuring();
    for (command, workload) in [
        ("udp-sink", Workload::UdpSink { gro: false }),
        ("http-server", Workload::HttpServer),
        ("rr-server", Workload::RrServer),
    ] {
        let base = [
            "bench",
            command,
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "0.3",
        ];
        let child = without_io_uring(&[&base[..], &["--engine", "io_uring", "--json"]].concat())
            .spawn()
            .expect("spawn");
        let (code, stdout, stderr) = crate::common::finish_bounded(child, Duration::from_secs(10));
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{command}: one line: {stderr}");
        assert!(
            stderr.contains("--engine io_uring")
                && stderr.contains("seccomp")
                && stderr.contains("--engine epoll"),
            "{command}: {stderr}"
        );
        assert!(!stdout.contains("listening"), "{command} served: {stdout}");

        let child = without_io_uring(&[&base[..], &["--engine", "auto", "--json"]].concat())
            .spawn()
            .expect("spawn");
        let (code, stdout, stderr) = crate::common::finish_bounded(child, Duration::from_secs(10));
        // It ran, received nothing in 0.3 s, and says so (exit 1).
        assert_eq!(code, Some(1), "{command}: {stderr}");
        if measured_faster(workload).0 == Backend::IoUring {
            assert!(
                stderr.contains("warning: --engine auto: using epoll")
                    && stderr.contains("seccomp"),
                "{command}: {stderr}"
            );
        } else {
            assert!(!stderr.contains("warning"), "{command}: {stderr}");
        }
        let json = &stdout[stdout.find('{').unwrap_or_else(|| panic!("{stdout}"))..];
        let report: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}\nnot JSON: {e}"));
        assert_eq!(report["engine"], "epoll", "{command}: {report:#}");
    }
}

/// Without a filter, `auto` picks io_uring on a kernel that has it.
#[test]
fn auto_picks_io_uring_where_the_kernel_serves_it() {
    if nettune::bench::uring::check().is_err() {
        crate::common::skipped(
            "auto_picks_io_uring_where_the_kernel_serves_it",
            "no io_uring",
        );
        return;
    }
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            "auto",
            "--json",
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "0.3",
        ],
    ));
    let (code, stdout, stderr) = sink.finish(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{stdout}\nnot JSON: {e}"));
    assert_eq!(report["engine"], "io_uring");
}

/// docs/benchmarks.md's table of what `--engine auto` runs: (command and
/// setting, engine), between its markers.
fn documented_auto_choices() -> Vec<(String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md");
    let text = std::fs::read_to_string(&path).expect("docs/benchmarks.md");
    let begin = text
        .find("<!-- engine auto: begin -->")
        .expect("the table's begin marker");
    let end = text
        .find("<!-- engine auto: end -->")
        .expect("the table's end marker");
    text[begin..end]
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line
                .split('|')
                .map(|c| c.trim().trim_matches('`'))
                .collect();
            (cells[1].to_string(), cells[2].to_string())
        })
        .collect()
}

/// For every command and setting of the documented table, `--engine auto`
/// runs the engine the table names (epoll, with a warning, where the
/// kernel cannot serve io_uring), and the report says why: the rule and
/// its setting.
#[test]
fn auto_runs_the_engine_the_documented_table_names() {
    let _serial = measuring();
    let choices = documented_auto_choices();
    let settings: Vec<&str> = choices.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        settings,
        ["rr-server", "udp-sink", "udp-sink --gro", "http-server"],
        "{choices:?}"
    );
    let served = nettune::bench::uring::check().is_ok();
    for (setting, engine) in &choices {
        assert!(
            engine == "epoll" || engine == "io_uring",
            "{setting}: {engine}"
        );
        let mut args: Vec<&str> = vec!["bench"];
        args.extend(setting.split_whitespace());
        // A short run on loopback that receives nothing.
        args.extend("--engine auto --json --bind 127.0.0.1:0 --duration 0.3".split(' '));
        let run = Running::start(nettune(None, &args));
        let (code, stdout, stderr) = run.finish(Duration::from_secs(10));
        // It ran, received nothing in 0.3 s, and says so (exit 1).
        assert_eq!(code, Some(1), "{setting}: {stderr}");
        let json = &stdout[stdout.find('{').unwrap_or_else(|| panic!("{stdout}"))..];
        let report: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}\nnot JSON: {e}"));
        let expected = if served { engine.as_str() } else { "epoll" };
        assert_eq!(report["engine"], expected, "{setting}: {report:#}");
        let reason = report["engine_reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with(&format!(
                "--engine auto, {setting}: {engine} measured faster"
            )),
            "{setting}: {reason}"
        );
    }
}
