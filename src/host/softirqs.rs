//! `/proc/softirqs`: a header of CPUs, then one row per softirq type.
//!
//! ```text
//!                     CPU0       CPU1
//!       NET_RX:       2008       2631
//! ```
//!
//! Unlike /proc/interrupts, columns are the *possible* CPUs, offline ones
//! included, and every row has a count for each.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::interrupts::split_cpu_header;
use super::CpuSoftirqs;
use crate::base::Root;
use crate::error::{KernelError, ParseError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Softirqs {
    /// CPU ids in column order.
    pub cpus: Vec<u32>,
    /// Softirq name (`NET_RX`, `TIMER`, ...) -> count per column.
    pub rows: BTreeMap<String, Vec<u64>>,
}

impl Softirqs {
    /// NET_RX and NET_TX per CPU: where packet processing runs.
    pub fn net(&self) -> Vec<CpuSoftirqs> {
        let column = |name: &str, i: usize| {
            self.rows
                .get(name)
                .and_then(|counts| counts.get(i))
                .copied()
                .unwrap_or(0)
        };
        self.cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| CpuSoftirqs {
                cpu,
                net_rx: column("NET_RX", i),
                net_tx: column("NET_TX", i),
            })
            .collect()
    }
}

pub fn read(root: &Root) -> Result<Softirqs, KernelError> {
    root.parse("/proc/softirqs", parse)
}

/// Every row must have one count per CPU, and NET_RX and NET_TX (present
/// since 2.6.31) must be there: without them the file is truncated.
pub fn parse(text: &str) -> Result<Softirqs, ParseError> {
    let (cpus, lines) = split_cpu_header(text)?;
    let mut rows = BTreeMap::new();
    for (n, line) in lines {
        let Some((name, counts)) = line.split_once(':') else {
            return Err(ParseError::new(format!(
                "line {n}: '{}' has no 'NAME:' prefix (file garbled?)",
                line.trim()
            )));
        };
        let name = name.trim();
        let counts = counts
            .split_whitespace()
            .map(|c| {
                c.parse::<u64>().map_err(|_| {
                    ParseError::new(format!("line {n}: {name} count '{c}' is not a number"))
                })
            })
            .collect::<Result<Vec<u64>, _>>()?;
        if counts.len() != cpus.len() {
            return Err(ParseError::new(format!(
                "line {n}: {name} has {} counts for {} CPUs (file truncated?)",
                counts.len(),
                cpus.len()
            )));
        }
        rows.insert(name.to_string(), counts);
    }
    for required in ["NET_RX", "NET_TX"] {
        if !rows.contains_key(required) {
            return Err(ParseError::new(format!(
                "no {required} row (file truncated?)"
            )));
        }
    }
    Ok(Softirqs { cpus, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    // `cat /proc/softirqs` on the 2-vCPU Firecracker VM, Linux 6.18.
    const SOFTIRQS_FIRECRACKER_6_18: &str = r"                    CPU0       CPU1       
          HI:          0          0
       TIMER:       9224       7753
      NET_TX:          4          2
      NET_RX:       2041       2659
       BLOCK:          0      38465
    IRQ_POLL:          0          0
     TASKLET:        175          6
       SCHED:      15909      14810
     HRTIMER:          0          0
         RCU:      17137      19913
";

    // A 16-CPU Xeon host, Linux 5.15, with RX steered mostly to CPU 3.
    const SOFTIRQS_XEON_16CPU: &str = r"                    CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7       CPU8       CPU9       CPU10      CPU11      CPU12      CPU13      CPU14      CPU15      
          HI:          1          0          2          0          0          0          1          0          0          0          0          2          2          0          0          0
       TIMER:   74060310   57078001    8033677   75993910   16716417   30062626   84741177   84312661   78348519    8402983   77557446   78690039   53341552    6755764   29773100    6352221
      NET_TX:      36581       8827      19079      23456       9553      35534       7819      37515      20316      36817      44795      11944       6853      38215      37534      41971
      NET_RX:   26215622   50982352   14076910  412345678   96577889    9427393   76748230    8999533   84082061   28643310   67627625   92321738   72366283   58390467   43164119   63492024
       BLOCK:   78692782   60925377   48630762   40334045   33443251   24227884   93917444   32862079   11086393   77197845   40398754   70590681   66553392   46200526   98004489   60341505
    IRQ_POLL:          1          0          0          2          0          1          0          2          2          0          0          1          1          1          2          2
     TASKLET:    9329206   12662241   36330636   63732401   93655402   89241000    8824149    8242912   98234544   94252665   41654798   86956164   77670629   91534105   59912891   38297765
       SCHED:   96284154   51880050   89845048   46674257    3128344   62067692   47809585   22655071   82096233   15816331   66362352    8012728   29387351   38678460   17459750   99201455
     HRTIMER:   33334300   53504922   52572380   66740001   10915439   22429304   60388912   54007779   73844576   37390936   18477915   57883637   73949218   37469042   94910961   55840154
         RCU:   48253450   91733537   51161966   31070943   20356261   11238017   23751543   20406925   31232723   88484612   31417839    1719076   65190595   79170818   24573646   35365254
";

    #[test]
    fn softirqs_firecracker_6_18() {
        let s = parse(SOFTIRQS_FIRECRACKER_6_18).expect("parse");
        assert_eq!(s.cpus, vec![0, 1]);
        assert_eq!(s.rows.len(), 10);
        assert_eq!(
            s.net(),
            vec![
                CpuSoftirqs {
                    cpu: 0,
                    net_rx: 2041,
                    net_tx: 4
                },
                CpuSoftirqs {
                    cpu: 1,
                    net_rx: 2659,
                    net_tx: 2
                },
            ]
        );
    }

    #[test]
    fn softirqs_xeon_16cpu() {
        let s = parse(SOFTIRQS_XEON_16CPU).expect("parse");
        assert_eq!(s.cpus, (0..16).collect::<Vec<u32>>());
        let net = s.net();
        assert_eq!(net.len(), 16);
        let busiest = net.iter().max_by_key(|c| c.net_rx).expect("16 CPUs");
        assert_eq!(
            (busiest.cpu, busiest.net_rx, busiest.net_tx),
            (3, 412_345_678, 23_456)
        );
        assert_eq!(s.rows["HI"].len(), 16);
    }

    #[test]
    fn garbled_file_is_an_error_naming_the_line() {
        let short_row = "                    CPU0       CPU1\n      NET_TX:          4\n      NET_RX:       2008       2631\n";
        let err = parse(short_row).expect_err("one count of two");
        assert!(err.0.contains("line 2"), "{}", err.0);
        let bad_count = "                    CPU0       CPU1\n      NET_TX:          4          0\n      NET_RX:       2008       26x1\n";
        let err = parse(bad_count).expect_err("non-numeric");
        assert!(
            err.0.contains("line 3") && err.0.contains("'26x1'"),
            "{}",
            err.0
        );
        let no_net_rx = "                    CPU0\n      NET_TX:          4\n";
        let err = parse(no_net_rx).expect_err("no NET_RX");
        assert!(err.0.contains("NET_RX"), "{}", err.0);
        let no_header = "      NET_TX:          4          0\n";
        let err = parse(no_header).expect_err("no header");
        assert!(err.0.contains("line 1"), "{}", err.0);
    }

    #[test]
    fn reads_the_live_host() {
        let s = read(&Root::live()).expect("/proc/softirqs of this machine");
        // Columns are possible CPUs, a superset of the online ones.
        let ints = crate::host::interrupts::read(&Root::live()).expect("/proc/interrupts");
        assert!(ints.cpus.iter().all(|cpu| s.cpus.contains(cpu)));
        assert_eq!(s.net().len(), s.cpus.len());
    }
}
