use super::*;
use crate::monitor::testkit::*;

/// `n` samples one second apart from `start`, each changed by `step`.
fn series(start: &Sample, n: usize, step: impl Fn(&mut Sample)) -> Vec<Sample> {
    let mut out = vec![start.clone()];
    for _ in 1..n {
        let next = after(out.last().expect("one"), 1.0, &step);
        out.push(next);
    }
    out
}

fn host() -> Watch {
    Watch::new(&[], false).expect("host watch")
}

fn names(fired: &[Fired]) -> Vec<&str> {
    fired.iter().map(|f| f.what.as_str()).collect()
}

#[test]
fn the_rule_needs_both_twice_the_baseline_and_the_floor() {
    // None before: the floor decides.
    assert!(!worse(0.0, 100.0));
    assert!(worse(0.0, 100.5));
    // 50/s before: 150/s is the limit (the floor), not 100/s (twice).
    assert_eq!(limit(50.0), 150.0);
    assert!(!worse(50.0, 140.0));
    // 1,000/s before: twice is the limit, not 1,100/s.
    assert_eq!(limit(1_000.0), 2_000.0);
    assert!(!worse(1_000.0, 1_900.0));
    assert!(worse(1_000.0, 2_100.0));
}

#[test]
fn a_quiet_baseline_and_a_quiet_change_is_not_worse() {
    let before = series(&first(), 4, |_| {});
    let after_change = series(before.last().expect("last"), 5, |s| {
        // A little loss, under the floor.
        bump(&mut s.counters.udp, "InErrors", 20);
        bump(&mut s.counters.udp, "RcvbufErrors", 20);
    });
    let watch = Watch::new(&[Metric::Drops, Metric::UdpRcvbuf], false).expect("watch");
    let (baseline, fired) = verdict(&watch, &before, &after_change);
    assert_eq!(baseline.secs, 3.0);
    assert_eq!(baseline.rates.get("UDP drops"), Some(&Some(0.0)));
    assert_eq!(fired, None);
}

#[test]
fn udp_drops_after_the_change_fire_with_their_numbers() {
    let before = series(&first(), 3, |_| {});
    let mut after_change = series(before.last().expect("last"), 2, |_| {});
    // The second interval after the change loses 5,000 datagrams at full
    // buffers (the kernel counts them in InErrors too).
    let bad = after(after_change.last().expect("last"), 1.0, |s| {
        bump(&mut s.counters.udp, "InErrors", 5_000);
        bump(&mut s.counters.udp, "RcvbufErrors", 5_000);
    });
    after_change.push(bad);
    let (_, fired) = verdict(&host(), &before, &after_change);
    let (interval, fired) = fired.expect("fired");
    assert_eq!(interval, 2);
    assert_eq!(
        names(&fired),
        ["UDP drops", "UDP RcvbufErrors", "finding udp.rcvbuf-errors"]
    );
    assert_eq!(
        fired[0].line(),
        "UDP drops 5,000/s (baseline 0/s, limit 100/s)"
    );
    assert_eq!(fired[2].severity, Some(Severity::Crit));
}

#[test]
fn a_layer_losing_before_fires_only_past_twice_its_rate() {
    // 1,000/s lost at the NIC before; 1,800/s after: within; 2,500/s: worse.
    let step = |n: u64| move |s: &mut Sample| bump_link(s, "eth0", "rx_dropped", n);
    let before = series(&first(), 5, step(1_000));
    let within = series(before.last().expect("last"), 4, step(1_800));
    let watch = Watch::new(&[Metric::Drops], false).expect("watch");
    let (baseline, fired) = verdict(&watch, &before, &within);
    assert_eq!(baseline.rates.get("NIC drops"), Some(&Some(1_000.0)));
    assert_eq!(fired, None);
    let past = series(before.last().expect("last"), 2, step(2_500));
    let (_, fired) = verdict(&watch, &before, &past);
    let (_, fired) = fired.expect("fired");
    assert_eq!(
        fired[0].line(),
        "NIC drops 2,500/s (baseline 1,000/s, limit 2,000/s)"
    );
}

#[test]
fn softnet_squeezes_fire_on_the_host_and_are_left_out_in_a_namespace() {
    let before = series(&first(), 3, |_| {});
    let squeezed = series(before.last().expect("last"), 2, |s| {
        s.counters.softnet[0].time_squeeze += 400;
    });
    let (_, fired) = verdict(&host(), &before, &squeezed);
    let (_, fired) = fired.expect("fired");
    assert_eq!(
        names(&fired),
        ["softnet time squeezes", "finding softnet.squeeze"]
    );
    // A namespace cannot tell whose packets those were.
    let ns = Watch::new(&[], true).expect("namespace watch");
    assert_eq!(
        ns.metrics,
        [Metric::Drops, Metric::UdpRcvbuf, Metric::Findings]
    );
    assert_eq!(verdict(&ns, &before, &squeezed).1, None);
    assert_eq!(ns.not_attributed().len(), 2);
    assert!(host().not_attributed().is_empty());
    // Asking for softnet in a namespace is refused, not ignored.
    let err = Watch::new(&[Metric::Softnet], true).expect_err("refused");
    assert!(err.contains("--guard-metric softnet"), "{err}");
}

#[test]
fn a_finding_the_baseline_had_does_not_fire_and_a_new_one_does() {
    // Listen overflows before and after: the same finding, not new.
    let overflow = |s: &mut Sample| {
        bump(&mut s.counters.tcp_ext, "ListenOverflows", 2);
        bump(&mut s.counters.tcp_ext, "ListenDrops", 2);
    };
    let before = series(&first(), 3, overflow);
    let watch = Watch::new(&[Metric::Findings], false).expect("watch");
    let same = series(before.last().expect("last"), 3, overflow);
    let (baseline, fired) = verdict(&watch, &before, &same);
    assert!(baseline.findings.contains("tcp.listen-overflows"));
    assert_eq!(fired, None);
    // Backlog drops are new: a finding at warn.
    let new = series(before.last().expect("last"), 2, |s| {
        s.counters.softnet[1].dropped += 3;
    });
    let (_, fired) = verdict(&watch, &before, &new);
    let (_, fired) = fired.expect("fired");
    assert_eq!(names(&fired), ["finding softnet.drops"]);
    assert!(fired[0].line().contains("not in the baseline"));
}

#[test]
fn a_gap_is_not_a_regression() {
    let before = series(&first(), 3, |_| {});
    // Counters went back (the namespace's counters restarted).
    let gap = vec![
        before.last().expect("last").clone(),
        after(before.last().expect("last"), 1.0, |s| {
            s.counters.udp.insert("InErrors".into(), 0);
            s.counters.udp.insert("RcvbufErrors".into(), 0);
        }),
    ];
    assert_eq!(verdict(&host(), &before, &gap).1, None);
}

#[test]
fn what_cannot_be_read_is_named_per_metric() {
    let mut s = first();
    s.counters.softnet.clear();
    s.counters.udp.remove("RcvbufErrors");
    let lines = host().unreadable(&s);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("--guard-metric softnet needs /proc/net/softnet_stat"));
    assert!(lines[1].contains("udp-rcvbuf needs /proc/net/snmp (Udp RcvbufErrors)"));
    assert!(lines[2].starts_with("--guard-metric findings"));
    // A namespace's guard needs no per-CPU counter.
    let ns = Watch::new(&[], true).expect("namespace watch");
    assert_eq!(ns.unreadable(&s).len(), 1);
    assert!(host().unreadable(&first()).is_empty());
}
