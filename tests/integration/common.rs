//! Helpers shared by the integration tests: running the binary, fixture
//! paths, and self-cleaning network namespaces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub fn nettune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nettune"))
}

/// Run nettune with args; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = nettune().args(args).output().expect("run nettune");
    split(out)
}

pub fn split(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run and parse stdout as JSON, failing the test with stderr on error.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 0, "nettune {args:?} failed: {stderr}");
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{stdout}"))
}

/// The arguments of `nettune apply --profile PROFILE --netns NS
/// --state-dir DIR`; more can be appended.
pub fn apply_args<'a>(profile: &'a str, netns: &'a str, state_dir: &'a str) -> Vec<&'a str> {
    vec![
        "apply",
        "--profile",
        profile,
        "--netns",
        netns,
        "--state-dir",
        state_dir,
    ]
}

/// A path as an argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Every file under `dir` that `keep` accepts, depth first, in name order.
pub fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    let mut files = Vec::new();
    for path in entries {
        // A symlinked directory is walked where it really is: sysfs trees
        // hold loops (a device's net/IF/device).
        if path.is_dir() && !path.is_symlink() {
            files.extend(files_under(&path, keep));
        } else if keep(&path) {
            files.push(path);
        }
    }
    files
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(name)
}

/// A copy of a fixture tree in a temp dir, for tests that change it.
pub fn fixture_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join(name);
    let status = Command::new("cp")
        .args(["-a"])
        .arg(fixture(name))
        .arg(&dest)
        .status()
        .expect("cp");
    assert!(status.success());
    (dir, dest)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Skip (by returning true) when not root: namespace tests need root. CI
/// runs as root, so there they always run.
pub fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    skipped(test, "needs root for network namespaces");
    true
}

/// Record that `test` did not run, and why. cargo shows a skipped test as
/// passed and hides its output, so the skip is also appended to the file
/// named by NETTUNE_TEST_SKIPPED, which scripts/test prints after the run
/// (and, run as root, fails on: as root nothing may be skipped).
pub fn skipped(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    if let Ok(path) = std::env::var("NETTUNE_TEST_SKIPPED") {
        use std::io::Write as _;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(file, "{test}: {why}");
        }
    }
}

/// A network namespace with a unique name, deleted on drop (also when the
/// test fails).
pub struct Netns {
    pub name: String,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!(
            "nt-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        sh(&["ip", "netns", "add", &name]);
        sh(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        Netns { name }
    }

    /// Run a command inside the namespace (`ip netns exec`), asserting success.
    pub fn exec(&self, args: &[&str]) {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        sh(&full);
    }

    /// `ip -n NAME ...`
    pub fn ip(&self, args: &[&str]) {
        let mut full = vec!["ip", "-n", &self.name];
        full.extend_from_slice(args);
        sh(&full);
    }

    /// Add a veth pair `a`/`b` inside the namespace with the given RX/TX
    /// queue counts on each end, and bring both up.
    pub fn veth(&self, a: &str, a_queues: (u32, u32), b: &str, b_queues: (u32, u32)) {
        let (arx, atx) = (a_queues.0.to_string(), a_queues.1.to_string());
        let (brx, btx) = (b_queues.0.to_string(), b_queues.1.to_string());
        self.ip(&[
            "link",
            "add",
            a,
            "numrxqueues",
            &arx,
            "numtxqueues",
            &atx,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "numrxqueues",
            &brx,
            "numtxqueues",
            &btx,
        ]);
        self.ip(&["link", "set", a, "up"]);
        self.ip(&["link", "set", b, "up"]);
    }

    /// Wait (at most 3 s) until the kernel reports these links up:
    /// operstate follows `ip link set up` with a delay.
    pub fn wait_up(&self, links: &[&str]) {
        for _ in 0..60 {
            let up = links.iter().all(|link| {
                Command::new("ip")
                    .args(["netns", "exec", &self.name, "cat"])
                    .arg(format!("/sys/class/net/{link}/operstate"))
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "up")
            });
            if up {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("{links:?} not up in {}", self.name);
    }

    /// Run `f` on a thread inside the namespace; sockets it opens belong there.
    pub fn inside<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let ns = std::fs::File::open(&path).expect("open the netns file");
                    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                    f()
                })
                .join()
                .expect("netns thread")
        })
    }
}

/// A name unique to this process and call, short enough for an interface
/// (15 characters at most).
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id() % 100_000,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Wait for `child` at most `limit`, killing it (by its PID) on overrun:
/// exit code, stdout, stderr. Both pipes are drained while it runs, so a
/// chatty child cannot block on a full pipe.
pub fn finish_bounded(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, String, String) {
    use std::io::Read;
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nettune ran past {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (
        status.code(),
        stdout.join().expect("stdout reader"),
        stderr.join().expect("stderr reader"),
    )
}

/// `ip ARGS`, asserting success.
pub fn ip(args: &[&str]) {
    let mut full = vec!["ip"];
    full.extend_from_slice(args);
    sh(&full);
}

/// Serializes the tests that measure rates (all files): on two CPUs a
/// full-speed run next to a paced one would starve it.
pub fn measuring() -> std::sync::MutexGuard<'static, ()> {
    static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Run a helper command, panicking with its output on failure; returns stdout.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A loopback TCP listener with SO_REUSEPORT, as another server holding a
/// port would have it: a bench server could join it silently.
pub fn reuseport_listener() -> std::net::TcpListener {
    use nix::sys::socket::{self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrIn};
    use std::os::fd::AsRawFd;
    let fd = socket::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .expect("socket");
    socket::setsockopt(&fd, sockopt::ReusePort, &true).expect("reuseport");
    let addr: SockaddrIn = "127.0.0.1:0".parse().expect("addr");
    socket::bind(fd.as_raw_fd(), &addr).expect("bind");
    socket::listen(&fd, Backlog::new(16).expect("backlog")).expect("listen");
    std::net::TcpListener::from(fd)
}

/// A veth pair between namespaces `a` and `b` (unique names from `tag`),
/// addressed `addr_a` and `addr_b` (CIDR), both up. With `napi`, GRO is on
/// and TSO off at both ends: veth then gives each RX queue a NAPI instance
/// and delivers locally sent packets through it (with TSO on they take the
/// backlog, and no socket sees a NAPI id). Returns the two interface names.
pub fn veth_between(
    a: &Netns,
    b: &Netns,
    tag: &str,
    (addr_a, addr_b): (&str, &str),
    napi: bool,
) -> (String, String) {
    let (va, vb) = (unique(&format!("{tag}a")), unique(&format!("{tag}b")));
    sh(&[
        "ip", "link", "add", &va, "netns", &a.name, "type", "veth", "peer", "name", &vb, "netns",
        &b.name,
    ]);
    for (ns, dev, addr) in [(a, &va, addr_a), (b, &vb, addr_b)] {
        ns.ip(&["addr", "add", addr, "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
        if napi {
            ns.exec(&["ethtool", "-K", dev, "gro", "on", "tso", "off"]);
        }
    }
    (va, vb)
}

/// The `interfaces[]` entry named `name` of an inspect `--json` model.
pub fn iface<'a>(host: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    host["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no interface {name}"))
}

/// Whether `engine` can run here; a test for one that cannot records its
/// skip (an io_uring test on a kernel or seccomp profile without it).
pub fn engine_runs(test: &str, engine: &str) -> bool {
    if engine != "io_uring" {
        return true;
    }
    match nettune::bench::uring::check() {
        Ok(()) => true,
        Err(missing) => {
            skipped(&format!("{test} (io_uring)"), &missing);
            false
        }
    }
}

/// One test per engine for each body `fn name(engine: &str)`: the same
/// assertions run against `--engine epoll` and `--engine io_uring`, as
/// `MODULE::epoll::name` and `MODULE::io_uring::name`.
macro_rules! each_engine {
    ($($body:ident),* $(,)?) => {
        mod epoll {
            $(
                #[test]
                fn $body() {
                    super::$body("epoll")
                }
            )*
        }
        mod io_uring {
            $(
                #[test]
                fn $body() {
                    if $crate::common::engine_runs(stringify!($body), "io_uring") {
                        super::$body("io_uring")
                    }
                }
            )*
        }
    };
}

/// A veth pair between two namespaces for traffic tests: `a`
/// (10.NET.0.1/24) in `tx`, `b` (10.NET.0.2/24) in `rx`, both up, with
/// fixed MACs private to the namespaces (02:00:00:NET:00:01 and :02) and a
/// permanent neighbour entry on the sender, so no packet waits on ARP.
/// `queues`: RX and TX queues of each end (1: every packet arrives on RX
/// queue 0); `None`: veth's default. Returns the two interface names.
pub fn veth_pair(tx: &Netns, rx: &Netns, net: u8, queues: Option<u32>) -> (String, String) {
    let (a, b) = (unique("nta"), unique("ntb"));
    let (mac_a, mac_b) = (
        format!("02:00:00:{net:02x}:00:01"),
        format!("02:00:00:{net:02x}:00:02"),
    );
    let (addr_a, addr_b) = (format!("10.{net}.0.1"), format!("10.{net}.0.2"));
    let count = queues.map(|q| q.to_string());
    let sized: Vec<&str> = match &count {
        Some(n) => vec!["numrxqueues", n, "numtxqueues", n],
        None => Vec::new(),
    };
    let end = |name: &str, ns: &Netns, mac: &str| -> Vec<String> {
        let mut words: Vec<String> = [name, "netns", &ns.name, "address", mac]
            .iter()
            .map(|w| w.to_string())
            .collect();
        words.extend(sized.iter().map(|w| w.to_string()));
        words
    };
    let mut add: Vec<String> = vec!["link".into(), "add".into()];
    add.extend(end(&a, tx, &mac_a));
    add.extend(["type", "veth", "peer", "name"].map(String::from));
    add.extend(end(&b, rx, &mac_b));
    ip(&add.iter().map(String::as_str).collect::<Vec<_>>());
    ip(&[
        "-n",
        &tx.name,
        "addr",
        "add",
        &format!("{addr_a}/24"),
        "dev",
        &a,
    ]);
    ip(&[
        "-n",
        &rx.name,
        "addr",
        "add",
        &format!("{addr_b}/24"),
        "dev",
        &b,
    ]);
    ip(&["-n", &tx.name, "link", "set", &a, "up"]);
    ip(&["-n", &rx.name, "link", "set", &b, "up"]);
    ip(&[
        "-n",
        &tx.name,
        "neigh",
        "add",
        &addr_b,
        "lladdr",
        &mac_b,
        "dev",
        &a,
        "nud",
        "permanent",
    ]);
    (a, b)
}

/// Read a bench server's stderr up to its listening line (`NAME: listening
/// on ADDR:PORT (...)`, the same for every `bench *-server`) and return the
/// address, or everything read when the line never came. The rest of
/// stderr is drained by a thread (a server must never block on a full
/// pipe); its handle returns that text.
pub fn bench_server_addr(
    stderr: std::process::ChildStderr,
) -> Result<(String, std::thread::JoinHandle<String>), String> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(stderr);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return Err(seen);
        }
        seen.push_str(&line);
        let Some(rest) = line.split(": listening on ").nth(1) else {
            continue;
        };
        let addr = rest.split_whitespace().next().unwrap_or_default();
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(seen);
        }
        let addr = addr.to_string();
        let rest = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = reader.read_to_string(&mut text);
            text
        });
        return Ok((addr, rest));
    }
}

/// A server child that names its bound address first, killed by its PID
/// on drop: a `bench *-server` on stderr ([`bench_server_addr`]), `serve`
/// as its first stdout line.
pub struct ServerChild {
    child: Option<std::process::Child>,
    stdout: Option<std::io::BufReader<std::process::ChildStdout>>,
    pub addr: String,
}

impl ServerChild {
    /// Spawn a `bench *-server` command with stdout and stderr piped and
    /// read the address from its listening line on stderr.
    pub fn spawn_bench(cmd: &mut Command) -> ServerChild {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a server");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        match bench_server_addr(child.stderr.take().expect("stderr")) {
            Ok((addr, _rest)) => ServerChild {
                child: Some(child),
                stdout: Some(stdout),
                addr,
            },
            Err(seen) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no listening line on stderr: {seen:?}");
            }
        }
    }

    /// Spawn `cmd` (`serve`) with stdout piped and read the address line.
    pub fn spawn(cmd: &mut Command) -> ServerChild {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a server");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut addr = String::new();
        stdout.read_line(&mut addr).expect("read the address line");
        let addr = addr.trim().to_string();
        if addr.parse::<std::net::SocketAddr>().is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("first line is not an address: {addr:?}");
        }
        ServerChild {
            child: Some(child),
            stdout: Some(stdout),
            addr,
        }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().expect("running").id()).expect("pid")
    }

    /// Wait for its end (at most `limit`): exit code and the rest of stdout.
    pub fn finish(mut self, limit: std::time::Duration) -> (Option<i32>, String) {
        use std::io::Read;
        let child = self.child.take().expect("running");
        let mut rest = String::new();
        self.stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut rest)
            .expect("read the rest of stdout");
        (finish_bounded(child, limit).0, rest)
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A child killed by its PID and reaped when dropped (a test that panics
/// while it runs leaves nothing behind); `take` it back to finish it.
pub struct KillOnDrop(pub Option<std::process::Child>);

impl KillOnDrop {
    pub fn pid(&self) -> i32 {
        let child = self.0.as_ref().expect("a running child");
        i32::try_from(child.id()).expect("pid")
    }

    pub fn take(mut self) -> std::process::Child {
        self.0.take().expect("a running child")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A socket of a process: its local port, TCP state (`0A` LISTEN; `07`
/// for UDP) and the bytes waiting in its receive queue.
pub struct OwnSocket {
    pub port: u16,
    pub state: String,
    pub rx_queue: u64,
}

/// The sockets process `pid` holds in `/proc/PID/net/TABLE` (`tcp`,
/// `tcp6`, `udp`, `udp6`): the kernel's table matched to the process's
/// own descriptors by inode, so a socket another program opened on the
/// same port is never taken for it. Empty once the process is gone.
pub fn own_sockets(pid: i32, table: &str) -> Vec<OwnSocket> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|target| {
                    let target = target.to_string_lossy().into_owned();
                    let inode = target.strip_prefix("socket:[")?.strip_suffix(']')?;
                    Some(inode.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() <= 9 || !inodes.iter().any(|i| i == f[9]) {
                return None;
            }
            let port = u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()?;
            let rx_queue = u64::from_str_radix(f[4].split(':').nth(1)?, 16).ok()?;
            Some(OwnSocket {
                port,
                state: f[3].to_string(),
                rx_queue,
            })
        })
        .collect()
}

/// Wait until process `pid` has read every datagram queued on its UDP
/// socket at `port` (at most `limit`): a receiver stopped by a signal
/// reports only what it read, so a test compares counts once it caught up.
pub fn wait_udp_drained(pid: i32, port: u16, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let sockets: Vec<OwnSocket> = ["udp", "udp6"]
            .iter()
            .flat_map(|t| own_sockets(pid, t))
            .filter(|s| s.port == port)
            .collect();
        // No such socket (a wrong port, the receiver gone) checks nothing.
        assert!(
            !sockets.is_empty(),
            "the receiver (pid {pid}) holds no UDP socket on port {port}"
        );
        let queued: u64 = sockets.iter().map(|s| s.rx_queue).sum();
        if queued == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{queued} bytes still queued for the receiver (pid {pid}) after {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A pseudo-terminal to give a child as its stderr: a bench with `--json`
/// shows its per-second status line only on a terminal, and that line is
/// how a test knows the run is measuring (instead of sleeping a guess).
/// Everything the child writes there is kept; a thread reads it until the
/// child (every holder of the terminal) is gone.
pub struct Pty {
    seen: std::sync::Arc<(std::sync::Mutex<Vec<u8>>, std::sync::Condvar)>,
}

impl Pty {
    /// The terminal and its other end, to pass as the child's stderr.
    pub fn open() -> (Pty, std::process::Stdio) {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::fs::OpenOptionsExt;
        // Both ends are opened close-on-exec, so that a child another test
        // spawns at the same moment inherits neither (the child given the
        // terminal gets it as its stderr, a dup without the flag).
        // SAFETY: posix_openpt returns a new descriptor or -1.
        let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: the descriptor is fresh and ours alone.
        let master = unsafe { OwnedFd::from_raw_fd(master) };
        let mut name = [0 as libc::c_char; 64];
        // SAFETY: grantpt, unlockpt and ptsname_r on the master we own;
        // ptsname_r writes at most `name.len()` bytes.
        let ok = unsafe {
            libc::grantpt(master.as_raw_fd()) == 0
                && libc::unlockpt(master.as_raw_fd()) == 0
                && libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) == 0
        };
        assert!(
            ok,
            "the terminal's other end: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: ptsname_r wrote a NUL-terminated path into `name`.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let slave: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {path}: {e}"))
            .into();
        let seen =
            std::sync::Arc::new((std::sync::Mutex::new(Vec::new()), std::sync::Condvar::new()));
        let into = std::sync::Arc::clone(&seen);
        std::thread::spawn(move || {
            use std::io::Read;
            let mut master = std::fs::File::from(master);
            let mut chunk = [0u8; 4096];
            loop {
                let n = match master.read(&mut chunk) {
                    Ok(n @ 1..) => n,
                    // A signal to this process (a handler some test installed).
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // EIO once every holder of the terminal closed it.
                    _ => break,
                };
                let (text, ready) = &*into;
                text.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(&chunk[..n]);
                ready.notify_all();
            }
        });
        (Pty { seen }, std::process::Stdio::from(slave))
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        let (text, _) = &*self.seen;
        String::from_utf8_lossy(&text.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// Wait until what was written holds `ok` (at most `limit`); the text.
    pub fn wait_for(
        &self,
        what: &str,
        limit: std::time::Duration,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = std::time::Instant::now() + limit;
        let (text, ready) = &*self.seen;
        let mut guard = text.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = String::from_utf8_lossy(&guard).into_owned();
            if ok(&now) {
                return now;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(
                !left.is_zero(),
                "no {what} within {limit:?}; the terminal showed:\n{now:?}"
            );
            guard = ready
                .wait_timeout(guard, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The numbers a status line shows before `unit` in each redraw (`\r`
/// separates them): `rr 1 s:   1 s:   48213 transactions/s` gives 48213.
pub fn status_counts(text: &str, unit: &str) -> Vec<u64> {
    text.split(['\r', '\n'])
        .filter_map(|line| {
            let before = line.split(unit).next()?;
            if before.len() == line.len() {
                return None;
            }
            before.split_whitespace().last()?.parse().ok()
        })
        .collect()
}
