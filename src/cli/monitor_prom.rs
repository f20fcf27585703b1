//! `nettune monitor --prometheus`: open the listener (in nettune's own
//! network namespace, before entering `--netns`), take the first reading,
//! and serve until Ctrl-C or SIGTERM. The exporter itself is
//! `crate::monitor::prom`.

use std::time::Duration;

use crate::error::Status;
use crate::host::Selection;
use crate::monitor::prom::{self, Event, Limits, Sampling};
use crate::monitor::{text, Feed};

use super::monitor_args::{MonitorArgs, DEFAULT_INTERVAL_SECS};

pub fn run(args: MonitorArgs) -> anyhow::Result<Status> {
    let selection = Selection {
        all: args.all,
        iface: args.iface.clone(),
    };
    let secs = args.interval.unwrap_or(DEFAULT_INTERVAL_SECS);
    let interval = Duration::from_secs_f64(secs);
    if args.root.is_some() && args.interval.is_some() {
        anyhow::bail!(
            "--interval cannot be used with --root: a recorded series keeps the interval it was \
             captured with"
        );
    }
    // Read before anything is opened: a bad file changes nothing.
    let web = args
        .web_config
        .as_deref()
        .map(prom::web_config::WebConfig::load)
        .transpose()?;
    // The socket stays in the namespace it was made in: Prometheus on this
    // host reaches it even when monitor watches another namespace.
    let addr = args.bind.unwrap_or_else(prom::default_bind);
    let listener = prom::bind(addr)?;
    let feed = match &args.root {
        Some(dir) => Feed::replay(dir, selection)?,
        None => {
            let reasons = super::monitor_args::reason_source(&args, true);
            if let Some(name) = &args.netns {
                crate::base::netns::enter(name)?;
            }
            let feed = Feed::live(selection, args.netns.clone(), interval);
            match reasons {
                Some(source) => feed.with_reasons(source),
                None => feed,
            }
        }
    };
    let replay_len = feed.recorded_len();
    let sampling = Sampling::start(feed, interval)?;
    let stop = super::signals::stop_on_signals()?;
    let local = listener.local_addr().unwrap_or(addr);
    let how = match (replay_len, &args.root) {
        (Some(n), Some(dir)) => format!(
            "replaying the {n} snapshots of {} on their recorded clock",
            dir.display()
        ),
        _ => format!("the host read when scraped, at most every {secs} s"),
    };
    let tls = web.as_ref().is_some_and(|w| w.tls.is_some());
    // Client certificates checked against a CA are a password too.
    let auth = web.as_ref().is_some_and(|w| {
        !w.users.is_open() || w.tls.as_ref().is_some_and(|t| t.client_ca().is_some())
    });
    let scheme = if tls { "https" } else { "http" };
    let secured = match (tls, auth) {
        (true, true) => "; TLS and basic auth",
        (true, false) => "; TLS",
        (false, true) => "; basic auth",
        (false, false) => "",
    };
    eprintln!(
        "nettune monitor: serving Prometheus metrics at {scheme}://{local}/metrics ({how}{secured}); \
         Ctrl-C or SIGTERM stops"
    );
    for note in web.iter().flat_map(|w| &w.notes) {
        eprintln!("nettune monitor: --web-config: {note}");
    }
    if !local.ip().is_loopback() {
        match (tls, auth) {
            (true, true) => {}
            (false, false) => eprintln!(
                "nettune monitor: warning: {local} is reachable from other hosts, without TLS or \
                 a password: give --web-config FILE (TLS and basic auth, docs/monitor.md), or \
                 bind 127.0.0.1"
            ),
            (false, true) => eprintln!(
                "nettune monitor: warning: {local} is reachable from other hosts and passwords \
                 would cross the network in clear: add tls_server_config to --web-config"
            ),
            (true, false) => eprintln!(
                "nettune monitor: warning: {local} is reachable from other hosts, and anyone who \
                 reaches it may scrape: add basic_auth_users or client certificates to \
                 --web-config"
            ),
        }
    }
    let missing = &sampling.current().missing;
    if !missing.is_empty() {
        eprintln!(
            "nettune monitor: not read (their collectors report \
             nettune_scrape_collector_success 0): {}",
            text::missing_list(missing)
        );
    }
    let mut note = |event: Event| match event {
        Event::ReplayEnded => eprintln!(
            "nettune monitor: the replay reached its last snapshot; its values are served until \
             stopped"
        ),
    };
    let counts = prom::run(listener, sampling, Limits::default(), web, &stop, &mut note)?;
    eprintln!(
        "nettune monitor: stopped ({} connections, {} responses, {} refused, {} closed for room)",
        counts.connections, counts.responses, counts.refused, counts.evicted
    );
    Ok(Status::Clean)
}
