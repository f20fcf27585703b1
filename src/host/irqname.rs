//! Which interface and queue an IRQ belongs to, from its action name in
//! /proc/interrupts. Drivers name vectors in a handful of styles:
//!
//! | style                          | driver                      | role          |
//! |--------------------------------|-----------------------------|---------------|
//! | `eth0-0`                       | bnx2, sfc, tg3              | combined      |
//! | `eth0-TxRx-0`, `eth0-fp-0`     | ixgbe, igb, i40e, ice, bnx2x| combined      |
//! | `i40e-eth0-TxRx-0`             | i40e, ice, iavf             | combined      |
//! | `ens5-Tx-Rx-0`                 | ena                         | combined      |
//! | `eth0-rx-0`, `eth0-tx0`        | igb, e1000e, ixgbe (split)  | rx / tx       |
//! | `eth0`                         | ixgbe, e1000e link vector   | other         |
//! | `mlx5_comp0@pci:0000:af:00.0`  | mlx5 (by PCI address)       | combined      |
//! | `mlx5_async0@pci:...`, `i40e-0000:3b:00.0:misc`, `ena-mgmnt@pci:...` | | other |
//! | `virtio2-input.0` / `-output.0` / `-config` | virtio_net     | rx / tx / other |

use super::VectorRole;

/// What identifies an interface's vectors: its name, the PCI function of
/// its device, and for virtio_net the virtio device (`virtio2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqOwner<'a> {
    pub iface: &'a str,
    pub pci_address: Option<&'a str>,
    pub virtio_device: Option<&'a str>,
}

/// Drivers that put their own name before the interface's
/// (`i40e-eth0-TxRx-0`). A fixed list, so that interface `lan` does not
/// claim `br-lan-0`.
const DRIVER_PREFIXES: &[&str] = &["i40e", "ice", "iavf", "i40evf", "idpf"];

/// Suffixes of vectors that serve no queue (`eth0-link`, `...:misc`).
const OTHER_SUFFIXES: &[&str] = &["link", "lsc", "mgmt", "misc", "async", "config", "other"];

/// The role and queue of `action` if it is one of `owner`'s vectors,
/// `None` if it is not.
pub fn classify(action: &str, owner: &IrqOwner) -> Option<(VectorRole, Option<u32>)> {
    if let Some(device) = owner.virtio_device {
        if let Some(rest) = action
            .strip_prefix(device)
            .and_then(|r| r.strip_prefix('-'))
        {
            return Some(virtio_vector(rest));
        }
    }
    if let Some(pci) = owner.pci_address {
        if let Some(found) = by_pci_address(action, pci) {
            return Some(found);
        }
    }
    by_iface_name(action, owner.iface)
}

/// `input.N` (RX queue N), `output.N` (TX queue N); `config` and the rest
/// (`control`, a shared `virtqueues` vector) serve no single queue.
fn virtio_vector(rest: &str) -> (VectorRole, Option<u32>) {
    let queue = |prefix: &str| rest.strip_prefix(prefix).and_then(parse_queue);
    if let Some(q) = queue("input.") {
        (VectorRole::Rx, Some(q))
    } else if let Some(q) = queue("output.") {
        (VectorRole::Tx, Some(q))
    } else {
        (VectorRole::Other, None)
    }
}

/// Names that carry the PCI function rather than the interface name:
/// `mlx5_comp3@pci:0000:af:00.0`, `i40e-0000:3b:00.0:misc`,
/// `hns3-0000:7d:00.0-TxRx-2`.
fn by_pci_address(action: &str, pci: &str) -> Option<(VectorRole, Option<u32>)> {
    let (before, after) = find_delimited(action, pci)?;
    if let Some(suffix) = after.strip_prefix('-') {
        return Some(queue_suffix(suffix).unwrap_or((VectorRole::Other, None)));
    }
    let name = before
        .strip_suffix("@pci:")
        .or_else(|| before.strip_suffix('@'))
        .unwrap_or(before);
    // mlx5 completion vectors: one per channel, each serving RX and TX.
    match name.rsplit_once("_comp").and_then(|(_, n)| parse_queue(n)) {
        Some(q) => Some((VectorRole::Combined, Some(q))),
        None => Some((VectorRole::Other, None)),
    }
}

/// `pci` inside `action`, not part of a longer address: the text before
/// and after it.
fn find_delimited<'a>(action: &'a str, pci: &str) -> Option<(&'a str, &'a str)> {
    if pci.is_empty() {
        return None;
    }
    action.match_indices(pci).find_map(|(at, _)| {
        let before = &action[..at];
        let after = &action[at + pci.len()..];
        let clean_start = !before.ends_with(|c: char| c.is_ascii_hexdigit());
        let clean_end = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '.');
        (clean_start && clean_end).then_some((before, after))
    })
}

/// `eth0`, `eth0-<suffix>` or `<driver>-eth0-<suffix>`.
fn by_iface_name(action: &str, iface: &str) -> Option<(VectorRole, Option<u32>)> {
    if iface.is_empty() {
        return None;
    }
    let rest = action.strip_prefix(iface).or_else(|| {
        let (driver, rest) = action.split_once('-')?;
        DRIVER_PREFIXES
            .contains(&driver)
            .then(|| rest.strip_prefix(iface))
            .flatten()
    })?;
    if rest.is_empty() {
        // ixgbe and e1000e name the link vector after the interface alone.
        return Some((VectorRole::Other, None));
    }
    // `eth10-...` and `eth0.100-...` are other interfaces.
    queue_suffix(rest.strip_prefix('-')?)
}

/// The part after `eth0-`: `3`, `TxRx-3`, `Tx-Rx-3`, `fp-3`, `rx-3`,
/// `tx3`, or a non-queue word such as `link`.
fn queue_suffix(suffix: &str) -> Option<(VectorRole, Option<u32>)> {
    if let Some(q) = parse_queue(suffix) {
        return Some((VectorRole::Combined, Some(q)));
    }
    let lower = suffix.to_ascii_lowercase();
    // Combined spellings first: `tx-rx-3` must not be read as `tx` + junk.
    const KINDS: &[(&str, VectorRole)] = &[
        ("txrx", VectorRole::Combined),
        ("tx-rx", VectorRole::Combined),
        ("rxtx", VectorRole::Combined),
        ("rx-tx", VectorRole::Combined),
        ("fp", VectorRole::Combined),
        ("rx", VectorRole::Rx),
        ("tx", VectorRole::Tx),
    ];
    for &(kind, role) in KINDS {
        let Some(rest) = lower.strip_prefix(kind) else {
            continue;
        };
        let number = rest
            .strip_prefix('-')
            .or_else(|| rest.strip_prefix('_'))
            .unwrap_or(rest);
        if let Some(q) = parse_queue(number) {
            return Some((role, Some(q)));
        }
    }
    OTHER_SUFFIXES
        .contains(&lower.as_str())
        .then_some((VectorRole::Other, None))
}

/// A queue number: decimal digits only (`u32::from_str` would take `+3`).
fn parse_queue(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use VectorRole::{Combined, Other, Rx, Tx};

    /// What `classify` should answer for one action name.
    type Expected = Option<(VectorRole, Option<u32>)>;

    const NO_MATCH: Expected = None;

    fn owner<'a>(iface: &'a str, pci: Option<&'a str>, virtio: Option<&'a str>) -> IrqOwner<'a> {
        IrqOwner {
            iface,
            pci_address: pci,
            virtio_device: virtio,
        }
    }

    fn check(owner: &IrqOwner, cases: &[(&str, Expected)]) {
        for &(action, expected) in cases {
            assert_eq!(
                classify(action, owner),
                expected,
                "action '{action}' for {owner:?}"
            );
        }
    }

    #[test]
    fn bnx2_sfc_tg3_numbered_vectors() {
        let eth0 = owner("eth0", Some("0000:01:00.0"), None);
        check(
            &eth0,
            &[
                ("eth0-0", Some((Combined, Some(0)))),
                ("eth0-7", Some((Combined, Some(7)))),
                ("eth0-15", Some((Combined, Some(15)))),
                ("eth0", Some((Other, None))),
                ("eth00-1", NO_MATCH),
                ("eth1-0", NO_MATCH),
                ("eth0-", NO_MATCH),
                ("eth0-+1", NO_MATCH),
            ],
        );
    }

    #[test]
    fn ixgbe_i40e_ice_txrx_vectors() {
        let eth1 = owner("eth1", Some("0000:04:00.0"), None);
        check(
            &eth1,
            &[
                ("eth1-TxRx-0", Some((Combined, Some(0)))),
                ("eth1-TxRx-12", Some((Combined, Some(12)))),
                ("eth1-fp-3", Some((Combined, Some(3)))),
                ("i40e-eth1-TxRx-5", Some((Combined, Some(5)))),
                ("ice-eth1-TxRx-2", Some((Combined, Some(2)))),
                ("iavf-eth1-TxRx-1", Some((Combined, Some(1)))),
                ("eth1", Some((Other, None))),
                ("eth1-link", Some((Other, None))),
                // A longer name that starts with the interface's.
                ("eth10-TxRx-0", NO_MATCH),
                ("eth10", NO_MATCH),
                ("i40e-eth10-TxRx-0", NO_MATCH),
                ("eth1.100-TxRx-0", NO_MATCH),
                // Not a driver prefix this module knows.
                ("br-eth1-0", NO_MATCH),
                ("eth1-TxRx-", NO_MATCH),
                ("eth1-bogus-3", NO_MATCH),
            ],
        );
    }

    #[test]
    fn vlan_interface_claims_only_its_own_name() {
        let vlan = owner("eth0.100", None, None);
        check(
            &vlan,
            &[
                ("eth0.100-TxRx-0", Some((Combined, Some(0)))),
                ("eth0-TxRx-0", NO_MATCH),
                ("eth0.1000-TxRx-0", NO_MATCH),
            ],
        );
        let parent = owner("eth0", None, None);
        check(&parent, &[("eth0.100-TxRx-0", NO_MATCH)]);
    }

    #[test]
    fn separate_rx_and_tx_vectors() {
        let eth3 = owner("eth3", Some("0000:5e:00.0"), None);
        check(
            &eth3,
            &[
                ("eth3-rx-0", Some((Rx, Some(0)))),
                ("eth3-tx-0", Some((Tx, Some(0)))),
                ("eth3-rx-3", Some((Rx, Some(3)))),
                ("eth3-rx0", Some((Rx, Some(0)))),
                ("eth3-tx1", Some((Tx, Some(1)))),
                ("eth3-rx_2", Some((Rx, Some(2)))),
                ("eth3-rx", NO_MATCH),
                ("eth3-rxq-1", NO_MATCH),
                ("eth30-rx-0", NO_MATCH),
            ],
        );
    }

    #[test]
    fn ena_tx_rx_vectors_and_management() {
        let ens5 = owner("ens5", Some("0000:00:05.0"), None);
        check(
            &ens5,
            &[
                ("ens5-Tx-Rx-0", Some((Combined, Some(0)))),
                ("ens5-Tx-Rx-31", Some((Combined, Some(31)))),
                ("ena-mgmnt@pci:0000:00:05.0", Some((Other, None))),
                ("ena-mgmnt@pci:0000:00:06.0", NO_MATCH),
                ("ens50-Tx-Rx-0", NO_MATCH),
            ],
        );
    }

    #[test]
    fn mlx5_vectors_by_pci_address() {
        let port0 = owner("enp175s0f0np0", Some("0000:af:00.0"), None);
        check(
            &port0,
            &[
                ("mlx5_comp0@pci:0000:af:00.0", Some((Combined, Some(0)))),
                ("mlx5_comp63@pci:0000:af:00.0", Some((Combined, Some(63)))),
                ("mlx5_async0@pci:0000:af:00.0", Some((Other, None))),
                ("mlx5_pages_eq@pci:0000:af:00.0", Some((Other, None))),
                // The second port of the same card.
                ("mlx5_comp0@pci:0000:af:00.1", NO_MATCH),
                ("mlx5_async0@pci:0000:af:00.1", NO_MATCH),
                ("mlx5_comp0@pci:0000:bf:00.0", NO_MATCH),
                ("nvme0q1", NO_MATCH),
            ],
        );
    }

    #[test]
    fn i40e_misc_and_pci_named_queues() {
        let eth2 = owner("eth2", Some("0000:3b:00.0"), None);
        check(
            &eth2,
            &[
                ("i40e-0000:3b:00.0:misc", Some((Other, None))),
                ("ice-0000:3b:00.0:misc", Some((Other, None))),
                ("hns3-0000:3b:00.0-TxRx-2", Some((Combined, Some(2)))),
                ("i40e-0000:3b:00.1:misc", NO_MATCH),
                ("i40e-10000:3b:00.0:misc", NO_MATCH),
                ("i40e-eth2-TxRx-7", Some((Combined, Some(7)))),
            ],
        );
    }

    #[test]
    fn virtio_net_vectors() {
        // virtio_net on this Firecracker VM: eth0 is virtio2 at 0000:00:03.0.
        let eth0 = owner("eth0", Some("0000:00:03.0"), Some("virtio2"));
        check(
            &eth0,
            &[
                ("virtio2-input.0", Some((Rx, Some(0)))),
                ("virtio2-output.0", Some((Tx, Some(0)))),
                ("virtio2-input.3", Some((Rx, Some(3)))),
                ("virtio2-config", Some((Other, None))),
                ("virtio2-virtqueues", Some((Other, None))),
                ("virtio20-input.0", NO_MATCH),
                ("virtio3-input.0", NO_MATCH),
                ("virtio1-req.0", NO_MATCH),
                ("virtio2-input.x", Some((Other, None))),
            ],
        );
        // Without a virtio device, virtio names are nobody's.
        let veth = owner("veth0", None, None);
        check(&veth, &[("virtio2-input.0", NO_MATCH)]);
    }
}
