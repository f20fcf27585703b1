//! `/proc/interrupts`: a header of online CPUs, then one line per IRQ.
//!
//! ```text
//!            CPU0       CPU1
//!  38:          0       2811 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
//! NMI:          0          0   Non-maskable interrupts
//! ERR:          0
//! ```
//!
//! Numbered lines carry one count per online CPU (width 10), the chip name
//! (which may contain spaces), `hwirq-type` (`524288-edge`; `-virq` without
//! a domain; `27 Level` on ARM), then the action names, several joined by
//! `, ` when the IRQ is shared. Named lines (`NMI`, `LOC`, `ERR`, ...) are
//! architecture counters; `ERR` and `MIS` have a single count.

use serde::{Deserialize, Serialize};

use crate::base::Root;
use crate::error::{KernelError, ParseError};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interrupts {
    /// Online CPU ids in column order (offline CPUs leave gaps: `CPU0 CPU2`).
    pub cpus: Vec<u32>,
    pub lines: Vec<IrqLine>,
    /// Rows left out because they are truncated (fewer counts than the
    /// header has CPUs), each named: the rest of the file is still used.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqLine {
    /// The IRQ number; `None` for architecture counters (`NMI`, `LOC`, `ERR`).
    pub irq: Option<u32>,
    /// The label before the colon: `38` or `NMI`.
    pub label: String,
    /// Counts by column (index i is CPU `cpus[i]`). `ERR` and `MIS` have one.
    pub per_cpu: Vec<u64>,
    /// Interrupt chip (`IR-PCI-MSI`, `PCI-MSIX-0000:00:03.0`, `IO-APIC`).
    pub chip: Option<String>,
    /// Hardware IRQ number within the chip's domain (`524288`).
    pub hwirq: Option<String>,
    /// Action names (`virtio2-input.0`); several for a shared IRQ, none for
    /// an IRQ that has counts but no handler now.
    pub actions: Vec<String>,
}

impl Interrupts {
    pub fn by_irq(&self, irq: u32) -> Option<&IrqLine> {
        self.lines.iter().find(|line| line.irq == Some(irq))
    }
}

pub fn read(root: &Root) -> Result<Interrupts, KernelError> {
    root.parse("/proc/interrupts", parse)
}

/// Parse the file. A garbled header or label is an error; a numbered row
/// with fewer counts than the header has CPUs (a truncated file, a row cut
/// short) is left out with a warning naming it.
pub fn parse(text: &str) -> Result<Interrupts, ParseError> {
    let (cpus, lines) = split_cpu_header(text)?;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for (n, line) in lines {
        match parse_line(line, n, cpus.len()) {
            Ok(parsed) => out.push(parsed),
            Err(Row::Truncated(why)) => warnings.push(why),
            Err(Row::Garbled(e)) => return Err(e),
        }
    }
    Ok(Interrupts {
        cpus,
        lines: out,
        warnings,
    })
}

/// Why a row was not taken.
enum Row {
    /// Fewer counts than CPUs: left out, with a warning.
    Truncated(String),
    /// Not an /proc/interrupts row at all: the file is not trusted.
    Garbled(ParseError),
}

/// The CPU ids of the `CPU0 CPU1 ...` header that /proc/interrupts and
/// /proc/softirqs share, and the non-blank lines after it with their
/// 1-based line numbers.
pub(crate) fn split_cpu_header(
    text: &str,
) -> Result<(Vec<u32>, impl Iterator<Item = (usize, &str)>), ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line))
        .filter(|(_, line)| !line.trim().is_empty());
    let Some((header_n, header)) = lines.next() else {
        return Err(ParseError::new(
            "empty file, expected a 'CPU0 CPU1 ...' header",
        ));
    };
    Ok((parse_cpu_header(header, header_n)?, lines))
}

fn parse_cpu_header(line: &str, n: usize) -> Result<Vec<u32>, ParseError> {
    line.split_whitespace()
        .map(|field| {
            field
                .strip_prefix("CPU")
                .and_then(|id| id.parse::<u32>().ok())
                .ok_or_else(|| {
                    ParseError::new(format!(
                        "line {n}: header field '{field}' is not 'CPU<n>' (file garbled?)"
                    ))
                })
        })
        .collect()
}

fn parse_line(line: &str, n: usize, ncpus: usize) -> Result<IrqLine, Row> {
    let Some((label, rest)) = line.split_once(':') else {
        return Err(Row::Garbled(ParseError::new(format!(
            "line {n}: '{}' has no 'label:' prefix (file garbled?)",
            line.trim()
        ))));
    };
    let label = label.trim();
    if label.is_empty() || label.contains(char::is_whitespace) {
        return Err(Row::Garbled(ParseError::new(format!(
            "line {n}: '{label}' is not an IRQ label (file garbled?)"
        ))));
    }
    let irq = label.parse::<u32>().ok();
    let fields = fields(rest);
    let mut per_cpu = Vec::with_capacity(ncpus);
    for &(_, field) in fields.iter().take(ncpus) {
        match field.parse::<u64>() {
            Ok(count) => per_cpu.push(count),
            // Named lines may have fewer counts than CPUs, then text.
            Err(_) if irq.is_none() => break,
            // A count that is not a number: the file is garbled.
            Err(_) if field.starts_with(|c: char| c.is_ascii_digit()) => {
                return Err(Row::Garbled(ParseError::new(format!(
                    "line {n}: IRQ {label}: count for CPU column {} is '{field}', \
                     not a number (file garbled?)",
                    per_cpu.len()
                ))))
            }
            // Text where counts should go on: the counts stop early.
            Err(_) => {
                return Err(Row::Truncated(format!(
                    "line {n}: IRQ {label} has {} count(s) where the header names {ncpus} CPUs \
                     (the row is cut short); left out",
                    per_cpu.len()
                )))
            }
        }
    }
    if per_cpu.is_empty() || (irq.is_some() && per_cpu.len() < ncpus) {
        let what = if irq.is_some() {
            format!("IRQ {label}")
        } else {
            format!("'{label}'")
        };
        return Err(Row::Truncated(format!(
            "line {n}: {what} has {} count(s) where the header names {} CPUs (the row is cut \
             short); left out",
            per_cpu.len(),
            if irq.is_some() { ncpus } else { 1 }
        )));
    }
    let mut irq_line = IrqLine {
        irq,
        label: label.to_string(),
        per_cpu,
        chip: None,
        hwirq: None,
        actions: Vec::new(),
    };
    if irq.is_some() {
        let after_counts = match fields.get(ncpus) {
            Some(&(offset, _)) => &rest[offset..],
            None => {
                return Err(Row::Truncated(format!(
                    "line {n}: IRQ {label} has no chip column (the row is cut short); left out"
                )))
            }
        };
        parse_device(after_counts, &mut irq_line);
    }
    Ok(irq_line)
}

/// Fill chip, hwirq and actions from the text after the counts:
/// `IR-PCI-MSI 524288-edge      eth0-TxRx-0`.
fn parse_device(text: &str, line: &mut IrqLine) {
    let fields = fields(text);
    let end_of = |i: usize| fields[i].0 + fields[i].1.len();
    // The chip is everything before the hwirq-type column, whatever it holds.
    let (chip_end, hwirq, actions_start) = match find_type_column(&fields) {
        Some(TypeColumn::Handler { index, hwirq }) => {
            (fields[index].0, hwirq.map(str::to_string), end_of(index))
        }
        Some(TypeColumn::Level { index }) => {
            let numeric_before = index >= 2 && is_digits(fields[index - 1].1);
            let (chip_end, hwirq) = if numeric_before {
                (fields[index - 1].0, Some(fields[index - 1].1.to_string()))
            } else {
                (fields[index].0, None)
            };
            // `Level` may be followed by the handler name (`-fasteoi`).
            let next_is_handler = fields
                .get(index + 1)
                .and_then(|&(_, f)| f.strip_prefix('-'))
                .is_some_and(is_handler_name);
            let last = if next_is_handler { index + 1 } else { index };
            (chip_end, hwirq, end_of(last))
        }
        // No type column (old XT-PIC style): the chip is one word.
        None => (end_of(0), None, end_of(0)),
    };
    line.chip = Some(text[..chip_end].trim().to_string());
    line.hwirq = hwirq;
    line.actions = text[actions_start..]
        .split(", ")
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
}

enum TypeColumn<'a> {
    /// `524288-edge` or `-virq`: hwirq digits (if any), then the handler.
    Handler {
        index: usize,
        hwirq: Option<&'a str>,
    },
    /// `Level` / `Edge` (CONFIG_GENERIC_IRQ_SHOW_LEVEL), hwirq just before.
    Level { index: usize },
}

/// The first field after the chip that is the hwirq-type column. The chip
/// is at least one field, so the search starts at the second.
fn find_type_column<'a>(fields: &[(usize, &'a str)]) -> Option<TypeColumn<'a>> {
    fields
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(index, &(_, field))| {
            if field == "Level" || field == "Edge" {
                return Some(TypeColumn::Level { index });
            }
            let (digits, handler) = field.split_once('-')?;
            let digits_ok = digits.is_empty() || is_digits(digits);
            (digits_ok && is_handler_name(handler)).then(|| TypeColumn::Handler {
                index,
                hwirq: (!digits.is_empty()).then_some(digits),
            })
        })
}

/// Flow handler names: `edge`, `fasteoi`, `percpu_devid`, `virq`, and
/// Xen's `msi-x`.
fn is_handler_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whitespace-separated fields with their byte offsets, so that action
/// names with spaces (`PCIe PME`) can be sliced out intact.
fn fields(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s0)) => {
                out.push((s0, &s[s0..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s0) = start {
        out.push((s0, &s[s0..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::irqname::{classify, IrqOwner};
    use crate::host::VectorRole;

    // `cat /proc/interrupts` on the 2-vCPU Firecracker VM, Linux 6.18.
    const INTERRUPTS_FIRECRACKER_6_18: &str = r"           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 25:          0          1  IO-APIC   6-edge      ACPI:Ged
 26:          0         14  IO-APIC   4-edge      ttyS0
 28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
 29:          0          0 PCI-MSIX-0000:00:01.0   1-edge      virtio0-inflate
 30:          0          0 PCI-MSIX-0000:00:01.0   2-edge      virtio0-deflate
 31:          0        104 PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats
 32:         56          0 PCI-MSIX-0000:00:01.0   4-edge      virtio0-reporting_vq
 33:          0          0 PCI-MSIX-0000:00:05.0   0-edge      virtio4-config
 34:         21          0 PCI-MSIX-0000:00:05.0   1-edge      virtio4-input
 35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:          0      37181 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       2839 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:       2114          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 40:          0          0 PCI-MSIX-0000:00:04.0   0-edge      virtio3-config
 41:       1787          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
 42:          0       3450 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx
 43:          1          0 PCI-MSIX-0000:00:04.0   3-edge      virtio3-event
NMI:          0          0   Non-maskable interrupts
LOC:      30994      33217   Local timer interrupts
SPU:          0          0   Spurious interrupts
PMI:          0          0   Performance monitoring interrupts
IWI:          1          0   IRQ work interrupts
RTR:          0          0   APIC ICR read retries
RES:       7110       6833   Rescheduling interrupts
CAL:      36885      28425   Function call interrupts
TLB:       9186       9155   TLB shootdowns
TRM:          0          0   Thermal event interrupts
HYP:         37         78   Hypervisor callback interrupts
ERR:          0
MIS:          0
PIN:          0          0   Posted-interrupt notification event
NPI:          0          0   Nested posted-interrupt event
PIW:          0          0   Posted-interrupt wakeup event
";

    // A 16-CPU Xeon host, Linux 5.15: bnx2 (BCM5709) eth0 at 0000:01:00.0
    // with vectors `eth0-0..7`, ixgbe (82599) eth1 at 0000:04:00.0 with
    // `eth1-TxRx-0..7` and the link vector `eth1`; IRQ 16 is shared and
    // IRQ 28 has counts but no handler.
    const INTERRUPTS_BNX2_IXGBE_16CPU: &str = r"            CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7       CPU8       CPU9       CPU10      CPU11      CPU12      CPU13      CPU14      CPU15      
   0:         45          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 IR-IO-APIC    2-edge      timer
   8:          0          0          0          0          0          0          0          0          0          0          0          1          0          0          0          0 IR-IO-APIC    8-edge      rtc0
   9:          0          3          0          0          0          0          0          0          0          0          0          0          0          0          0          0 IR-IO-APIC    9-fasteoi   acpi
  16:          0          0          0          0          0         29          0          0          0          0          0          0          0          0          0          0 IR-IO-APIC   16-fasteoi   ehci_hcd:usb1, i801_smbus
  23:          0          0          0         33          0          0          0          0          0          0          0          0          0          0          0          0 IR-IO-APIC   23-fasteoi   ehci_hcd:usb2
  24:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 DMAR-MSI    0-edge      dmar0
  26:          0          0          1          0          0          0          0          0          0          0          0          0          0          0          0          0 IR-PCI-MSI 16384-edge      PCIe PME, pciehp
  28:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 IR-PCI-MSI 65536-edge    
  38:  389182122          0          0          0          0          0          0          0       1921          0          0          0          0          0          0          0 IR-PCI-MSI 524288-edge      eth0-0
  39:          0  516912189          0          0          0          0          0          0          0       1167          0          0          0          0          0          0 IR-PCI-MSI 524289-edge      eth0-1
  40:          0          0  448699478          0          0          0          0          0          0          0        928          0          0          0          0          0 IR-PCI-MSI 524290-edge      eth0-2
  41:          0          0          0  480704103          0          0          0          0          0          0          0         23          0          0          0          0 IR-PCI-MSI 524291-edge      eth0-3
  42:          0          0          0          0  440714165          0          0          0          0          0          0          0       2693          0          0          0 IR-PCI-MSI 524292-edge      eth0-4
  43:          0          0          0          0          0  764432001          0          0          0          0          0          0          0       1060          0          0 IR-PCI-MSI 524293-edge      eth0-5
  44:          0          0          0          0          0          0  256398793          0          0          0          0          0          0          0       2600          0 IR-PCI-MSI 524294-edge      eth0-6
  45:          0          0          0          0          0          0          0  239832484          0          0          0          0          0          0          0         41 IR-PCI-MSI 524295-edge      eth0-7
  56:          0          0          0          0          0          0          0          0 1283875971          0          0          0          0          0          0          0 IR-PCI-MSI 2097152-edge      eth1-TxRx-0
  57:          0          0          0          0          0          0          0          0          0 1307267809          0          0          0          0          0          0 IR-PCI-MSI 2097153-edge      eth1-TxRx-1
  58:          0          0          0          0          0          0          0          0          0          0 3510016786          0          0          0          0          0 IR-PCI-MSI 2097154-edge      eth1-TxRx-2
  59:          0          0          0          0          0          0          0          0          0          0          0 1449086123          0          0          0          0 IR-PCI-MSI 2097155-edge      eth1-TxRx-3
  60:          0          0          0          0          0          0          0          0          0          0          0          0 2873519416          0          0          0 IR-PCI-MSI 2097156-edge      eth1-TxRx-4
  61:          0          0          0          0          0          0          0          0          0          0          0          0          0  619672822          0          0 IR-PCI-MSI 2097157-edge      eth1-TxRx-5
  62:          0          0          0          0          0          0          0          0          0          0          0          0          0          0 3202939876          0 IR-PCI-MSI 2097158-edge      eth1-TxRx-6
  63:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 2596033911 IR-PCI-MSI 2097159-edge      eth1-TxRx-7
  64:         11          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 IR-PCI-MSI 2097160-edge      eth1
  66:          0          0          0          0          0          0      58214          0          0          0          0          0          0          0          0          0 IR-PCI-MSI 327680-edge      ahci[0000:00:1f.2]
 NMI:        417        122        325        717        359        120        257        720        783        746        128        575        567        713        741        820   Non-maskable interrupts
 LOC:   49758733   40109802   51579335   58557637   44659721   66409195   21534730   56678314   76342856   66790644   79356101   96304999   33121118   85516861   49328746   87679249   Local timer interrupts
 SPU:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Spurious interrupts
 PMI:        145        389        185        106        635        482        340        601        258        416        411        424        571        564        167        268   Performance monitoring interrupts
 IWI:         89         61          1         56         62          1         60         89         15         58         78         10         63         83          2         18   IRQ work interrupts
 RTR:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   APIC ICR read retries
 RES:     841427     343543     525948     487185     134631     665412     145087     791395     781749     519441     733145     434888     600670     635950     800981     953370   Rescheduling interrupts
 CAL:      99216      95905      19292      39859      51940      23225      22206      81007      25927      41867      11197      61683      91996      16107      24889      16320   Function call interrupts
 TLB:      61469      30077      93670      43485      41410      33350      86298      11460      41315      78865      42039      25216      23635      94004      29298      45074   TLB shootdowns
 TRM:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Thermal event interrupts
 THR:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Threshold APIC interrupts
 DFR:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Deferred Error APIC interrupts
 MCE:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Machine check exceptions
 MCP:       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016       2016   Machine check polls
 ERR:          0
 MIS:          0
 PIN:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Posted-interrupt notification event
 NPI:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Nested posted-interrupt event
 PIW:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0   Posted-interrupt wakeup event

";

    // arm64 (Graviton2, 4 vCPUs), Linux 6.1: GENERIC_IRQ_SHOW_LEVEL prints
    // `27 Level` instead of `27-edge`; IPIs are named lines.
    const INTERRUPTS_GRAVITON_ARM64_4CPU: &str = r"           CPU0       CPU1       CPU2       CPU3       
 10:     401265     389514     412870     398127    GICv3  27 Level     arch_timer
 12:          0          0          0          0    GICv3  92 Level     ACPI:Ged
 15:         37          0          0          0  ITS-MSI 81920 Edge      ena-mgmnt@pci:0000:00:05.0
 16:    1843022          0          0          0  ITS-MSI 81921 Edge      ens5-Tx-Rx-0
 17:          0    1519871          0          0  ITS-MSI 81922 Edge      ens5-Tx-Rx-1
IPI0:     28019      31877      30122      29410       Rescheduling interrupts
IPI1:      1203       1408       1377       1299       Function call interrupts
Err:          0
";

    // CPU 1 offline: its column is absent, not zero.
    const INTERRUPTS_CPU1_OFFLINE: &str = r"           CPU0       CPU2       CPU3       
 24:          7          0          3  IO-APIC   5-edge      ACPI:Ged
 38:          0       2811         12 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
LOC:      16967      19708      18112   Local timer interrupts
ERR:          0
";

    // Wide hosts are generated line by line in the kernel's own format
    // (kernel/irq/proc.c show_interrupts, arch/x86/kernel/irq.c).
    const PREC: usize = 4;

    fn header(cpus: usize) -> String {
        let mut s = " ".repeat(PREC + 8);
        for cpu in 0..cpus {
            s += &format!("CPU{cpu:<8}");
        }
        s + "\n"
    }

    /// `seq_printf("%*d:")`, `" %10u"` per CPU, `" %8s"` chip, `" %*lu"`
    /// hwirq (blank without a domain), `"-%-8s"` handler, `"  %s"` actions.
    fn irq_line(irq: u32, counts: &[u64], chip: &str, hwirq: Option<u32>, actions: &str) -> String {
        let mut s = format!("{irq:>PREC$}:");
        for count in counts {
            s += &format!(" {count:>10}");
        }
        let hwirq = hwirq.map(|h| h.to_string()).unwrap_or_default();
        let handler = if chip.starts_with("xen-pirq") {
            "msi-x"
        } else {
            "edge"
        };
        s += &format!(" {chip:>8} {hwirq:>PREC$}-{handler:<8}");
        if !actions.is_empty() {
            s += &format!("  {actions}");
        }
        s + "\n"
    }

    /// `"%*s: "` label, `"%10u "` per CPU, `"  %s"` description.
    fn arch_line(label: &str, counts: &[u64], description: &str) -> String {
        let mut s = format!("{label:>PREC$}: ");
        for count in counts {
            s += &format!("{count:>10} ");
        }
        s + "  " + description + "\n"
    }

    /// Counts of a queue vector pinned to `cpu`: busy there, idle elsewhere.
    fn pinned(cpus: usize, cpu: usize, count: u64) -> Vec<u64> {
        (0..cpus)
            .map(|c| if c == cpu { count } else { 0 })
            .collect()
    }

    /// A 128-CPU two-socket host, Linux 6.8: ConnectX-5 ports eth0/eth1 at
    /// 0000:af:00.0/.1 (mlx5: 64 and 8 completion vectors plus async), i40e
    /// eth2 at 0000:3b:00.0, igb-style eth3 with separate rx/tx vectors, sfc
    /// eth4 with `eth4-N`.
    fn sample_mlx5_i40e_128cpu() -> String {
        let n = 128;
        let mut s = header(n);
        s += &irq_line(0, &pinned(n, 0, 58), "IR-IO-APIC", Some(2), "timer");
        s += &irq_line(1, &vec![0; n], "IR-IO-APIC", Some(9), "acpi");
        let mut irq = 100;
        for (pci, comp) in [("0000:af:00.0", 64), ("0000:af:00.1", 8)] {
            let chip = format!("IR-PCI-MSIX-{pci}");
            s += &irq_line(
                irq,
                &pinned(n, 0, 2131),
                &chip,
                Some(0),
                &format!("mlx5_async0@pci:{pci}"),
            );
            irq += 1;
            for q in 0..comp {
                let name = format!("mlx5_comp{q}@pci:{pci}");
                let count = 1_000_000 + u64::from(irq);
                s += &irq_line(
                    irq,
                    &pinned(n, q as usize, count),
                    &chip,
                    Some(q + 1),
                    &name,
                );
                irq += 1;
            }
        }
        let i40e = "IR-PCI-MSIX-0000:3b:00.0";
        s += &irq_line(
            irq,
            &pinned(n, 0, 9),
            i40e,
            Some(0),
            "i40e-0000:3b:00.0:misc",
        );
        irq += 1;
        for q in 0..16 {
            let name = format!("i40e-eth2-TxRx-{q}");
            s += &irq_line(
                irq,
                &pinned(n, 64 + q as usize, 77_000),
                i40e,
                Some(q + 1),
                &name,
            );
            irq += 1;
        }
        let igb = "IR-PCI-MSIX-0000:5e:00.0";
        for q in 0..4 {
            let rx = format!("eth3-rx-{q}");
            let tx = format!("eth3-tx-{q}");
            s += &irq_line(
                irq,
                &pinned(n, 96 + q as usize, 5_000),
                igb,
                Some(2 * q),
                &rx,
            );
            s += &irq_line(
                irq + 1,
                &pinned(n, 100 + q as usize, 4_000),
                igb,
                Some(2 * q + 1),
                &tx,
            );
            irq += 2;
        }
        s += &irq_line(irq, &pinned(n, 0, 3), igb, Some(8), "eth3");
        irq += 1;
        let sfc = "IR-PCI-MSIX-0000:d8:00.0";
        for q in 0..8 {
            let name = format!("eth4-{q}");
            s += &irq_line(
                irq,
                &pinned(n, 120 + q as usize, 31_337),
                sfc,
                Some(q),
                &name,
            );
            irq += 1;
        }
        s += &irq_line(
            irq,
            &pinned(n, 5, 880_123),
            "IR-PCI-MSIX-0000:01:00.0",
            Some(1),
            "nvme0q1",
        );
        s += &arch_line("NMI", &vec![412; n], "Non-maskable interrupts");
        s += &arch_line("LOC", &vec![98_765_432; n], "Local timer interrupts");
        s += &arch_line("RES", &vec![123_456; n], "Rescheduling interrupts");
        s += &format!("{:>PREC$}: {:>10}\n", "ERR", 0);
        s += &format!("{:>PREC$}: {:>10}\n", "MIS", 0);
        s
    }

    /// A 64-vCPU Xen HVM instance (r4.16xlarge), Linux 5.10: ENA at
    /// 0000:00:03.0 as ens3, vectors on `xen-pirq` with no hwirq domain.
    fn sample_xen_ena_64cpu() -> String {
        let n = 64;
        let mut s = header(n);
        s += &irq_line(
            48,
            &pinned(n, 0, 412),
            "xen-pirq",
            None,
            "ena-mgmnt@pci:0000:00:03.0",
        );
        for q in 0..8u32 {
            let name = format!("ens3-Tx-Rx-{q}");
            s += &irq_line(
                49 + q,
                &pinned(n, q as usize, 3_000_000),
                "xen-pirq",
                None,
                &name,
            );
        }
        s += &arch_line("NMI", &vec![0; n], "Non-maskable interrupts");
        s += &arch_line("LOC", &vec![0; n], "Local timer interrupts");
        s += &format!("{:>PREC$}: {:>10}\n", "ERR", 0);
        s
    }

    /// (irq, role, queue) of every vector the owner claims.
    fn vectors(ints: &Interrupts, owner: &IrqOwner) -> Vec<(u32, VectorRole, Option<u32>)> {
        let mut out = Vec::new();
        for line in &ints.lines {
            let Some(irq) = line.irq else { continue };
            for action in &line.actions {
                if let Some((role, queue)) = classify(action, owner) {
                    out.push((irq, role, queue));
                }
            }
        }
        out
    }

    fn owner<'a>(iface: &'a str, pci: Option<&'a str>, virtio: Option<&'a str>) -> IrqOwner<'a> {
        IrqOwner {
            iface,
            pci_address: pci,
            virtio_device: virtio,
        }
    }

    #[test]
    fn interrupts_firecracker_6_18() {
        let ints = parse(INTERRUPTS_FIRECRACKER_6_18).expect("parse");
        assert_eq!(ints.cpus, vec![0, 1]);
        let numbered = ints.lines.iter().filter(|l| l.irq.is_some()).count();
        assert_eq!((numbered, ints.lines.len()), (19, 35));
        let rx = ints.by_irq(38).expect("IRQ 38");
        assert_eq!(rx.label, "38");
        assert_eq!(rx.per_cpu, vec![0, 2839]);
        assert_eq!(rx.chip.as_deref(), Some("PCI-MSIX-0000:00:03.0"));
        assert_eq!(rx.hwirq.as_deref(), Some("1"));
        assert_eq!(rx.actions, vec!["virtio2-input.0"]);
        let ged = ints.by_irq(24).expect("IRQ 24");
        assert_eq!(ged.chip.as_deref(), Some("IO-APIC"));
        assert_eq!(ged.hwirq.as_deref(), Some("5"));
        assert_eq!(ged.actions, vec!["ACPI:Ged"]);
        let loc = ints.lines.iter().find(|l| l.label == "LOC").expect("LOC");
        assert_eq!((loc.irq, loc.per_cpu.clone()), (None, vec![30994, 33217]));
        assert_eq!(loc.chip, None);
        let err = ints.lines.iter().find(|l| l.label == "ERR").expect("ERR");
        assert_eq!(err.per_cpu, vec![0]);
        assert!(ints.by_irq(27).is_none());

        let eth0 = owner("eth0", Some("0000:00:03.0"), Some("virtio2"));
        assert_eq!(
            vectors(&ints, &eth0),
            vec![
                (37, VectorRole::Other, None),
                (38, VectorRole::Rx, Some(0)),
                (39, VectorRole::Tx, Some(0)),
            ]
        );
    }

    #[test]
    fn interrupts_bnx2_ixgbe_16cpu() {
        let ints = parse(INTERRUPTS_BNX2_IXGBE_16CPU).expect("parse");
        assert_eq!(ints.cpus, (0..16).collect::<Vec<u32>>());
        assert!(ints
            .lines
            .iter()
            .all(|l| l.per_cpu.len() == 16 || l.label == "ERR" || l.label == "MIS"));
        let shared = ints.by_irq(16).expect("IRQ 16");
        assert_eq!(shared.chip.as_deref(), Some("IR-IO-APIC"));
        assert_eq!(shared.actions, vec!["ehci_hcd:usb1", "i801_smbus"]);
        let pme = ints.by_irq(26).expect("IRQ 26");
        assert_eq!(pme.actions, vec!["PCIe PME", "pciehp"]);
        let idle = ints.by_irq(28).expect("IRQ 28");
        assert_eq!(idle.chip.as_deref(), Some("IR-PCI-MSI"));
        assert_eq!(idle.hwirq.as_deref(), Some("65536"));
        assert!(idle.actions.is_empty());
        let txrx3 = ints.by_irq(59).expect("IRQ 59");
        assert_eq!(txrx3.hwirq.as_deref(), Some("2097155"));
        assert_eq!(txrx3.actions, vec!["eth1-TxRx-3"]);
        assert_eq!(txrx3.per_cpu[11], 1_449_086_123);

        let bnx2 = vectors(&ints, &owner("eth0", Some("0000:01:00.0"), None));
        let expected: Vec<_> = (0..8)
            .map(|q| (38 + q, VectorRole::Combined, Some(q)))
            .collect();
        assert_eq!(bnx2, expected);
        let ixgbe = vectors(&ints, &owner("eth1", Some("0000:04:00.0"), None));
        assert_eq!(ixgbe.len(), 9);
        assert_eq!(ixgbe[3], (59, VectorRole::Combined, Some(3)));
        assert_eq!(ixgbe[8], (64, VectorRole::Other, None));
    }

    #[test]
    fn interrupts_mlx5_i40e_128cpu() {
        let ints = parse(&sample_mlx5_i40e_128cpu()).expect("parse");
        assert_eq!(ints.cpus.len(), 128);
        assert_eq!(ints.cpus.last(), Some(&127));
        let async0 = ints.by_irq(100).expect("IRQ 100");
        assert_eq!(async0.chip.as_deref(), Some("IR-PCI-MSIX-0000:af:00.0"));
        assert_eq!(async0.hwirq.as_deref(), Some("0"));
        assert_eq!(async0.actions, vec!["mlx5_async0@pci:0000:af:00.0"]);
        assert_eq!(ints.by_irq(110).expect("IRQ 110").per_cpu[9], 1_000_110);

        let port0 = vectors(&ints, &owner("eth0", Some("0000:af:00.0"), None));
        assert_eq!(port0.len(), 65);
        assert_eq!(port0[0], (100, VectorRole::Other, None));
        assert_eq!(port0[64], (164, VectorRole::Combined, Some(63)));
        let port1 = vectors(&ints, &owner("eth1", Some("0000:af:00.1"), None));
        assert_eq!(port1.len(), 9);
        assert_eq!(port1[1], (166, VectorRole::Combined, Some(0)));
        let i40e = vectors(&ints, &owner("eth2", Some("0000:3b:00.0"), None));
        assert_eq!(i40e.len(), 17);
        assert_eq!(i40e[0].1, VectorRole::Other);
        assert_eq!(i40e[16], (190, VectorRole::Combined, Some(15)));
        let eth3 = vectors(&ints, &owner("eth3", Some("0000:5e:00.0"), None));
        let rx = eth3.iter().filter(|v| v.1 == VectorRole::Rx).count();
        let tx = eth3.iter().filter(|v| v.1 == VectorRole::Tx).count();
        let other = eth3.iter().filter(|v| v.1 == VectorRole::Other).count();
        assert_eq!((rx, tx, other), (4, 4, 1));
        let eth4 = vectors(&ints, &owner("eth4", Some("0000:d8:00.0"), None));
        assert_eq!(eth4.len(), 8);
        assert!(eth4.iter().all(|v| v.1 == VectorRole::Combined));
        let err = ints.lines.iter().find(|l| l.label == "MIS").expect("MIS");
        assert_eq!(err.per_cpu, vec![0]);
    }

    #[test]
    fn interrupts_xen_ena_64cpu() {
        let ints = parse(&sample_xen_ena_64cpu()).expect("parse");
        assert_eq!(ints.cpus.len(), 64);
        let mgmt = ints.by_irq(48).expect("IRQ 48");
        assert_eq!(mgmt.chip.as_deref(), Some("xen-pirq"));
        assert_eq!(mgmt.hwirq, None);
        assert_eq!(mgmt.actions, vec!["ena-mgmnt@pci:0000:00:03.0"]);
        let ena = vectors(&ints, &owner("ens3", Some("0000:00:03.0"), None));
        assert_eq!(ena.len(), 9);
        assert_eq!(ena[0], (48, VectorRole::Other, None));
        assert_eq!(ena[8], (56, VectorRole::Combined, Some(7)));
    }

    #[test]
    fn interrupts_graviton_arm64_4cpu() {
        let ints = parse(INTERRUPTS_GRAVITON_ARM64_4CPU).expect("parse");
        let timer = ints.by_irq(10).expect("IRQ 10");
        assert_eq!(timer.chip.as_deref(), Some("GICv3"));
        assert_eq!(timer.hwirq.as_deref(), Some("27"));
        assert_eq!(timer.actions, vec!["arch_timer"]);
        let q1 = ints.by_irq(17).expect("IRQ 17");
        assert_eq!(q1.chip.as_deref(), Some("ITS-MSI"));
        assert_eq!(q1.actions, vec!["ens5-Tx-Rx-1"]);
        assert_eq!(q1.per_cpu, vec![0, 1_519_871, 0, 0]);
        let ipi0 = ints.lines.iter().find(|l| l.label == "IPI0").expect("IPI0");
        assert_eq!((ipi0.irq, ipi0.per_cpu.len()), (None, 4));
    }

    #[test]
    fn offline_cpu_leaves_a_gap() {
        let ints = parse(INTERRUPTS_CPU1_OFFLINE).expect("parse");
        assert_eq!(ints.cpus, vec![0, 2, 3]);
        assert_eq!(ints.by_irq(38).expect("IRQ 38").per_cpu, vec![0, 2811, 12]);
    }

    #[test]
    fn garbled_file_is_an_error_naming_the_line() {
        let bad_count = "           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 38:          0       2x11 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n";
        let err = parse(bad_count).expect_err("non-numeric count");
        assert!(
            err.0.contains("line 3") && err.0.contains("'2x11'"),
            "{}",
            err.0
        );
        let no_cpus = "   \n  NMI: 0 0\n";
        let err = parse("\n").expect_err("empty");
        assert!(err.0.contains("empty"), "{}", err.0);
        let err = parse(no_cpus).expect_err("no header");
        assert!(err.0.contains("line 2"), "{}", err.0);
        let no_colon = "           CPU0\n garbage here\n";
        let err = parse(no_colon).expect_err("no colon");
        assert!(err.0.contains("line 2"), "{}", err.0);
    }

    #[test]
    fn a_row_cut_short_is_left_out_with_a_warning_naming_it() {
        let short = "           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 38:          0\n 39:          0  PCI-MSI 1-edge x\n 40:          0          5\n";
        let ints = parse(short).expect("the rest is used");
        assert_eq!(ints.lines.len(), 1);
        assert_eq!(ints.lines[0].irq, Some(24));
        assert_eq!(ints.warnings.len(), 3, "{:?}", ints.warnings);
        assert!(
            ints.warnings[0].contains("line 3") && ints.warnings[0].contains("IRQ 38")
                || ints.warnings[0].contains("'38'"),
            "{:?}",
            ints.warnings
        );
        assert!(ints.warnings[1].contains("line 4"), "{:?}", ints.warnings);
        assert!(
            ints.warnings[2].contains("no chip column"),
            "{:?}",
            ints.warnings
        );
    }

    #[test]
    fn reads_the_live_host_in_cpu_online_order() {
        let root = Root::live();
        let ints = read(&root).expect("/proc/interrupts of this machine");
        let online = root
            .read("/sys/devices/system/cpu/online")
            .expect("online CPUs");
        let online = crate::base::cpuset::parse_list(online.trim()).expect("CPU list");
        assert_eq!(ints.cpus, online);
        assert!(ints
            .lines
            .iter()
            .any(|l| l.irq.is_some() && !l.actions.is_empty()));
    }

    #[test]
    fn read_error_names_the_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
        let garbled = "           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 38:          0       2x11 PCI-MSI 1-edge x\n";
        std::fs::write(dir.path().join("proc/interrupts"), garbled).expect("write");
        let root = Root::at(dir.path()).expect("root");
        let msg = read(&root).expect_err("garbled").to_string();
        assert!(
            msg.contains("/proc/interrupts") && msg.contains("line 3"),
            "{msg}"
        );
    }
}
