//! Go's `time.ParseDuration`, the one parser for every Go duration a user writes: the
//! `crossplane.io/poll-interval` annotation, function `ttl` inputs, Sprig's date functions,
//! provider-nop's condition timings.
//!
//! Written by hand because no crate parses Go's grammar with Go's results: Go accumulates
//! integer nanoseconds (the fraction scaled through a float exactly as below), refuses
//! overflow past `1<<63`, and words its errors in a fixed way users see in conditions.

use std::time::Duration;

/// Why a duration string was refused, worded as Go words it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not Go duration syntax, or out of range.
    #[error("time: invalid duration {}", time_quote(.0))]
    Invalid(String),
    /// A number with no unit after it (`"5"`).
    #[error("time: missing unit in duration {}", time_quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {} in duration {}", time_quote(.unit), time_quote(.input))]
    UnknownUnit {
        /// The unit found.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// A negative duration where only zero or more makes sense (a TTL, an interval).
    #[error("duration {} is negative", time_quote(.0))]
    Negative(String),
}

const NANOS_PER_UNIT: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const LIMIT: u64 = 1 << 63;

/// Parses a Go duration (`1h2m3.5s`, `-90s`, `0`) into signed nanoseconds, exactly as
/// `time.ParseDuration` does.
pub fn parse_nanos(input: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(input.to_string());
    let mut s = input.as_bytes();
    let mut negative = false;
    if let Some((&sign, rest)) = s.split_first()
        && (sign == b'-' || sign == b'+')
    {
        negative = sign == b'-';
        s = rest;
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while let Some(&first) = s.first() {
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let (whole, rest) = leading_int(s).ok_or_else(invalid)?;
        let had_whole = rest.len() != s.len();
        s = rest;
        let (mut fraction, mut scale, mut had_fraction) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix(b".") {
            let (f, sc, rest2) = leading_fraction(rest);
            had_fraction = rest2.len() != rest.len();
            (fraction, scale, s) = (f, sc, rest2);
        }
        if !had_whole && !had_fraction {
            return Err(invalid());
        }
        let unit_len = s.iter().position(|c| *c == b'.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(input.to_string()));
        }
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let Some(per_unit) = NANOS_PER_UNIT.iter().find(|(name, _)| name.as_bytes() == unit).map(|(_, n)| *n) else {
            return Err(DurationError::UnknownUnit { unit: String::from_utf8_lossy(unit).into_owned(), input: input.to_string() });
        };
        if whole > LIMIT / per_unit {
            return Err(invalid());
        }
        let mut value = whole * per_unit;
        if fraction > 0 {
            // Go: v += uint64(float64(f) * (float64(unit) / scale)); the float is below 2^63
            // here, so the conversion truncates as Go's does.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
            let extra = (fraction as f64 * (per_unit as f64 / scale)) as u64;
            value = value.checked_add(extra).ok_or_else(invalid)?;
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // total <= 2^63, so its negation fits in an i64.
        return Ok(0i64.wrapping_sub_unsigned(total));
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// Parses a Go duration that must not be negative (`-0s` is zero, as in Go).
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let nanos = parse_nanos(input)?;
    u64::try_from(nanos).map(Duration::from_nanos).map_err(|_| DurationError::Negative(input.to_string()))
}

/// Go's `leadingInt`: the leading decimal digits, `None` on overflow past `1<<63`.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut x: u64 = 0;
    for c in &s[..digits] {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, &s[digits..]))
}

/// Go's `leadingFraction`: the digits after a `.`, as a number and its scale; digits past
/// what fits are consumed but ignored.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for c in &s[..digits] {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[digits..])
}

/// The `time` package's own quoting (not `strconv.Quote`): `"` and `\` escaped, every byte of
/// a non-ASCII or control character as `\xNN`.
fn time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_what_go_parses() {
        let cases: [(&str, i64); 22] = [
            ("0", 0),
            ("5s", 5_000_000_000),
            ("30s", 30_000_000_000),
            ("1478s", 1_478_000_000_000),
            ("-5s", -5_000_000_000),
            ("+5s", 5_000_000_000),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5_000_000_000),
            ("5.6s", 5_600_000_000),
            ("5.s", 5_000_000_000),
            (".5s", 500_000_000),
            ("1.004s", 1_004_000_000),
            ("1.0040s", 1_004_000_000),
            ("100.00100s", 100_001_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("3h30m", 12_600_000_000_000),
            ("10.5s4m", 250_500_000_000),
            ("-2m3.4s", -123_400_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_nanos(text), Ok(nanos), "{text}");
        }
        assert_eq!(parse_nanos("1h1m1s1ms1us1ns"), Ok(3_661_001_001_001));
        assert_eq!(parse_nanos("39h9m14.425907423s"), Ok(140_954_425_907_423));
        assert_eq!(parse_nanos("52763797000ns"), Ok(52_763_797_000));
        assert_eq!(parse_nanos("0.3333333333333333333h"), Ok(1_200_000_000_000));
        assert_eq!(parse_nanos("9007199254740993ns"), Ok(9_007_199_254_740_993));
        assert_eq!(parse_nanos("9223372036854775807ns"), Ok(i64::MAX));
        assert_eq!(parse_nanos("9223372036854775.807us"), Ok(i64::MAX));
        assert_eq!(parse_nanos("-9223372036854775808ns"), Ok(i64::MIN));
        assert_eq!(parse_nanos("0.100000000000000000000h"), Ok(360_000_000_000));
    }

    #[test]
    fn refuses_what_go_refuses_with_gos_words() {
        let cases = [
            ("", "time: invalid duration \"\""),
            ("3", "time: missing unit in duration \"3\""),
            ("-", "time: invalid duration \"-\""),
            ("s", "time: invalid duration \"s\""),
            (".", "time: invalid duration \".\""),
            ("-.", "time: invalid duration \"-.\""),
            (".s", "time: invalid duration \".s\""),
            ("+.s", "time: invalid duration \"+.s\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            ("\u{0}1s", "time: invalid duration \"\\x001s\""),
            ("1\u{e9}s", "time: unknown unit \"\\xc3\\xa9s\" in duration \"1\\xc3\\xa9s\""),
            ("9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\""),
            ("9223372036854775.808us", "time: invalid duration \"9223372036854775.808us\""),
            ("-9223372036854775809ns", "time: invalid duration \"-9223372036854775809ns\""),
            ("3000000h", "time: invalid duration \"3000000h\""),
            ("soon", "time: invalid duration \"soon\""),
        ];
        for (text, message) in cases {
            assert_eq!(parse_nanos(text).unwrap_err().to_string(), message, "{text:?}");
        }
    }

    #[test]
    fn non_negative_parse_refuses_negatives_only() {
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("-0s"), Ok(Duration::ZERO));
        assert_eq!(parse("-1s").unwrap_err().to_string(), "duration \"-1s\" is negative");
    }

    /// One `[0-9]*(\.[0-9]*)?unit` element of Go's grammar, with its exact value in
    /// nanoseconds when the digits are few enough to compute without rounding.
    fn element() -> impl Strategy<Value = (String, u64)> {
        let units = prop::sample::select(NANOS_PER_UNIT.to_vec());
        (0u64..100_000, prop::option::of(0u32..1000), units).prop_map(|(whole, fraction, (unit, per))| match fraction {
            None => (format!("{whole}{unit}"), whole * per),
            Some(f) => {
                // Three fraction digits: exact in f64 for every unit (per/1000 is whole or
                // per is ns/us, where Go truncates the same way as integer division).
                let extra = (f64::from(f) * (per as f64 / 1000.0)) as u64;
                (format!("{whole}.{f:03}{unit}"), whole * per + extra)
            }
        })
    }

    proptest! {
        #[test]
        fn sums_of_elements_parse_to_their_sum(sign in prop::sample::select(vec!["", "+", "-"]), elements in prop::collection::vec(element(), 1..5)) {
            let text = format!("{sign}{}", elements.iter().map(|(t, _)| t.as_str()).collect::<String>());
            let total: u64 = elements.iter().map(|(_, n)| n).sum();
            let expected = if sign == "-" { -(total as i64) } else { total as i64 };
            prop_assert_eq!(parse_nanos(&text), Ok(expected));
        }

        #[test]
        fn any_string_parses_or_is_refused_without_panicking(text in ".{0,24}") {
            let _ = parse_nanos(&text);
        }

        #[test]
        fn digits_without_a_unit_are_a_missing_unit(n in 1u64..=(1u64 << 63)) {
            let text = n.to_string();
            prop_assert_eq!(parse_nanos(&text), Err(DurationError::MissingUnit(text.clone())));
        }

        #[test]
        fn letters_outside_the_unit_table_are_unknown_units(unit in "[a-gi-lo-rtv-z][a-z]{0,2}") {
            let text = format!("7{unit}");
            prop_assert_eq!(parse_nanos(&text), Err(DurationError::UnknownUnit { unit, input: text.clone() }));
        }
    }
}
