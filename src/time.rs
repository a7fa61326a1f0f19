//! RFC 3339 UTC timestamps (`started_at`) and human uptimes, without a date crate.
//!
//! Days from the civil date use Howard Hinnant's `days_from_civil` algorithm; only UTC (`Z`) is
//! written, and reading accepts `Z` or a numeric offset and optional fractional seconds, so a
//! record from another runtime still shows an uptime.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z");
    }
    // Digit by digit: every task's status carries one, and `format!` cost a thirtieth of a
    // `SendMessage`. Every field is below 10,000 and at least 0 here.
    let mut text = String::with_capacity(20);
    for (value, width, then) in [
        (y, 1000, '-'),
        (m, 10, '-'),
        (d, 10, 'T'),
        (hh, 10, ':'),
        (mm, 10, ':'),
        (ss, 10, 'Z'),
    ] {
        let mut unit = width;
        while unit > 0 {
            text.push(char::from(b'0' + (value / unit % 10) as u8));
            unit /= 10;
        }
        text.push(then);
    }
    text
}

/// Seconds since the epoch of an RFC 3339 timestamp, or `None` if it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let ob = rest.as_bytes();
            if ob.len() != 6 || !matches!(ob[0], b'+' | b'-') || ob[3] != b':' {
                return None;
            }
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            let sign = if ob[0] == b'-' { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset)
}

/// `secs` as a short uptime: `45s`, `12m`, `3h05m`, `2d04h`.
pub fn format_uptime(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// How long ago, `secs` seconds, said as docker says it in `ps -a`: `3 seconds ago`, `about a
/// minute ago`, `12 minutes ago`, `about an hour ago`, `5 hours ago`, `2 days ago`.
pub fn format_ago(secs: i64) -> String {
    let plural = |n: i64, unit: &str| format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" });
    match secs.max(0) {
        0 => "less than a second ago".to_string(),
        s @ 1..60 => plural(s, "second"),
        60..120 => "about a minute ago".to_string(),
        s @ 120..3600 => plural(s / 60, "minute"),
        3600..7200 => "about an hour ago".to_string(),
        s @ 7200..172_800 => plural(s / 3600, "hour"),
        s => plural(s / 86_400, "day"),
    }
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ago_is_said_as_docker_says_it() {
        let said: Vec<String> = [0, 1, 59, 60, 130, 3600, 7200, 90_000, 172_800]
            .map(format_ago)
            .into();
        assert_eq!(
            said,
            [
                "less than a second ago",
                "1 second ago",
                "59 seconds ago",
                "about a minute ago",
                "2 minutes ago",
                "about an hour ago",
                "2 hours ago",
                "25 hours ago",
                "2 days ago"
            ]
        );
    }

    /// Known instants: the epoch, a leap day, the 2038 boundary, end of a century leap year.
    const VECTORS: &[(i64, &str)] = &[
        (0, "1970-01-01T00:00:00Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (1_709_210_096, "2024-02-29T12:34:56Z"),
        (2_147_483_647, "2038-01-19T03:14:07Z"),
        (978_307_199, "2000-12-31T23:59:59Z"),
        (-1, "1969-12-31T23:59:59Z"),
    ];

    #[test]
    fn formatting_and_parsing_agree_with_known_instants() {
        for &(secs, text) in VECTORS {
            assert_eq!(format_rfc3339(secs), text);
            assert_eq!(parse_rfc3339(text), Some(secs), "{text}");
        }
        assert_eq!(format_rfc3339(253_402_300_800), "10000-01-01T00:00:00Z");
    }

    #[test]
    fn fractions_and_offsets_are_read() {
        assert_eq!(
            parse_rfc3339("2024-02-29T12:34:56.789Z"),
            Some(1_709_210_096)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T14:34:56+02:00"),
            Some(1_709_210_096)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T11:34:56-01:00"),
            Some(1_709_210_096)
        );
    }

    #[test]
    fn malformed_timestamps_are_none() {
        for bad in [
            "",
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T24:00:00Z",
            "2024-02-29T12:34:56",
            "2024-02-29T12:34:56.Z",
            "2024-02-29T12:34:56+0200",
            "+024-02-29T12:34:56Z",
            "2024-02-29T12:34:5xZ",
            "2024-02-29T12:34:56Z ",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn uptimes_are_short() {
        assert_eq!(format_uptime(-5), "0s");
        assert_eq!(format_uptime(59), "59s");
        assert_eq!(format_uptime(61), "1m");
        assert_eq!(format_uptime(3600 + 5 * 60), "1h05m");
        assert_eq!(format_uptime(2 * 86_400 + 4 * 3600), "2d04h");
    }
}
