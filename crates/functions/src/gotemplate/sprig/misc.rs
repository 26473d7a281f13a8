//! Sprig's defaults, encodings, JSON, reflection, regular expressions, hashes, UUIDs,
//! paths, dates, semantic versions and URLs.
//!
//! Times are held as strings in Go's `time.Time.String()` form (`2006-01-02 15:04:05.999999999
//! +0000 UTC`), which is also how a template prints `now`. Passwords, keys, certificates
//! and AES are in `crypto`.

use base64::Engine;
use serde_json::{Map, Value};
use sha2::Digest;

use super::{empty, i, s};
use crate::golang::json::marshal;
use crate::gotemplate::{Func, Funcs, P};

fn string(s: String) -> Result<Value, String> {
    Ok(Value::String(s))
}

/// Go's `encoding/json` indented output (`json.MarshalIndent(v, "", "  ")`).
pub(crate) fn pretty_json(v: &Value, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent + 1);
    let close = "  ".repeat(indent);
    match v {
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (n, item) in items.iter().enumerate() {
                out.push_str(&pad);
                pretty_json(item, indent + 1, out);
                if n + 1 < items.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&close);
            out.push(']');
        }
        Value::Object(m) if !m.is_empty() => {
            out.push_str("{\n");
            for (n, (k, item)) in m.iter().enumerate() {
                out.push_str(&pad);
                out.push_str(&marshal(&Value::String(k.clone())));
                out.push_str(": ");
                pretty_json(item, indent + 1, out);
                if n + 1 < m.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&close);
            out.push('}');
        }
        other => out.push_str(&marshal(other)),
    }
}

/// JSON without Go's HTML escaping (`SetEscapeHTML(false)`).
fn raw_json(v: &Value) -> String {
    marshal(v).replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&")
}

/// JSON text into a template value: numbers are float64, as `encoding/json` decodes them.
pub(crate) fn from_json(text: &str) -> Result<Value, String> {
    serde_json::from_str::<Value>(text).map(crate::golang::value::as_float64).map_err(|e| e.to_string())
}

fn go_type(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        other => crate::gotemplate::go_type_name(other),
    }
}

fn regex(re: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(re).map_err(|e| format!("error parsing regexp: {}", e.to_string().lines().last().unwrap_or_default().trim()))
}

fn find_all(re: &str, text: &str, n: i64) -> Result<Value, String> {
    let r = regex(re)?;
    let limit = if n < 0 { usize::MAX } else { n as usize };
    Ok(Value::Array(r.find_iter(text).take(limit).map(|m| Value::String(m.as_str().into())).collect()))
}

fn regex_split(re: &str, text: &str, n: i64) -> Result<Value, String> {
    let r = regex(re)?;
    if n == 0 {
        return Ok(Value::Null);
    }
    let parts: Vec<Value> = if n < 0 {
        r.split(text).map(|p| Value::String(p.into())).collect()
    } else {
        r.splitn(text, n as usize).map(|p| Value::String(p.into())).collect()
    };
    Ok(Value::Array(parts))
}

fn base32_encode(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = u64::from_be_bytes([0, 0, 0, buf[0], buf[1], buf[2], buf[3], buf[4]]);
        let chars = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for k in 0..8 {
            if k < chars {
                out.push(char::from(ALPHABET[((bits >> (35 - 5 * k)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base32_decode(text: &str) -> Result<Vec<u8>, String> {
    const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let trimmed = text.trim_end_matches('=');
    if text.len() % 8 != 0 {
        return Err(format!("illegal base32 data at input byte {}", text.len() / 8 * 8));
    }
    let mut bits: u64 = 0;
    let mut n = 0;
    let mut out = Vec::new();
    for (pos, c) in trimmed.chars().enumerate() {
        let Some(v) = ALPHABET.find(c) else {
            return Err(format!("illegal base32 data at input byte {pos}"));
        };
        bits = (bits << 5) | v as u64;
        n += 5;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    Ok(out)
}

fn uuid_v4() -> String {
    use rand::RngCore;
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// Go's `path.Clean`.
pub(crate) fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

fn dir(p: &str) -> String {
    let d = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    clean(d)
}

fn ext(p: &str) -> String {
    for (i, c) in p.char_indices().rev() {
        if c == '/' {
            break;
        }
        if c == '.' {
            return p[i..].to_string();
        }
    }
    String::new()
}

pub(super) fn add(f: &mut Funcs) {
    use P::{Any, Bool, Int, Map as M, Str};
    f.insert("default", Func::pure_variadic(&[Any], Any, |a| {
        if a.len() < 2 || empty(a[1]) {
            return Ok(a[0].clone());
        }
        Ok(a[1].clone())
    }));
    f.insert("hello", Func::pure(&[], |_| string("Hello!".into())));
    f.insert("empty", Func::pure(&[Any], |a| Ok(Value::Bool(empty(a[0])))));
    f.insert("coalesce", Func::pure_variadic(&[], Any, |a| Ok(a.iter().find(|v| !empty(v)).map_or(Value::Null, |v| (*v).clone()))));
    f.insert("all", Func::pure_variadic(&[], Any, |a| Ok(Value::Bool(a.iter().all(|v| !empty(v))))));
    f.insert("any", Func::pure_variadic(&[], Any, |a| Ok(Value::Bool(a.iter().any(|v| !empty(v))))));
    f.insert("ternary", Func::pure(&[Any, Any, Bool], |a| Ok(if a[2].as_bool() == Some(true) { a[0].clone() } else { a[1].clone() })));
    f.insert("fromJson", Func::pure(&[Str], |a| Ok(from_json(s(a[0])).unwrap_or(Value::Null))));
    f.insert("mustFromJson", Func::pure(&[Str], |a| from_json(s(a[0]))));
    for name in ["toJson", "mustToJson"] {
        f.insert(name, Func::pure(&[Any], |a| string(marshal(a[0]))));
    }
    for name in ["toPrettyJson", "mustToPrettyJson"] {
        f.insert(name, Func::pure(&[Any], |a| {
            let mut out = String::new();
            pretty_json(a[0], 0, &mut out);
            string(out)
        }));
    }
    for name in ["toRawJson", "mustToRawJson"] {
        f.insert(name, Func::pure(&[Any], |a| string(raw_json(a[0]))));
    }
    f.insert("typeOf", Func::pure(&[Any], |a| string(go_type(a[0]))));
    f.insert("typeIs", Func::pure(&[Str, Any], |a| Ok(Value::Bool(s(a[0]) == go_type(a[1])))));
    f.insert("typeIsLike", Func::pure(&[Str, Any], |a| {
        let t = go_type(a[1]);
        Ok(Value::Bool(s(a[0]) == t || s(a[0]) == format!("*{t}")))
    }));
    f.insert("kindOf", Func::pure(&[Any], |a| string(super::lists::kind_name(a[0]).into())));
    f.insert("kindIs", Func::pure(&[Str, Any], |a| Ok(Value::Bool(s(a[0]) == super::lists::kind_name(a[1])))));
    f.insert("deepEqual", Func::pure(&[Any, Any], |a| Ok(Value::Bool(a[0] == a[1]))));
    for (name, os_name) in [("base", "osBase"), ("dir", "osDir"), ("clean", "osClean"), ("ext", "osExt")] {
        let call: fn(&[&Value]) -> Result<Value, String> = match name {
            "base" => |a| string(base(s(a[0]))),
            "dir" => |a| string(dir(s(a[0]))),
            "clean" => |a| string(clean(s(a[0]))),
            _ => |a| string(ext(s(a[0]))),
        };
        f.insert(name, Func::pure(&[Str], call));
        f.insert(os_name, Func::pure(&[Str], call));
    }
    f.insert("isAbs", Func::pure(&[Str], |a| Ok(Value::Bool(s(a[0]).starts_with('/')))));
    f.insert("osIsAbs", Func::pure(&[Str], |a| Ok(Value::Bool(s(a[0]).starts_with('/')))));
    f.insert("b64enc", Func::pure(&[Str], |a| string(base64::engine::general_purpose::STANDARD.encode(s(a[0])))));
    f.insert("b64dec", Func::pure(&[Str], |a| {
        Ok(Value::String(match base64::engine::general_purpose::STANDARD.decode(s(a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => base64_error(&e),
        }))
    }));
    f.insert("b32enc", Func::pure(&[Str], |a| string(base32_encode(s(a[0]).as_bytes()))));
    f.insert("b32dec", Func::pure(&[Str], |a| {
        Ok(Value::String(match base32_decode(s(a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => e,
        }))
    }));
    f.insert("sha1sum", Func::pure(&[Str], |a| string(hex::encode(sha1::Sha1::digest(s(a[0]).as_bytes())))));
    f.insert("sha256sum", Func::pure(&[Str], |a| string(hex::encode(sha2::Sha256::digest(s(a[0]).as_bytes())))));
    f.insert("sha512sum", Func::pure(&[Str], |a| string(hex::encode(sha2::Sha512::digest(s(a[0]).as_bytes())))));
    f.insert("adler32sum", Func::pure(&[Str], |a| string(adler2::adler32_slice(s(a[0]).as_bytes()).to_string())));
    f.insert("uuidv4", Func::pure(&[], |_| string(uuid_v4())));
    f.insert("randBytes", Func::pure(&[Int], |a| {
        use rand::RngCore;
        let mut b = vec![0u8; i(a[0]).max(0) as usize];
        rand::rng().fill_bytes(&mut b);
        string(base64::engine::general_purpose::STANDARD.encode(b))
    }));
    f.insert("fail", Func::pure(&[Str], |a| Err(s(a[0]).to_string())));
    f.insert("regexMatch", Func::pure(&[Str, Str], |a| Ok(Value::Bool(regex(s(a[0])).is_ok_and(|r| r.is_match(s(a[1])))))));
    f.insert("mustRegexMatch", Func::pure(&[Str, Str], |a| Ok(Value::Bool(regex(s(a[0]))?.is_match(s(a[1]))))));
    for name in ["regexFindAll", "mustRegexFindAll"] {
        f.insert(name, Func::pure(&[Str, Str, Int], |a| find_all(s(a[0]), s(a[1]), i(a[2]))));
    }
    for name in ["regexFind", "mustRegexFind"] {
        f.insert(name, Func::pure(&[Str, Str], |a| {
            string(regex(s(a[0]))?.find(s(a[1])).map(|m| m.as_str().to_string()).unwrap_or_default())
        }));
    }
    for name in ["regexReplaceAll", "mustRegexReplaceAll"] {
        f.insert(name, Func::pure(&[Str, Str, Str], |a| string(regex(s(a[0]))?.replace_all(s(a[1]), s(a[2])).into_owned())));
    }
    for name in ["regexReplaceAllLiteral", "mustRegexReplaceAllLiteral"] {
        f.insert(name, Func::pure(&[Str, Str, Str], |a| {
            string(regex(s(a[0]))?.replace_all(s(a[1]), regex::NoExpand(s(a[2]))).into_owned())
        }));
    }
    for name in ["regexSplit", "mustRegexSplit"] {
        f.insert(name, Func::pure(&[Str, Str, Int], |a| regex_split(s(a[0]), s(a[1]), i(a[2]))));
    }
    f.insert("regexQuoteMeta", Func::pure(&[Str], |a| string(regex::escape(s(a[0])))));
    f.insert("semver", Func::pure(&[Str], |a| super_semver::parse(s(a[0])).map(|v| v.to_value())));
    f.insert("semverCompare", Func::pure(&[Str, Str], |a| super_semver::compare(s(a[0]), s(a[1])).map(Value::Bool)));
    f.insert("urlParse", Func::pure(&[Str], |a| Ok(url_parse(s(a[0])))));
    f.insert("urlJoin", Func::pure(&[M], |a| string(url_join(a[0]))));
}

pub(crate) fn base64_error(e: &base64::DecodeError) -> String {
    match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            format!("illegal base64 data at input byte {at}")
        }
        base64::DecodeError::InvalidLength(len) => format!("illegal base64 data at input byte {}", len / 4 * 4),
        base64::DecodeError::InvalidPadding => "illegal base64 data at input byte 0".into(),
    }
}

fn url_parse(text: &str) -> Value {
    let mut m = Map::new();
    let (rest, fragment) = text.split_once('#').unwrap_or((text, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, rest) = match rest.split_once("://") {
        Some((s, r)) if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) => (s, r),
        _ => ("", rest),
    };
    let (authority, path) = if scheme.is_empty() {
        ("", rest)
    } else {
        match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        }
    };
    let (userinfo, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    let hostname = match host.strip_prefix('[') {
        Some(h) => h.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    m.insert("scheme".into(), Value::String(scheme.to_lowercase()));
    m.insert("host".into(), Value::String(host.into()));
    m.insert("hostname".into(), Value::String(hostname.into()));
    m.insert("path".into(), Value::String(path.into()));
    m.insert("query".into(), Value::String(query.into()));
    m.insert("opaque".into(), Value::String(String::new()));
    m.insert("fragment".into(), Value::String(fragment.into()));
    m.insert("userinfo".into(), Value::String(userinfo.into()));
    Value::Object(m)
}

fn url_join(v: &Value) -> String {
    let get = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let mut out = String::new();
    let scheme = get("scheme");
    if !scheme.is_empty() {
        out.push_str(&scheme);
        out.push(':');
    }
    let host = get("host");
    if !host.is_empty() || !scheme.is_empty() {
        out.push_str("//");
        let user = get("userinfo");
        if !user.is_empty() {
            out.push_str(&user);
            out.push('@');
        }
        out.push_str(&host);
    }
    out.push_str(&get("path"));
    let q = get("query");
    if !q.is_empty() {
        out.push('?');
        out.push_str(&q);
    }
    let frag = get("fragment");
    if !frag.is_empty() {
        out.push('#');
        out.push_str(&frag);
    }
    out
}

/// Masterminds' semantic versions, as far as templates compare them.
mod super_semver {
    use serde_json::{Value, json};

    /// A parsed version.
    pub(crate) struct Version {
        major: u64,
        minor: u64,
        patch: u64,
        pre: String,
        meta: String,
        original: String,
    }

    impl Version {
        pub(crate) fn to_value(&self) -> Value {
            json!({"Major": self.major, "Minor": self.minor, "Patch": self.patch,
                   "Prerelease": self.pre, "Metadata": self.meta, "Original": self.original})
        }

        fn key(&self) -> (u64, u64, u64) {
            (self.major, self.minor, self.patch)
        }
    }

    pub(crate) fn parse(text: &str) -> Result<Version, String> {
        let t = text.trim().strip_prefix('v').unwrap_or(text.trim());
        let (t, meta) = t.split_once('+').unwrap_or((t, ""));
        let (core, pre) = t.split_once('-').unwrap_or((t, ""));
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
            return Err("Invalid Semantic Version".into());
        }
        let n = |i: usize| parts.get(i).map_or(Ok(0), |p| p.parse::<u64>().map_err(|_| "Invalid Semantic Version".to_string()));
        Ok(Version { major: n(0)?, minor: n(1)?, patch: n(2)?, pre: pre.into(), meta: meta.into(), original: text.into() })
    }

    fn cmp(a: &Version, b: &Version) -> std::cmp::Ordering {
        a.key().cmp(&b.key()).then_with(|| match (a.pre.is_empty(), b.pre.is_empty()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            (false, false) => a.pre.cmp(&b.pre),
        })
    }

    fn check(op: &str, target: &str, v: &Version) -> Result<bool, String> {
        use std::cmp::Ordering::*;
        let wildcard = target.split('.').any(|p| matches!(p, "x" | "X" | "*")) || target.split('.').count() < 3;
        let parts = target.split('.').filter(|p| !matches!(*p, "x" | "X" | "*")).count();
        let clean: Vec<&str> = target.split('.').filter(|p| !matches!(*p, "x" | "X" | "*")).collect();
        let t = if clean.is_empty() { parse("0")? } else { parse(&clean.join("."))? };
        let in_prefix = |v: &Version| match parts {
            0 => true,
            1 => v.major == t.major,
            2 => v.major == t.major && v.minor == t.minor,
            _ => v.key() == t.key(),
        };
        Ok(match op {
            "" | "=" if wildcard => in_prefix(v),
            "" | "=" => cmp(v, &t) == Equal,
            "!=" if wildcard => !in_prefix(v),
            "!=" => cmp(v, &t) != Equal,
            ">" if wildcard => match parts {
                0 => false,
                1 => v.major > t.major,
                _ => (v.major, v.minor) > (t.major, t.minor),
            },
            ">" => cmp(v, &t) == Greater,
            ">=" | "=>" => cmp(v, &t) != Less,
            "<" => cmp(v, &t) == Less,
            "<=" | "=<" if wildcard => cmp(v, &t) != Greater || in_prefix(v),
            "<=" | "=<" => cmp(v, &t) != Greater,
            "~" | "~>" => {
                cmp(v, &t) != Less && v.major == t.major && (parts < 2 || v.minor == t.minor)
            }
            "^" => {
                cmp(v, &t) != Less
                    && if t.major > 0 || parts < 2 {
                        v.major == t.major
                    } else if t.minor > 0 || parts < 3 {
                        v.major == 0 && v.minor == t.minor
                    } else {
                        v.key() == t.key()
                    }
            }
            _ => return Err(format!("improper constraint: {op}{target}")),
        })
    }

    pub(crate) fn compare(constraint: &str, version: &str) -> Result<bool, String> {
        let v = parse(version)?;
        for alt in constraint.split("||") {
            let mut ok = true;
            let mut any = false;
            let normalized = alt.replace(',', " ");
            let tokens: Vec<&str> = normalized.split_whitespace().collect();
            let mut k = 0;
            while k < tokens.len() {
                let mut tok = tokens[k].to_string();
                // `>= 1.2`: an operator alone, its version next.
                if tok.chars().all(|c| "<>=!~^".contains(c)) && k + 1 < tokens.len() {
                    tok.push_str(tokens[k + 1]);
                    k += 1;
                }
                // `1.2 - 1.4`: a hyphen range.
                if k + 2 < tokens.len() && tokens[k + 1] == "-" {
                    let lo = check(">=", &tok, &v)?;
                    let hi = check("<=", tokens[k + 2], &v)?;
                    ok &= lo && hi;
                    any = true;
                    k += 3;
                    continue;
                }
                let split = tok.find(|c: char| c.is_ascii_alphanumeric() || c == '*').unwrap_or(tok.len());
                let (op, target) = tok.split_at(split);
                let target = target.strip_prefix('v').unwrap_or(target);
                if target.is_empty() {
                    return Err(format!("improper constraint: {tok}"));
                }
                ok &= check(op, target, &v)?;
                any = true;
                k += 1;
            }
            if any && ok {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
