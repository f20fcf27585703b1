//! HTTP/1.1 as nettune's servers and load generator read it: the request
//! head parser (`bench http-server`, `monitor --prometheus`), the server's
//! per-connection session, and the load generator's response reader. TCP
//! may cut a byte stream anywhere: the same bytes fed in pieces must give
//! the same answers as fed at once.

use nettune::base::http::head::{parse_head, Parsed};
use nettune::bench::http::response::{Completed, ResponseReader};
use nettune::bench::http::session::{parse_request, Responses, Session};

/// Where the first byte says to cut the rest into pieces.
fn pieces(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((&cut, rest)) => (usize::from(cut).max(1), rest),
        None => (1, &[]),
    }
}

/// A request head, and a server session fed at once and in pieces.
pub fn http_head(data: &[u8]) {
    let (cut, input) = pieces(data);
    match parse_head(input) {
        Parsed::Head(head) => {
            assert!(head.len <= input.len(), "a head longer than its input");
            assert!(head.len > 0);
        }
        Parsed::Incomplete | Parsed::Refused(_) => {}
    }
    if let Some(request) = parse_request(input) {
        assert!(request.len <= input.len());
    }
    let responses = Responses::new(1_700_000_000);

    let mut whole = Session::default();
    let mut out_whole = Vec::new();
    let mut pending = input.to_vec();
    let mut answered = 0;
    let mut closed = false;
    // As a server loop does: serve, drop what was used, keep the rest.
    let served = whole.serve(&pending, &responses, &mut out_whole);
    assert!(served.consumed <= pending.len());
    assert!(served.refused <= served.responses);
    answered += served.responses;
    closed |= served.close;
    pending.drain(..served.consumed);

    let mut split = Session::default();
    let mut out_split = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut answered_split = 0;
    let mut closed_split = false;
    for piece in input.chunks(cut) {
        if closed_split {
            break;
        }
        buf.extend_from_slice(piece);
        let served = split.serve(&buf, &responses, &mut out_split);
        assert!(served.consumed <= buf.len());
        answered_split += served.responses;
        closed_split |= served.close;
        buf.drain(..served.consumed);
    }
    if !closed && !closed_split {
        assert_eq!(
            answered, answered_split,
            "answers depend on how reads cut the input"
        );
        assert_eq!(out_whole, out_split);
    }
    if closed && closed_split {
        assert_eq!(
            out_whole, out_split,
            "answers depend on how reads cut the input"
        );
    }
}

/// Responses as the load generator reads them, at once and in pieces.
pub fn http_response(data: &[u8]) {
    let (cut, input) = pieces(data);
    let mut whole = ResponseReader::default();
    let mut done_whole: Vec<Completed> = Vec::new();
    let whole_result = whole.feed(input, &mut done_whole);

    let mut split = ResponseReader::default();
    let mut done_split: Vec<Completed> = Vec::new();
    let mut split_result = Ok(());
    for piece in input.chunks(cut) {
        split_result = split.feed(piece, &mut done_split);
        if split_result.is_err() {
            break;
        }
    }
    match (&whole_result, &split_result) {
        (Ok(()), Ok(())) => {
            assert_eq!(
                done_whole, done_split,
                "responses depend on how reads cut them"
            );
            assert_eq!(whole.idle(), split.idle());
        }
        (Err(_), Err(_)) => {}
        _ => panic!(
            "at once: {whole_result:?}, in pieces of {cut}: {split_result:?} \
             (the result depends on how reads cut the stream)"
        ),
    }
}
