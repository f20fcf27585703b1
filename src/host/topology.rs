//! `/sys/devices/system/cpu` and `/sys/devices/system/node`: which CPUs
//! this kernel could bring online and which are, how they group into
//! cores, packages and NUMA nodes, and which are isolated or tickless.
//!
//! Each file holds one value: a CPU list (`0-7,16-23`), an id (`1`; `-1`
//! where the kernel knows none), or for `nohz_full` `(null)` when unset.
//! The parsers take that text; the `read_*` functions tie them to their
//! paths.

use crate::base::cpuset::parse_list;
use crate::base::Root;
use crate::error::{KernelError, ParseError};

use super::model::{Cpu, NumaNode};

const ONLINE: &str = "/sys/devices/system/cpu/online";
const POSSIBLE: &str = "/sys/devices/system/cpu/possible";
const NODES: &str = "/sys/devices/system/node";

/// The online CPUs (`/sys/devices/system/cpu/online`).
pub fn read_online(root: &Root) -> Result<Vec<u32>, KernelError> {
    root.parse(ONLINE, parse_list)
}

/// The CPUs this kernel could ever bring online
/// (`/sys/devices/system/cpu/possible`): the bound for CPU lists a user
/// types (`--cpus`, `--pin`). Falls back to `online` on kernels without the
/// file.
pub fn possible_cpus(root: &Root) -> Result<Vec<u32>, KernelError> {
    match root.parse_optional(POSSIBLE, parse_list)? {
        Some(cpus) => Ok(cpus),
        None => root.parse(ONLINE, parse_list),
    }
}

/// Parse a CPU list a user typed for `flag` (`--cpus`, `--pin`): bounded by
/// the host's possible CPUs, so `0-2000000000` is an error naming the value
/// and the limit instead of an allocation of gigabytes.
pub fn parse_user_cpus(flag: &str, text: &str, root: &Root) -> anyhow::Result<Vec<u32>> {
    let possible = possible_cpus(root)?;
    let limit = possible.iter().max().map_or(1, |&m| m + 1);
    crate::base::cpuset::parse_list_within(text, limit)
        .map_err(|e| anyhow::anyhow!("{flag} '{text}': {e}; write a CPU list such as 0-3,8"))
}

/// A CPU list that may say `(null)` (`nohz_full` unset): no CPUs then.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, ParseError> {
    if text == "(null)" {
        return Ok(Vec::new());
    }
    parse_list(text)
}

/// A CPU-list file that may be absent or say `(null)`:
/// `/sys/devices/system/cpu/isolated` and `.../nohz_full`.
pub fn read_cpu_list(root: &Root, path: &str) -> Result<Vec<u32>, KernelError> {
    match root.read_value(path)? {
        None => Ok(Vec::new()),
        Some(text) => parse_cpu_list(&text).map_err(|e| KernelError::Parse {
            path: path.into(),
            msg: e.0,
        }),
    }
}

/// The node number of a `/sys/devices/system/node` entry (`node1`); `None`
/// for the files beside the nodes (`online`, `possible`, ...).
pub fn node_id(entry: &str) -> Option<u32> {
    entry
        .strip_prefix("node")
        .and_then(|n| n.parse::<u32>().ok())
}

/// The NUMA nodes and their CPUs (`/sys/devices/system/node/nodeN/cpulist`),
/// in node order; none on a kernel without NUMA.
pub fn read_numa_nodes(root: &Root) -> Result<Vec<NumaNode>, KernelError> {
    let mut nodes = Vec::new();
    for name in root.list(NODES)?.unwrap_or_default() {
        let Some(id) = node_id(&name) else {
            continue;
        };
        let path = format!("{NODES}/{name}/cpulist");
        let cpus = root.parse(&path, parse_list)?;
        nodes.push(NumaNode { id, cpus });
    }
    nodes.sort_by_key(|n| n.id);
    Ok(nodes)
}

/// A topology id (`physical_package_id`, `core_id`): `None` for `-1` (the
/// kernel knows none) and for text that is no number.
pub fn parse_id(text: &str) -> Option<u32> {
    text.parse::<i64>().ok().and_then(|v| u32::try_from(v).ok())
}

/// CPU `id` as its topology files describe it: `siblings` from
/// `thread_siblings_list` (itself alone when absent), the package and
/// core ids, and the node among `nodes` that lists it.
pub fn cpu(
    id: u32,
    siblings: Option<Vec<u32>>,
    package: Option<u32>,
    core: Option<u32>,
    nodes: &[NumaNode],
) -> Cpu {
    Cpu {
        id,
        node: nodes.iter().find(|n| n.cpus.contains(&id)).map(|n| n.id),
        siblings: siblings.unwrap_or_else(|| vec![id]),
        package,
        core,
    }
}

/// Each online CPU's place: `/sys/devices/system/cpu/cpuN/topology`.
pub fn read_cpus(root: &Root, online: &[u32], nodes: &[NumaNode]) -> Result<Vec<Cpu>, KernelError> {
    let mut cpus = Vec::with_capacity(online.len());
    for &id in online {
        let topo = format!("/sys/devices/system/cpu/cpu{id}/topology");
        let siblings = root.parse_optional(&format!("{topo}/thread_siblings_list"), parse_list)?;
        let number = |file: &str| -> Result<Option<u32>, KernelError> {
            Ok(root
                .read_value(&format!("{topo}/{file}"))?
                .as_deref()
                .and_then(parse_id))
        };
        let package = number("physical_package_id")?;
        let core = number("core_id")?;
        cpus.push(cpu(id, siblings, package, core, nodes));
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    // two-socket-smt-8q (a Debian 12 Xeon, 2 x 8 cores x 2 threads):
    // /sys/devices/system/node/node{0,1}/cpulist and CPU 17's topology.
    const NODE0_CPULIST_XEON: &str = "0-7,16-23\n";
    const NODE1_CPULIST_XEON: &str = "8-15,24-31\n";
    const CPU17_THREAD_SIBLINGS_LIST_XEON: &str = "1,17\n";
    const CPU17_CORE_ID_XEON: &str = "1";
    const CPU17_PHYSICAL_PACKAGE_ID_XEON: &str = "0";

    #[test]
    fn a_hyperthread_sits_on_its_core_package_and_node() {
        let nodes = vec![
            NumaNode {
                id: 0,
                cpus: parse_list(NODE0_CPULIST_XEON).expect("node0"),
            },
            NumaNode {
                id: 1,
                cpus: parse_list(NODE1_CPULIST_XEON).expect("node1"),
            },
        ];
        let siblings = parse_list(CPU17_THREAD_SIBLINGS_LIST_XEON).expect("siblings");
        let cpu17 = cpu(
            17,
            Some(siblings),
            parse_id(CPU17_PHYSICAL_PACKAGE_ID_XEON),
            parse_id(CPU17_CORE_ID_XEON),
            &nodes,
        );
        assert_eq!(cpu17.siblings, vec![1, 17]);
        assert_eq!(
            (cpu17.package, cpu17.core, cpu17.node),
            (Some(0), Some(1), Some(0))
        );
        // A CPU no node lists, without a siblings file: on its own.
        let lone = cpu(40, None, parse_id("-1"), parse_id("x"), &nodes);
        assert_eq!(lone.siblings, vec![40]);
        assert_eq!((lone.package, lone.core, lone.node), (None, None, None));
    }

    #[test]
    fn isolated_and_nohz_full_lists() {
        // two-socket-nic-node1: `isolcpus=15 nohz_full=15`.
        assert_eq!(parse_cpu_list("15").expect("isolated"), vec![15]);
        // vm-2cpu-virtio: isolated is empty, nohz_full says (null).
        assert_eq!(parse_cpu_list("").expect("isolated"), Vec::<u32>::new());
        assert_eq!(
            parse_cpu_list("(null)").expect("nohz_full"),
            Vec::<u32>::new()
        );
        assert!(parse_cpu_list("fifteen").is_err());
    }

    #[test]
    fn node_entries_are_told_from_the_files_beside_them() {
        assert_eq!(node_id("node1"), Some(1));
        assert_eq!(node_id("online"), None);
        assert_eq!(node_id("nodex"), None);
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("two-socket-smt-8q");
        let online = read_online(&root).expect("online");
        assert_eq!(online.len(), 32);
        let nodes = read_numa_nodes(&root).expect("nodes");
        let cpus = read_cpus(&root, &online, &nodes).expect("cpus");
        assert_eq!(cpus[17].siblings, vec![1, 17]);
        assert_eq!(cpus[17].node, Some(0));
        assert_eq!(
            read_cpu_list(&root, "/sys/devices/system/cpu/nohz_full").expect("nohz_full"),
            Vec::<u32>::new()
        );
    }
}
