//! Inputs the fuzz targets (fuzz/, scripts/fuzz) found to break nettune,
//! kept as tests: each is named after what broke and feeds the input the
//! way a peer or a file would.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use nettune::base::observe::Quiet;
use nettune::base::stop::Stop;
use nettune::bench::rr::{self, Backend, ServerConfig};

fn hello(request: u32, reply: u32) -> Vec<u8> {
    let mut out = b"nettrr01".to_vec();
    out.extend_from_slice(&request.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    out
}

struct StopOnDrop<'a>(&'a Stop);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.trigger();
    }
}

/// A UDP socket on loopback, connected to `server`, reads bounded.
fn udp_to(server: SocketAddr) -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(server).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    socket
}

/// The datagram `socket` receives within `wait`, if any.
fn answer(socket: &UdpSocket, wait: Duration) -> Option<Vec<u8>> {
    let end = Instant::now() + wait;
    let mut buf = vec![0u8; 70_000];
    while Instant::now() < end {
        if let Ok(n) = socket.recv(&mut buf) {
            return Some(buf[..n].to_vec());
        }
    }
    None
}

/// A UDP hello may ask for TCP's sizes (up to 64 MiB); over UDP the next
/// request then asked for a reply larger than any datagram: the epoll
/// worker panicked slicing its reply buffer (the listener stopped), the
/// io_uring worker pointed sendmsg past its buffer. Such a hello is now
/// refused and the server keeps answering others.
fn rr_server_refuses_a_udp_hello_beyond_a_datagram(engine: &str) {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
    config.engine = match engine {
        "io_uring" => Backend::IoUring,
        _ => Backend::Epoll,
    };
    let server = rr::open_server(config).expect("open the rr server");
    let addr = server.local_addr();
    let stop = Stop::new();
    std::thread::scope(|s| {
        let serving = s.spawn(|| server.run(&stop, &mut Quiet));
        // A failed assertion must still end the server, or the scope
        // would wait for it forever.
        let _stop_on_failure = StopOnDrop(&stop);

        let attacker = udp_to(addr);
        let big = hello(16, 64 << 20);
        attacker.send(&big).expect("send");
        assert_eq!(
            answer(&attacker, Duration::from_millis(500)),
            None,
            "a UDP hello asking for 64 MiB replies was accepted"
        );
        attacker.send(&[0, 0, 0, 1]).expect("send");
        attacker.send(&hello(16, u32::MAX)).expect("send");
        assert_eq!(answer(&attacker, Duration::from_millis(300)), None);

        // A legitimate flow is still served.
        let client = udp_to(addr);
        // Replies as long as requests: what a server may send to a source
        // that has not proven its address.
        let good = hello(4, 4);
        let mut echoed = None;
        for _ in 0..10 {
            client.send(&good).expect("send");
            echoed = answer(&client, Duration::from_millis(300));
            if echoed.is_some() {
                break;
            }
        }
        assert_eq!(
            echoed.as_deref(),
            Some(&good[..]),
            "the server stopped answering"
        );
        client.send(&[0, 0, 0, 9]).expect("send");
        let reply = answer(&client, Duration::from_secs(2)).expect("a reply");
        assert_eq!(reply, [0, 0, 0, 9]);

        stop.trigger();
        let report = serving.join().expect("the server thread");
        assert!(report.is_ok(), "{report:?}");
    });
}

each_engine!(rr_server_refuses_a_udp_hello_beyond_a_datagram);

/// A capture's /proc/stat whose counts add up past u64::MAX (a garbled or
/// hostile file): adding a CPU's ticks overflowed (a panic in debug
/// builds, wrapped shares in release). inspect and doctor must read it.
#[test]
fn cpu_counters_adding_up_past_u64_max_are_read() {
    let (_dir, tree) = crate::common::fixture_copy("vm-2cpu-virtio");
    let path = tree.join("proc/stat");
    let stat = std::fs::read_to_string(&path).expect("read proc/stat");
    let huge: String = stat
        .lines()
        .map(|line| match line.strip_prefix("cpu0 ") {
            Some(_) => "cpu0 18446744073709551615 1 1 1 0 0 0 0 0 0".to_string(),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&path, huge + "\n").expect("write proc/stat");
    let root = tree.display().to_string();
    for args in [
        vec!["inspect", "--root", &root],
        vec!["inspect", "--root", &root, "--json"],
        vec!["doctor", "--root", &root],
    ] {
        let (code, _, err) = crate::common::run(&args);
        assert!(
            code == 0 || (args[0] == "doctor" && code == 1),
            "{args:?}: exit {code}: {err}"
        );
    }
}

/// Run nettune with its address space limited to `bytes` and its CPU time
/// to a minute: an input that makes it allocate more, or loop for hours,
/// fails there instead of taking the machine. Returns (exit code or
/// -signal, stderr).
fn run_limited(args: &[&str], bytes: u64) -> (i32, String) {
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    let mut cmd = crate::common::nettune();
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let cpu = libc::rlimit {
                rlim_cur: 60,
                rlim_max: 60,
            };
            if libc::setrlimit(libc::RLIMIT_CPU, &cpu) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("run nettune");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| -out.status.signal().unwrap_or(0));
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A CPU list that repeats its ranges (`0-8191,0-8191,...`, 300 KB) was
/// expanded range by range before repeats were removed: gigabytes for a
/// file of kilobytes. Its memory is now bounded by the CPU limit.
#[test]
fn a_cpu_list_repeating_its_ranges_takes_no_more_memory_than_once() {
    let (_dir, tree) = crate::common::fixture_copy("vm-2cpu-virtio");
    let list = vec!["0-8191"; 43_000].join(",");
    std::fs::write(tree.join("sys/devices/system/cpu/online"), list).expect("write");
    let root = tree.display().to_string();
    let (code, err) = run_limited(&["inspect", "--root", &root, "--json"], 1 << 30);
    assert!(
        code == 0 || code == 2,
        "exit {code} (0, or 2 for a refused file, expected): {err}"
    );
    assert!(!err.contains("memory allocation"), "{err}");
}
/// An RPS mask of more than 256 groups is refused, quoting its start: the
/// quote was cut at byte 40, inside a multi-byte character, which
/// panicked.
#[test]
fn a_cpu_mask_quoted_inside_a_character_is_refused_not_a_panic() {
    let (_dir, tree) = crate::common::fixture_copy("vm-2cpu-virtio");
    let mask = format!("a{}{}", "é".repeat(20), ",".repeat(300));
    std::fs::write(tree.join("sys/class/net/eth0/queues/rx-0/rps_cpus"), mask).expect("write");
    let root = tree.display().to_string();
    for args in [
        vec!["inspect", "--root", &root],
        vec!["plan", "--profile", "pps", "--root", &root],
    ] {
        let (code, _, err) = crate::common::run(&args);
        assert!(code == 0 || code == 2, "{args:?}: exit {code}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// The serve protocol's hex (nonces, MACs) took a sign as a digit: "+f"
/// read as 0x0f, so one MAC had many spellings. Only hex digits are hex.
#[test]
fn serve_hex_takes_hex_digits_only() {
    use nettune::serve::proto::{mac, unhex, verify, CLIENT_LABEL};
    assert_eq!(unhex("0f"), Some(vec![0x0f]));
    assert_eq!(unhex("+f"), None);
    assert_eq!(unhex("+0+0"), None);
    let token = b"a token of sixteen+ bytes";
    // A MAC with a byte below 0x10 somewhere, spelled with a sign there.
    let (first, second, right) = (0u8..=255)
        .map(|n| {
            let first = [n; 32];
            let second = [7u8; 32];
            let right = mac(token, CLIENT_LABEL, &first, &second);
            (first, second, right)
        })
        .find(|(_, _, m)| (0..m.len()).step_by(2).any(|i| &m[i..i + 1] == "0"))
        .expect("some MAC has a byte below 0x10");
    assert!(verify(token, CLIENT_LABEL, &first, &second, &right));
    let at = (0..right.len())
        .step_by(2)
        .find(|&i| &right[i..i + 1] == "0")
        .expect("a leading zero digit");
    let signed = format!("{}+{}", &right[..at], &right[at + 1..]);
    assert!(
        !verify(token, CLIENT_LABEL, &first, &second, &signed),
        "'{signed}' accepted as the MAC"
    );
}

/// A capture's driver answers with an RX ring count of 4294967295: steer
/// built a weight per ring (16 GiB) and doctor listed every ring without
/// an RSS weight (billions of steps). Counts past the most queues a device
/// can have are now refused or left unjudged.
#[test]
fn a_ring_count_no_device_has_is_not_a_size_to_allocate() {
    let (_dir, tree) = crate::common::fixture_copy("one-socket-ice-16q");
    let driver = tree.join("nettune/driver.json");
    let text = std::fs::read_to_string(&driver).expect("read driver.json");
    assert!(
        text.contains("\"rx_rings\": 16"),
        "the fixture names its RX rings"
    );
    let text = text.replace("\"rx_rings\": 16", "\"rx_rings\": 4294967295");
    std::fs::write(&driver, text).expect("write driver.json");
    let root = tree.display().to_string();
    let (code, err) = run_limited(
        &[
            "steer",
            "--dry-run",
            "--root",
            &root,
            "--iface",
            "ens801f0",
            "--queue",
            "3",
            "--flow",
            "udp dst-port 53",
        ],
        1 << 30,
    );
    assert_eq!(code, 2, "steer: {err}");
    assert!(err.contains("4294967295 queues"), "{err}");
    let (code, err) = run_limited(&["doctor", "--root", &root], 1 << 30);
    assert!(code == 0 || code == 1, "doctor: exit {code}: {err}");
}

/// A link speed no device has (a capture may claim any number) once
/// overflowed the pacing cap the throughput profile derives from it.
#[test]
fn a_link_speed_no_device_has_plans_without_overflow() {
    let (_dir, tree) = crate::common::fixture_copy("two-socket-smt-8q");
    std::fs::write(tree.join("sys/class/net/eth0/speed"), "1042949672950000\n").expect("speed");
    let root = tree.display().to_string();
    for profile in ["throughput", "pps", "latency", "http", "baseline"] {
        let (code, _, err) = crate::common::run(&["plan", "--profile", profile, "--root", &root]);
        assert_eq!(code, 0, "plan --profile {profile}: {err}");
    }
    let (code, _, err) = crate::common::run(&["doctor", "--root", &root]);
    assert!(code == 0 || code == 1, "doctor: exit {code}: {err}");
}
