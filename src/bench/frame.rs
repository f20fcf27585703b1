//! Control messages between two nettune processes (a `bench stream` and
//! its `stream-server`, a client and `nettune serve`): a 4-byte big-endian
//! length, then that many bytes of JSON, over a [`Conn`] (plain TCP or
//! TLS).
//!
//! Reads are bounded in size and in time: a whole message must arrive
//! before a deadline, not merely a byte now and then, so a peer that
//! trickles one byte a second (slowloris) cannot hold a reader, and a
//! length above the reader's limit is refused before anything is read.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::base::stop::POLL;
pub use crate::base::tls::Conn;

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the peer closed the connection")]
    Closed,
    #[error("no complete message within the time allowed")]
    TimedOut,
    #[error("stopped while waiting for a message")]
    Cancelled,
    #[error("a message of {0} bytes is more than the {1} allowed")]
    TooLarge(usize, usize),
    #[error("a malformed message: {0}")]
    Malformed(String),
    /// TLS refused the peer or was refused by it (after the handshake, in
    /// TLS 1.3 a client's certificate is judged at its first message).
    #[error("TLS: {}", crate::base::tls::explain(.0))]
    Tls(rustls::Error),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Send one message.
pub fn write<T: Serialize>(mut stream: &Conn, message: &T) -> anyhow::Result<()> {
    let body = serde_json::to_vec(message)?;
    let len = u32::try_from(body.len())
        .map_err(|_| anyhow::anyhow!("a control message of {} bytes is too large", body.len()))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;
    stream.flush()?;
    Ok(())
}

/// Read one message of at most `max` bytes, complete before `deadline`;
/// `cancel` is looked at every [`POLL`] while waiting.
pub fn read<T: DeserializeOwned>(
    stream: &Conn,
    max: usize,
    deadline: Instant,
    cancel: &dyn Fn() -> bool,
) -> Result<T, FrameError> {
    let mut len = [0u8; 4];
    read_exact_by(stream, &mut len, deadline, cancel)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len, max));
    }
    let mut body = vec![0u8; len];
    read_exact_by(stream, &mut body, deadline, cancel)?;
    serde_json::from_slice(&body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Fill `buf` before `deadline`, or fail. The socket's read timeout is
/// left at [`POLL`] or less.
pub fn read_exact_by(
    mut stream: &Conn,
    buf: &mut [u8],
    deadline: Instant,
    cancel: &dyn Fn() -> bool,
) -> Result<(), FrameError> {
    let mut got = 0;
    while got < buf.len() {
        if cancel() {
            return Err(FrameError::Cancelled);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(FrameError::TimedOut);
        }
        // A zero timeout would mean "block forever".
        stream
            .tcp()
            .set_read_timeout(Some(left.min(POLL).max(Duration::from_millis(1))))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(FrameError::Closed),
            Ok(n) => got += n,
            Err(e) if crate::base::tls::conn::try_again(&e) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
                ) =>
            {
                return Err(FrameError::Closed)
            }
            Err(e) => {
                return Err(match crate::base::tls::conn::tls_error(&e) {
                    Some(tls) => FrameError::Tls(tls.clone()),
                    None => FrameError::Io(e),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (Conn, Conn) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (Conn::plain(client), Conn::plain(server))
    }

    #[test]
    fn a_message_goes_through_and_limits_hold() {
        let (a, b) = pair();
        write(&a, &vec![1u32, 2, 3]).expect("write");
        let soon = Instant::now() + Duration::from_secs(2);
        let got: Vec<u32> = read(&b, 1024, soon, &|| false).expect("read");
        assert_eq!(got, [1, 2, 3]);

        // Too large: refused from its length alone.
        write(&a, &"x".repeat(100)).expect("write");
        let err = read::<String>(&b, 10, soon, &|| false).expect_err("too large");
        assert!(matches!(err, FrameError::TooLarge(102, 10)), "{err}");
    }

    #[test]
    fn a_trickle_times_out_and_garbage_is_malformed() {
        let (a, b) = pair();
        // Half a length prefix, then nothing: the deadline ends the read.
        (&a).write_all(&[0, 0]).expect("write");
        let started = Instant::now();
        let err =
            read::<u32>(&b, 64, started + Duration::from_millis(200), &|| false).expect_err("slow");
        assert!(matches!(err, FrameError::TimedOut), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));

        let (a, b) = pair();
        (&a).write_all(&[0, 0, 0, 3, b'{', b'{', b'{'])
            .expect("write");
        let err = read::<u32>(&b, 64, Instant::now() + Duration::from_secs(2), &|| false)
            .expect_err("garbage");
        assert!(matches!(err, FrameError::Malformed(_)), "{err}");
        drop(a);
        let err = read::<u32>(&b, 64, Instant::now() + Duration::from_secs(2), &|| false)
            .expect_err("closed");
        assert!(matches!(err, FrameError::Closed), "{err}");
    }
}
