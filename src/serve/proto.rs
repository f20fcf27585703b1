//! The control protocol between a client and `nettune serve`, version 1
//! (docs/serve.md describes it for other implementations).
//!
//! A client opens one TCP connection per test and sends an 8-byte preamble:
//! `"NTsv"`, its protocol version (u16, big-endian), its flags (u16,
//! big-endian; bit 0 [`FLAG_TLS`]: a TLS 1.3 handshake follows, and
//! everything after it is inside TLS). Then both sides exchange
//! length-prefixed JSON messages ([`crate::bench::frame`]), each an object
//! whose `type` names it:
//!
//! 0. daemon, in plain text, instead of the TLS handshake or the
//!    challenge: `error` of kind `upgrade` when the client's version is one
//!    it no longer speaks, or of kind `refused` when the client asks for
//!    TLS and the daemon has none, or the reverse;
//! 1. daemon: `challenge` (its version, a random nonce, how the client
//!    authenticates);
//! 2. client: `auth` (its own nonce, and HMAC-SHA256 over both nonces
//!    keyed with the shared token); a wrong MAC closes the connection with
//!    no answer;
//! 3. daemon: `welcome` (its own MAC, proving it holds the token too, and
//!    its limits);
//! 4. client: `start` (the server side and how long); daemon: `started`
//!    (the port, on the address the client reached) or `error`;
//! 5. client: `finish` when its load is done; daemon: `report` (the server
//!    side's report: the receiver's view). Closing the connection instead
//!    stops the server side.
//!
//! The preamble and the `error` message never change shape, so any client
//! can tell the user to upgrade. A client of before the flags sends them
//! as zero: plain text, as before.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::bench::cpu::CpuUsage;
use crate::bench::engine::{Engine, Params};
use crate::bench::registry;

pub const MAGIC: [u8; 4] = *b"NTsv";
/// The version this build speaks.
pub const VERSION: u16 = 1;
/// The oldest client version this daemon serves.
pub const MIN_VERSION: u16 = 1;
pub const PREAMBLE_LEN: usize = 8;
/// Preamble flag: TLS follows the preamble.
pub const FLAG_TLS: u16 = 1;
/// The largest message a daemon reads.
pub const MAX_MESSAGE: usize = 16 * 1024;
/// The largest message a client reads (a report with many intervals).
pub const MAX_REPORT: usize = 16 << 20;
/// Bytes of each nonce.
pub const NONCE_LEN: usize = 32;

pub fn preamble(version: u16, flags: u16) -> [u8; PREAMBLE_LEN] {
    let mut out = [0u8; PREAMBLE_LEN];
    out[..4].copy_from_slice(&MAGIC);
    out[4..6].copy_from_slice(&version.to_be_bytes());
    out[6..8].copy_from_slice(&flags.to_be_bytes());
    out
}

/// The client's version and flags from its preamble, or why it is not one.
pub fn parse_preamble(bytes: &[u8; PREAMBLE_LEN]) -> Result<(u16, u16), String> {
    if bytes[..4] != MAGIC {
        return Err("not a nettune client (no 'NTsv' preamble)".to_string());
    }
    Ok((
        u16::from_be_bytes([bytes[4], bytes[5]]),
        u16::from_be_bytes([bytes[6], bytes[7]]),
    ))
}

/// How the daemon authenticates clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthKind {
    /// HMAC-SHA256 over both nonces with the shared token.
    Token,
    /// The client's TLS certificate, checked in the handshake (no token).
    Certificate,
    /// None: the daemon listens on loopback only.
    None,
}

/// What a daemon allows each test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Tests running at once, all clients together.
    pub max_tests: u32,
    /// The longest a server side runs, seconds.
    pub max_seconds: f64,
    /// The most a server side sends, bits per second (`stream --reverse`),
    /// and the largest rr reply.
    pub max_rate_bits_per_second: u64,
    pub max_reply_bytes: u32,
    /// Threads per server side.
    pub max_threads: u32,
}

/// The server side a client asks for: `bench` names it (a server side of
/// [`crate::bench::registry`]: `udp-sink`, `rr-server`, `http-server`,
/// `stream-server`), and the other fields are its parameters, which the
/// engine checks (`rr-server` takes `threads` and `max_reply`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "AnySide")]
pub struct ServerSide {
    pub bench: String,
    #[serde(flatten)]
    pub params: Params,
}

/// A `side` as it arrives, before its engine has checked it.
#[derive(Deserialize)]
struct AnySide {
    bench: String,
    #[serde(flatten)]
    params: Params,
}

impl TryFrom<AnySide> for ServerSide {
    type Error = String;

    fn try_from(side: AnySide) -> Result<ServerSide, String> {
        let engine = registry::by_server(&side.bench).ok_or_else(|| {
            format!(
                "unknown variant `{}`, expected one of `{}`",
                side.bench,
                registry::servers().join("`, `")
            )
        })?;
        engine.check_params(&side.params)?;
        Ok(ServerSide {
            bench: side.bench,
            params: side.params,
        })
    }
}

impl ServerSide {
    /// `engine`'s server side with these parameters.
    pub fn new(engine: &dyn Engine, params: Params) -> ServerSide {
        ServerSide {
            bench: engine.server().to_string(),
            params,
        }
    }

    /// `engine`'s server side with its typed parameters.
    pub fn of<T: Serialize>(engine: &dyn Engine, params: &T) -> ServerSide {
        ServerSide::new(engine, crate::bench::engine::params(params))
    }

    pub fn name(&self) -> &str {
        &self.bench
    }

    /// Its engine (every `ServerSide` read from the wire has one).
    pub fn engine(&self) -> Option<&'static dyn Engine> {
        registry::by_server(&self.bench)
    }
}

/// A client's request to start a server side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub side: ServerSide,
    /// How long the server side runs at most, seconds (the client's
    /// warm-up, duration and a margin).
    pub seconds: f64,
    /// Server thread i on the i-th CPU of this list of the daemon's host.
    #[serde(default)]
    pub pin: Vec<u32>,
}

/// The server side's report, as the daemon sends it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteReport {
    pub test: u64,
    pub bench: String,
    /// `finished` (the client said so), `client-gone`, `duration` (the
    /// server side's time ran out first), `stopped` (the daemon ended) or
    /// `failed`.
    pub ended: String,
    pub seconds: f64,
    /// The engine's own report (`bench udp-sink --json` and the like).
    pub report: Option<serde_json::Value>,
    /// The daemon host's per-CPU time over the test.
    pub host_cpu: Option<CpuUsage>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The two sides' versions differ too much.
    Upgrade,
    /// The request is out of bounds or malformed.
    Refused,
    /// `max_tests` are running.
    Busy,
    /// The server side could not start.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromClient {
    Auth { nonce: String, mac: String },
    Start(Start),
    Finish,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromDaemon {
    Challenge {
        version: u16,
        nonce: String,
        auth: AuthKind,
    },
    Welcome {
        mac: String,
        limits: Limits,
    },
    Started {
        test: u64,
        port: u16,
        detail: String,
    },
    Report(Box<RemoteReport>),
    Error {
        kind: ErrorKind,
        message: String,
    },
}

/// What each side's MAC covers, so one side's MAC is never the other's.
pub const CLIENT_LABEL: &str = "nettune-serve v1 client";
pub const DAEMON_LABEL: &str = "nettune-serve v1 daemon";

/// HMAC-SHA256(token, label || first || second), hex.
pub fn mac(token: &[u8], label: &str, first: &[u8], second: &[u8]) -> String {
    hex(&mac_bytes(token, label, first, second))
}

fn mac_bytes(token: &[u8], label: &str, first: &[u8], second: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token).expect("HMAC takes a key of any size");
    m.update(label.as_bytes());
    m.update(first);
    m.update(second);
    m.finalize().into_bytes().to_vec()
}

/// Whether `given` (hex) is the MAC, compared in constant time.
pub fn verify(token: &[u8], label: &str, first: &[u8], second: &[u8], given: &str) -> bool {
    let Some(given) = unhex(given) else {
        return false;
    };
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token).expect("HMAC takes a key of any size");
    m.update(label.as_bytes());
    m.update(first);
    m.update(second);
    m.verify_slice(&given).is_ok()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Option<Vec<u8>> {
    // Hex digits only: `from_str_radix` would also take a sign ("+f").
    if text.len() % 2 != 0 || text.len() > 256 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_verify_only_with_the_same_token_label_and_nonces() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let m = mac(b"secret-token-123", CLIENT_LABEL, &a, &b);
        assert_eq!(m.len(), 64);
        assert!(verify(b"secret-token-123", CLIENT_LABEL, &a, &b, &m));
        assert!(!verify(b"secret-token-124", CLIENT_LABEL, &a, &b, &m));
        assert!(!verify(b"secret-token-123", DAEMON_LABEL, &a, &b, &m));
        assert!(!verify(b"secret-token-123", CLIENT_LABEL, &b, &a, &m));
        assert!(!verify(b"secret-token-123", CLIENT_LABEL, &a, &b, "zz"));
        assert!(!verify(b"secret-token-123", CLIENT_LABEL, &a, &b, ""));
    }

    #[test]
    fn the_preamble_and_messages_keep_their_shape() {
        assert_eq!(parse_preamble(&preamble(7, 0)), Ok((7, 0)));
        // Clients of before the flags sent two zero bytes there.
        assert_eq!(&preamble(1, 0), b"NTsv\x00\x01\x00\x00");
        assert_eq!(parse_preamble(&preamble(1, FLAG_TLS)), Ok((1, FLAG_TLS)));
        assert!(parse_preamble(b"GET / HT").is_err());
        let error = FromDaemon::Error {
            kind: ErrorKind::Upgrade,
            message: "upgrade".into(),
        };
        let text = serde_json::to_string(&error).expect("json");
        assert_eq!(
            text,
            r#"{"type":"error","kind":"upgrade","message":"upgrade"}"#
        );
        let mut params = Params::new();
        params.insert("threads".into(), 1.into());
        params.insert("max_reply".into(), 64.into());
        let start = FromClient::Start(Start {
            side: ServerSide::new(&crate::bench::rr::entry::Rr, params),
            seconds: 5.0,
            pin: vec![],
        });
        let text = serde_json::to_string(&start).expect("json");
        assert!(
            text.contains(r#""side":{"bench":"rr-server","threads":1,"max_reply":64}"#),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<FromClient>(&text).expect("back"),
            start
        );
        assert_eq!(unhex(&hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
    }

    #[test]
    fn a_side_no_engine_knows_or_with_wrong_parameters_is_malformed() {
        for text in [
            r#"{"bench":"iperf3"}"#,
            r#"{"bench":"rr-server","threads":1}"#,
            r#"{"bench":"udp-sink","threads":"x","reuseport":false}"#,
        ] {
            assert!(serde_json::from_str::<ServerSide>(text).is_err(), "{text}");
        }
        let side: ServerSide = serde_json::from_str(r#"{"bench":"stream-server"}"#).expect("ok");
        assert_eq!(side.name(), "stream-server");
        let side: ServerSide =
            serde_json::from_str(r#"{"bench":"udp-sink","threads":2,"reuseport":true}"#)
                .expect("rcvbuf may be left out");
        assert_eq!(side.name(), "udp-sink");
    }
}
