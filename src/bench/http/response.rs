//! The load generator's response reader: enough HTTP/1.1 to count status
//! codes and find where each response ends, across reads and with several
//! pipelined responses in one read. Bodies are framed by Content-Length or
//! chunked transfer coding (skipped, never stored); a response with
//! neither (read until the connection closes) is refused as unsupported.

/// Longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// One complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    pub status: u16,
    /// The server will close the connection after it.
    pub close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// In the chunk-size line: the size so far, whether a digit was seen,
    /// whether in an extension (after `;`).
    Size {
        size: u64,
        digits: bool,
        ext: bool,
    },
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk: length of the current line.
    Trailer(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body { remaining: u64, done: Completed },
    Chunked { chunk: Chunk, done: Completed },
}

#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    /// A head split across reads.
    partial: Vec<u8>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader {
            state: State::Head,
            partial: Vec::new(),
        }
    }
}

impl ResponseReader {
    /// Between responses (nothing of a response read yet).
    pub fn idle(&self) -> bool {
        self.state == State::Head && self.partial.is_empty()
    }

    /// Read `data`, pushing each response it completes onto `done`. An
    /// error means the stream cannot be followed: close the connection.
    pub fn feed(&mut self, mut data: &[u8], done: &mut Vec<Completed>) -> Result<(), String> {
        while !data.is_empty() {
            match self.state {
                State::Head => data = self.read_head(data, done)?,
                State::Body { remaining, done: c } => {
                    let take = remaining.min(data.len() as u64);
                    data = &data[take as usize..];
                    if remaining == take {
                        done.push(c);
                        self.state = State::Head;
                    } else {
                        self.state = State::Body {
                            remaining: remaining - take,
                            done: c,
                        };
                    }
                }
                State::Chunked { chunk, done: c } => {
                    let (used, next) = step_chunked(chunk, data)?;
                    data = &data[used..];
                    match next {
                        Some(chunk) => self.state = State::Chunked { chunk, done: c },
                        None => {
                            done.push(c);
                            self.state = State::Head;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Read a head from `data` (or finish one begun earlier); returns what
    /// follows it.
    fn read_head<'a>(
        &mut self,
        data: &'a [u8],
        done: &mut Vec<Completed>,
    ) -> Result<&'a [u8], String> {
        let (head, rest): (Head, &[u8]) = if self.partial.is_empty() {
            match find_head_end(data, 0) {
                Some(end) => (parse_head(&data[..end])?, &data[end..]),
                None => {
                    self.keep_partial(data)?;
                    return Ok(&[]);
                }
            }
        } else {
            let before = self.partial.len();
            self.partial.extend_from_slice(data);
            match find_head_end(&self.partial, before.saturating_sub(3)) {
                Some(end) => {
                    let head = parse_head(&self.partial[..end])?;
                    self.partial.clear();
                    (head, &data[end - before..])
                }
                None => {
                    self.partial.truncate(before);
                    self.keep_partial(data)?;
                    return Ok(&[]);
                }
            }
        };
        let c = Completed {
            status: head.status,
            close: head.close,
        };
        self.state = match head.framing {
            Framing::Interim => State::Head,
            Framing::Length(0) => {
                done.push(c);
                State::Head
            }
            Framing::Length(n) => State::Body {
                remaining: n,
                done: c,
            },
            Framing::Chunked => State::Chunked {
                chunk: Chunk::Size {
                    size: 0,
                    digits: false,
                    ext: false,
                },
                done: c,
            },
        };
        Ok(rest)
    }

    fn keep_partial(&mut self, data: &[u8]) -> Result<(), String> {
        if self.partial.len() + data.len() > MAX_HEAD {
            return Err(format!("a response head is longer than {MAX_HEAD} bytes"));
        }
        self.partial.extend_from_slice(data);
        Ok(())
    }
}

/// Index just past the first `\r\n\r\n` at or after `from`.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = buf.get(at..)?.iter().position(|&b| b == b'\n') {
        let nl = at + i;
        if nl >= 3 && &buf[nl - 3..=nl] == b"\r\n\r\n" {
            return Some(nl + 1);
        }
        at = nl + 1;
    }
    None
}

#[derive(Debug, PartialEq, Eq)]
enum Framing {
    /// 1xx: another head follows.
    Interim,
    Length(u64),
    Chunked,
}

#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    close: bool,
    framing: Framing,
}

fn parse_head(head: &[u8]) -> Result<Head, String> {
    let text = std::str::from_utf8(head).map_err(|_| "a response head is not text".to_string())?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let bad_status = || format!("bad status line '{}'", status_line.escape_debug());
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().ok_or_else(bad_status)?;
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(bad_status()),
    };
    let code = parts.next().ok_or_else(bad_status)?;
    let status: u16 = code
        .parse()
        .ok()
        .filter(|s| (100..1000).contains(s) && code.len() == 3)
        .ok_or_else(bad_status)?;
    let mut close = http10;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("bad header line '{}'", line.escape_debug()));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse::<u64>()
                .map_err(|_| format!("bad Content-Length '{value}'"))?;
            if length.is_some_and(|prev| prev != n) {
                return Err("two different Content-Length headers".to_string());
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            if !chunked {
                return Err(format!("Transfer-Encoding '{value}' is not supported"));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            }
        }
    }
    let framing = match status {
        100..=199 => Framing::Interim,
        204 | 304 => Framing::Length(0),
        _ if chunked => Framing::Chunked,
        _ => Framing::Length(length.ok_or_else(|| {
            format!(
                "a {status} response has neither Content-Length nor chunked coding \
                 (read-until-close bodies are not supported)"
            )
        })?),
    };
    Ok(Head {
        status,
        close,
        framing,
    })
}

/// Advance through chunked coding; returns bytes used and the next state
/// (`None`: the response is complete).
fn step_chunked(mut chunk: Chunk, data: &[u8]) -> Result<(usize, Option<Chunk>), String> {
    let mut used = 0;
    while used < data.len() {
        match chunk {
            Chunk::Data(left) => {
                let take = left.min((data.len() - used) as u64);
                used += take as usize;
                chunk = if left == take {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left - take)
                };
            }
            Chunk::DataEnd => {
                let byte = data[used];
                used += 1;
                match byte {
                    b'\r' => {}
                    b'\n' => {
                        chunk = Chunk::Size {
                            size: 0,
                            digits: false,
                            ext: false,
                        }
                    }
                    _ => return Err("chunk data is longer than its size".to_string()),
                }
            }
            Chunk::Size { size, digits, ext } => {
                let byte = data[used];
                used += 1;
                chunk = match byte {
                    b'\n' if !digits => return Err("a chunk size line has no size".to_string()),
                    b'\n' if size == 0 => Chunk::Trailer(0),
                    b'\n' => Chunk::Data(size),
                    _ if ext || byte == b'\r' || byte == b' ' || byte == b'\t' => {
                        Chunk::Size { size, digits, ext }
                    }
                    b';' => Chunk::Size {
                        size,
                        digits,
                        ext: true,
                    },
                    _ => {
                        let digit = (byte as char)
                            .to_digit(16)
                            .ok_or_else(|| format!("bad chunk size byte {byte:#04x}"))?;
                        let size = size
                            .checked_mul(16)
                            .map(|s| s + u64::from(digit))
                            .ok_or_else(|| "a chunk size overflows".to_string())?;
                        Chunk::Size {
                            size,
                            digits: true,
                            ext,
                        }
                    }
                };
            }
            Chunk::Trailer(len) => {
                let byte = data[used];
                used += 1;
                chunk = match byte {
                    b'\n' if len == 0 => return Ok((used, None)),
                    b'\n' => Chunk::Trailer(0),
                    b'\r' => Chunk::Trailer(len),
                    _ => Chunk::Trailer(len + 1),
                };
            }
        }
    }
    Ok((used, Some(chunk)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nginx 1.22's answer to `return 200 "Hello, World!";`.
    const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 14:23:28 GMT\r\n\
        Content-Type: application/octet-stream\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nHello, World!";

    fn feed_in_pieces(stream: &[u8], piece: usize) -> Result<Vec<Completed>, String> {
        let mut reader = ResponseReader::default();
        let mut done = Vec::new();
        for part in stream.chunks(piece) {
            reader.feed(part, &mut done)?;
        }
        assert!(reader.idle());
        Ok(done)
    }

    #[test]
    fn pipelined_responses_split_anywhere() {
        let mut stream = NGINX.repeat(3);
        stream.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        for piece in [1, 2, 3, 7, 50, stream.len()] {
            let done = feed_in_pieces(&stream, piece).expect("valid");
            let statuses: Vec<u16> = done.iter().map(|c| c.status).collect();
            assert_eq!(statuses, vec![200, 200, 200, 404], "piece {piece}");
        }
    }

    #[test]
    fn chunked_bodies_with_extensions_and_trailers() {
        let stream = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;name=x\r\nHello\r\n8\r\n, World!\r\n0\r\nX-Trailer: 1\r\n\r\n\
            HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n";
        for piece in [1, 4, stream.len()] {
            let done = feed_in_pieces(stream, piece).expect("valid");
            assert_eq!(
                done,
                vec![
                    Completed {
                        status: 200,
                        close: false
                    },
                    Completed {
                        status: 503,
                        close: true
                    }
                ],
                "piece {piece}"
            );
        }
    }

    #[test]
    fn interim_and_bodiless_statuses() {
        let stream = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.0 304 Not Modified\r\n\r\n";
        let done = feed_in_pieces(stream, 5).expect("valid");
        assert_eq!(
            done,
            vec![
                Completed {
                    status: 204,
                    close: false
                },
                Completed {
                    status: 304,
                    close: true
                }
            ]
        );
    }

    #[test]
    fn unframed_or_garbled_responses_are_errors() {
        let mut reader = ResponseReader::default();
        let mut done = Vec::new();
        let err = reader
            .feed(b"HTTP/1.1 200 OK\r\n\r\nbody", &mut done)
            .expect_err("unframed");
        assert!(err.contains("neither Content-Length"), "{err}");
        for bad in [
            &b"SSH-2.0-OpenSSH_9.2\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(
                ResponseReader::default().feed(bad, &mut done).is_err(),
                "{bad:?}"
            );
        }
    }
}
