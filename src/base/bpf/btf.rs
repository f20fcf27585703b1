//! The kernel's BPF Type Format (Documentation/bpf/btf.rst), as
//! /sys/kernel/btf/vmlinux holds it: where a field sits in a kernel
//! structure on the running kernel (`sk_buff.dev`, `net.ns.inum`), the
//! values of an enum (`skb_drop_reason`), and the argument types of a
//! tracepoint (`btf_trace_kfree_skb`).
//!
//! Parsing takes bytes and does no I/O. Every offset read from the data is
//! checked against its length, and every walk through types is bounded
//! (a chain of typedefs, nested anonymous members), so a damaged or hostile
//! file gives an error, never a panic or a loop.

use crate::error::ParseError;

const MAGIC: u16 = 0xeb9f;
/// struct btf_header: magic, version, flags, hdr_len, then four u32s.
const HEADER_LEN: usize = 24;
/// struct btf_type: name_off, info, size/type.
const TYPE_LEN: usize = 12;
/// How deep a walk through typedefs or anonymous members may go.
const MAX_DEPTH: usize = 32;

/// A type's kind (BTF_KIND_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Ptr,
    Array,
    Struct,
    Union,
    Enum,
    Fwd,
    Typedef,
    Volatile,
    Const,
    Restrict,
    Func,
    FuncProto,
    Var,
    Datasec,
    Float,
    DeclTag,
    TypeTag,
    Enum64,
}

impl Kind {
    fn of(code: u32) -> Option<Kind> {
        Some(match code {
            1 => Kind::Int,
            2 => Kind::Ptr,
            3 => Kind::Array,
            4 => Kind::Struct,
            5 => Kind::Union,
            6 => Kind::Enum,
            7 => Kind::Fwd,
            8 => Kind::Typedef,
            9 => Kind::Volatile,
            10 => Kind::Const,
            11 => Kind::Restrict,
            12 => Kind::Func,
            13 => Kind::FuncProto,
            14 => Kind::Var,
            15 => Kind::Datasec,
            16 => Kind::Float,
            17 => Kind::DeclTag,
            18 => Kind::TypeTag,
            19 => Kind::Enum64,
            _ => return None,
        })
    }

    /// Bytes that follow the common part, for `vlen` entries.
    fn extra(self, vlen: usize) -> usize {
        match self {
            Kind::Int | Kind::Var | Kind::DeclTag => 4,
            Kind::Array => 12,
            Kind::Struct | Kind::Union | Kind::Datasec | Kind::Enum64 => 12 * vlen,
            Kind::Enum | Kind::FuncProto => 8 * vlen,
            _ => 0,
        }
    }
}

/// One type: its kind, name and the raw words after the common part.
#[derive(Debug, Clone, Copy)]
pub struct Type<'a> {
    pub kind: Kind,
    pub name: &'a str,
    pub vlen: usize,
    pub kind_flag: bool,
    /// `size` for ints, structs, unions, enums; `type` for pointers,
    /// typedefs, modifiers, functions.
    pub size_or_type: u32,
    extra: &'a [u8],
}

/// A member of a struct or union, or a field found by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub type_id: u32,
    /// From the start of the outermost structure, in bits.
    pub bit_offset: u32,
    /// Non-zero for a bitfield.
    pub bitfield_size: u32,
}

impl Member {
    /// The byte offset, or `None` for a bitfield or a field not on a byte.
    pub fn byte_offset(&self) -> Option<u32> {
        (self.bitfield_size == 0 && self.bit_offset % 8 == 0).then_some(self.bit_offset / 8)
    }
}

/// What a type is, seen through typedefs and modifiers: what a caller
/// needs to recognise a tracepoint's argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A pointer to the named struct or union (empty name: anonymous).
    PtrTo(String),
    /// `void *` or a pointer to anything else.
    Ptr,
    /// The named enum.
    Enum(String),
    /// An integer of this many bytes.
    Int(u32),
    Other,
}

/// The parsed type information.
#[derive(Debug)]
pub struct Btf {
    data: Vec<u8>,
    strings: std::ops::Range<usize>,
    /// Where each type starts in `data`; index = type id (0: void).
    index: Vec<usize>,
}

fn word(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn bad(msg: impl Into<String>) -> ParseError {
    ParseError::new(msg)
}

impl Btf {
    /// Parse the whole file. Only little-endian data (the byte order of
    /// every host nettune supports) is accepted.
    pub fn parse(data: Vec<u8>) -> Result<Btf, ParseError> {
        let magic = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        if magic != Some(MAGIC) {
            return Err(bad("not BTF data in this byte order (wrong magic)"));
        }
        let field = |at: usize| word(&data, at).ok_or_else(|| bad("the header is cut short"));
        let hdr_len = field(4)? as usize;
        if hdr_len < HEADER_LEN {
            return Err(bad(format!("header length {hdr_len} is too short")));
        }
        let (type_off, type_len, str_off, str_len) =
            (field(8)?, field(12)?, field(16)?, field(20)?);
        let section = |off: u32, len: u32| -> Result<std::ops::Range<usize>, ParseError> {
            let start = hdr_len
                .checked_add(off as usize)
                .ok_or_else(|| bad("a section offset overflows"))?;
            let end = start
                .checked_add(len as usize)
                .ok_or_else(|| bad("a section length overflows"))?;
            if end > data.len() {
                return Err(bad("a section runs past the end of the data"));
            }
            Ok(start..end)
        };
        let types = section(type_off, type_len)?;
        let strings = section(str_off, str_len)?;
        let mut index = vec![0usize];
        let mut at = types.start;
        while at < types.end {
            let info = word(&data, at + 4)
                .filter(|_| at + TYPE_LEN <= types.end)
                .ok_or_else(|| bad(format!("type {} is cut short", index.len())))?;
            let code = (info >> 24) & 0x1f;
            let kind = Kind::of(code)
                .ok_or_else(|| bad(format!("type {} has unknown kind {code}", index.len())))?;
            let vlen = (info & 0xffff) as usize;
            let next = at + TYPE_LEN + kind.extra(vlen);
            if next > types.end {
                return Err(bad(format!(
                    "type {} runs past the type section",
                    index.len()
                )));
            }
            index.push(at);
            at = next;
        }
        Ok(Btf {
            data,
            strings,
            index,
        })
    }

    /// How many types there are (ids 1 to this).
    pub fn len(&self) -> usize {
        self.index.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn string(&self, off: u32) -> &str {
        let start = self.strings.start.saturating_add(off as usize);
        if start >= self.strings.end {
            return "";
        }
        let bytes = &self.data[start..self.strings.end];
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        std::str::from_utf8(&bytes[..end]).unwrap_or("")
    }

    /// Type `id`; `None` for void (0) or an id past the end.
    pub fn ty(&self, id: u32) -> Option<Type<'_>> {
        let &at = self.index.get(id as usize).filter(|_| id != 0)?;
        let info = word(&self.data, at + 4)?;
        let kind = Kind::of((info >> 24) & 0x1f)?;
        let vlen = (info & 0xffff) as usize;
        let start = at + TYPE_LEN;
        let extra = self.data.get(start..start + kind.extra(vlen))?;
        Some(Type {
            kind,
            name: self.string(word(&self.data, at)?),
            vlen,
            kind_flag: info >> 31 == 1,
            size_or_type: word(&self.data, at + 8)?,
            extra,
        })
    }

    /// The first type of `kind` named `name`.
    pub fn find(&self, kind: Kind, name: &str) -> Option<u32> {
        (1..self.index.len() as u32).find(|&id| {
            self.ty(id)
                .is_some_and(|t| t.kind == kind && t.name == name)
        })
    }

    /// `id` without typedefs and modifiers (const, volatile, restrict,
    /// type tags); 0 (void) stays 0.
    pub fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..MAX_DEPTH {
            match self.ty(id) {
                Some(t)
                    if matches!(
                        t.kind,
                        Kind::Typedef
                            | Kind::Const
                            | Kind::Volatile
                            | Kind::Restrict
                            | Kind::TypeTag
                    ) =>
                {
                    id = t.size_or_type
                }
                _ => return id,
            }
        }
        id
    }

    /// The direct members of struct or union `id` (offsets from its start).
    pub fn members(&self, id: u32) -> Vec<Member> {
        let Some(t) = self
            .ty(id)
            .filter(|t| matches!(t.kind, Kind::Struct | Kind::Union))
        else {
            return Vec::new();
        };
        (0..t.vlen)
            .filter_map(|i| {
                let at = 12 * i;
                let offset = word(t.extra, at + 8)?;
                let (bit_offset, bitfield_size) = if t.kind_flag {
                    (offset & 0x00ff_ffff, offset >> 24)
                } else {
                    (offset, 0)
                };
                Some(Member {
                    name: self.string(word(t.extra, at)?).to_string(),
                    type_id: word(t.extra, at + 4)?,
                    bit_offset,
                    bitfield_size,
                })
            })
            .collect()
    }

    /// Member `name` of struct or union `id`, looking inside anonymous
    /// structs and unions too (`sk_buff.dev` sits in one), with its offset
    /// from the start of `id`.
    pub fn member(&self, id: u32, name: &str) -> Option<Member> {
        self.member_within(self.resolve(id), name, 0)
    }

    fn member_within(&self, id: u32, name: &str, depth: usize) -> Option<Member> {
        if depth > MAX_DEPTH {
            return None;
        }
        let members = self.members(id);
        if let Some(m) = members.iter().find(|m| m.name == name) {
            return Some(m.clone());
        }
        members.iter().filter(|m| m.name.is_empty()).find_map(|m| {
            let inner = self.member_within(self.resolve(m.type_id), name, depth + 1)?;
            Some(Member {
                bit_offset: inner.bit_offset + m.bit_offset,
                ..inner
            })
        })
    }

    /// The field at `path` inside struct `outer` (`["ns", "inum"]` in
    /// `net`): each step a member of the one before, embedded (not behind
    /// a pointer). Its offset is from the start of `outer`.
    pub fn field(&self, outer: &str, path: &[&str]) -> Result<Member, String> {
        let start = self
            .find(Kind::Struct, outer)
            .ok_or_else(|| format!("the kernel's type information has no struct {outer}"))?;
        let mut id = start;
        let mut bits = 0u32;
        let mut found: Option<Member> = None;
        for step in path {
            let m = self.member(id, step).ok_or_else(|| {
                format!(
                    "struct {outer} has no field {} on this kernel",
                    path.join(".")
                )
            })?;
            bits += m.bit_offset;
            id = self.resolve(m.type_id);
            found = Some(m);
        }
        let m = found.ok_or_else(|| "an empty field path".to_string())?;
        Ok(Member {
            bit_offset: bits,
            ..m
        })
    }

    /// The size in bytes of type `id` (pointers: 8), when it has one.
    pub fn size_of(&self, id: u32) -> Option<u32> {
        let t = self.ty(self.resolve(id))?;
        match t.kind {
            Kind::Int | Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 | Kind::Float => {
                Some(t.size_or_type)
            }
            Kind::Ptr => Some(8),
            Kind::Array => {
                let elem = word(t.extra, 0)?;
                let count = word(t.extra, 8)?;
                self.size_of(elem)?.checked_mul(count)
            }
            _ => None,
        }
    }

    /// The values of enum `name` (32- or 64-bit), in declaration order.
    pub fn enum_values(&self, name: &str) -> Option<Vec<(String, i64)>> {
        let id = self
            .find(Kind::Enum, name)
            .or_else(|| self.find(Kind::Enum64, name))?;
        Some(self.enumerators(id))
    }

    fn enumerators(&self, id: u32) -> Vec<(String, i64)> {
        let Some(t) = self.ty(id) else {
            return Vec::new();
        };
        let signed = t.kind_flag;
        (0..t.vlen)
            .filter_map(|i| match t.kind {
                Kind::Enum => {
                    let raw = word(t.extra, 8 * i + 4)?;
                    let value = if signed {
                        i64::from(raw as i32)
                    } else {
                        i64::from(raw)
                    };
                    Some((self.string(word(t.extra, 8 * i)?).to_string(), value))
                }
                Kind::Enum64 => {
                    let lo = u64::from(word(t.extra, 12 * i + 4)?);
                    let hi = u64::from(word(t.extra, 12 * i + 8)?);
                    Some((
                        self.string(word(t.extra, 12 * i)?).to_string(),
                        ((hi << 32) | lo) as i64,
                    ))
                }
                _ => None,
            })
            .collect()
    }

    /// The value of the enumerator `name` in whichever enum declares it
    /// (`NET_RX_SOFTIRQ` sits in an anonymous one).
    pub fn enumerator(&self, name: &str) -> Option<i64> {
        (1..self.index.len() as u32)
            .filter(|&id| {
                self.ty(id)
                    .is_some_and(|t| matches!(t.kind, Kind::Enum | Kind::Enum64))
            })
            .find_map(|id| {
                self.enumerators(id)
                    .into_iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v)
            })
    }

    /// The argument types of tracepoint `name` as a BPF raw-tracepoint
    /// program sees them (`ctx[0]`, `ctx[1]`, ...): the parameters of the
    /// `btf_trace_NAME` typedef after its first (the tracepoint's own data).
    pub fn tracepoint_args(&self, name: &str) -> Option<Vec<u32>> {
        let typedef = self.find(Kind::Typedef, &format!("btf_trace_{name}"))?;
        let ptr = self.ty(typedef)?.size_or_type;
        let proto_id = self.ty(ptr).filter(|t| t.kind == Kind::Ptr)?.size_or_type;
        let proto = self.ty(proto_id).filter(|t| t.kind == Kind::FuncProto)?;
        let params: Vec<u32> = (0..proto.vlen)
            .filter_map(|i| word(proto.extra, 8 * i + 4))
            .collect();
        Some(params.into_iter().skip(1).collect())
    }

    /// What type `id` is, through typedefs and modifiers.
    pub fn shape(&self, id: u32) -> Shape {
        let Some(t) = self.ty(self.resolve(id)) else {
            return Shape::Other;
        };
        match t.kind {
            Kind::Ptr => match self.ty(self.resolve(t.size_or_type)) {
                Some(p) if matches!(p.kind, Kind::Struct | Kind::Union | Kind::Fwd) => {
                    Shape::PtrTo(p.name.to_string())
                }
                _ => Shape::Ptr,
            },
            Kind::Enum | Kind::Enum64 => Shape::Enum(t.name.to_string()),
            Kind::Int => Shape::Int(t.size_or_type),
            _ => Shape::Other,
        }
    }
}

/// BTF data written by hand, for tests of what reads it.
#[cfg(test)]
pub mod testing {
    /// Builds a BTF blob type by type.
    #[derive(Default)]
    pub struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        count: u32,
    }

    impl Builder {
        pub fn new() -> Builder {
            Builder {
                strings: vec![0],
                ..Builder::default()
            }
        }

        pub fn str(&mut self, s: &str) -> u32 {
            if s.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            off
        }

        fn word(&mut self, w: u32) {
            self.types.extend_from_slice(&w.to_le_bytes());
        }

        /// Add a type; returns its id.
        pub fn ty(
            &mut self,
            kind: u32,
            name: &str,
            vlen: u32,
            flag: bool,
            size_or_type: u32,
        ) -> u32 {
            let name = self.str(name);
            self.word(name);
            self.word((kind << 24) | vlen | if flag { 1 << 31 } else { 0 });
            self.word(size_or_type);
            self.count += 1;
            self.count
        }

        pub fn int(&mut self, name: &str, size: u32) -> u32 {
            let id = self.ty(1, name, 0, false, size);
            self.word(size * 8);
            id
        }

        pub fn ptr(&mut self, to: u32) -> u32 {
            self.ty(2, "", 0, false, to)
        }

        pub fn typedef(&mut self, name: &str, to: u32) -> u32 {
            self.ty(8, name, 0, false, to)
        }

        /// members: (name, type, bit offset).
        pub fn strukt(
            &mut self,
            kind: u32,
            name: &str,
            size: u32,
            members: &[(&str, u32, u32)],
        ) -> u32 {
            let id = self.ty(kind, name, members.len() as u32, false, size);
            for &(n, t, off) in members {
                let n = self.str(n);
                self.word(n);
                self.word(t);
                self.word(off);
            }
            id
        }

        pub fn enumeration(&mut self, name: &str, values: &[(&str, i32)]) -> u32 {
            let id = self.ty(6, name, values.len() as u32, false, 4);
            for &(n, v) in values {
                let n = self.str(n);
                self.word(n);
                self.word(v as u32);
            }
            id
        }

        /// A FUNC_PROTO with these parameter types.
        pub fn proto(&mut self, params: &[u32]) -> u32 {
            let id = self.ty(13, "", params.len() as u32, false, 0);
            for &p in params {
                self.word(0);
                self.word(p);
            }
            id
        }

        pub fn build(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&0xeb9fu16.to_le_bytes());
            out.push(1);
            out.push(0);
            out.extend_from_slice(&24u32.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&(self.types.len() as u32).to_le_bytes());
            out.extend_from_slice(&(self.types.len() as u32).to_le_bytes());
            out.extend_from_slice(&(self.strings.len() as u32).to_le_bytes());
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Builder;
    use super::*;

    /// A kernel in miniature: sk_buff with `dev` inside an anonymous
    /// union, net_device with a typedef'd possible_net_t, net with ns.inum,
    /// an enum, and a tracepoint typedef.
    fn kernel() -> Vec<u8> {
        let mut b = Builder::new();
        let int = b.int("int", 4); // 1
        let uint = b.int("unsigned int", 4); // 2
        let void_ptr = b.ptr(0); // 3
        let ns_common = b.strukt(
            4,
            "ns_common",
            16,
            &[("stashed", void_ptr, 0), ("inum", uint, 64)],
        ); // 4
        let net = b.strukt(4, "net", 64, &[("ifindex", int, 0), ("ns", ns_common, 128)]); // 5
        let net_ptr = b.ptr(net); // 6
        let pnet = b.strukt(4, "", 8, &[("net", net_ptr, 0)]); // 7
        let possible = b.typedef("possible_net_t", pnet); // 8
        let dev = b.strukt(
            4,
            "net_device",
            256,
            &[
                ("name", int, 0),
                ("ifindex", int, 512),
                ("nd_net", possible, 1024),
            ],
        ); // 9
        let dev_ptr = b.ptr(dev); // 10
        let anon = b.strukt(5, "", 8, &[("dev", dev_ptr, 0), ("dev_scratch", int, 0)]); // 11
        let skb = b.strukt(4, "sk_buff", 224, &[("next", void_ptr, 0), ("", anon, 128)]); // 12
        let skb_ptr = b.ptr(skb); // 13
        let reason = b.enumeration(
            "skb_drop_reason",
            &[("SKB_CONSUMED", 1), ("SKB_DROP_REASON_NO_SOCKET", 3)],
        ); // 14
        let _ = b.enumeration("", &[("HI_SOFTIRQ", 0), ("NET_RX_SOFTIRQ", 3)]);
        let proto = b.proto(&[void_ptr, skb_ptr, void_ptr, reason]);
        let proto_ptr = b.ptr(proto);
        let _ = b.typedef("btf_trace_kfree_skb", proto_ptr);
        b.build()
    }

    #[test]
    fn fields_are_found_through_anonymous_members_and_typedefs() {
        let btf = Btf::parse(kernel()).expect("parse");
        let dev = btf.field("sk_buff", &["dev"]).expect("dev");
        assert_eq!(dev.byte_offset(), Some(16));
        assert_eq!(btf.size_of(dev.type_id), Some(8));
        let net = btf.field("net_device", &["nd_net", "net"]).expect("net");
        assert_eq!(net.byte_offset(), Some(128));
        let inum = btf.field("net", &["ns", "inum"]).expect("inum");
        assert_eq!(inum.byte_offset(), Some(24));
        assert_eq!(btf.size_of(inum.type_id), Some(4));
        let missing = btf.field("sk_buff", &["nope"]).expect_err("no such field");
        assert!(
            missing.contains("sk_buff") && missing.contains("nope"),
            "{missing}"
        );
        assert!(btf.field("no_such_struct", &["x"]).is_err());
    }

    #[test]
    fn enums_and_tracepoint_arguments_are_read() {
        let btf = Btf::parse(kernel()).expect("parse");
        let values = btf.enum_values("skb_drop_reason").expect("enum");
        assert_eq!(values[1], ("SKB_DROP_REASON_NO_SOCKET".to_string(), 3));
        assert_eq!(btf.enumerator("NET_RX_SOFTIRQ"), Some(3));
        let args = btf.tracepoint_args("kfree_skb").expect("args");
        let shapes: Vec<Shape> = args.iter().map(|&a| btf.shape(a)).collect();
        assert_eq!(
            shapes,
            [
                Shape::PtrTo("sk_buff".into()),
                Shape::Ptr,
                Shape::Enum("skb_drop_reason".into())
            ]
        );
        assert!(btf.tracepoint_args("napi_poll").is_none());
    }

    #[test]
    fn damaged_data_is_an_error_not_a_panic() {
        let good = kernel();
        assert!(Btf::parse(Vec::new()).is_err());
        assert!(Btf::parse(vec![0x9f, 0xeb, 1, 0]).is_err());
        for cut in [30, 60, good.len() - 40] {
            let mut short = good.clone();
            short.truncate(cut);
            // The header still claims the full sections.
            assert!(Btf::parse(short).is_err(), "cut at {cut}");
        }
        // An unknown kind.
        let mut odd = good.clone();
        odd[24 + 7] = 0x1f;
        assert!(Btf::parse(odd).is_err());
        // Every single-byte change of the header and first types parses
        // or fails, but never panics; lookups on what parsed stay bounded.
        for at in 0..good.len().min(200) {
            let mut bent = good.clone();
            bent[at] ^= 0xff;
            if let Ok(btf) = Btf::parse(bent) {
                let _ = btf.field("sk_buff", &["dev"]);
                let _ = btf.tracepoint_args("kfree_skb");
                let _ = btf.enum_values("skb_drop_reason");
            }
        }
    }

    #[test]
    fn a_typedef_loop_ends() {
        let mut b = Builder::new();
        // Type 1 is a typedef of type 2, which is a typedef of type 1.
        let _ = b.typedef("a", 2);
        let _ = b.typedef("b", 1);
        let btf = Btf::parse(b.build()).expect("parse");
        let _ = btf.resolve(1);
        assert_eq!(btf.size_of(1), None);
        assert_eq!(btf.shape(1), Shape::Other);
    }
}
