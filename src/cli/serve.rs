//! `nettune serve`: the daemon that starts benches' server sides for
//! clients with `--remote`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::base::observe::Observer;
use crate::base::tls::{PemFile, ServerFiles, ServerTls};
use crate::bench::addr::parse_bind;
use crate::error::Status;
use crate::serve::{self, DaemonConfig, DaemonReport};

/// Start the server side of any bench on request, for clients running
/// `nettune bench ... --remote ADDR:PORT --token-file FILE`.
///
/// Each test gets its own port and threads and serves the client's address
/// only; tests are bounded in number, time, threads and what they send.
/// Clients prove they hold the token (HMAC, the token never crosses the
/// wire) or show a TLS client certificate; without either the daemon
/// listens on loopback only. With --tls-cert every control connection is
/// TLS 1.3 (the measured traffic stays plain). Strangers cannot lock
/// clients out: a few handshakes per source address at once, a 3 s
/// deadline each. Details and the protocol: docs/serve.md.
///
/// Examples:
///   umask 077; head -c 32 /dev/urandom | base64 > /etc/nettune/serve.token
///   nettune serve --bind 0.0.0.0:5299 --token-file /etc/nettune/serve.token
///   nettune bench rr --remote 10.0.0.2:5299 --token-file serve.token --proto tcp
///   nettune serve --bind 0.0.0.0:5299 --token-file /etc/nettune/serve.token \
///       --tls-cert /etc/nettune/serve.crt --tls-key /etc/nettune/serve.key
///   nettune bench stream --remote 10.0.0.2:5299 --token-file serve.token --tls-ca ca.crt
///
/// Runs until Ctrl-C or SIGTERM (every running bench is stopped first).
/// Exit status: 0 after a clean stop; 2 when it cannot start (a token file
/// others may read or another user owns, a public address without a token,
/// a certificate that does not load, a port in use).
#[derive(Debug, Clone, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// Address and port for control connections (port 0: any). The first
    /// line on stdout is the bound ADDR:PORT; log lines go to stderr.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// The shared secret: a regular file of this user's (or root's) that
    /// only its owner may read (mode 0600 or 0400), at least 16 bytes.
    /// Without it (or --tls-client-ca) the daemon listens on loopback only.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Speak TLS 1.3 on every control connection with this certificate
    /// chain (PEM, the daemon's certificate first; it must name the
    /// address clients use). Clients need --tls-ca; plain clients are
    /// refused.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, RSA or EC).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require a client certificate signed by this CA (PEM) of every
    /// client. With it and no --token-file the certificate is the
    /// authentication, and the daemon may listen beyond loopback.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Tests running at once, all clients together.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_tests: u32,
    /// The longest a server side runs (a client's warm-up, duration and a
    /// few seconds).
    #[arg(long, value_name = "DURATION", default_value = "300", value_parser = crate::base::units::parse_duration)]
    pub max_duration: Duration,
    /// The most a server side sends (stream --reverse, split over its
    /// streams by pacing).
    #[arg(long, value_name = "RATE", default_value = "10gbit", value_parser = rate)]
    pub max_rate: u64,
    /// The largest rr reply a client may ask for, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..=64 << 20))]
    pub max_reply: u32,
    /// Threads per server side.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_threads: u32,
    /// Print the final tally as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn rate(text: &str) -> Result<u64, String> {
    crate::base::units::parse_rate(text).map_err(|e| format!("{e:#}"))
}

/// The address alone on stdout first, then log lines on stderr, each with
/// the seconds since the start.
struct Log(Instant);

impl Observer<()> for Log {
    fn ready(&mut self, addr: Option<SocketAddr>, detail: &str) {
        if let Some(addr) = addr {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{addr}");
            let _ = out.flush();
        }
        eprintln!("{detail}");
    }
    fn warning(&mut self, text: &str) {
        eprintln!("serve [{:>9.3}] {text}", self.0.elapsed().as_secs_f64());
    }
}

fn text(r: &DaemonReport) -> String {
    format!(
        "serve: {:.0} s, {} connections: {} tests started, {} finished, {} clients gone mid-test, \
         {} refused; {} failed authentication, {} failed TLS, {} dropped (malformed, oversized, slow), \
         {} closed at once (per-source limit), {} closed to make room\n",
        r.duration_s,
        r.connections,
        r.tests_started,
        r.tests_finished,
        r.clients_gone,
        r.tests_refused,
        r.auth_failures,
        r.tls_failures,
        r.dropped,
        r.busy,
        r.evicted
    )
}

pub fn run(args: ServeArgs) -> anyhow::Result<Status> {
    let token = args
        .token_file
        .as_deref()
        .map(serve::token::load)
        .transpose()?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ServerTls::load(&ServerFiles {
            cert: PemFile::new("--tls-cert", cert),
            key: PemFile::new("--tls-key", key),
            client_ca: args
                .tls_client_ca
                .as_ref()
                .map(|ca| PemFile::new("--tls-client-ca", ca)),
        })?),
        _ => None,
    };
    let mut config = DaemonConfig::new(args.bind, token);
    config.tls = tls;
    config.max_tests = args.max_tests;
    config.max_duration = args.max_duration;
    config.max_rate = args.max_rate;
    config.max_reply = args.max_reply;
    config.max_threads = args.max_threads;
    let daemon = serve::bind(config)?;
    let stop = super::signals::stop_on_signals()?;
    let report = daemon.run(&stop, &mut Log(Instant::now()))?;
    super::bench::finish_report(&report, args.json, text)
}
