//! Rates and durations as people type them: `10gbit`, `2.5G`, `800mbit/s`,
//! `100ms`, `0.2s`, `250us`. Rates are bits per second (decimal units, as
//! `tc` and link speeds use them).

/// Parse a rate into bits per second.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let (number, unit) = split_number(&lower);
    let unit = unit.trim().trim_end_matches("/s").trim_end_matches("ps");
    let scale: f64 = match unit {
        "" | "bit" | "b" => 1.0,
        "k" | "kbit" | "kb" => 1e3,
        "m" | "mbit" | "mb" => 1e6,
        "g" | "gbit" | "gb" => 1e9,
        "t" | "tbit" | "tb" => 1e12,
        _ => {
            return Err(format!(
                "'{trimmed}' is not a rate; write bits per second like 10gbit, 2.5G or 800mbit"
            ))
        }
    };
    // "GB/s" and "MBps" mean bytes to most people: refuse rather than guess.
    if trimmed.contains('B') {
        return Err(format!(
            "'{trimmed}' looks like bytes per second; write bits per second like 10gbit or 800mbit"
        ));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{trimmed}' is not a rate; write e.g. 10gbit"))?;
    let bits = value * scale;
    if !(1.0..1e15).contains(&bits) {
        return Err(format!(
            "rate '{trimmed}' is out of range (1 bit/s to 1000 Tbit/s)"
        ));
    }
    Ok(bits.round() as u64)
}

/// Parse a duration into microseconds.
pub fn parse_duration_us(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let (number, unit) = split_number(&lower);
    let scale: f64 = match unit.trim() {
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" | "sec" => 1e6,
        "" => {
            return Err(format!(
                "'{trimmed}' has no unit; write a time like 100ms, 0.2s or 250us"
            ))
        }
        _ => {
            return Err(format!(
                "'{trimmed}' is not a time; write e.g. 100ms, 0.2s or 250us"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{trimmed}' is not a time; write e.g. 100ms"))?;
    let us = value * scale;
    if !(1.0..=3_600e6).contains(&us) {
        return Err(format!("time '{trimmed}' is out of range (1us to 1h)"));
    }
    Ok(us.round() as u64)
}

fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text.split_at(end)
}

/// A rate the way `tc` prints it: the largest unit that keeps it whole
/// (`8gbit`, `2500mbit`, `1500kbit`, `999bit`).
pub fn format_rate(bits: u64) -> String {
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

/// A byte count for people: `64 MB` (binary units, as buffer sizes are).
pub fn format_bytes(bytes: u64) -> String {
    const GB: u64 = 1 << 30;
    const MB: u64 = 1 << 20;
    const KB: u64 = 1 << 10;
    if bytes >= GB {
        let gb = bytes as f64 / GB as f64;
        if bytes % GB == 0 {
            format!("{gb} GB")
        } else {
            format!("{gb:.1} GB")
        }
    } else if bytes >= MB && bytes % MB == 0 {
        format!("{} MB", bytes / MB)
    } else if bytes >= MB {
        format!("{:.1} MB", bytes as f64 / MB as f64)
    } else if bytes >= KB && bytes % KB == 0 {
        format!("{} KB", bytes / KB)
    } else {
        format!("{bytes} B")
    }
}

/// A duration for people: `100ms`, `250us`, `1.5s`.
pub fn format_duration_us(us: u64) -> String {
    if us >= 1_000_000 && us % 1_000 == 0 {
        format!("{}s", us as f64 / 1e6)
    } else if us >= 1_000 && us % 1_000 == 0 {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_the_forms_people_type() {
        assert_eq!(parse_rate("10gbit"), Ok(10_000_000_000));
        assert_eq!(parse_rate("10G"), Ok(10_000_000_000));
        assert_eq!(parse_rate("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate("800mbit/s"), Ok(800_000_000));
        assert_eq!(parse_rate("1gbps"), Ok(1_000_000_000));
        assert_eq!(parse_rate("100m"), Ok(100_000_000));
        assert_eq!(parse_rate("5000"), Ok(5000));
        for bad in ["fast", "10GB/s", "10 parsecs", "", "-1g", "0"] {
            let err = parse_rate(bad).expect_err(bad);
            assert!(err.contains(&format!("'{}'", bad.trim())), "{err}");
        }
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration_us("100ms"), Ok(100_000));
        assert_eq!(parse_duration_us("0.2s"), Ok(200_000));
        assert_eq!(parse_duration_us("250us"), Ok(250));
        assert!(parse_duration_us("100").is_err());
        assert!(parse_duration_us("soon").is_err());
        assert!(parse_duration_us("2h").is_err());
    }

    #[test]
    fn rates_print_like_tc() {
        assert_eq!(format_rate(8_000_000_000), "8gbit");
        assert_eq!(format_rate(2_500_000_000), "2500mbit");
        assert_eq!(format_rate(999), "999bit");
        for bits in [8_000_000_000u64, 2_500_000_000, 123_456, 7] {
            assert_eq!(parse_rate(&format_rate(bits)), Ok(bits));
        }
        assert_eq!(format_bytes(64 << 20), "64 MB");
        assert_eq!(format_bytes(6_250_000), "6.0 MB");
        assert_eq!(format_bytes(2_147_483_647), "2.0 GB");
        assert_eq!(format_bytes(1 << 30), "1 GB");
        assert_eq!(format_duration_us(100_000), "100ms");
    }
}
