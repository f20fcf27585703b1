//! The change of a kernel counter between two readings.
//!
//! Some kernel counters are 32 bits wide and wrap: softnet_stat (printed as
//! `%08x`), the per-CPU counts of /proc/interrupts and, on some kernels,
//! /proc/softirqs. A delta across a wrap is computed modulo 2^32, not
//! saturated to 0. A counter that goes backwards for another reason (an
//! interface re-created, a driver reloaded, a 64-bit counter reset) gives a
//! gap, never a negative or a huge rate.

/// How wide a counter is in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// `unsigned int`: wraps at 2^32.
    U32,
    /// `u64`: never wraps in practice; going backwards is a reset.
    U64,
}

/// The increase from `before` to `after`, or `None` for a gap (a reset: the
/// counter went backwards and did not wrap).
///
/// A 32-bit counter that went backwards is taken as one wrap when both
/// readings fit in 32 bits and the wrapped increase is under half the
/// counter's range: no sampled interval sees 2^31 events of one counter,
/// while a reset to a small value from a small value would look like an
/// increase of nearly 2^32.
pub fn delta(before: u64, after: u64, width: Width) -> Option<u64> {
    if after >= before {
        return Some(after - before);
    }
    match width {
        Width::U64 => None,
        Width::U32 => {
            const RANGE: u64 = 1 << 32;
            if before >= RANGE || after >= RANGE {
                return None;
            }
            let wrapped = RANGE - before + after;
            (wrapped < RANGE / 2).then_some(wrapped)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increases_are_differences() {
        assert_eq!(delta(10, 25, Width::U32), Some(15));
        assert_eq!(delta(10, 10, Width::U64), Some(0));
    }

    #[test]
    fn a_32_bit_wrap_is_counted_modulo_2_to_the_32() {
        // 0xfffffff0 -> 0x10: 32 events across the wrap, not 0.
        assert_eq!(delta(0xffff_fff0, 0x10, Width::U32), Some(0x20));
        assert_eq!(delta(u64::from(u32::MAX), 0, Width::U32), Some(1));
    }

    #[test]
    fn going_backwards_otherwise_is_a_gap() {
        // A reset of a 64-bit counter.
        assert_eq!(delta(1_000_000, 5, Width::U64), None);
        // A 32-bit counter that fell from 1000 to 10: a reset, since a wrap
        // would mean nearly 2^32 events in one interval.
        assert_eq!(delta(1000, 10, Width::U32), None);
        // Readings wider than 32 bits cannot be a 32-bit wrap.
        assert_eq!(delta(1 << 33, 5, Width::U32), None);
    }
}
