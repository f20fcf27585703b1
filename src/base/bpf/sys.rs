//! The bpf(2) system call, for the few commands nettune needs: create a map
//! (the XSKMAP an XDP program redirects to, per-CPU counters), load a
//! program (with the verifier's log when it refuses), set, read and walk
//! map entries, attach a program to a raw tracepoint, and find a program
//! by id (its name; the descriptor that lets rtnetlink remove it only if
//! it is still the one nettune attached).
//!
//! Every object comes back as an [`OwnedFd`] and nothing is pinned in a
//! BPF filesystem: a map or program lives while a descriptor (or a
//! program using the map, or an attachment holding the program) does, so
//! closing the descriptors (also by the process's death, kill -9
//! included) releases it.
//!
//! `union bpf_attr` is written as a zeroed 128-byte buffer with each
//! command's fields at their offsets (include/uapi/linux/bpf.h); the
//! kernel accepts a shorter or longer attr as long as the bytes it does
//! not know are zero.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_GET_NEXT_KEY: u32 = 4;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_GET_FD_BY_ID: u32 = 13;
const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
const BPF_RAW_TRACEPOINT_OPEN: u32 = 17;

pub const BPF_MAP_TYPE_PERCPU_HASH: u32 = 5;
pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
pub const BPF_PROG_TYPE_XDP: u32 = 6;
pub const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
pub const BPF_PROG_TYPE_TRACING: u32 = 26;
/// `expected_attach_type` of a BTF-typed raw tracepoint program (tp_btf).
pub const BPF_TRACE_RAW_TP: u32 = 23;
/// `expected_attach_type` of an XDP program.
pub const BPF_XDP: u32 = 37;
/// `flags` of a map update: only create, never overwrite.
pub const BPF_NOEXIST: u64 = 1;
/// The longest object name the kernel keeps (BPF_OBJ_NAME_LEN, NUL included).
pub const OBJ_NAME_LEN: usize = 16;

const ATTR_LEN: usize = 128;
/// Verifier log room: a refusal of a program this small needs a few KiB.
const LOG_LEN: usize = 64 * 1024;

/// A bpf(2) attr being written.
struct Attr([u8; ATTR_LEN]);

impl Attr {
    fn new() -> Attr {
        Attr([0; ATTR_LEN])
    }

    fn u32(&mut self, offset: usize, value: u32) -> &mut Attr {
        self.0[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
        self
    }

    fn u64(&mut self, offset: usize, value: u64) -> &mut Attr {
        self.0[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
        self
    }

    fn name(&mut self, offset: usize, name: &str) -> &mut Attr {
        let bytes = name.as_bytes();
        let len = bytes.len().min(OBJ_NAME_LEN - 1);
        self.0[offset..offset + len].copy_from_slice(&bytes[..len]);
        self
    }

    #[cfg(test)]
    fn get_u32(&self, offset: usize) -> u32 {
        let mut word = [0; 4];
        word.copy_from_slice(&self.0[offset..offset + 4]);
        u32::from_ne_bytes(word)
    }
}

/// bpf(cmd, attr): the non-negative result, or the errno.
fn bpf(cmd: u32, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: attr is a writable buffer of ATTR_LEN bytes, the size passed;
    // every pointer inside it points to memory the caller keeps alive and
    // sized as the command's length fields say.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr.0.as_mut_ptr(),
            ATTR_LEN as libc::c_long,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn fd_of(rc: i64) -> OwnedFd {
    // SAFETY: a successful fd-returning bpf command gives a new descriptor
    // that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(rc as RawFd) }
}

/// BPF_MAP_CREATE: a map of `kind` with `entries` entries.
pub fn map_create(
    kind: u32,
    key_size: u32,
    value_size: u32,
    entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = Attr::new();
    attr.u32(0, kind)
        .u32(4, key_size)
        .u32(8, value_size)
        .u32(12, entries)
        .name(28, name);
    bpf(BPF_MAP_CREATE, &mut attr).map(fd_of)
}

/// BPF_MAP_UPDATE_ELEM with a 4-byte key and value (an XSKMAP slot: key
/// the queue, value the AF_XDP socket).
pub fn map_update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let key = key.to_ne_bytes();
    let value = value.to_ne_bytes();
    let mut attr = Attr::new();
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_ptr() as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// BPF_MAP_LOOKUP_ELEM of a per-CPU array slot: one u64 per possible CPU,
/// summed.
pub fn percpu_sum(map: &OwnedFd, key: u32, possible_cpus: usize) -> io::Result<u64> {
    let key = key.to_ne_bytes();
    // Per-CPU values come 8-byte aligned, one per possible CPU.
    let mut values = vec![0u64; possible_cpus.max(1)];
    let mut attr = Attr::new();
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, values.as_mut_ptr() as u64);
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
    Ok(values.iter().fold(0u64, |sum, v| sum.wrapping_add(*v)))
}

/// BPF_MAP_UPDATE_ELEM with a key and a value of the map's sizes (for a
/// per-CPU map, one value per possible CPU, each 8-byte aligned).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    let mut attr = Attr::new();
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_ptr() as u64)
        .u64(24, flags);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// BPF_MAP_LOOKUP_ELEM into `value` (sized as the kernel copies it: for a
/// per-CPU map, the rounded-up value size times the possible CPUs); false
/// when the key is not there.
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let mut attr = Attr::new();
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_mut_ptr() as u64);
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// BPF_MAP_GET_NEXT_KEY: the key after `key` (the first key for `None`)
/// into `next`; false at the end of the map.
pub fn map_next_key(map: &OwnedFd, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let mut attr = Attr::new();
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.map_or(0, |k| k.as_ptr() as u64))
        .u64(16, next.as_mut_ptr() as u64);
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A program the verifier refused, with its log.
#[derive(Debug, thiserror::Error)]
#[error("the kernel refused the {what} program ({errno}): {log}")]
pub struct Refused {
    /// What kind of program: `XDP`, `tracing`.
    pub what: &'static str,
    pub errno: io::Error,
    pub log: String,
}

/// What BPF_PROG_LOAD needs of a program.
#[derive(Debug, Clone, Copy)]
pub struct Program<'a> {
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// The kernel BTF type the program attaches to (a tracing program's
    /// `btf_trace_NAME` typedef); 0 for none.
    pub attach_btf_id: u32,
    /// The instructions, 8 bytes each.
    pub insns: &'a [u64],
    pub name: &'a str,
    /// The license the kernel checks before it allows GPL-only helpers.
    pub license: &'a str,
    /// Named in a refusal: `XDP`, `tracing`.
    pub what: &'static str,
}

/// BPF_PROG_LOAD of an XDP program (`insns`: 8 bytes each).
pub fn prog_load_xdp(insns: &[u64], name: &str, license: &str) -> Result<OwnedFd, Refused> {
    prog_load(&Program {
        prog_type: BPF_PROG_TYPE_XDP,
        expected_attach_type: BPF_XDP,
        attach_btf_id: 0,
        insns,
        name,
        license,
        what: "XDP",
    })
}

/// BPF_PROG_LOAD. On a refusal the program is loaded again with the
/// verifier log on, and the log's last lines are returned.
pub fn prog_load(program: &Program<'_>) -> Result<OwnedFd, Refused> {
    let license = std::ffi::CString::new(program.license).unwrap_or_default();
    let insns = program.insns;
    let load = |log: Option<&mut [u8]>| {
        let mut attr = Attr::new();
        attr.u32(0, program.prog_type)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .name(48, program.name)
            .u32(68, program.expected_attach_type)
            .u32(108, program.attach_btf_id);
        if let Some(log) = log {
            attr.u32(24, 1)
                .u32(28, log.len() as u32)
                .u64(32, log.as_mut_ptr() as u64);
        }
        bpf(BPF_PROG_LOAD, &mut attr).map(fd_of)
    };
    match load(None) {
        Ok(fd) => Ok(fd),
        Err(errno) => {
            let mut log = vec![0u8; LOG_LEN];
            let text = match load(Some(&mut log)) {
                Ok(_) => "no log: it loaded the second time".to_string(),
                Err(_) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]);
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(8)..].join(" | ")
                }
            };
            Err(Refused {
                what: program.what,
                errno,
                log: text,
            })
        }
    }
}

/// BPF_RAW_TRACEPOINT_OPEN: attach a raw-tracepoint program to the
/// tracepoint `name` (`kfree_skb`, `napi_poll`), or a tracing program to
/// the tracepoint it was loaded for (`name` `None`). The attachment is the
/// descriptor returned: closing it (or the process ending) detaches.
pub fn raw_tracepoint_open(name: Option<&str>, prog: &OwnedFd) -> io::Result<OwnedFd> {
    let name = name
        .map(std::ffi::CString::new)
        .transpose()
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut attr = Attr::new();
    attr.u64(0, name.as_ref().map_or(0, |n| n.as_ptr() as u64))
        .u32(8, prog.as_raw_fd() as u32);
    bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr).map(fd_of)
}

/// What `bpftool prog show` says of a program: its id and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    pub id: u32,
    pub name: String,
    pub prog_type: u32,
}

/// BPF_OBJ_GET_INFO_BY_FD on a program.
pub fn prog_info(prog: &impl AsRawFd) -> io::Result<ProgInfo> {
    // struct bpf_prog_info: type 0, id 4, ..., name[16] at 64; 256 bytes
    // hold every field up to name and more.
    let mut info = [0u8; 256];
    let mut attr = Attr::new();
    attr.u32(0, prog.as_raw_fd() as u32)
        .u32(4, info.len() as u32)
        .u64(8, info.as_mut_ptr() as u64);
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let word = |o: usize| u32::from_ne_bytes([info[o], info[o + 1], info[o + 2], info[o + 3]]);
    let name = &info[64..64 + OBJ_NAME_LEN];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(ProgInfo {
        prog_type: word(0),
        id: word(4),
        name: String::from_utf8_lossy(&name[..end]).into_owned(),
    })
}

/// BPF_PROG_GET_FD_BY_ID: a descriptor of program `id` (ENOENT: gone).
pub fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = Attr::new();
    attr.u32(0, id);
    bpf(BPF_PROG_GET_FD_BY_ID, &mut attr).map(fd_of)
}

/// The name of program `id`; `None` when it cannot be asked (not root, gone).
pub fn prog_name(id: u32) -> Option<String> {
    let fd = prog_fd_by_id(id).ok()?;
    prog_info(&fd).ok().map(|i| i.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_fields_land_at_their_offsets() {
        let mut attr = Attr::new();
        attr.u32(0, 17)
            .u64(8, 0x1122_3344_5566_7788)
            .name(28, "a_very_long_map_name");
        assert_eq!(attr.get_u32(0), 17);
        assert_eq!(attr.0[8], 0x88);
        // Names are cut to 15 bytes and stay NUL-terminated.
        assert_eq!(&attr.0[28..43], b"a_very_long_map");
        assert_eq!(attr.0[43], 0);
    }
}
