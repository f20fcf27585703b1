//! `nettune testbed up --scenario NAME`: each scenario builds a testbed
//! whose problem `doctor --netns` names, the scenario's profile applied
//! with `--netns` makes doctor stop naming it, and `testbed down` removes
//! everything. Speed is not asserted here: bench/scenarios.sh measures the
//! gain. The namespace tests need root.

use serde_json::Value;

use crate::common::*;

const SCENARIOS: &[&str] = &[
    "reader-on-softirq-cpu",
    "softirq-on-app-cpu",
    "bulk-small-buffers",
];

#[test]
fn scenarios_are_listed_one_line_each_and_an_unknown_one_is_refused() {
    for args in [
        &["testbed", "scenarios"][..],
        &["testbed", "up", "--scenario", "help"],
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        for name in SCENARIOS {
            let lines: Vec<&str> = stdout
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{name} ")))
                .collect();
            assert_eq!(lines.len(), 1, "{args:?}: one line for {name}:\n{stdout}");
        }
    }
    let name = unique("scn");
    let (code, _, stderr) = run(&["testbed", "up", "--name", &name, "--scenario", "nope"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unknown scenario 'nope'") && stderr.contains("softirq-on-app-cpu"),
        "{stderr}"
    );
    assert!(
        !std::path::Path::new(&format!("/run/netns/ntb-{name}-server")).exists(),
        "nothing may be made for an unknown scenario"
    );
    // A scenario sets its own queue count.
    let (code, _, stderr) = run(&[
        "testbed",
        "up",
        "--scenario",
        "softirq-on-app-cpu",
        "--queues",
        "4",
    ]);
    assert_eq!(code, 2, "{stderr}");
}

/// A scenario testbed, removed on drop (also when an assertion fails).
struct Bed {
    name: String,
    up: Value,
}

impl Bed {
    fn up(scenario: &str) -> Bed {
        let name = unique("scn");
        let up = run_json(&[
            "testbed",
            "up",
            "--name",
            &name,
            "--scenario",
            scenario,
            "--json",
        ]);
        Bed {
            name: up["name"].as_str().expect("name").to_string(),
            up,
        }
    }

    fn server(&self) -> &str {
        self.up["server"]["netns"].as_str().expect("server netns")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = nettune().args(["testbed", "down", &self.name]).output();
    }
}

/// The ids doctor names in `netns` about its veth or its sysctls (totals:
/// the counters do not matter to these rules), with `path` (--bandwidth,
/// --rtt) passed on.
fn named(netns: &str, path: &[&str]) -> Vec<String> {
    let mut args = vec!["doctor", "--netns", netns, "--interval", "0", "--json"];
    args.extend(path);
    // Exit 1: findings at warn or above; 2 would be a failure to judge.
    let (code, stdout, stderr) = run(&args);
    assert!(code == 0 || code == 1, "doctor: exit {code}: {stderr}");
    let doc: Value = serde_json::from_str(&stdout).expect("doctor JSON");
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["id"].as_str().expect("id").to_string())
        .collect()
}

#[test]
fn each_scenario_is_named_by_doctor_and_fixed_by_its_profile() {
    if skip_unless_root("each_scenario_is_named_by_doctor_and_fixed_by_its_profile") {
        return;
    }
    for scenario in SCENARIOS {
        let bed = Bed::up(scenario);
        assert_eq!(bed.up["scenario"], *scenario, "{:#}", bed.up);
        let finding = bed.up["finding"].as_str().expect("finding").to_string();
        let profile = bed.up["profile"].as_str().expect("profile").to_string();
        // The commands that show it run inside the testbed's namespaces.
        let server = bed.up["commands"]["server"].as_str().expect("server");
        assert!(
            server.contains(&format!("--netns {}", bed.server())),
            "{server}"
        );
        // What doctor and apply need to see it (the path, for buffers).
        let doctor = bed.up["commands"]["doctor"].as_str().expect("doctor");
        let path: Vec<&str> = doctor.split_whitespace().skip(4).collect();

        let before = named(bed.server(), &path);
        assert!(
            before.contains(&finding),
            "{scenario}: doctor does not name {finding}: {before:?}"
        );

        let state = tempfile::tempdir().expect("state dir");
        let (code, stdout, stderr) = run(&apply_args(&profile, bed.server(), s(state.path())));
        assert_eq!(code, 0, "{scenario}: apply: {stdout}{stderr}");
        let after = named(bed.server(), &path);
        assert!(
            !after.contains(&finding),
            "{scenario}: {finding} still named after apply --profile {profile}: {after:?}"
        );

        let (code, stdout, stderr) = run(&["testbed", "down", &bed.name]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(&bed.name), "{stdout}");
        assert!(
            !std::path::Path::new(&format!("/run/netns/{}", bed.server())).exists(),
            "{scenario}: the server namespace is left"
        );
    }
}

#[test]
fn rps_one_cpu_is_the_scenario_not_the_plain_testbed() {
    if skip_unless_root("rps_one_cpu_is_the_scenario_not_the_plain_testbed") {
        return;
    }
    // The plain testbed's veth has RPS off (rps.off); only the scenario
    // piles its receive work on one CPU.
    let name = unique("scn");
    let up = run_json(&["testbed", "up", "--name", &name, "--queues", "2", "--json"]);
    let plain = Bed { name, up };
    let plain_ids = named(plain.server(), &[]);
    assert!(
        !plain_ids.contains(&"rps.one-cpu".to_string()),
        "{plain_ids:?}"
    );
    assert!(plain_ids.contains(&"rps.off".to_string()), "{plain_ids:?}");
    // Nor are its buffers too small for the path the buffer scenario
    // judges with.
    let path = ["--bandwidth", "10gbit", "--rtt", "100us"];
    let plain_ids = named(plain.server(), &path);
    assert!(
        !plain_ids.contains(&"tcp.buffers-small".to_string()),
        "{plain_ids:?}"
    );
    drop(plain);

    let bed = Bed::up("softirq-on-app-cpu");
    let masks = sh(&[
        "ip",
        "netns",
        "exec",
        bed.server(),
        "sh",
        "-c",
        "cat /sys/class/net/tb-server/queues/rx-*/rps_cpus",
    ]);
    let masks: Vec<&str> = masks.split_whitespace().collect();
    assert_eq!(masks.len(), 2, "{masks:?}");
    assert!(
        masks.iter().all(|m| m.trim_start_matches('0') == "2"),
        "{masks:?}"
    );
}
