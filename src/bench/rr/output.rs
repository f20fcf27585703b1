//! `rr` as text: a header, one line per second, and the final report with
//! the mpstat-style per-CPU table; and the rr-server's final report. Pure:
//! the command line prints what these return.

use std::fmt::Write as _;

use super::measure::Interval;
use super::report::RrReport;
use super::server::ServerReport;
use super::ClientConfig;
use crate::base::cpuset;
use crate::bench::pin::Pinning;

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `rr: tcp to 127.0.0.1:9000, 100 instances on 2 threads (CPUs 0-1), ...`
pub fn header(args: &ClientConfig, threads: usize, pinning: &Pinning) -> String {
    format!(
        "rr: {} to {}, {} on {}{}, {}-byte requests, {}-byte replies; {:.1} s warm-up, {:.1} s measured",
        args.proto.name(),
        args.to,
        plural(args.instances as usize, "instance"),
        plural(threads, "thread"),
        match pinning.cpus() {
            [] => String::new(),
            cpus => format!(" (CPUs {})", cpuset::format_list(cpus)),
        },
        args.size.request,
        args.size.reply,
        args.warmup.as_secs_f64(),
        args.duration.as_secs_f64()
    )
}

/// `3 s: 64123 transactions/s  threads: 32001 32122`
pub fn interval_line(i: &Interval) -> String {
    let mut line = format!("{:>3} s: {:>9} transactions/s", i.second, i.transactions);
    if i.per_thread.len() > 1 {
        line.push_str("  threads:");
        for n in &i.per_thread {
            line.push_str(&format!(" {n}"));
        }
    }
    line
}

pub fn text(r: &RrReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "transactions  {} in {:.3} s = {:.1} transactions/s{}",
        r.transactions,
        r.duration_s,
        r.transactions_per_sec,
        if r.ended == "interrupted" {
            " (stopped early)"
        } else {
            ""
        }
    );
    let l = &r.latency;
    let _ = writeln!(
        out,
        "latency us    p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}  (mean {:.1}, min {:.1})",
        l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.p9999_us, l.max_us, l.mean_us, l.min_us
    );
    if let Some(b) = &r.busy_poll {
        let _ = writeln!(out, "busy polling  {}", busy_poll_text(b));
    }
    let c = &r.client_cpu;
    let _ = writeln!(
        out,
        "client CPU    user {:.2} s + sys {:.2} s = {:.1}% of one CPU ({:.1}% of {} CPUs)",
        c.user_s, c.sys_s, c.percent_of_one_cpu, c.percent_of_all_cpus, c.online_cpus
    );
    if r.resends + r.late_replies + r.bad_replies + r.errors > 0 {
        let _ = writeln!(
            out,
            "udp/errors    {} resends, {} late replies, {} bad replies, {} errors{}",
            r.resends,
            r.late_replies,
            r.bad_replies,
            r.errors,
            r.first_error
                .as_deref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        );
    }
    if r.per_thread.len() > 1 {
        for t in &r.per_thread {
            let _ = writeln!(
                out,
                "thread {:<3}    cpu {:<3} {} instances {:.1} transactions/s",
                t.thread,
                t.cpu.map_or("-".to_string(), |c| c.to_string()),
                t.instances,
                t.transactions_per_sec
            );
        }
    }
    if let Some(usage) = &r.host_cpu {
        let _ = writeln!(out, "host CPUs over the measured run (/proc/stat):");
        let mut table = Vec::new();
        let _ = usage.write_table(&mut table);
        out.push_str(&String::from_utf8_lossy(&table));
    }
    out
}

/// `SO_BUSY_POLL 50 us, prefer, budget 16, epoll too (EPIOCSPARAMS)`.
pub fn busy_poll_text(b: &crate::bench::busy_poll::BusyPollReport) -> String {
    let mut text = format!("SO_BUSY_POLL {} us", b.usecs);
    if b.prefer {
        text.push_str(", prefer");
    }
    if let Some(budget) = b.budget {
        text.push_str(&format!(", budget {budget}"));
    }
    text.push_str(if b.epoll {
        ", epoll too (EPIOCSPARAMS)"
    } else {
        ", sockets only (no EPIOCSPARAMS)"
    });
    match b.napi_ids.as_deref() {
        Some([]) => text.push_str("; no NAPI to poll (SO_INCOMING_NAPI_ID 0): it never engaged"),
        Some(ids) => {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            text.push_str(&format!("; polling NAPI {}", ids.join(", ")));
        }
        None => {}
    }
    text
}

/// The rr-server's final report as text.
pub fn server_text(r: &ServerReport) -> String {
    let mut out = String::new();
    let t = &r.total;
    let _ = writeln!(
        out,
        "rr-server: {:.3} s{}: TCP {} connections, {} transactions; UDP {} flows, {} transactions{}",
        r.duration_s,
        if r.ended == "interrupted" {
            ", stopped early"
        } else {
            ""
        },
        t.tcp_connections,
        t.tcp_transactions,
        t.udp_flows,
        t.udp_transactions,
        match r.drop_every {
            Some(n) => format!(", {} dropped on purpose (every {n}th)", t.udp_dropped),
            None => String::new(),
        }
    );
    let _ = writeln!(
        out,
        "rr-server: engine {}",
        crate::bench::backend::describe(&r.engine, &r.engine_reason)
    );
    let odd: Vec<String> = [
        (t.udp_unknown, "datagrams from unknown flows"),
        (t.udp_send_errors, "UDP send errors"),
        (t.tcp_bad_hellos, "bad TCP hellos"),
        (
            t.tcp_hello_timeouts,
            "connections closed without a hello in 10 s",
        ),
        (t.accept_errors, "accepts failed for want of descriptors"),
        (t.udp_bad_hellos, "bad UDP hellos"),
        (
            t.udp_capped,
            "UDP replies cut to an unproven request's size",
        ),
        (t.foreign, "from other addresses"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if !odd.is_empty() {
        let _ = writeln!(out, "rr-server: {}", odd.join(", "));
    }
    if r.per_thread.len() > 1 {
        for th in &r.per_thread {
            let _ = writeln!(
                out,
                "thread {:<2} cpu {:<4} TCP {} connections {} transactions; UDP {} flows {} transactions",
                th.thread,
                th.cpu.map_or("-".to_string(), |c| c.to_string()),
                th.tcp_connections,
                th.tcp_transactions,
                th.udp_flows,
                th.udp_transactions
            );
        }
    }
    out
}
