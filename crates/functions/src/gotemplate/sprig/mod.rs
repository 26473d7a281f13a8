//! Sprig v3's template functions (`Masterminds/sprig`), as function-go-templating offers
//! them: everything but `env` and `expandenv` (which would leak the process environment).
//! `getHostByName` answers only what never leaves the machine (see `network`).
//!
//! Sprig's conversions are reproduced: arguments typed `interface {}` are converted as
//! `cast.ToInt64`/`cast.ToFloat64`/`strval` do, integer results are ints, `f` results
//! float64s. Sprig functions that panic in Go (`first` of a non-list, `div` by zero) report
//! the panic as the call's error, as Go's template engine does.
//! Families: `strings`, `lists`, `dicts`, `math`, `misc` (defaults, encodings, JSON,
//! reflection, regular expressions, hashes, UUIDs, random strings, paths, dates, semver,
//! URLs), `crypto` (passwords, keys, certificates, AES) and `network`.

mod crypto;
mod dates;
mod dicts;
mod lists;
mod math;
mod misc;
mod network;
mod strings;

use serde_json::Value;

pub use dicts::mergo;

use super::Funcs;
use crate::golang::fmt::sprintf;

/// Sprig's function map without `env` and `expandenv`.
pub fn funcs() -> Funcs {
    let mut f = Funcs::new();
    strings::add(&mut f);
    lists::add(&mut f);
    dicts::add(&mut f);
    math::add(&mut f);
    misc::add(&mut f);
    dates::add(&mut f);
    crypto::add(&mut f);
    network::add(&mut f);
    f
}

/// Sprig's `strval`: strings as they are, anything else `fmt.Sprintf("%v")`.
pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        other => sprintf("%v", std::slice::from_ref(other)),
    }
}

/// Sprig's `strslice`: a list as strings (nil elements dropped), a scalar as one string.
pub(crate) fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().filter(|i| !i.is_null()).map(strval).collect(),
        Value::Null => Vec::new(),
        other => vec![strval(other)],
    }
}

/// `cast.ToInt64`: numbers truncated, strings parsed (Go's base prefixes), bools 0/1,
/// anything else 0.
pub(crate) fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().unwrap_or_else(|| n.as_f64().map_or(0, |f| f as i64)),
        Value::String(s) => parse_int_str(s).unwrap_or(0),
        Value::Bool(b) => i64::from(*b),
        _ => 0,
    }
}

/// `strconv.ParseInt(s, 0, 64)` after `cast`'s trimming of a zero decimal part (`"5.0"`).
pub(crate) fn parse_int_str(s: &str) -> Option<i64> {
    let mut t = s.to_string();
    if let Some(dot) = t.find('.')
        && t[dot + 1..].bytes().all(|b| b == b'0')
        && dot > 0
    {
        t.truncate(dot);
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(&t)),
    };
    let body = body.replace('_', "");
    let lower = body.to_ascii_lowercase();
    let v = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()?
    } else if lower.len() > 1 && lower.starts_with('0') {
        i64::from_str_radix(&lower[1..], 8).ok()?
    } else {
        if lower.is_empty() || !lower.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        lower.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// `cast.ToFloat64`.
pub(crate) fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

/// An int result.
pub(crate) fn int(i: i64) -> Value {
    Value::from(i)
}

/// A float64 result.
pub(crate) fn float(f: f64) -> Value {
    crate::golang::value::float(f)
}

/// A string argument (the caller declared the parameter a string).
pub(crate) fn s<'v>(v: &'v Value) -> &'v str {
    v.as_str().unwrap_or_default()
}

/// An int argument (the caller declared the parameter an int).
pub(crate) fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_default()
}

/// Sprig's `empty`: nil, false, 0, "" and empty collections (mergo's emptiness too).
pub(crate) use crate::fieldpath::merge::is_empty as empty;

#[cfg(test)]
mod names {
    /// Every name in Sprig v3's function map (`GenericFuncMap`), `env` and `expandenv` aside.
    const SPRIG_V3: &str = "hello ago date date_in_zone date_modify dateInZone dateModify duration durationRound \
        htmlDate htmlDateInZone must_date_modify mustDateModify mustToDate now toDate unixEpoch abbrev abbrevboth \
        trunc trim upper lower title untitle substr repeat trimall trimAll trimSuffix trimPrefix nospace initials \
        randAlphaNum randAlpha randAscii randNumeric swapcase shuffle snakecase camelcase kebabcase wrap wrapWith \
        contains hasPrefix hasSuffix quote squote cat indent nindent replace plural sha1sum sha256sum sha512sum \
        adler32sum toString atoi int64 int float64 seq toDecimal split splitList splitn toStrings until untilStep \
        add1 add sub div mod mul randInt add1f addf subf divf mulf biggest max min maxf minf ceil floor round join \
        sortAlpha default empty coalesce all any compact mustCompact fromJson toJson toPrettyJson toRawJson \
        mustFromJson mustToJson mustToPrettyJson mustToRawJson ternary deepCopy mustDeepCopy typeOf typeIs \
        typeIsLike kindOf kindIs deepEqual getHostByName base dir clean ext isAbs osBase osClean osDir osExt \
        osIsAbs b64enc b64dec b32enc b32dec tuple list dict get set unset hasKey pluck keys pick omit merge \
        mergeOverwrite mustMerge mustMergeOverwrite values append push mustAppend mustPush prepend mustPrepend \
        first mustFirst rest mustRest last mustLast initial mustInitial reverse mustReverse uniq mustUniq without \
        mustWithout has mustHas slice mustSlice concat dig chunk mustChunk bcrypt htpasswd genPrivateKey \
        derivePassword buildCustomCert genCA genCAWithKey genSelfSignedCert genSelfSignedCertWithKey genSignedCert \
        genSignedCertWithKey encryptAES decryptAES randBytes uuidv4 semver semverCompare fail regexMatch \
        mustRegexMatch regexFindAll mustRegexFindAll regexFind mustRegexFind regexReplaceAll mustRegexReplaceAll \
        regexReplaceAllLiteral mustRegexReplaceAllLiteral regexSplit mustRegexSplit regexQuoteMeta urlParse urlJoin";

    #[test]
    fn every_sprig_v3_function_but_env_and_expandenv_is_there() {
        let funcs = super::funcs();
        let missing: Vec<&str> = SPRIG_V3.split_whitespace().filter(|name| !funcs.contains_key(*name)).collect();
        assert!(missing.is_empty(), "missing Sprig functions: {missing:?}");
        assert!(!funcs.contains_key("env") && !funcs.contains_key("expandenv"));
    }
}
