//! The engines as library parts: a caller builds configs, holds the stop
//! token, observes intervals and gets the reports back, with no binary and
//! no printing. Two engines run in one process, as a monitor beside a bench
//! or an experiment driving both sides will.

use std::time::{Duration, Instant};

use nettune::base::observe::{Quiet, Recorder};
use nettune::base::stop::Stop;
use nettune::bench::udp::{self, FloodConfig, Interval, SinkConfig};

use crate::common::{measuring, skip_unless_root, Netns};

/// A sink (open, then run on a thread of its own) and a flood into it, in
/// one process; returns both reports and the sink's observed intervals.
fn sink_and_flood(
    sink: SinkConfig,
    flood: impl FnOnce(std::net::SocketAddr) -> FloodConfig,
) -> (udp::SinkReport, udp::FloodReport, Recorder<Interval>) {
    let sink = udp::open_sink(sink).expect("open the sink");
    let flood = flood(sink.local_addr());
    let stop = Stop::new();
    std::thread::scope(|s| {
        let sink_stop = stop.clone();
        let receiving = s.spawn(move || {
            let mut seen = Recorder::default();
            let report = sink.run(&sink_stop, &mut seen).expect("sink run");
            (report, seen)
        });
        let flood_report = udp::run_flood(&flood, &stop, &mut Quiet).expect("flood run");
        let (sink_report, seen) = receiving.join().expect("sink thread");
        (sink_report, flood_report, seen)
    })
}

#[test]
fn a_sink_and_a_flood_in_one_process_count_the_same_packets() {
    let _serial = measuring();
    let mut sink = SinkConfig::new("127.0.0.1:0".parse().expect("addr"));
    sink.duration = Some(Duration::from_millis(2500));
    // Room for seconds of the flood: a receiver left off the CPU for a
    // while (a loaded machine) loses nothing.
    sink.rcvbuf = Some(64 << 20);
    let (sink, flood, seen) = sink_and_flood(sink, |to| {
        let mut flood = FloodConfig::new(vec![to]);
        flood.rate = Some(20_000);
        flood.flows = 2;
        flood.duration = Duration::from_secs(1);
        flood
    });
    assert!(flood.problem().is_none(), "{flood:?}");
    // A real run; its exact rate depends on the CPU the sender gets (the
    // pacer itself is checked on a simulated clock in flood.rs).
    assert!(flood.packets >= 100, "{flood:?}");
    assert_eq!(sink.packets, flood.packets);
    assert_eq!(sink.sequence.lost, 0);
    assert_eq!(sink.sequence.flows, 2);
    // The observer got the ready line and one interval per whole second.
    assert_eq!(seen.ready.len(), 1);
    assert_eq!(seen.ready[0].0, Some(sink.bind));
    assert_eq!(seen.intervals.len(), 2);
    // Reports are plain data: they survive JSON both ways.
    let json = serde_json::to_string(&sink).expect("json");
    let back: udp::SinkReport = serde_json::from_str(&json).expect("back");
    assert_eq!(back, sink);
}

#[test]
fn the_callers_stop_token_ends_a_run_without_a_duration() {
    let mut config = SinkConfig::new("127.0.0.1:0".parse().expect("addr"));
    config.duration = None;
    let sink = udp::open_sink(config).expect("open");
    let stop = Stop::new();
    let started = Instant::now();
    let report = std::thread::scope(|s| {
        let stopper = stop.clone();
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            stopper.trigger();
        });
        sink.run(&stop, &mut Quiet).expect("run")
    });
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(report.ended, "interrupted");
    assert!(report
        .problem()
        .expect("nothing arrived")
        .contains("measured nothing"));
}

#[test]
fn a_sink_in_one_namespace_and_a_flood_in_another_in_one_process() {
    if skip_unless_root("a_sink_in_one_namespace_and_a_flood_in_another_in_one_process") {
        return;
    }
    let _serial = measuring();
    let (tx, rx) = (Netns::new("bl"), Netns::new("bl"));
    crate::common::veth_pair(&tx, &rx, 80, None);

    let mut sink = SinkConfig::new("10.80.0.2:0".parse().expect("addr"));
    sink.duration = Some(Duration::from_millis(2500));
    // Room for seconds of the flood: a receiver left off the CPU for a
    // while (a loaded machine) loses nothing.
    sink.rcvbuf = Some(64 << 20);
    sink.netns = Some(rx.name.clone());
    let (sink, flood, _) = sink_and_flood(sink, |to| {
        let mut flood = FloodConfig::new(vec![to]);
        flood.rate = Some(20_000);
        flood.flows = 4;
        flood.duration = Duration::from_secs(1);
        flood.netns = Some(tx.name.clone());
        flood
    });
    assert!(flood.problem().is_none(), "{flood:?}");
    // A real run; its exact rate depends on the CPU the sender gets (the
    // pacer itself is checked on a simulated clock in flood.rs).
    assert!(flood.packets >= 100, "{flood:?}");
    assert_eq!(sink.packets, flood.packets);
    assert_eq!(sink.sequence.lost, 0);
    // The receiving namespace's own UDP counters: exactly our packets.
    assert_eq!(sink.kernel.udp_in_datagrams, Some(flood.packets as i64));
    // This process never left the root namespace: 10.80.0.2 is not here.
    assert!(std::net::UdpSocket::bind("10.80.0.2:0").is_err());
}

#[test]
fn an_rr_server_and_client_in_one_process() {
    use nettune::bench::rr::{self, ClientConfig, Proto, ServerConfig};
    let _serial = measuring();
    let server = rr::open_server(ServerConfig::new("127.0.0.1:0".parse().expect("addr")))
        .expect("open the server");
    let to = server.local_addr();
    let stop = Stop::new();
    let (server_report, client_report) = std::thread::scope(|s| {
        let server_stop = stop.clone();
        let serving = s.spawn(move || server.run(&server_stop, &mut Quiet).expect("serve"));
        let mut config = ClientConfig::new(to, Proto::Tcp);
        config.instances = 4;
        config.duration = Duration::from_secs(1);
        config.warmup = Duration::from_millis(200);
        let mut seen = Recorder::default();
        let client = rr::run_client(&config, &Stop::new(), &mut seen).expect("client");
        assert_eq!(seen.intervals.len(), 1);
        stop.trigger();
        (serving.join().expect("server thread"), client)
    });
    assert!(client_report.problem().is_none(), "{client_report:?}");
    assert!(client_report.transactions > 100, "{client_report:?}");
    // The server answered every transaction the client counted, and more
    // (the warm-up's).
    assert!(server_report.total.tcp_transactions >= client_report.transactions);
    assert_eq!(server_report.ended, "interrupted");
    // The client's CPU time is its own threads', not the server's too.
    assert!(client_report.client_cpu.percent_of_one_cpu < 400.0);
}

#[test]
fn an_http_server_and_load_in_one_process() {
    use nettune::bench::http::{self, LoadConfig, ServerConfig};
    let _serial = measuring();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
    config.threads = Some(1);
    let server = http::open_server(config).expect("open the server");
    let url = http::url::parse(&format!("http://{}/plaintext", server.local_addr())).expect("url");
    let stop = Stop::new();
    let (served, load) = std::thread::scope(|s| {
        let server_stop = stop.clone();
        let serving = s.spawn(move || server.run(&server_stop, &mut Quiet).expect("serve"));
        let mut config = LoadConfig::new(url);
        config.threads = 1;
        config.connections = 4;
        config.duration = Duration::from_secs(1);
        let load = http::run_load(&config, &Stop::new(), &mut Quiet).expect("load");
        stop.trigger();
        (serving.join().expect("server thread"), load)
    });
    assert!(load.problem().is_none(), "{load:?}");
    assert!(load.requests > 100, "{load:?}");
    assert_eq!(load.status_codes.get("200"), Some(&load.requests));
    assert!(served.requests >= load.requests);
    let json = serde_json::to_string(&load).expect("json");
    let back: http::LoadReport = serde_json::from_str(&json).expect("back");
    assert_eq!(back.requests, load.requests);
}
