//! TLS 1.3 for nettune's control connections: rustls with the ring
//! provider, TLS 1.3 only (RFC 8446). The certificate, key and CA files
//! are read once at start (bounded, regular files only), checked, and
//! turned into a server or a client configuration; every error is one
//! line naming the file as the user named it (`--tls-cert 'x.pem'`, or a
//! key of a config file). [`conn`] runs a connection over it, with
//! deadlines.
//!
//! One place for every part that speaks TLS: `nettune serve` and its
//! clients, and the Prometheus exporter's web config (certificate, key,
//! client CA). TLS 1.3 alone suits Prometheus: its scrapers (Go's
//! crypto/tls) offer TLS 1.3 by default.

pub mod conn;
pub mod stream;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

pub use conn::{Conn, HandshakeError};
pub use stream::Stream;

use super::user_file;

/// The largest PEM file read. A chain or a private key is a few KB, and
/// a bundle of every public CA (Debian's ca-certificates.crt) ~220 KB.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// A PEM file and how the user named it (`--tls-cert`, `cert_file in
/// 'web.yml'`), for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemFile {
    pub named: String,
    pub path: PathBuf,
}

impl PemFile {
    pub fn new(named: impl Into<String>, path: impl Into<PathBuf>) -> PemFile {
        PemFile {
            named: named.into(),
            path: path.into(),
        }
    }

    /// `--tls-cert 'cert.pem'`
    pub fn label(&self) -> String {
        format!("{} '{}'", self.named, self.path.display())
    }

    fn read(&self) -> anyhow::Result<Vec<u8>> {
        user_file::read(&self.path, MAX_PEM_BYTES)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.label()))
    }

    /// Every certificate in the file, in order (a chain: the end entity
    /// first).
    pub fn certificates(&self) -> anyhow::Result<Vec<CertificateDer<'static>>> {
        let bytes = self.read()?;
        let certs = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("{}: not PEM: {e}", self.label()))?;
        if certs.is_empty() {
            anyhow::bail!(
                "{} holds no certificate: give a PEM file with '-----BEGIN CERTIFICATE-----' blocks",
                self.label()
            );
        }
        Ok(certs)
    }

    /// The file's private key (PKCS#8, PKCS#1 RSA or SEC1 EC, in PEM).
    pub fn private_key(&self) -> anyhow::Result<PrivateKeyDer<'static>> {
        let bytes = self.read()?;
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => anyhow::anyhow!(
                "{} holds no private key: give a PEM file with a '-----BEGIN PRIVATE KEY-----' \
                 (or RSA or EC PRIVATE KEY) block",
                self.label()
            ),
            other => anyhow::anyhow!("{}: not PEM: {other}", self.label()),
        })
    }

    /// The file's certificates as trust anchors.
    pub fn roots(&self) -> anyhow::Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        for (i, cert) in self.certificates()?.into_iter().enumerate() {
            roots.add(cert).map_err(|e| {
                anyhow::anyhow!(
                    "{}: certificate {} is not usable as a CA: {}",
                    self.label(),
                    i + 1,
                    explain(&e)
                )
            })?;
        }
        Ok(roots)
    }
}

/// What a TLS server needs: its certificate chain and key, and the CA its
/// clients' certificates must be signed by (`None`: no client
/// certificates asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    pub cert: PemFile,
    pub key: PemFile,
    pub client_ca: Option<PemFile>,
}

/// What a TLS client needs: the CA that signed the server's certificate,
/// its own certificate and key when the server asks for one, and the name
/// to check the server's certificate against (`None`: the address it
/// connects to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFiles {
    pub ca: PemFile,
    pub identity: Option<(PemFile, PemFile)>,
    pub server_name: Option<String>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server's TLS configuration, ready for [`Conn::accept`].
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
    client_ca: Option<PemFile>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("client_ca", &self.client_ca)
            .finish_non_exhaustive()
    }
}

/// With a client CA: whether a client must show a certificate, or may
/// come without one (a certificate shown is checked either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCerts {
    Required,
    IfGiven,
}

impl ServerTls {
    /// Read and check the files; TLS 1.3 only; client certificates
    /// signed by `client_ca` required when it is given.
    pub fn load(files: &ServerFiles) -> anyhow::Result<ServerTls> {
        ServerTls::load_with(files, ClientCerts::Required)
    }

    /// [`ServerTls::load`], with the choice of whether clients may come
    /// without a certificate when there is a client CA.
    pub fn load_with(files: &ServerFiles, certs: ClientCerts) -> anyhow::Result<ServerTls> {
        let chain = files.cert.certificates()?;
        let key = files.key.private_key()?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| anyhow::anyhow!("TLS: {}", explain(&e)))?;
        let builder = match &files.client_ca {
            Some(ca) => {
                let roots = Arc::new(ca.roots()?);
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = match certs {
                    ClientCerts::Required => verifier,
                    ClientCerts::IfGiven => verifier.allow_unauthenticated(),
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| anyhow::anyhow!("{}: {e}", ca.label()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| key_error(&files.cert, &files.key, &e))?;
        // No session tickets: no resumption is needed for a connection per
        // test, and nothing then arrives after the handshake but the
        // messages themselves.
        config.send_tls13_tickets = 0;
        Ok(ServerTls {
            config: Arc::new(config),
            client_ca: files.client_ca.clone(),
        })
    }

    pub fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config)
    }

    /// Clients must show a certificate signed by this CA.
    pub fn client_ca(&self) -> Option<&PemFile> {
        self.client_ca.as_ref()
    }
}

impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

/// A client's TLS configuration, ready for [`Conn::connect`].
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
    server_name: Option<ServerName<'static>>,
    ca: PemFile,
    cert: Option<PemFile>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.ca)
            .field("server_name", &self.server_name)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ClientTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl ClientTls {
    /// Read and check the files; TLS 1.3 only.
    pub fn load(files: &ClientFiles) -> anyhow::Result<ClientTls> {
        let roots = files.ca.roots()?;
        let server_name = files
            .server_name
            .as_deref()
            .map(|name| {
                ServerName::try_from(name.to_string()).map_err(|_| {
                    anyhow::anyhow!("--tls-server-name '{name}' is not a DNS name or an IP address")
                })
            })
            .transpose()?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| anyhow::anyhow!("TLS: {}", explain(&e)))?
            .with_root_certificates(roots);
        let config = match &files.identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(cert.certificates()?, key.private_key()?)
                .map_err(|e| key_error(cert, key, &e))?,
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            config: Arc::new(config),
            server_name,
            ca: files.ca.clone(),
            cert: files.identity.as_ref().map(|(cert, _)| cert.clone()),
        })
    }

    pub fn config(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.config)
    }

    /// The name the server's certificate must carry when it is reached at
    /// `ip`: the one given, else the address itself.
    pub fn server_name(&self, ip: IpAddr) -> ServerName<'static> {
        self.server_name
            .clone()
            .unwrap_or(ServerName::IpAddress(ip.into()))
    }

    /// Why the server and this client did not agree, and what to do, as
    /// one line: `server` names the server (`the daemon`).
    pub fn explain(&self, server: &str, e: &rustls::Error) -> String {
        use rustls::{AlertDescription as A, CertificateError as C, Error as E};
        let mine = match &self.cert {
            Some(cert) => format!("this client's certificate ({})", cert.label()),
            None => "this client's certificate".to_string(),
        };
        match e {
            E::InvalidCertificate(C::UnknownIssuer) => format!(
                "TLS: {server}'s certificate is not signed by the CA in {}; give the CA that \
                 signed it",
                self.ca.label()
            ),
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
                match &self.server_name {
                    Some(name) => format!(
                        "TLS: {server}'s certificate does not carry the name --tls-server-name \
                         '{}'; give a name it carries",
                        name.to_str()
                    ),
                    None => format!(
                        "TLS: {server}'s certificate does not carry the address connected to (an \
                         IP address SAN); give --tls-server-name with a name it carries, or make \
                         it one for this address"
                    ),
                }
            }
            E::AlertReceived(A::CertificateRequired) => format!(
                "TLS: {server} requires a client certificate: give --tls-cert and --tls-key (one \
                 signed by the CA {server} trusts)"
            ),
            E::AlertReceived(
                A::UnknownCA | A::BadCertificate | A::CertificateUnknown | A::AccessDenied,
            ) => {
                format!("TLS: {server} refused {mine}: it is not signed by the CA {server} trusts")
            }
            other => format!("TLS: {server}: {}", explain(other)),
        }
    }
}

/// A certificate and key that rustls would not take together.
fn key_error(cert: &PemFile, key: &PemFile, e: &rustls::Error) -> anyhow::Error {
    match e {
        rustls::Error::InconsistentKeys(_) => anyhow::anyhow!(
            "{} is not the key of the certificate in {}: give the key the certificate was made for",
            key.label(),
            cert.label()
        ),
        other => anyhow::anyhow!("{}: {}", key.label(), explain(other)),
    }
}

/// A rustls error in words a user acts on.
pub fn explain(e: &rustls::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => {
                "its certificate is not signed by a trusted CA (unknown issuer)".to_string()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "its certificate is not valid for the name or address used".to_string()
            }
            C::Expired | C::ExpiredContext { .. } => "its certificate has expired".to_string(),
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "its certificate is not valid yet (check both clocks)".to_string()
            }
            C::BadEncoding => "its certificate is malformed".to_string(),
            other => format!("its certificate is refused ({other:?})"),
        },
        E::NoCertificatesPresented => "it showed no certificate".to_string(),
        E::AlertReceived(a) => match a {
            A::CertificateRequired => {
                "the other side requires a client certificate and got none".to_string()
            }
            A::UnknownCA | A::BadCertificate | A::CertificateUnknown | A::AccessDenied => {
                "the other side refused this side's certificate (not signed by the CA it trusts)"
                    .to_string()
            }
            A::CertificateExpired => {
                "the other side found this side's certificate expired".to_string()
            }
            A::ProtocolVersion => "the other side does not speak TLS 1.3".to_string(),
            other => format!("the other side ended the handshake ({other:?})"),
        },
        E::PeerIncompatible(p) => format!("the other side's TLS is incompatible ({p:?})"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the other side does not speak TLS (or not this protocol)".to_string()
        }
        E::General(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for 127.0.0.1 and its key, as PEM files
    /// in `dir`; the certificate is its own CA.
    fn self_signed(dir: &std::path::Path) -> (PemFile, PemFile) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("p");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("cert");
        std::fs::write(dir.join("c.pem"), cert.pem()).expect("write");
        std::fs::write(dir.join("c.key"), key.serialize_pem()).expect("write");
        (
            PemFile::new("--tls-cert", dir.join("c.pem")),
            PemFile::new("--tls-key", dir.join("c.key")),
        )
    }

    #[test]
    fn files_load_into_configs_and_bad_ones_are_named_in_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = self_signed(dir.path());
        let server = ServerTls::load(&ServerFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: Some(PemFile::new("--tls-client-ca", &cert.path)),
        })
        .expect("server");
        assert!(server.client_ca().is_some());
        let client = ClientTls::load(&ClientFiles {
            ca: PemFile::new("--tls-ca", &cert.path),
            identity: Some((cert.clone(), key.clone())),
            server_name: None,
        })
        .expect("client");
        assert_eq!(
            client.server_name("10.0.0.2".parse().expect("ip")),
            ServerName::IpAddress(std::net::IpAddr::from([10, 0, 0, 2]).into())
        );

        // A key that is not the certificate's.
        let (_, other_key) = {
            let other = dir.path().join("other");
            std::fs::create_dir(&other).expect("dir");
            self_signed(&other)
        };
        let err = ServerTls::load(&ServerFiles {
            cert: cert.clone(),
            key: other_key,
            client_ca: None,
        })
        .expect_err("mismatch")
        .to_string();
        assert!(
            err.contains("is not the key of the certificate in --tls-cert"),
            "{err}"
        );
        // The key file where the certificate belongs, and the reverse.
        let swapped = PemFile::new("--tls-cert", &key.path);
        let err = swapped.certificates().expect_err("no cert").to_string();
        assert!(
            err.starts_with("--tls-cert '") && err.contains("holds no certificate"),
            "{err}"
        );
        let err = PemFile::new("--tls-key", &cert.path)
            .private_key()
            .expect_err("no key")
            .to_string();
        assert!(err.contains("holds no private key"), "{err}");
        // Not a regular file, too large: refused without reading on.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
        let err = PemFile::new("--tls-ca", &fifo)
            .roots()
            .expect_err("fifo")
            .to_string();
        assert!(err.contains("is not a regular file"), "{err}");
        let big = dir.path().join("big.pem");
        std::fs::write(&big, vec![b'x'; MAX_PEM_BYTES as usize + 1]).expect("write");
        let err = PemFile::new("--tls-ca", &big)
            .roots()
            .expect_err("big")
            .to_string();
        assert!(err.contains("is larger than"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
