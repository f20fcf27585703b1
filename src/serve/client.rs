//! The client side of `nettune serve`, as a library API: ask a daemon to
//! start a server side, run the load against it, fetch its report.
//!
//! ```no_run
//! use nettune::serve::{self, ServerSide, Start};
//! # fn main() -> anyhow::Result<()> {
//! let token = serve::token::load("/etc/nettune/serve.token".as_ref())?;
//! let daemon = "10.0.0.2:5299".parse()?;
//! let start = Start {
//!     side: ServerSide::RrServer { threads: 2, max_reply: 1 },
//!     seconds: 15.0,
//!     pin: Vec::new(),
//! };
//! let test = serve::start(daemon, Some(&token), &start)?;
//! // Over TLS: serve::Remote { daemon, token: Some(token), tls: Some(client_tls) }.start(&start)
//! // ... run `bench rr` (or any load) against `test.addr` ...
//! let remote = test.finish()?; // the server side's report: the receiver's view
//! # Ok(()) }
//! ```

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::proto::{
    self, AuthKind, ErrorKind, FromClient, FromDaemon, Limits, RemoteReport, Start, FLAG_TLS,
    MAX_MESSAGE, MAX_REPORT, NONCE_LEN,
};
use super::token::Token;
use crate::base::tls::{ClientTls, HandshakeError};
use crate::bench::frame::{self, Conn};

/// How long the connection and each answer of the handshake may take.
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// How long the daemon has to stop the server side and send its report.
const REPORT_WAIT: Duration = Duration::from_secs(30);

/// A server side the daemon started: where it listens, and the control
/// connection that ends it. Dropping it without [`finish`](Self::finish)
/// closes the connection, and the daemon stops the server side.
#[derive(Debug)]
pub struct RemoteTest {
    /// Where the server side listens: the daemon's address (the one this
    /// client connected to; the daemon only names the port) and its port.
    pub addr: SocketAddr,
    /// The daemon's number for the test (in its log).
    pub test: u64,
    /// The daemon's description of what it started.
    pub detail: String,
    /// What the daemon allows each test.
    pub limits: Limits,
    /// The TLS the control connection speaks, for any further control
    /// connection to the server side (the stream test's own).
    pub tls: Option<ClientTls>,
    conn: Conn,
}

/// How to reach a daemon: its address, the shared token, TLS.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    pub daemon: SocketAddr,
    /// `None` only for a daemon on loopback that wants none, or one that
    /// takes this client's TLS certificate instead.
    pub token: Option<Token>,
    /// TLS 1.3 on the control connections: the daemon's CA (and this
    /// client's certificate); `None`: plain text.
    pub tls: Option<ClientTls>,
}

/// Ask the daemon at `daemon` to start `start.side` for at most
/// `start.seconds`, authenticating with `token` (`None` only for a daemon
/// on loopback that wants none).
///
/// Returns once the server side listens: [`RemoteTest::addr`] is where to
/// send the load, [`RemoteTest::finish`] ends it and returns its report
/// (the receiver's view). The daemon serves this client's address only.
///
/// Errors name the daemon and what to do: no daemon there, a wrong or
/// missing token (the daemon closes the connection without a word), a
/// daemon that does not prove it holds the token, versions too far apart
/// ("upgrade"), a request out of the daemon's limits, `max_tests` busy.
pub fn start(
    daemon: SocketAddr,
    token: Option<&Token>,
    start: &Start,
) -> anyhow::Result<RemoteTest> {
    Remote {
        daemon,
        token: token.cloned(),
        tls: None,
    }
    .start(start)
}

impl Remote {
    /// [`start`], over TLS when [`Remote::tls`] says so.
    pub fn start(&self, start: &Start) -> anyhow::Result<RemoteTest> {
        handshake_and_start(self, start)
    }
}

fn handshake_and_start(remote: &Remote, start: &Start) -> anyhow::Result<RemoteTest> {
    let daemon = remote.daemon;
    let tls = remote.tls.as_ref();
    let tcp = TcpStream::connect_timeout(&daemon, ANSWER_WAIT).with_context(|| {
        format!("--remote '{daemon}': cannot connect; is `nettune serve` listening there?")
    })?;
    let _ = tcp.set_nodelay(true);
    tcp.set_write_timeout(Some(ANSWER_WAIT))
        .context("cannot set a send timeout")?;
    {
        use std::io::Write as _;
        let flags = if tls.is_some() { FLAG_TLS } else { 0 };
        (&tcp)
            .write_all(&proto::preamble(proto::VERSION, flags))
            .with_context(|| format!("--remote '{daemon}': cannot send the preamble"))?;
    }
    let conn = match tls {
        Some(tls) => secure(tcp, daemon, tls)?,
        None => Conn::plain(tcp),
    };
    let (server_nonce, auth) = match answer(&conn, daemon, tls, "the challenge") {
        Ok(FromDaemon::Challenge { nonce, auth, .. }) => (nonce, auth),
        Ok(other) => return Err(out_of_turn(daemon, &other)),
        Err(e) if e.downcast_ref::<Closed>().is_some() => anyhow::bail!(
            "--remote '{daemon}': the daemon closed the connection before its challenge (as many \
             connections from this address as it takes are in their handshake, or it is not \
             `nettune serve`); try again"
        ),
        Err(e) => return Err(e),
    };
    let server_nonce = proto::unhex(&server_nonce)
        .filter(|n| n.len() == NONCE_LEN)
        .ok_or_else(|| anyhow::anyhow!("--remote '{daemon}': the daemon sent a malformed nonce"))?;
    let secret = match (auth, remote.token.as_ref()) {
        (AuthKind::Token, Some(token)) => Some(token.secret()),
        (AuthKind::Token, None) => anyhow::bail!(
            "--remote '{daemon}': the daemon wants a token; give --token-file FILE holding its secret"
        ),
        // TLS checked this client's certificate, and the daemon's.
        (AuthKind::Certificate, _) if tls.is_some() => None,
        (AuthKind::Certificate, _) => anyhow::bail!(
            "--remote '{daemon}': the daemon asks for a TLS client certificate on a plain \
             connection; something else answers there, refusing to use it"
        ),
        (AuthKind::None, _) if !daemon.ip().is_loopback() => anyhow::bail!(
            "--remote '{daemon}': the daemon asks for no token, but it is not on loopback; \
             something else answers there, refusing to use it"
        ),
        (AuthKind::None, _) => None,
    };
    let mut nonce = [0u8; NONCE_LEN];
    crate::base::random::fill(&mut nonce).context("no random nonce")?;
    let mac = secret.map_or_else(String::new, |s| {
        proto::mac(s, proto::CLIENT_LABEL, &server_nonce, &nonce)
    });
    frame::write(
        &conn,
        &FromClient::Auth {
            nonce: proto::hex(&nonce),
            mac,
        },
    )
    .with_context(|| format!("--remote '{daemon}': cannot send the authentication"))?;
    let limits = match answer(&conn, daemon, tls, "authentication") {
        Ok(FromDaemon::Welcome { mac, limits }) => {
            if let Some(secret) = secret {
                if !proto::verify(secret, proto::DAEMON_LABEL, &nonce, &server_nonce, &mac) {
                    anyhow::bail!(
                        "--remote '{daemon}': the daemon did not prove it holds the token; \
                         refusing to send it any traffic"
                    );
                }
            }
            limits
        }
        Ok(other) => return Err(out_of_turn(daemon, &other)),
        Err(e) if e.downcast_ref::<Closed>().is_some() => anyhow::bail!(
            "--remote '{daemon}': the daemon closed the connection at authentication: the token \
             in --token-file is not the daemon's"
        ),
        Err(e) => return Err(e),
    };
    frame::write(&conn, &FromClient::Start(start.clone()))
        .with_context(|| format!("--remote '{daemon}': cannot send the request"))?;
    match answer(&conn, daemon, tls, "the request")? {
        FromDaemon::Started { test, port, detail } => Ok(RemoteTest {
            addr: SocketAddr::new(daemon.ip(), port),
            test,
            detail,
            limits,
            tls: tls.cloned(),
            conn,
        }),
        other => Err(out_of_turn(daemon, &other)),
    }
}

/// The TLS handshake with the daemon, every failure one line that says
/// what to do. A daemon without TLS answers in plain text: what it said
/// is the error.
fn secure(tcp: TcpStream, daemon: SocketAddr, tls: &ClientTls) -> anyhow::Result<Conn> {
    match Conn::connect(tcp, tls, Instant::now() + ANSWER_WAIT) {
        Ok(conn) => Ok(conn),
        Err(HandshakeError::Plain(tcp)) => {
            let plain = Conn::plain(tcp);
            let deadline = Instant::now() + ANSWER_WAIT;
            match frame::read::<FromDaemon>(&plain, MAX_MESSAGE, deadline, &|| false) {
                Ok(FromDaemon::Error { kind, message }) => {
                    Err(daemon_error(daemon, kind, &message))
                }
                _ => anyhow::bail!(
                    "--remote '{daemon}': the daemon does not speak TLS (it answered in plain \
                     text); drop --tls-ca, or start it with --tls-cert and --tls-key"
                ),
            }
        }
        Err(HandshakeError::Tls(e)) => {
            anyhow::bail!("--remote '{daemon}': {}", tls.explain("the daemon", &e))
        }
        Err(HandshakeError::Closed) => anyhow::bail!(
            "--remote '{daemon}': the daemon closed the connection in the TLS handshake; is it a \
             `nettune serve` of this version, with --tls-cert?"
        ),
        Err(e) => anyhow::bail!("--remote '{daemon}': {e}"),
    }
}

impl RemoteTest {
    /// The load is done: the daemon stops the server side (after a
    /// moment for what is still queued) and sends its report.
    pub fn finish(self) -> anyhow::Result<RemoteReport> {
        let daemon = self.conn.tcp().peer_addr().unwrap_or(self.addr);
        frame::write(&self.conn, &FromClient::Finish)
            .with_context(|| format!("--remote '{daemon}': cannot send 'finish'"))?;
        let deadline = Instant::now() + REPORT_WAIT;
        match frame::read::<FromDaemon>(&self.conn, MAX_REPORT, deadline, &|| false) {
            Ok(FromDaemon::Report(report)) => {
                self.conn.close();
                Ok(*report)
            }
            Ok(other) => Err(out_of_turn(daemon, &other)),
            Err(e) => Err(anyhow::anyhow!(
                "--remote '{daemon}': no report from the daemon ({e})"
            )),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the daemon closed the connection")]
struct Closed;

/// The daemon's `error` message as an error.
fn daemon_error(daemon: SocketAddr, kind: ErrorKind, message: &str) -> anyhow::Error {
    let what = match kind {
        ErrorKind::Upgrade => "versions differ",
        ErrorKind::Refused => "request refused",
        ErrorKind::Busy => "busy",
        ErrorKind::Failed => "the server side could not start",
    };
    anyhow::anyhow!("--remote '{daemon}': {what}: {message}")
}

/// The daemon's next message; an `error` message becomes an error.
fn answer(
    conn: &Conn,
    daemon: SocketAddr,
    tls: Option<&ClientTls>,
    awaiting: &str,
) -> anyhow::Result<FromDaemon> {
    let deadline = Instant::now() + ANSWER_WAIT;
    match frame::read::<FromDaemon>(conn, MAX_REPORT, deadline, &|| false) {
        Ok(FromDaemon::Error { kind, message }) => Err(daemon_error(daemon, kind, &message)),
        Ok(message) => Ok(message),
        Err(frame::FrameError::Closed) => Err(Closed.into()),
        // In TLS 1.3 the daemon judges this client's certificate after the
        // client's part of the handshake: its refusal comes here.
        Err(frame::FrameError::Tls(e)) => match tls {
            Some(tls) => anyhow::bail!("--remote '{daemon}': {}", tls.explain("the daemon", &e)),
            None => anyhow::bail!(
                "--remote '{daemon}': TLS: {}",
                crate::base::tls::explain(&e)
            ),
        },
        Err(e) => anyhow::bail!(
            "--remote '{daemon}': no answer to {awaiting} ({e}); is it `nettune serve`?"
        ),
    }
}

fn out_of_turn(daemon: SocketAddr, got: &FromDaemon) -> anyhow::Error {
    let what = match got {
        FromDaemon::Challenge { .. } => "challenge",
        FromDaemon::Welcome { .. } => "welcome",
        FromDaemon::Started { .. } => "started",
        FromDaemon::Report(_) => "report",
        FromDaemon::Error { .. } => "error",
    };
    anyhow::anyhow!("--remote '{daemon}': the daemon sent '{what}' out of turn")
}
