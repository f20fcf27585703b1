//! Every fuzz target, by name. A target takes the input as the parser it
//! covers receives it (a file's text, a peer's bytes) and checks what must
//! hold beyond "no panic" where that is cheap.

mod files;
mod http;
mod kernel;
mod net;
mod tree;
mod values;
mod wire;

/// The Prometheus text exposition as `monitor --prometheus`'s tests and
/// benchmark read it back (theirs or node_exporter's).
fn prom_text(data: &[u8]) {
    let Some(text) = crate::common::text(data) else {
        return;
    };
    if let Ok(parsed) = nettune::monitor::prom::parse::parse(text) {
        for s in &parsed.series {
            let labels: Vec<(&str, &str)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let _ = parsed.get(&s.name, &labels);
        }
    }
}

/// A target: its name and what it does with one input.
pub type Target = (&'static str, fn(&[u8]));

pub const ALL: &[Target] = &[
    ("proc_interrupts", kernel::proc_interrupts),
    ("proc_softirqs", kernel::proc_softirqs),
    ("proc_softnet", kernel::proc_softnet),
    ("proc_stat", kernel::proc_stat),
    ("proc_snmp", kernel::proc_snmp),
    ("proc_snmp6", kernel::proc_snmp6),
    ("proc_packet", kernel::proc_packet),
    ("proc_protocols", kernel::proc_protocols),
    ("irqname", kernel::irqname),
    ("cpuset", values::cpuset),
    ("units", values::units),
    ("driver_values", values::driver_values),
    ("plan_target", values::plan_target),
    ("host_tree", tree::host_tree),
    ("driver_file", tree::driver_file),
    ("saved_plan", files::saved_plan),
    ("journal", files::journal),
    ("series", files::series),
    ("results", files::results),
    ("prom_text", prom_text),
    ("serve_proto", wire::serve_proto),
    ("rr_wire", wire::rr_wire),
    ("stream_wire", wire::stream_wire),
    ("xsk_frame", wire::xsk_frame),
    ("http_head", http::http_head),
    ("http_response", http::http_response),
    ("rr_server", net::rr_server_target),
    ("stream_server", net::stream_server_target),
    ("prom_server", net::prom_server_target),
    ("serve", net::serve_target),
];
