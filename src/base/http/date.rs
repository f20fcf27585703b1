//! The `Date` header value in IMF-fixdate (RFC 9110 section 5.6.7), e.g.
//! `Sun, 06 Nov 1994 08:49:37 GMT`: always 29 bytes, so a response template
//! can be patched in place when the second changes.

pub const DATE_LEN: usize = 29;

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Format seconds since the Unix epoch (UTC).
pub fn imf_fixdate(unix_secs: u64) -> [u8; DATE_LEN] {
    let days = unix_secs / 86_400;
    let secs_of_day = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = [0u8; DATE_LEN];
    // 1970-01-01 was a Thursday (DAYS[0]).
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    out[3..5].copy_from_slice(b", ");
    two_digits(&mut out[5..7], day);
    out[7] = b' ';
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    out[11] = b' ';
    let y = year % 10_000;
    two_digits(&mut out[12..14], y / 100);
    two_digits(&mut out[14..16], y % 100);
    out[16] = b' ';
    two_digits(&mut out[17..19], secs_of_day / 3600);
    out[19] = b':';
    two_digits(&mut out[20..22], secs_of_day / 60 % 60);
    out[22] = b':';
    two_digits(&mut out[23..25], secs_of_day % 60);
    out[25..].copy_from_slice(b" GMT");
    out
}

fn two_digits(out: &mut [u8], n: u64) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31): Howard
/// Hinnant's `civil_from_days`, for the proleptic Gregorian calendar.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(secs: u64) -> String {
        String::from_utf8(imf_fixdate(secs).to_vec()).expect("ascii")
    }

    #[test]
    fn rfc_9110_example_and_epoch() {
        // RFC 9110's own example.
        assert_eq!(text(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(text(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn leap_days_and_year_ends() {
        assert_eq!(text(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(text(1_709_251_199), "Thu, 29 Feb 2024 23:59:59 GMT");
        assert_eq!(text(1_735_689_599), "Tue, 31 Dec 2024 23:59:59 GMT");
        assert_eq!(text(1_735_689_600), "Wed, 01 Jan 2025 00:00:00 GMT");
    }
}
