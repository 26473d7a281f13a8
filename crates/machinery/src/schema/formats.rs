//! String and integer `format` checks. Hand-written parsers rather than
//! regexes so that nothing here can fail to compile or panic at run time.
//!
//! Unknown formats are accepted, as kube-apiserver ignores formats it does
//! not know. `int32`/`int64` apply to integers; the rest apply to strings.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Number;

/// Whether string `s` satisfies `format` (unknown formats always pass).
pub(super) fn string_matches(format: &str, s: &str) -> bool {
    match format {
        "date-time" | "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "uri" => is_uri(s),
        _ => true,
    }
}

/// Whether integer-or-number `n` satisfies `format` (only `int32` and `int64` constrain numbers).
pub(super) fn number_matches(format: &str, n: &Number) -> bool {
    let in_range = |lo: f64, hi: f64| {
        if let Some(i) = n.as_i64() {
            return (lo..=hi).contains(&(i as f64));
        }
        if n.as_u64().is_some() {
            // A u64 that is not an i64 is above i64::MAX.
            return false;
        }
        n.as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f >= lo && f <= hi)
    };
    match format {
        "int32" => in_range(i32::MIN as f64, i32::MAX as f64),
        "int64" => {
            n.as_i64().is_some() || in_range(-9.223_372_036_854_775e18, 9.223_372_036_854_775e18)
        }
        _ => true,
    }
}

/// Parses exactly `len` ASCII digits at the start of `s`.
fn digits(s: &str, len: usize) -> Option<u32> {
    let part = s.get(..len)?;
    if part.bytes().all(|b| b.is_ascii_digit()) {
        part.parse().ok()
    } else {
        None
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        _ => 0,
    }
}

/// RFC 3339 `full-date`: `YYYY-MM-DD` with a real calendar day.
fn is_date(s: &str) -> bool {
    s.len() == 10 && date_prefix_ok(s)
}

fn date_prefix_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    if bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    match (
        digits(s, 4),
        s.get(5..).and_then(|r| digits(r, 2)),
        s.get(8..).and_then(|r| digits(r, 2)),
    ) {
        (Some(y), Some(m), Some(d)) => (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m),
        _ => false,
    }
}

/// RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T`/`Z` in either case.
fn is_date_time(s: &str) -> bool {
    if !date_prefix_ok(s) || !matches!(s.as_bytes().get(10), Some(b'T' | b't')) {
        return false;
    }
    let Some(time) = s.get(11..) else {
        return false;
    };
    let b = time.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(sec)) = (
        digits(time, 2),
        time.get(3..).and_then(|r| digits(r, 2)),
        time.get(6..).and_then(|r| digits(r, 2)),
    ) else {
        return false;
    };
    // Second 60 is a leap second, which RFC 3339 allows.
    if h > 23 || m > 59 || sec > 60 {
        return false;
    }
    let mut rest = &time[8..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest.as_bytes().first() {
        Some(b'Z' | b'z') => rest.len() == 1,
        Some(b'+' | b'-') => {
            let off = &rest[1..];
            off.len() == 5
                && off.as_bytes()[2] == b':'
                && digits(off, 2).is_some_and(|oh| oh <= 23)
                && off
                    .get(3..)
                    .and_then(|r| digits(r, 2))
                    .is_some_and(|om| om <= 59)
        }
        _ => false,
    }
}

/// Standard base64 with padding (`\r`/`\n` ignored, as Go's decoder does).
fn is_base64(s: &str) -> bool {
    let clean: Vec<u8> = s.bytes().filter(|b| *b != b'\r' && *b != b'\n').collect();
    if !clean.len().is_multiple_of(4) {
        return false;
    }
    let pad = clean.iter().rev().take_while(|b| **b == b'=').count();
    if pad > 2 {
        return false;
    }
    let body = &clean[..clean.len() - pad];
    body.iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// A UUID as 8-4-4-4-12 hex digits; the hyphens may be omitted (as go-openapi allows).
fn is_uuid(s: &str) -> bool {
    let hex_run =
        |part: &str, n: usize| part.len() == n && part.bytes().all(|b| b.is_ascii_hexdigit());
    if s.len() == 32 {
        return hex_run(s, 32);
    }
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && hex_run(parts[0], 8)
        && hex_run(parts[1], 4)
        && hex_run(parts[2], 4)
        && hex_run(parts[3], 4)
        && hex_run(parts[4], 12)
}

/// RFC 1123 hostname: dot-separated labels of 1–63 letters, digits or inner hyphens; at most 253 characters.
fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A plain `local@domain` address: dot-atom local part, hostname domain.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    const SPECIALS: &[u8] = b"!#$%&'*+/=?^_`{|}~-";
    !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || SPECIALS.contains(&b))
        && is_hostname(domain)
}

/// `address/prefix` with an IPv4 or IPv6 address and an in-range decimal prefix.
fn is_cidr(s: &str) -> bool {
    let Some((addr, prefix)) = s.split_once('/') else {
        return false;
    };
    if prefix.is_empty()
        || prefix.len() > 3
        || !prefix.bytes().all(|b| b.is_ascii_digit())
        || (prefix.len() > 1 && prefix.starts_with('0'))
    {
        return false;
    }
    let Ok(bits) = prefix.parse::<u8>() else {
        return false;
    };
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// An absolute URI: RFC 3986 scheme, `:`, then no whitespace or control characters.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.chars().any(|c| c.is_whitespace() || c.is_control())
}
