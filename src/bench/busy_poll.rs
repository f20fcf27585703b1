//! Busy polling for the bench engines: the socket options that let a
//! blocking read or an epoll wait poll the NIC queue's NAPI instead of
//! sleeping until its interrupt (kernel Documentation/networking/napi.rst,
//! "Busy polling"):
//!
//! - `SO_BUSY_POLL` (Linux 3.11): how long a read may poll, microseconds;
//! - `SO_PREFER_BUSY_POLL` (5.11): while the application polls, the kernel
//!   leaves the queue to it instead of processing it in softirq, and keeps
//!   the IRQ masked for as long as the NAPI's IRQ deferral allows;
//! - `SO_BUSY_POLL_BUDGET` (5.11): packets per poll (default 8);
//! - the same three per epoll instance through the `EPIOCSPARAMS` ioctl
//!   (6.9): without it an epoll wait busy-polls only when the host-wide
//!   `net.core.busy_poll` is set, whatever the sockets say.
//!
//! Busy polling needs a queue with a NAPI instance to poll: a NIC, or veth
//! with GRO or XDP on. Loopback has none, so busy polling a loopback
//! address would spin on nothing: refused as bad input.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

/// SO_PREFER_BUSY_POLL and SO_BUSY_POLL_BUDGET (asm-generic/socket.h, as
/// on x86-64 and arm64).
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;
/// The budget above which the kernel wants CAP_NET_ADMIN (NAPI_POLL_WEIGHT).
const UNPRIVILEGED_BUDGET: u16 = 64;

/// Busy polling asked for on the command line. `usecs: None` is off (the
/// host-wide `net.core.busy_read` / `busy_poll` still apply).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyPoll {
    /// SO_BUSY_POLL, and the epoll instances' busy_poll_usecs.
    #[serde(default, rename = "busy_poll")]
    pub usecs: Option<u32>,
    /// SO_PREFER_BUSY_POLL, and the epoll instances' prefer_busy_poll.
    #[serde(default, rename = "prefer_busy_poll")]
    pub prefer: bool,
    /// SO_BUSY_POLL_BUDGET, and the epoll instances' busy_poll_budget;
    /// `None`: the kernel's (8).
    #[serde(default, rename = "busy_poll_budget")]
    pub budget: Option<u16>,
}

/// What a run did about busy polling, for its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyPollReport {
    pub usecs: u32,
    pub prefer: bool,
    pub budget: Option<u16>,
    /// The epoll instances got the same values (EPIOCSPARAMS, Linux 6.9);
    /// false: this kernel lacks it, epoll waits follow net.core.busy_poll.
    pub epoll: bool,
    /// The NAPI instances the sockets' packets arrived through
    /// (SO_INCOMING_NAPI_ID after the hello), where checked (the rr
    /// client): empty means busy polling had nothing to poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub napi_ids: Option<Vec<u32>>,
}

impl BusyPoll {
    pub fn new(usecs: Option<u32>, prefer: bool, budget: Option<u16>) -> BusyPoll {
        BusyPoll {
            usecs,
            prefer,
            budget,
        }
    }

    pub fn is_on(&self) -> bool {
        self.usecs.is_some()
    }

    /// Bad input: the two modifiers without a poll time, a zero budget, or
    /// busy polling an address whose traffic goes over loopback (`addr`:
    /// what the engine binds or sends to; `flag` names it: `--bind`,
    /// `--to`).
    pub fn validate(&self, flag: &str, addr: SocketAddr) -> anyhow::Result<()> {
        self.check_values()?;
        if self.usecs.is_none() {
            return Ok(());
        }
        if addr.ip().is_loopback() {
            anyhow::bail!(
                "--busy-poll with {flag} '{addr}': loopback has no NAPI instance to poll, so busy \
                 polling would never engage; run across a NIC, or a veth pair with GRO on and \
                 TSO off (ethtool -K DEV gro on tso off)"
            );
        }
        Ok(())
    }

    /// Bad input whatever the socket: the two modifiers without a poll
    /// time, a poll time out of range, a zero budget.
    pub fn check_values(&self) -> anyhow::Result<()> {
        let Some(usecs) = self.usecs else {
            if self.prefer || self.budget.is_some() {
                anyhow::bail!(
                    "--prefer-busy-poll and --busy-poll-budget modify busy polling: give \
                     --busy-poll USECS too (e.g. --busy-poll 50)"
                );
            }
            return Ok(());
        };
        if usecs == 0 || usecs > i32::MAX as u32 {
            anyhow::bail!("--busy-poll '{usecs}': give 1 to {} microseconds", i32::MAX);
        }
        if self.budget == Some(0) {
            anyhow::bail!("--busy-poll-budget '0': give 1 to 65535 packets per poll");
        }
        Ok(())
    }

    /// The report of a run that used these settings.
    pub fn report(&self, epoll: bool) -> Option<BusyPollReport> {
        self.usecs.map(|usecs| BusyPollReport {
            usecs,
            prefer: self.prefer,
            budget: self.budget,
            epoll,
            napi_ids: None,
        })
    }

    /// One line for the run's header.
    pub fn describe(&self, epoll: bool) -> String {
        let Some(usecs) = self.usecs else {
            return "busy polling off".to_string();
        };
        let mut text = format!("SO_BUSY_POLL {usecs} us");
        if self.prefer {
            text.push_str(", SO_PREFER_BUSY_POLL");
        }
        if let Some(budget) = self.budget {
            text.push_str(&format!(", budget {budget}"));
        }
        if epoll {
            text.push_str(", same on epoll (EPIOCSPARAMS)");
        } else {
            text.push_str(
                "; this kernel lacks EPIOCSPARAMS (Linux 6.9): epoll waits busy-poll only with \
                 net.core.busy_poll",
            );
        }
        text
    }

    /// Set the options on one socket. A socket the kernel cannot busy-poll
    /// (not TCP or UDP over IP) is refused.
    pub fn apply_socket(&self, fd: BorrowedFd<'_>) -> anyhow::Result<()> {
        if self.usecs.is_none() {
            return Ok(());
        }
        check_socket_type(fd)?;
        self.apply_options(fd)
    }

    /// Set the options on a socket of any family that records the NAPI its
    /// packets arrive through: an AF_XDP socket does (the kernel's AF_XDP
    /// documentation, "Busy polling"), and [`BusyPoll::apply_socket`]'s
    /// TCP and UDP sockets.
    pub fn apply_options(&self, fd: BorrowedFd<'_>) -> anyhow::Result<()> {
        let Some(usecs) = self.usecs else {
            return Ok(());
        };
        let value = libc::c_int::try_from(usecs).unwrap_or(libc::c_int::MAX);
        set_int(fd, libc::SO_BUSY_POLL, value)
            .map_err(|e| option_error("SO_BUSY_POLL", 3, 11, &e))?;
        if self.prefer {
            set_int(fd, SO_PREFER_BUSY_POLL, 1)
                .map_err(|e| option_error("SO_PREFER_BUSY_POLL", 5, 11, &e))?;
        }
        if let Some(budget) = self.budget {
            set_int(fd, SO_BUSY_POLL_BUDGET, libc::c_int::from(budget)).map_err(|e| {
                let mut err = option_error("SO_BUSY_POLL_BUDGET", 5, 11, &e);
                if e.raw_os_error() == Some(libc::EPERM) && budget > UNPRIVILEGED_BUDGET {
                    err = err.context(format!(
                        "--busy-poll-budget '{budget}': above {UNPRIVILEGED_BUDGET} needs \
                         CAP_NET_ADMIN (run as root, or give {UNPRIVILEGED_BUDGET} or less)"
                    ));
                }
                err
            })?;
        }
        Ok(())
    }

    /// Give an epoll instance the same busy polling (EPIOCSPARAMS). Returns
    /// false when the kernel lacks the ioctl (before 6.9).
    pub fn apply_epoll(&self, epoll: BorrowedFd<'_>) -> anyhow::Result<bool> {
        let Some(usecs) = self.usecs else {
            return Ok(false);
        };
        let params = libc::epoll_params {
            busy_poll_usecs: usecs,
            busy_poll_budget: self.budget.unwrap_or(0),
            prefer_busy_poll: u8::from(self.prefer),
            __pad: 0,
        };
        // SAFETY: a valid epoll descriptor and a struct of the size the
        // ioctl number encodes, alive across the call.
        let rc = unsafe { libc::ioctl(epoll.as_raw_fd(), libc::EPIOCSPARAMS, &params) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOTTY | libc::EOPNOTSUPP | libc::EINVAL) if !epoll_params_supported() => {
                Ok(false)
            }
            Some(libc::EPERM) => anyhow::bail!(
                "--busy-poll-budget '{}': above {UNPRIVILEGED_BUDGET} needs CAP_NET_ADMIN for an \
                 epoll instance too (run as root)",
                params.busy_poll_budget
            ),
            _ => Err(anyhow::anyhow!(
                "cannot set busy polling on an epoll instance (EPIOCSPARAMS): {e}"
            )),
        }
    }
}

/// The busy polling options as the kernel holds them on a socket
/// (getsockopt), for a report to echo what was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketBusyPoll {
    /// SO_BUSY_POLL, microseconds (0: off).
    pub usecs: u32,
    /// SO_PREFER_BUSY_POLL.
    pub prefer: bool,
    /// SO_BUSY_POLL_BUDGET as the kernel accepted it (it has no getsockopt
    /// for the budget: a setsockopt that succeeded is what it holds);
    /// `None`: not set, the kernel's default (8).
    pub budget: Option<u16>,
}

impl BusyPoll {
    /// The options as the kernel holds them on `fd` after
    /// [`BusyPoll::apply_options`] or [`BusyPoll::apply_socket`] succeeded.
    pub fn read_back(&self, fd: BorrowedFd<'_>) -> anyhow::Result<SocketBusyPoll> {
        let read = |option, name: &str| {
            get_int(fd, option).map_err(|e| anyhow::anyhow!("cannot read {name} back: {e}"))
        };
        Ok(SocketBusyPoll {
            usecs: u32::try_from(read(libc::SO_BUSY_POLL, "SO_BUSY_POLL")?).unwrap_or(0),
            prefer: read(SO_PREFER_BUSY_POLL, "SO_PREFER_BUSY_POLL")? != 0,
            budget: self.budget,
        })
    }
}

/// SO_INCOMING_NAPI_ID: the NAPI instance the socket's last packet came
/// through; `None` when none did (loopback, a packet steered by RPS, veth
/// traffic that took the backlog) or the kernel does not say.
pub fn incoming_napi_id(fd: BorrowedFd<'_>) -> Option<u32> {
    const SO_INCOMING_NAPI_ID: libc::c_int = 56;
    get_int(fd, SO_INCOMING_NAPI_ID)
        .ok()
        .and_then(|id| u32::try_from(id).ok())
        .filter(|&id| id != 0)
}

/// Why busy polling cannot engage when no socket saw a NAPI id.
pub const NO_NAPI_WARNING: &str = "busy polling cannot engage: the replies reach these sockets \
through no NAPI instance (SO_INCOMING_NAPI_ID 0); loopback has none, RPS hands packets to \
another CPU's backlog, and veth delivers through NAPI only with GRO or XDP on at the receiver and, \
for locally sent traffic, TSO off at the sender (ethtool -K DEV gro on; ethtool -K PEER tso off)";

/// Whether this kernel has per-epoll busy-poll parameters (EPIOCGPARAMS on
/// a fresh epoll instance): checked at start, so the header says it.
pub fn epoll_params_supported() -> bool {
    // SAFETY: epoll_create1 takes flags only.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    // SAFETY: fd is a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut params = libc::epoll_params {
        busy_poll_usecs: 0,
        busy_poll_budget: 0,
        prefer_busy_poll: 0,
        __pad: 0,
    };
    // SAFETY: as in apply_epoll; the kernel writes the struct.
    unsafe { libc::ioctl(fd.as_raw_fd(), libc::EPIOCGPARAMS, &mut params) == 0 }
}

fn set_int(fd: BorrowedFd<'_>, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: value lives across the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn get_int(fd: BorrowedFd<'_>, option: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len live across the call; len holds value's size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// Busy polling works on TCP and UDP sockets over IPv4 and IPv6: the
/// kernel records the NAPI their packets arrive on (sk_napi_id). Any other
/// socket type has none to poll.
fn check_socket_type(fd: BorrowedFd<'_>) -> anyhow::Result<()> {
    let domain = get_int(fd, libc::SO_DOMAIN)?;
    let kind = get_int(fd, libc::SO_TYPE)?;
    let ip = matches!(domain, libc::AF_INET | libc::AF_INET6);
    let transport = matches!(kind, libc::SOCK_STREAM | libc::SOCK_DGRAM);
    if ip && transport {
        return Ok(());
    }
    let domain_name = match domain {
        libc::AF_UNIX => "unix".to_string(),
        libc::AF_PACKET => "packet".to_string(),
        libc::AF_NETLINK => "netlink".to_string(),
        libc::AF_INET => "ipv4".to_string(),
        libc::AF_INET6 => "ipv6".to_string(),
        other => format!("family {other}"),
    };
    let kind_name = match kind {
        libc::SOCK_STREAM => "stream",
        libc::SOCK_DGRAM => "datagram",
        libc::SOCK_RAW => "raw",
        libc::SOCK_SEQPACKET => "seqpacket",
        _ => "other",
    };
    anyhow::bail!(
        "--busy-poll on a {domain_name} {kind_name} socket: busy polling needs a TCP or UDP \
         socket over IP, whose packets arrive through a NIC queue's NAPI"
    )
}

/// An option the kernel refused, in words: missing (an older kernel or
/// one built without busy polling), or not permitted.
fn option_error(name: &str, major: u32, minor: u32, e: &io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::ENOPROTOOPT) => anyhow::anyhow!(
            "this kernel has no {name} (Linux {major}.{minor}+, built with \
             CONFIG_NET_RX_BUSY_POLL): cannot busy-poll as asked"
        ),
        Some(libc::EPERM) => anyhow::anyhow!(
            "{name}: not permitted ({e}); raising busy polling needs CAP_NET_ADMIN: run as root"
        ),
        _ => anyhow::anyhow!("cannot set {name}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    fn veth_addr() -> SocketAddr {
        "10.200.0.2:9000".parse().expect("addr")
    }

    #[test]
    fn modifiers_need_a_poll_time_and_loopback_is_refused() {
        let off = BusyPoll::default();
        assert!(off.validate("--to", veth_addr()).is_ok());
        let err = BusyPoll::new(None, true, None)
            .validate("--to", veth_addr())
            .expect_err("prefer alone");
        assert!(err.to_string().contains("--busy-poll USECS"), "{err}");
        let on = BusyPoll::new(Some(50), true, Some(16));
        assert!(on.validate("--bind", veth_addr()).is_ok());
        let err = on
            .validate("--bind", "127.0.0.1:9000".parse().expect("addr"))
            .expect_err("loopback");
        assert!(err.to_string().contains("loopback has no NAPI"), "{err}");
        assert!(on
            .validate("--to", "[::1]:9000".parse().expect("addr"))
            .is_err());
        assert!(BusyPoll::new(Some(50), false, Some(0))
            .validate("--to", veth_addr())
            .is_err());
        // Bound to every address: the traffic may come from a NIC.
        assert!(on
            .validate("--bind", "0.0.0.0:9000".parse().expect("addr"))
            .is_ok());
    }

    #[test]
    fn a_socket_that_cannot_busy_poll_is_refused_by_name() {
        let (a, _b) = UnixDatagram::pair().expect("pair");
        let err = BusyPoll::new(Some(50), false, None)
            .apply_socket(a.as_fd())
            .expect_err("unix socket");
        assert!(
            err.to_string().contains("on a unix datagram socket"),
            "{err}"
        );
        // Off: nothing is checked or set.
        assert!(BusyPoll::default().apply_socket(a.as_fd()).is_ok());
    }

    #[test]
    fn a_udp_socket_takes_the_options() {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
        let busy = BusyPoll::new(Some(50), false, Some(8));
        match busy.apply_socket(udp.as_fd()) {
            Ok(()) => assert_eq!(
                busy.read_back(udp.as_fd()).expect("read back"),
                SocketBusyPoll {
                    usecs: 50,
                    prefer: false,
                    budget: Some(8)
                }
            ),
            // Raising SO_BUSY_POLL needs CAP_NET_ADMIN; say so.
            Err(e) => assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}"),
        }
    }

    #[test]
    fn headers_and_reports_say_what_was_set() {
        let busy = BusyPoll::new(Some(50), true, Some(16));
        assert_eq!(
            busy.describe(true),
            "SO_BUSY_POLL 50 us, SO_PREFER_BUSY_POLL, budget 16, same on epoll (EPIOCSPARAMS)"
        );
        assert!(busy
            .describe(false)
            .contains("lacks EPIOCSPARAMS (Linux 6.9)"));
        assert_eq!(BusyPoll::default().describe(true), "busy polling off");
        assert_eq!(BusyPoll::default().report(true), None);
        assert_eq!(busy.report(false).map(|r| r.epoll), Some(false));
    }

    #[test]
    fn an_epoll_instance_takes_the_parameters_where_the_kernel_has_them() {
        // SAFETY: epoll_create1 takes flags only.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let busy = BusyPoll::new(Some(50), true, None);
        let set = busy.apply_epoll(epoll.as_fd()).expect("EPIOCSPARAMS");
        assert_eq!(set, epoll_params_supported());
        if set {
            let mut params = libc::epoll_params {
                busy_poll_usecs: 0,
                busy_poll_budget: 0,
                prefer_busy_poll: 0,
                __pad: 0,
            };
            // SAFETY: as in epoll_params_supported.
            let rc = unsafe { libc::ioctl(epoll.as_raw_fd(), libc::EPIOCGPARAMS, &mut params) };
            assert_eq!(rc, 0);
            assert_eq!((params.busy_poll_usecs, params.prefer_busy_poll), (50, 1));
        }
        assert!(!BusyPoll::default().apply_epoll(epoll.as_fd()).expect("off"));
    }
}
