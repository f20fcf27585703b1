//! The load generator's URL: `http://HOST[:PORT][/PATH][?QUERY]`, checked
//! when the command line is read; the host is resolved when the run starts.

use std::net::{SocketAddr, ToSocketAddrs};

/// A parsed `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// As the user typed it, for the report.
    pub text: String,
    /// The host without brackets (`127.0.0.1`, `::1`, `localhost`).
    pub host: String,
    pub port: u16,
    /// The `Host` header value: the host as written, with the port when the
    /// URL gave one.
    pub authority: String,
    /// Path and query, at least `/`.
    pub path: String,
}

impl Url {
    /// The first address the host resolves to.
    pub fn resolve(&self) -> anyhow::Result<SocketAddr> {
        let mut addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot resolve '{}' from '{}': {e}; check the host name",
                    self.host,
                    self.text
                )
            })?;
        addrs.next().ok_or_else(|| {
            anyhow::anyhow!("'{}' resolves to no address ('{}')", self.host, self.text)
        })
    }
}

/// A URL is its text in configs and reports.
impl serde::Serialize for Url {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Url {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Url, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Parse an `http://` URL; say plainly what is wrong (https is refused).
pub fn parse(text: &str) -> Result<Url, String> {
    let trimmed = text.trim();
    let Some((scheme, rest)) = trimmed.split_once("://") else {
        return Err(format!(
            "'{text}' is not a URL: give http://HOST[:PORT]/PATH, e.g. http://127.0.0.1:8080/plaintext"
        ));
    };
    if scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "'{text}': https is not supported (no TLS in this load generator); use an http:// URL"
        ));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!(
            "'{text}': scheme '{scheme}' is not supported; use an http:// URL"
        ));
    }
    let rest = rest.split('#').next().unwrap_or_default();
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    check_path(text, &path)?;
    if authority.contains('@') {
        return Err(format!(
            "'{text}': user names in URLs are not supported; send credentials with -H"
        ));
    }
    let (host, port) = split_host_port(authority).map_err(|why| format!("'{text}': {why}"))?;
    Ok(Url {
        text: trimmed.to_string(),
        host,
        port,
        authority: authority.to_string(),
        path,
    })
}

/// A path alone (`/json`, `/plaintext?x=1`), for a load whose server is
/// named elsewhere (`bench http --remote`, an experiment's bench line).
pub fn parse_path(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if !trimmed.starts_with('/') {
        return Err(format!(
            "'{text}' is not a path: it starts with '/', e.g. /plaintext"
        ));
    }
    let path = trimmed.split('#').next().unwrap_or_default().to_string();
    check_path(text, &path)?;
    Ok(path)
}

fn check_path(text: &str, path: &str) -> Result<(), String> {
    if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(format!(
            "'{text}': the path holds spaces or control characters; percent-encode them"
        ));
    }
    Ok(())
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; port 80 when absent.
fn split_host_port(authority: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Err("an IPv6 address needs its closing ']'".to_string());
        };
        match after {
            "" => (host, None),
            p if p.starts_with(':') => (host, Some(&p[1..])),
            _ => return Err(format!("'{after}' after ']' is not a :PORT")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host".to_string());
    }
    if host.contains(':') && !authority.starts_with('[') {
        return Err("an IPv6 address goes in brackets: http://[::1]:8080/".to_string());
    }
    let port = match port {
        None => 80,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("port '{p}' is not a number from 1 to 65535"))?,
    };
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_articles_url_and_its_parts() {
        let t = parse("http://172.31.12.71:8080/json").expect("url");
        assert_eq!(t.host, "172.31.12.71");
        assert_eq!(t.port, 8080);
        assert_eq!(t.authority, "172.31.12.71:8080");
        assert_eq!(t.path, "/json");
        let t = parse("http://localhost").expect("no path");
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = parse("http://[::1]:9000?x=1#frag").expect("v6");
        assert_eq!((t.host.as_str(), t.port), ("::1", 9000));
        assert_eq!(t.path, "/?x=1");
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        assert!(parse("https://127.0.0.1/")
            .expect_err("tls")
            .contains("https is not supported"));
        assert!(parse("127.0.0.1:8080")
            .expect_err("no scheme")
            .contains("not a URL"));
        assert!(parse("ftp://h/").expect_err("ftp").contains("'ftp'"));
        assert!(parse("http://h:99999/")
            .expect_err("port")
            .contains("'99999'"));
        assert!(parse("http://h:0/").is_err());
        assert!(parse("http:///x").expect_err("host").contains("no host"));
        assert!(parse("http://::1/")
            .expect_err("brackets")
            .contains("brackets"));
        assert!(parse("http://u@h/").is_err());
        assert!(parse("http://h/a b").is_err());
    }

    #[test]
    fn a_path_alone() {
        assert_eq!(parse_path("/json").as_deref(), Ok("/json"));
        assert_eq!(parse_path("/p?x=1#f").as_deref(), Ok("/p?x=1"));
        assert!(parse_path("json").is_err());
        assert!(parse_path("/a b").is_err());
    }
}
