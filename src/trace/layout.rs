//! Where the tracers' programs find what they read on the running kernel:
//! the position of each tracepoint argument (a raw-tracepoint program sees
//! them as `ctx[0]`, `ctx[1]`, ...) and the offsets of the structure
//! fields behind them (`sk_buff.dev`, `net_device.nd_net`, `net.ns.inum`,
//! `napi_struct.napi_id`), all from the kernel's BTF, since both change
//! between kernels and builds.

use crate::base::bpf::btf::{Btf, Kind, Shape};

/// The kfree_skb arguments and the fields the drop program reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropLayout {
    /// The `btf_trace_kfree_skb` type, for a tp_btf program.
    pub btf_id: Option<u32>,
    pub skb_arg: u8,
    pub location_arg: u8,
    pub reason_arg: u8,
    /// The receiving socket (Linux 6.11+), when the tracepoint passes it.
    pub rx_sk_arg: Option<u8>,
    /// `None` without BTF: reasons and locations are still counted, but
    /// not the packet's protocol, and no namespace or interface filter.
    pub fields: Option<SkbFields>,
}

/// Byte offsets of the fields read behind a `struct sk_buff *`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkbFields {
    pub skb_dev: u32,
    pub skb_sk: u32,
    /// `__be16 protocol`: the ethertype.
    pub skb_protocol: u32,
    /// `unsigned char *head` and `u16 network_header` (from head).
    pub skb_head: u32,
    pub skb_network_header: u32,
    pub dev: DevFields,
    /// `sock.__sk_common.skc_net.net`.
    pub sk_net: u32,
    /// `sock.sk_protocol` (IPPROTO_UDP, IPPROTO_TCP), when it is a plain
    /// 16-bit field (a bitfield before Linux 5.6).
    pub sk_protocol: Option<u32>,
}

/// Byte offsets in `struct net_device` and `struct net`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevFields {
    pub ifindex: u32,
    pub name: u32,
    /// `nd_net.net`: the device's namespace.
    pub nd_net: u32,
    /// `net.ns.inum`: the namespace's inode number, as
    /// /proc/PID/ns/net and /run/netns/NAME show it.
    pub net_inum: u32,
}

/// The napi_poll arguments and the fields its program reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NapiLayout {
    /// The `btf_trace_napi_poll` type, for a tp_btf program.
    pub btf_id: Option<u32>,
    pub napi_arg: u8,
    pub work_arg: u8,
    pub budget_arg: u8,
    pub napi_id: u32,
    pub napi_dev: u32,
    pub dev: DevFields,
}

/// What a kernel without the type information or the fields lacks, said
/// in one line.
pub type Missing = String;

/// A field's byte offset, checking its size.
fn offset(btf: &Btf, outer: &str, path: &[&str], size: u32) -> Result<u32, Missing> {
    let m = btf.field(outer, path)?;
    let at = m
        .byte_offset()
        .ok_or_else(|| format!("{outer}.{} is a bitfield on this kernel", path.join(".")))?;
    match btf.size_of(m.type_id) {
        Some(s) if s == size => Ok(at),
        other => Err(format!(
            "{outer}.{} is {} bytes on this kernel, not {size}",
            path.join("."),
            other.map_or("of unknown size".to_string(), |s| s.to_string())
        )),
    }
}

fn arg_where(args: &[u32], btf: &Btf, want: impl Fn(&Shape) -> bool) -> Option<u8> {
    args.iter()
        .position(|&a| want(&btf.shape(a)))
        .and_then(|i| u8::try_from(i).ok())
}

impl DevFields {
    fn read(btf: &Btf) -> Result<DevFields, Missing> {
        Ok(DevFields {
            ifindex: offset(btf, "net_device", &["ifindex"], 4)?,
            name: offset(btf, "net_device", &["name"], 16)?,
            nd_net: offset(btf, "net_device", &["nd_net", "net"], 8)?,
            net_inum: offset(btf, "net", &["ns", "inum"], 4)?,
        })
    }
}

impl DropLayout {
    /// From BTF: argument positions by their types, field offsets by name.
    pub fn read(btf: &Btf) -> Result<DropLayout, Missing> {
        let args = btf
            .tracepoint_args("kfree_skb")
            .ok_or("the kernel's type information has no kfree_skb tracepoint")?;
        let skb_arg = arg_where(&args, btf, |s| *s == Shape::PtrTo("sk_buff".into()))
            .ok_or("the kfree_skb tracepoint passes no sk_buff")?;
        let reason_arg = arg_where(&args, btf, |s| *s == Shape::Enum("skb_drop_reason".into()))
            .ok_or("the kfree_skb tracepoint passes no drop reason (Linux 5.17 added it)")?;
        let location_arg = arg_where(&args, btf, |s| *s == Shape::Ptr)
            .ok_or("the kfree_skb tracepoint passes no location")?;
        let rx_sk_arg = arg_where(&args, btf, |s| *s == Shape::PtrTo("sock".into()));
        let fields = SkbFields {
            skb_dev: offset(btf, "sk_buff", &["dev"], 8)?,
            skb_sk: offset(btf, "sk_buff", &["sk"], 8)?,
            skb_protocol: offset(btf, "sk_buff", &["protocol"], 2)?,
            skb_head: offset(btf, "sk_buff", &["head"], 8)?,
            skb_network_header: offset(btf, "sk_buff", &["network_header"], 2)?,
            dev: DevFields::read(btf)?,
            sk_net: offset(btf, "sock", &["__sk_common", "skc_net", "net"], 8)?,
            sk_protocol: offset(btf, "sock", &["sk_protocol"], 2).ok(),
        };
        Ok(DropLayout {
            btf_id: btf.find(Kind::Typedef, "btf_trace_kfree_skb"),
            skb_arg,
            location_arg,
            reason_arg,
            rx_sk_arg,
            fields: Some(fields),
        })
    }

    /// Without BTF: the argument order every kernel with drop reasons has
    /// (skb, location, reason; include/trace/events/skb.h), nothing read
    /// behind the pointers.
    pub fn without_btf() -> DropLayout {
        DropLayout {
            btf_id: None,
            skb_arg: 0,
            location_arg: 1,
            reason_arg: 2,
            rx_sk_arg: None,
            fields: None,
        }
    }

    /// How many arguments the program reads (the attachment checks it).
    pub fn args_read(&self) -> u8 {
        let mut most = self.skb_arg.max(self.location_arg).max(self.reason_arg);
        if let (Some(sk), Some(_)) = (self.rx_sk_arg, self.fields) {
            most = most.max(sk);
        }
        most + 1
    }
}

impl NapiLayout {
    pub fn read(btf: &Btf) -> Result<NapiLayout, Missing> {
        let args = btf
            .tracepoint_args("napi_poll")
            .ok_or("the kernel's type information has no napi_poll tracepoint")?;
        let napi_arg = arg_where(&args, btf, |s| *s == Shape::PtrTo("napi_struct".into()))
            .ok_or("the napi_poll tracepoint passes no napi_struct")?;
        let ints: Vec<u8> = args
            .iter()
            .enumerate()
            .filter(|(_, &a)| btf.shape(a) == Shape::Int(4))
            .filter_map(|(i, _)| u8::try_from(i).ok())
            .collect();
        let [work_arg, budget_arg] = ints[..] else {
            return Err("the napi_poll tracepoint does not pass work and budget".into());
        };
        Ok(NapiLayout {
            btf_id: btf.find(Kind::Typedef, "btf_trace_napi_poll"),
            napi_arg,
            work_arg,
            budget_arg,
            napi_id: offset(btf, "napi_struct", &["napi_id"], 4)?,
            napi_dev: offset(btf, "napi_struct", &["dev"], 8)?,
            dev: DevFields::read(btf)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::bpf::btf::testing::Builder;

    /// kfree_skb as 6.11+ declares it, and the structures behind it.
    fn kernel(with_protocol: bool) -> Btf {
        let mut b = Builder::new();
        let u16_ = b.int("u16", 2); // 1
        let int = b.int("int", 4); // 2
        let void_ptr = b.ptr(0); // 3
        let ns = b.strukt(4, "ns_common", 16, &[("inum", int, 64)]); // 4
        let net = b.strukt(4, "net", 64, &[("ns", ns, 128)]); // 5
        let net_ptr = b.ptr(net); // 6
        let pnet = b.strukt(4, "", 8, &[("net", net_ptr, 0)]); // 7
        let possible = b.typedef("possible_net_t", pnet); // 8
        let name = b.strukt(4, "name16", 16, &[]); // 9: a 16-byte stand-in
        let dev = b.strukt(
            4,
            "net_device",
            512,
            &[
                ("name", name, 0),
                ("ifindex", int, 256),
                ("nd_net", possible, 512),
            ],
        );
        let dev_ptr = b.ptr(dev);
        let common = b.strukt(4, "sock_common", 64, &[("skc_net", possible, 384)]);
        let sock = b.strukt(4, "sock", 128, &[("__sk_common", common, 0)]);
        let sock_ptr = b.ptr(sock);
        let mut skb_members = vec![
            ("dev", dev_ptr, 128),
            ("sk", sock_ptr, 192),
            ("head", void_ptr, 1536),
            ("network_header", u16_, 1440),
        ];
        if with_protocol {
            skb_members.push(("protocol", u16_, 1408));
        }
        let skb = b.strukt(4, "sk_buff", 224, &skb_members);
        let skb_ptr = b.ptr(skb);
        let reason = b.enumeration("skb_drop_reason", &[("SKB_DROP_REASON_NO_SOCKET", 3)]);
        let proto = b.proto(&[void_ptr, skb_ptr, void_ptr, reason, sock_ptr]);
        let proto_ptr = b.ptr(proto);
        let _ = b.typedef("btf_trace_kfree_skb", proto_ptr);
        Btf::parse(b.build()).expect("btf")
    }

    #[test]
    fn arguments_and_fields_come_from_btf() {
        let layout = DropLayout::read(&kernel(true)).expect("layout");
        assert_eq!(
            (
                layout.skb_arg,
                layout.location_arg,
                layout.reason_arg,
                layout.rx_sk_arg
            ),
            (0, 1, 2, Some(3))
        );
        let f = layout.fields.expect("fields");
        assert_eq!(
            (
                f.skb_dev,
                f.skb_sk,
                f.skb_protocol,
                f.skb_head,
                f.skb_network_header
            ),
            (16, 24, 176, 192, 180)
        );
        assert_eq!(
            (f.dev.ifindex, f.dev.nd_net, f.dev.net_inum, f.sk_net),
            (32, 64, 24, 48)
        );
        assert_eq!(layout.args_read(), 4);
    }

    #[test]
    fn a_missing_field_is_named() {
        let err = DropLayout::read(&kernel(false)).expect_err("no protocol");
        assert!(err.contains("sk_buff") && err.contains("protocol"), "{err}");
        assert_eq!(DropLayout::without_btf().args_read(), 3);
    }
}
