//! Files that are not what they claim to be, in a shared capture or given
//! by name: a kernel file of 1 GB, a device or a FIFO where a file belongs.
//! Every command refuses them at once (exit 2, one line naming the file)
//! and never blocks or reads them whole. Each run is bounded in time and
//! address space, so a regression fails the test instead of hanging it
//! or eating the machine's memory.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

/// Far beyond what a refusal takes: only a hang reaches it.
const HANG: Duration = Duration::from_secs(30);

/// The address space each run gets: a command that reads a 1 GB file or
/// /dev/zero whole runs out of it and aborts (exit by SIGABRT, not 2).
const ADDRESS_SPACE: u64 = 1 << 30;

/// Peak resident memory allowed: a refusal reads nothing of the file.
const PEAK_RSS_KB: i64 = 256 * 1024;

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    peak_rss_kb: i64,
}

/// Run nettune with `args`, killed past [`HANG`], limited to
/// [`ADDRESS_SPACE`]; its exit code, output and peak RSS (from wait4).
// The child is reaped by wait4 (which gives its rusage), not `wait()`.
#[allow(clippy::zombie_processes)]
fn run_watched(args: &[&str]) -> Ran {
    let mut command = nettune();
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit, async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("spawn nettune");
    // Both pipes drained while it runs: a chatty child never blocks.
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + HANG;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: rusage is plain data; wait4 fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is this test's own child; both pointers are valid.
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break (status, usage);
        }
        assert_eq!(got, 0, "wait4: {}", std::io::Error::last_os_error());
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nettune {args:?} ran past {HANG:?}: it blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    Ran {
        code,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        peak_rss_kb: usage.ru_maxrss,
    }
}

/// `nettune ARGS` exits 2 with one line naming `path` and saying `why`,
/// having read nothing of it.
fn refused(args: &[&str], path: &Path, why: &str) {
    let ran = run_watched(args);
    let err = ran.stderr.trim_end();
    assert_eq!(
        ran.code,
        2,
        "{args:?}: exit {}: {err}\n{}",
        ran.code,
        ran.stdout.chars().take(2000).collect::<String>()
    );
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(
        err.contains(&format!("'{}'", path.display())),
        "{args:?}: the path is not named: {err}"
    );
    assert!(err.contains(why), "{args:?}: '{why}' missing: {err}");
    assert!(
        ran.peak_rss_kb < PEAK_RSS_KB,
        "{args:?}: peak RSS {} KB",
        ran.peak_rss_kb
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
}

/// A sparse file of 1 GB at `path` (no disk used).
fn huge(path: &Path) {
    let file = std::fs::File::create(path).expect("create");
    file.set_len(1 << 30).expect("sparse file");
}

/// Every command that reads a tree's host, on `tree` (with a state
/// directory where it may write).
fn host_readers<'a>(tree: &'a str, state: &'a str) -> [Vec<&'a str>; 5] {
    [
        vec!["inspect", "--root", tree],
        vec!["doctor", "--root", tree],
        vec!["plan", "--profile", "throughput", "--root", tree],
        vec![
            "apply",
            "--profile",
            "throughput",
            "--root",
            tree,
            "--state-dir",
            state,
        ],
        vec![
            "steer",
            "--dry-run",
            "--root",
            tree,
            "--iface",
            "eth0",
            "--queue",
            "4",
            "--flow",
            "udp4 dst-port 53",
        ],
    ]
}

#[test]
fn a_kernel_file_of_1_gb_is_refused_before_it_is_read() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    let interrupts = tree.join("proc/interrupts");
    huge(&interrupts);
    for command in ["inspect", "doctor"] {
        refused(
            &[command, "--root", s(&tree)],
            &interrupts,
            "is larger than 64 MiB: not a kernel file",
        );
    }
}

#[test]
fn a_value_file_past_a_page_is_refused() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    let rmem = tree.join("proc/sys/net/core/rmem_max");
    std::fs::write(&rmem, "1".repeat(1 << 20)).expect("write");
    refused(
        &["inspect", "--root", s(&tree)],
        &rmem,
        "is larger than 64 KiB",
    );
}

#[test]
fn a_device_given_as_a_saved_plan_is_refused() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let link = dir.path().join("plan.json");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
    let state = dir.path().join("state");
    for plan in [Path::new("/dev/zero"), &link] {
        refused(
            &["plan", "--plan", s(plan)],
            plan,
            "is a character device, not a regular file: not a saved plan",
        );
        refused(
            &[
                "apply",
                "--plan",
                s(plan),
                "--root",
                s(&tree),
                "--state-dir",
                s(&state),
            ],
            plan,
            "is a character device",
        );
    }
}

#[test]
fn a_token_file_of_1_gb_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    huge(&token);
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    refused(
        &["serve", "--token-file", s(&token), "--bind", "127.0.0.1:0"],
        &token,
        "is larger than 4096 bytes",
    );
}

#[test]
fn a_fifo_for_proc_interrupts_blocks_no_command() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let interrupts = tree.join("proc/interrupts");
    fifo(&interrupts);
    let state = dir.path().join("state");
    for args in host_readers(s(&tree), s(&state)) {
        refused(&args, &interrupts, "is a FIFO, not a regular file");
    }
}

#[test]
fn a_fifo_for_a_sysctl_blocks_no_command() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let rmem = tree.join("proc/sys/net/core/rmem_max");
    fifo(&rmem);
    let state = dir.path().join("state");
    for args in host_readers(s(&tree), s(&state)) {
        refused(&args, &rmem, "is a FIFO, not a regular file");
    }
}

#[test]
fn a_fifo_given_as_a_saved_plan_blocks_nothing() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let plan = dir.path().join("plan.json");
    fifo(&plan);
    refused(&["plan", "--plan", s(&plan)], &plan, "is a FIFO");
    let state = dir.path().join("state");
    refused(
        &[
            "apply",
            "--plan",
            s(&plan),
            "--root",
            s(&tree),
            "--state-dir",
            s(&state),
        ],
        &plan,
        "is a FIFO",
    );
}

#[test]
fn a_fifo_in_the_other_inputs_blocks_nothing() {
    // A process's comm, the recorded driver answers, a series and one of
    // its snapshots, an experiment's results.
    let cases: [(&str, &[&str], &[&str]); 4] = [
        ("proc/4242/comm", &["inspect"], &[]),
        ("nettune/driver.json", &["inspect"], &[]),
        ("nettune/series.json", &["monitor"], &["--once"]),
        (
            "nettune/samples/0002/proc/interrupts",
            &["monitor"],
            &["--count", "5", "--json"],
        ),
    ];
    for (file, command, extra) in cases {
        let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
        let path: PathBuf = tree.join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fifo(&path);
        let mut args = command.to_vec();
        args.extend(["--root", s(&tree)]);
        args.extend(extra);
        refused(&args, &path, "is a FIFO");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results.json");
    fifo(&results);
    refused(
        &["experiment", "report", s(dir.path())],
        &results,
        "is a FIFO",
    );
}
