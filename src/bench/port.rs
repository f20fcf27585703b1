//! Never join a port another program serves.
//!
//! With SO_REUSEPORT a second server can bind a port that one already
//! serves (same user), and the kernel then spreads the traffic between the
//! two: both measure garbage and nobody is told. Before a server engine
//! binds with SO_REUSEPORT it probes the address with a socket WITHOUT
//! SO_REUSEPORT: that bind fails with EADDRINUSE exactly when some socket
//! holds the address. The user may still join on purpose (`--share-port`).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage};

/// The transport a port is probed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        }
    }
}

/// Refuse `addr` when another socket already holds it, unless `share`.
/// Port 0 (the kernel picks a free one) needs no probe. Errors other than
/// EADDRINUSE are left for the real bind to report.
pub fn ensure_unshared(addr: SocketAddr, transport: Transport, share: bool) -> anyhow::Result<()> {
    if share || addr.port() == 0 {
        return Ok(());
    }
    if held_by_another(addr, transport) {
        let port = addr.port();
        let (ss, kind) = match transport {
            Transport::Tcp => ("-tlnp", "serves"),
            Transport::Udp => ("-ulnp", "holds"),
        };
        anyhow::bail!(
            "another program already {kind} {} port {port} on {}: joining it with SO_REUSEPORT \
             would split the traffic between the two and both would measure only a share \
             (`ss {ss} 'sport = :{port}'` shows who); pick another port (0 for any), or pass \
             --share-port to join it anyway",
            transport.name(),
            addr.ip()
        );
    }
    Ok(())
}

/// Whether a plain bind of `addr` fails with EADDRINUSE. TCP probes with
/// SO_REUSEADDR so that connections in TIME_WAIT do not count.
fn held_by_another(addr: SocketAddr, transport: Transport) -> bool {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let kind = match transport {
        Transport::Tcp => SockType::Stream,
        Transport::Udp => SockType::Datagram,
    };
    let Ok(fd) = socket::socket(family, kind, SockFlag::SOCK_CLOEXEC, None) else {
        return false;
    };
    if transport == Transport::Tcp && socket::setsockopt(&fd, sockopt::ReuseAddr, &true).is_err() {
        return false;
    }
    matches!(
        socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)),
        Err(Errno::EADDRINUSE)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, UdpSocket};

    #[test]
    fn a_held_port_is_refused_unless_shared() {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = udp.local_addr().expect("addr");
        let err = ensure_unshared(addr, Transport::Udp, false).expect_err("held");
        let text = err.to_string();
        assert!(text.contains(&format!("port {}", addr.port())), "{text}");
        assert!(text.contains("--share-port"), "{text}");
        assert!(ensure_unshared(addr, Transport::Udp, true).is_ok());

        let tcp = TcpListener::bind("127.0.0.1:0").expect("listen");
        let addr = tcp.local_addr().expect("addr");
        assert!(ensure_unshared(addr, Transport::Tcp, false).is_err());
    }

    #[test]
    fn a_free_port_or_port_zero_passes() {
        let free = {
            let probe = UdpSocket::bind("127.0.0.1:0").expect("bind");
            probe.local_addr().expect("addr")
        };
        assert!(ensure_unshared(free, Transport::Udp, false).is_ok());
        let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        assert!(ensure_unshared(any, Transport::Tcp, false).is_ok());
    }
}
