//! Units people type on the command line and units nettune prints.
//!
//! Rates follow tc(8): `bit`, `kbit`, `mbit`, `gbit`, `tbit` are bits per
//! second in powers of 1000, `kibit` .. `tibit` in powers of 1024, and the
//! `bps` forms (`bps`, `kbps`, `mbps`, `gbps`, `tbps`, `kibps` .. `tibps`)
//! are BYTES per second, as in tc: `1gbps` = 8 Gbit/s. A bare SI prefix
//! (`2.5G`, `100M`, `10k`) is bits per second, as iperf3 reads `-b 2.5G` and
//! as link speeds are named (2.5G Ethernet). Units are case-insensitive. A
//! bare number (`10`) is refused: 10 bits/s is never meant, and whether
//! 10 Gbit/s or 10 MB/s was is a guess.
//!
//! Byte sizes (`--rcvbuf`) are a plain number of bytes or carry a binary
//! suffix, as kernel buffer sizes are chosen: `4M`/`4MiB` = 4194304.
//!
//! Times accept `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`
//! (also `µs`) and `ns`. A bare number is refused (tc reads it as
//! microseconds, most people as milliseconds).

use std::time::Duration;

use anyhow::bail;

const RATE_EXAMPLE: &str = "e.g. '10gbit', '100mbit' or '2.5G' \
     (units: bit kbit mbit gbit tbit, or k M G T alone; kbps mbps gbps are bytes/s as in tc)";
const TIME_EXAMPLE: &str = "e.g. '50ms', '100us' or '0.2s'";
const DURATION_EXAMPLE: &str = "give seconds (10, 1.5) or 500ms, 5s, 1m, 2h";

/// Parse a rate such as `10gbit` into bits per second.
pub fn parse_rate(text: &str) -> anyhow::Result<u64> {
    let (number, unit) = split_number(text, "rate", RATE_EXAMPLE)?;
    let unit = unit.to_ascii_lowercase();
    let (scale, bytes) = match unit.strip_suffix("bit") {
        Some(prefix) => (prefix_scale(prefix), false),
        None => match unit.strip_suffix("bps") {
            Some(prefix) => (prefix_scale(prefix), true),
            // `2.5G`: bits per second, as iperf3 reads it.
            None if !unit.is_empty() => (prefix_scale(&unit), false),
            None => (None, false),
        },
    };
    let Some(scale) = scale else {
        if unit.is_empty() {
            bail!(
                "rate '{}' has no unit: say bits or bytes per second, {RATE_EXAMPLE}",
                text.trim()
            );
        }
        bail!(
            "rate '{}' has an unknown unit '{unit}': {RATE_EXAMPLE}",
            text.trim()
        );
    };
    let bits = number * scale * if bytes { 8.0 } else { 1.0 };
    if bits < 1.0 {
        bail!("rate '{}' is zero: {RATE_EXAMPLE}", text.trim());
    }
    if bits >= u64::MAX as f64 {
        bail!("rate '{}' is too large: {RATE_EXAMPLE}", text.trim());
    }
    Ok(bits.round() as u64)
}

/// [`parse_rate`], then bounded: the error names the value and the range
/// (`--bandwidth '1bit' is below 1 Mbit/s: give 1mbit to 10tbit`).
pub fn parse_rate_within(text: &str, lo: u64, hi: u64) -> anyhow::Result<u64> {
    let bits = parse_rate(text)?;
    if !(lo..=hi).contains(&bits) {
        bail!(
            "'{}' ({}) is out of range: give {} to {}",
            text.trim(),
            format_rate(bits),
            format_tc_rate(lo),
            format_tc_rate(hi)
        );
    }
    Ok(bits)
}

/// [`parse_time`], then bounded: the error names the value and the range.
pub fn parse_time_within(text: &str, lo: Duration, hi: Duration) -> anyhow::Result<Duration> {
    let time = parse_time(text)?;
    if time < lo || time > hi {
        bail!(
            "'{}' is out of range: give {} to {}",
            text.trim(),
            format_time(lo.as_secs_f64()),
            format_time(hi.as_secs_f64())
        );
    }
    Ok(time)
}

/// A size in bytes: a whole number, or one with a binary suffix (`k`,
/// `M`, `G`, also `KiB`, `MiB`, `GiB`, `KB`, `MB`, `GB`: all powers of 1024,
/// as kernel buffer sizes are chosen), from `lo` to `hi`.
pub fn parse_bytes_within(text: &str, lo: u64, hi: u64) -> anyhow::Result<u64> {
    let example = format!("give bytes from {lo} to {hi}, e.g. 4194304 or 4M");
    let (number, unit) = split_number(text, "size", &example)?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => bail!(
            "size '{}' has an unknown unit '{other}': {example}",
            text.trim()
        ),
    };
    let bytes = number * scale as f64;
    if bytes.fract() != 0.0 {
        bail!(
            "size '{}' is not a whole number of bytes: {example}",
            text.trim()
        );
    }
    if bytes < lo as f64 || bytes > hi as f64 {
        bail!("size '{}' is out of range: {example}", text.trim());
    }
    Ok(bytes as u64)
}

/// A whole number from `lo` to `hi` (a rate in packets or requests per
/// second, a count): the error names the value and the range.
pub fn parse_count_within(text: &str, lo: u64, hi: u64) -> anyhow::Result<u64> {
    let trimmed = text.trim();
    match trimmed.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        Ok(_) => bail!("'{trimmed}' is out of range: give {lo} to {hi}"),
        Err(_) => bail!("'{trimmed}' is not a whole number: give {lo} to {hi}"),
    }
}

/// How a duration without a unit is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bare {
    /// Seconds, as wrk and iperf3 read `-d 10` / `-t 10`.
    Seconds,
    /// Refused: a path's round-trip time without a unit is a guess (tc
    /// reads it as microseconds, most people as milliseconds).
    Refused,
}

/// The longest duration anything takes: a year.
const MAX_DURATION_SECS: f64 = 86_400.0 * 365.0;

/// The one duration parser: a non-negative decimal number and a unit
/// (`ns`, `us`/`usec`/`µs`, `ms`/`msec`, `s`/`sec`, `m`/`min`, `h`), or a
/// bare number when `bare` allows it. Zero only when `zero_ok`.
fn duration(text: &str, bare: Bare, zero_ok: bool, example: &str) -> anyhow::Result<Duration> {
    let (number, unit) = split_number(text, "duration", example)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "h" | "hour" | "hours" => 3600.0,
        "m" | "min" | "mins" => 60.0,
        "s" | "sec" | "secs" => 1.0,
        "ms" | "msec" | "msecs" => 1e-3,
        "us" | "usec" | "usecs" | "µs" => 1e-6,
        "ns" | "nsec" | "nsecs" => 1e-9,
        "" if bare == Bare::Seconds => 1.0,
        "" => bail!("time '{}' has no unit: {example}", text.trim()),
        other => bail!(
            "duration '{}' has an unknown unit '{other}': {example}",
            text.trim()
        ),
    };
    let secs = number * scale;
    if secs <= 0.0 && !(zero_ok && secs == 0.0) {
        bail!("duration '{}' is zero: {example}", text.trim());
    }
    if secs > MAX_DURATION_SECS {
        bail!(
            "duration '{}' is longer than a year: {example}",
            text.trim()
        );
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| anyhow::anyhow!("duration '{}' is out of range: {example}", text.trim()))
}

/// Parse a time that must carry its unit, such as `50ms` (a path's
/// round-trip time).
pub fn parse_time(text: &str) -> anyhow::Result<Duration> {
    duration(text, Bare::Refused, false, TIME_EXAMPLE)
}

/// Parse how long something runs, the way wrk and iperf3 take it: seconds
/// as a plain number (fractions allowed) or with a unit, `500ms`, `5s`,
/// `1m`, `2h`. Zero is refused. For clap's `value_parser`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    duration(text, Bare::Seconds, false, DURATION_EXAMPLE).map_err(|e| format!("{e:#}"))
}

/// [`parse_duration`], with zero allowed (a warm-up of `0`: none).
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    duration(text, Bare::Seconds, true, DURATION_EXAMPLE).map_err(|e| format!("{e:#}"))
}

/// Split `2.5gbit` into (2.5, "gbit"): a non-negative decimal number and the
/// rest, with optional space between.
fn split_number<'a>(text: &'a str, what: &str, example: &str) -> anyhow::Result<(f64, &'a str)> {
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        bail!("{what} '{trimmed}' is negative: {example}");
    }
    let end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(end);
    let number: f64 = digits
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| anyhow::anyhow!("'{trimmed}' is not a {what}: {example}"))?;
    let unit = unit.trim_start();
    if unit.contains(char::is_whitespace) {
        bail!("'{trimmed}' is not a {what}: {example}");
    }
    Ok((number, unit))
}

fn prefix_scale(prefix: &str) -> Option<f64> {
    Some(match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

/// `10 Gbit/s`, `2.5 Gbit/s`, `100 Mbit/s`: bits per second in 1000s.
pub fn format_rate(bits_per_sec: u64) -> String {
    let units = [
        (1e12, "Tbit/s"),
        (1e9, "Gbit/s"),
        (1e6, "Mbit/s"),
        (1e3, "kbit/s"),
    ];
    let value = bits_per_sec as f64;
    for (scale, name) in units {
        if value >= scale {
            return format!("{} {name}", trim_decimal(value / scale));
        }
    }
    format!("{bits_per_sec} bit/s")
}

/// A rate the way `tc` writes it, exact and without spaces: the largest
/// unit that keeps it whole (`8gbit`, `2500mbit`, `999bit`). This is the
/// text plan writes into a qdisc change, so it must parse back exactly.
pub fn format_tc_rate(bits: u64) -> String {
    for (scale, unit) in [
        (1_000_000_000_000, "tbit"),
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ] {
        if bits >= scale && bits % scale == 0 {
            return format!("{}{unit}", bits / scale);
        }
    }
    format!("{bits}bit")
}

/// `64 MiB`, `6.2 MiB`, `208 KiB`, `512 B`: bytes in powers of 1024, as
/// kernel buffer sizes are usually chosen.
pub fn format_bytes(bytes: u64) -> String {
    let units = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (scale, name) in units {
        if bytes >= scale {
            return format!("{} {name}", trim_decimal(bytes as f64 / scale as f64));
        }
    }
    format!("{bytes} B")
}

/// `50 ms`, `100 us`, `1.5 s`.
pub fn format_time(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{} s", trim_decimal(secs))
    } else if secs >= 1e-3 {
        format!("{} ms", trim_decimal(secs * 1e3))
    } else {
        format!("{} us", trim_decimal(secs * 1e6))
    }
}

/// One decimal at most, none when it is zero: `62.5`, `64`.
fn trim_decimal(value: f64) -> String {
    let text = format!("{value:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

/// `1,234,567`: counters are easier to read with separators.
pub fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_tc_units() {
        assert_eq!(parse_rate("10gbit").expect("rate"), 10_000_000_000);
        assert_eq!(parse_rate("100mbit").expect("rate"), 100_000_000);
        assert_eq!(parse_rate("2.5Gbit").expect("rate"), 2_500_000_000);
        assert_eq!(parse_rate("1kibit").expect("rate"), 1024);
        assert_eq!(parse_rate("40 gbit").expect("rate"), 40_000_000_000);
        // tc: the bps forms are bytes per second.
        assert_eq!(parse_rate("1gbps").expect("rate"), 8_000_000_000);
        assert_eq!(parse_rate("125MBps").expect("rate"), 1_000_000_000);
    }

    #[test]
    fn bad_rates_show_an_example() {
        for bad in [
            "10 gigs",
            "-5gbit",
            "10",
            "fast",
            "0gbit",
            "gbit",
            "1.2.3gbit",
            "2.5X",
        ] {
            let err = parse_rate(bad).expect_err(bad).to_string();
            assert!(err.contains("10gbit"), "{bad}: {err}");
            assert!(err.contains(&format!("'{bad}'")), "{bad}: {err}");
        }
        let err = parse_rate("25").expect_err("a bare number").to_string();
        assert!(err.contains("no unit"), "{err}");
    }

    #[test]
    fn a_bare_prefix_is_bits_per_second_as_help_and_iperf3_write_it() {
        assert_eq!(parse_rate("2.5G").expect("rate"), 2_500_000_000);
        assert_eq!(parse_rate("2.5g").expect("rate"), 2_500_000_000);
        assert_eq!(parse_rate("100M").expect("rate"), 100_000_000);
        assert_eq!(parse_rate("10k").expect("rate"), 10_000);
        assert_eq!(parse_rate("1T").expect("rate"), 1_000_000_000_000);
    }

    #[test]
    fn absurd_values_are_refused_with_the_range() {
        let err = parse_rate_within("1bit", 1_000_000, 10_000_000_000_000)
            .expect_err("1 bit/s")
            .to_string();
        assert!(
            err.contains("'1bit'") && err.contains("1mbit to 10tbit"),
            "{err}"
        );
        assert!(parse_rate_within("2.5G", 1_000_000, 10_000_000_000_000).is_ok());
        let err = parse_time_within(
            "1000000s",
            Duration::from_micros(1),
            Duration::from_secs(10),
        )
        .expect_err("11 days")
        .to_string();
        assert!(err.contains("1 us to 10 s"), "{err}");
        assert_eq!(parse_bytes_within("4M", 1, 1 << 31).expect("4M"), 4 << 20);
        assert_eq!(
            parse_bytes_within("212992", 1, 1 << 31).expect("n"),
            212_992
        );
        for bad in ["2.5bit", "1.5", "0", "3G", "-1", "x"] {
            let err = parse_bytes_within(bad, 1, i32::MAX as u64)
                .expect_err(bad)
                .to_string();
            assert!(err.contains("2147483647"), "{bad}: {err}");
        }
        for bad in ["0", "1e30", "4294967295000", "abc"] {
            let err = parse_count_within(bad, 1, 1_000_000_000)
                .expect_err(bad)
                .to_string();
            assert!(err.contains("1 to 1000000000"), "{bad}: {err}");
        }
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("50ms").expect("t"), Duration::from_millis(50));
        assert_eq!(parse_time("100us").expect("t"), Duration::from_micros(100));
        assert_eq!(parse_time("0.2s").expect("t"), Duration::from_millis(200));
        assert_eq!(
            parse_time("250 usec").expect("t"),
            Duration::from_micros(250)
        );
    }

    #[test]
    fn bad_times_show_an_example() {
        for bad in ["-5ms", "50", "5 minutes", "ms", "0ms", "1e400s", "400d"] {
            let err = parse_time(bad).expect_err(bad).to_string();
            assert!(err.contains("50ms"), "{bad}: {err}");
        }
        assert!(parse_time("-5ms")
            .expect_err("negative")
            .to_string()
            .contains("negative"));
    }

    #[test]
    fn durations_take_bare_seconds_and_wrk_units() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        for bad in ["0", "-1", "ten", "inf", "5x", "s", "2y", "9999h"] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains(&format!("'{bad}'")), "{bad}: {err}");
        }
        assert!(parse_duration_or_zero("-1").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_rate(10_000_000_000), "10 Gbit/s");
        assert_eq!(format_rate(2_500_000_000), "2.5 Gbit/s");
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(212_992), "208 KiB");
        assert_eq!(format_bytes(6_291_456), "6 MiB");
        assert_eq!(format_bytes(100), "100 B");
        assert_eq!(format_time(0.05), "50 ms");
        assert_eq!(format_time(0.0001), "100 us");
        assert_eq!(format_count(1_234_567), "1,234,567");
        assert_eq!(format_count(12), "12");
    }
}
