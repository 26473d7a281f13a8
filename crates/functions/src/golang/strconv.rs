//! Go's `strconv.FormatFloat` and `strconv.Quote`, the building blocks of [`super::fmt`] and
//! [`super::json`].
//!
//! Decimal digits come from Rust's float formatting, which like Go's rounds the exact binary
//! value correctly (ties to even); the layout around them (`%e` exponents with at least two
//! digits, `%g`'s choice between the two forms, hexadecimal `%x`) follows Go.

/// Decimal digits of a float: value = 0.`digits` × 10^`point`. Zero has no digits.
struct Decimal {
    digits: Vec<u8>,
    point: i32,
}

impl Decimal {
    /// Parses Rust's `{:e}` rendering of a non-negative finite number (`1.2345e-7`).
    fn from_scientific(s: &str) -> Decimal {
        let (mantissa, exponent) = s.split_once('e').unwrap_or((s, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        while digits.last() == Some(&b'0') {
            digits.pop();
        }
        if digits.is_empty() {
            return Decimal { digits, point: 0 };
        }
        Decimal { digits, point: exponent + 1 }
    }

    /// The shortest digits that read back as `v`.
    fn shortest(v: f64) -> Decimal {
        Decimal::from_scientific(&format!("{v:e}"))
    }

    /// `v` rounded to `n` significant digits (trailing zeros dropped).
    fn significant(v: f64, n: usize) -> Decimal {
        Decimal::from_scientific(&format!("{v:.prec$e}", prec = n.saturating_sub(1)))
    }
}

/// `strconv.FormatFloat(v, format, precision, 64)` for `format` in `e E f g G x X b`
/// (`precision` < 0: the shortest that reads back).
pub fn format_float(v: f64, format: u8, precision: i32) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".to_string() } else { "-Inf".to_string() };
    }
    let negative = v.is_sign_negative();
    let abs = v.abs();
    let body = match format {
        b'f' | b'F' => {
            if precision < 0 {
                format!("{abs}")
            } else {
                format!("{abs:.prec$}", prec = precision as usize)
            }
        }
        b'e' | b'E' => {
            let d = if precision < 0 {
                Decimal::shortest(abs)
            } else {
                Decimal::significant(abs, precision as usize + 1)
            };
            let precision = if precision < 0 { (d.digits.len() as i32 - 1).max(0) } else { precision };
            layout_e(&d, precision, format)
        }
        b'g' | b'G' => layout_g(abs, precision, format),
        b'x' | b'X' => return layout_x(v, precision, format),
        b'b' => return layout_b(v),
        other => return format!("%{}", other as char),
    };
    if negative { format!("-{body}") } else { body }
}

fn layout_e(d: &Decimal, precision: i32, format: u8) -> String {
    let mut out = String::new();
    out.push(d.digits.first().map_or('0', |&c| c as char));
    if precision > 0 {
        out.push('.');
        for i in 1..=precision as usize {
            out.push(d.digits.get(i).map_or('0', |&c| c as char));
        }
    }
    out.push(if format == b'E' || format == b'G' { 'E' } else { 'e' });
    let mut exponent = if d.digits.is_empty() { 0 } else { d.point - 1 };
    if exponent < 0 {
        out.push('-');
        exponent = -exponent;
    } else {
        out.push('+');
    }
    if exponent < 10 {
        out.push('0');
    }
    out.push_str(&exponent.to_string());
    out
}

fn layout_f(d: &Decimal, precision: i32) -> String {
    let mut out = String::new();
    if d.point > 0 {
        for i in 0..d.point as usize {
            out.push(d.digits.get(i).map_or('0', |&c| c as char));
        }
    } else {
        out.push('0');
    }
    if precision > 0 {
        out.push('.');
        for i in 0..precision {
            let j = d.point + i;
            let c = if j >= 0 { d.digits.get(j as usize).copied().unwrap_or(b'0') } else { b'0' };
            out.push(c as char);
        }
    }
    out
}

/// `%g`: `%e` when the exponent is below -4 or at least the precision (6 for the shortest
/// form), else `%f`, without trailing zeros.
fn layout_g(abs: f64, precision: i32, format: u8) -> String {
    let shortest = precision < 0;
    let (d, mut precision) = if shortest {
        let d = Decimal::shortest(abs);
        let n = d.digits.len() as i32;
        (d, n)
    } else {
        let precision = precision.max(1);
        (Decimal::significant(abs, precision as usize), precision)
    };
    let n = d.digits.len() as i32;
    let mut eprec = precision;
    if eprec > n && n >= d.point {
        eprec = n;
    }
    if shortest {
        eprec = 6;
    }
    let exponent = d.point - 1;
    if !d.digits.is_empty() && (exponent < -4 || exponent >= eprec) {
        if precision > n {
            precision = n;
        }
        return layout_e(&d, precision - 1, format);
    }
    if precision > d.point {
        precision = n;
    }
    layout_f(&d, (precision - d.point).max(0))
}

/// `%x`: `-0x1.yyyp±dd` (hexadecimal mantissa, binary exponent).
fn layout_x(v: f64, precision: i32, format: u8) -> String {
    let bits = v.to_bits();
    let negative = bits >> 63 != 0;
    let mut exponent = ((bits >> 52) & 0x7ff) as i32;
    let mut mantissa = bits & ((1u64 << 52) - 1);
    if exponent == 0 {
        exponent += 1;
    } else {
        mantissa |= 1u64 << 52;
    }
    exponent -= 1023;
    if mantissa == 0 {
        exponent = 0;
    }
    // Put the leading 1 (if any) at bit 60.
    mantissa <<= 60 - 52;
    while mantissa != 0 && mantissa & (1u64 << 60) == 0 {
        mantissa <<= 1;
        exponent -= 1;
    }
    if (0..15).contains(&precision) {
        let shift = (precision * 4) as u32;
        let extra = (mantissa << shift) & ((1u64 << 60) - 1);
        mantissa >>= 60 - shift;
        if extra | (mantissa & 1) > 1u64 << 59 {
            mantissa += 1;
        }
        mantissa <<= 60 - shift;
        if mantissa & (1u64 << 61) != 0 {
            mantissa >>= 1;
            exponent += 1;
        }
    }
    let upper = format == b'X';
    let hex: &[u8; 16] = if upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push('0');
    out.push(if upper { 'X' } else { 'x' });
    out.push(if (mantissa >> 60) & 1 == 1 { '1' } else { '0' });
    mantissa <<= 4;
    if precision < 0 && mantissa != 0 {
        out.push('.');
        while mantissa != 0 {
            out.push(hex[((mantissa >> 60) & 15) as usize] as char);
            mantissa <<= 4;
        }
    } else if precision > 0 {
        out.push('.');
        for _ in 0..precision {
            out.push(hex[((mantissa >> 60) & 15) as usize] as char);
            mantissa <<= 4;
        }
    }
    out.push(if upper { 'P' } else { 'p' });
    if exponent < 0 {
        out.push('-');
        exponent = -exponent;
    } else {
        out.push('+');
    }
    if exponent < 10 {
        out.push('0');
    }
    out.push_str(&exponent.to_string());
    out
}

/// `%b`: decimal mantissa and binary exponent, `4503599627370496p-52`.
fn layout_b(v: f64) -> String {
    let bits = v.to_bits();
    let negative = bits >> 63 != 0;
    let mut exponent = ((bits >> 52) & 0x7ff) as i64;
    let mut mantissa = bits & ((1u64 << 52) - 1);
    if exponent == 0 {
        exponent += 1;
    } else {
        mantissa |= 1u64 << 52;
    }
    exponent -= 1023 + 52;
    let sign = if negative { "-" } else { "" };
    let exp_sign = if exponent >= 0 { "+" } else { "" };
    format!("{sign}{mantissa}p{exp_sign}{exponent}")
}

/// Go's `strconv.Quote` (`ascii_only`: `QuoteToASCII`).
pub fn quote(s: &str, ascii_only: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        escape_rune(&mut out, c, '"', ascii_only);
    }
    out.push('"');
    out
}

/// Go's `strconv.QuoteRune`.
pub fn quote_rune(c: char, ascii_only: bool) -> String {
    let mut out = String::from("'");
    escape_rune(&mut out, c, '\'', ascii_only);
    out.push('\'');
    out
}

/// Whether Go's `strconv.CanBackquote` holds: no control characters other than tab, no
/// backquote.
pub fn can_backquote(s: &str) -> bool {
    s.chars().all(|c| c == '\t' || !(c < ' ' || c == '\u{7f}' || c == '`' || c == '\u{feff}'))
}

fn escape_rune(out: &mut String, c: char, quote: char, ascii_only: bool) {
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii_only {
        if c.is_ascii() && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// An approximation of Go's `strconv.IsPrint`: not a control, not white space other than the
/// ASCII space, and not one of the common invisible format characters.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn floats_format_as_go_does() {
        let cases: &[(f64, u8, i32, &str)] = &[
            (5.0, b'g', -1, "5"),
            (5.5, b'g', -1, "5.5"),
            (1e6, b'g', -1, "1e+06"),
            (123456.0, b'g', -1, "123456"),
            (1234567.0, b'g', -1, "1.234567e+06"),
            (0.0001, b'g', -1, "0.0001"),
            (0.00001, b'g', -1, "1e-05"),
            (0.0, b'g', -1, "0"),
            (-2.5, b'g', -1, "-2.5"),
            (1.0, b'g', 3, "1"),
            (1234.0, b'g', 3, "1.23e+03"),
            (1.23456, b'g', 3, "1.23"),
            (1.23456, b'f', 2, "1.23"),
            (0.125, b'f', 2, "0.12"),
            (2.5, b'f', 0, "2"),
            (5.0, b'f', 6, "5.000000"),
            (1e21, b'f', -1, "1000000000000000000000"),
            (1234.5678, b'e', 6, "1.234568e+03"),
            (0.0, b'e', 6, "0.000000e+00"),
            (1e-7, b'e', -1, "1e-07"),
            (1e100, b'e', -1, "1e+100"),
            (123.0, b'E', 2, "1.23E+02"),
            (5.0, b'x', -1, "0x1.4p+02"),
            (1.0, b'x', -1, "0x1p+00"),
            (0.0, b'x', -1, "0x0p+00"),
            (-0.5, b'X', -1, "-0X1P-01"),
            (1.0, b'b', -1, "4503599627370496p-52"),
        ];
        for &(v, format, precision, want) in cases {
            assert_eq!(format_float(v, format, precision), want, "{v} {} {precision}", format as char);
        }
    }

    #[test]
    fn quotes_as_go_does() {
        assert_eq!(quote("a\"b\\c", false), r#""a\"b\\c""#);
        assert_eq!(quote("tab\there\n", false), r#""tab\there\n""#);
        assert_eq!(quote("\u{1}", false), r#""\x01""#);
        assert_eq!(quote("héllo", false), "\"héllo\"");
        assert_eq!(quote("héllo", true), r#""h\u00e9llo""#);
        assert_eq!(quote("\u{200b}", false), r#""\u200b""#);
        assert_eq!(quote("😀", true), r#""\U0001f600""#);
        assert_eq!(quote_rune('x', false), "'x'");
        assert_eq!(quote_rune('\'', false), r"'\''");
        assert!(can_backquote("a\tb"));
        assert!(!can_backquote("a`b"));
        assert!(!can_backquote("a\nb"));
    }
}
