//! What a `bench stream` and its `stream-server` say to each other.
//!
//! Every TCP connection to the server begins with a 20-byte header:
//!
//! ```text
//! magic "NTst" (4) | version u16 BE | kind u8 (1 control, 2 data)
//! | flags u8 (bit 0: TLS follows; control only) | stream index u32 BE
//! | test id u64 BE
//! ```
//!
//! A control connection whose header asks for TLS is TLS 1.3 from the
//! next byte on (a server that does not speak TLS, or that wants it and
//! was not asked for it, answers [`ToClient::Refused`] in plain text
//! instead). Data connections are always plain: TLS would measure the
//! cipher, not the path.
//!
//! A test is one control connection and N data connections. On the control
//! connection (test id 0 in its header) the client sends [`ToServer::Params`];
//! the server answers [`ToClient::Accepted`] with a random test id (or
//! [`ToClient::Refused`] with the reason). The client opens the data
//! connections, each with that id and its index; once all are in, the
//! server says [`ToClient::Ready`] and the bytes flow: client to server,
//! or server to client with `reverse`. The sender ends each data
//! connection with a FIN (shutdown) and the receiver reads to the end, so
//! its count is exact; with `reverse` the client first says
//! [`ToServer::Stop`]. Then the server sends [`ToClient::Results`] (its
//! side of every stream) and closes. Control messages are length-prefixed
//! JSON ([`crate::bench::frame`]), at most [`MAX_MESSAGE`] bytes.

use serde::{Deserialize, Serialize};

use super::server_report::TestReport;
use super::ZeroCopy;

pub const MAGIC: [u8; 4] = *b"NTst";
/// The protocol's version; a server refuses a header with another one.
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 20;
/// The largest control message either side reads.
pub const MAX_MESSAGE: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Control,
    Data,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub stream: u32,
    pub test: u64,
    /// A control connection that turns TLS after this header.
    pub tls: bool,
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadHeader {
    #[error("not a nettune stream connection (no 'NTst' magic)")]
    Magic,
    #[error("stream protocol version {0}, this server speaks {VERSION}: run the same nettune version on both sides")]
    Version(u16),
    #[error("unknown connection kind {0}")]
    Kind(u8),
}

impl Header {
    pub fn control() -> Header {
        Header {
            kind: Kind::Control,
            stream: 0,
            test: 0,
            tls: false,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_be_bytes());
        out[6] = match self.kind {
            Kind::Control => 1,
            Kind::Data => 2,
        };
        out[7] = u8::from(self.tls);
        out[8..12].copy_from_slice(&self.stream.to_be_bytes());
        out[12..20].copy_from_slice(&self.test.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Header, BadHeader> {
        if bytes[..4] != MAGIC {
            return Err(BadHeader::Magic);
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(BadHeader::Version(version));
        }
        let kind = match bytes[6] {
            1 => Kind::Control,
            2 => Kind::Data,
            other => return Err(BadHeader::Kind(other)),
        };
        let mut stream = [0u8; 4];
        stream.copy_from_slice(&bytes[8..12]);
        let mut test = [0u8; 8];
        test.copy_from_slice(&bytes[12..20]);
        Ok(Header {
            kind,
            stream: u32::from_be_bytes(stream),
            test: u64::from_be_bytes(test),
            tls: bytes[7] & 1 != 0,
        })
    }
}

/// What the client asks for: the test's shape, as the server needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub streams: u32,
    /// The server sends, the client receives.
    pub reverse: bool,
    /// Warm-up plus measured time: how long the sender sends.
    pub seconds: f64,
    /// Bytes per write (sender) or read (receiver).
    pub size: usize,
    /// SO_SNDBUF/SO_RCVBUF for the server's sockets; `None`: autotuning.
    pub window: Option<u32>,
    /// Reverse: SO_MAX_PACING_RATE per stream, bits per second.
    pub pace: Option<u64>,
    /// TCP_CONGESTION for the server's sockets.
    pub cc: Option<String>,
    /// Reverse: how the server sends.
    pub zerocopy: Option<ZeroCopy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToServer {
    Params(Params),
    /// Reverse: the client's time is up; stop sending.
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToClient {
    Accepted { test: u64 },
    Refused { error: String },
    Ready,
    Results(Box<TestReport>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_strangers_are_named() {
        let header = Header {
            kind: Kind::Data,
            stream: 3,
            test: 0xdead_beef_0bad_f00d,
            tls: false,
        };
        assert_eq!(Header::decode(&header.encode()), Ok(header));
        let control = Header {
            tls: true,
            ..Header::control()
        };
        assert_eq!(Header::decode(&control.encode()), Ok(control));
        assert_eq!(control.encode()[7], 1);
        let mut bytes = header.encode();
        bytes[5] = 9;
        assert_eq!(Header::decode(&bytes), Err(BadHeader::Version(9)));
        let mut get = [0u8; HEADER_LEN];
        get[..4].copy_from_slice(b"GET ");
        assert_eq!(Header::decode(&get), Err(BadHeader::Magic));
        let mut bytes = header.encode();
        bytes[6] = 7;
        assert_eq!(Header::decode(&bytes), Err(BadHeader::Kind(7)));
    }
}
