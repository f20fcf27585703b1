//! `nettune doctor` from the outside: bad input exits 2 with a message
//! that shows what would have been right.

use std::process::Command;

fn doctor(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nettune"))
        .arg("doctor")
        .args(args)
        .output()
        .expect("run nettune");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_ignore_id_exits_2_listing_the_valid_ids() {
    let (code, err) = doctor(&["--ignore", "cpu.mitigations,irq.onecpu"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'irq.onecpu'"), "{err}");
    assert!(
        err.contains("irq.one-cpu") && err.contains("softnet.drops"),
        "{err}"
    );
}

#[test]
fn malformed_bandwidth_or_rtt_exits_2_with_an_example() {
    let (code, err) = doctor(&["--bandwidth", "10 gigs", "--rtt", "50ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'10 gigs'") && err.contains("10gbit"), "{err}");

    let (code, err) = doctor(&["--bandwidth", "10gbit", "--rtt", "-5ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'-5ms'") && err.contains("50ms"), "{err}");
}
