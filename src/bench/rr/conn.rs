//! Sockets for rr: the server's SO_REUSEPORT listener and UDP socket per
//! thread, the client's connections and flows, and the descriptor limit a
//! few thousand of them need.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage,
};

/// Connection attempts when the server refuses (it may still be starting),
/// and the pause between them.
pub const CONNECT_TRIES: u32 = 3;
const CONNECT_PAUSE: Duration = Duration::from_millis(100);
/// How long one TCP connect may take: longer than one SYN retransmission
/// (the initial RTO is 1 s, RFC 6298) and one ARP retry (1 s), so a first
/// packet lost on a link just brought up, or a loaded host, does not fail
/// the run; a server that is not there still fails within seconds.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

fn family(addr: SocketAddr) -> AddressFamily {
    if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

fn new_socket(addr: SocketAddr, kind: SockType) -> anyhow::Result<OwnedFd> {
    let fd = socket::socket(
        family(addr),
        kind,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .context("cannot create a socket")?;
    socket::setsockopt(&fd, sockopt::ReusePort, &true).context("cannot set SO_REUSEPORT")?;
    Ok(fd)
}

/// A non-blocking TCP listener with SO_REUSEPORT on `addr`.
pub fn listener(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let fd = new_socket(addr, SockType::Stream)?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).context("cannot set SO_REUSEADDR")?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))
        .map_err(|e| bind_error("tcp", addr, e))?;
    let backlog = Backlog::new(4096).context("listen backlog")?;
    socket::listen(&fd, backlog).context("cannot listen")?;
    Ok(TcpListener::from(fd))
}

/// Receive buffer the server asks for on each UDP socket: requests of
/// thousands of flows arrive in bursts, and the default (212992 bytes,
/// about 270 small datagrams) drops some, which the clients see as resends.
const UDP_RCVBUF: usize = 4 << 20;

/// A non-blocking UDP socket with SO_REUSEPORT on `addr`, with a large
/// receive buffer (forced as root; else as large as net.core.rmem_max
/// allows: best effort, the default still works).
pub fn udp_socket(addr: SocketAddr) -> anyhow::Result<UdpSocket> {
    let fd = new_socket(addr, SockType::Datagram)?;
    if socket::setsockopt(&fd, sockopt::RcvBufForce, &UDP_RCVBUF).is_err() {
        let _ = socket::setsockopt(&fd, sockopt::RcvBuf, &UDP_RCVBUF);
    }
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))
        .map_err(|e| bind_error("udp", addr, e))?;
    Ok(UdpSocket::from(fd))
}

/// Whether a bind failed because the port is taken (port 0 picked a TCP
/// port whose UDP twin is busy: try another).
pub fn is_in_use(e: &anyhow::Error) -> bool {
    e.downcast_ref::<BindError>()
        .is_some_and(|b| b.errno == Errno::EADDRINUSE)
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct BindError {
    errno: Errno,
    message: String,
}

fn bind_error(proto: &str, addr: SocketAddr, errno: Errno) -> anyhow::Error {
    let port = addr.port();
    let message = match errno {
        Errno::EADDRINUSE => format!(
            "--bind '{addr}': {proto} port {port} is already in use \
             (`ss -tulpn 'sport = :{port}'` shows by whom); pick another port, or 0 for any"
        ),
        Errno::EADDRNOTAVAIL => format!(
            "--bind '{addr}': no interface in this network namespace has address {} \
             (`ip -br addr` lists them)",
            addr.ip()
        ),
        Errno::EACCES => {
            format!(
                "--bind '{addr}': port {port} is privileged; run as root or use a port above 1023"
            )
        }
        other => format!("--bind '{addr}': cannot bind {proto}: {}", other.desc()),
    };
    BindError { errno, message }.into()
}

/// Connect to the server, retrying a refused connection a few times (the
/// server may be starting). Blocking, with TCP_NODELAY: an rr exchange
/// never waits for Nagle.
pub fn connect_tcp(to: SocketAddr) -> anyhow::Result<TcpStream> {
    let mut last = None;
    for attempt in 0..CONNECT_TRIES {
        if attempt > 0 {
            std::thread::sleep(CONNECT_PAUSE);
        }
        match TcpStream::connect_timeout(&to, CONNECT_TIMEOUT) {
            Ok(stream) => {
                stream.set_nodelay(true).context("cannot set TCP_NODELAY")?;
                return Ok(stream);
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => last = Some(e),
            Err(e) => return Err(unreachable(to, &e, 1)),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::from(io::ErrorKind::ConnectionRefused));
    Err(unreachable(to, &e, CONNECT_TRIES))
}

fn unreachable(to: SocketAddr, e: &io::Error, tries: u32) -> anyhow::Error {
    anyhow::anyhow!(
        "--to '{to}': cannot connect over TCP: {e} ({tries} attempt{}); \
         start `nettune bench rr-server --bind {to}` there first",
        if tries == 1 { "" } else { "s" }
    )
}

/// A UDP flow: its own socket on a free source port, connected to the
/// server (so only the server's datagrams arrive, and an ICMP port
/// unreachable shows up as ECONNREFUSED). Non-blocking.
pub fn udp_flow(to: SocketAddr) -> anyhow::Result<UdpSocket> {
    let local: SocketAddr = if to.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).context("cannot open a UDP socket")?;
    socket.connect(to).with_context(|| {
        format!("--to '{to}': cannot connect a UDP socket (no route from this network namespace?)")
    })?;
    socket
        .set_nonblocking(true)
        .context("cannot make a UDP socket non-blocking")?;
    Ok(socket)
}

/// Let this process hold `needed` descriptors: raise the soft
/// RLIMIT_NOFILE towards the hard one when it is lower.
pub fn ensure_descriptors(needed: u64) -> anyhow::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error()).context("cannot read RLIMIT_NOFILE");
    }
    if limit.rlim_cur >= needed {
        return Ok(());
    }
    if limit.rlim_max < needed {
        anyhow::bail!(
            "this run needs about {needed} file descriptors but the hard limit is {}; \
             raise it (`ulimit -Hn`, or LimitNOFILE= in a systemd unit) or use fewer --instances",
            limit.rlim_max
        );
    }
    limit.rlim_cur = needed;
    // SAFETY: setrlimit reads the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(io::Error::last_os_error()).context("cannot raise RLIMIT_NOFILE");
    }
    Ok(())
}

/// The hard descriptor limit (the server raises its soft limit to it: it
/// cannot know how many clients will come).
pub fn hard_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_max
}

/// Errors that only mean "nothing to do now".
pub fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_and_udp_share_a_port_across_reuseport_sockets() {
        let first = listener("127.0.0.1:0".parse().expect("addr")).expect("listen");
        let addr = first.local_addr().expect("addr");
        let _second = listener(addr).expect("a second SO_REUSEPORT listener");
        let _udp = udp_socket(addr).expect("udp on the same port");
        let _udp2 = udp_socket(addr).expect("a second SO_REUSEPORT udp socket");
    }

    #[test]
    fn a_refused_connect_names_the_address_and_the_fix() {
        // A port just freed: nothing listens there.
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr")
        };
        let err = connect_tcp(port).expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{port}'")), "{msg}");
        assert!(
            msg.contains("3 attempts") && msg.contains("rr-server"),
            "{msg}"
        );
    }

    #[test]
    fn a_taken_port_is_recognised() {
        let held = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = held.local_addr().expect("addr");
        let err = udp_socket(addr).expect_err("held without SO_REUSEPORT");
        assert!(is_in_use(&err), "{err}");
        assert!(err.to_string().contains("already in use"), "{err}");
    }
}
