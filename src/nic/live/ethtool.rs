//! [`LiveEthtool`]: driver settings over the SIOCETHTOOL ioctl.
//!
//! Fixed-size commands are `#[repr(C)]` copies of the kernel structs (sizes
//! checked at compile time); variable-length ones (strings, stats, RSS
//! table, features) are byte buffers with the header written and read field
//! by field.

use std::collections::BTreeMap;

use super::ethtool_ioctl::{read_u32, write_u32, EthtoolSocket, FixedCommand, IfName, LiveEthtool};
use super::queue_stats::group_queue_stats;
use crate::base::driver::{
    Channels, Coalesce, DriverInfo, DriverSettings, Ethtool, Feature, FlowHash, QueueStats, Rings,
};
use crate::base::{Missing, Probe};

impl Ethtool for LiveEthtool {
    fn query(&self, iface: &str) -> DriverSettings {
        let (Some(name), Ok(socket)) = (IfName::new(iface), EthtoolSocket::open()) else {
            return unknown_settings();
        };
        socket.settings(&name)
    }

    /// Three ioctls (string set sizes, names, values) instead of a whole
    /// query's dozen.
    fn queue_stats(&self, iface: &str) -> Probe<Vec<QueueStats>> {
        let (Some(name), Ok(socket)) = (IfName::new(iface), EthtoolSocket::open()) else {
            return Probe::UNKNOWN;
        };
        let sizes = socket.string_set_sizes(&name);
        probe(sizes.stats.and_then(|n| socket.queue_stats(&name, n)))
    }
}

// Command numbers and string sets from linux/ethtool.h.
const ETHTOOL_GDRVINFO: u32 = 0x03;
pub(super) const ETHTOOL_GCOALESCE: u32 = 0x0e;
pub(super) const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GRXFH: u32 = 0x29;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GRXFHINDIR: u32 = 0x38;
const ETHTOOL_GFEATURES: u32 = 0x3a;
pub(super) const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETH_SS_STATS: u32 = 1;
pub(super) const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;

/// The kernel-internal "not supported" (include/linux/errno.h) that some
/// drivers let through to user space.
const ENOTSUPP: i32 = 524;

/// rx-flow-hash flow types by `ethtool -n ... rx-flow-hash` name.
pub(super) const FLOW_TYPES: [(&str, u32); 4] = [
    ("tcp4", 0x01), // TCP_V4_FLOW
    ("udp4", 0x02), // UDP_V4_FLOW
    ("tcp6", 0x05), // TCP_V6_FLOW
    ("udp6", 0x06), // UDP_V6_FLOW
];

/// RXH_* bits of an rx-flow-hash answer and the field each one adds.
pub(super) const RXH_FIELDS: [(u64, &str); 8] = [
    (1 << 1, "l2_dst"),
    (1 << 2, "vlan"),
    (1 << 3, "l3_proto"),
    (1 << 4, "ip_src"),
    (1 << 5, "ip_dst"),
    (1 << 6, "l4_src_port"),
    (1 << 7, "l4_dst_port"),
    (1 << 31, "discard"),
];

/// Features `ethtool -k` shows under an older name: reported under both, so
/// a reader can look up either (`rx-gro` or `generic-receive-offload`).
pub(crate) const LEGACY_FEATURE_NAMES: [(&str, &str); 8] = [
    ("rx-checksum", "rx-checksumming"),
    ("tx-generic-segmentation", "generic-segmentation-offload"),
    ("rx-gro", "generic-receive-offload"),
    ("rx-lro", "large-receive-offload"),
    ("rx-vlan-hw-parse", "rx-vlan-offload"),
    ("tx-vlan-hw-insert", "tx-vlan-offload"),
    ("rx-ntuple-filter", "ntuple-filters"),
    ("rx-hashing", "receive-hashing"),
];

/// An errno from an ethtool command as the answer it means: the driver
/// lacks the operation, or the query failed (no such device, no permission).
fn missing_for_errno(errno: i32) -> Missing {
    match errno {
        libc::EOPNOTSUPP | libc::EINVAL | ENOTSUPP => Missing::NotSupported,
        _ => Missing::Unknown,
    }
}

fn probe<T>(answer: Result<T, i32>) -> Probe<T> {
    match answer {
        Ok(value) => Probe::Value(value),
        Err(errno) => Probe::Missing(missing_for_errno(errno)),
    }
}

/// Everything unknown, with the flow types named (as a live query names them).
fn unknown_settings() -> DriverSettings {
    DriverSettings {
        rx_flow_hash: FLOW_TYPES
            .iter()
            .map(|(name, _)| (name.to_string(), Probe::UNKNOWN))
            .collect(),
        ..DriverSettings::default()
    }
}

/// The header fields an rx-flow-hash bit mask covers, in RXH_* bit order.
/// Bits this kernel header does not name are kept as `bit_N`.
fn flow_hash_fields(bits: u64) -> FlowHash {
    let mut fields: Vec<String> = RXH_FIELDS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| name.to_string())
        .collect();
    let named = RXH_FIELDS.iter().fold(0, |all, (bit, _)| all | bit);
    for bit in (0..64).filter(|b| bits & !named & (1 << b) != 0) {
        fields.push(format!("bit_{bit}"));
    }
    FlowHash { fields }
}

#[repr(C)]
#[derive(Default)]
#[allow(dead_code)] // every field is there for the kernel's layout
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

#[repr(C)]
#[derive(Default)]
pub(super) struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    pub(super) rx_count: u32,
    pub(super) tx_count: u32,
    other_count: u32,
    pub(super) combined_count: u32,
}

#[repr(C)]
#[derive(Default)]
pub(super) struct EthtoolRingparam {
    cmd: u32,
    rx_max_pending: u32,
    rx_mini_max_pending: u32,
    rx_jumbo_max_pending: u32,
    tx_max_pending: u32,
    pub(super) rx_pending: u32,
    rx_mini_pending: u32,
    rx_jumbo_pending: u32,
    pub(super) tx_pending: u32,
}

/// `struct ethtool_coalesce`: 23 u32 fields; only the first eleven are read.
#[repr(C)]
#[derive(Default)]
#[allow(dead_code)] // every field is there for the kernel's layout
pub(super) struct EthtoolCoalesce {
    cmd: u32,
    pub(super) rx_coalesce_usecs: u32,
    rx_max_coalesced_frames: u32,
    rx_coalesce_usecs_irq: u32,
    rx_max_coalesced_frames_irq: u32,
    pub(super) tx_coalesce_usecs: u32,
    tx_max_coalesced_frames: u32,
    tx_coalesce_usecs_irq: u32,
    tx_max_coalesced_frames_irq: u32,
    stats_block_coalesce_usecs: u32,
    pub(super) use_adaptive_rx_coalesce: u32,
    pub(super) use_adaptive_tx_coalesce: u32,
    /// pkt_rate_low .. rate_sample_interval.
    rest: [u32; 11],
}

/// `struct ethtool_rxnfc`; for ETHTOOL_GRXFH only `flow_type` and `data`
/// matter, but the kernel may copy the whole struct.
#[repr(C)]
#[derive(Default)]
#[allow(dead_code)] // every field is there for the kernel's layout
pub(super) struct EthtoolRxnfc {
    cmd: u32,
    pub(super) flow_type: u32,
    pub(super) data: u64,
    /// `struct ethtool_rx_flow_spec fs` (168 bytes, 8-aligned).
    flow_spec: [u64; 21],
    rule_cnt: u32,
}

// The sizes `gcc` reports for the kernel structs on x86_64 and aarch64.
const _: () = assert!(std::mem::size_of::<EthtoolDrvinfo>() == 196);
const _: () = assert!(std::mem::size_of::<EthtoolChannels>() == 36);
const _: () = assert!(std::mem::size_of::<EthtoolRingparam>() == 36);
const _: () = assert!(std::mem::size_of::<EthtoolCoalesce>() == 92);
const _: () = assert!(std::mem::size_of::<EthtoolRxnfc>() == 192);

impl FixedCommand for EthtoolDrvinfo {}
impl FixedCommand for EthtoolChannels {}
impl FixedCommand for EthtoolRingparam {}
impl FixedCommand for EthtoolCoalesce {}
impl FixedCommand for EthtoolRxnfc {}

/// The most strings or statistics one string set may have: far more than
/// any driver reports (a 128-queue NIC has a few thousand), small enough
/// that a driver answering nonsense cannot make nettune allocate gigabytes.
const MAX_SET_SIZE: usize = 1 << 16;

/// Room for answers that grew between asking for a count and fetching the
/// list: the kernel writes its current count of strings or stats whatever
/// count we pass (net/ethtool/ioctl.c), so the buffer must absorb a driver
/// that added queues in between. A count beyond [`MAX_SET_SIZE`] is
/// refused (E2BIG).
fn with_headroom(count: usize) -> Result<usize, i32> {
    if count > MAX_SET_SIZE {
        return Err(libc::E2BIG);
    }
    Ok(count * 2 + 64)
}

/// The entries the kernel says it wrote (`len`), checked against the room
/// the buffer had: more than that cannot be trusted (and, thanks to the
/// guard page behind [`GuardedBuf`], was never written).
fn checked_len(len: u32, room: usize) -> Result<usize, i32> {
    let len = len as usize;
    if len > room {
        return Err(libc::EAGAIN);
    }
    Ok(len)
}

/// A byte buffer whose end touches an inaccessible page: if a driver's
/// count grew past the room between two calls, the kernel's copy to it
/// fails with EFAULT instead of writing past it.
struct GuardedBuf {
    map: *mut libc::c_void,
    map_len: usize,
    start: usize,
    len: usize,
}

impl GuardedBuf {
    fn new(len: usize) -> Result<GuardedBuf, i32> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        let data_pages = len.div_ceil(page).max(1);
        let map_len = (data_pages + 1) * page;
        // SAFETY: an anonymous private mapping; the result is checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(libc::ENOMEM);
        }
        let guard_at = data_pages * page;
        // SAFETY: the last page of our own mapping.
        let rc =
            unsafe { libc::mprotect(map.cast::<u8>().add(guard_at).cast(), page, libc::PROT_NONE) };
        if rc != 0 {
            // SAFETY: unmapping our own mapping.
            unsafe { libc::munmap(map, map_len) };
            return Err(libc::ENOMEM);
        }
        Ok(GuardedBuf {
            map,
            map_len,
            start: guard_at - len,
            len,
        })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: [start, start + len) lies inside the accessible part of
        // our mapping, zero-filled at creation, and is borrowed mutably
        // through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.map.cast::<u8>().add(self.start), self.len) }
    }
}

impl Drop for GuardedBuf {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Text of a NUL-padded C string field.
fn c_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Sizes of the string sets a query needs, from one ETHTOOL_GSSET_INFO.
pub(super) struct StringSetSizes {
    stats: Result<usize, i32>,
    pub(super) features: Result<usize, i32>,
}

impl EthtoolSocket {
    fn settings(&self, iface: &IfName) -> DriverSettings {
        let sizes = self.string_set_sizes(iface);
        DriverSettings {
            info: probe(self.fixed(iface, ETHTOOL_GDRVINFO).map(driver_info)),
            channels: probe(self.fixed(iface, ETHTOOL_GCHANNELS).map(channels)),
            rings: probe(self.fixed(iface, ETHTOOL_GRINGPARAM).map(rings)),
            coalesce: probe(self.fixed(iface, ETHTOOL_GCOALESCE).map(coalesce)),
            features: probe(sizes.features.and_then(|n| self.features(iface, n))),
            rss_indirection: probe(self.rss_indirection(iface)),
            rx_rings: probe(super::ntuple::rx_rings(self, iface)),
            ntuple: probe(super::ntuple::rules(self, iface)),
            rx_flow_hash: FLOW_TYPES
                .iter()
                .map(|&(name, flow_type)| {
                    (name.to_string(), probe(self.flow_hash(iface, flow_type)))
                })
                .collect(),
            queue_stats: probe(sizes.stats.and_then(|n| self.queue_stats(iface, n))),
        }
    }

    pub(super) fn string_set_sizes(&self, iface: &IfName) -> StringSetSizes {
        // struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[]
        let mut buf = [0u8; 16 + 2 * 4];
        write_u32(&mut buf, 0, ETHTOOL_GSSET_INFO);
        let asked: u64 = (1 << ETH_SS_STATS) | (1 << ETH_SS_FEATURES);
        buf[8..16].copy_from_slice(&asked.to_ne_bytes());
        // SAFETY: room for the header and one u32 per set asked for.
        if let Err(errno) = unsafe { self.buffer(iface, &mut buf) } {
            return StringSetSizes {
                stats: Err(errno),
                features: Err(errno),
            };
        }
        let mut mask = [0; 8];
        mask.copy_from_slice(&buf[8..16]);
        let answered = u64::from_ne_bytes(mask) & asked;
        // data[] holds one size per answered set, in set order.
        let size_of = |set: u32| -> Result<usize, i32> {
            if answered & (1 << set) == 0 {
                return Err(libc::EOPNOTSUPP);
            }
            let slot = (answered & ((1 << set) - 1)).count_ones() as usize;
            Ok(read_u32(&buf, 16 + 4 * slot) as usize)
        };
        StringSetSizes {
            stats: size_of(ETH_SS_STATS),
            features: size_of(ETH_SS_FEATURES),
        }
    }

    /// The names of a string set of `count` entries (count > 0).
    pub(super) fn strings(
        &self,
        iface: &IfName,
        set: u32,
        count: usize,
    ) -> Result<Vec<String>, i32> {
        // struct ethtool_gstrings: cmd, string_set, len, u8 data[len * 32]
        let room = with_headroom(count)?;
        let mut guarded = GuardedBuf::new(12 + room * ETH_GSTRING_LEN)?;
        let buf = guarded.bytes();
        write_u32(buf, 0, ETHTOOL_GSTRINGS);
        write_u32(buf, 4, set);
        write_u32(buf, 8, u32::try_from(count).map_err(|_| libc::EINVAL)?);
        // SAFETY: room for the header and `room` strings (see with_headroom);
        // past them a guard page turns a larger answer into EFAULT.
        match unsafe { self.buffer(iface, buf) } {
            // The set grew past the room between the two calls.
            Err(libc::EFAULT) => return Err(libc::EAGAIN),
            other => other?,
        }
        let len = checked_len(read_u32(buf, 8), room)?;
        Ok(buf[12..12 + len * ETH_GSTRING_LEN]
            .chunks_exact(ETH_GSTRING_LEN)
            .map(c_text)
            .collect())
    }

    pub(super) fn features(
        &self,
        iface: &IfName,
        count: usize,
    ) -> Result<BTreeMap<String, Feature>, i32> {
        if count == 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let names = self.strings(iface, ETH_SS_FEATURES, count)?;
        // struct ethtool_gfeatures: cmd, size, then per 32 features a block
        // {available, requested, active, never_changed}.
        let words = names.len().div_ceil(32);
        let mut buf = vec![0u8; 8 + words * 16];
        write_u32(&mut buf, 0, ETHTOOL_GFEATURES);
        write_u32(&mut buf, 4, u32::try_from(words).map_err(|_| libc::EINVAL)?);
        // SAFETY: the kernel copies at most `words` blocks (the size we pass).
        unsafe { self.buffer(iface, &mut buf)? };
        let mut features = BTreeMap::new();
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let block = 8 + (i / 32) * 16;
            let bit = 1u32 << (i % 32);
            let available = read_u32(&buf, block) & bit != 0;
            let active = read_u32(&buf, block + 8) & bit != 0;
            let never_changed = read_u32(&buf, block + 12) & bit != 0;
            let feature = Feature {
                active,
                changeable: available && !never_changed,
            };
            features.insert(name.clone(), feature);
        }
        for (kernel_name, ethtool_name) in LEGACY_FEATURE_NAMES {
            if let Some(&feature) = features.get(kernel_name) {
                features.insert(ethtool_name.to_string(), feature);
            }
        }
        Ok(features)
    }

    fn rss_indirection(&self, iface: &IfName) -> Result<Vec<u32>, i32> {
        // struct ethtool_rxfh_indir: cmd, size, u32 ring_index[size];
        // size 0 asks for the table's size.
        let mut head = [0u8; 8];
        write_u32(&mut head, 0, ETHTOOL_GRXFHINDIR);
        // SAFETY: with size 0 the kernel writes only the header.
        unsafe { self.buffer(iface, &mut head)? };
        let size = read_u32(&head, 4) as usize;
        if size == 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if size > MAX_SET_SIZE {
            return Err(libc::E2BIG);
        }
        let mut buf = vec![0u8; 8 + size * 4];
        write_u32(&mut buf, 0, ETHTOOL_GRXFHINDIR);
        write_u32(&mut buf, 4, read_u32(&head, 4));
        // SAFETY: the kernel refuses (EINVAL) a table larger than `size`.
        match unsafe { self.buffer(iface, &mut buf) } {
            // The table grew between the two calls: try again next time.
            Err(libc::EINVAL) => return Err(libc::EAGAIN),
            other => other?,
        }
        let len = (read_u32(&buf, 4) as usize).min(size);
        Ok((0..len).map(|i| read_u32(&buf, 8 + 4 * i)).collect())
    }

    fn flow_hash(&self, iface: &IfName, flow_type: u32) -> Result<FlowHash, i32> {
        let mut command = EthtoolRxnfc {
            flow_type,
            ..EthtoolRxnfc::default()
        };
        command.cmd = ETHTOOL_GRXFH;
        let raw: *mut EthtoolRxnfc = &mut command;
        // SAFETY: a whole struct ethtool_rxnfc, the most GRXFH writes.
        unsafe { self.call(iface, raw.cast())? };
        Ok(flow_hash_fields(command.data))
    }

    fn queue_stats(&self, iface: &IfName, count: usize) -> Result<Vec<QueueStats>, i32> {
        if count == 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let names = self.strings(iface, ETH_SS_STATS, count)?;
        // struct ethtool_stats: cmd, n_stats, u64 data[n_stats]
        let room = with_headroom(count)?;
        let mut guarded = GuardedBuf::new(8 + room * 8)?;
        let buf = guarded.bytes();
        write_u32(buf, 0, ETHTOOL_GSTATS);
        write_u32(buf, 4, u32::try_from(count).map_err(|_| libc::EINVAL)?);
        // SAFETY: room for the header and `room` counters (see
        // with_headroom); past them a guard page turns a larger answer into
        // EFAULT.
        match unsafe { self.buffer(iface, buf) } {
            Err(libc::EFAULT) => return Err(libc::EAGAIN),
            other => other?,
        }
        let len = checked_len(read_u32(buf, 4), room)?;
        if len != names.len() {
            // Queues changed between the two calls; names would not match.
            return Err(libc::EAGAIN);
        }
        let values = buf[8..8 + len * 8].chunks_exact(8).map(|chunk| {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            u64::from_ne_bytes(word)
        });
        let queues = group_queue_stats(names.iter().map(String::as_str).zip(values));
        if queues.is_empty() {
            // Statistics, but none per queue.
            return Err(libc::EOPNOTSUPP);
        }
        Ok(queues)
    }
}

fn driver_info(d: EthtoolDrvinfo) -> DriverInfo {
    DriverInfo {
        driver: c_text(&d.driver),
        version: c_text(&d.version),
        firmware_version: c_text(&d.fw_version),
        bus_info: c_text(&d.bus_info),
    }
}

fn channels(c: EthtoolChannels) -> Channels {
    Channels {
        rx: c.rx_count,
        tx: c.tx_count,
        other: c.other_count,
        combined: c.combined_count,
        max_rx: c.max_rx,
        max_tx: c.max_tx,
        max_other: c.max_other,
        max_combined: c.max_combined,
    }
}

fn rings(r: EthtoolRingparam) -> Rings {
    Rings {
        rx: r.rx_pending,
        rx_max: r.rx_max_pending,
        rx_mini: r.rx_mini_pending,
        rx_mini_max: r.rx_mini_max_pending,
        rx_jumbo: r.rx_jumbo_pending,
        rx_jumbo_max: r.rx_jumbo_max_pending,
        tx: r.tx_pending,
        tx_max: r.tx_max_pending,
    }
}

fn coalesce(c: EthtoolCoalesce) -> Coalesce {
    Coalesce {
        rx_usecs: c.rx_coalesce_usecs,
        rx_frames: c.rx_max_coalesced_frames,
        tx_usecs: c.tx_coalesce_usecs,
        tx_frames: c.tx_max_coalesced_frames,
        adaptive_rx: c.use_adaptive_rx_coalesce != 0,
        adaptive_tx: c.use_adaptive_tx_coalesce != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{checked_len, with_headroom, GuardedBuf, MAX_SET_SIZE};

    #[test]
    fn set_sizes_are_bounded_and_answers_checked_against_the_room() {
        assert_eq!(with_headroom(10), Ok(84));
        assert_eq!(with_headroom(MAX_SET_SIZE + 1), Err(libc::E2BIG));
        assert_eq!(checked_len(84, 84), Ok(84));
        assert_eq!(checked_len(85, 84), Err(libc::EAGAIN));
    }

    #[test]
    fn the_kernel_cannot_write_past_a_guarded_buffer() {
        let mut buf = GuardedBuf::new(100).expect("mmap");
        assert_eq!(buf.bytes().len(), 100);
        assert!(buf.bytes().iter().all(|&b| b == 0));
        // A read(2) of more than the buffer holds, into it: the kernel's
        // copy meets the guard page and fails (EFAULT) or stops short;
        // nothing past the 100 bytes is written (that page is not ours).
        let mut fds = [0; 2];
        // SAFETY: a pipe of two fresh descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let data = [7u8; 200];
        // SAFETY: writing our own array to our own pipe.
        let wrote = unsafe { libc::write(fds[1], data.as_ptr().cast(), data.len()) };
        assert_eq!(wrote, 200);
        let bytes = buf.bytes();
        // SAFETY: deliberately asks for 200 bytes into 100: the guard page
        // behind them makes the kernel stop instead of overwriting memory.
        let got = unsafe { libc::read(fds[0], bytes.as_mut_ptr().cast(), 200) };
        assert!(got == 100 || got == -1, "read {got}");
        // SAFETY: closing our own descriptors.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }

    use super::*;

    #[test]
    fn flow_hash_bits_name_their_fields() {
        // RXH_IP_SRC | RXH_IP_DST: `ethtool -n eth0 rx-flow-hash udp4` on ixgbe
        let udp4 = flow_hash_fields(0x30);
        assert_eq!(udp4.fields, ["ip_src", "ip_dst"]);
        assert!(udp4.ips_only());
        // ... | RXH_L4_B_0_1 | RXH_L4_B_2_3: tcp4 on the same NIC
        let tcp4 = flow_hash_fields(0xf0);
        assert_eq!(
            tcp4.fields,
            ["ip_src", "ip_dst", "l4_src_port", "l4_dst_port"]
        );
        assert!(!tcp4.ips_only());
        let all = flow_hash_fields(0xfe);
        assert_eq!(
            all.fields,
            [
                "l2_dst",
                "vlan",
                "l3_proto",
                "ip_src",
                "ip_dst",
                "l4_src_port",
                "l4_dst_port"
            ]
        );
        assert_eq!(flow_hash_fields(1 << 31).fields, ["discard"]);
        assert!(flow_hash_fields(0).fields.is_empty());
        // A bit newer than this code (RXH_IP6_FL is 1 << 9) is not dropped.
        assert_eq!(
            flow_hash_fields(0x30 | 1 << 9).fields,
            ["ip_src", "ip_dst", "bit_9"]
        );
    }

    #[test]
    fn errno_maps_to_not_supported_or_unknown() {
        for errno in [libc::EOPNOTSUPP, libc::EINVAL, ENOTSUPP] {
            assert_eq!(missing_for_errno(errno), Missing::NotSupported, "{errno}");
        }
        for errno in [libc::ENODEV, libc::EPERM, libc::EAGAIN, libc::EFAULT] {
            assert_eq!(missing_for_errno(errno), Missing::Unknown, "{errno}");
        }
        assert_eq!(probe::<u32>(Err(libc::EOPNOTSUPP)), Probe::NOT_SUPPORTED);
        assert_eq!(probe::<u32>(Err(libc::ENODEV)), Probe::UNKNOWN);
        assert_eq!(probe::<u32>(Ok(4)), Probe::Value(4));
    }

    #[test]
    fn interface_names_that_cannot_exist_are_refused() {
        assert!(IfName::new("eth0").is_some());
        assert!(IfName::new("fifteen_chars_x").is_some());
        assert!(IfName::new("sixteen_chars_xx").is_none());
        assert!(IfName::new("").is_none());
        assert!(IfName::new("a\0b").is_none());
    }

    #[test]
    fn c_text_stops_at_the_first_nul() {
        let mut field = [0u8; 32];
        field[..10].copy_from_slice(b"virtio_net");
        assert_eq!(c_text(&field), "virtio_net");
        assert_eq!(c_text(&[0u8; 32]), "");
        assert_eq!(c_text(b"no_nul"), "no_nul");
    }
}
