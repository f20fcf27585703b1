//! What the HTTP/1.1 servers share: the request head parser ([`head`]) and
//! the `Date` value ([`date`]).

pub mod date;
pub mod head;

/// RFC 9110 token characters (header names, methods).
pub fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}
