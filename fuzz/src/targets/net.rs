//! nettune's servers, each run once per fuzzing process on loopback, fed
//! the input as a peer would send it: `bench rr-server` (UDP datagrams and
//! a TCP byte stream, epoll and io_uring engines), `bench stream-server`
//! and the `monitor --prometheus` exporter (a few connections each) and
//! `nettune serve` (one control connection). A
//! server must neither crash (a panic in any thread aborts the process,
//! which libFuzzer reports) nor stop answering: after each input the
//! target checks that the server still answers a well-formed peer.
//!
//! Traffic goes to 127.0.0.1 only.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nettune::base::observe::Quiet;
use nettune::base::stop::Stop;
use nettune::bench::rr::wire::Hello;
use nettune::bench::stream::wire::{Header, Kind, HEADER_LEN};

/// How long a server may take to answer a well-formed peer.
const ANSWER: Duration = Duration::from_secs(3);

/// Bytes read back per connection at most: a server that owes more (a
/// large reply size asked for) is cut off there.
const READ_BACK: usize = 1 << 20;

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Records of the input: a length byte, then that many bytes (the last
/// one may be short).
fn records(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((&len, rest)) = data.split_first() {
        let take = usize::from(len).min(rest.len());
        out.push(&rest[..take]);
        data = &rest[take..];
    }
    out
}

/// How long the fuzz input's own connections are read back: enough for
/// a server to answer or close, short enough to try many inputs (a server
/// that hangs is caught by the check that follows each input).
const LISTEN: Duration = Duration::from_millis(300);

/// Write, half-close, and read what comes back until the server closes,
/// [`READ_BACK`] bytes or `wait` pass.
fn exchange(mut conn: TcpStream, data: &[u8], wait: Duration) {
    let _ = conn.set_write_timeout(Some(ANSWER));
    let _ = conn.write_all(data);
    let _ = conn.shutdown(Shutdown::Write);
    drain(conn, wait);
}

fn drain(mut conn: TcpStream, wait: Duration) {
    let end = Instant::now() + wait;
    let mut got = 0;
    let mut buf = [0u8; 64 << 10];
    while got < READ_BACK {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
}

/// Run `server` on a thread of its own until the process ends (its
/// ending at all is a finding); its address.
fn start<S: Send + 'static>(
    what: &str,
    server: anyhow::Result<S>,
    addr: impl FnOnce(&S) -> SocketAddr,
    run: impl FnOnce(S) -> String + Send + 'static,
) -> SocketAddr {
    let server = match server {
        Ok(server) => server,
        Err(e) => panic!("nettune-fuzz: cannot start {what}: {e:#}"),
    };
    let bound = addr(&server);
    let what = what.to_string();
    std::thread::spawn(move || {
        let result = run(server);
        panic!("{what} ended: {result}");
    });
    bound
}

/// An rr server on loopback and its address, started once per engine.
fn rr_server(uring: bool) -> SocketAddr {
    static EPOLL: OnceLock<SocketAddr> = OnceLock::new();
    static URING: OnceLock<SocketAddr> = OnceLock::new();
    let cell = if uring { &URING } else { &EPOLL };
    *cell.get_or_init(|| {
        let mut config = nettune::bench::rr::ServerConfig::new(loopback());
        config.engine = if uring {
            nettune::bench::rr::Backend::IoUring
        } else {
            nettune::bench::rr::Backend::Epoll
        };
        start(
            "an rr server",
            nettune::bench::rr::open_server(config),
            |s| s.local_addr(),
            |s| format!("{:?}", s.run(&Stop::new(), &mut Quiet)),
        )
    })
}

/// The rr server still echoes a hello from a new flow.
fn rr_answers(server: SocketAddr) {
    let probe = UdpSocket::bind(loopback()).expect("a UDP socket on loopback");
    probe.connect(server).expect("connect");
    probe
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let hello = Hello {
        request: 1,
        reply: 1,
    }
    .encode();
    let end = Instant::now() + ANSWER;
    let mut buf = [0u8; 64];
    while Instant::now() < end {
        let _ = probe.send(&hello);
        if let Ok(n) = probe.recv(&mut buf) {
            if buf[..n] == hello {
                return;
            }
        }
    }
    panic!("the rr server stopped answering hellos");
}

/// `bench rr-server`: byte 0 chooses the engine (bit 0: io_uring) and the
/// transport (bit 1: TCP); then records, each a datagram or a write.
pub fn rr_server_target(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let uring = mode & 1 == 1 && nettune::bench::uring::check().is_ok();
    let server = rr_server(uring);
    if mode & 2 == 0 {
        let client = UdpSocket::bind(loopback()).expect("a UDP socket on loopback");
        client.connect(server).expect("connect");
        for datagram in records(rest) {
            let _ = client.send(datagram);
        }
        // Replies, whatever they are, must not outlast the server's answer
        // to the next flow (checked below); read what came.
        let _ = client.set_nonblocking(true);
        let mut buf = vec![0u8; 65_536];
        while client.recv(&mut buf).is_ok() {}
    } else if let Ok(conn) = TcpStream::connect(server) {
        exchange(conn, &records(rest).concat(), LISTEN);
    }
    rr_answers(server);
}

/// A stream server on loopback, tests of at most a second.
fn stream_server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let mut config = nettune::bench::stream::ServerConfig::new(loopback());
        config.max_test = Duration::from_secs(1);
        config.max_rate = Some(100_000_000);
        start(
            "a stream server",
            nettune::bench::stream::open_server(config),
            |s| s.local_addr(),
            |s| format!("{:?}", s.run(&Stop::new(), &mut Quiet)),
        )
    })
}

/// The stream server still reads a connection's header and closes a
/// stranger's connection.
fn stream_answers(server: SocketAddr) {
    let Ok(conn) = TcpStream::connect(server) else {
        panic!("the stream server stopped accepting");
    };
    let mut header = Header {
        kind: Kind::Data,
        stream: 0,
        test: u64::MAX,
        tls: false,
    }
    .encode();
    header[..4].copy_from_slice(b"GET ");
    let started = Instant::now();
    exchange(conn, &header[..HEADER_LEN], ANSWER);
    assert!(
        started.elapsed() < ANSWER,
        "the stream server did not close a stranger's connection"
    );
}

/// `bench stream-server`: records of (connection 0-2, length, bytes).
pub fn stream_server_target(data: &[u8]) {
    let server = stream_server();
    connections(server, data);
    stream_answers(server);
}

/// Feed records of (connection 0-2, length, bytes) to `server` over up to
/// three connections, then half-close each and read what comes back.
fn connections(server: SocketAddr, data: &[u8]) {
    let mut conns: Vec<Option<TcpStream>> = (0..3).map(|_| None).collect();
    let mut rest = data;
    while let [which, len, tail @ ..] = rest {
        let take = usize::from(*len).min(tail.len());
        let slot = &mut conns[usize::from(*which) % 3];
        if slot.is_none() {
            *slot = TcpStream::connect(server).ok();
            if let Some(c) = slot {
                let _ = c.set_write_timeout(Some(ANSWER));
            }
        }
        if let Some(c) = slot {
            let _ = c.write_all(&tail[..take]);
        }
        rest = &tail[take..];
    }
    for conn in conns.into_iter().flatten() {
        let _ = conn.shutdown(Shutdown::Write);
        drain(conn, LISTEN);
    }
}

/// The exporter's readings: one fixed exposition, fresh for ever.
struct Fixed;

impl nettune::monitor::prom::http::Readings for Fixed {
    fn request(&mut self) {}

    fn take(&mut self) -> Option<anyhow::Result<nettune::monitor::prom::sampling::Rendered>> {
        None
    }
}

/// The `monitor --prometheus` HTTP server on loopback, serving a fixed
/// exposition, with short timeouts.
fn prom_server() -> SocketAddr {
    use nettune::monitor::prom::http::{Limits, Server, Waker};
    use nettune::monitor::prom::sampling::Rendered;
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let listener = std::net::TcpListener::bind(loopback()).expect("a listener on loopback");
        let addr = listener.local_addr().expect("its address");
        // The server borrows its waker for as long as it runs: the process.
        let waker: &'static Waker = Box::leak(Box::new(Waker::new().expect("an eventfd")));
        let first = Rendered {
            body: std::sync::Arc::new(b"# TYPE nettune_up gauge\nnettune_up 1\n".to_vec()),
            series: 1,
            fresh_until: None,
        };
        let limits = Limits {
            max_connections: 64,
            head_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(2),
            sample_wait: Duration::from_secs(1),
        };
        start(
            "the Prometheus exporter",
            Server::new(listener, waker, Fixed, first, limits),
            |_| addr,
            |s| format!("{:?}", s.run(&Stop::new())),
        )
    })
}

/// `monitor --prometheus`'s HTTP server: records of (connection 0-2,
/// length, bytes); afterwards it must still answer a scrape.
pub fn prom_server_target(data: &[u8]) {
    let server = prom_server();
    connections(server, data);
    let Ok(mut conn) = TcpStream::connect(server) else {
        panic!("the exporter stopped accepting");
    };
    let _ = conn.set_read_timeout(Some(ANSWER));
    let _ = conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    assert!(
        conn.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200"),
        "the exporter no longer answers a scrape: {:?}",
        String::from_utf8_lossy(&head)
    );
}

/// `nettune serve` on loopback without a token (what it allows there),
/// with small limits.
fn serve_daemon() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let mut config = nettune::serve::DaemonConfig::new(loopback(), None);
        config.max_duration = Duration::from_secs(1);
        config.max_threads = 1;
        config.max_tests = 2;
        config.max_reply = 1024;
        config.max_rate = 100_000_000;
        start(
            "nettune serve",
            nettune::serve::bind(config),
            |d| d.local_addr(),
            |d| format!("{:?}", d.run(&Stop::new(), &mut Quiet)),
        )
    })
}

/// The daemon still greets a client: the preamble gets a challenge.
fn serve_answers(server: SocketAddr) {
    let Ok(mut conn) = TcpStream::connect(server) else {
        panic!("nettune serve stopped accepting");
    };
    let _ = conn.set_read_timeout(Some(ANSWER));
    let _ = conn.write_all(&nettune::serve::proto::preamble(
        nettune::serve::proto::VERSION,
        0,
    ));
    let mut len = [0u8; 4];
    assert!(
        conn.read_exact(&mut len).is_ok(),
        "nettune serve no longer answers a client's preamble"
    );
}

/// `nettune serve`: the input is what a client sends on one connection.
pub fn serve_target(data: &[u8]) {
    let server = serve_daemon();
    if let Ok(conn) = TcpStream::connect(server) {
        exchange(conn, data, LISTEN);
    }
    serve_answers(server);
}
