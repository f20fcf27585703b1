//! `nettune monitor --prometheus --web-config FILE`: the exporter-toolkit
//! web configuration. A real Prometheus scrapes over TLS 1.3 with a client
//! certificate and basic auth; curl with a wrong password gets 401, and
//! without a client certificate no answer at all; files that cannot be
//! used are one line and exit 2; an exporter reachable from other hosts
//! without the file says to give it.
//!
//! Traffic stays on loopback; every process is stopped by its PID.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{measuring, run, s};
use crate::monitor_prom::{value_of, Exporter, Prometheus};
use crate::serve_tls::Pki;

const USER: &str = "prometheus";
const PASSWORD: &str = "scrape-secret";

/// A web config in `pki`'s directory (file names relative to it, as
/// operators write them): TLS with the test CA's server certificate,
/// client certificates from the client CA required, one user.
fn web_config(pki: &Pki) -> PathBuf {
    // Cost 4 (the least) keeps the test quick; the check is the same.
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let text = format!(
        "tls_server_config:\n  cert_file: daemon.pem\n  key_file: daemon.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.pem\n\
         basic_auth_users:\n  {USER}: '{hash}'\n"
    );
    let path = pki.path("web.yml");
    std::fs::write(&path, text).expect("write web.yml");
    path
}

/// curl's answer to GET /metrics: its exit code and the HTTP status it
/// printed (`000`: none), and curl's own message (stderr) for the
/// assertions' text: why it failed, when it did.
fn curl(addr: std::net::SocketAddr, pki: &Pki, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-o", "/dev/null"])
        .args(["-w", "%{http_code}", "--cacert", &pki.arg("ca.pem")])
        .args(extra)
        .arg(format!("https://{addr}/metrics"))
        .output()
        .expect("curl");
    let status = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    (out.status.code().unwrap_or(-1), status, why)
}

#[test]
fn prometheus_scrapes_over_tls_with_basic_auth_and_others_are_refused() {
    let _serial = measuring();
    let pki = Pki::new();
    let config = web_config(&pki);
    let exporter = Exporter::start(&["--web-config", s(&config), "--interval", "0.5"]);
    let job = format!(
        "    scheme: https\n    tls_config:\n      ca_file: {}\n      cert_file: {}\n      \
         key_file: {}\n    basic_auth:\n      username: {USER}\n      password: {PASSWORD}\n",
        pki.arg("ca.pem"),
        pki.arg("client.pem"),
        pki.arg("client.key")
    );
    let prometheus = Prometheus::start_with(&[exporter.addr], &job, &[]);
    let limit = Duration::from_secs(60);
    prometheus.wait_for("up{job=\"nettune\"}", limit, |r| {
        r.first().map(value_of) == Some(1.0)
    });
    let cpus = prometheus.wait_for("count(node_cpu_seconds_total)", limit, |r| {
        r.first().map(value_of).is_some_and(|v| v > 0.0)
    });
    assert_eq!(cpus.len(), 1, "{cpus:?}");

    let me = format!("{USER}:{PASSWORD}");
    let client = [
        "--cert",
        &pki.arg("client.pem"),
        "--key",
        &pki.arg("client.key"),
    ];
    let (code, status, why) = curl(exporter.addr, &pki, &[&client[..], &["-u", &me]].concat());
    assert_eq!((code, status.as_str()), (0, "200"), "{why}");
    // A wrong password, and none: 401.
    let wrong = format!("{USER}:not-{PASSWORD}");
    let (code, status, why) = curl(
        exporter.addr,
        &pki,
        &[&client[..], &["-u", &wrong]].concat(),
    );
    assert_eq!((code, status.as_str()), (0, "401"), "{why}");
    let (code, status, why) = curl(exporter.addr, &pki, &client);
    assert_eq!((code, status.as_str()), (0, "401"), "{why}");
    // No client certificate where one is required: the handshake is
    // refused, so no HTTP answer at all, not even with the password.
    let (code, status, _) = curl(exporter.addr, &pki, &["-u", &me]);
    assert_ne!(code, 0, "{status}");
    assert_eq!(status, "000");
    // A certificate from a CA the exporter does not trust: the same.
    let rogue = [
        "--cert",
        &pki.arg("rogue.pem"),
        "--key",
        &pki.arg("rogue.key"),
    ];
    let (code, status, _) = curl(exporter.addr, &pki, &[&rogue[..], &["-u", &me]].concat());
    assert_ne!(code, 0, "{status}");
    assert_eq!(status, "000");

    // Prometheus still scrapes after those were turned away: a scrape
    // completed after them is healthy.
    let seen = prometheus.target();
    let target = prometheus.wait_healthy_scrape(Some(&seen["lastScrape"]), limit);
    assert_eq!(target["health"], "up", "{target}");
    assert_eq!(
        target["scrapeUrl"],
        format!("https://{}/metrics", exporter.addr)
    );
    drop(prometheus);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("serving Prometheus metrics at https://")
            && err.contains("TLS and basic auth"),
        "{err}"
    );
}

/// Each bad file: exit 2, one line naming the file and what is wrong,
/// and nothing served.
#[test]
fn a_web_config_that_cannot_be_used_is_one_line_and_exit_2() {
    let pki = Pki::new();
    let write = |name: &str, text: &str| -> PathBuf {
        let path = pki.path(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let missing_cert = write(
        "missing-cert.yml",
        "tls_server_config:\n  cert_file: absent.pem\n  key_file: daemon.key\n",
    );
    let plain_password = write("plain.yml", "basic_auth_users:\n  prometheus: hunter2\n");
    let unknown = write(
        "unknown.yml",
        "tls_server_config:\n  certfile: daemon.pem\n",
    );
    let no_ca = write(
        "no-ca.yml",
        "tls_server_config:\n  cert_file: daemon.pem\n  key_file: daemon.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n",
    );
    let cases: [(&Path, &str); 5] = [
        (&missing_cert, "cert_file"),
        (&plain_password, "not a bcrypt hash"),
        (&unknown, "certfile"),
        (&no_ca, "client_ca_file"),
        (&pki.path("nowhere.yml"), "nowhere.yml"),
    ];
    for (file, want) in cases {
        let (code, out, err) = run(&[
            "monitor",
            "--prometheus",
            "--bind",
            "127.0.0.1:0",
            "--web-config",
            s(file),
        ]);
        assert_eq!(code, 2, "{}: {err}", file.display());
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains("--web-config '") && err.contains(want),
            "{}: {err}",
            file.display()
        );
        assert!(!err.contains("serving"), "{err}");
    }
    let (code, _, err) = run(&["monitor", "--once", "--web-config", s(&missing_cert)]);
    assert_eq!(code, 2, "{err}");
}

/// Listening on every address without --web-config: a warning that names
/// the flag; with it (TLS and a password), none.
#[test]
fn an_exporter_reachable_from_other_hosts_without_web_config_says_to_give_it() {
    let exporter = Exporter::start_at("0.0.0.0:0", &[]);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    let warning: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warning.len(), 1, "{err}");
    assert!(
        warning[0].contains("--web-config FILE") && warning[0].contains("other hosts"),
        "{err}"
    );

    let pki = Pki::new();
    let config = web_config(&pki);
    let exporter = Exporter::start_at("0.0.0.0:0", &["--web-config", s(&config)]);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
}
