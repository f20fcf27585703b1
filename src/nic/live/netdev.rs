//! [`LiveNetdev`]: the kernel's `netdev` generic-netlink family
//! (Documentation/netlink/specs/netdev.yaml), what `ynl --family netdev`
//! asks: `queue-get` (queue -> NAPI id), `napi-get` (NAPI -> IRQ, thread,
//! defer-hard-irqs, gro-flush-timeout, irq-suspend-timeout), `qstats-get`
//! (standard per-queue counters), `napi-set`, and `dev-get` (the driver's
//! `xdp-features`: native XDP, AF_XDP zero-copy, ...; see [`xdp_features`]).
//!
//! Generic netlink adds one step to the rtnetlink framing: the family's id
//! is looked up by name from the `nlctrl` family, whose answer also lists
//! the commands this kernel has, so a command the kernel lacks (napi-set
//! before 6.13, queue-get before 6.8) is known before it is sent. Why by
//! hand rather than netlink-bindings or genetlink: see `super::netlink`;
//! four commands and fourteen attributes.

use std::collections::BTreeMap;
use std::io;

use nix::sys::socket::SockProtocol;

use crate::base::driver::netdev::{Napi, NapiKey, NapiSet, Netdev, NetdevQueue, NetdevState};
use crate::base::driver::xdp::{action_names, XdpFeatures};
use crate::base::driver::{QueueStats, SetError};
use crate::base::netlink::{
    attr_u16, attr_u32, attr_uint, attrs, errno_of, malformed, push_attr, push_str, push_uint,
    set_error, Socket,
};
use crate::base::Probe;

/// Reads and changes the netdev family in the calling thread's network
/// namespace (a socket per call).
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveNetdev;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_OPS: u16 = 6;
const CTRL_ATTR_OP_ID: u16 = 1;
const FAMILY: &str = "netdev";
const FAMILY_VERSION: u8 = 1;

const CMD_QUEUE_GET: u8 = 10;
const CMD_NAPI_GET: u8 = 11;
const CMD_QSTATS_GET: u8 = 12;
const CMD_NAPI_SET: u8 = 14;

const A_NAPI_IFINDEX: u16 = 1;
const A_NAPI_ID: u16 = 2;
const A_NAPI_IRQ: u16 = 3;
const A_NAPI_PID: u16 = 4;
const A_NAPI_DEFER_HARD_IRQS: u16 = 5;
const A_NAPI_GRO_FLUSH_TIMEOUT: u16 = 6;
const A_NAPI_IRQ_SUSPEND_TIMEOUT: u16 = 7;
const A_NAPI_THREADED: u16 = 8;

const A_QUEUE_ID: u16 = 1;
const A_QUEUE_IFINDEX: u16 = 2;
const A_QUEUE_TYPE: u16 = 3;
const A_QUEUE_NAPI_ID: u16 = 4;

const A_QSTATS_IFINDEX: u16 = 1;
const A_QSTATS_QUEUE_TYPE: u16 = 2;
const A_QSTATS_QUEUE_ID: u16 = 3;
const A_QSTATS_SCOPE: u16 = 4;
const QSTATS_SCOPE_QUEUE: u64 = 1;
/// netdev-genl's qstats counters, attributes 8 to 34, by their spec names.
const QSTATS_NAMES: [&str; 27] = [
    "rx-packets",
    "rx-bytes",
    "tx-packets",
    "tx-bytes",
    "rx-alloc-fail",
    "rx-hw-drops",
    "rx-hw-drop-overruns",
    "rx-csum-complete",
    "rx-csum-unnecessary",
    "rx-csum-none",
    "rx-csum-bad",
    "rx-hw-gro-packets",
    "rx-hw-gro-bytes",
    "rx-hw-gro-wire-packets",
    "rx-hw-gro-wire-bytes",
    "rx-hw-drop-ratelimits",
    "tx-hw-drops",
    "tx-hw-drop-errors",
    "tx-csum-none",
    "tx-needs-csum",
    "tx-hw-gso-packets",
    "tx-hw-gso-bytes",
    "tx-hw-gso-wire-packets",
    "tx-hw-gso-wire-bytes",
    "tx-hw-drop-ratelimits",
    "tx-stop",
    "tx-wake",
];
const QSTATS_FIRST_COUNTER: u16 = 8;

/// The netdev family of this kernel: its id and the commands it has.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Family {
    id: u16,
    commands: Vec<u32>,
}

impl Family {
    fn has(&self, cmd: u8) -> bool {
        self.commands.contains(&u32::from(cmd))
    }
}

/// genlmsghdr {cmd, version, reserved} then attributes.
fn genl_body(cmd: u8, version: u8, attrs: &[u8]) -> Vec<u8> {
    let mut body = vec![cmd, version, 0, 0];
    body.extend_from_slice(attrs);
    body
}

/// The attributes of a generic-netlink answer (after its 4-byte header).
fn genl_attrs(payload: &[u8]) -> io::Result<Vec<(u16, &[u8])>> {
    let rest = payload
        .get(4..)
        .ok_or_else(|| malformed("short generic netlink header"))?;
    attrs(rest)
}

/// The netdev family, `None` when this kernel has none (before 6.3, or
/// built without it).
fn family(sock: &mut Socket) -> io::Result<Option<Family>> {
    let mut request = Vec::new();
    push_str(&mut request, CTRL_ATTR_FAMILY_NAME, FAMILY);
    let body = genl_body(CTRL_CMD_GETFAMILY, 1, &request);
    match sock.request(GENL_ID_CTRL, 0, &body) {
        Ok(answers) => match answers.first() {
            Some(answer) => parse_family(answer).map(Some),
            None => Err(malformed("no answer to the family lookup")),
        },
        Err(e) if errno_of(&e) == libc::ENOENT => Ok(None),
        Err(e) => Err(e),
    }
}

fn parse_family(payload: &[u8]) -> io::Result<Family> {
    let mut id = None;
    let mut commands = Vec::new();
    for (kind, data) in genl_attrs(payload)? {
        match kind {
            CTRL_ATTR_FAMILY_ID => id = Some(attr_u16(data)?),
            CTRL_ATTR_OPS => {
                for (_, op) in attrs(data)? {
                    for (field, value) in attrs(op)? {
                        if field == CTRL_ATTR_OP_ID {
                            commands.push(attr_u32(value)?);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let id = id.ok_or_else(|| malformed("family answer without an id"))?;
    Ok(Family { id, commands })
}

/// A dump of `cmd` filtered to `ifindex` by attribute `ifindex_attr`.
fn dump(
    sock: &mut Socket,
    family: &Family,
    cmd: u8,
    ifindex_attr: u16,
    ifindex: u32,
    extra: &[u8],
) -> io::Result<Vec<Vec<u8>>> {
    let mut request = Vec::new();
    push_attr(&mut request, ifindex_attr, &ifindex.to_ne_bytes());
    request.extend_from_slice(extra);
    sock.dump(family.id, &genl_body(cmd, FAMILY_VERSION, &request))
}

fn direction(kind: u32) -> String {
    match kind {
        0 => "rx".to_string(),
        1 => "tx".to_string(),
        other => format!("type{other}"),
    }
}

fn parse_queue(payload: &[u8]) -> io::Result<NetdevQueue> {
    let mut queue = NetdevQueue {
        direction: String::new(),
        index: 0,
        napi_id: None,
    };
    let mut seen_id = false;
    for (kind, data) in genl_attrs(payload)? {
        match kind {
            A_QUEUE_ID => {
                queue.index = attr_u32(data)?;
                seen_id = true;
            }
            A_QUEUE_TYPE => queue.direction = direction(attr_u32(data)?),
            A_QUEUE_NAPI_ID => queue.napi_id = Some(attr_u32(data)?),
            _ => {}
        }
    }
    if !seen_id || queue.direction.is_empty() {
        return Err(malformed("a queue without id or type"));
    }
    Ok(queue)
}

fn parse_napi(payload: &[u8]) -> io::Result<Napi> {
    let mut napi = Napi {
        id: 0,
        irq: None,
        thread_pid: None,
        defer_hard_irqs: None,
        gro_flush_timeout_ns: None,
        irq_suspend_timeout_ns: None,
        threaded: None,
    };
    let mut seen_id = false;
    for (kind, data) in genl_attrs(payload)? {
        match kind {
            A_NAPI_ID => {
                napi.id = attr_u32(data)?;
                seen_id = true;
            }
            A_NAPI_IRQ => napi.irq = Some(attr_u32(data)?),
            A_NAPI_PID => napi.thread_pid = Some(attr_u32(data)?),
            A_NAPI_DEFER_HARD_IRQS => napi.defer_hard_irqs = Some(attr_u32(data)?),
            A_NAPI_GRO_FLUSH_TIMEOUT => napi.gro_flush_timeout_ns = Some(attr_uint(data)?),
            A_NAPI_IRQ_SUSPEND_TIMEOUT => napi.irq_suspend_timeout_ns = Some(attr_uint(data)?),
            A_NAPI_THREADED => napi.threaded = Some(attr_u32(data)? != 0),
            _ => {}
        }
    }
    if !seen_id {
        return Err(malformed("a NAPI without an id"));
    }
    Ok(napi)
}

fn parse_qstats(payload: &[u8]) -> io::Result<QueueStats> {
    let mut stats = QueueStats {
        direction: String::new(),
        index: 0,
        counters: BTreeMap::new(),
    };
    for (kind, data) in genl_attrs(payload)? {
        match kind {
            A_QSTATS_QUEUE_TYPE => stats.direction = direction(attr_u32(data)?),
            A_QSTATS_QUEUE_ID => stats.index = attr_u32(data)?,
            A_QSTATS_IFINDEX | A_QSTATS_SCOPE => {}
            _ => {
                if let Some(name) = qstats_name(kind) {
                    stats.counters.insert(name.to_string(), attr_uint(data)?);
                }
            }
        }
    }
    if stats.direction.is_empty() {
        return Err(malformed("queue statistics without a queue type"));
    }
    Ok(stats)
}

fn qstats_name(kind: u16) -> Option<&'static str> {
    kind.checked_sub(QSTATS_FIRST_COUNTER)
        .and_then(|i| QSTATS_NAMES.get(usize::from(i)).copied())
}

/// A probe from a query: not supported when the kernel lacks the command
/// (or answers EOPNOTSUPP), unknown on any other failure.
fn probe<T>(family: &Family, cmd: u8, read: impl FnOnce() -> io::Result<T>) -> Probe<T> {
    if !family.has(cmd) {
        return Probe::NOT_SUPPORTED;
    }
    match read() {
        Ok(v) => Probe::Value(v),
        Err(e) if errno_of(&e) == libc::EOPNOTSUPP => Probe::NOT_SUPPORTED,
        Err(_) => Probe::UNKNOWN,
    }
}

fn sorted_queues(mut queues: Vec<NetdevQueue>) -> Vec<NetdevQueue> {
    queues.sort_by(|a, b| (&a.direction, a.index).cmp(&(&b.direction, b.index)));
    queues
}

impl LiveNetdev {
    fn queues(sock: &mut Socket, family: &Family, ifindex: u32) -> io::Result<Vec<NetdevQueue>> {
        let answers = dump(sock, family, CMD_QUEUE_GET, A_QUEUE_IFINDEX, ifindex, &[])?;
        let queues: io::Result<Vec<NetdevQueue>> = answers.iter().map(|p| parse_queue(p)).collect();
        queues.map(sorted_queues)
    }

    fn qstats_of(sock: &mut Socket, family: &Family, ifindex: u32) -> Probe<Vec<QueueStats>> {
        let mut scope = Vec::new();
        push_uint(&mut scope, A_QSTATS_SCOPE, QSTATS_SCOPE_QUEUE);
        let read = || -> io::Result<Vec<QueueStats>> {
            let answers = dump(
                sock,
                family,
                CMD_QSTATS_GET,
                A_QSTATS_IFINDEX,
                ifindex,
                &scope,
            )?;
            let mut stats: Vec<QueueStats> = answers
                .iter()
                .map(|p| parse_qstats(p))
                .collect::<io::Result<_>>()?;
            stats.sort_by(|a, b| (&a.direction, a.index).cmp(&(&b.direction, b.index)));
            Ok(stats)
        };
        match probe(family, CMD_QSTATS_GET, read) {
            // A driver without the standard statistics answers nothing.
            Probe::Value(stats) if stats.is_empty() => Probe::NOT_SUPPORTED,
            other => other,
        }
    }
}

/// The socket and family for a query, or the probe every field gets.
fn open() -> Result<(Socket, Family), Probe<()>> {
    let mut sock = Socket::open(SockProtocol::NetlinkGeneric).map_err(|_| Probe::UNKNOWN)?;
    match family(&mut sock) {
        Ok(Some(family)) => Ok((sock, family)),
        Ok(None) => Err(Probe::NOT_SUPPORTED),
        Err(_) => Err(Probe::UNKNOWN),
    }
}

fn missing<T>(p: &Probe<()>) -> Probe<T> {
    match p {
        Probe::Missing(m) => Probe::Missing(*m),
        Probe::Value(()) => Probe::UNKNOWN,
    }
}

impl Netdev for LiveNetdev {
    fn state(&self, iface: &str) -> NetdevState {
        let Ok(ifindex) = nix::net::if_::if_nametoindex(iface) else {
            return NetdevState::default();
        };
        let (mut sock, family) = match open() {
            Ok(opened) => opened,
            Err(p) => {
                return NetdevState {
                    queues: missing(&p),
                    napis: missing(&p),
                    qstats: missing(&p),
                    napi_set: p.map(|()| false),
                }
            }
        };
        let queues = probe(&family, CMD_QUEUE_GET, || {
            Self::queues(&mut sock, &family, ifindex)
        });
        let napis = probe(&family, CMD_NAPI_GET, || {
            let answers = dump(
                &mut sock,
                &family,
                CMD_NAPI_GET,
                A_NAPI_IFINDEX,
                ifindex,
                &[],
            )?;
            let mut napis: Vec<Napi> = answers
                .iter()
                .map(|p| parse_napi(p))
                .collect::<io::Result<_>>()?;
            napis.sort_by_key(|n| n.id);
            Ok(napis)
        });
        let qstats = Self::qstats_of(&mut sock, &family, ifindex);
        NetdevState {
            queues,
            napis,
            qstats,
            napi_set: Probe::Value(family.has(CMD_NAPI_SET)),
        }
    }

    fn qstats(&self, iface: &str) -> Probe<Vec<QueueStats>> {
        let Ok(ifindex) = nix::net::if_::if_nametoindex(iface) else {
            return Probe::UNKNOWN;
        };
        match open() {
            Ok((mut sock, family)) => Self::qstats_of(&mut sock, &family, ifindex),
            Err(p) => missing(&p),
        }
    }
}

/// A refusal with errno `errno` and nettune's words.
fn refused(errno: i32, words: &str) -> SetError {
    SetError::with_detail(errno, words)
}

impl NapiSet for LiveNetdev {
    fn set_napi(&self, iface: &str, queue: u32, key: NapiKey, value: u64) -> Result<(), SetError> {
        nix::net::if_::if_nametoindex(iface).map_err(|e| SetError::from_errno(e as i32))?;
        let mut sock = Socket::open(SockProtocol::NetlinkGeneric).map_err(|e| set_error(&e))?;
        let Some(family) = family(&mut sock).map_err(|e| set_error(&e))? else {
            return Err(refused(
                libc::EOPNOTSUPP,
                "this kernel has no netdev netlink family (Linux 6.3+; napi-set 6.13+)",
            ));
        };
        if !family.has(CMD_NAPI_SET) || !family.has(CMD_QUEUE_GET) {
            return Err(refused(
                libc::EOPNOTSUPP,
                "this kernel's netdev family has no napi-set (Linux 6.13+)",
            ));
        }
        // The NAPI serving the queue now, found the way inspect and plan
        // find it (queue-get, else by position).
        let state = self.state(iface);
        let napi_id = state
            .napi_of_rx(queue)
            .map(|rx| rx.napi.id)
            .map_err(|why| refused(libc::ENOENT, &why.reason(iface, queue)))?;
        let mut request = Vec::new();
        push_attr(&mut request, A_NAPI_ID, &napi_id.to_ne_bytes());
        match key {
            NapiKey::DeferHardIrqs => {
                let value = u32::try_from(value)
                    .map_err(|_| refused(libc::EINVAL, "defer-hard-irqs above 2147483647"))?;
                push_attr(&mut request, A_NAPI_DEFER_HARD_IRQS, &value.to_ne_bytes());
            }
            NapiKey::GroFlushTimeout => push_uint(&mut request, A_NAPI_GRO_FLUSH_TIMEOUT, value),
            NapiKey::IrqSuspendTimeout => {
                push_uint(&mut request, A_NAPI_IRQ_SUSPEND_TIMEOUT, value)
            }
        }
        sock.change(
            family.id,
            0,
            &genl_body(CMD_NAPI_SET, FAMILY_VERSION, &request),
        )
    }
}

/// dev-get: a driver's XDP features (Linux 6.3+). This is how nettune
/// knows, before attaching, whether a driver runs XDP natively and whether
/// an AF_XDP socket can be zero-copy.
const CMD_DEV_GET: u8 = 1;
const A_DEV_IFINDEX: u16 = 1;
const A_DEV_XDP_FEATURES: u16 = 3;
const A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;

/// The XDP features of interface `ifindex`: not supported on kernels
/// without the netdev family or its dev-get, unknown when the query fails
/// otherwise.
pub(super) fn xdp_features(ifindex: u32) -> Probe<XdpFeatures> {
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
    use crate::base::netlink::attr_str;

    fn genl(attrs: &[u8]) -> Vec<u8> {
        genl_body(1, 1, attrs)
    }

    fn u32_attr(body: &mut Vec<u8>, kind: u16, v: u32) {
        push_attr(body, kind, &v.to_ne_bytes());
    }

    /// What `nlctrl` answers for netdev on 6.18: id 24 and its commands.
    #[test]
    fn the_family_answer_gives_id_and_commands() {
        let mut ops = Vec::new();
        for (i, cmd) in [1u32, 10, 11, 12, 14].iter().enumerate() {
            let mut op = Vec::new();
            u32_attr(&mut op, CTRL_ATTR_OP_ID, *cmd);
            u32_attr(&mut op, 2, 0x0c);
            push_attr(&mut ops, (i + 1) as u16 | 0x8000, &op);
        }
        let mut body = Vec::new();
        push_attr(&mut body, CTRL_ATTR_FAMILY_ID, &24u16.to_ne_bytes());
        push_str(&mut body, CTRL_ATTR_FAMILY_NAME, "netdev");
        push_attr(&mut body, CTRL_ATTR_OPS | 0x8000, &ops);
        let family = parse_family(&genl(&body)).expect("family");
        assert_eq!(family.id, 24);
        assert!(family.has(CMD_NAPI_SET) && family.has(CMD_QUEUE_GET));
        assert!(!family.has(13));
        assert!(parse_family(&genl(&[])).is_err());
    }

    #[test]
    fn queues_napis_and_qstats_parse() {
        let mut q = Vec::new();
        u32_attr(&mut q, A_QUEUE_ID, 3);
        u32_attr(&mut q, A_QUEUE_IFINDEX, 2);
        u32_attr(&mut q, A_QUEUE_TYPE, 0);
        u32_attr(&mut q, A_QUEUE_NAPI_ID, 8195);
        let queue = parse_queue(&genl(&q)).expect("queue");
        assert_eq!(
            queue,
            NetdevQueue {
                direction: "rx".to_string(),
                index: 3,
                napi_id: Some(8195)
            }
        );
        let mut tx = Vec::new();
        u32_attr(&mut tx, A_QUEUE_ID, 0);
        u32_attr(&mut tx, A_QUEUE_TYPE, 1);
        assert_eq!(parse_queue(&genl(&tx)).expect("tx").napi_id, None);
        assert!(parse_queue(&genl(&[])).is_err());

        let mut n = Vec::new();
        u32_attr(&mut n, A_NAPI_IFINDEX, 2);
        u32_attr(&mut n, A_NAPI_ID, 8195);
        u32_attr(&mut n, A_NAPI_IRQ, 38);
        u32_attr(&mut n, A_NAPI_DEFER_HARD_IRQS, 2);
        push_uint(&mut n, A_NAPI_GRO_FLUSH_TIMEOUT, 20_000);
        push_attr(
            &mut n,
            A_NAPI_IRQ_SUSPEND_TIMEOUT,
            &20_000_000u64.to_ne_bytes(),
        );
        let napi = parse_napi(&genl(&n)).expect("napi");
        assert_eq!(napi.id, 8195);
        assert_eq!(napi.irq, Some(38));
        assert_eq!(napi.thread_pid, None);
        assert_eq!(napi.defer_hard_irqs, Some(2));
        assert_eq!(napi.gro_flush_timeout_ns, Some(20_000));
        assert_eq!(napi.irq_suspend_timeout_ns, Some(20_000_000));
        assert_eq!(napi.threaded, None);

        let mut s = Vec::new();
        u32_attr(&mut s, A_QSTATS_IFINDEX, 2);
        u32_attr(&mut s, A_QSTATS_QUEUE_TYPE, 0);
        u32_attr(&mut s, A_QSTATS_QUEUE_ID, 1);
        push_uint(&mut s, 8, 1234);
        push_attr(&mut s, 9, &(5u64 << 33).to_ne_bytes());
        push_uint(&mut s, 13, 7);
        push_uint(&mut s, 34, 2);
        push_uint(&mut s, 60, 1);
        let stats = parse_qstats(&genl(&s)).expect("qstats");
        assert_eq!((stats.direction.as_str(), stats.index), ("rx", 1));
        assert_eq!(stats.counters["rx-packets"], 1234);
        assert_eq!(stats.counters["rx-bytes"], 5 << 33);
        assert_eq!(stats.counters["rx-hw-drops"], 7);
        assert_eq!(stats.counters["tx-wake"], 2);
        assert_eq!(stats.counters.len(), 4, "an unknown counter is left out");
    }

    #[test]
    fn qstats_names_follow_the_spec() {
        assert_eq!(qstats_name(8), Some("rx-packets"));
        assert_eq!(qstats_name(31), Some("tx-hw-gso-wire-bytes"));
        assert_eq!(qstats_name(32), Some("tx-hw-drop-ratelimits"));
        assert_eq!(qstats_name(33), Some("tx-stop"));
        assert_eq!(qstats_name(4), None);
        assert_eq!(qstats_name(35), None);
    }

    #[test]
    fn unknown_direction_is_named_by_number() {
        assert_eq!(direction(0), "rx");
        assert_eq!(direction(1), "tx");
        assert_eq!(direction(5), "type5");
        assert_eq!(attr_str(b"rx\0"), "rx");
    }

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
