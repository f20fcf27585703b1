//! `nettune serve` against strangers who never authenticate: silent
//! connections from one address (127.0.0.2) or from many (127.0.0.2 up)
//! must not keep a client on 127.0.0.1 out, nor grow the daemon's threads
//! and descriptors without bound; and a token file that another user owns
//! is refused.
//!
//! Traffic stays on loopback (the whole 127/8 is this host's); every
//! stranger is bounded in time and stops with its test.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::{finish_bounded, is_root, nettune, run, skipped};
use crate::serve::{client, daemon_with_token, refused_before_connecting, token_file, Daemon};

/// A TCP connection to `to` from `source` (any port).
fn connect_from(source: Ipv4Addr, to: SocketAddrV4) -> std::io::Result<TcpStream> {
    use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrIn};
    let fd = socket::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    socket::bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(SocketAddrV4::new(source, 0)),
    )?;
    socket::connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
    let stream = TcpStream::from(fd);
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// Whether the daemon closed `conn` (it never sent anything else).
fn closed(conn: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    !matches!(conn.peek(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Strangers that connect and say nothing: `count` connections from
/// `sources` (round robin), each replaced by a new one as soon as the
/// daemon closes it, and every 2 s anyway (before any handshake deadline
/// of 3 s or more), at most `burst` new ones per 20 ms; until `stop`.
/// Returns how many connections it made.
fn hold_silent(
    to: SocketAddr,
    sources: &[Ipv4Addr],
    count: usize,
    burst: usize,
    stop: &AtomicBool,
    made: &AtomicU64,
) {
    let SocketAddr::V4(to) = to else {
        panic!("an IPv4 daemon")
    };
    let renew = Duration::from_secs(2);
    let mut slots: Vec<Option<(TcpStream, Instant)>> = (0..count).map(|_| None).collect();
    // The first round opens all of them at once.
    let mut budget = count;
    while !stop.load(Ordering::SeqCst) {
        for (i, slot) in slots.iter_mut().enumerate() {
            let stale = match slot {
                None => true,
                Some((conn, at)) => at.elapsed() >= renew || closed(conn),
            };
            if stale && budget > 0 {
                budget -= 1;
                *slot = connect_from(sources[i % sources.len()], to)
                    .ok()
                    .map(|c| (c, Instant::now()));
                made.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        budget = burst;
    }
}

/// Descriptors the process `pid` has open.
fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Run `tries` rr clients one after the other while strangers from
/// `sources` hold `count` silent connections; how many clients got their
/// report, the most threads and descriptors the daemon had meanwhile, and
/// the stderr of the first that failed.
fn clients_under_flood(
    daemon: &Daemon,
    token: &std::path::Path,
    sources: &[Ipv4Addr],
    count: usize,
    tries: usize,
) -> (usize, usize, usize, Option<String>) {
    let stop = AtomicBool::new(false);
    let made = AtomicU64::new(0);
    let to: SocketAddr = daemon.addr.parse().expect("addr");
    std::thread::scope(|s| {
        let flood = s.spawn(|| hold_silent(to, sources, count, 10, &stop, &made));
        /// Stops the strangers also when an assertion fails.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let _stop = Stop(&stop);
        // Let the first round arrive.
        while made.load(Ordering::Relaxed) < count as u64 {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        let (mut served, mut threads, mut descriptors, mut failure) = (0, 0, 0, None);
        for _ in 0..tries {
            let rr = ["rr", "--proto", "tcp", "--duration", "0.3", "--warmup", "0"];
            let (code, report, stderr) = client(daemon, Some(token), &rr);
            if code == Some(0) && report.is_some() {
                served += 1;
            } else if failure.is_none() {
                failure = Some(stderr);
            }
            threads = threads.max(daemon.threads());
            descriptors = descriptors.max(fds(daemon.pid()));
        }
        stop.store(true, Ordering::SeqCst);
        flood.join().expect("strangers");
        (served, threads, descriptors, failure)
    })
}

#[test]
fn five_hundred_silent_connections_from_one_address_never_lock_a_client_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (daemon, token) = daemon_with_token(dir.path(), &[]);
    let stranger = [Ipv4Addr::new(127, 0, 0, 2)];
    let (served, _, _, failure) = clients_under_flood(&daemon, &token, &stranger, 500, 10);
    assert_eq!(served, 10, "first failure: {failure:?}\n{}", daemon.log());
    // The daemon said why it closed the stranger's connections, summed up
    // per source rather than a line each.
    daemon.signal(libc::SIGTERM);
    let log_path = daemon.log.clone();
    assert_eq!(daemon.wait(), Some(0));
    let log = std::fs::read_to_string(log_path).expect("log");
    assert!(
        log.contains("127.0.0.2: ") && log.contains("closed at once"),
        "{log}"
    );
}

#[test]
fn silent_connections_from_many_addresses_are_bounded_and_the_oldest_make_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (daemon, token) = daemon_with_token(dir.path(), &[]);
    let (idle_threads, idle_fds) = (daemon.threads(), fds(daemon.pid()));
    // 40 addresses, 8 connections each allowed: 320, five times the 64 the
    // daemon takes in their handshake at once.
    let strangers: Vec<Ipv4Addr> = (2..42).map(|i| Ipv4Addr::new(127, 0, 0, i)).collect();
    let (served, threads, descriptors, failure) =
        clients_under_flood(&daemon, &token, &strangers, 400, 5);
    assert_eq!(served, 5, "first failure: {failure:?}\n{}", daemon.log());
    // One thread and two descriptors per connection in its handshake, 64
    // at most, and a test's own (a client's rr-server and its session).
    // An evicted connection's thread ends when it next wakes: on a busy
    // machine a few are still on their way out when the threads are counted.
    let pending = nettune::serve::MAX_PENDING;
    assert!(
        threads <= idle_threads + pending + 24,
        "{threads} threads (idle {idle_threads})"
    );
    assert!(
        descriptors <= idle_fds + 2 * pending + 16,
        "{descriptors} descriptors (idle {idle_fds})"
    );
    // Summed up per source in the log, the last summary when it stops.
    daemon.signal(libc::SIGTERM);
    let log_path = daemon.log.clone();
    assert_eq!(daemon.wait(), Some(0));
    let log = std::fs::read_to_string(log_path).expect("log");
    assert!(log.contains("to make room for newer ones"), "{log}");
}

/// A token file that another user owns is refused, by the daemon and by a
/// client, even run as root: that user could rewrite the secret.
#[test]
fn a_token_file_owned_by_another_user_is_refused() {
    if !is_root() {
        return skipped(
            "a_token_file_owned_by_another_user_is_refused",
            "needs root to give a file to another user",
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let theirs = token_file(
        dir.path(),
        "theirs",
        "a-shared-secret-of-enough-bytes",
        0o600,
    );
    // nobody
    std::os::unix::fs::chown(&theirs, Some(65534), None).expect("chown");
    let file = theirs.to_str().expect("path");
    // Bounded: a daemon that took the file would serve until killed.
    let daemon = nettune()
        .args(["serve", "--bind", "127.0.0.1:0", "--token-file", file])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    let (code, _, stderr) = finish_bounded(daemon, Duration::from_secs(10));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("belongs to uid 65534") && stderr.contains("nor root"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let stderr = refused_before_connecting(&["--token-file", file]);
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    // Root's own file, and a FIFO in a token's place is refused at once.
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
    let (code, _, stderr) = run(&[
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--token-file",
        fifo.to_str().expect("path"),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}
