//! The server's HTTP/1.1 rules, apart from any I/O: take the bytes a
//! connection received, answer every complete request in order, and say how
//! much was used and whether to close (the head itself is read by
//! [`crate::base::http::head`]). TechEmpower-legal: `/plaintext` and
//! `/json` with Server, Date, Content-Type and Content-Length headers.
//!
//! Responses are prebuilt per thread; [`Responses::refresh`] patches the
//! 29-byte Date in each when the second changes, so answering is one copy.

use crate::base::http::date::{imf_fixdate, DATE_LEN};
use crate::base::http::head::{parse_head, Answer, Parsed};

const PLAINTEXT: &[u8] = b"Hello, World!";
const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

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
///
/// [`MAX_HEAD`]: crate::base::http::head::MAX_HEAD
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

fn route(path: &[u8]) -> Answer {
    match path {
        b"/plaintext" => Answer::Plaintext,
        b"/json" => Answer::Json,
        _ => Answer::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::http::head::MAX_HEAD;

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
