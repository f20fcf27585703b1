//! A driver's XDP features from the `netdev` generic netlink family (Linux
//! 6.3+, Documentation/netlink/specs/netdev.yaml): `dev-get` answers
//! `xdp-features` (native XDP, redirect, AF_XDP zero-copy, ...) and
//! `xdp-zc-max-segs`. This is how nettune knows, before attaching, whether
//! a driver runs XDP natively and whether an AF_XDP socket can be
//! zero-copy. The family lookup and framing are [`super::netdev`]'s.

use std::io;

use super::netdev::{genl_attrs, genl_body, missing, open, probe, FAMILY_VERSION};
use super::netlink::{attr_u32, push_attr};
use crate::base::driver::xdp::{action_names, XdpFeatures};
use crate::base::Probe;

const CMD_DEV_GET: u8 = 1;
const A_DEV_IFINDEX: u16 = 1;
const A_DEV_XDP_FEATURES: u16 = 3;
const A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;

/// The XDP features of interface `ifindex`: not supported on kernels
/// without the netdev family or its dev-get, unknown when the query fails
/// otherwise.
pub(super) fn features(ifindex: u32) -> Probe<XdpFeatures> {
    let (mut sock, family) = match open() {
        Ok(opened) => opened,
        Err(p) => return missing(&p),
    };
    let mut request = Vec::new();
    push_attr(&mut request, A_DEV_IFINDEX, &ifindex.to_ne_bytes());
    let read = || -> io::Result<Option<XdpFeatures>> {
        let answers = sock.request(
            family.id,
            0,
            &genl_body(CMD_DEV_GET, FAMILY_VERSION, &request),
        )?;
        match answers.first() {
            Some(payload) => parse_dev(payload),
            None => Ok(None),
        }
    };
    match probe(&family, CMD_DEV_GET, read) {
        Probe::Value(Some(features)) => Probe::Value(features),
        // A kernel whose netdev family predates xdp-features.
        Probe::Value(None) => Probe::NOT_SUPPORTED,
        Probe::Missing(m) => Probe::Missing(m),
    }
}

/// A dev-get answer; `None` without xdp-features.
fn parse_dev(payload: &[u8]) -> io::Result<Option<XdpFeatures>> {
    let mut bits = None;
    let mut zc_max_segs = 0;
    for (kind, data) in genl_attrs(payload)? {
        match kind {
            A_DEV_XDP_FEATURES if data.len() == 8 => {
                let mut word = [0u8; 8];
                word.copy_from_slice(data);
                bits = Some(u64::from_ne_bytes(word));
            }
            A_DEV_XDP_ZC_MAX_SEGS => zc_max_segs = attr_u32(data)?,
            _ => {}
        }
    }
    Ok(bits.map(|bits| XdpFeatures {
        actions: action_names(bits),
        zc_max_segs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dev_get_answer_gives_the_features() {
        let mut attrs = Vec::new();
        push_attr(&mut attrs, A_DEV_IFINDEX, &3u32.to_ne_bytes());
        push_attr(&mut attrs, A_DEV_XDP_FEATURES, &0x0fu64.to_ne_bytes());
        push_attr(&mut attrs, A_DEV_XDP_ZC_MAX_SEGS, &1u32.to_ne_bytes());
        let payload = genl_body(CMD_DEV_GET, 1, &attrs);
        let f = parse_dev(&payload).expect("parse").expect("features");
        assert!(f.native() && f.zero_copy());
        assert_eq!(f.zc_max_segs, 1);
        let mut old = Vec::new();
        push_attr(&mut old, A_DEV_IFINDEX, &3u32.to_ne_bytes());
        assert_eq!(
            parse_dev(&genl_body(CMD_DEV_GET, 1, &old)).expect("parse"),
            None
        );
    }
}
