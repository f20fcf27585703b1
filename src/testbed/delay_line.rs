//! A delay line between a testbed's two namespaces: a real round-trip time
//! and a bounded rate, without netem (a kernel may be built without it;
//! TUN is nearly always there).
//!
//! Each namespace gets a TUN device ([`SERVER_TUN`], [`CLIENT_TUN`]) and a
//! host route to the other side's address through it (`ip route add
//! 198.18.0.2/32 dev tb-sdelay src 198.18.0.1`), more specific than the
//! veth's /30, so the traffic between the two testbed addresses leaves
//! through a TUN and every command that uses the testbed (bench,
//! experiment, doctor) is unchanged. A forwarder reads each IP packet from
//! one TUN and writes it into the other once the line has carried it: sent
//! at the line's rate after the packets before it (a FIFO queue holding at
//! most one round trip of backlog, the usual bandwidth x delay of router
//! buffer; packets beyond it are dropped, as a router drops them), then
//! half the round-trip time on the wire.
//!
//! The forwarder is a process of its own (`nettune testbed delay-line`,
//! started by `testbed up`, which returns once the line carries traffic),
//! because a testbed outlives the command that made it. It records its PID
//! and start time in [`STATE_DIR`]; `testbed down` stops it (that PID, only
//! while it has that start time) before it removes the namespaces. The
//! forwarder also ends by itself when either namespace is removed by other
//! means (`ip netns delete`): its TUN descriptors hold the namespaces alive,
//! so it watches their names. A TUN device is not persistent: when the
//! forwarder dies, even by SIGKILL, both devices and their routes vanish and
//! the testbed falls back to the plain veth.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{BufRead as _, Read as _};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::base::stop::Stop;
use crate::nic::live::link;

/// The TUN device in the server's namespace, and in the client's.
pub const SERVER_TUN: &str = "tb-sdelay";
pub const CLIENT_TUN: &str = "tb-cdelay";
/// Where a running delay line records itself (one file per testbed).
pub const STATE_DIR: &str = "/run/nettune/testbed/delay-line";
/// How long `testbed up` waits for the forwarder to carry traffic.
const START_LIMIT: Duration = Duration::from_secs(10);
/// How long `testbed down` waits for it to end after SIGTERM, then SIGKILL.
const STOP_LIMIT: Duration = Duration::from_secs(5);
/// How often the forwarder looks at its stop token and its namespaces.
const POLL: Duration = Duration::from_millis(50);
const WATCH: Duration = Duration::from_millis(200);
/// The largest packet a TUN device hands over (its MTU can be 65535).
const MAX_PACKET: usize = 65_536;

/// A line's round-trip time and rate (each direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub rtt_us: u64,
    pub rate_bps: u64,
}

impl Line {
    pub fn rtt(&self) -> Duration {
        Duration::from_micros(self.rtt_us)
    }

    /// Bytes in flight when the line is full: rate x round-trip time.
    pub fn bdp_bytes(&self) -> u64 {
        (u128::from(self.rate_bps) * u128::from(self.rtt_us) / 8_000_000) as u64
    }
}

/// The testbed's two sides, as the forwarder needs them.
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    pub testbed: &'a str,
    pub server_netns: &'a str,
    pub server_addr: Ipv4Addr,
    pub client_netns: &'a str,
    pub client_addr: Ipv4Addr,
}

/// A running delay line, as `testbed up --json` shows it and the state
/// file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    pub pid: i32,
    /// The process's start time (/proc/PID/stat field 22, clock ticks
    /// since boot): a PID reused by another process has another one.
    pub start_ticks: u64,
    #[serde(flatten)]
    pub line: Line,
    pub server_tun: String,
    pub client_tun: String,
}

/// One direction of the line: when each packet it holds is due out.
#[derive(Debug)]
struct Pipe {
    rate_bps: u64,
    one_way: Duration,
    /// The most backlog a packet may wait behind before it is dropped.
    max_wait: Duration,
    /// When the last packet admitted has been sent at the line's rate.
    free_at: Option<Instant>,
    queue: VecDeque<(Instant, Vec<u8>)>,
    forwarded: u64,
    dropped: u64,
}

impl Pipe {
    fn new(line: Line) -> Pipe {
        Pipe {
            rate_bps: line.rate_bps.max(1),
            one_way: line.rtt() / 2,
            max_wait: line.rtt(),
            free_at: None,
            queue: VecDeque::new(),
            forwarded: 0,
            dropped: 0,
        }
    }

    /// Take `packet`, arrived at `now`: false (dropped) when the backlog
    /// ahead of it is more than the line holds.
    fn admit(&mut self, now: Instant, packet: Vec<u8>) -> bool {
        let start = self.free_at.map_or(now, |free| free.max(now));
        if start - now > self.max_wait {
            self.dropped += 1;
            return false;
        }
        let bits = packet.len() as u128 * 8;
        let send = Duration::from_nanos((bits * 1_000_000_000 / u128::from(self.rate_bps)) as u64);
        let sent = start + send;
        self.free_at = Some(sent);
        self.queue.push_back((sent + self.one_way, packet));
        true
    }

    /// The next packet due at `now`, if any (they come out in order).
    fn due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.queue.front().is_some_and(|(at, _)| *at <= now) {
            self.queue.pop_front().map(|(_, p)| p)
        } else {
            None
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|(at, _)| *at)
    }
}

/// What the line carried, per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Carried {
    pub forwarded: u64,
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Report {
    pub to_client: Carried,
    pub to_server: Carried,
}

/// Open TUN device `name` (created in the calling thread's namespace), non
/// blocking, raw IP packets without a packet-information header.
fn open_tun(name: &str) -> anyhow::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun")
        .context(
            "cannot open /dev/net/tun: the delay line needs the kernel's TUN driver (CONFIG_TUN) \
             and root",
        )?;
    // struct ifreq: the name (IFNAMSIZ 16 bytes), then the flags (a short)
    // in the union; 64 bytes is more than the kernel's 40.
    let mut ifr = [0u8; 64];
    if name.len() >= 16 {
        anyhow::bail!("TUN name '{name}' is longer than 15 bytes");
    }
    ifr[..name.len()].copy_from_slice(name.as_bytes());
    let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes one struct ifreq, which fits in
    // `ifr`; the descriptor is open for the whole call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, ifr.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot create TUN device {name}"));
    }
    Ok(file.into())
}

/// One end: the TUN in `netns`, up, with the route to `peer` through it.
fn end(netns: &str, tun: &str, local: Ipv4Addr, peer: Ipv4Addr) -> anyhow::Result<OwnedFd> {
    crate::bench::netns::within(Some(netns), || {
        let fd = open_tun(tun)?;
        let why = |what: String| {
            move |e: crate::base::driver::SetError| {
                anyhow::anyhow!("{what} in network namespace {netns}: {}", e.message)
            }
        };
        link::set_up(tun).map_err(why(format!("cannot bring {tun} up")))?;
        link::add_host_route(peer, tun, local).map_err(why(format!(
            "cannot route {peer}/32 through {tun} (from {local})"
        )))?;
        Ok(fd)
    })
}

/// The inode of named namespace `name`: another after it is deleted and
/// made again.
fn netns_inode(name: &str) -> Option<u64> {
    std::fs::metadata(super::netns::path(name))
        .ok()
        .map(|m| m.ino())
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// Carry packets from `from` to `to` through `pipe` until `stop`; an
/// error when a device went away.
fn forward(from: &OwnedFd, to: &OwnedFd, mut pipe: Pipe, stop: &Stop) -> anyhow::Result<Carried> {
    let mut buf = vec![0u8; MAX_PACKET];
    while !stop.is_set() {
        let now = Instant::now();
        while let Some(packet) = pipe.due(now) {
            // SAFETY: writing `packet` to a descriptor this thread borrows.
            let n = unsafe { libc::write(to.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match errno(&e) {
                    // The device is down or its queue full: lost, as on a wire.
                    libc::EIO | libc::EAGAIN | libc::ENOBUFS | libc::EINVAL => pipe.dropped += 1,
                    _ => return Err(e).context("the delay line cannot write to its TUN device"),
                }
            } else {
                pipe.forwarded += 1;
            }
        }
        let wait = pipe
            .next_due()
            .map_or(POLL, |at| at.saturating_duration_since(now))
            .min(POLL);
        let mut pfd = libc::pollfd {
            fd: from.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one pollfd and a timespec that live across the call.
        let ready = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if errno(&e) == libc::EINTR {
                continue;
            }
            return Err(e).context("the delay line cannot wait for packets");
        }
        if ready == 0 {
            continue;
        }
        // Everything waiting, in one go, each stamped when read.
        for _ in 0..256 {
            // SAFETY: reading into `buf`, which holds MAX_PACKET bytes.
            let n = unsafe { libc::read(from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if errno(&e) == libc::EAGAIN || errno(&e) == libc::EINTR {
                    break;
                }
                // EBADFD: the device was removed with its namespace.
                return Err(e).context("the delay line cannot read its TUN device");
            }
            if n == 0 {
                break;
            }
            pipe.admit(Instant::now(), buf[..n as usize].to_vec());
        }
    }
    Ok(Carried {
        forwarded: pipe.forwarded,
        dropped: pipe.dropped,
    })
}

fn state_path(testbed: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{testbed}.json"))
}

fn log_path(testbed: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{testbed}.log"))
}

/// State and start time of process `pid` (/proc/PID/stat), if it exists.
fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields after its last ')' are fixed.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// Whether `running` is still that process (a zombie has ended).
fn alive(running: &Running) -> bool {
    matches!(proc_stat(running.pid), Some((state, start))
        if start == running.start_ticks && state != 'Z' && state != 'X')
}

/// The delay line recorded for `testbed`, if any.
pub fn recorded(testbed: &str) -> Option<Running> {
    let text = std::fs::read_to_string(state_path(testbed)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Names of the testbeds with a delay line recorded.
pub fn testbeds() -> Vec<String> {
    std::fs::read_dir(STATE_DIR)
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.strip_suffix(".json").map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Start the forwarder of `sides` as a process of its own (this program,
/// `testbed delay-line`), and return once it carries traffic. On failure
/// nothing of it is left.
pub fn start(sides: &Sides<'_>, line: Line) -> anyhow::Result<Running> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("cannot create {STATE_DIR}"))?;
    let log_file = log_path(sides.testbed);
    let log = std::fs::File::create(&log_file)
        .with_context(|| format!("cannot write {}", log_file.display()))?;
    let exe =
        std::env::current_exe().context("cannot find this program to start the delay line")?;
    let mut child = std::process::Command::new(exe)
        .args([
            "testbed",
            "delay-line",
            "--name",
            sides.testbed,
            "--rtt",
            &format!("{}us", line.rtt_us),
            "--rate",
            &format!("{}bit", line.rate_bps),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        // Its own process group: a Ctrl-C meant for a later command in
        // the same terminal does not reach it.
        .process_group(0)
        .spawn()
        .context("cannot start the delay line's forwarder")?;
    let stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if let Some(out) = stdout {
            let _ = std::io::BufReader::new(out).read_line(&mut line);
        }
        let _ = tx.send(line);
    });
    let said = rx.recv_timeout(START_LIMIT).unwrap_or_default();
    if said.trim() == "ready" {
        if let Some(running) = recorded(sides.testbed).filter(|r| r.pid as u32 == child.id()) {
            return Ok(running);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut why = String::new();
    let _ = std::fs::File::open(&log_file).and_then(|mut f| f.read_to_string(&mut why));
    let _ = std::fs::remove_file(state_path(sides.testbed));
    let _ = std::fs::remove_file(&log_file);
    let why = why.trim();
    anyhow::bail!(
        "the delay line did not start{}",
        if why.is_empty() {
            format!(" within {} s", START_LIMIT.as_secs())
        } else {
            format!(": {why}")
        }
    )
}

/// Stop the delay line of `testbed` (SIGTERM, then SIGKILL), only while its
/// recorded PID still has its recorded start time, and forget it. False
/// when none was recorded.
pub fn stop(testbed: &str) -> anyhow::Result<bool> {
    let Some(running) = recorded(testbed) else {
        let _ = std::fs::remove_file(state_path(testbed));
        let _ = std::fs::remove_file(log_path(testbed));
        return Ok(false);
    };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        if !alive(&running) {
            break;
        }
        // SAFETY: kill(2) on the PID this testbed's forwarder recorded,
        // checked to be that process (same start time) just before.
        unsafe { libc::kill(running.pid, signal) };
        let deadline = Instant::now() + STOP_LIMIT;
        while alive(&running) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if alive(&running) {
        anyhow::bail!(
            "the delay line of testbed '{testbed}' (PID {}) does not end",
            running.pid
        );
    }
    let _ = std::fs::remove_file(state_path(testbed));
    let _ = std::fs::remove_file(log_path(testbed));
    Ok(true)
}

/// This process's start time, for its record.
fn own_start_ticks() -> anyhow::Result<u64> {
    proc_stat(std::process::id() as i32)
        .map(|(_, start)| start)
        .context("cannot read this process's start time from /proc/self/stat")
}

fn write_state(testbed: &str, running: &Running) -> anyhow::Result<()> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("cannot create {STATE_DIR}"))?;
    let path = state_path(testbed);
    std::fs::write(&path, serde_json::to_string_pretty(running)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The forwarder (`testbed delay-line`): make both ends, record this
/// process, call `ready`, then carry packets both ways until `stop` is
/// triggered, a device goes away, or either namespace is removed.
pub fn serve(
    sides: &Sides<'_>,
    line: Line,
    stop: &Stop,
    ready: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Report> {
    let names = [sides.server_netns, sides.client_netns];
    let inodes: Vec<Option<u64>> = names.iter().map(|n| netns_inode(n)).collect();
    if let Some(missing) = names.iter().zip(&inodes).find(|(_, i)| i.is_none()) {
        anyhow::bail!(
            "network namespace '{}' does not exist: make the testbed first",
            missing.0
        );
    }
    let server = end(
        sides.server_netns,
        SERVER_TUN,
        sides.server_addr,
        sides.client_addr,
    )?;
    let client = end(
        sides.client_netns,
        CLIENT_TUN,
        sides.client_addr,
        sides.server_addr,
    )?;
    let running = Running {
        pid: std::process::id() as i32,
        start_ticks: own_start_ticks()?,
        line,
        server_tun: SERVER_TUN.to_string(),
        client_tun: CLIENT_TUN.to_string(),
    };
    write_state(sides.testbed, &running)?;
    let forget = || {
        if recorded(sides.testbed).is_some_and(|r| r == running) {
            let _ = std::fs::remove_file(state_path(sides.testbed));
        }
    };
    if let Err(e) = ready() {
        forget();
        return Err(e);
    }
    let done = std::thread::scope(|scope| {
        let directions = [(&server, &client), (&client, &server)].map(|(from, to)| {
            scope.spawn(move || {
                let carried = forward(from, to, Pipe::new(line), stop);
                // One direction ending ends the line.
                stop.trigger();
                carried
            })
        });
        let mut gone = false;
        while !stop.sleep_until(Instant::now() + WATCH) {
            if names.iter().map(|n| netns_inode(n)).collect::<Vec<_>>() != inodes {
                gone = true;
                stop.trigger();
            }
        }
        let [to_client, to_server] = directions.map(|d| {
            d.join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a delay line thread panicked")))
        });
        (to_client, to_server, gone)
    });
    forget();
    match done {
        // Removed by other means than `testbed down`, which would have
        // removed the log: nothing else will.
        (_, _, true) => {
            let _ = std::fs::remove_file(log_path(sides.testbed));
            Ok(Report::default())
        }
        (to_client, to_server, false) => Ok(Report {
            to_client: to_client?,
            to_server: to_server?,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: Line = Line {
        rtt_us: 20_000,
        rate_bps: 8_000_000,
    };

    #[test]
    fn packets_leave_at_the_rate_then_travel_half_the_round_trip() {
        let mut pipe = Pipe::new(LINE);
        let t0 = Instant::now();
        // 1000 bytes at 8 Mbit/s take 1 ms to send; the wire adds 10 ms.
        for _ in 0..3 {
            assert!(pipe.admit(t0, vec![0; 1000]));
        }
        assert_eq!(pipe.next_due(), Some(t0 + Duration::from_millis(11)));
        assert!(pipe.due(t0 + Duration::from_micros(10_999)).is_none());
        assert!(pipe.due(t0 + Duration::from_millis(11)).is_some());
        assert!(pipe.due(t0 + Duration::from_millis(11)).is_none());
        assert_eq!(pipe.next_due(), Some(t0 + Duration::from_millis(12)));
        // A packet after the line went idle starts when it arrives.
        let later = t0 + Duration::from_secs(1);
        let mut idle = Pipe::new(LINE);
        assert!(idle.admit(later, vec![0; 1000]));
        assert_eq!(idle.next_due(), Some(later + Duration::from_millis(11)));
    }

    #[test]
    fn a_backlog_over_one_round_trip_is_dropped() {
        let mut pipe = Pipe::new(LINE);
        let t0 = Instant::now();
        // 20 ms of backlog is 20 packets of 1 ms: the 21st waits exactly
        // 20 ms and passes, the 22nd would wait 21 ms.
        let admitted = (0..22).filter(|_| pipe.admit(t0, vec![0; 1000])).count();
        assert_eq!(admitted, 21);
        assert_eq!(pipe.dropped, 1);
        assert_eq!(LINE.bdp_bytes(), 20_000);
    }

    #[test]
    fn proc_stat_reads_the_fields_after_the_command_name() {
        let (state, start) = proc_stat(std::process::id() as i32).expect("own stat");
        assert!(state == 'R' || state == 'S', "{state}");
        assert!(start > 0);
        assert!(proc_stat(-1).is_none());
    }
}
