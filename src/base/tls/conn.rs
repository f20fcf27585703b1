//! A control connection: plain TCP, or TLS 1.3 over it. Used through a
//! shared reference as a `TcpStream` is (`&Conn` reads and writes), so
//! one thread may watch it while another writes; a TLS connection's state
//! is behind a lock held for one read or one write.
//!
//! Reads block at most the socket's read timeout (set on [`Conn::tcp`]),
//! and a record split across reads is kept whole inside rustls, so a
//! caller that loops on a deadline (`bench::frame`) works the same over
//! both. The handshake has a deadline of its own.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{explain, ClientTls, ServerTls};

/// The longest a handshake step blocks before it looks at its deadline
/// and cancel flag again.
const STEP: Duration = Duration::from_millis(20);

/// A control connection; see the module documentation.
pub struct Conn {
    tcp: TcpStream,
    tls: Option<Mutex<rustls::Connection>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("tcp", &self.tcp)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Why a TLS handshake did not complete.
#[derive(Debug)]
pub enum HandshakeError {
    /// Not complete before the deadline.
    TimedOut,
    /// The caller's cancel flag was set.
    Cancelled,
    /// The peer closed the connection.
    Closed,
    /// The peer answered in plain text, not TLS: it does not speak TLS
    /// here. The connection is handed back so the caller can read what
    /// it said (a protocol's own error message).
    Plain(TcpStream),
    /// TLS itself failed: a certificate refused, an alert from the peer.
    Tls(rustls::Error),
    Io(io::Error),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::TimedOut => write!(f, "no TLS handshake within the time allowed"),
            HandshakeError::Cancelled => write!(f, "stopped during the TLS handshake"),
            HandshakeError::Closed => {
                write!(f, "the peer closed the connection during the TLS handshake")
            }
            HandshakeError::Plain(_) => write!(f, "the peer answered in plain text, not TLS"),
            HandshakeError::Tls(e) => write!(f, "TLS handshake failed: {}", explain(e)),
            HandshakeError::Io(e) => write!(f, "TLS handshake failed: {e}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// The rustls error inside an I/O error from [`Conn`], if that is what it
/// is (a certificate refused after the handshake, in TLS 1.3 a client's
/// certificate is checked after the client thinks it is done).
pub fn tls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

impl Conn {
    /// A plain TCP connection.
    pub fn plain(tcp: TcpStream) -> Conn {
        Conn { tcp, tls: None }
    }

    /// Run the server side of a TLS handshake on `tcp` before `deadline`.
    pub fn accept(
        tcp: TcpStream,
        tls: &ServerTls,
        deadline: Instant,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Conn, HandshakeError> {
        let session = rustls::ServerConnection::new(tls.config()).map_err(HandshakeError::Tls)?;
        let mut session = rustls::Connection::Server(session);
        match handshake(&mut session, &tcp, deadline, cancel, false) {
            Ok(()) => Ok(Conn {
                tcp,
                tls: Some(Mutex::new(session)),
            }),
            Err(Step::Plain) => Err(HandshakeError::Plain(tcp)),
            Err(Step::Failed(e)) => Err(e),
        }
    }

    /// Run the client side of a TLS handshake on `tcp` (connected to the
    /// server) before `deadline`. A server that answers in plain text
    /// gives [`HandshakeError::Plain`].
    pub fn connect(
        tcp: TcpStream,
        tls: &ClientTls,
        deadline: Instant,
    ) -> Result<Conn, HandshakeError> {
        let ip = tcp.peer_addr().map_err(HandshakeError::Io)?.ip();
        let session = rustls::ClientConnection::new(tls.config(), tls.server_name(ip))
            .map_err(HandshakeError::Tls)?;
        let mut session = rustls::Connection::Client(session);
        match handshake(&mut session, &tcp, deadline, &|| false, true) {
            Ok(()) => Ok(Conn {
                tcp,
                tls: Some(Mutex::new(session)),
            }),
            Err(Step::Plain) => Err(HandshakeError::Plain(tcp)),
            Err(Step::Failed(e)) => Err(e),
        }
    }

    /// The TCP connection underneath: addresses, timeouts, options.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The TCP connection, for a plain one that is to become TLS (a TLS
    /// session's state is dropped).
    pub fn into_tcp(self) -> TcpStream {
        self.tcp
    }

    /// Say goodbye before closing (TLS close_notify), so the peer tells a
    /// clean end from a cut connection; best effort, nothing for plain TCP.
    pub fn close(&self) {
        if let Some(mut session) = self.session() {
            session.send_close_notify();
            let _ = flush(&mut session, &self.tcp);
        }
    }

    fn session(&self) -> Option<MutexGuard<'_, rustls::Connection>> {
        self.tls
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Whether a read would find something at once, waiting up to
    /// `timeout` for the socket: bytes rustls already holds count.
    pub fn wait_readable(&self, timeout: Duration) -> bool {
        if let Some(mut session) = self.session() {
            match session.process_new_packets() {
                Ok(state) if state.plaintext_bytes_to_read() > 0 || state.peer_has_closed() => {
                    return true
                }
                Ok(_) => {}
                // Let the read report it.
                Err(_) => return true,
            }
        }
        poll_readable(&self.tcp, timeout)
    }
}

impl Read for &Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(mut session) = self.session() else {
            return (&self.tcp).read(buf);
        };
        let mut sock = &self.tcp;
        loop {
            match session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // Nothing decrypted yet: read from the socket (this blocks up
            // to its read timeout and reports that as WouldBlock).
            session.read_tls(&mut sock)?;
            if let Err(e) = session.process_new_packets() {
                // Send the alert that says why, as a courtesy.
                let _ = session.write_tls(&mut sock);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            flush(&mut session, sock)?;
        }
    }
}

impl Write for &Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(mut session) = self.session() else {
            return (&self.tcp).write(buf);
        };
        let n = session.writer().write(buf)?;
        flush(&mut session, &self.tcp)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.session() {
            Some(mut session) => flush(&mut session, &self.tcp),
            None => (&self.tcp).flush(),
        }
    }
}

/// Send what rustls has queued.
fn flush(session: &mut rustls::Connection, mut sock: &TcpStream) -> io::Result<()> {
    while session.wants_write() {
        if session.write_tls(&mut sock)? == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

enum Step {
    /// The peer's first bytes are not a TLS record.
    Plain,
    Failed(HandshakeError),
}

impl From<HandshakeError> for Step {
    fn from(e: HandshakeError) -> Step {
        Step::Failed(e)
    }
}

/// Drive the handshake to its end. `sniff`: look at the peer's first byte
/// before handing it to rustls, and stop if it cannot begin a TLS record
/// (content types 20-23, RFC 8446 section 5.1).
fn handshake(
    session: &mut rustls::Connection,
    tcp: &TcpStream,
    deadline: Instant,
    cancel: &dyn Fn() -> bool,
    mut sniff: bool,
) -> Result<(), Step> {
    let mut sock = tcp;
    while session.is_handshaking() {
        flush(session, tcp).map_err(io_failure)?;
        if !session.is_handshaking() {
            break;
        }
        if cancel() {
            return Err(HandshakeError::Cancelled.into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HandshakeError::TimedOut.into());
        }
        if !poll_readable(tcp, left.min(STEP)) {
            continue;
        }
        if sniff {
            match peek_byte(tcp) {
                Ok(None) => return Err(HandshakeError::Closed.into()),
                Ok(Some(20..=23)) => sniff = false,
                Ok(Some(_)) => return Err(Step::Plain),
                Err(e) => return Err(io_failure(e)),
            }
        }
        match session.read_tls(&mut sock) {
            Ok(0) => return Err(HandshakeError::Closed.into()),
            Ok(_) => {}
            Err(e) if try_again(&e) => {}
            Err(e) => return Err(io_failure(e)),
        }
        if let Err(e) = session.process_new_packets() {
            let _ = session.write_tls(&mut sock);
            return Err(HandshakeError::Tls(e).into());
        }
    }
    flush(session, tcp).map_err(io_failure)?;
    Ok(())
}

/// A read that ended for its timeout (or a signal), not for the
/// connection: try again, after looking at the deadline.
pub fn try_again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn io_failure(e: io::Error) -> Step {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => Step::Failed(HandshakeError::Closed),
        _ => Step::Failed(HandshakeError::Io(e)),
    }
}

/// The next byte the peer sent, left in the socket; `None` at its end.
fn peek_byte(tcp: &TcpStream) -> io::Result<Option<u8>> {
    let mut byte = 0u8;
    loop {
        // SAFETY: one byte of valid memory; MSG_PEEK leaves it queued.
        let n = unsafe {
            libc::recv(
                tcp.as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        match n {
            1 => return Ok(Some(byte)),
            0 => return Ok(None),
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
}

/// Wait until `tcp` is readable (or closed), up to `timeout`.
fn poll_readable(tcp: &TcpStream, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: tcp.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
}
