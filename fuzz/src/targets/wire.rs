//! Wire formats a peer controls, decoded as the receiving side does: the
//! serve control protocol (preamble and JSON messages both ways), the rr
//! hello, the stream test's header and control messages, and the frames
//! the AF_XDP sink parses. A message that decodes must encode and decode
//! to the same value.

use nettune::bench::rr::wire::{carries, seq_width, stamp, Hello, HELLO_LEN};
use nettune::bench::stream::wire::{Header, ToClient, ToServer, HEADER_LEN};
use nettune::serve::proto::{self, FromClient, FromDaemon, PREAMBLE_LEN};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Decode `body` as a `T`; if it is one, its JSON must read back the same.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(body: &[u8]) {
    if let Ok(message) = serde_json::from_slice::<T>(body) {
        let json = serde_json::to_vec(&message).expect("a message serialises");
        let back: T = serde_json::from_slice(&json).expect("and reads back");
        assert_eq!(back, message);
    }
}

/// Length-prefixed frames as `bench::frame::read` takes them off a
/// connection: 4-byte big-endian length, then that many bytes.
fn frames(mut data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 4 {
        let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len > max {
            break;
        }
        let Some(body) = data.get(4..4 + len) else {
            // A short body: decode what came, as a truncated stream.
            out.push(&data[4..]);
            break;
        };
        out.push(body);
        data = &data[4 + len..];
    }
    out
}

/// The serve control protocol: a preamble, then messages of either side.
pub fn serve_proto(data: &[u8]) {
    if let Some(preamble) = data.first_chunk::<PREAMBLE_LEN>() {
        if let Ok((version, flags)) = proto::parse_preamble(preamble) {
            assert_eq!(&proto::preamble(version, flags), preamble);
        }
    }
    let rest = data.get(PREAMBLE_LEN..).unwrap_or_default();
    for body in frames(rest, proto::MAX_REPORT) {
        round_trip::<FromClient>(body);
        round_trip::<FromDaemon>(body);
        if let Ok(text) = std::str::from_utf8(body) {
            if let Some(bytes) = proto::unhex(text) {
                assert_eq!(proto::hex(&bytes), text.to_ascii_lowercase());
            }
            let _ = proto::verify(b"token", proto::CLIENT_LABEL, b"a", b"b", text);
        }
    }
}

/// The rr hello and the sequence stamp of UDP transactions.
pub fn rr_wire(data: &[u8]) {
    if let Some(hello) = Hello::decode(data) {
        assert_eq!(data.len(), HELLO_LEN);
        assert_eq!(hello.encode()[..], data[..]);
        let width = seq_width(hello.request as usize, hello.reply as usize);
        assert!(width <= 4);
    }
    if data.len() >= 8 {
        let seq = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        let width = usize::from(data[4] % 5);
        let mut buf = data[5..].to_vec();
        if buf.len() >= width {
            stamp(&mut buf, seq, width);
            assert!(carries(&buf, seq, width));
        }
    }
}

/// The stream test's connection header and control messages.
pub fn stream_wire(data: &[u8]) {
    if let Some(bytes) = data.first_chunk::<HEADER_LEN>() {
        if let Ok(header) = Header::decode(bytes) {
            assert_eq!(Header::decode(&header.encode()), Ok(header));
        }
    }
    let rest = data.get(HEADER_LEN..).unwrap_or_default();
    for body in frames(rest, 16 << 20) {
        round_trip::<ToServer>(body);
        round_trip::<ToClient>(body);
    }
}

/// A frame the AF_XDP sink received.
pub fn xsk_frame(data: &[u8]) {
    if let Some(headers) = nettune::bench::xsk::packet::parse(data) {
        assert!(headers.payload.len() <= data.len());
    }
}
