//! Numbers as the panes print them: short enough for a cell.

/// `-` for a value that could not be computed (a gap), else a short
/// number: `0`, `0.4`, `912`, `5.0k`, `59.9k`, `6.4M`, `1.2G`.
pub fn short(value: Option<f64>) -> String {
    let Some(v) = value else {
        return "-".to_string();
    };
    if !v.is_finite() || v < 0.0 {
        return "-".to_string();
    }
    let (scaled, unit) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if unit.is_empty() {
        if v > 0.0 && v < 10.0 && v.fract() != 0.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.0}")
        }
    } else if scaled >= 100.0 {
        format!("{scaled:.0}{unit}")
    } else {
        format!("{scaled:.1}{unit}")
    }
}

/// A percentage with no decimals, or `-`.
pub fn pct(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"))
}

/// `text` cut or padded to exactly `width` characters.
pub fn fit(text: &str, width: usize) -> String {
    let mut out: String = text.chars().take(width).collect();
    let len = out.chars().count();
    out.extend(std::iter::repeat_n(' ', width - len));
    out
}

/// `text` right-aligned in `width` characters (cut to `width` when
/// longer).
pub fn right(text: &str, width: usize) -> String {
    let len = text.chars().count();
    if len >= width {
        text.chars().take(width).collect()
    } else {
        format!("{}{text}", " ".repeat(width - len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers() {
        assert_eq!(short(None), "-");
        assert_eq!(short(Some(0.0)), "0");
        assert_eq!(short(Some(0.44)), "0.4");
        assert_eq!(short(Some(912.3)), "912");
        assert_eq!(short(Some(4998.4)), "4998");
        assert_eq!(short(Some(59_982.0)), "60.0k");
        assert_eq!(short(Some(789_763.0)), "790k");
        assert_eq!(short(Some(6_400_000.0)), "6.4M");
        assert_eq!(short(Some(5.12e9)), "5.1G");
        assert_eq!(short(Some(-1.0)), "-");
        assert_eq!(short(Some(f64::NAN)), "-");
    }

    #[test]
    fn fit_and_right() {
        assert_eq!(fit("eth0", 6), "eth0  ");
        assert_eq!(fit("enp129s0f1", 6), "enp129");
        assert_eq!(right("5.0k", 6), "  5.0k");
        assert_eq!(right("123456", 3), "123");
    }
}
