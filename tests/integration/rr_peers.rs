//! `bench rr-server` against peers that do not follow the protocol: the
//! datagrams of a reported crash, a source that never proved its address
//! asking for large replies, a connection that asks for more than it
//! reads, a process out of descriptors; and `bench rr` against a server
//! from before the UDP address check. After each, ordinary clients must
//! still be served and the server must end with its report.
//!
//! Traffic stays on loopback. Every process is bounded in time and killed
//! by its PID on overrun or drop.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{finish_bounded, nettune, ServerChild};

const LIMIT: Duration = Duration::from_secs(30);

/// An rr-server that ends at its `--duration`, killed on drop otherwise.
struct Server {
    child: ServerChild,
    addr: SocketAddr,
}

impl Server {
    /// `rlimit_nofile`: the server's descriptor limit (soft and hard).
    fn start(engine: &str, duration: &str, rlimit_nofile: Option<u64>) -> Server {
        let mut cmd = nettune();
        cmd.args([
            "bench",
            "rr-server",
            "--json",
            "--bind",
            "127.0.0.1:0",
            "--engine",
            engine,
            "--duration",
            duration,
        ]);
        if let Some(n) = rlimit_nofile {
            // SAFETY: setrlimit is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = ServerChild::spawn_bench(&mut cmd);
        let addr = child.addr.parse().expect("an address");
        Server { child, addr }
    }

    /// Wait for the end at its --duration: exit code and JSON report.
    fn finish(self) -> (Option<i32>, Value) {
        let (code, rest) = self.child.finish(LIMIT);
        (code, serde_json::from_str(&rest).unwrap_or(Value::Null))
    }
}

/// `bench rr` against `to` for half a second: exit code, JSON, stderr.
fn rr(to: SocketAddr, args: &[&str]) -> (Option<i32>, Value, String) {
    rr_at(&["--to", &to.to_string()], args)
}

/// `bench rr` with `target` (`--to ADDR` or `--remote ADDR`) for half a
/// second: exit code, JSON, stderr.
fn rr_at(target: &[&str], args: &[&str]) -> (Option<i32>, Value, String) {
    let child = nettune()
        .args([
            "bench",
            "rr",
            "--json",
            "--warmup",
            "0",
            "--duration",
            "0.5",
        ])
        .args(target)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rr");
    let (code, stdout, stderr) = finish_bounded(child, LIMIT);
    (
        code,
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    )
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} is not a count in {v:#}"))
}

/// A normal TCP and UDP client each complete transactions.
fn ordinary_clients_are_served(to: SocketAddr) {
    for proto in ["tcp", "udp"] {
        let (code, report, stderr) = rr(to, &["--proto", proto]);
        assert_eq!(code, Some(0), "{proto}: {stderr}");
        assert!(u(&report, "/transactions") > 0, "{proto}: {report:#}");
    }
}

fn hello(request: u32, reply: u32) -> Vec<u8> {
    let mut bytes = b"nettrr01".to_vec();
    bytes.extend_from_slice(&request.to_be_bytes());
    bytes.extend_from_slice(&reply.to_be_bytes());
    bytes
}

fn check(request: u32, reply: u32, stage: u32, cookie: &[u8]) -> Vec<u8> {
    let mut bytes = b"nettrr02".to_vec();
    for word in [request, reply, stage] {
        bytes.extend_from_slice(&word.to_be_bytes());
    }
    bytes.extend_from_slice(cookie);
    bytes
}

/// A UDP socket connected to the server, reads time out after 2 s.
fn peer(to: SocketAddr) -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(to).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    socket
}

/// Send `datagram`, return the answer (its whole length: the buffer holds
/// the largest datagram).
fn ask(socket: &UdpSocket, datagram: &[u8]) -> Vec<u8> {
    socket.send(datagram).expect("send");
    let mut buf = vec![0u8; 70_000];
    loop {
        match socket.recv(&mut buf) {
            // A timed wait reports an interruption as EINTR (the io_uring
            // check's task work can interrupt this thread): wait again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            got => {
                let n = got.expect("an answer within 2 s");
                buf.truncate(n);
                return buf;
            }
        }
    }
}

/// The exact datagrams of the reported crash (a hello asking 64 MiB
/// replies, then one asking 4 GiB), from any peer: afterwards TCP and UDP
/// clients are served, and the server ends at its --duration, exit 0,
/// with its report counting both as refused hellos.
fn the_crash_datagrams_leave_the_server_serving(engine: &str) {
    let server = Server::start(engine, "4", None);
    let attacker = UdpSocket::bind("127.0.0.1:0").expect("bind");
    attacker
        .send_to(&hello(16, 67_108_864), server.addr)
        .expect("send");
    attacker
        .send_to(&hello(16, 0xffff_ffff), server.addr)
        .expect("send");
    ordinary_clients_are_served(server.addr);
    let (code, report) = server.finish();
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["ended"], "duration", "{report:#}");
    assert_eq!(u(&report, "/total/udp_bad_hellos"), 2, "{report:#}");
}

/// A source that never proved its address asks for 65,507-byte replies
/// with 1-byte requests: every answer is no larger than what it sent (the
/// echo, the reply, the cookie of an address check).
fn an_unproven_source_gets_no_reply_larger_than_its_request(engine: &str) {
    let server = Server::start(engine, "20", None);
    let socket = peer(server.addr);
    let echo = ask(&socket, &hello(1, 65_507));
    assert_eq!(echo.len(), 16);
    assert_eq!(echo, hello(1, 1), "the echo says replies are cut");
    for _ in 0..3 {
        let reply = ask(&socket, &[7]);
        assert_eq!(reply, [7], "a 1-byte request's reply");
    }
    let reply = ask(&socket, &[0; 100]);
    assert_eq!(reply.len(), 100);
    let cookie = ask(&socket, &check(1, 65_507, 0, &[0; 16]));
    assert_eq!(cookie.len(), 36, "no larger than the address check");
    drop(server);
}

/// The address check as documented: ask, get a cookie, prove with it; the
/// proven flow then gets its full replies. `bench rr` does the same for
/// replies larger than requests, and its report has no bad replies.
fn a_proven_client_gets_its_full_reply(engine: &str) {
    let server = Server::start(engine, "4", None);
    let socket = peer(server.addr);
    let answer = ask(&socket, &check(1, 60_000, 0, &[0; 16]));
    assert_eq!(answer.len(), 36);
    assert_eq!(&answer[..16], &check(1, 60_000, 0, &[])[..16]);
    assert_eq!(&answer[16..20], &1u32.to_be_bytes(), "stage 1: a cookie");
    let cookie = answer[20..].to_vec();
    assert_ne!(cookie, [0; 16]);
    let ack = ask(&socket, &check(1, 60_000, 0, &cookie));
    assert_eq!(ack, check(1, 60_000, 2, &cookie), "stage 2: proven");
    let reply = ask(&socket, &[5]);
    assert_eq!(reply.len(), 60_000);
    assert_eq!(reply[0], 5);
    let (code, report, stderr) = rr(server.addr, &["--proto", "udp", "--size", "1,60000"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(u(&report, "/transactions") > 0, "{report:#}");
    assert_eq!(u(&report, "/bad_replies"), 0, "{report:#}");
    let (code, served) = server.finish();
    assert_eq!(code, Some(0), "{served:#}");
    assert!(u(&served, "/total/udp_cookies") >= 2, "{served:#}");
    assert_eq!(u(&served, "/total/udp_capped"), 0, "{served:#}");
}

/// A connection asks for 64 MiB replies to 1-byte requests, sends 64 KiB
/// of requests (4 TiB owed) and never reads: other clients are served all
/// the while.
fn a_connection_that_never_reads_does_not_stop_the_others(engine: &str) {
    let server = Server::start(engine, "4", None);
    let mut greedy = TcpStream::connect(server.addr).expect("connect");
    greedy.write_all(&hello(1, 64 << 20)).expect("hello");
    let mut echo = [0u8; 16];
    greedy
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    greedy.read_exact(&mut echo).expect("echo");
    greedy.write_all(&[0; 65_536]).expect("requests");
    ordinary_clients_are_served(server.addr);
    drop(greedy);
    let (code, report) = server.finish();
    assert_eq!(code, Some(0), "{report:#}");
}

/// With its descriptors used up by silent connections, the server keeps
/// running (accept pauses, counted); once they close, clients are served.
fn a_server_out_of_descriptors_keeps_serving(engine: &str) {
    let server = Server::start(engine, "5", Some(48));
    let silent: Vec<TcpStream> = (0..64)
        .filter_map(|_| TcpStream::connect(server.addr).ok())
        .collect();
    assert!(!silent.is_empty());
    // Give the server time to try to take them all.
    std::thread::sleep(Duration::from_millis(500));
    drop(silent);
    std::thread::sleep(Duration::from_millis(300));
    ordinary_clients_are_served(server.addr);
    let (code, report) = server.finish();
    assert_eq!(code, Some(0), "{report:#}");
    assert!(u(&report, "/total/accept_errors") > 0, "{report:#}");
}

each_engine!(
    the_crash_datagrams_leave_the_server_serving,
    an_unproven_source_gets_no_reply_larger_than_its_request,
    a_proven_client_gets_its_full_reply,
    a_connection_that_never_reads_does_not_stop_the_others,
    a_server_out_of_descriptors_keeps_serving,
);

/// A stand-in for an rr-server from before the address check: it answers
/// plain hellos and requests, and ignores address checks.
fn old_server(socket: UdpSocket, until: Instant) {
    let mut replies: std::collections::HashMap<SocketAddr, usize> = Default::default();
    let mut buf = vec![0u8; 70_000];
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    while Instant::now() < until {
        let Ok((n, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        if n == 16 && buf[..8] == *b"nettrr01" {
            let reply = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
            replies.insert(from, reply as usize);
            let _ = socket.send_to(&buf[..16], from);
        } else if n >= 8 && buf[..8] == *b"nettrr02" {
            // Unknown to it: a request of an unknown flow, ignored.
        } else if let Some(&reply) = replies.get(&from) {
            let mut answer = vec![0u8; reply];
            let width = n.min(reply).min(4);
            answer[..width].copy_from_slice(&buf[..width]);
            let _ = socket.send_to(&answer, from);
        }
    }
}

/// A client wanting replies larger than its requests against a server
/// that knows no address check: the run works with the plain hello, and
/// the client says that the server is older.
#[test]
fn rr_says_when_the_server_predates_the_address_check() {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let to = socket.local_addr().expect("addr");
    let until = Instant::now() + Duration::from_secs(15);
    let server = std::thread::spawn(move || old_server(socket, until));
    let (code, report, stderr) = rr(to, &["--proto", "udp", "--size", "1,100"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(u(&report, "/transactions") > 0, "{report:#}");
    assert!(
        stderr.contains("predates the UDP address check"),
        "{stderr}"
    );
    drop(server);
}

/// `bench rr --remote`: the daemon's rr-server serves UDP replies larger
/// than the requests to the client that proved its address.
#[test]
fn remote_udp_rr_with_larger_replies_goes_through_serve() {
    let daemon = ServerChild::spawn(
        nettune()
            .args(["serve", "--bind", "127.0.0.1:0"])
            .stderr(Stdio::null()),
    );
    let (code, report, stderr) = rr_at(
        &["--remote", &daemon.addr],
        &["--proto", "udp", "--size", "1,2000"],
    );
    drop(daemon);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(u(&report, "/transactions") > 0, "{report:#}");
    assert_eq!(u(&report, "/bad_replies"), 0, "{report:#}");
    assert!(
        u(&report, "/remote/report/total/udp_cookies") >= 1,
        "{report:#}"
    );
    assert_eq!(u(&report, "/remote/report/total/udp_capped"), 0);
}
