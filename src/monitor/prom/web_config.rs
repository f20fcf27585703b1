//! `monitor --prometheus --web-config FILE`: the Prometheus
//! exporter-toolkit web configuration (the file node_exporter reads with
//! `--web.config.file`), so one file serves every exporter of a host:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: ca.crt
//! basic_auth_users:
//!   prometheus: $2y$10$...   # a bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Relative file names are taken from the file's own directory, as the
//! toolkit does. The TLS itself is `base::tls` (TLS 1.3 only); what the
//! toolkit offers for older versions (cipher suites, curves) is accepted
//! and named in a note, since TLS 1.3 fixes those choices.
//!
//! Every error is one line naming the file and the key.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::base::tls::{ClientCerts, PemFile, ServerFiles, ServerTls};
use crate::base::user_file;

/// The largest web-config file read: a few users and file names.
const MAX_FILE_BYTES: u64 = 1 << 20;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsSection>,
    http_server_config: Option<HttpSection>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsSection {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_ca_file: Option<String>,
    client_auth_type: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    http2: Option<bool>,
}

/// A web configuration, checked and loaded.
#[derive(Debug)]
pub struct WebConfig {
    /// TLS for every connection; `None`: plain HTTP.
    pub tls: Option<ServerTls>,
    /// Users and their bcrypt hashes; empty: no authentication.
    pub users: BasicAuth,
    /// What the file asks that TLS 1.3 or this server decides itself, for
    /// the caller to say.
    pub notes: Vec<String>,
}

impl WebConfig {
    /// Read `path` (named by `--web-config`) and load what it names.
    pub fn load(path: &Path) -> anyhow::Result<WebConfig> {
        let label = format!("--web-config '{}'", path.display());
        let bytes =
            user_file::read(path, MAX_FILE_BYTES).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("{label} is not UTF-8 text: give a YAML file"))?;
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_norway::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{label}: {} (the format: docs/monitor.md, 'Scraping across hosts')",
                    one_line(&e.to_string())
                )
            })?
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut notes = Vec::new();
        let tls = match &file.tls_server_config {
            Some(section) => Some(tls(section, dir, &label, &mut notes)?),
            None => None,
        };
        if file.http_server_config.and_then(|h| h.http2) == Some(true) {
            notes.push("http2: served over HTTP/1.1 (Prometheus scrapes over it)".to_string());
        }
        let users = BasicAuth::new(file.basic_auth_users, &label)?;
        Ok(WebConfig { tls, users, notes })
    }
}

/// The file as one line (serde_norway's messages are one already; be sure).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn tls(
    section: &TlsSection,
    dir: &Path,
    label: &str,
    notes: &mut Vec<String>,
) -> anyhow::Result<ServerTls> {
    let key_path = |key: &str, value: &Option<String>| -> anyhow::Result<PemFile> {
        match value.as_deref() {
            Some(name) if !name.is_empty() => {
                Ok(PemFile::new(format!("{key} in {label}"), dir.join(name)))
            }
            _ => anyhow::bail!(
                "{label}: tls_server_config has no {key}: give the PEM file (a relative name is \
                 taken from the file's directory)"
            ),
        }
    };
    let cert = key_path("cert_file", &section.cert_file)?;
    let key = key_path("key_file", &section.key_file)?;
    for (key, file) in [("cert_file", &cert), ("key_file", &key)] {
        if !file.path.exists() {
            anyhow::bail!(
                "{label}: {key} '{}' does not exist: give the path of the PEM file (a relative \
                 name is taken from the file's directory)",
                file.path.display()
            );
        }
    }
    let auth = section
        .client_auth_type
        .as_deref()
        .unwrap_or("NoClientCert");
    let client = match auth {
        "NoClientCert" => None,
        "VerifyClientCertIfGiven" => Some(ClientCerts::IfGiven),
        "RequireAndVerifyClientCert" => Some(ClientCerts::Required),
        "RequestClientCert" | "RequireAnyClientCert" => anyhow::bail!(
            "{label}: client_auth_type '{auth}' takes client certificates without checking \
             them, which nettune does not do: use RequireAndVerifyClientCert or \
             VerifyClientCertIfGiven with client_ca_file"
        ),
        other => anyhow::bail!(
            "{label}: client_auth_type '{other}' is not one of NoClientCert, \
             VerifyClientCertIfGiven, RequireAndVerifyClientCert"
        ),
    };
    let client_ca = match (&section.client_ca_file, client) {
        (Some(_), None) => anyhow::bail!(
            "{label}: client_ca_file is given but client_auth_type is NoClientCert: set \
             client_auth_type to RequireAndVerifyClientCert (or VerifyClientCertIfGiven)"
        ),
        (None, Some(_)) => anyhow::bail!(
            "{label}: client_auth_type '{auth}' needs client_ca_file, the CA that signs the \
             scrapers' certificates"
        ),
        (Some(_), Some(_)) => Some(key_path("client_ca_file", &section.client_ca_file)?),
        (None, None) => None,
    };
    for (key, value) in [
        ("min_version", &section.min_version),
        ("max_version", &section.max_version),
    ] {
        match value.as_deref() {
            None | Some("TLS10" | "TLS11" | "TLS12" | "TLS13") if key == "min_version" => {}
            None | Some("TLS13") => {}
            Some(other) => anyhow::bail!(
                "{label}: {key} '{other}': nettune serves TLS 1.3 only (RFC 8446), which \
                 Prometheus speaks; give TLS13 or leave {key} out"
            ),
        }
    }
    if section.cipher_suites.is_some()
        || section.curve_preferences.is_some()
        || section.prefer_server_cipher_suites.is_some()
    {
        notes.push(
            "cipher_suites, curve_preferences and prefer_server_cipher_suites apply to TLS 1.2 \
             and older; TLS 1.3 (the only version served) uses its own"
                .to_string(),
        );
    }
    let files = ServerFiles {
        cert,
        key,
        client_ca,
    };
    ServerTls::load_with(&files, client.unwrap_or(ClientCerts::Required))
}

/// How many passwords that matched are remembered: bcrypt costs tens of
/// milliseconds by design, and a scraper sends the same one every scrape.
const REMEMBERED: usize = 64;

/// The basic-auth users, and the passwords recently found right.
#[derive(Debug, Default)]
pub struct BasicAuth {
    users: HashMap<String, String>,
    /// A hash every unknown user is checked against, so that an unknown
    /// name costs the time a known one does.
    decoy: Option<String>,
    /// SHA-256 of (user, hash, password) of recent matches.
    matched: VecDeque<[u8; 32]>,
}

impl BasicAuth {
    fn new(users: BTreeMap<String, String>, label: &str) -> anyhow::Result<BasicAuth> {
        for (user, hash) in &users {
            if user.contains(':') {
                anyhow::bail!(
                    "{label}: basic_auth_users: user '{user}' has a ':', which basic \
                     authentication cannot carry in a name"
                );
            }
            if hash.parse::<bcrypt::HashParts>().is_err() {
                anyhow::bail!(
                    "{label}: basic_auth_users: the password of '{user}' is not a bcrypt hash \
                     ('$2y$10$...', 60 characters): store the hash, never the password \
                     (`htpasswd -nBC 10 '' | tr -d ':\\n'` makes one)"
                );
            }
        }
        let decoy = users.values().next().cloned();
        Ok(BasicAuth {
            users: users.into_iter().collect(),
            decoy,
            matched: VecDeque::new(),
        })
    }

    /// No users: every request is served.
    pub fn is_open(&self) -> bool {
        self.users.is_empty()
    }

    /// Whether an `Authorization` header value lets the request in.
    pub fn allows(&mut self, header: Option<&[u8]>) -> bool {
        if self.is_open() {
            return true;
        }
        let Some((user, password)) = header.and_then(credentials) else {
            return false;
        };
        let (hash, known) = match self.users.get(&user) {
            Some(hash) => (hash.clone(), true),
            None => (self.decoy.clone().unwrap_or_default(), false),
        };
        let mut digest = Sha256::new();
        for part in [user.as_bytes(), hash.as_bytes(), password.as_slice()] {
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
        let key: [u8; 32] = digest.finalize().into();
        if known && self.matched.contains(&key) {
            return true;
        }
        let ok = bcrypt::verify(&password, &hash).unwrap_or(false) && known;
        if ok {
            if self.matched.len() >= REMEMBERED {
                self.matched.pop_front();
            }
            self.matched.push_back(key);
        }
        ok
    }
}

/// The user and password of `Basic BASE64(user:password)`.
fn credentials(header: &[u8]) -> Option<(String, Vec<u8>)> {
    use base64::Engine as _;
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> std::path::PathBuf {
        let path = dir.join("web.yml");
        std::fs::write(&path, text).expect("write");
        path
    }

    fn basic(user: &str, password: &str) -> Vec<u8> {
        use base64::Engine as _;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {encoded}").into_bytes()
    }

    #[test]
    fn users_are_checked_against_their_bcrypt_hashes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hash = bcrypt::hash("s3cret", 4).expect("hash");
        let path = write(
            dir.path(),
            &format!("basic_auth_users:\n  prom: '{hash}'\n"),
        );
        let mut config = WebConfig::load(&path).expect("load");
        assert!(config.tls.is_none());
        let users = &mut config.users;
        assert!(!users.is_open());
        assert!(users.allows(Some(&basic("prom", "s3cret"))));
        // Again, from what was remembered.
        assert!(users.allows(Some(&basic("prom", "s3cret"))));
        assert!(!users.allows(Some(&basic("prom", "wrong"))));
        assert!(!users.allows(Some(&basic("other", "s3cret"))));
        assert!(!users.allows(None));
        assert!(!users.allows(Some(b"Bearer abc")));
        assert!(!users.allows(Some(b"Basic !!!")));
    }

    #[test]
    fn bad_files_are_one_line_naming_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = [
            ("basic_auth_users:\n  prom: hunter2\n", "not a bcrypt hash"),
            (
                "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
                "cert_file",
            ),
            ("tls_server_config:\n  key_file: k\n", "has no cert_file"),
            ("tls_server:\n  cert_file: x\n", "unknown field"),
            ("basic_auth_users: [a, b]\n", "basic_auth_users"),
        ];
        for (text, want) in cases {
            let path = write(dir.path(), text);
            let err = WebConfig::load(&path).expect_err(text).to_string();
            assert!(err.contains(want), "{text}: {err}");
            assert!(err.contains("--web-config '"), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        let err = WebConfig::load(&dir.path().join("absent.yml"))
            .expect_err("absent")
            .to_string();
        assert!(err.contains("absent.yml"), "{err}");
    }
}
