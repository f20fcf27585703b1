//! `--remote ADDR:PORT --token-file F [--tls-ca CA]` on the load
//! generators: ask `nettune serve` there for the server side instead of
//! `--to`, run the load against it, and put the server side's report (the
//! receiver's view) into this one's, as `remote` in JSON and a section in
//! text.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use crate::base::tls::{ClientFiles, ClientTls, PemFile};
use crate::bench::addr::parse_destination;
use crate::error::{Failed, Status};
use crate::serve::{self, Remote, RemoteReport, RemoteTest, ServerSide, Start};

/// The daemon's server side for this run.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// Ask `nettune serve` at ADDR:PORT to start the server side for this
    /// run (on a port of its own, serving this host only) instead of --to;
    /// its report (the receiver's view) joins this one.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_destination)]
    pub remote: Option<SocketAddr>,
    /// The daemon's shared secret: a file only its owner (or root) may
    /// read (mode 0600 or 0400). Without it only a daemon on loopback (or
    /// one that takes client certificates) answers.
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub tls: TlsClientArgs,
    /// Threads of the server side the daemon starts.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "remote", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub remote_threads: u32,
    /// Pin the server side's thread i to the i-th CPU of this list on the
    /// daemon's host.
    #[arg(long, value_name = "CPUS", requires = "remote", value_parser = remote_cpus)]
    pub remote_pin: Option<super::common::CpuList>,
}

fn remote_cpus(text: &str) -> Result<super::common::CpuList, String> {
    let cpus = crate::base::cpuset::parse_list(text).map_err(|e| format!("'{text}': {e}"))?;
    if cpus.is_empty() {
        return Err(format!("'{text}' names no CPU"));
    }
    Ok(super::common::CpuList(cpus))
}

/// TLS 1.3 to a `nettune serve` daemon (docs/serve.md): every control
/// connection, the measured traffic stays plain.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsClientArgs {
    /// Speak TLS 1.3 to the daemon, trusting the CA certificate(s) in this
    /// PEM file (the CA that signed the daemon's --tls-cert). The
    /// daemon's certificate must name the --remote address (or
    /// --tls-server-name).
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub tls_ca: Option<PathBuf>,
    /// This client's certificate chain (PEM), for a daemon that requires
    /// one (its --tls-client-ca).
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The name the daemon's certificate must carry, when it is not the
    /// --remote address (a DNS name).
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_server_name: Option<String>,
}

impl TlsClientArgs {
    /// Read and check the files, when TLS was asked for.
    pub fn load(&self) -> anyhow::Result<Option<ClientTls>> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                PemFile::new("--tls-cert", cert),
                PemFile::new("--tls-key", key),
            )),
            _ => None,
        };
        ClientTls::load(&ClientFiles {
            ca: PemFile::new("--tls-ca", ca),
            identity,
            server_name: self.tls_server_name.clone(),
        })
        .map(Some)
    }
}

/// How to reach the daemon at `daemon`: the token and TLS, read and
/// checked before anything is sent.
pub fn remote(
    daemon: SocketAddr,
    token_file: Option<&std::path::Path>,
    tls: &TlsClientArgs,
) -> anyhow::Result<Remote> {
    Ok(Remote {
        daemon,
        token: token_file.map(serve::token::load).transpose()?,
        tls: tls.load()?,
    })
}

/// Seconds a server side needs beyond the client's warm-up and duration:
/// connecting, the last bytes, the report.
const MARGIN: f64 = 5.0;

impl RemoteArgs {
    /// Start the server side when `--remote` was given; `seconds`: the
    /// client's warm-up and duration.
    /// `netns`: the namespace the load runs in (the daemon is reached from
    /// there too).
    pub fn start(
        &self,
        side: ServerSide,
        seconds: f64,
        netns: Option<&str>,
    ) -> anyhow::Result<Option<RemoteTest>> {
        let Some(daemon) = self.remote else {
            return Ok(None);
        };
        let remote = remote(daemon, self.token_file.as_deref(), &self.tls)?;
        let start = Start {
            side,
            seconds: seconds + MARGIN,
            pin: super::common::CpuList::of(&self.remote_pin),
        };
        let test = crate::bench::netns::within(netns, || remote.start(&start))?;
        eprintln!("remote: {} (test {})", test.detail, test.test);
        Ok(Some(test))
    }
}

/// Print the report with the server side's (when there is one), then fail
/// with the first problem: this run's, or a missing remote report.
pub fn finish<R: Serialize>(
    report: &R,
    remote: Option<RemoteTest>,
    json: bool,
    text: impl FnOnce(&R) -> String,
    problem: Option<String>,
) -> anyhow::Result<Status> {
    let Some(test) = remote else {
        return super::common::finish(report, json, text, problem);
    };
    let remote = test.finish();
    if json {
        let mut value = serde_json::to_value(report)?;
        if let Value::Object(map) = &mut value {
            match &remote {
                Ok(r) => map.insert("remote".to_string(), serde_json::to_value(r)?),
                Err(e) => map.insert("remote_error".to_string(), Value::String(format!("{e:#}"))),
            };
        }
        crate::bench::report::print_json(&value)?;
    } else {
        let mut out = text(report);
        match &remote {
            Ok(r) => out.push_str(&remote_text(r)),
            Err(e) => {
                let _ = writeln!(out, "\nremote: no report: {e:#}");
            }
        }
        crate::output::print(&out)?;
    }
    let problem = problem.or_else(|| match &remote {
        Ok(r) => r
            .error
            .as_ref()
            .map(|e| format!("the daemon's {} failed: {e}", r.bench)),
        Err(e) => Some(format!("{e:#}")),
    });
    match problem {
        Some(reason) => Err(Failed(reason).into()),
        None => Ok(Status::Clean),
    }
}

/// The server side's figures that matter for each bench, then the daemon
/// host's per-CPU table.
fn remote_text(r: &RemoteReport) -> String {
    let mut out = format!(
        "\nremote: the daemon's {} (test {}) ended {} after {:.1} s\n",
        r.bench, r.test, r.ended, r.seconds
    );
    if let Some(v) = &r.report {
        // The figures that matter for the bench, as its engine says.
        let line = crate::bench::registry::by_server(&r.bench)
            .map(|engine| engine.summary(v))
            .unwrap_or_default();
        let _ = writeln!(out, "remote: {line}");
    }
    if let Some(error) = &r.error {
        let _ = writeln!(out, "remote: failed: {error}");
    }
    if let Some(cpu) = &r.host_cpu {
        let mut table = Vec::new();
        if cpu.write_table(&mut table).is_ok() {
            out.push_str("per-CPU time on the daemon's host over the test:\n");
            out.push_str(&String::from_utf8_lossy(&table));
        }
    }
    out
}
