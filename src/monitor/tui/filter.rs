//! What `/` narrows the terminal view to: a CPU list or part of an
//! interface name. The state (`app`) holds it and every pane reads it.

use crate::base::cpuset;

/// What `/` narrows the view to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Filter {
    #[default]
    None,
    /// CPUs (`3`, `0-7`, `cpu12`, `1,4-5`): the CPU rows and the heat
    /// map's columns.
    Cpus(Vec<u32>),
    /// Interfaces whose name contains the text: the heat map's rows and
    /// the queue table.
    Iface(String),
}

impl Filter {
    /// What a user typed after `/`: a CPU list (optionally with `cpu`
    /// before it), else part of an interface name; empty clears.
    pub fn parse(text: &str) -> Filter {
        let text = text.trim();
        if text.is_empty() {
            return Filter::None;
        }
        let list = text
            .strip_prefix("cpu")
            .or_else(|| text.strip_prefix("CPU"))
            .unwrap_or(text);
        let looks_like_cpus = list
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
            && list.chars().any(|c| c.is_ascii_digit());
        if looks_like_cpus {
            if let Ok(cpus) = cpuset::parse_list(list) {
                if !cpus.is_empty() {
                    return Filter::Cpus(cpus);
                }
            }
        }
        Filter::Iface(text.to_string())
    }

    pub fn cpu(&self, cpu: u32) -> bool {
        match self {
            Filter::Cpus(cpus) => cpus.binary_search(&cpu).is_ok(),
            _ => true,
        }
    }

    pub fn iface(&self, name: &str) -> bool {
        match self {
            Filter::Iface(part) => name.contains(part.as_str()),
            _ => true,
        }
    }

    /// How the title bar names it.
    pub fn label(&self) -> Option<String> {
        match self {
            Filter::None => None,
            Filter::Cpus(cpus) => Some(format!("CPU {}", cpuset::format_list(cpus))),
            Filter::Iface(part) => Some(format!("interface ~ {part}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_cpu_lists_and_interface_names() {
        assert_eq!(Filter::parse(""), Filter::None);
        assert_eq!(Filter::parse("  "), Filter::None);
        assert_eq!(Filter::parse("3"), Filter::Cpus(vec![3]));
        assert_eq!(Filter::parse("cpu0-2"), Filter::Cpus(vec![0, 1, 2]));
        assert_eq!(Filter::parse("CPU1,5"), Filter::Cpus(vec![1, 5]));
        assert_eq!(Filter::parse("eth0"), Filter::Iface("eth0".into()));
        assert_eq!(Filter::parse("cpu"), Filter::Iface("cpu".into()));
        assert_eq!(Filter::parse("-"), Filter::Iface("-".into()));
        // Not a list the kernel would write: an interface name then.
        assert_eq!(Filter::parse("99999999"), Filter::Iface("99999999".into()));
        let f = Filter::parse("1-2");
        assert!(f.cpu(1) && f.cpu(2) && !f.cpu(3) && f.iface("eth0"));
        let f = Filter::parse("eth");
        assert!(f.iface("eth0") && !f.iface("lo") && f.cpu(7));
        assert_eq!(Filter::parse("0-3").label().as_deref(), Some("CPU 0-3"));
    }
}
