//! The server with real sockets on loopback and a stand-in sampler: what
//! each kind of request gets, keep-alive and pipelining, waiting for a
//! new reading, and the clients it must survive (trickled heads, huge
//! heads, idle crowds, a client that does not read).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

/// Readings made on request from a list of bodies, at once.
struct Fake<'a> {
    waker: &'a Waker,
    bodies: VecDeque<&'static str>,
    ready: VecDeque<anyhow::Result<Rendered>>,
    asked: Arc<AtomicUsize>,
}

impl Readings for Fake<'_> {
    fn request(&mut self) {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if let Some(body) = self.bodies.pop_front() {
            self.ready.push_back(Ok(rendered(body, true)));
            self.waker.wake();
        }
    }

    fn take(&mut self) -> Option<anyhow::Result<Rendered>> {
        self.ready.pop_front()
    }
}

fn rendered(body: &str, fresh: bool) -> Rendered {
    Rendered {
        body: Arc::new(body.as_bytes().to_vec()),
        series: 1,
        fresh_until: if fresh {
            None
        } else {
            Some(Instant::now() - Duration::from_millis(1))
        },
    }
}

fn short_limits() -> Limits {
    Limits {
        max_connections: 8,
        head_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(2),
        sample_wait: Duration::from_millis(500),
    }
}

/// Run a server serving `first` (then `bodies` on request) while `f`
/// talks to it; the server's counts and how many readings it asked for.
fn with_server(
    limits: Limits,
    first: Rendered,
    bodies: &[&'static str],
    f: impl FnOnce(SocketAddr) + Send,
) -> (Counts, usize) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let waker = Waker::new().expect("eventfd");
    let asked = Arc::new(AtomicUsize::new(0));
    let fake = Fake {
        waker: &waker,
        bodies: bodies.iter().copied().collect(),
        ready: VecDeque::new(),
        asked: Arc::clone(&asked),
    };
    let server = Server::new(listener, &waker, fake, first, limits).expect("server");
    let stop = Stop::new();
    let counts = std::thread::scope(|scope| {
        let handle = scope.spawn(|| server.run(&stop));
        f(addr);
        stop.trigger();
        handle.join().expect("server thread").expect("server")
    });
    (counts, asked.load(Ordering::SeqCst))
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Read one response: status line, headers, and the body by its
/// Content-Length (none for HEAD).
fn response(s: &mut TcpStream, head_only: bool) -> (String, String, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            other => panic!("connection ended in a head: {other:?} after {buf:?}"),
        }
    }
    let head = String::from_utf8(buf).expect("ascii head");
    let status = head.lines().next().unwrap_or_default().to_string();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("Content-Length");
    let mut body = vec![0u8; if head_only { 0 } else { len }];
    s.read_exact(&mut body).expect("body");
    (status, head, String::from_utf8(body).expect("utf-8 body"))
}

/// The connection was closed by the server (EOF, or a reset).
fn closed(s: &mut TcpStream) -> bool {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => rest.is_empty(),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

const GET: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn serves_metrics_with_keep_alive_head_and_pipelining() {
    let (counts, asked) = with_server(short_limits(), rendered("m 1\n", true), &[], |addr| {
        let mut s = connect(addr);
        for _ in 0..2 {
            s.write_all(GET).expect("send");
            let (status, head, body) = response(&mut s, false);
            assert_eq!(status, "HTTP/1.1 200 OK");
            assert!(head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"));
            assert_eq!(body, "m 1\n");
        }
        s.write_all(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("send");
        let (status, head, _) = response(&mut s, true);
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(head.contains("Content-Length: 4\r\n"), "{head}");
        // Two requests in one write, the second closing.
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("send");
        let (_, _, index) = response(&mut s, false);
        assert!(index.contains("/metrics"), "{index}");
        let (status, head, body) = response(&mut s, false);
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 200 OK", "m 1\n")
        );
        assert!(head.contains("Connection: close"));
        assert!(closed(&mut s));
    });
    assert_eq!(asked, 0, "a fresh reading is served as it is");
    assert_eq!(counts.responses, 5);
}

#[test]
fn a_stale_reading_waits_for_a_new_one_shared_by_the_scrapes_waiting() {
    let (_, asked) = with_server(
        short_limits(),
        rendered("old\n", false),
        &["new\n"],
        |addr| {
            let mut a = connect(addr);
            let mut b = connect(addr);
            a.write_all(GET).expect("send");
            b.write_all(GET).expect("send");
            assert_eq!(response(&mut a, false).2, "new\n");
            assert_eq!(response(&mut b, false).2, "new\n");
        },
    );
    assert_eq!(asked, 1);
    // The sampler never answers: after sample_wait the old reading goes.
    let (_, asked) = with_server(short_limits(), rendered("old\n", false), &[], |addr| {
        let mut a = connect(addr);
        let t = Instant::now();
        a.write_all(GET).expect("send");
        assert_eq!(response(&mut a, false).2, "old\n");
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
    });
    assert_eq!(asked, 1);
}

#[test]
fn refusals_answer_and_close() {
    let (counts, _) = with_server(short_limits(), rendered("m 1\n", true), &[], |addr| {
        let cases: [(&[u8], &str); 5] = [
            (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found"),
            (
                b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
                "405 Method Not Allowed",
            ),
            (
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
                "400 Bad Request",
            ),
            (b"GET /metrics HTTP/1.1\r\n\r\n", "400 Bad Request"),
            (
                b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n",
                "400 Bad Request",
            ),
        ];
        for (request, want) in cases {
            let mut s = connect(addr);
            s.write_all(request).expect("send");
            let (status, head, _) = response(&mut s, false);
            assert_eq!(status, format!("HTTP/1.1 {want}"));
            if want.starts_with("405") {
                assert!(head.contains("Allow: GET, HEAD"), "{head}");
            }
            if !want.starts_with("404") {
                assert!(closed(&mut s), "{want}: still open");
            }
        }
        // A head over 8 KiB: 431.
        let mut s = connect(addr);
        let mut huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
        huge.resize(20_000, b'a');
        let _ = s.write_all(&huge);
        let (status, _, _) = response(&mut s, false);
        assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
        assert!(closed(&mut s));
    });
    assert_eq!(counts.refused, 6);
}

#[test]
fn a_trickled_head_times_out_while_others_are_served() {
    with_server(short_limits(), rendered("m 1\n", true), &[], |addr| {
        let mut slow = connect(addr);
        slow.write_all(b"GET /metrics HTTP/1.1\r\n").expect("send");
        let t = Instant::now();
        // Meanwhile a scrape goes through.
        let mut s = connect(addr);
        s.write_all(GET).expect("send");
        assert_eq!(response(&mut s, false).2, "m 1\n");
        // One byte now and then: the head deadline counts from its first.
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(100));
            let _ = slow.write_all(b"X");
        }
        let (status, _, _) = response(&mut slow, false);
        assert_eq!(status, "HTTP/1.1 408 Request Timeout");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(closed(&mut slow));
    });
}

#[test]
fn a_crowd_of_idle_connections_makes_room_for_a_scrape() {
    let limits = short_limits();
    let (counts, _) = with_server(limits, rendered("m 1\n", true), &[], |addr| {
        // Twice the limit, each silent (or trickling).
        let mut crowd: Vec<TcpStream> = (0..2 * limits.max_connections)
            .map(|_| connect(addr))
            .collect();
        for c in crowd.iter_mut().step_by(2) {
            let _ = c.write_all(b"GE");
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut s = connect(addr);
        s.write_all(GET).expect("send");
        assert_eq!(response(&mut s, false).2, "m 1\n");
        // The oldest of the crowd were closed for room.
        assert!(closed(&mut crowd[0]));
    });
    assert!(
        counts.evicted >= limits.max_connections as u64,
        "{counts:?}"
    );
}

#[test]
fn a_client_that_does_not_read_holds_nothing() {
    // 4 MiB: more than the socket buffers take.
    let big: &'static str = Box::leak("x".repeat(4 << 20).into_boxed_str());
    with_server(short_limits(), rendered(big, true), &[], |addr| {
        let mut lazy = connect(addr);
        lazy.write_all(GET).expect("send");
        std::thread::sleep(Duration::from_millis(100));
        let mut s = connect(addr);
        s.write_all(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("send");
        let (status, _, _) = response(&mut s, true);
        assert_eq!(status, "HTTP/1.1 200 OK");
        // Past the write deadline the lazy one is dropped: reading now
        // ends (EOF or reset) short of the whole body.
        std::thread::sleep(short_limits().write_timeout + Duration::from_millis(300));
        let mut got = Vec::new();
        match lazy.read_to_end(&mut got) {
            Ok(_) => assert!(got.len() < big.len(), "the whole body came"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
        }
    });
}
