//! What the rr-server's two loops (epoll in `server`, io_uring in
//! `uring_server`) share: a thread's sockets and plan, a TCP connection's
//! progress and the accounting of its requests, and the thread's report.

use std::io::Write;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::flows::{Event, Rules};
use super::wire::{CookieKey, TcpSession};
use crate::bench::busy_poll::BusyPoll;

/// A connection that has not sent its whole hello this long after it was
/// accepted is closed: silent connections cannot pile up.
pub(super) const HELLO_DEADLINE: Duration = Duration::from_secs(10);
/// How long a thread stops accepting after accept failed for want of
/// descriptors or memory, so that it serves the connections it has
/// instead of spinning on a listener it cannot empty.
pub(super) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What one server thread did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    pub tcp_connections: u64,
    pub tcp_transactions: u64,
    /// Connections closed for a bad hello.
    pub tcp_bad_hellos: u64,
    /// Connections closed for not sending their hello in time.
    #[serde(default)]
    pub tcp_hello_timeouts: u64,
    /// Connections the kernel had queued that could not be taken (out of
    /// descriptors or memory; accepting pauses briefly).
    #[serde(default)]
    pub accept_errors: u64,
    pub udp_flows: u64,
    pub udp_transactions: u64,
    /// Requests dropped on purpose (`drop_every`).
    pub udp_dropped: u64,
    /// Datagrams from a source that never sent a hello (or was forgotten).
    pub udp_unknown: u64,
    /// Hellos and address checks refused: malformed, or asking for more
    /// than a datagram carries or the server sends.
    #[serde(default)]
    pub udp_bad_hellos: u64,
    /// Address checks answered with a cookie.
    #[serde(default)]
    pub udp_cookies: u64,
    /// Replies cut to the length of their request: the flow asked for
    /// larger replies without proving its address.
    #[serde(default)]
    pub udp_capped: u64,
    /// Replies the kernel would not take (socket buffer full), or that found
    /// the io_uring engine's replies in flight at their bound.
    pub udp_send_errors: u64,
    /// Connections closed and datagrams ignored because they came from an
    /// address other than the one peer served.
    #[serde(default)]
    pub foreign: u64,
}

impl ThreadReport {
    pub(super) fn add(&mut self, o: &ThreadReport) {
        self.tcp_connections += o.tcp_connections;
        self.tcp_transactions += o.tcp_transactions;
        self.tcp_bad_hellos += o.tcp_bad_hellos;
        self.tcp_hello_timeouts += o.tcp_hello_timeouts;
        self.accept_errors += o.accept_errors;
        self.udp_flows += o.udp_flows;
        self.udp_transactions += o.udp_transactions;
        self.udp_dropped += o.udp_dropped;
        self.udp_unknown += o.udp_unknown;
        self.udp_bad_hellos += o.udp_bad_hellos;
        self.udp_cookies += o.udp_cookies;
        self.udp_capped += o.udp_capped;
        self.udp_send_errors += o.udp_send_errors;
        self.foreign += o.foreign;
    }

    /// Count what a datagram was.
    pub(super) fn count(&mut self, event: Event) {
        match event {
            Event::Foreign => self.foreign += 1,
            Event::BadHello => self.udp_bad_hellos += 1,
            Event::Registered { new } => self.udp_flows += u64::from(new),
            Event::Cookie => self.udp_cookies += 1,
            Event::Unknown => self.udp_unknown += 1,
            Event::Dropped => self.udp_dropped += 1,
            Event::Answered { capped } => {
                self.udp_transactions += 1;
                self.udp_capped += u64::from(capped);
            }
        }
    }
}

/// One thread's sockets.
pub(super) struct Sockets {
    pub(super) listener: TcpListener,
    pub(super) udp: UdpSocket,
}

pub(super) struct Plan {
    pub(super) thread: usize,
    pub(super) cpu: Option<u32>,
    pub(super) rules: Rules,
    pub(super) busy: BusyPoll,
    pub(super) key: CookieKey,
}

/// A TCP connection's progress.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) session: TcpSession,
    /// When it was accepted (the hello is due within [`HELLO_DEADLINE`]).
    pub(super) opened: Instant,
    /// Reply bytes due but not yet written (a count: never a buffer).
    pub(super) owed: u64,
    /// Waiting for EPOLLOUT (a reply did not fit the send buffer); no
    /// request is read meanwhile, so a peer that sends without reading
    /// meets TCP's flow control instead of growing what it is owed.
    pub(super) writing: bool,
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            session: TcpSession::default(),
            opened: Instant::now(),
            owed: 0,
            writing: false,
        }
    }

    /// Still without its hello past the deadline.
    pub(super) fn hello_overdue(&self, now: Instant) -> bool {
        self.session.hello().is_none() && now.duration_since(self.opened) >= HELLO_DEADLINE
    }
}

pub(super) enum After {
    Keep,
    /// Nothing to read (in a blocking read: the timeout passed).
    Idle,
    Close,
}

/// Whether accept failed for want of a resource (descriptors, memory):
/// wait and try again, rather than end the thread.
pub(super) fn accept_starved(errno: Option<i32>) -> bool {
    matches!(
        errno,
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Account `data` the connection received ([`TcpSession::take`]): echo the
/// hello when it completes (one write; refused past `max_reply`), and owe a
/// reply per complete request.
pub(super) fn take_requests(
    conn: &mut Conn,
    data: &[u8],
    report: &mut ThreadReport,
    max_reply: Option<u32>,
) -> After {
    let Ok(took) = conn.session.take(data, max_reply) else {
        report.tcp_bad_hellos += 1;
        return After::Close;
    };
    if let Some(echo) = took.echo {
        // 16 bytes into an empty send buffer: one write takes them.
        if conn.stream.write(&echo).ok() != Some(echo.len()) {
            return After::Close;
        }
    }
    let Some(hello) = conn.session.hello() else {
        return After::Keep;
    };
    let owed = took.requests.saturating_mul(u64::from(hello.reply));
    conn.owed = conn.owed.saturating_add(owed);
    report.tcp_transactions = report.tcp_transactions.saturating_add(took.requests);
    After::Keep
}
