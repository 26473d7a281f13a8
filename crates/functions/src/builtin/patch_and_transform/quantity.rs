//! Kubernetes quantities (`500m`, `1.5Gi`, `2e3`) as float64, for `convert` transforms with
//! `format: quantity`.
//!
//! Follows apimachinery's `ParseQuantity` grammar and `AsApproximateFloat64`: the value is
//! held as an integer and a power of ten (binary suffixes multiplied in), amounts finer than
//! a nano are rounded up to one, and the float is that integer times Go's `math.Pow10`, so
//! `0.3` yields `0.30000000000000004` exactly as in Crossplane.

/// Why a quantity could not be parsed (apimachinery's messages).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not a quantity.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format,
    /// The suffix is not one Kubernetes knows.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// The quantity's value, as `AsApproximateFloat64` gives it.
pub fn parse_quantity_f64(s: &str) -> Result<f64, QuantityError> {
    let parts = split(s)?;
    let (binary_exp, decimal_exp) = suffix_exponents(parts.suffix).ok_or(QuantityError::Suffix)?;
    let digits = format!("{}{}", parts.num, parts.denom);
    // The value is digits × 10^(decimal_exp - len(denom)) × 2^binary_exp.
    let mut scale = decimal_exp - parts.denom.len() as i64;
    let Ok(mut unscaled) = digits.parse::<i128>() else {
        // Too many digits for exact arithmetic: fall back to the float parser.
        let f: f64 = format!("{digits}e{scale}").parse().map_err(|_| QuantityError::Format)?;
        let f = f * 2f64.powi(binary_exp as i32);
        return Ok(if parts.positive { f } else { -f });
    };
    if binary_exp > 0 {
        // A shift that would push bits out saturates; the cap below applies anyway.
        let shift = binary_exp as u32;
        unscaled = if unscaled.leading_zeros() > shift + 1 { unscaled << shift } else { i128::MAX };
    }
    // Amounts finer than a nano are rounded up to the next nano.
    if scale < -9 && unscaled != 0 {
        let drop = (-9 - scale) as u32;
        let divisor = 10i128.checked_pow(drop);
        unscaled = match divisor {
            Some(d) => unscaled / d + i128::from(unscaled % d != 0),
            None => 1,
        };
        scale = -9;
    }
    // Quantities are capped at the largest int64.
    let max = i128::from(i64::MAX);
    if scale >= 0 {
        let factor = 10i128.checked_pow(scale as u32);
        if factor.and_then(|f| unscaled.checked_mul(f)).is_none_or(|v| v > max) {
            unscaled = max;
            scale = 0;
        }
    }
    let base = unscaled as f64;
    let value = if scale == 0 { base } else { base * go_pow10(scale) };
    Ok(if parts.positive { value } else { -value })
}

struct Parts<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Splits sign, integer digits (leading zeros dropped), fraction digits and suffix, as
/// apimachinery's `parseQuantityString` does.
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    let b = s.as_bytes();
    let mut pos = 0;
    let mut positive = true;
    match b[0] {
        b'-' => {
            positive = false;
            pos += 1;
        }
        b'+' => pos += 1,
        _ => {}
    }
    while pos < b.len() && b[pos] == b'0' {
        pos += 1;
    }
    let num_start = pos;
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start { "0" } else { &s[num_start..pos] };
    let mut denom = "";
    if pos < b.len() && b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[start..pos];
    }
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < b.len() {
        return Err(QuantityError::Format);
    }
    Ok(Parts { positive, num, denom, suffix: &s[suffix_start..] })
}

/// The (power of two, power of ten) a suffix stands for.
fn suffix_exponents(suffix: &str) -> Option<(i64, i64)> {
    let decimal = |e| Some((0, e));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((10, 0)),
        "Mi" => Some((20, 0)),
        "Gi" => Some((30, 0)),
        "Ti" => Some((40, 0)),
        "Pi" => Some((50, 0)),
        "Ei" => Some((60, 0)),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            rest.parse::<i64>().ok().filter(|e| e.abs() <= 1000).map(|e| (0, e))
        }
    }
}

/// Go's `math.Pow10`: exact powers for the table, products of them beyond, reciprocals for
/// negative exponents (so `Pow10(-1)` is `1/10`).
fn go_pow10(n: i64) -> f64 {
    const TABLE: [f64; 32] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
        1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const TABLE32: [f64; 10] = [1e0, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288];
    if (0..=308).contains(&n) {
        return TABLE32[(n / 32) as usize] * TABLE[(n % 32) as usize];
    }
    if (-323..0).contains(&n) {
        let m = -n;
        return 1.0 / (TABLE32[(m / 32) as usize] * TABLE[(m % 32) as usize]);
    }
    if n > 0 { f64::INFINITY } else { 0.0 }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn quantities_as_approximate_float64() {
        let cases: &[(&str, f64)] = &[
            ("1", 1.0),
            ("500m", 0.5),
            ("0.3", 0.30000000000000004),
            ("1.5", 1.5),
            ("2k", 2000.0),
            ("1Ki", 1024.0),
            ("1.5Gi", 1_610_612_736.0),
            ("2e3", 2000.0),
            ("1E-3", 0.001),
            ("-250m", -0.25),
            ("+3M", 3e6),
            // 100 × Pow10(-9), as Go computes it.
            ("100n", 1.0000000000000001e-7),
            ("007", 7.0),
            ("1.", 1.0),
            // Finer than a nano: rounded up to one nano.
            ("0.0000000001", 1e-9),
            // Capped at the largest int64.
            ("100000000000000000000000000000Ei", 9_223_372_036_854_775_807.0),
            ("1e30", 9_223_372_036_854_775_807.0),
        ];
        for &(s, want) in cases {
            assert_eq!(parse_quantity_f64(s).unwrap(), want, "{s}");
        }
    }

    #[test]
    fn bad_quantities() {
        assert_eq!(parse_quantity_f64("").unwrap_err(), QuantityError::Format);
        assert_eq!(parse_quantity_f64("abc").unwrap_err(), QuantityError::Format);
        assert_eq!(parse_quantity_f64("1Qi").unwrap_err(), QuantityError::Format);
        assert_eq!(parse_quantity_f64("1Mb").unwrap_err(), QuantityError::Format);
        assert_eq!(parse_quantity_f64("1KiB").unwrap_err(), QuantityError::Format);
        assert_eq!(parse_quantity_f64("1mm").unwrap_err(), QuantityError::Suffix);
        assert_eq!(QuantityError::Suffix.to_string(), "unable to parse quantity's suffix");
    }
}
