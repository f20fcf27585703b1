//! A server's connection on a non-blocking socket, plain or TLS, for an
//! event loop (the Prometheus exporter's): reads and writes never block,
//! and the TLS handshake runs inside the first reads. [`Conn`](super::Conn)
//! is the blocking counterpart, with deadlines, for control connections.
//!
//! TLS output that the socket did not take at once stays inside rustls:
//! [`Stream::wants_write`] says so, and the loop waits for the socket to
//! be writable and calls [`Stream::flush`].

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

use super::ServerTls;

/// A connection a server accepted; see the module documentation.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

/// A TLS server session over its socket.
pub struct TlsStream {
    tcp: TcpStream,
    session: rustls::ServerConnection,
}

impl Stream {
    /// `tcp` as is, or the server side of a TLS session over it (the
    /// handshake happens as the client's bytes are read).
    pub fn new(tcp: TcpStream, tls: Option<&ServerTls>) -> io::Result<Stream> {
        match tls {
            None => Ok(Stream::Plain(tcp)),
            Some(tls) => {
                let session = rustls::ServerConnection::new(tls.config())
                    .map_err(|e| io::Error::other(e.to_string()))?;
                Ok(Stream::Tls(Box::new(TlsStream { tcp, session })))
            }
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(t) => &t.tcp,
        }
    }

    /// Decrypted bytes into `buf`: `Ok(0)` at the end (the peer closed),
    /// `WouldBlock` when nothing is there yet (a handshake step included),
    /// `InvalidData` when TLS failed (the alert saying why was sent).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Stream::Plain(tcp) => return tcp.read(buf),
            Stream::Tls(t) => t,
        };
        loop {
            match t.session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without close_notify: an end all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match t.session.read_tls(&mut t.tcp) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = t.session.process_new_packets() {
                // Send the alert that says why (no client certificate,
                // one not signed by the CA), best effort.
                let _ = t.session.write_tls(&mut t.tcp);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Handshake messages to send back.
            t.flush_tls()?;
        }
    }

    /// Take what the connection takes of `bufs` (all of it into rustls,
    /// for TLS, once earlier output is out).
    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let t = match self {
            Stream::Plain(tcp) => return tcp.write_vectored(bufs),
            Stream::Tls(t) => t,
        };
        t.flush_tls()?;
        if t.session.wants_write() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = t.session.writer().write_vectored(bufs)?;
        t.flush_tls()?;
        Ok(n)
    }

    /// TLS output is waiting for the socket.
    pub fn wants_write(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.session.wants_write(),
        }
    }

    /// Send the TLS output the socket takes now.
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.flush_tls(),
        }
    }

    /// End the sending side: TLS close_notify first, so the peer tells a
    /// whole answer from a cut one.
    pub fn shutdown_write(&mut self) {
        if let Stream::Tls(t) = self {
            t.session.send_close_notify();
            let _ = t.flush_tls();
        }
        let _ = self.tcp().shutdown(Shutdown::Write);
    }
}

impl TlsStream {
    /// Write queued TLS records until done or the socket is full.
    fn flush_tls(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}
