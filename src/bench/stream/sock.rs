//! Socket options of a stream's data connections: buffers (`--window`),
//! congestion control (`--cc`), pacing (`--pace`), MSG_ZEROCOPY, and the
//! TCP_INFO figures the per-second lines print.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{self, sockopt};
use serde::{Deserialize, Serialize};

use crate::base::Root;

/// socket(7) SO_MAX_PACING_RATE (asm-generic; libc does not name it).
const SO_MAX_PACING_RATE: libc::c_int = 47;
/// socket(7) SO_ZEROCOPY.
const SO_ZEROCOPY: libc::c_int = 60;

const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A socket's buffers: what `--window` asked, what the kernel granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffers {
    /// `--window`, if given; without it the kernel autotunes both buffers
    /// (net.ipv4.tcp_wmem / tcp_rmem).
    pub requested: Option<u32>,
    /// getsockopt(SO_SNDBUF), bytes (the kernel doubles a request for its
    /// own bookkeeping).
    pub sndbuf: usize,
    /// getsockopt(SO_RCVBUF), bytes.
    pub rcvbuf: usize,
    /// Whether SO_SNDBUFFORCE/SO_RCVBUFFORCE (root: past net.core.wmem_max
    /// and rmem_max) were used.
    pub forced: bool,
}

/// Set both buffers to `window` (forced as root, else capped by
/// net.core.wmem_max/rmem_max), or leave them to autotuning; report what
/// the socket has.
pub fn set_window(fd: BorrowedFd<'_>, window: Option<u32>) -> anyhow::Result<Buffers> {
    let mut forced = false;
    if let Some(bytes) = window {
        let bytes = bytes as usize;
        let force = socket::setsockopt(&fd, sockopt::SndBufForce, &bytes)
            .and_then(|()| socket::setsockopt(&fd, sockopt::RcvBufForce, &bytes));
        match force {
            Ok(()) => forced = true,
            // Not root: the plain options, capped by the sysctls.
            Err(Errno::EPERM) => {
                socket::setsockopt(&fd, sockopt::SndBuf, &bytes)
                    .with_context(|| format!("cannot set SO_SNDBUF to --window '{bytes}'"))?;
                socket::setsockopt(&fd, sockopt::RcvBuf, &bytes)
                    .with_context(|| format!("cannot set SO_RCVBUF to --window '{bytes}'"))?;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot force --window '{bytes}'"));
            }
        }
    }
    Ok(Buffers {
        requested: window,
        sndbuf: socket::getsockopt(&fd, sockopt::SndBuf).context("cannot read SO_SNDBUF")?,
        rcvbuf: socket::getsockopt(&fd, sockopt::RcvBuf).context("cannot read SO_RCVBUF")?,
        forced,
    })
}

/// A warning when the kernel granted less than `--window` asked.
pub fn window_capped(buffers: &Buffers) -> Option<String> {
    let requested = buffers.requested? as usize;
    (!buffers.forced && buffers.sndbuf.min(buffers.rcvbuf) < requested).then(|| {
        format!(
            "asked for --window {requested}, got SO_SNDBUF {} / SO_RCVBUF {} (net.core.wmem_max \
             and rmem_max cap it; run as root to force it, or raise them)",
            buffers.sndbuf, buffers.rcvbuf
        )
    })
}

/// The congestion control algorithms this kernel has, and those an
/// unprivileged process may pick (the network namespace's allowed list).
pub fn congestion_controls() -> (Vec<String>, Vec<String>) {
    let root = Root::live();
    let words = |path: &str| -> Vec<String> {
        root.read(path)
            .map(|text| text.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    (words(AVAILABLE_CC), words(ALLOWED_CC))
}

/// `--cc NAME` must name an algorithm this kernel has: the error lists
/// them. An empty list (unreadable) leaves the check to the socket option.
pub fn check_cc(name: &str) -> anyhow::Result<()> {
    let (available, allowed) = congestion_controls();
    if !available.is_empty() && !available.iter().any(|a| a == name) {
        return Err(cc_error(name, &available, &allowed, Errno::ENOENT));
    }
    Ok(())
}

fn cc_error(name: &str, available: &[String], allowed: &[String], errno: Errno) -> anyhow::Error {
    let list = |l: &[String]| {
        if l.is_empty() {
            "unknown".to_string()
        } else {
            l.join(" ")
        }
    };
    match errno {
        Errno::EPERM => anyhow::anyhow!(
            "--cc '{name}': this kernel has it, but an unprivileged process may only pick {} \
             (net.ipv4.tcp_allowed_congestion_control); run as root or add '{name}' to that list",
            list(allowed)
        ),
        _ => anyhow::anyhow!(
            "--cc '{name}': this kernel has no such congestion control (available: {}; \
             net.ipv4.tcp_available_congestion_control; a module such as tcp_{name} may add it)",
            list(available)
        ),
    }
}

/// Set TCP_CONGESTION; an unknown or forbidden name is an error that lists
/// what may be used.
pub fn set_cc(fd: BorrowedFd<'_>, name: &str) -> anyhow::Result<()> {
    match socket::setsockopt(&fd, sockopt::TcpCongestion, &std::ffi::OsString::from(name)) {
        Ok(()) => Ok(()),
        Err(e @ (Errno::ENOENT | Errno::EPERM)) => {
            let (available, allowed) = congestion_controls();
            Err(cc_error(name, &available, &allowed, e))
        }
        Err(e) => Err(e).with_context(|| format!("cannot set TCP_CONGESTION to --cc '{name}'")),
    }
}

/// The socket's congestion control (the namespace's default unless set).
pub fn congestion(fd: BorrowedFd<'_>) -> String {
    socket::getsockopt(&fd, sockopt::TcpCongestion)
        .map(|name| name.to_string_lossy().trim_end_matches('\0').to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// SO_MAX_PACING_RATE: at most `bits_per_second` (the option takes bytes
/// per second). The fq qdisc enforces it per flow; without fq, TCP paces
/// itself (tcp_internal_pacing, since Linux 4.13).
pub fn set_pacing(fd: BorrowedFd<'_>, bits_per_second: u64) -> anyhow::Result<()> {
    let bytes: u64 = (bits_per_second / 8).max(1);
    // SAFETY: a u64 value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            (&bytes as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot set SO_MAX_PACING_RATE");
    }
    Ok(())
}

/// SO_RCVLOWAT: the kernel wakes a blocked reader once `bytes` are queued
/// (or at the FIN, an error, or the read timeout), not per segment
/// (Linux 4.18 for the wake-up; socket(7)).
pub fn set_rcvlowat(fd: BorrowedFd<'_>, bytes: usize) -> anyhow::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: an int value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot set SO_RCVLOWAT");
    }
    Ok(())
}

/// SO_ZEROCOPY, which MSG_ZEROCOPY sends need (Linux 4.14).
pub fn enable_zerocopy(fd: BorrowedFd<'_>) -> anyhow::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: an int value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot set SO_ZEROCOPY (MSG_ZEROCOPY needs Linux 4.14)");
    }
    Ok(())
}

/// The TCP_INFO figures nettune reports, in the units iperf3 prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Smoothed round-trip time, microseconds.
    pub rtt: u32,
    pub rttvar: u32,
    /// Congestion window in bytes (segments x MSS), as iperf3's snd_cwnd.
    pub snd_cwnd: u64,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// The rate TCP paces at now (bits per second): min(its own estimate,
    /// SO_MAX_PACING_RATE).
    pub pacing_bits_per_second: u64,
    /// SO_MAX_PACING_RATE as the kernel holds it (bits per second); `None`:
    /// unlimited.
    pub max_pacing_bits_per_second: Option<u64>,
    pub bytes_acked: u64,
    pub bytes_received: u64,
}

/// getsockopt(TCP_INFO). Older kernels return a shorter struct: fields past
/// its end stay zero.
pub fn tcp_info(fd: BorrowedFd<'_>) -> anyhow::Result<TcpInfo> {
    // SAFETY: tcp_info is plain data; all-zero is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: info has room for len bytes; the kernel writes at most len.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("getsockopt(TCP_INFO) failed");
    }
    let bits = |bytes_per_second: u64| bytes_per_second.saturating_mul(8);
    Ok(TcpInfo {
        rtt: info.tcpi_rtt,
        rttvar: info.tcpi_rttvar,
        snd_cwnd: u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
        total_retrans: info.tcpi_total_retrans,
        pacing_bits_per_second: if info.tcpi_pacing_rate == u64::MAX {
            0
        } else {
            bits(info.tcpi_pacing_rate)
        },
        max_pacing_bits_per_second: (info.tcpi_max_pacing_rate != u64::MAX
            && info.tcpi_max_pacing_rate != 0)
            .then(|| bits(info.tcpi_max_pacing_rate)),
        bytes_acked: info.tcpi_bytes_acked,
        bytes_received: info.tcpi_bytes_received,
    })
}

/// TCP_INFO of a stream, `None` when it cannot be read (the connection is
/// gone).
pub fn info_of(stream: &TcpStream) -> Option<TcpInfo> {
    tcp_info(stream.as_fd()).ok()
}

/// Which pacing applies to a socket whose traffic leaves through the
/// interface holding `local`: the fq qdisc when it is the interface's root
/// qdisc, else TCP's own (internal) pacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacer {
    /// The root qdisc is fq: it enforces SO_MAX_PACING_RATE per flow.
    Fq,
    /// No fq on the way out: TCP paces itself with a high-resolution timer
    /// (tcp_internal_pacing, Linux 4.13+); it works as well for one flow,
    /// at a little more CPU.
    TcpInternal,
    /// A multiqueue root (mq): each TX queue's child decides; not read.
    PerQueue,
}

impl Pacer {
    pub fn describe(self) -> &'static str {
        match self {
            Pacer::Fq => "fq qdisc",
            Pacer::TcpInternal => "TCP internal pacing (no fq qdisc on the way out)",
            Pacer::PerQueue => "fq if the TX queue's qdisc is fq, else TCP internal pacing",
        }
    }
}

/// The interface that holds `local` (the connection's own address), and
/// the pacer its root qdisc implies. Runs in the calling thread's network
/// namespace.
pub fn pacer_for(local: SocketAddr) -> (Option<String>, Pacer) {
    use crate::base::driver::Netlink as _;
    let iface = interface_of(local);
    let kind = iface.as_deref().and_then(|name| {
        crate::nic::live::LiveNetlink
            .root_qdisc(name)
            .value()
            .map(|q| q.kind.clone())
    });
    let pacer = match kind.as_deref() {
        Some("fq") => Pacer::Fq,
        Some("mq" | "multiq" | "mqprio") => Pacer::PerQueue,
        _ => Pacer::TcpInternal,
    };
    (iface, pacer)
}

/// The name of the interface with address `local`.
fn interface_of(local: SocketAddr) -> Option<String> {
    let want = local.ip();
    if want.is_loopback() {
        return Some("lo".to_string());
    }
    nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
        let addr = ifa.address?;
        let ip = match (addr.as_sockaddr_in(), addr.as_sockaddr_in6()) {
            (Some(v4), _) => std::net::IpAddr::V4(v4.ip()),
            (_, Some(v6)) => std::net::IpAddr::V6(v6.ip()),
            _ => return None,
        };
        (ip == want).then(|| ifa.interface_name.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn an_unknown_congestion_control_lists_the_available_ones() {
        let err = cc_error(
            "vegas",
            &["reno".into(), "cubic".into()],
            &["reno".into()],
            Errno::ENOENT,
        );
        let text = err.to_string();
        assert!(
            text.contains("'vegas'") && text.contains("reno cubic"),
            "{text}"
        );
        let err = cc_error("cubic", &["cubic".into()], &["reno".into()], Errno::EPERM);
        assert!(err.to_string().contains("may only pick reno"), "{err}");
    }

    #[test]
    fn options_on_a_loopback_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let stream = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let fd = stream.as_fd();
        let buffers = set_window(fd, Some(256 * 1024)).expect("window");
        assert!(buffers.sndbuf > 0 && buffers.rcvbuf > 0, "{buffers:?}");
        set_pacing(fd, 100_000_000).expect("pacing");
        let info = tcp_info(fd).expect("tcp_info");
        assert_eq!(info.max_pacing_bits_per_second, Some(100_000_000));
        assert!(set_cc(fd, "no-such-cc").is_err());
        assert_ne!(congestion(fd), "unknown");
        let (iface, _) = pacer_for(stream.local_addr().expect("local"));
        assert_eq!(iface.as_deref(), Some("lo"));
    }
}
