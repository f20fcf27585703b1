//! A journal records the network namespace it was applied in however
//! nettune was started (`--netns`, `ip netns exec`, `nsenter`), and a
//! rollback restores there, from the host or from inside, or refuses and
//! keeps the state applied. Every namespace here is one the test makes;
//! each check of where a state was recorded comes before any rollback, so
//! a nettune that recorded the wrong place fails before it could restore
//! anything on the host. Needs root.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::common::*;

/// `ip netns exec NS nettune ARGS`: nettune started inside the namespace,
/// without --netns.
fn inside(ns: &str, args: &[&str]) -> (i32, String, String) {
    split(
        Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_nettune")])
            .args(args)
            .output()
            .expect("ip netns exec nettune"),
    )
}

/// A file's text as seen inside namespace `ns` (its own /sys).
fn read_in(ns: &str, path: &str) -> String {
    sh(&["ip", "netns", "exec", ns, "cat", path])
        .trim()
        .to_string()
}

fn history(state: &Path) -> Vec<Value> {
    run_json(&["history", "--json", "--state-dir", s(state)])
        .as_array()
        .expect("states")
        .clone()
}

/// The namespace and veth of the reproduction: `a` with 4 RX queues.
fn namespace_with_veth(tag: &str) -> (Netns, String) {
    let ns = Netns::new(tag);
    let (a, b) = (unique("ja"), unique("jb"));
    ns.veth(&a, (4, 4), &b, (1, 4));
    (ns, a)
}

#[test]
fn a_state_applied_under_ip_netns_exec_is_rolled_back_in_its_namespace() {
    if skip_unless_root("a_state_applied_under_ip_netns_exec_is_rolled_back_in_its_namespace") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("X");
    let (ns, a) = namespace_with_veth("jx");
    let rps = format!("/sys/class/net/{a}/queues/rx-0/rps_cpus");
    let udp = "/proc/sys/net/ipv4/udp_rmem_min";
    let (rps_before, udp_before) = (read_in(&ns.name, &rps), read_in(&ns.name, udp));

    let (code, out, err) = inside(
        &ns.name,
        &["apply", "--profile", "pps", "--state-dir", s(&state)],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("on network namespace {}", ns.name)),
        "{out}"
    );
    assert_ne!(read_in(&ns.name, &rps), rps_before, "RPS set");
    assert_eq!(read_in(&ns.name, udp), "65536");
    let states = history(&state);
    assert_eq!(states[0]["netns"], ns.name.as_str(), "{states:?}");
    assert!(states[0]["netns_inode"].is_u64(), "{states:?}");
    assert_eq!(
        states[0]["place"],
        format!("network namespace {}", ns.name),
        "{states:?}"
    );

    // From the host, as in the report: restored in the namespace.
    let (code, out, err) = run(&["rollback", "--state-dir", s(&state)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 1"), "{out}");
    assert_eq!(read_in(&ns.name, &rps), rps_before);
    assert_eq!(read_in(&ns.name, udp), udp_before);

    // And from inside it.
    let (code, _, err) = inside(
        &ns.name,
        &["apply", "--profile", "pps", "--state-dir", s(&state)],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(read_in(&ns.name, udp), "65536");
    assert_eq!(history(&state)[1]["netns"], ns.name.as_str());
    let (code, out, err) = inside(&ns.name, &["rollback", "--state-dir", s(&state)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 2"), "{out}");
    assert_eq!(read_in(&ns.name, &rps), rps_before);
    assert_eq!(read_in(&ns.name, udp), udp_before);
}

/// A process holding a network namespace without a name (with its own
/// sysfs and a veth), killed on drop.
struct Unnamed(Child);

impl Unnamed {
    fn new() -> Unnamed {
        let (a, b) = (unique("ua"), unique("ub"));
        let script = format!(
            "mount -t sysfs sysfs /sys && ip link set lo up && \
             ip link add {a} numrxqueues 2 numtxqueues 2 type veth peer name {b} && \
             ip link set {a} up && ip link set {b} up && echo ready && exec sleep 120"
        );
        let mut child = Command::new("unshare")
            .args(["--net", "--mount", "--propagation", "private", "sh", "-c"])
            .arg(script)
            .stdout(Stdio::piped())
            .spawn()
            .expect("unshare");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        let ready = BufReader::new(stdout).read_line(&mut line).is_ok() && line.trim() == "ready";
        let held = Unnamed(child);
        assert!(ready, "the namespace was not set up: {line:?}");
        held
    }

    /// `nsenter` into its network and mount namespaces.
    fn nsenter(&self) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.0.id().to_string(), "-n", "-m"]);
        cmd
    }

    fn nettune(&self, args: &[&str]) -> (i32, String, String) {
        split(
            self.nsenter()
                .arg(env!("CARGO_BIN_EXE_nettune"))
                .args(args)
                .output()
                .expect("nsenter nettune"),
        )
    }

    fn read(&self, path: &str) -> String {
        let out = self.nsenter().args(["cat", path]).output().expect("cat");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Unnamed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_state_whose_namespace_cannot_be_reached_is_refused_and_stays_applied() {
    if skip_unless_root("a_state_whose_namespace_cannot_be_reached_is_refused_and_stays_applied") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let udp = "/proc/sys/net/ipv4/udp_rmem_min";

    // A namespace without a name: rolled back from inside it only.
    let state = dir.path().join("unnamed");
    let st = ["--state-dir", s(&state)];
    let held = Unnamed::new();
    let before = held.read(udp);
    let (code, out, err) = held.nettune(&[&["apply", "--profile", "pps"][..], &st].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("without a name"), "{out}");
    assert_eq!(held.read(udp), "65536");
    let states = history(&state);
    assert_eq!(states[0]["netns"], Value::Null, "{states:?}");
    assert!(states[0]["netns_inode"].is_u64(), "{states:?}");
    assert!(
        states[0]["place"]
            .as_str()
            .is_some_and(|p| p.contains("without a name")),
        "{states:?}"
    );
    let (code, _, err) = run(&[&["rollback"][..], &st].concat());
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("without a name") && err.contains("inside that namespace"),
        "{err}"
    );
    assert_eq!(history(&state)[0]["status"], "complete");
    assert_eq!(held.read(udp), "65536");
    let (code, out, err) = held.nettune(&[&["rollback"][..], &st].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 1"), "{out}");
    assert_eq!(held.read(udp), before);
    drop(held);

    // A named namespace deleted since: refused, kept, and a host state is
    // never rolled back from inside a namespace.
    let state = dir.path().join("named");
    let st = ["--state-dir", s(&state)];
    let (gone, _) = namespace_with_veth("jg");
    let (code, _, err) = inside(
        &gone.name,
        &[&["apply", "--profile", "pps"][..], &st].concat(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(history(&state)[0]["netns"], gone.name.as_str());
    let gone_name = gone.name.clone();
    drop(gone);
    let (code, _, err) = run(&[&["rollback"][..], &st].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing to roll back"), "{err}");
    let (code, _, err) = run(&[&["rollback", "1"][..], &st].concat());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("'{gone_name}' no longer exists")) && err.contains("--forget 1"),
        "{err}"
    );
    assert_eq!(history(&state)[0]["status"], "complete");

    // A state recorded as the host's (copied from state 1 with its
    // namespace removed), rolled back from inside a namespace: refused.
    let text = std::fs::read_to_string(state.join("state-0001.json")).expect("read");
    let mut host_state: Value = serde_json::from_str(&text).expect("json");
    host_state["id"] = Value::from(2);
    host_state["netns"] = Value::Null;
    host_state["netns_inode"] = Value::Null;
    host_state
        .as_object_mut()
        .expect("object")
        .remove("netns_cookie");
    std::fs::write(state.join("state-0002.json"), host_state.to_string()).expect("write");
    let (ns, _) = namespace_with_veth("jh");
    let before = read_in(&ns.name, udp);
    let (code, _, err) = inside(&ns.name, &[&["rollback"][..], &st].concat());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("state 2 was applied on the host") && err.contains(&ns.name),
        "{err}"
    );
    assert_eq!(history(&state)[1]["status"], "complete");
    assert_eq!(read_in(&ns.name, udp), before);
}
