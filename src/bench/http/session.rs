//! The server's HTTP/1.1 rules, apart from any I/O: take the bytes a
//! connection received, answer every complete request in order, and say how
//! much was used and whether to close. TechEmpower-legal: `/plaintext` and
//! `/json` with Server, Date, Content-Type and Content-Length headers.
//!
//! Responses are prebuilt per thread; [`Responses::refresh`] patches the
//! 29-byte Date in each when the second changes, so answering is one copy.

use super::date::{imf_fixdate, DATE_LEN};
use super::is_token;

/// Longest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 8192;

const PLAINTEXT: &[u8] = b"Hello, World!";
const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

/// Which answer a request gets.
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

/// One prebuilt response and where its Date value sits.
struct Template {
    bytes: Vec<u8>,
    date_at: usize,
    /// Length without the body, for HEAD.
    head_len: usize,
}

impl Template {
    fn new(status: &str, content_type: &str, extra: &str, body: &[u8]) -> Template {
        let mut head = format!("HTTP/1.1 {status}\r\nServer: nettune\r\nDate: ");
        let date_at = head.len();
        head.push_str(&" ".repeat(DATE_LEN));
        head.push_str(&format!(
            "\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\n\r\n",
            body.len()
        ));
        let mut bytes = head.into_bytes();
        let head_len = bytes.len();
        bytes.extend_from_slice(body);
        Template {
            bytes,
            date_at,
            head_len,
        }
    }
}

/// One thread's prebuilt responses, in [`Answer`] order.
pub struct Responses {
    templates: [Template; 6],
    second: u64,
}

impl Responses {
    pub fn new(unix_secs: u64) -> Responses {
        let close = "Connection: close\r\n";
        let mut responses = Responses {
            templates: [
                Template::new("200 OK", "text/plain", "", PLAINTEXT),
                Template::new("200 OK", "application/json", "", JSON),
                Template::new("404 Not Found", "text/plain", "", b"Not Found"),
                Template::new(
                    "405 Method Not Allowed",
                    "text/plain",
                    "Allow: GET, HEAD\r\n",
                    b"Method Not Allowed",
                ),
                Template::new("400 Bad Request", "text/plain", close, b"Bad Request"),
                Template::new(
                    "431 Request Header Fields Too Large",
                    "text/plain",
                    close,
                    b"Request Header Fields Too Large",
                ),
            ],
            second: u64::MAX,
        };
        responses.refresh(unix_secs);
        responses
    }

    /// Patch the Date into every template when the second has changed.
    #[inline]
    pub fn refresh(&mut self, unix_secs: u64) {
        if unix_secs == self.second {
            return;
        }
        self.second = unix_secs;
        let date = imf_fixdate(unix_secs);
        for t in &mut self.templates {
            t.bytes[t.date_at..t.date_at + DATE_LEN].copy_from_slice(&date);
        }
    }

    fn write(&self, answer: Answer, head_only: bool, out: &mut Vec<u8>) {
        let t = &self.templates[answer as usize];
        let len = if head_only { t.head_len } else { t.bytes.len() };
        out.extend_from_slice(&t.bytes[..len]);
    }
}

/// A connection's state between reads: request body bytes still to skip.
#[derive(Debug, Default)]
pub struct Session {
    skip_body: u64,
}

/// What [`Session::serve`] did with the input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Bytes of input used; the rest is the start of a later request.
    pub consumed: usize,
    /// Responses written (one per request).
    pub responses: u64,
    /// Of those, 400 and 431 refusals.
    pub refused: u64,
    /// Close once the output is sent.
    pub close: bool,
}

impl Session {
    /// Answer every complete request at the start of `input`, in order,
    /// appending responses to `out`.
    pub fn serve(&mut self, input: &[u8], responses: &Responses, out: &mut Vec<u8>) -> Served {
        let mut served = Served::default();
        loop {
            if self.skip_body > 0 {
                let skip = self.skip_body.min((input.len() - served.consumed) as u64);
                served.consumed += skip as usize;
                self.skip_body -= skip;
                if self.skip_body > 0 {
                    return served;
                }
            }
            let rest = &input[served.consumed..];
            if rest.is_empty() {
                return served;
            }
            let Some(request) = parse_request(rest) else {
                return served;
            };
            responses.write(request.answer, request.head_only, out);
            served.responses += 1;
            served.consumed += request.len;
            self.skip_body = request.body_len;
            if matches!(request.answer, Answer::BadRequest | Answer::TooLarge) {
                served.refused += 1;
                served.close = true;
            }
            if request.close || served.close {
                served.close = true;
                return served;
            }
        }
    }
}

/// A parsed request head.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub answer: Answer,
    /// HEAD: the response without its body.
    pub head_only: bool,
    /// Close after answering (Connection: close, HTTP/1.0).
    pub close: bool,
    /// Bytes of the head, through the blank line.
    pub len: usize,
    /// Content-Length of a request body to skip.
    pub body_len: u64,
}

impl Request {
    fn refused(answer: Answer) -> Request {
        Request {
            answer,
            head_only: false,
            close: true,
            len: 0,
            body_len: 0,
        }
    }
}

/// Parse the request head at the start of `buf`; `None` while it is
/// incomplete (and still under [`MAX_HEAD`]).
pub fn parse_request(buf: &[u8]) -> Option<Request> {
    match parse_head(buf) {
        Parsed::Incomplete => None,
        Parsed::Refused(answer) => Some(Request::refused(answer)),
        Parsed::Head(head) => {
            let (answer, head_only) = match head.method {
                b"GET" => (route(head.path), false),
                b"HEAD" => (route(head.path), true),
                _ => (Answer::MethodNotAllowed, false),
            };
            Some(Request {
                answer,
                head_only,
                close: head.close,
                len: head.len,
                body_len: head.body_len,
            })
        }
    }
}

/// A request head as these rules read it, before any routing: what a
/// server with other paths (the monitor's Prometheus exporter) needs.
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

fn route(path: &[u8]) -> Answer {
    match path {
        b"/plaintext" => Answer::Plaintext,
        b"/json" => Answer::Json,
        _ => Answer::NotFound,
    }
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

    /// What wrk 4.1 sends for `wrk http://127.0.0.1:8080/plaintext`.
    const WRK_GET: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

    fn serve_all(input: &[u8]) -> (Served, String) {
        let responses = Responses::new(784_111_777);
        let mut out = Vec::new();
        let served = Session::default().serve(input, &responses, &mut out);
        (served, String::from_utf8(out).expect("ascii"))
    }

    #[test]
    fn plaintext_is_techempower_legal() {
        let (served, out) = serve_all(WRK_GET);
        assert_eq!(served.consumed, WRK_GET.len());
        assert!(!served.close);
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nServer: nettune\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
        );
    }

    #[test]
    fn json_and_404_and_head() {
        let (_, out) = serve_all(b"GET /json?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.contains("Content-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}"), "{out}");
        let (_, out) = serve_all(b"GET /other HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 404 Not Found\r\n"), "{out}");
        let (_, out) = serve_all(b"HEAD /plaintext HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.ends_with("Content-Length: 13\r\n\r\n"), "{out}");
        let (served, out) = serve_all(b"POST /json HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /json HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{out}"
        );
        assert_eq!(
            served.responses, 2,
            "the body is skipped, the next request answered"
        );
    }

    #[test]
    fn pipelined_requests_answered_in_order_partial_kept() {
        let mut input = Vec::new();
        for path in ["/json", "/plaintext", "/nope"] {
            input.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        }
        let partial = b"GET /json HTTP/1.1\r\nHo";
        input.extend_from_slice(partial);
        let (served, out) = serve_all(&input);
        assert_eq!(served.responses, 3);
        assert_eq!(served.consumed, input.len() - partial.len());
        let answers: Vec<&str> = out.split("HTTP/1.1 ").skip(1).collect();
        assert_eq!(answers.len(), 3, "{out}");
        assert!(
            answers[0].ends_with(r#"{"message":"Hello, World!"}"#),
            "{out}"
        );
        assert!(answers[1].ends_with("\r\n\r\nHello, World!"), "{out}");
        assert!(answers[2].starts_with("404 Not Found"), "{out}");
    }

    #[test]
    fn malformed_requests_get_400_and_close() {
        for bad in [
            &b"GARBAGE\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: h\r\nNo colon here\r\n\r\n",
            b"GET / HTTP/2.0\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"\x16\x03\x01\x02\x00",
        ] {
            let (served, out) = serve_all(bad);
            assert!(served.close, "{bad:?}");
            assert!(
                out.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{bad:?}: {out}"
            );
            assert!(out.contains("Connection: close\r\n"));
        }
    }

    #[test]
    fn bare_lf_line_ends_are_accepted_bare_cr_refused() {
        // RFC 9112 2.2: a bare LF may end a line (nginx takes it too).
        let (served, out) = serve_all(b"GET /plaintext HTTP/1.1\nHost: x\n\n");
        assert_eq!((served.responses, served.close), (1, false));
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("Hello, World!"), "{out}");
        let mixed = b"\nGET /json HTTP/1.1\r\nHost: x\n\r\nGET /json HTTP/1.1\nHost: x\r\n\n";
        let (served, _) = serve_all(mixed);
        assert_eq!((served.responses, served.consumed), (2, mixed.len()));
        assert_eq!(
            parse_request(b"GET / HTTP/1.1\nHost: x\n"),
            None,
            "incomplete"
        );
        for bad in [
            &b"GET / HTTP/1.1\rHost: x\n\n"[..],
            b"GET / HTTP/1.1\nHost: x\r\r\n\n",
        ] {
            assert_eq!(
                parse_request(bad).map(|r| r.answer),
                Some(Answer::BadRequest),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn oversized_heads_are_refused_complete_or_not() {
        let mut big = b"GET / HTTP/1.1\r\nHost: h\r\nX-Big: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        let (served, out) = serve_all(&big);
        assert!(served.close);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            parse_request(&big).map(|r| r.answer),
            Some(Answer::TooLarge)
        );
        assert_eq!(
            parse_request(&big[..MAX_HEAD / 2]),
            None,
            "incomplete, under the limit"
        );
    }

    #[test]
    fn connection_close_and_http10_close_after_answering() {
        let (served, _) = serve_all(b"GET /json HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET /json HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((served.responses, served.close), (1, true));
        let (served, _) = serve_all(b"GET /json HTTP/1.0\r\n\r\n");
        assert!(served.close);
    }

    #[test]
    fn date_changes_with_the_second() {
        let mut responses = Responses::new(0);
        let mut out = Vec::new();
        Session::default().serve(WRK_GET, &responses, &mut out);
        responses.refresh(1);
        Session::default().serve(WRK_GET, &responses, &mut out);
        let text = String::from_utf8(out).expect("ascii");
        assert!(text.contains("Date: Thu, 01 Jan 1970 00:00:00 GMT"));
        assert!(text.contains("Date: Thu, 01 Jan 1970 00:00:01 GMT"));
    }
}
