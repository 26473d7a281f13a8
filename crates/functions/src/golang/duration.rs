//! Go's `time.ParseDuration`, for the `ttl` fields of function inputs (`1m`, `1m30s`,
//! `1.5h`, `300ms`). Negative durations parse in Go but mean nothing for a TTL, so they are
//! refused here.

use std::time::Duration;

/// Why a duration string was refused (messages as Go's `time: invalid duration "x"`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not Go duration syntax.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit found.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// A negative duration.
    #[error("duration {0:?} is negative")]
    Negative(String),
}

/// Parses a Go duration such as `1h2m3.5s`.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(input.to_string());
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total_nanos: f64 = 0.0;
    while !s.is_empty() {
        let number_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let number = &s[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        s = &s[number_len..];
        let unit_len = s.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(s.len());
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let nanos_per_unit: f64 = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(DurationError::Invalid(input.to_string())),
            other => {
                return Err(DurationError::UnknownUnit { unit: other.to_string(), input: input.to_string() });
            }
        };
        total_nanos += value * nanos_per_unit;
    }
    if negative && total_nanos > 0.0 {
        return Err(DurationError::Negative(input.to_string()));
    }
    if total_nanos > u64::MAX as f64 {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("1m0s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("1h2m3s").unwrap(), Duration::from_secs(3723));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(parse("2us").unwrap(), Duration::from_micros(2));
        assert_eq!(parse("2µs").unwrap(), Duration::from_micros(2));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(parse("+5s").unwrap(), Duration::from_secs(5));
    }

    #[test]
    fn refuses_what_go_refuses_and_negatives() {
        assert_eq!(parse("").unwrap_err().to_string(), "time: invalid duration \"\"");
        assert_eq!(parse("5").unwrap_err().to_string(), "time: invalid duration \"5\"");
        assert_eq!(parse("1x").unwrap_err().to_string(), "time: unknown unit \"x\" in duration \"1x\"");
        assert!(parse("s").is_err());
        assert!(parse("1..5s").is_err());
        assert!(matches!(parse("-1s"), Err(DurationError::Negative(_))));
    }
}
