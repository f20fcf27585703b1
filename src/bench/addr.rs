//! Socket addresses on the command line of every engine: numeric
//! `ADDR:PORT` only (no name lookups: a benchmark must know exactly where
//! its traffic goes).

use std::net::SocketAddr;

/// An address to bind: port 0 lets the kernel choose (the engine prints it).
pub fn parse_bind(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!("'{text}' is not a numeric ADDR:PORT (e.g. 127.0.0.1:9000 or [::1]:9000)")
    })
}

/// An address to send to: port 0 is refused, nothing can listen there.
pub fn parse_destination(text: &str) -> Result<SocketAddr, String> {
    let addr = parse_bind(text)?;
    if addr.port() == 0 {
        return Err(format!(
            "'{text}' has port 0, which nothing can listen on; give the port the server printed"
        ));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_addresses_only() {
        assert_eq!(
            parse_bind("[::1]:9000").expect("v6").to_string(),
            "[::1]:9000"
        );
        assert!(parse_bind("localhost:9000")
            .expect_err("names are refused")
            .contains("'localhost:9000'"));
        assert!(parse_bind("127.0.0.1").is_err());
        assert!(parse_destination("127.0.0.1:0")
            .expect_err("port 0")
            .contains("port 0"));
        assert!(parse_bind("127.0.0.1:0").is_ok());
    }
}
