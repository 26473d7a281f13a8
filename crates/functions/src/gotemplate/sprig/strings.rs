//! Sprig's string functions.

use serde_json::Value;

use super::{i, int, s, strslice, strval};
use crate::gotemplate::{Func, Funcs, P};
use crate::golang::strconv::quote;

/// Go's byte slicing of a string, kept valid UTF-8.
fn bytes_slice(s: &str, from: usize, to: usize) -> String {
    let b = s.as_bytes();
    String::from_utf8_lossy(&b[from.min(b.len())..to.min(b.len()).max(from.min(b.len()))]).into_owned()
}

fn string(s: String) -> Result<Value, String> {
    Ok(Value::String(s))
}

fn abbreviate(s: &str, offset: usize, max: usize) -> String {
    let len = s.len();
    if s.is_empty() || max < 4 || len <= max {
        return s.to_string();
    }
    let mut offset = offset.min(len);
    if len - offset < max - 3 {
        offset = len - (max - 3);
    }
    if offset <= 4 {
        return bytes_slice(s, 0, max - 3) + "...";
    }
    if max < 7 {
        return s.to_string();
    }
    if offset + max - 3 < len {
        return "...".to_string() + &abbreviate(&bytes_slice(s, offset, len), 0, max - 3);
    }
    "...".to_string() + &bytes_slice(s, len - (max - 3), len)
}

/// Go's `strings.Title`: the first letter of each word upper-cased.
fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_sep = true;
    for c in s.chars() {
        if prev_sep {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev_sep = !(c.is_alphanumeric() || c == '_' || c == '\'');
    }
    out
}

fn untitle(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_space = true;
    for c in s.chars() {
        if prev_space {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        prev_space = c.is_whitespace();
    }
    out
}

fn swapcase(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut whitespace = true;
    for c in s.chars() {
        if c.is_uppercase() {
            out.extend(c.to_lowercase());
            whitespace = false;
        } else if c.is_lowercase() {
            if whitespace {
                out.extend(c.to_uppercase());
                whitespace = false;
            } else {
                out.extend(c.to_uppercase());
            }
        } else {
            whitespace = c.is_whitespace();
            out.push(c);
        }
    }
    out
}

/// Words of an identifier for the case conversions (`HTTPServer` is `HTTP` `Server`).
fn words(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (idx, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[idx - 1];
            let next_lower = chars.get(idx + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn snake(s: &str, sep: &str) -> String {
    words(s).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>().join(sep)
}

/// xstrings' `ToCamelCase`: `_`-separated words joined, each capitalised.
fn camel(s: &str) -> String {
    let mut out = String::new();
    let mut upper_next = true;
    for c in s.chars() {
        if c == '_' {
            upper_next = true;
            continue;
        }
        if upper_next {
            out.extend(c.to_uppercase());
            upper_next = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// goutils' `WrapCustom`.
fn wrap(s: &str, width: i64, sep: &str, long_words: bool) -> String {
    let width = width.max(1) as usize;
    let mut out = String::new();
    for (n, line) in s.split('\n').enumerate() {
        if n > 0 {
            out.push_str(sep);
        }
        let mut cur = String::new();
        for word in line.split(' ').filter(|w| !w.is_empty()) {
            let mut word = word.to_string();
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
                out.push_str(&cur);
                out.push_str(sep);
                cur.clear();
            }
            while long_words && word.chars().count() > width {
                if !cur.is_empty() {
                    out.push_str(&cur);
                    out.push_str(sep);
                    cur.clear();
                }
                let head: String = word.chars().take(width).collect();
                out.push_str(&head);
                out.push_str(sep);
                word = word.chars().skip(width).collect();
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(&word);
        }
        out.push_str(&cur);
    }
    out
}

fn split_map(parts: Vec<&str>) -> Value {
    let map: serde_json::Map<String, Value> =
        parts.into_iter().enumerate().map(|(n, p)| (format!("_{n}"), Value::String(p.to_string()))).collect();
    Value::Object(map)
}

fn until_step(start: i64, stop: i64, step: i64) -> Value {
    let mut v = Vec::new();
    if step == 0 {
        return Value::Array(v);
    }
    let mut n = start;
    if step > 0 {
        while n < stop {
            v.push(int(n));
            n += step;
        }
    } else {
        while n > stop {
            v.push(int(n));
            n += step;
        }
    }
    Value::Array(v)
}

fn random(count: i64, set: &[u8]) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..count.max(0)).map(|_| char::from(set[rng.random_range(0..set.len())])).collect()
}

const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const NUMERIC: &[u8] = b"0123456789";
const ALPHANUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

pub(super) fn add(f: &mut Funcs) {
    use P::{Any, Int, Str};
    f.insert("abbrev", Func::pure(&[Int, Str], |a| {
        let w = i(a[0]);
        if w < 4 {
            return string(s(a[1]).into());
        }
        string(abbreviate(s(a[1]), 0, w as usize))
    }));
    f.insert("abbrevboth", Func::pure(&[Int, Int, Str], |a| {
        let (l, r) = (i(a[0]), i(a[1]));
        if r < 4 || (l > 0 && r < 7) {
            return string(s(a[2]).into());
        }
        string(abbreviate(s(a[2]), l.max(0) as usize, r as usize))
    }));
    f.insert("trunc", Func::pure(&[Int, Str], |a| {
        let (c, st) = (i(a[0]), s(a[1]));
        let len = st.len() as i64;
        if c < 0 && len + c > 0 {
            return string(bytes_slice(st, (len + c) as usize, st.len()));
        }
        if c >= 0 && len > c {
            return string(bytes_slice(st, 0, c as usize));
        }
        string(st.into())
    }));
    f.insert("trim", Func::pure(&[Str], |a| string(s(a[0]).trim().into())));
    f.insert("upper", Func::pure(&[Str], |a| string(s(a[0]).to_uppercase())));
    f.insert("lower", Func::pure(&[Str], |a| string(s(a[0]).to_lowercase())));
    f.insert("title", Func::pure(&[Str], |a| string(title(s(a[0])))));
    f.insert("untitle", Func::pure(&[Str], |a| string(untitle(s(a[0])))));
    f.insert("substr", Func::pure(&[Int, Int, Str], |a| {
        let (start, end, st) = (i(a[0]), i(a[1]), s(a[2]));
        let len = st.len() as i64;
        if start < 0 {
            if end < 0 || end > len {
                return Err(format!("runtime error: slice bounds out of range [:{end}] with length {len}"));
            }
            return string(bytes_slice(st, 0, end as usize));
        }
        if start > len {
            return Err(format!("runtime error: slice bounds out of range [{start}:{len}]"));
        }
        if end < 0 || end > len {
            return string(bytes_slice(st, start as usize, st.len()));
        }
        if start > end {
            return Err(format!("runtime error: slice bounds out of range [{start}:{end}]"));
        }
        string(bytes_slice(st, start as usize, end as usize))
    }));
    f.insert("repeat", Func::pure(&[Int, Str], |a| {
        let n = i(a[0]);
        if n < 0 {
            return Err("strings: negative Repeat count".into());
        }
        string(s(a[1]).repeat(n as usize))
    }));
    for name in ["trimAll", "trimall"] {
        f.insert(name, Func::pure(&[Str, Str], |a| {
            let cut = s(a[0]);
            string(s(a[1]).trim_matches(|c| cut.contains(c)).into())
        }));
    }
    f.insert("trimSuffix", Func::pure(&[Str, Str], |a| string(s(a[1]).strip_suffix(s(a[0])).unwrap_or(s(a[1])).into())));
    f.insert("trimPrefix", Func::pure(&[Str, Str], |a| string(s(a[1]).strip_prefix(s(a[0])).unwrap_or(s(a[1])).into())));
    f.insert("nospace", Func::pure(&[Str], |a| string(s(a[0]).chars().filter(|c| !c.is_whitespace()).collect())));
    f.insert("initials", Func::pure(&[Str], |a| {
        string(s(a[0]).split_whitespace().filter_map(|w| w.chars().next()).collect())
    }));
    f.insert("randAlphaNum", Func::pure(&[Int], |a| string(random(i(a[0]), ALPHANUM))));
    f.insert("randAlpha", Func::pure(&[Int], |a| string(random(i(a[0]), ALPHA))));
    f.insert("randNumeric", Func::pure(&[Int], |a| string(random(i(a[0]), NUMERIC))));
    f.insert("randAscii", Func::pure(&[Int], |a| {
        let printable: Vec<u8> = (32u8..127).collect();
        string(random(i(a[0]), &printable))
    }));
    f.insert("swapcase", Func::pure(&[Str], |a| string(swapcase(s(a[0])))));
    f.insert("shuffle", Func::pure(&[Str], |a| {
        use rand::seq::SliceRandom;
        let mut chars: Vec<char> = s(a[0]).chars().collect();
        chars.shuffle(&mut rand::rng());
        string(chars.into_iter().collect())
    }));
    f.insert("snakecase", Func::pure(&[Str], |a| string(snake(s(a[0]), "_"))));
    f.insert("kebabcase", Func::pure(&[Str], |a| string(snake(s(a[0]), "-"))));
    f.insert("camelcase", Func::pure(&[Str], |a| string(camel(s(a[0])))));
    f.insert("wrap", Func::pure(&[Int, Str], |a| string(wrap(s(a[1]), i(a[0]), "\n", false))));
    f.insert("wrapWith", Func::pure(&[Int, Str, Str], |a| string(wrap(s(a[2]), i(a[0]), s(a[1]), true))));
    f.insert("contains", Func::pure(&[Str, Str], |a| Ok(Value::Bool(s(a[1]).contains(s(a[0]))))));
    f.insert("hasPrefix", Func::pure(&[Str, Str], |a| Ok(Value::Bool(s(a[1]).starts_with(s(a[0]))))));
    f.insert("hasSuffix", Func::pure(&[Str, Str], |a| Ok(Value::Bool(s(a[1]).ends_with(s(a[0]))))));
    f.insert("quote", Func::pure_variadic(&[], Any, |a| {
        let parts: Vec<String> = a.iter().filter(|v| !v.is_null()).map(|v| quote(&strval(v), false)).collect();
        string(parts.join(" "))
    }));
    f.insert("squote", Func::pure_variadic(&[], Any, |a| {
        let parts: Vec<String> = a.iter().filter(|v| !v.is_null()).map(|v| format!("'{}'", strval(v))).collect();
        string(parts.join(" "))
    }));
    f.insert("cat", Func::pure_variadic(&[], Any, |a| {
        let parts: Vec<String> = a.iter().filter(|v| !v.is_null()).map(|v| strval(v)).collect();
        string(parts.join(" "))
    }));
    f.insert("indent", Func::pure(&[Int, Str], |a| {
        let pad = " ".repeat(i(a[0]).max(0) as usize);
        string(format!("{pad}{}", s(a[1]).replace('\n', &format!("\n{pad}"))))
    }));
    f.insert("nindent", Func::pure(&[Int, Str], |a| {
        let pad = " ".repeat(i(a[0]).max(0) as usize);
        string(format!("\n{pad}{}", s(a[1]).replace('\n', &format!("\n{pad}"))))
    }));
    f.insert("replace", Func::pure(&[Str, Str, Str], |a| string(s(a[2]).replace(s(a[0]), s(a[1])))));
    f.insert("plural", Func::pure(&[Str, Str, Int], |a| string(if i(a[2]) == 1 { s(a[0]) } else { s(a[1]) }.into())));
    f.insert("toString", Func::pure(&[Any], |a| string(strval(a[0]))));
    f.insert("split", Func::pure(&[Str, Str], |a| Ok(split_map(go_split(s(a[1]), s(a[0]), -1)))));
    f.insert("splitn", Func::pure(&[Str, Int, Str], |a| Ok(split_map(go_split(s(a[2]), s(a[0]), i(a[1]))))));
    f.insert("splitList", Func::pure(&[Str, Str], |a| {
        Ok(Value::Array(go_split(s(a[1]), s(a[0]), -1).into_iter().map(|p| Value::String(p.into())).collect()))
    }));
    f.insert("toStrings", Func::pure(&[Any], |a| Ok(Value::Array(strslice(a[0]).into_iter().map(Value::String).collect()))));
    f.insert("join", Func::pure(&[Str, Any], |a| string(strslice(a[1]).join(s(a[0])))));
    f.insert("sortAlpha", Func::pure(&[Any], |a| {
        let mut list = match a[0] {
            Value::Array(_) => strslice(a[0]),
            other => vec![strval(other)],
        };
        list.sort();
        Ok(Value::Array(list.into_iter().map(Value::String).collect()))
    }));
    f.insert("until", Func::pure(&[Int], |a| {
        let n = i(a[0]);
        Ok(if n < 0 { until_step(0, n, -1) } else { until_step(0, n, 1) })
    }));
    f.insert("untilStep", Func::pure(&[Int, Int, Int], |a| Ok(until_step(i(a[0]), i(a[1]), i(a[2])))));
    f.insert("seq", Func::pure_variadic(&[], Int, |a| {
        let p: Vec<i64> = a.iter().map(|v| i(v)).collect();
        let (start, step, end) = match p.len() {
            0 => return string(String::new()),
            1 => (1, if p[0] >= 1 { 1 } else { -1 }, p[0]),
            2 => (p[0], if p[1] >= p[0] { 1 } else { -1 }, p[1]),
            3 => (p[0], p[1], p[2]),
            _ => return string(String::new()),
        };
        let mut out = Vec::new();
        if step == 0 || (step > 0 && start > end) || (step < 0 && start < end) {
            return string(String::new());
        }
        let mut n = start;
        while (step > 0 && n <= end) || (step < 0 && n >= end) {
            out.push(n.to_string());
            n += step;
        }
        string(out.join(" "))
    }));
}

/// Go's `strings.SplitN` (`n` < 0: all).
pub(crate) fn go_split<'s>(s: &'s str, sep: &str, n: i64) -> Vec<&'s str> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let mut parts: Vec<&str> = Vec::new();
        let mut idx = s.char_indices().peekable();
        while let Some((start, _)) = idx.next() {
            if n > 0 && parts.len() as i64 == n - 1 {
                parts.push(&s[start..]);
                return parts;
            }
            let end = idx.peek().map_or(s.len(), |(e, _)| *e);
            parts.push(&s[start..end]);
        }
        return parts;
    }
    if n < 0 {
        return s.split(sep).collect();
    }
    s.splitn(n as usize, sep).collect()
}
