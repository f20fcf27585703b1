//! The live setters on a veth pair in a namespace this test creates:
//! SCHANNELS and SFEATURES take, what veth lacks is refused with
//! EOPNOTSUPP, RTM_NEWQDISC installs a qdisc the kernel has and names the
//! one it lacks (fq), RTM_DELQDISC puts the default back. Needs root.

use std::fs::File;

use nettune::base::driver::{ChannelKind, DriverSetting};
use nettune::base::driver::{Ethtool, EthtoolSet, Netlink, QdiscSet, QdiscSpec};
use nettune::base::Probe;
use nettune::nic::live::{LiveEthtool, LiveNetlink};
use nix::sched::CloneFlags;

use crate::common::*;

/// Run `f` on a thread inside the namespace: its sockets belong there.
fn inside<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{}", ns.name);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = File::open(&path).expect("open the netns file");
                nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).expect("setns");
                f()
            })
            .join()
            .expect("netns thread")
    })
}

#[test]
fn veth_setters_change_refuse_and_restore() {
    if skip_unless_root("veth_setters_change_refuse_and_restore") {
        return;
    }
    let ns = Netns::new("set");
    let a = format!("sa{}", std::process::id());
    let b = format!("sb{}", std::process::id());
    ns.veth(&a, (4, 4), &b, (4, 4));

    inside(&ns, || {
        // Channels: 4 -> 2 -> 4.
        let rx = |n| DriverSetting::Channels {
            kind: ChannelKind::Rx,
            count: n,
        };
        LiveEthtool.set(&a, &rx(2)).expect("set rx channels");
        let channels = *LiveEthtool.query(&a).channels.value().expect("channels");
        assert_eq!(channels.rx, 2);
        assert_eq!(channels.tx, 4, "the other counts keep their values");
        LiveEthtool.set(&a, &rx(4)).expect("restore rx channels");
        assert_eq!(
            LiveEthtool.query(&a).channels.value().expect("channels").rx,
            4
        );

        // Features, under either name.
        let gro = |settings: &nettune::base::driver::DriverSettings| {
            settings.features.value().expect("features")["rx-gro"].active
        };
        let was = gro(&LiveEthtool.query(&a));
        let flip = DriverSetting::Feature {
            name: "generic-receive-offload".to_string(),
            on: !was,
        };
        LiveEthtool.set(&a, &flip).expect("flip GRO");
        assert_eq!(gro(&LiveEthtool.query(&a)), !was);
        let back = DriverSetting::Feature {
            name: "rx-gro".to_string(),
            on: was,
        };
        LiveEthtool.set(&a, &back).expect("GRO back");
        assert_eq!(gro(&LiveEthtool.query(&a)), was);

        // What veth lacks.
        for refused in [
            DriverSetting::RingRx(256),
            DriverSetting::AdaptiveRx(true),
            DriverSetting::FlowHash {
                flow_type: "udp4".to_string(),
                hash: nettune::base::driver::setting::parse_flow_hash("sdfn").expect("hash"),
            },
        ] {
            let err = LiveEthtool.set(&a, &refused).expect_err("veth lacks it");
            assert_eq!(err.errno, libc::EOPNOTSUPP, "{refused}: {err}");
        }
        let err = LiveEthtool
            .set("nonexistent0", &DriverSetting::RingRx(1))
            .expect_err("no such interface");
        assert_eq!(err.errno, libc::ENODEV);

        // Root qdisc: a kind this kernel has, then back to the default.
        let default = LiveNetlink.root_qdisc(&a);
        let Probe::Value(default) = default else {
            panic!("root qdisc of {a}: {default:?}");
        };
        let pfifo = QdiscSpec {
            kind: "pfifo_fast".to_string(),
            maxrate_bytes: None,
        };
        LiveNetlink.replace_root(&a, &pfifo).expect("pfifo_fast");
        let now = LiveNetlink.root_qdisc(&a);
        let now = now.value().expect("qdisc");
        assert_eq!(now.kind, "pfifo_fast");
        assert_ne!(
            now.handle, "0:",
            "an installed qdisc has a handle of its own"
        );
        LiveNetlink.reset_root(&a, &default).expect("reset");
        assert_eq!(LiveNetlink.root_qdisc(&a), Probe::Value(default.clone()));
        // Resetting a default root is a no-op, not an error.
        LiveNetlink.reset_root(&a, &default).expect("reset again");

        // fq is missing on these kernels (ENVIRONMENT): a clear refusal.
        let fq = QdiscSpec {
            kind: "fq".to_string(),
            maxrate_bytes: Some(250_000_000),
        };
        match LiveNetlink.replace_root(&a, &fq) {
            Err(err) => {
                assert_eq!(err.errno, libc::ENOENT, "{err}");
                assert!(
                    err.message.contains("qdisc kind is unknown"),
                    "{}",
                    err.message
                );
                assert_eq!(LiveNetlink.root_qdisc(&a), Probe::Value(default));
            }
            // A kernel with sch_fq: it took; put the default back.
            Ok(()) => {
                assert_eq!(LiveNetlink.root_qdisc(&a).value().expect("fq").kind, "fq");
                LiveNetlink
                    .reset_root(&a, &default)
                    .expect("reset after fq");
            }
        }
    });
}
