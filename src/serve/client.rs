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
//! // ... run `bench rr` (or any load) against `test.addr` ...
//! let remote = test.finish()?; // the server side's report: the receiver's view
//! # Ok(()) }
//! ```

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::proto::{
    self, AuthKind, ErrorKind, FromClient, FromDaemon, Limits, RemoteReport, Start, MAX_REPORT,
    NONCE_LEN,
};
use super::token::Token;
use crate::bench::frame;

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
    conn: TcpStream,
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
    let conn = TcpStream::connect_timeout(&daemon, ANSWER_WAIT).with_context(|| {
        format!("--remote '{daemon}': cannot connect; is `nettune serve` listening there?")
    })?;
    let _ = conn.set_nodelay(true);
    conn.set_write_timeout(Some(ANSWER_WAIT))
        .context("cannot set a send timeout")?;
    {
        use std::io::Write as _;
        (&conn)
            .write_all(&proto::preamble(proto::VERSION))
            .with_context(|| format!("--remote '{daemon}': cannot send the preamble"))?;
    }
    let (server_nonce, auth) = match answer(&conn, daemon, "the challenge")? {
        FromDaemon::Challenge { nonce, auth, .. } => (nonce, auth),
        other => return Err(out_of_turn(daemon, &other)),
    };
    let server_nonce = proto::unhex(&server_nonce)
        .filter(|n| n.len() == NONCE_LEN)
        .ok_or_else(|| anyhow::anyhow!("--remote '{daemon}': the daemon sent a malformed nonce"))?;
    let secret = match (auth, token) {
        (AuthKind::Token, Some(token)) => Some(token.secret()),
        (AuthKind::Token, None) => anyhow::bail!(
            "--remote '{daemon}': the daemon wants a token; give --token-file FILE holding its secret"
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
    let limits = match answer(&conn, daemon, "authentication") {
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
    match answer(&conn, daemon, "the request")? {
        FromDaemon::Started { test, port, detail } => Ok(RemoteTest {
            addr: SocketAddr::new(daemon.ip(), port),
            test,
            detail,
            limits,
            conn,
        }),
        other => Err(out_of_turn(daemon, &other)),
    }
}

impl RemoteTest {
    /// The load is done: the daemon stops the server side (after a
    /// moment for what is still queued) and sends its report.
    pub fn finish(self) -> anyhow::Result<RemoteReport> {
        let daemon = self.conn.peer_addr().unwrap_or(self.addr);
        frame::write(&self.conn, &FromClient::Finish)
            .with_context(|| format!("--remote '{daemon}': cannot send 'finish'"))?;
        let deadline = Instant::now() + REPORT_WAIT;
        match frame::read::<FromDaemon>(&self.conn, MAX_REPORT, deadline, &|| false) {
            Ok(FromDaemon::Report(report)) => Ok(*report),
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

/// The daemon's next message; an `error` message becomes an error.
fn answer(conn: &TcpStream, daemon: SocketAddr, awaiting: &str) -> anyhow::Result<FromDaemon> {
    let deadline = Instant::now() + ANSWER_WAIT;
    match frame::read::<FromDaemon>(conn, MAX_REPORT, deadline, &|| false) {
        Ok(FromDaemon::Error { kind, message }) => {
            let what = match kind {
                ErrorKind::Upgrade => "versions differ",
                ErrorKind::Refused => "request refused",
                ErrorKind::Busy => "busy",
                ErrorKind::Failed => "the server side could not start",
            };
            anyhow::bail!("--remote '{daemon}': {what}: {message}")
        }
        Ok(message) => Ok(message),
        Err(frame::FrameError::Closed) => Err(Closed.into()),
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
