//! `bench udp-sink --xdp` on a veth pair between two namespaces the tests
//! create: the program attached while it runs and gone after, the steered
//! flow counted exactly while other traffic (a TCP connection, another UDP
//! port) still reaches the kernel stack, a `kill -9` that leaves the
//! program for `doctor` and `rollback` (which removes only the program it
//! recorded), and bad input that attaches nothing.
//!
//! Every child is bounded in time and killed by its PID; namespaces go
//! with their Drop guards; each test has its own state directory.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{measuring, skip_unless_root, veth_pair, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_nettune");

/// A nettune child killed (SIGKILL, by its PID) if the test ends first.
struct Bg {
    child: Option<Child>,
}

/// `nettune ARGS` started with the test's state directory.
fn start(state: &Path, args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .env("NETTUNE_STATE_DIR", state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nettune")
}

impl Bg {
    fn spawn(state: &Path, args: &[&str]) -> Bg {
        Bg {
            child: Some(start(state, args)),
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    fn signal(&self, signal: i32) {
        // SAFETY: a signal to our own child, by its PID.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// Whether the process has ended.
    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Wait at most `limit`: exit code, stdout, stderr.
    fn finish(&mut self, limit: Duration) -> (Option<i32>, String, String) {
        let child = self.child.take().expect("running");
        crate::common::finish_bounded(child, limit)
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A test's own state directory and namespaces with a veth pair (`b`, the
/// receiving end, in `rx`); `None` when not root (the skip is recorded).
struct Setup {
    state: tempfile::TempDir,
    tx: Netns,
    rx: Netns,
    b: String,
}

fn setup(test: &str) -> Option<Setup> {
    if skip_unless_root(test) {
        return None;
    }
    let state = tempfile::tempdir().expect("state dir");
    let (tx, rx) = (Netns::new("xt"), Netns::new("xr"));
    let (_a, b) = veth_pair(&tx, &rx, 77, Some(1));
    Some(Setup { state, tx, rx, b })
}

/// `bench udp-sink --xdp` on `iface` queue `queue` of `ns` for the flow to
/// 10.77.0.2:9000, then `extra`.
fn sink_args(iface: &str, queue: &str, ns: &Netns, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "bench",
        "udp-sink",
        "--xdp",
        "--iface",
        iface,
        "--queue",
        queue,
        "--bind",
        "10.77.0.2:9000",
        "--netns",
        &ns.name,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn strs_owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `nettune ARGS` with the test's state directory, to the end.
fn run(state: &Path, args: &[&str]) -> (i32, String, String) {
    let (code, out, err) =
        crate::common::finish_bounded(start(state, args), Duration::from_secs(60));
    (code.unwrap_or(-1), out, err)
}

/// The XDP program on `iface` in `ns` as `ip` shows it (`id 97 name ...`).
fn xdp_of(ns: &Netns, iface: &str) -> Option<String> {
    let text = crate::common::sh(&["ip", "-n", &ns.name, "-d", "link", "show", "dev", iface]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("prog/xdp"))?;
    Some(
        line.trim()
            .trim_start_matches("prog/xdp")
            .trim()
            .to_string(),
    )
}

/// Any XDP program on any interface of `ns`.
fn any_xdp(ns: &Netns) -> bool {
    crate::common::sh(&["ip", "-n", &ns.name, "-d", "link", "show"]).contains("prog/xdp")
}

/// Wait until `iface` has an XDP program: its `id N name M`.
fn wait_attached(ns: &Netns, iface: &str, sink: &mut Bg) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = xdp_of(ns, iface) {
            return p;
        }
        // A sink that ended without attaching says why on stderr.
        if sink.exited() {
            let (code, out, err) = sink.finish(Duration::from_secs(1));
            panic!("the sink ended (exit {code:?}) before attaching to {iface}: {err}{out}");
        }
        assert!(
            Instant::now() < deadline,
            "no XDP program on {iface} within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}\nnot JSON: {e}"))
}

fn count(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} is not a count in {v:#}"))
}

/// The states in the state directory, as `history --json` lists them.
fn states(state: &Path) -> Vec<Value> {
    let (code, out, err) = run(state, &["history", "--json"]);
    assert_eq!(code, 0, "{err}");
    json(&out).as_array().cloned().unwrap_or_default()
}

#[test]
fn the_flow_is_counted_exactly_and_other_traffic_still_reaches_the_stack() {
    let Some(Setup { state, tx, rx, b }) =
        setup("the_flow_is_counted_exactly_and_other_traffic_still_reaches_the_stack")
    else {
        return;
    };
    let _serial = measuring();
    // Other traffic: a TCP echo server and a UDP socket on another port.
    let listener = rx.inside(|| TcpListener::bind("10.77.0.2:7000").expect("tcp listen"));
    let other_udp = rx.inside(|| UdpSocket::bind("10.77.0.2:9001").expect("udp bind"));
    other_udp
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let mut buf = [0u8; 64];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 || conn.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    });
    let mut conn = tx.inside(|| TcpStream::connect("10.77.0.2:7000").expect("tcp connect"));
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");

    let args = sink_args(&b, "0", &rx, &["--duration", "5", "--json"]);
    let mut sink = Bg::spawn(state.path(), &strs(&args));
    let program = wait_attached(&rx, &b, &mut sink);
    assert!(program.contains("name nettune_xsk"), "{program}");
    // Recorded before it was attached; marked complete just after.
    let deadline = Instant::now() + Duration::from_secs(10);
    let active = loop {
        let active = states(state.path());
        if active.len() == 1 && active[0]["status"] == "complete" {
            break active;
        }
        assert!(Instant::now() < deadline, "{active:?}");
        assert_eq!(active.len(), 1, "{active:?}");
        assert_eq!(active[0]["status"], "applying", "{active:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(active[0]["undoable"], false, "a running bench's program");

    // The steered flow: paced, so nothing is lost on two shared CPUs.
    let out = paced_flood(state.path(), &tx.name);
    let flood = json(&out);
    let sent = count(&flood, "/packets");
    assert!(sent > 10_000, "{flood:#}");

    // Meanwhile the kernel stack still serves everything else.
    for i in 0..20 {
        let msg = format!("ping {i}\n");
        conn.write_all(msg.as_bytes()).expect("tcp write");
        let mut line = String::new();
        BufReader::new(&mut conn)
            .read_line(&mut line)
            .expect("tcp echo");
        assert_eq!(line, msg);
    }
    let sender = tx.inside(|| UdpSocket::bind("10.77.0.1:0").expect("udp bind"));
    for i in 0..100u32 {
        sender
            .send_to(&i.to_be_bytes(), "10.77.0.2:9001")
            .expect("udp send");
    }
    let mut got = 0;
    let mut buf = [0u8; 16];
    while got < 100 {
        match other_udp.recv(&mut buf) {
            Ok(_) => got += 1,
            Err(e) => panic!("the other UDP port got {got} of 100 datagrams: {e}"),
        }
    }

    let (code, out, err) = sink.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}\n{err}");
    let report = json(&out);
    assert_eq!(count(&report, "/packets"), sent, "{report:#}");
    assert_eq!(count(&report, "/sequence/received"), sent);
    assert_eq!(count(&report, "/sequence/lost"), 0);
    assert_eq!(count(&report, "/sequence/flows"), 1);
    assert_eq!(count(&report, "/program_counts/redirected"), sent);
    // The TCP exchange and the other UDP port went through the program,
    // on the same queue, and on to the kernel stack.
    assert!(
        count(&report, "/program_counts/passed") >= 120,
        "{report:#}"
    );
    assert_eq!(report["program"]["name"], "nettune_xsk");
    assert_eq!(report["program"]["mode"], "native");
    assert_eq!(report["socket_mode"], "copy");
    assert!(report["cpu_ns_per_packet"].as_f64().is_some());
    // Removed on exit, and the record closed.
    assert_eq!(xdp_of(&rx, &b), None);
    let closed = states(state.path());
    assert_eq!(closed[0]["status"], "rolled_back", "{closed:?}");
}

#[test]
fn a_killed_sink_leaves_its_program_to_doctor_and_rollback_removes_only_it() {
    let Some(Setup {
        state,
        tx: _tx,
        rx,
        b,
    }) = setup("a_killed_sink_leaves_its_program_to_doctor_and_rollback_removes_only_it")
    else {
        return;
    };
    let sink_args = |mode: &str| sink_args(&b, "0", &rx, &["--duration", "60", "--xdp-mode", mode]);
    let args = sink_args("native");
    let mut first = Bg::spawn(state.path(), &strs(&args));
    let program = wait_attached(&rx, &b, &mut first);
    first.signal(libc::SIGKILL);
    let _ = first.finish(Duration::from_secs(10));
    assert_eq!(xdp_of(&rx, &b).as_deref(), Some(program.as_str()));

    // doctor finds it, inside the namespace.
    let (code, out, err) = run(state.path(), &["doctor", "--netns", &rx.name, "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let report = json(&out);
    let stale: Vec<&Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["id"] == "xdp.stale-program")
        .collect();
    assert_eq!(stale.len(), 1, "{report:#}");
    assert_eq!(stale[0]["severity"], "warn");
    let killed_state = states(state.path())[0]["id"]
        .as_u64()
        .expect("id")
        .to_string();

    // Someone else's program takes the interface: rollback leaves it alone.
    crate::common::ip(&["-n", &rx.name, "link", "set", "dev", &b, "xdp", "off"]);
    let other_args = sink_args("generic");
    let other_state = tempfile::tempdir().expect("other state dir");
    let mut other = Bg::spawn(other_state.path(), &strs(&other_args));
    let deadline = Instant::now() + Duration::from_secs(20);
    let other_program = loop {
        let text = crate::common::sh(&["ip", "-n", &rx.name, "-d", "link", "show", "dev", &b]);
        if let Some(line) = text.lines().find(|l| l.contains("prog/xdp")) {
            break line.trim().to_string();
        }
        assert!(Instant::now() < deadline, "the second program never came");
        std::thread::sleep(Duration::from_millis(50));
    };
    let (code, out, err) = run(state.path(), &["rollback", &killed_state]);
    assert_eq!(code, 0, "{out}\n{err}");
    let text = crate::common::sh(&["ip", "-n", &rx.name, "-d", "link", "show", "dev", &b]);
    assert!(
        text.contains(&other_program),
        "rollback removed another program: {text}"
    );
    other.signal(libc::SIGTERM);
    let (code, _, err) = other.finish(Duration::from_secs(20));
    // Nothing was sent: the run measured nothing (exit 1), and ended cleanly.
    assert_eq!(code, Some(1), "{err}");
    assert!(!any_xdp(&rx), "the second sink left its program");

    // And a killed run's program alone is removed by rollback.
    let mut third = Bg::spawn(state.path(), &strs(&args));
    wait_attached(&rx, &b, &mut third);
    third.signal(libc::SIGKILL);
    let _ = third.finish(Duration::from_secs(10));
    let (code, out, err) = run(state.path(), &["rollback"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("XDP program nettune_xsk"), "{out}");
    assert_eq!(xdp_of(&rx, &b), None);
    let all = states(state.path());
    assert!(all.iter().all(|s| s["status"] == "rolled_back"), "{all:#?}");
}

#[test]
fn a_running_sink_shows_in_inspect_and_generic_mode_in_doctor_and_sigterm_removes_it() {
    let Some(Setup {
        state,
        tx: _tx,
        rx,
        b,
    }) = setup("a_running_sink_shows_in_inspect_and_generic_mode_in_doctor_and_sigterm_removes_it")
    else {
        return;
    };
    let args = sink_args(
        &b,
        "0",
        &rx,
        &["--duration", "60", "--xdp-mode", "generic", "--json"],
    );
    let mut sink = Bg::spawn(state.path(), &strs(&args));
    wait_attached(&rx, &b, &mut sink);
    let (code, out, err) = run(state.path(), &["inspect", "--netns", &rx.name]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("xdp    generic nettune_xsk (id "), "{out}");
    assert!(out.contains("AF_XDP sockets 1"), "{out}");
    let (_, out, err) = run(state.path(), &["doctor", "--netns", &rx.name, "--json"]);
    let report = json(&out);
    let ids: Vec<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(ids.contains(&"xdp.generic-mode"), "{ids:?} {err}");
    // Its owner runs: not stale.
    assert!(!ids.contains(&"xdp.stale-program"), "{ids:?}");
    // rollback refuses while it runs.
    let (code, _, err) = run(state.path(), &["rollback", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("still running"), "{err}");
    assert!(xdp_of(&rx, &b).is_some());

    sink.signal(libc::SIGTERM);
    let (code, out, err) = sink.finish(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("measured nothing"), "{err}");
    assert_eq!(json(&out)["ended"], "interrupted");
    assert_eq!(xdp_of(&rx, &b), None);
    assert_eq!(states(state.path())[0]["status"], "rolled_back");
}

#[test]
fn bad_input_exits_2_and_attaches_nothing() {
    let Some(Setup {
        state,
        tx: _tx,
        rx,
        b,
    }) = setup("bad_input_exits_2_and_attaches_nothing")
    else {
        return;
    };
    let base = |iface: &str, queue: &str| sink_args(iface, queue, &rx, &["--duration", "2"]);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (base(&b, "3"), "has 1 RX queue (0)"),
        (base("nosuch0", "0"), "no such interface"),
        (base("lo", "0"), "no native XDP"),
        (
            [base(&b, "0"), vec!["--flow".into(), "udp port 9".into()]].concat(),
            "'port' is not a field",
        ),
        (
            [
                base(&b, "0"),
                vec!["--flow".into(), "tcp4 dst-port 9000".into()],
            ]
            .concat(),
            "is not UDP",
        ),
        (
            [
                base(&b, "0"),
                vec!["--flow".into(), "udp dst-port 53".into()],
            ]
            .concat(),
            "--flow says dst-port 53 but --bind says 9000",
        ),
        (
            [base(&b, "0"), vec!["--engine".into(), "io_uring".into()]].concat(),
            "do not apply to --xdp",
        ),
        (
            [base(&b, "0"), vec!["--ring".into(), "1000".into()]].concat(),
            "--ring '1000': give a power of two from 64 to 65536",
        ),
        (
            [base(&b, "0"), vec!["--ring".into(), "32".into()]].concat(),
            "--ring '32': give a power of two",
        ),
        (
            [
                base(&b, "0"),
                vec!["--ring".into(), "64".into(), "--batch".into(), "512".into()],
            ]
            .concat(),
            "--batch '512' is larger than --ring '64'",
        ),
        (
            [
                base(&b, "0"),
                vec!["--busy-poll-budget".into(), "64".into()],
            ]
            .concat(),
            "--busy-poll <USECS>",
        ),
        (
            [base(&b, "0"), vec!["--busy-poll".into(), "0".into()]].concat(),
            "'0'",
        ),
        (
            [base(&b, "0"), vec!["--prefer-busy-poll".into()]].concat(),
            "--busy-poll <USECS>",
        ),
        // Generic XDP on a veth without GRO: no NAPI to defer, nothing left.
        (
            [
                base(&b, "0"),
                [
                    "--xdp-mode",
                    "generic",
                    "--busy-poll",
                    "50",
                    "--prefer-busy-poll",
                ]
                .map(String::from)
                .to_vec(),
            ]
            .concat(),
            "--prefer-busy-poll: cannot defer the IRQs of",
        ),
        (
            strs_owned(&[
                "bench",
                "udp-sink",
                "--bind",
                "10.77.0.2:9000",
                "--busy-poll",
                "50",
            ]),
            "--xdp",
        ),
    ];
    for (args, says) in cases {
        let args = strs(&args);
        let (code, out, err) = run(state.path(), &args);
        assert_eq!(code, 2, "{args:?}: {err}\n{out}");
        assert!(err.contains(says), "{args:?}: expected '{says}' in: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!any_xdp(&rx), "{args:?} left a program attached");
    }
    assert!(
        states(state.path())
            .iter()
            .all(|s| s["status"] != "complete" && s["status"] != "applying"),
        "a refused run left a record"
    );
}

/// (defer-hard-irqs, gro-flush-timeout) of `iface`'s NAPIs, as `inspect`
/// reads them through netdev netlink.
fn deferral(state: &Path, ns: &Netns, iface: &str) -> Vec<(u64, u64)> {
    let (code, out, err) = run(
        state,
        &["inspect", "--netns", &ns.name, "--iface", iface, "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let host = json(&out);
    let entry = crate::common::iface(&host, iface);
    entry["netdev"]["napis"]
        .as_array()
        .unwrap_or_else(|| panic!("napis: {:#}", entry["netdev"]))
        .iter()
        .map(|n| {
            let f = |k: &str| n[k].as_u64().unwrap_or_else(|| panic!("{k} in {n}"));
            (f("defer_hard_irqs"), f("gro_flush_timeout_ns"))
        })
        .collect()
}

/// The NAPI id the kernel links to `iface`'s RX queue 0 (netdev
/// queue-get), as JSON: null when it links none.
fn queue_napi(state: &Path, ns: &Netns, iface: &str) -> Value {
    let (code, out, err) = run(
        state,
        &["inspect", "--netns", &ns.name, "--iface", iface, "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let host = json(&out);
    let entry = crate::common::iface(&host, iface);
    entry["netdev"]["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("queues: {:#}", entry["netdev"]))
        .iter()
        .find(|q| q["direction"] == "rx" && q["index"] == 0)
        .map(|q| q["napi_id"].clone())
        .unwrap_or(Value::Null)
}

/// Wait until `iface`'s NAPIs show `want` (the sink sets them once the
/// program is attached).
fn wait_deferral(state: &Path, ns: &Netns, iface: &str, want: (u64, u64), sink: &mut Bg) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if deferral(state, ns, iface) == vec![want] {
            return;
        }
        if sink.exited() {
            let (code, out, err) = sink.finish(Duration::from_secs(1));
            panic!("the sink ended (exit {code:?}) before deferring IRQs: {err}{out}");
        }
        assert!(
            Instant::now() < deadline,
            "{iface}'s NAPI never showed {want:?}: {:?}",
            deferral(state, ns, iface)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The receiving veth with GRO on: its NAPI exists before the program and
/// stays after it, so what the run set and restored can be read.
fn gro_on(rx: &Netns, iface: &str) {
    rx.exec(&["ethtool", "-K", iface, "gro", "on"]);
}

#[test]
fn busy_polling_is_set_on_the_socket_and_the_napi_deferral_restored_after_the_run() {
    let Some(Setup { state, tx, rx, b }) =
        setup("busy_polling_is_set_on_the_socket_and_the_napi_deferral_restored_after_the_run")
    else {
        return;
    };
    let _serial = measuring();
    gro_on(&rx, &b);
    assert_eq!(deferral(state.path(), &rx, &b), vec![(0, 0)]);
    let args = sink_args(
        &b,
        "0",
        &rx,
        &[
            "--duration",
            "4",
            "--json",
            "--busy-poll",
            "50",
            "--busy-poll-budget",
            "64",
            "--prefer-busy-poll",
            "--ring",
            "4096",
            "--batch",
            "64",
        ],
    );
    let mut sink = Bg::spawn(state.path(), &strs(&args));
    wait_attached(&rx, &b, &mut sink);
    wait_deferral(state.path(), &rx, &b, (2, 200_000), &mut sink);
    let linked = queue_napi(state.path(), &rx, &b);
    let out = paced_flood(state.path(), &tx.name);
    let sent = count(&json(&out), "/packets");

    let (code, out, err) = sink.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}\n{err}");
    let report = json(&out);
    // What the kernel holds on the socket, read back.
    assert_eq!(
        report["busy_poll"]["socket"],
        serde_json::json!({"usecs": 50, "prefer": true, "budget": 64}),
        "{report:#}"
    );
    // The NAPI the socket busy-polls is the one the kernel links to the
    // queue (netdev queue-get), if it links one: the kernel gives an
    // AF_XDP socket that NAPI's id when it binds, and a veth links none.
    assert_eq!(report["busy_poll"]["napi_id"], linked, "{report:#}");
    if report["busy_poll"]["napi_id"].is_null() {
        assert!(err.contains("busy polling never engaged"), "{err}");
    }
    assert_eq!(
        report["busy_poll"]["deferral"],
        serde_json::json!({"defer_hard_irqs": 2, "gro_flush_timeout_ns": 200000})
    );
    assert_eq!(
        report["busy_poll"]["deferral_before"],
        serde_json::json!({"defer_hard_irqs": 0, "gro_flush_timeout_ns": 0})
    );
    assert_eq!(count(&report, "/ring"), 4096);
    assert_eq!(count(&report, "/umem_bytes"), 4096 * 2048);
    assert_eq!(count(&report, "/batch"), 64);
    let got = count(&report, "/packets");
    assert!(got > 0 && got <= sent, "{got} of {sent}: {report:#}");
    assert_eq!(count(&report, "/program_counts/redirected"), got);

    // After the run: the NAPI as it was, the program gone, the state closed.
    assert_eq!(deferral(state.path(), &rx, &b), vec![(0, 0)]);
    assert_eq!(xdp_of(&rx, &b), None);
    assert_eq!(states(state.path())[0]["status"], "rolled_back");
}

#[test]
fn a_killed_busy_polling_sink_leaves_its_napi_deferral_to_rollback() {
    let Some(Setup {
        state,
        tx: _tx,
        rx,
        b,
    }) = setup("a_killed_busy_polling_sink_leaves_its_napi_deferral_to_rollback")
    else {
        return;
    };
    gro_on(&rx, &b);
    let args = sink_args(
        &b,
        "0",
        &rx,
        &[
            "--duration",
            "60",
            "--busy-poll",
            "50",
            "--prefer-busy-poll",
        ],
    );
    let mut sink = Bg::spawn(state.path(), &strs(&args));
    wait_attached(&rx, &b, &mut sink);
    wait_deferral(state.path(), &rx, &b, (2, 200_000), &mut sink);
    sink.signal(libc::SIGKILL);
    let _ = sink.finish(Duration::from_secs(10));
    // Left as the killed run set it, and recorded.
    assert_eq!(deferral(state.path(), &rx, &b), vec![(2, 200_000)]);
    assert!(xdp_of(&rx, &b).is_some());
    // Recorded in the program's state, with the values to restore.
    let record = std::fs::read_to_string(state.path().join("state-0001.json")).expect("state");
    let record = json(&record);
    let napi: Vec<(&str, &str)> = record["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| Some((c["target"].as_str()?, c["original"].as_str()?)))
        .filter(|(t, _)| t.starts_with("napi:"))
        .collect();
    assert_eq!(
        napi,
        vec![
            (format!("napi:{b}:rx-0:defer-hard-irqs").as_str(), "0"),
            (format!("napi:{b}:rx-0:gro-flush-timeout").as_str(), "0"),
        ],
        "{record:#}"
    );

    let (code, out, err) = run(state.path(), &["rollback"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(deferral(state.path(), &rx, &b), vec![(0, 0)]);
    assert_eq!(xdp_of(&rx, &b), None);
    assert_eq!(states(state.path())[0]["status"], "rolled_back");
}

/// The steered flow, paced so that nothing is lost on two shared CPUs: one
/// second of 20,000 packets/s to the sink's address from `netns`; its JSON
/// report.
fn paced_flood(state: &Path, netns: &str) -> String {
    let (code, out, err) = run(
        state,
        &[
            "bench",
            "udp-flood",
            "--to",
            "10.77.0.2:9000",
            "--netns",
            netns,
            "--rate",
            "20000",
            "--duration",
            "1",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    out
}
