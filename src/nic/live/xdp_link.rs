//! XDP programs on an interface over rtnetlink (IFLA_XDP): which are
//! attached in which mode (what `ip link show` prints), attaching one
//! (RTM_SETLINK with IFLA_XDP_FD and the mode flag, `ip link set dev X
//! xdpdrv ...`), and detaching one only if it is still the expected program
//! (IFLA_XDP_EXPECTED_FD with XDP_FLAGS_REPLACE: the kernel compares and
//! detaches in one step, so another tool's program is never removed).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::base::bpf;
use crate::base::driver::xdp::{XdpMode, XdpProgram, XdpState};
use crate::base::driver::SetError;
use crate::base::netlink::{attr_u32, attrs, ifindex, push_attr, route, set_error};
use crate::base::Probe;

const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const IFINFOMSG_LEN: usize = 16;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;
const IFLA_XDP_EXPECTED_FD: u16 = 8;

// XDP attach flags (linux/if_link.h).
const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// Set on an attribute that holds attributes.
const NLA_F_NESTED: u16 = 0x8000;

/// ifinfomsg: family AF_UNSPEC, type, index, flags, change.
fn ifinfomsg(ifindex: u32) -> [u8; IFINFOMSG_LEN] {
    let mut head = [0u8; IFINFOMSG_LEN];
    head[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    head
}

/// The programs attached to `iface` and its XDP features. Unknown when
/// the interface does not exist or the kernel does not answer.
pub fn state(iface: &str) -> Probe<XdpState> {
    let Ok(index) = ifindex(iface) else {
        return Probe::UNKNOWN;
    };
    match programs(index) {
        Ok(programs) => Probe::Value(XdpState {
            programs,
            features: super::netdev::xdp_features(index),
        }),
        Err(_) => Probe::UNKNOWN,
    }
}

/// What the kernel says of one link: its XDP programs (with their names
/// when they can be asked: root) and its RX queue count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkXdp {
    pub programs: Vec<XdpProgram>,
    /// IFLA_NUM_RX_QUEUES: the RX queues an AF_XDP socket may bind to.
    pub rx_queues: Option<u32>,
}

/// RTM_GETLINK of interface `index`: its one answer is an RTM_NEWLINK.
pub fn query(index: u32) -> Result<LinkXdp, SetError> {
    let answers = route()?
        .request(RTM_GETLINK, 0, &ifinfomsg(index))
        .map_err(|e| set_error(&e))?;
    let link = answers
        .first()
        .filter(|payload| payload.len() >= IFINFOMSG_LEN)
        .ok_or_else(|| SetError::with_detail(libc::EPROTO, "no link in the answer"))?;
    let mut found = parse_link(&link[IFINFOMSG_LEN..]).map_err(|e| set_error(&e))?;
    for program in &mut found.programs {
        program.name = bpf::prog_name(program.id);
    }
    Ok(found)
}

/// The programs attached to interface `index`.
pub fn programs(index: u32) -> Result<Vec<XdpProgram>, SetError> {
    query(index).map(|link| link.programs)
}

/// A link message's attributes: the programs of IFLA_XDP (one per mode)
/// and IFLA_NUM_RX_QUEUES.
fn parse_link(link_attrs: &[u8]) -> io::Result<LinkXdp> {
    let mut found = LinkXdp {
        programs: Vec::new(),
        rx_queues: None,
    };
    for (kind, data) in attrs(link_attrs)? {
        match kind {
            IFLA_NUM_RX_QUEUES => found.rx_queues = Some(attr_u32(data)?),
            IFLA_XDP => {
                for (kind, data) in attrs(data)? {
                    let mode = match kind {
                        IFLA_XDP_DRV_PROG_ID => XdpMode::Native,
                        IFLA_XDP_SKB_PROG_ID => XdpMode::Generic,
                        IFLA_XDP_HW_PROG_ID => XdpMode::Offload,
                        _ => continue,
                    };
                    let id = attr_u32(data)?;
                    if id != 0 {
                        found.programs.push(XdpProgram {
                            mode,
                            id,
                            name: None,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

/// ifinfomsg and IFLA_XDP { FD, FLAGS[, EXPECTED_FD] }.
fn setlink_xdp(index: u32, fd: i32, flags: u32, expected: Option<i32>) -> Vec<u8> {
    let mut xdp = Vec::new();
    push_attr(&mut xdp, IFLA_XDP_FD, &fd.to_ne_bytes());
    push_attr(&mut xdp, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    if let Some(expected) = expected {
        push_attr(&mut xdp, IFLA_XDP_EXPECTED_FD, &expected.to_ne_bytes());
    }
    let mut body = ifinfomsg(index).to_vec();
    push_attr(&mut body, IFLA_XDP | NLA_F_NESTED, &xdp);
    body
}

fn mode_flag(mode: XdpMode) -> Result<u32, SetError> {
    match mode {
        XdpMode::Native => Ok(XDP_FLAGS_DRV_MODE),
        XdpMode::Generic => Ok(XDP_FLAGS_SKB_MODE),
        XdpMode::Offload => Err(SetError::with_detail(
            libc::EOPNOTSUPP,
            "nettune does not offload XDP programs to the NIC",
        )),
    }
}

/// Attach `prog` to `iface` in `mode`, unless a program is attached in that
/// mode already (XDP_FLAGS_UPDATE_IF_NOEXIST: EBUSY then).
pub fn attach(iface: &str, prog: &OwnedFd, mode: XdpMode) -> Result<(), SetError> {
    let index = ifindex(iface)?;
    let flags = mode_flag(mode)? | XDP_FLAGS_UPDATE_IF_NOEXIST;
    route()?.change(
        RTM_SETLINK,
        0,
        &setlink_xdp(index, prog.as_raw_fd(), flags, None),
    )
}

/// What [`detach_expected`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detached {
    /// The program was attached and is not any more.
    Removed,
    /// Program `id` is not attached there (gone, or replaced by another
    /// program, which was left alone).
    NotAttached,
}

/// Detach program `id` from `iface` in `mode` if, and only if, it is the
/// program attached there: the kernel checks and detaches atomically.
pub fn detach_expected(iface: &str, id: u32, mode: XdpMode) -> Result<Detached, SetError> {
    let index = match ifindex(iface) {
        Ok(index) => index,
        // The interface is gone, and its programs with it.
        Err(e) if e.errno == libc::ENODEV => return Ok(Detached::NotAttached),
        Err(e) => return Err(e),
    };
    let expected = match bpf::prog_fd_by_id(id) {
        Ok(fd) => fd,
        // No program has that id any more: nothing of ours is attached.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Detached::NotAttached),
        Err(e) => {
            return Err(SetError::with_detail(
                e.raw_os_error().unwrap_or(libc::EIO),
                &format!("cannot open XDP program {id}: {e}"),
            ))
        }
    };
    let flags = mode_flag(mode)? | XDP_FLAGS_REPLACE;
    let body = setlink_xdp(index, -1, flags, Some(expected.as_raw_fd()));
    match route()?.change(RTM_SETLINK, 0, &body) {
        Ok(()) => Ok(Detached::Removed),
        // "Active program does not match expected": another program, or none.
        Err(e) if e.errno == libc::EEXIST => Ok(Detached::NotAttached),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        push_attr(&mut a, kind, data);
        a
    }

    #[test]
    fn attached_programs_are_read_per_mode() {
        // IFLA_IFNAME, IFLA_NUM_RX_QUEUES, then IFLA_XDP {ATTACHED=MULTI,
        // SKB id 7, DRV id 9}.
        let mut xdp = attr(2, &[4]);
        xdp.extend(attr(IFLA_XDP_SKB_PROG_ID, &7u32.to_ne_bytes()));
        xdp.extend(attr(IFLA_XDP_DRV_PROG_ID, &9u32.to_ne_bytes()));
        let mut link = attr(3, b"veth0\0");
        link.extend(attr(IFLA_NUM_RX_QUEUES, &4u32.to_ne_bytes()));
        link.extend(attr(IFLA_XDP | NLA_F_NESTED, &xdp));
        let found = parse_link(&link).expect("parse");
        assert_eq!(
            found
                .programs
                .iter()
                .map(|p| (p.mode, p.id))
                .collect::<Vec<_>>(),
            [(XdpMode::Generic, 7), (XdpMode::Native, 9)]
        );
        assert_eq!(found.rx_queues, Some(4));
        // Nothing attached: IFLA_XDP holds ATTACHED=0 only.
        let mut none = attr(3, b"lo\0");
        none.extend(attr(IFLA_XDP, &attr(2, &[0])));
        assert!(parse_link(&none).expect("parse").programs.is_empty());
        assert!(parse_link(&[9, 0, 3, 0, 1]).is_err());
    }

    #[test]
    fn a_detach_names_the_expected_program() {
        let body = setlink_xdp(3, -1, XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE, Some(11));
        let found = attrs(&body[IFINFOMSG_LEN..]).expect("attrs");
        assert_eq!(found[0].0, IFLA_XDP);
        let values: Vec<(u16, i32)> = attrs(found[0].1)
            .expect("nested")
            .iter()
            .map(|(k, d)| (*k, attr_u32(d).expect("u32") as i32))
            .collect();
        assert_eq!(
            values,
            [
                (IFLA_XDP_FD, -1),
                (
                    IFLA_XDP_FLAGS,
                    (XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE) as i32
                ),
                (IFLA_XDP_EXPECTED_FD, 11)
            ]
        );
    }

    #[test]
    fn offload_is_refused() {
        assert_eq!(mode_flag(XdpMode::Native), Ok(XDP_FLAGS_DRV_MODE));
        assert!(mode_flag(XdpMode::Offload).is_err());
    }
}
