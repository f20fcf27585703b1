//! `nettune serve` and its clients over TLS 1.3, with certificates this
//! test makes (rcgen): benches end to end (the stream test's own control
//! connection too), a daemon certificate from another CA, client
//! certificates required or refused, TLS meeting plain text (one clear
//! line, no hang), and certificate files that do not load.
//!
//! Traffic stays on loopback; every process is bounded in time.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::Value;

use crate::common::{finish_bounded, measuring, nettune, run};
use crate::serve::{
    client, daemon_with_token, plain_answer, refused_before_connecting, Daemon, BENCHES,
};

struct Ca {
    params: CertificateParams,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name.push(DnType::CommonName, name);
    Ca { params, key }
}

impl Ca {
    fn pem(&self) -> String {
        self.params
            .self_signed(&self.key)
            .expect("self-signed")
            .pem()
    }

    /// A certificate for `names` (an IP address is an IP SAN) and its key.
    fn sign(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("params");
        params.extended_key_usages = vec![usage];
        params
            .distinguished_name
            .push(DnType::CommonName, names[0].as_str());
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    }
}

/// Every file a test needs, in a temp dir of its own.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        let good = ca("nettune test CA");
        let other = ca("another CA");
        let clients = ca("nettune test client CA");
        write("ca.pem", &good.pem());
        write("other-ca.pem", &other.pem());
        write("client-ca.pem", &clients.pem());
        let (cert, key) = good.sign(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
        write("daemon.pem", &cert);
        write("daemon.key", &key);
        let (cert, key) = other.sign(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
        write("impostor.pem", &cert);
        write("impostor.key", &key);
        let (cert, key) = clients.sign(&["bench-client"], ExtendedKeyUsagePurpose::ClientAuth);
        write("client.pem", &cert);
        write("client.key", &key);
        let (cert, key) = other.sign(&["rogue-client"], ExtendedKeyUsagePurpose::ClientAuth);
        write("rogue.pem", &cert);
        write("rogue.key", &key);
        Pki { dir }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// The daemon's TLS flags: its certificate, and `extra`.
    fn daemon(&self, cert: &str, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "--tls-cert".to_string(),
            self.arg(&format!("{cert}.pem")),
            "--tls-key".to_string(),
            self.arg(&format!("{cert}.key")),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

const RR: [&str; 7] = ["rr", "--proto", "tcp", "--duration", "0.5", "--warmup", "0"];

/// `RR` with `tls` flags after it.
fn rr_with(tls: &[String]) -> Vec<String> {
    RR.iter()
        .map(|a| a.to_string())
        .chain(tls.iter().cloned())
        .collect()
}

/// A failed client: exit 2, one line on stderr, which is returned.
fn one_line_failure(daemon: &Daemon, token: Option<&Path>, args: &[String]) -> String {
    let (code, report, stderr) = client(daemon, token, &strs(args));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(report.is_none(), "{report:?}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn benches_run_over_tls_end_to_end_and_plain_clients_are_refused() {
    let _serial = measuring();
    let pki = Pki::new();
    let (daemon, token) = daemon_with_token(pki.dir.path(), &strs(&pki.daemon("daemon", &[])));
    let tls = ["--tls-ca".to_string(), pki.arg("ca.pem")];
    // rr, udp-flood, http and stream (whose own control connection, to the
    // daemon's stream-server, carries the server's side of every stream:
    // that server refuses a plain one).
    for (bench, args, path) in BENCHES {
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string())
            .chain(tls.iter().cloned())
            .collect();
        let (code, report, stderr) = client(&daemon, Some(&token), &strs(&args));
        assert_eq!(code, Some(0), "{bench}: {stderr}\n{}", daemon.log());
        let report = report.unwrap_or_else(|| panic!("{bench}: no JSON: {stderr}"));
        let remote = &report["remote"];
        assert_eq!(remote["ended"], "finished", "{remote:#}");
        assert!(
            remote["report"]
                .pointer(path)
                .and_then(Value::as_f64)
                .is_some_and(|v| v > 0.0),
            "{bench}: {path} in {remote:#}"
        );
        if bench == "stream-server" {
            // Both sides of the stream: the server's came over TLS.
            assert!(
                report["server"]["bytes"].as_u64().is_some_and(|b| b > 0)
                    && report["end"]["bytes_match"] == true,
                "{report:#}"
            );
        }
    }
    assert!(daemon.log().contains("TLS 1.3"), "{}", daemon.log());
    // A client without --tls-ca is told what to give.
    let stderr = one_line_failure(&daemon, Some(&token), &rr_with(&[]));
    assert!(
        stderr.contains("speaks TLS only") && stderr.contains("--tls-ca"),
        "{stderr}"
    );
    // So is a client of before TLS (its preamble's flags are zero): the
    // refusal comes in plain text, as every error did.
    let answer = plain_answer(&daemon.addr, b"NTsv\x00\x01\x00\x00");
    assert!(
        answer.contains("\"type\":\"error\"") && answer.contains("speaks TLS only"),
        "{answer}"
    );
}

#[test]
fn a_daemon_certificate_from_another_ca_or_for_another_name_is_refused() {
    let pki = Pki::new();
    // The daemon's certificate comes from a CA the client does not trust.
    let (daemon, token) = daemon_with_token(pki.dir.path(), &strs(&pki.daemon("impostor", &[])));
    let tls = ["--tls-ca".to_string(), pki.arg("ca.pem")];
    let stderr = one_line_failure(&daemon, Some(&token), &rr_with(&tls));
    assert!(
        stderr.contains("not signed by the CA in --tls-ca") && stderr.contains("ca.pem"),
        "{stderr}"
    );
    daemon.wait_log("TLS");
    drop(daemon);
    // The right CA, but the certificate does not carry the name asked for.
    let daemon = Daemon::start(
        pki.dir.path(),
        Some(&token),
        &strs(&pki.daemon("daemon", &[])),
    );
    let tls = [
        "--tls-ca".to_string(),
        pki.arg("ca.pem"),
        "--tls-server-name".to_string(),
        "serve.example".to_string(),
    ];
    let stderr = one_line_failure(&daemon, Some(&token), &rr_with(&tls));
    assert!(
        stderr.contains("does not carry the name --tls-server-name 'serve.example'"),
        "{stderr}"
    );
}

#[test]
fn client_certificates_are_required_by_tls_client_ca_and_checked() {
    let pki = Pki::new();
    // No token: the client certificate is the authentication.
    let daemon = Daemon::start(
        pki.dir.path(),
        None,
        &strs(&pki.daemon("daemon", &["--tls-client-ca", &pki.arg("client-ca.pem")])),
    );
    assert!(
        daemon
            .wait_log("listening")
            .contains("authenticate with their certificate"),
        "{}",
        daemon.log()
    );
    let ca = ["--tls-ca".to_string(), pki.arg("ca.pem")];
    let stderr = one_line_failure(&daemon, None, &rr_with(&ca));
    assert!(
        stderr.contains("requires a client certificate") && stderr.contains("--tls-cert"),
        "{stderr}"
    );
    let rogue: Vec<String> = ca
        .iter()
        .cloned()
        .chain([
            "--tls-cert".to_string(),
            pki.arg("rogue.pem"),
            "--tls-key".to_string(),
            pki.arg("rogue.key"),
        ])
        .collect();
    let stderr = one_line_failure(&daemon, None, &rr_with(&rogue));
    assert!(
        stderr.contains("refused this client's certificate") && stderr.contains("rogue.pem"),
        "{stderr}"
    );
    let good: Vec<String> = ca
        .iter()
        .cloned()
        .chain([
            "--tls-cert".to_string(),
            pki.arg("client.pem"),
            "--tls-key".to_string(),
            pki.arg("client.key"),
        ])
        .collect();
    let (code, report, stderr) = client(&daemon, None, &strs(&rr_with(&good)));
    assert_eq!(code, Some(0), "{stderr}\n{}", daemon.log());
    assert_eq!(report.expect("report")["remote"]["bench"], "rr-server");
    let log = daemon.log();
    assert!(log.contains("TLS"), "{log}");
}

/// A fake daemon of before TLS: it answers any preamble with its plain
/// challenge, as such a daemon does, and holds the connection open.
fn plain_challenger() -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let handle = std::thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else {
            return;
        };
        let mut preamble = [0u8; 8];
        if conn.read_exact(&mut preamble).is_err() {
            return;
        }
        let body = format!(
            r#"{{"type":"challenge","version":1,"nonce":"{}","auth":"token"}}"#,
            "ab".repeat(32)
        );
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body.as_bytes());
        let _ = conn.write_all(&frame);
        let _ = conn.set_read_timeout(Some(Duration::from_secs(15)));
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
    });
    (addr, handle)
}

#[test]
fn tls_meeting_plain_text_fails_at_once_with_one_line() {
    let pki = Pki::new();
    let tls = ["--tls-ca".to_string(), pki.arg("ca.pem")];
    // A TLS client, a plain daemon of this version.
    let daemon = Daemon::start(pki.dir.path(), None, &[]);
    let stderr = one_line_failure(&daemon, None, &rr_with(&tls));
    assert!(
        stderr.contains("asks for TLS") && stderr.contains("--tls-cert"),
        "{stderr}"
    );
    // A TLS client, a daemon of before TLS.
    let (addr, fake) = plain_challenger();
    let child = nettune()
        .arg("bench")
        .args(strs(&rr_with(&tls)))
        .args(["--remote", &addr, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client");
    let (code, _, stderr) = finish_bounded(child, Duration::from_secs(20));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not speak TLS"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let _ = fake.join();
}

#[test]
fn certificate_files_that_do_not_load_stop_the_daemon_with_one_line() {
    let pki = Pki::new();
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").expect("write");
    let cases: [(&[String], &str); 4] = [
        (
            &pki.daemon("daemon", &[])[..2],
            "required arguments were not provided",
        ),
        (
            &[
                "--tls-cert".to_string(),
                pki.arg("missing.pem"),
                "--tls-key".to_string(),
                pki.arg("daemon.key"),
            ],
            "--tls-cert",
        ),
        (
            &[
                "--tls-cert".to_string(),
                garbage.display().to_string(),
                "--tls-key".to_string(),
                pki.arg("daemon.key"),
            ],
            "holds no certificate",
        ),
        (
            &[
                "--tls-cert".to_string(),
                pki.arg("daemon.pem"),
                "--tls-key".to_string(),
                pki.arg("client.key"),
            ],
            "is not the key of the certificate",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["serve", "--bind", "127.0.0.1:0"];
        args.extend(strs(flags));
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // A client's CA file is checked before it connects.
    let stderr = refused_before_connecting(&["--tls-ca", garbage.to_str().expect("path")]);
    assert!(
        stderr.contains("--tls-ca") && stderr.contains("holds no certificate"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// The stream test's control connection, as a library user drives it: a
/// stream-server with TLS refuses a plain client in one line and serves a
/// TLS one, whose report then has the server's side.
#[test]
fn the_stream_control_connection_speaks_tls_when_the_server_does() {
    use nettune::base::observe::Quiet;
    use nettune::base::stop::Stop;
    use nettune::base::tls::{ClientFiles, ClientTls, PemFile, ServerFiles, ServerTls};
    use nettune::bench::stream;

    let _serial = measuring();
    let pki = Pki::new();
    let server_tls = ServerTls::load(&ServerFiles {
        cert: PemFile::new("cert", pki.path("daemon.pem")),
        key: PemFile::new("key", pki.path("daemon.key")),
        client_ca: None,
    })
    .expect("server TLS");
    let client_tls = ClientTls::load(&ClientFiles {
        ca: PemFile::new("ca", pki.path("ca.pem")),
        identity: None,
        server_name: None,
    })
    .expect("client TLS");
    let mut config = stream::ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
    config.tls = Some(server_tls);
    config.duration = Some(Duration::from_secs(20));
    let server = stream::open_server(config).expect("open");
    let at = server.local_addr();
    let stop = Stop::new();
    std::thread::scope(|s| {
        let serving = s.spawn(|| server.run(&stop, &mut Quiet));
        let mut client = stream::StreamConfig::new(at);
        client.duration = Duration::from_millis(300);
        client.size = 64 << 10;
        client.pace = Some(200_000_000);
        let err = stream::run_client(&client, &Stop::new(), &mut Quiet)
            .map(|_| ())
            .expect_err("plain");
        let err = format!("{err:#}");
        assert!(err.contains("speaks TLS only"), "{err}");
        client.tls = Some(client_tls);
        let report = stream::run_client(&client, &Stop::new(), &mut Quiet);
        stop.trigger();
        let report = report.expect("over TLS");
        let server_side = report.server.as_ref().expect("the server's side");
        assert!(server_side.bytes > 0, "{server_side:?}");
        let served = serving.join().expect("server thread").expect("server");
        assert_eq!(served.refused.tls, 1, "{:?}", served.refused);
    });
}

#[test]
fn experiment_run_remote_speaks_tls_to_the_daemon() {
    let _serial = measuring();
    let pki = Pki::new();
    let (daemon, token) = daemon_with_token(pki.dir.path(), &strs(&pki.daemon("daemon", &[])));
    let out = pki.path("exp");
    let state = pki.path("state");
    let token = token.display().to_string();
    let ca = pki.arg("ca.pem");
    let run_with = |tls: &[&str], out: &Path| {
        let mut args = vec!["--remote", &daemon.addr, "--token-file", &token];
        args.extend_from_slice(tls);
        args.extend_from_slice(&["--configs", "current", "--bench", "rr --proto tcp"]);
        args.extend_from_slice(&["--repeat", "1", "--duration", "1s", "--warmup", "0"]);
        crate::experiment::experiment_run(&args, out, &state)
            .spawn()
            .expect("experiment")
    };
    let child = run_with(&["--tls-ca", &ca], &out);
    let (code, stdout, stderr) = finish_bounded(child, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}\n{}", daemon.log());
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("json");
    for run in results["runs"].as_array().expect("runs") {
        assert!(run["value"].as_f64().is_some_and(|v| v > 0.0), "{run}");
    }
    let log = daemon.log();
    assert!(
        log.contains("TLS 1.3") && log.contains("ended (finished)"),
        "{log}"
    );
    // Without --tls-ca the experiment stops at once, with the reason.
    let child = run_with(&[], &pki.path("exp2"));
    let (code, _, stderr) = finish_bounded(child, Duration::from_secs(60));
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("speaks TLS only"), "{stderr}");
}
