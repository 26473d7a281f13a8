//! Go's `fmt.Sprintf` over JSON values, as `string.fmt` transforms and `combine` patches use it.
//!
//! Arguments are Go values by [`GoType`]: float64 (every number Crossplane hands a function),
//! int64, string, bool, nil, `[]interface {}` and `map[string]interface {}`. Supported: the
//! flags `+ - # 0` and space, width and precision (also `*`), explicit argument indexes
//! (`%[2]s`), the verbs `v s d b o O x X c q U e E f F g G t T %`, and Go's error forms
//! (`%!d(float64=5)`, `%!s(MISSING)`, `%!(EXTRA string=x)`, `%!(NOVERB)`, `%!d(BADINDEX)`).
//! Slices and maps print element by element as Go does (`[a b]`, `map[k:v]`, keys sorted).
//! Not reproduced: `%p` (addresses), `#` on floats, and `%#v` of nested collections beyond
//! Go syntax for strings, numbers and bools.

use serde_json::{Map, Value};

use super::strconv::{can_backquote, format_float, quote, quote_rune};
use super::value::GoType;

/// Go's `fmt.Sprintf(format, args...)`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    sprintf_named(format, args, "int64")
}

/// [`sprintf`] where an integer number is a Go value of type `int_name` (Go templates'
/// integer constants and Sprig's results are `int`).
pub fn sprintf_named(format: &str, args: &[Value], int_name: &'static str) -> String {
    let mut printer = Printer { out: String::new(), flags: Flags::default(), args, int_name };
    printer.run(format);
    printer.out
}

#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    plus: bool,
    minus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    plus_v: bool,
    sharp_v: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

struct Printer<'a> {
    int_name: &'static str,
    out: String,
    flags: Flags,
    args: &'a [Value],
}

/// Parses decimal digits at `i`: (number, found, index after).
fn parse_num(b: &[u8], mut i: usize, end: usize) -> (usize, bool, usize) {
    let start = i;
    let mut n: usize = 0;
    while i < end && b[i].is_ascii_digit() {
        // Go gives up on absurd numbers rather than overflow.
        if n > 1_000_000 {
            return (0, false, end);
        }
        n = n * 10 + usize::from(b[i] - b'0');
        i += 1;
    }
    (n, i > start, i)
}

impl Printer<'_> {
    fn type_name(&self, v: &Value) -> &'static str {
        match GoType::of(v) {
            GoType::Int64 => self.int_name,
            t => t.name(),
        }
    }

    fn run(&mut self, format: &str) {
        let b = format.as_bytes();
        let end = b.len();
        let mut arg_num = 0usize;
        let mut reordered = false;
        let mut i = 0usize;
        while i < end {
            let mut good_arg_num = true;
            let last = i;
            while i < end && b[i] != b'%' {
                i += 1;
            }
            if i > last {
                self.out.push_str(&format[last..i]);
            }
            if i >= end {
                break;
            }
            i += 1;
            self.flags = Flags::default();
            while i < end {
                match b[i] {
                    b'#' => self.flags.sharp = true,
                    b'0' => self.flags.zero = !self.flags.minus,
                    b'+' => self.flags.plus = true,
                    b'-' => {
                        self.flags.minus = true;
                        self.flags.zero = false;
                    }
                    b' ' => self.flags.space = true,
                    _ => break,
                }
                i += 1;
            }

            // An explicit argument index, `[n]`.
            let mut after_index;
            (arg_num, i, after_index) =
                self.arg_number(arg_num, format, i, &mut good_arg_num, &mut reordered);

            // Width.
            if i < end && b[i] == b'*' {
                i += 1;
                match self.int_arg(arg_num) {
                    Some(w) => {
                        if w < 0 {
                            self.flags.minus = true;
                            self.flags.zero = false;
                        }
                        self.flags.width = Some(w.unsigned_abs() as usize);
                    }
                    None => self.out.push_str("%!(BADWIDTH)"),
                }
                if arg_num < self.args.len() {
                    arg_num += 1;
                }
                after_index = false;
            } else {
                let (n, found, next) = parse_num(b, i, end);
                i = next;
                if found {
                    self.flags.width = Some(n);
                    if after_index {
                        good_arg_num = false;
                    }
                }
            }

            // Precision.
            if i + 1 < end && b[i] == b'.' {
                i += 1;
                if after_index {
                    good_arg_num = false;
                }
                (arg_num, i, after_index) =
                    self.arg_number(arg_num, format, i, &mut good_arg_num, &mut reordered);
                if i < end && b[i] == b'*' {
                    i += 1;
                    match self.int_arg(arg_num) {
                        Some(p) if p >= 0 => self.flags.precision = Some(p as usize),
                        // A negative precision is as bad as none.
                        _ => self.out.push_str("%!(BADPREC)"),
                    }
                    if arg_num < self.args.len() {
                        arg_num += 1;
                    }
                    after_index = false;
                } else {
                    let (n, _, next) = parse_num(b, i, end);
                    i = next;
                    self.flags.precision = Some(n);
                }
            }

            if !after_index {
                (arg_num, i, _) = self.arg_number(arg_num, format, i, &mut good_arg_num, &mut reordered);
            }

            if i >= end {
                self.out.push_str("%!(NOVERB)");
                break;
            }
            let Some(verb) = format[i..].chars().next() else { break };
            i += verb.len_utf8();

            if verb == '%' {
                self.out.push('%');
            } else if !good_arg_num {
                self.out.push_str(&format!("%!{verb}(BADINDEX)"));
            } else if arg_num >= self.args.len() {
                self.out.push_str(&format!("%!{verb}(MISSING)"));
            } else {
                if verb == 'v' {
                    self.flags.sharp_v = self.flags.sharp;
                    self.flags.sharp = false;
                    self.flags.plus_v = self.flags.plus;
                    self.flags.plus = false;
                }
                let args = self.args;
                self.print_arg(&args[arg_num], verb);
                arg_num += 1;
            }
        }

        if !reordered && arg_num < self.args.len() {
            self.flags = Flags::default();
            self.out.push_str("%!(EXTRA ");
            let args = self.args;
            for (n, arg) in args[arg_num..].iter().enumerate() {
                if n > 0 {
                    self.out.push_str(", ");
                }
                if arg.is_null() {
                    self.out.push_str("<nil>");
                } else {
                    self.out.push_str(self.type_name(arg));
                    self.out.push('=');
                    self.print_arg(arg, 'v');
                }
            }
            self.out.push(')');
        }
    }

    /// Handles `[n]` at `i`: the new argument number, index and whether an index was found.
    fn arg_number(
        &self,
        arg_num: usize,
        format: &str,
        i: usize,
        good: &mut bool,
        reordered: &mut bool,
    ) -> (usize, usize, bool) {
        let b = format.as_bytes();
        if i >= b.len() || b[i] != b'[' {
            return (arg_num, i, false);
        }
        *reordered = true;
        let rest = &b[i..];
        if rest.len() < 3 {
            *good = false;
            return (arg_num, i + 1, false);
        }
        let Some(close) = rest.iter().position(|&c| c == b']') else {
            *good = false;
            return (arg_num, i + 1, false);
        };
        let (n, found, next) = parse_num(rest, 1, close);
        if !found || next != close {
            *good = false;
            return (arg_num, i + close + 1, false);
        }
        let index = n.wrapping_sub(1);
        if n >= 1 && index < self.args.len() {
            return (index, i + close + 1, true);
        }
        *good = false;
        (arg_num, i + close + 1, true)
    }

    /// An argument used as a width or precision: Go accepts integers only.
    fn int_arg(&self, arg_num: usize) -> Option<i64> {
        let v = self.args.get(arg_num)?;
        match GoType::of(v) {
            GoType::Int64 => v.as_i64().filter(|n| n.unsigned_abs() <= 1_000_000),
            _ => None,
        }
    }

    fn print_arg(&mut self, arg: &Value, verb: char) {
        if arg.is_null() {
            match verb {
                'T' | 'v' => self.pad_str("<nil>"),
                _ => self.bad_verb(verb, arg),
            }
            return;
        }
        if verb == 'T' {
            self.fmt_s(self.type_name(arg));
            return;
        }
        self.print_value(arg, verb, 0);
    }

    fn print_value(&mut self, value: &Value, verb: char, depth: usize) {
        match value {
            Value::Null => {
                // A nil inside a collection prints as <nil> whatever the verb.
                if self.flags.sharp_v {
                    self.out.push_str("interface {}(nil)");
                } else {
                    self.pad_str("<nil>");
                }
            }
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad_str(if *b { "true" } else { "false" }),
                _ => self.bad_verb(verb, value),
            },
            Value::Number(n) if n.is_f64() => {
                let f = n.as_f64().unwrap_or_default();
                match verb {
                    'v' => self.fmt_float(f, 'g', -1),
                    'b' | 'g' | 'G' | 'x' | 'X' => self.fmt_float(f, verb, -1),
                    'f' | 'e' | 'E' | 'F' => self.fmt_float(f, verb, 6),
                    _ => self.bad_verb(verb, value),
                }
            }
            Value::Number(n) => {
                let v = n.as_i64().map_or_else(|| i128::from(n.as_u64().unwrap_or_default()), i128::from);
                match verb {
                    'v' | 'd' => self.fmt_integer(v, 10, verb, false),
                    'b' => self.fmt_integer(v, 2, verb, false),
                    'o' | 'O' => self.fmt_integer(v, 8, verb, false),
                    'x' => self.fmt_integer(v, 16, verb, false),
                    'X' => self.fmt_integer(v, 16, verb, true),
                    'c' => self.pad_str(&char_of(v).to_string()),
                    'q' => self.pad_str(&quote_rune(char_of(v), self.flags.plus)),
                    'U' => self.fmt_unicode(v),
                    _ => self.bad_verb(verb, value),
                }
            }
            Value::String(s) => match verb {
                'v' if self.flags.sharp_v => self.fmt_q(s),
                'v' | 's' => self.fmt_s(s),
                'x' => self.fmt_sx(s, false),
                'X' => self.fmt_sx(s, true),
                'q' => self.fmt_q(s),
                _ => self.bad_verb(verb, value),
            },
            Value::Array(items) => {
                if self.flags.sharp_v {
                    self.out.push_str("[]interface {}{");
                    for (n, item) in items.iter().enumerate() {
                        if n > 0 {
                            self.out.push_str(", ");
                        }
                        self.print_value(item, verb, depth + 1);
                    }
                    self.out.push('}');
                    return;
                }
                self.out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        self.out.push(' ');
                    }
                    self.print_value(item, verb, depth + 1);
                }
                self.out.push(']');
            }
            Value::Object(map) => self.print_map(map, verb, depth),
        }
    }

    fn print_map(&mut self, map: &Map<String, Value>, verb: char, depth: usize) {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let sharp_v = self.flags.sharp_v;
        self.out.push_str(if sharp_v { "map[string]interface {}{" } else { "map[" });
        for (n, (key, value)) in entries.into_iter().enumerate() {
            if n > 0 {
                self.out.push_str(if sharp_v { ", " } else { " " });
            }
            self.print_value(&Value::String(key.clone()), verb, depth + 1);
            self.out.push(':');
            self.print_value(value, verb, depth + 1);
        }
        self.out.push(if sharp_v { '}' } else { ']' });
    }

    /// `%!verb(type=value)`.
    fn bad_verb(&mut self, verb: char, value: &Value) {
        self.out.push_str("%!");
        self.out.push(verb);
        self.out.push('(');
        if value.is_null() {
            self.out.push_str("<nil>");
        } else {
            self.out.push_str(self.type_name(value));
            self.out.push('=');
            self.print_value(value, 'v', 0);
        }
        self.out.push(')');
    }

    fn write_padding(&mut self, n: usize) {
        let c = if self.flags.zero { '0' } else { ' ' };
        self.out.extend(std::iter::repeat_n(c, n));
    }

    /// Writes `s` padded to the width (counted in characters).
    fn pad_str(&mut self, s: &str) {
        let Some(width) = self.flags.width.filter(|w| *w > 0) else {
            self.out.push_str(s);
            return;
        };
        let len = s.chars().count();
        let pad = width.saturating_sub(len);
        if self.flags.minus {
            self.out.push_str(s);
            self.write_padding(pad);
        } else {
            self.write_padding(pad);
            self.out.push_str(s);
        }
    }

    fn truncate<'s>(&self, s: &'s str) -> &'s str {
        match self.flags.precision {
            Some(p) => match s.char_indices().nth(p) {
                Some((at, _)) => &s[..at],
                None => s,
            },
            None => s,
        }
    }

    fn fmt_s(&mut self, s: &str) {
        let s = self.truncate(s).to_string();
        self.pad_str(&s);
    }

    fn fmt_q(&mut self, s: &str) {
        let s = self.truncate(s).to_string();
        if self.flags.sharp && can_backquote(&s) {
            self.pad_str(&format!("`{s}`"));
        } else {
            let quoted = quote(&s, self.flags.plus);
            self.pad_str(&quoted);
        }
    }

    fn fmt_sx(&mut self, s: &str, upper: bool) {
        let bytes = s.as_bytes();
        let length = self.flags.precision.map_or(bytes.len(), |p| p.min(bytes.len()));
        let digits: &[u8; 16] = if upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
        let x = if upper { 'X' } else { 'x' };
        let mut width = 2 * length;
        if width == 0 {
            if let Some(w) = self.flags.width {
                self.write_padding(w);
            }
            return;
        }
        if self.flags.space {
            if self.flags.sharp {
                width *= 2;
            }
            width += length - 1;
        } else if self.flags.sharp {
            width += 2;
        }
        let pad = self.flags.width.map_or(0, |w| w.saturating_sub(width));
        if !self.flags.minus {
            self.write_padding(pad);
        }
        if self.flags.sharp {
            self.out.push('0');
            self.out.push(x);
        }
        for (n, byte) in bytes[..length].iter().enumerate() {
            if self.flags.space && n > 0 {
                self.out.push(' ');
                if self.flags.sharp {
                    self.out.push('0');
                    self.out.push(x);
                }
            }
            self.out.push(digits[usize::from(byte >> 4)] as char);
            self.out.push(digits[usize::from(byte & 0xf)] as char);
        }
        if self.flags.minus {
            self.write_padding(pad);
        }
    }

    fn fmt_integer(&mut self, v: i128, base: u32, verb: char, upper: bool) {
        let negative = v < 0;
        let magnitude = v.unsigned_abs();
        let mut precision = 0usize;
        if let Some(p) = self.flags.precision {
            precision = p;
            if p == 0 && magnitude == 0 {
                // Precision 0 and value 0 print nothing but the padding.
                let zero = self.flags.zero;
                self.flags.zero = false;
                let w = self.flags.width.unwrap_or(0);
                self.write_padding(w);
                self.flags.zero = zero;
                return;
            }
        } else if self.flags.zero && !self.flags.minus && self.flags.width.is_some() {
            precision = self.flags.width.unwrap_or(0);
            if negative || self.flags.plus || self.flags.space {
                precision = precision.saturating_sub(1);
            }
        }
        let mut digits = match base {
            2 => format!("{magnitude:b}"),
            8 => format!("{magnitude:o}"),
            16 if upper => format!("{magnitude:X}"),
            16 => format!("{magnitude:x}"),
            _ => magnitude.to_string(),
        };
        if digits.len() < precision {
            digits = format!("{}{digits}", "0".repeat(precision - digits.len()));
        }
        let mut prefix = String::new();
        if self.flags.sharp {
            match base {
                2 => prefix.push_str("0b"),
                8 if !digits.starts_with('0') => prefix.push('0'),
                16 => prefix.push_str(if upper { "0X" } else { "0x" }),
                _ => {}
            }
        }
        if verb == 'O' {
            prefix = "0o".to_string();
        }
        let sign = if negative {
            "-"
        } else if self.flags.plus {
            "+"
        } else if self.flags.space {
            " "
        } else {
            ""
        };
        let s = format!("{sign}{prefix}{digits}");
        let zero = self.flags.zero;
        self.flags.zero = false;
        self.pad_str(&s);
        self.flags.zero = zero;
    }

    fn fmt_unicode(&mut self, v: i128) {
        let mut s = format!("U+{:04X}", v.max(0));
        if self.flags.sharp
            && let Some(c) = u32::try_from(v).ok().and_then(char::from_u32)
            && !c.is_control()
        {
            s.push_str(&format!(" '{c}'"));
        }
        let zero = self.flags.zero;
        self.flags.zero = false;
        self.pad_str(&s);
        self.flags.zero = zero;
    }

    fn fmt_float(&mut self, v: f64, verb: char, default_precision: i32) {
        let precision = self.flags.precision.map_or(default_precision, |p| p as i32);
        let format = match verb {
            'F' => b'f',
            'v' => b'g',
            other => other as u8,
        };
        let mut num = format_float(v, format, precision);
        if !num.starts_with(['-', '+']) {
            num.insert(0, '+');
        }
        if self.flags.space && num.starts_with('+') && !self.flags.plus {
            num.replace_range(0..1, " ");
        }
        if num[1..].starts_with(['I', 'N']) {
            // Infinities and NaN are never zero-padded; NaN has no sign unless asked for.
            let zero = self.flags.zero;
            self.flags.zero = false;
            if num[1..].starts_with('N') && !self.flags.space && !self.flags.plus {
                num.remove(0);
            }
            self.pad_str(&num);
            self.flags.zero = zero;
            return;
        }
        if self.flags.plus || !num.starts_with('+') {
            // Zero padding goes between the sign and the digits.
            if self.flags.zero
                && !self.flags.minus
                && let Some(width) = self.flags.width.filter(|w| *w > num.len())
            {
                self.out.push_str(&num[..1]);
                self.write_padding(width - num.len());
                self.out.push_str(&num[1..]);
                return;
            }
            self.pad_str(&num);
            return;
        }
        let unsigned = num[1..].to_string();
        self.pad_str(&unsigned);
    }
}

/// The character an integer stands for under `%c` (U+FFFD when it is not one).
fn char_of(v: i128) -> char {
    u32::try_from(v).ok().and_then(char::from_u32).unwrap_or('\u{fffd}')
}

#[cfg(test)]
mod tests;
