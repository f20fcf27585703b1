//! The buffers dimension on fixtures: the throughput profile's sizes, in
//! reach of the target, collapsed where they already hold, skipped with
//! the reason where nothing can be written.

use super::tests::{changes, fixture, space};
use super::*;

const RMEM: &str = "/proc/sys/net/ipv4/tcp_rmem";
const WMEM: &str = "/proc/sys/net/ipv4/tcp_wmem";
const RMEM_MAX: &str = "/proc/sys/net/core/rmem_max";
const WMEM_MAX: &str = "/proc/sys/net/core/wmem_max";

fn change(target: &str, from: &str, to: &str) -> (String, String, String) {
    (target.to_string(), from.to_string(), to.to_string())
}

fn sorted(mut v: Vec<(String, String, String)>) -> Vec<(String, String, String)> {
    v.sort();
    v
}

fn names(found: &[Candidate]) -> Vec<&str> {
    found.iter().map(|c| c.name.as_str()).collect()
}

/// The 2-CPU VM fixture as the bulk scenario's server namespace shows it:
/// read inside network namespace 'ntb-x-server', its receive buffers
/// capped at 32 KiB, the socket caps (the host's, read-only here) at the
/// kernel's default 212992.
fn bulk_namespace() -> Host {
    let mut host = fixture("vm-2cpu-virtio");
    host.source.netns = Some("ntb-x-server".to_string());
    host.sysctls.insert(
        "net.ipv4.tcp_rmem".to_string(),
        "4096 16384 32768".to_string(),
    );
    host
}

/// On the host, `buffers=throughput` is the throughput profile's own
/// buffer changes: with no link speed, 10 Gbit/s x 100 ms = 125 MB -> the
/// 128 MiB tier, socket caps at twice that.
#[test]
fn buffers_are_the_throughput_profiles_sizes_for_the_path() {
    let host = fixture("vm-2cpu-virtio");
    let buffers = space(&[Dimension::Buffers], "eth0");
    let (found, remarks) = candidates(&host, &buffers).expect("candidates");
    assert_eq!(remarks, Remarks::default());
    assert_eq!(names(&found), ["current", "buffers=throughput"]);
    let tier = (128u64 << 20).to_string();
    let cap = (256u64 << 20).to_string();
    assert_eq!(
        sorted(changes(&found[1].plan)),
        sorted(vec![
            change(RMEM_MAX, "212992", &cap),
            change(WMEM_MAX, "212992", &cap),
            change(RMEM, "4096 131072 6291456", &format!("4096 131072 {tier}")),
            change(WMEM, "4096 16384 4194304", &format!("4096 16384 {tier}")),
        ])
    );
    assert!(
        found[1].plan.changes.iter().all(|c| c
            .reason
            .starts_with("experiment search: buffers as the throughput profile sizes them: bandwidth x RTT: 10 Gbit/s")),
        "{:?}",
        found[1].plan.changes
    );
    // The very values `plan --profile throughput` writes for them.
    let profile = crate::plan::plan(
        &host,
        &PlanOptions {
            ifaces: vec!["eth0".to_string()],
            ..PlanOptions::new(Profile::Throughput)
        },
    )
    .expect("throughput plan");
    let mut of_profile = changes(&profile);
    of_profile.retain(|(t, _, _)| [RMEM, WMEM, RMEM_MAX, WMEM_MAX].contains(&t.as_str()));
    assert_eq!(sorted(of_profile), sorted(changes(&found[1].plan)));

    // A path given (--bandwidth 50mbit --rtt 30ms: 187.5 kB in flight):
    // the smallest tier, 16 MiB.
    let path = Space {
        bandwidth_bits: Some(50_000_000),
        rtt_us: Some(30_000),
        ..space(&[Dimension::Buffers], "eth0")
    };
    let plan = settings_plan(
        &host,
        &path,
        &[(Dimension::Buffers, "throughput".to_string())],
    )
    .expect("buffers=throughput");
    let small = (16u64 << 20).to_string();
    assert!(
        changes(&plan).contains(&change(
            RMEM,
            "4096 131072 6291456",
            &format!("4096 131072 {small}")
        )),
        "{:?}",
        changes(&plan)
    );

    // Buffers that already hold the profile's sizes: the choice is the
    // host as found, and the note says why nothing is tried.
    let mut tuned = host.clone();
    for (name, value) in [
        ("net.core.rmem_max", cap.clone()),
        ("net.core.wmem_max", cap.clone()),
        ("net.ipv4.tcp_rmem", format!("4096 131072 {tier}")),
        ("net.ipv4.tcp_wmem", format!("4096 16384 {tier}")),
    ] {
        tuned.sysctls.insert(name.to_string(), value);
    }
    let (found, remarks) = candidates(&tuned, &buffers).expect("candidates");
    assert_eq!(names(&found), ["current"]);
    assert!(remarks.notes.is_empty(), "{remarks:?}");
    assert_eq!(
        remarks.skipped,
        [
            "buffers: skipped: net.ipv4.tcp_rmem and tcp_wmem already hold the throughput \
          profile's maxima"
        ]
    );
}

/// Inside a network namespace only tcp_rmem/tcp_wmem are its own: the
/// bulk scenario's 32 KiB maximum is raised to the host's cap, which is
/// left alone, and said so.
#[test]
fn in_a_namespace_buffers_raise_its_tcp_maxima_within_the_hosts_caps() {
    let host = bulk_namespace();
    let buffers = space(&[Dimension::Buffers], "eth0");
    let (found, remarks) = candidates(&host, &buffers).expect("candidates");
    assert_eq!(names(&found), ["current", "buffers=throughput"]);
    assert_eq!(
        changes(&found[1].plan),
        [change(RMEM, "4096 16384 32768", "4096 16384 212992")]
    );
    // The caps left alone are a note on the candidate, not a skip: the
    // buffers are searched.
    assert!(remarks.skipped.is_empty(), "{remarks:?}");
    assert_eq!(
        remarks.notes,
        [
            "buffers: the host's socket caps (net.core.rmem_max, net.core.wmem_max), which \
          network namespace 'ntb-x-server' cannot raise, are left alone: the TCP maxima are \
          kept within them"
        ]
    );
    let named = settings_plan(
        &host,
        &buffers,
        &[(Dimension::Buffers, "throughput".to_string())],
    )
    .expect("buffers=throughput");
    assert_eq!(changes(&named), changes(&found[1].plan));
    let err = settings_plan(&host, &buffers, &[(Dimension::Buffers, "huge".to_string())])
        .expect_err("no such choice");
    assert_eq!(
        err.to_string(),
        "buffers=huge is not possible here; buffers takes throughput"
    );

    // With RPS: each RPS choice with and without the buffers (RPS off as
    // found collapses into the host as found).
    let (rps, _) = candidates(&host, &space(&[Dimension::Rps], "eth0")).expect("rps");
    let (both, _) = candidates(&host, &space(&[Dimension::Rps, Dimension::Buffers], "eth0"))
        .expect("rps,buffers");
    assert_eq!(both.len(), rps.len() * 2, "{:?}", names(&both));
    assert!(names(&both).contains(&"rps=all buffers=throughput"));
}

#[test]
fn buffers_are_skipped_with_the_reason_where_nothing_can_be_written() {
    // The namespace's maxima are the kernel's defaults, above the host's
    // caps already: nothing to raise here.
    let mut host = bulk_namespace();
    host.sysctls.insert(
        "net.ipv4.tcp_rmem".to_string(),
        "4096 131072 6291456".to_string(),
    );
    let buffers = space(&[Dimension::Buffers], "eth0");
    let (found, remarks) = candidates(&host, &buffers).expect("candidates");
    assert_eq!(names(&found), ["current"]);
    assert!(remarks.notes.is_empty(), "{remarks:?}");
    assert_eq!(
        remarks.skipped,
        [
            "buffers: skipped: net.ipv4.tcp_rmem and tcp_wmem already hold the throughput \
          profile's maxima within the host's socket caps (net.core.rmem_max, \
          net.core.wmem_max), which network namespace 'ntb-x-server' cannot raise"
        ]
    );
    let err = settings_plan(
        &host,
        &buffers,
        &[(Dimension::Buffers, "throughput".to_string())],
    )
    .expect_err("nothing to set");
    assert!(err.to_string().starts_with("buffers: skipped"), "{err}");

    // No TCP buffer sysctls in the namespace: the first one is named.
    host.sysctls.remove("net.ipv4.tcp_rmem");
    host.sysctls.remove("net.ipv4.tcp_wmem");
    let (found, remarks) = candidates(&host, &buffers).expect("candidates");
    assert_eq!(names(&found), ["current"]);
    assert_eq!(
        remarks.skipped,
        [
            "buffers: skipped: net.ipv4.tcp_rmem does not exist in network namespace \
          'ntb-x-server'"
        ]
    );
}
