//! The HTTP/1.1 request head (RFC 9112), apart from any I/O and any
//! routing: where it ends, whether it is well formed, and the few fields a
//! fixed-response server acts on. The http-server bench and the monitor's
//! Prometheus exporter both read their requests with [`parse_head`].

use super::is_token;

/// Longest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 8192;

/// Which answer a request gets: the parser refuses with
/// [`Answer::BadRequest`] or [`Answer::TooLarge`]; a server routes the
/// rest to a body it serves (`Plaintext`, `Json`), 404 or 405.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Plaintext,
    Json,
    NotFound,
    MethodNotAllowed,
    /// Malformed: 400, then close.
    BadRequest,
    /// Head over [`MAX_HEAD`]: 431, then close.
    TooLarge,
}

/// A request head as read, before any routing: each server routes
/// [`Head::path`] its own way.
#[derive(Debug, PartialEq, Eq)]
pub struct Head<'a> {
    /// The method token, as sent (`GET`, `HEAD`, ...).
    pub method: &'a [u8],
    /// The target's path: the query left out, an absolute-form target
    /// (`http://host/path`) reduced to its path.
    pub path: &'a [u8],
    /// Close after answering (Connection: close, HTTP/1.0).
    pub close: bool,
    /// Bytes of the head, through the blank line.
    pub len: usize,
    /// Content-Length of a request body that follows.
    pub body_len: u64,
    /// The Authorization header's value, if sent (once).
    pub authorization: Option<&'a [u8]>,
}

/// What the start of a connection's input holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// Not a whole head yet (and under [`MAX_HEAD`]).
    Incomplete,
    /// Malformed ([`Answer::BadRequest`]) or too long ([`Answer::TooLarge`]):
    /// answer, then close.
    Refused(Answer),
    Head(Head<'a>),
}

/// Parse the request head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> Parsed<'_> {
    let Some(end) = find_head_end(&buf[..buf.len().min(MAX_HEAD + 4)]) else {
        if buf.len() > MAX_HEAD {
            return Parsed::Refused(Answer::TooLarge);
        }
        // A head cannot start with a control character: refuse garbage
        // (a TLS hello, binary) at once instead of waiting for 8 KiB.
        if buf
            .first()
            .is_some_and(|b| !is_token(*b) && *b != b'\r' && *b != b'\n')
        {
            return Parsed::Refused(Answer::BadRequest);
        }
        return Parsed::Incomplete;
    };
    if end > MAX_HEAD {
        return Parsed::Refused(Answer::TooLarge);
    }
    match head_fields(&buf[..end]) {
        Some(head) => Parsed::Head(head),
        None => Parsed::Refused(Answer::BadRequest),
    }
}

/// Index just past the blank line that ends the head. Lines end in LF,
/// with or without a CR before it (RFC 9112 2.2 lets a recipient take a
/// bare LF as a line end, as nginx does); blank lines before the request
/// line are skipped.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let mut line_start = start;
    let mut from = start;
    while let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
        let at = from + i;
        if matches!(&buf[line_start..at], b"" | b"\r") {
            return Some(at + 1);
        }
        line_start = at + 1;
        from = at + 1;
    }
    None
}

/// `None` for anything malformed.
fn head_fields(head: &[u8]) -> Option<Head<'_>> {
    // Clients may send blank lines before a request (RFC 9112 2.2).
    let start = head.iter().position(|&b| b != b'\r' && b != b'\n')?;
    // Each line with its line end, up to the blank line that ends the head.
    let mut lines = head[start..]
        .split_inclusive(|&b| b == b'\n')
        .map(strip_cr)
        .take_while(|line| line.is_none_or(|l| !l.is_empty()));
    let request_line = lines.next()??;
    let mut parts = request_line.split(|&b| b == b' ');
    let method = parts.next()?;
    let target = parts.next()?;
    let version = parts.next()?;
    if parts.next().is_some() || method.is_empty() || !method.iter().all(|&b| is_token(b)) {
        return None;
    }
    let http10 = match version {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        _ => return None,
    };
    if target.is_empty() || target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return None;
    }
    let mut close = http10;
    let mut body_len: Option<u64> = None;
    let mut host = false;
    let mut authorization = None;
    for line in lines {
        let line = line?;
        let colon = line.iter().position(|&b| b == b':')?;
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.is_empty() || !name.iter().all(|&b| is_token(b)) {
            return None;
        }
        if value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return None;
        }
        if name.eq_ignore_ascii_case(b"host") {
            host = true;
        } else if name.eq_ignore_ascii_case(b"authorization") {
            // Two credentials: which one counts is not for us to guess.
            if authorization.is_some() {
                return None;
            }
            authorization = Some(value);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                    // The 1.0 response would need its own keep-alive
                    // header; closing is always correct.
                    close = true;
                }
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_decimal(value)?;
            if body_len.is_some_and(|prev| prev != n) {
                return None;
            }
            body_len = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Chunked request bodies are not supported: refuse rather than
            // misread the stream.
            return None;
        }
    }
    if !http10 && !host {
        return None;
    }
    Some(Head {
        method,
        path: path_of(target),
        close,
        len: head.len(),
        body_len: body_len.unwrap_or(0),
        authorization,
    })
}

/// The path of a request target: the query left out; an absolute-form
/// target (a proxy-style request) reduced to its path.
fn path_of(target: &[u8]) -> &[u8] {
    let target = match target.strip_prefix(b"http://") {
        Some(rest) => rest
            .iter()
            .position(|&b| b == b'/')
            .map_or(&b"/"[..], |i| &rest[i..]),
        None => target,
    };
    target.split(|&b| b == b'?').next().unwrap_or(target)
}

/// A line without its line end (CRLF or a bare LF); `None` for a line
/// with a bare CR (RFC 9112 2.2: invalid), or without a line end.
fn strip_cr(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\n")?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.contains(&b'\r') {
        return None;
    }
    Some(line)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_gives_method_path_close_and_body_length() {
        let input = b"POST http://h/metrics?x=1 HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(
            parse_head(input),
            Parsed::Head(Head {
                method: b"POST",
                path: b"/metrics",
                close: true,
                len: input.len() - 3,
                body_len: 3,
                authorization: None,
            })
        );
        let authorized = b"GET /metrics HTTP/1.1\r\nHost: h\r\nAuthorization: Basic eDp5\r\n\r\n";
        match parse_head(authorized) {
            Parsed::Head(head) => assert_eq!(head.authorization, Some(&b"Basic eDp5"[..])),
            other => panic!("{other:?}"),
        }
        let twice = b"GET / HTTP/1.1\r\nHost: h\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n";
        assert_eq!(parse_head(twice), Parsed::Refused(Answer::BadRequest));
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nHost: h\r\n"),
            Parsed::Incomplete
        );
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\n\r\n"),
            Parsed::Refused(Answer::BadRequest),
            "HTTP/1.1 without Host"
        );
    }
}
