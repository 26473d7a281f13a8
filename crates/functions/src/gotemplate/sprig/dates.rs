//! Sprig's date functions with Go's reference-time layouts (`2006-01-02 15:04:05`).
//!
//! A time travels through a template as Go's `time.Time.String()` text
//! (`2024-05-01 10:00:00.5 +0000 UTC`); functions taking a date also accept RFC 3339 text and
//! Unix seconds, as Sprig accepts `int64` dates.

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use serde_json::Value;

use super::{s, to_i64};
use crate::gotemplate::{Func, Funcs, P};

const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Go's `time.Time.String()` of a time.
pub(crate) fn go_time_string(z: &Zoned) -> String {
    go_format(z, "2006-01-02 15:04:05.999999999 -0700 MST")
}

fn zone_abbrev(z: &Zoned) -> String {
    let info = z.time_zone().to_offset_info(z.timestamp());
    info.abbreviation().to_string()
}

/// Formats `z` with a Go layout.
pub(crate) fn go_format(z: &Zoned, layout: &str) -> String {
    let mut out = String::new();
    let mut rest = layout;
    let hour12 = |h: i8| if h % 12 == 0 { 12 } else { h % 12 };
    let offset = z.offset().seconds();
    let off = |colon: bool, z_form: bool, secs: bool| -> String {
        if z_form && offset == 0 {
            return "Z".into();
        }
        let sign = if offset < 0 { '-' } else { '+' };
        let a = offset.abs();
        let (h, m, s) = (a / 3600, (a / 60) % 60, a % 60);
        let mut r = if colon { format!("{sign}{h:02}:{m:02}") } else { format!("{sign}{h:02}{m:02}") };
        if secs {
            r.push_str(&if colon { format!(":{s:02}") } else { format!("{s:02}") });
        }
        r
    };
    while !rest.is_empty() {
        let tokens: [(&str, &dyn Fn() -> String); 34] = [
            ("January", &|| MONTHS[(z.month() - 1) as usize].into()),
            ("Jan", &|| MONTHS[(z.month() - 1) as usize][..3].into()),
            ("Monday", &|| DAYS[z.weekday().to_monday_zero_offset() as usize].into()),
            ("Mon", &|| DAYS[z.weekday().to_monday_zero_offset() as usize][..3].into()),
            ("MST", &|| zone_abbrev(z)),
            ("2006", &|| format!("{:04}", z.year())),
            ("-07:00:00", &|| off(true, false, true)),
            ("-070000", &|| off(false, false, true)),
            ("-07:00", &|| off(true, false, false)),
            ("-0700", &|| off(false, false, false)),
            ("-07", &|| off(false, false, false)[..3].to_string()),
            ("Z07:00:00", &|| off(true, true, true)),
            ("Z070000", &|| off(false, true, true)),
            ("Z07:00", &|| off(true, true, false)),
            ("Z0700", &|| off(false, true, false)),
            ("Z07", &|| {
                let o = off(false, true, false);
                if o == "Z" { o } else { o[..3].to_string() }
            }),
            ("002", &|| format!("{:03}", z.day_of_year())),
            ("01", &|| format!("{:02}", z.month())),
            ("02", &|| format!("{:02}", z.day())),
            ("_2", &|| format!("{:>2}", z.day())),
            ("06", &|| format!("{:02}", z.year() % 100)),
            ("15", &|| format!("{:02}", z.hour())),
            ("03", &|| format!("{:02}", hour12(z.hour()))),
            ("04", &|| format!("{:02}", z.minute())),
            ("05", &|| format!("{:02}", z.second())),
            ("PM", &|| if z.hour() >= 12 { "PM" } else { "AM" }.into()),
            ("pm", &|| if z.hour() >= 12 { "pm" } else { "am" }.into()),
            ("1", &|| z.month().to_string()),
            ("2", &|| z.day().to_string()),
            ("3", &|| hour12(z.hour()).to_string()),
            ("4", &|| z.minute().to_string()),
            ("5", &|| z.second().to_string()),
            ("", &String::new),
            ("", &String::new),
        ];
        // Fractional seconds: `.000` (fixed) or `.999` (trailing zeros dropped).
        if (rest.starts_with(".0") || rest.starts_with(".9") || rest.starts_with(",0") || rest.starts_with(",9"))
            && let Some(digit) = rest[1..].chars().next()
        {
            let n = rest[1..].chars().take_while(|c| *c == digit).count();
            let after = rest[1 + n..].chars().next();
            if !after.is_some_and(|c| c.is_ascii_digit()) {
                let nanos = format!("{:09}", z.subsec_nanosecond());
                let mut frac = nanos[..n.min(9)].to_string();
                if digit == '9' {
                    frac = frac.trim_end_matches('0').to_string();
                    if !frac.is_empty() {
                        out.push(rest.as_bytes()[0] as char);
                        out.push_str(&frac);
                    }
                } else {
                    out.push(rest.as_bytes()[0] as char);
                    out.push_str(&frac);
                }
                rest = &rest[1 + n..];
                continue;
            }
        }
        let mut matched = false;
        for (tok, render) in tokens.iter() {
            if !tok.is_empty() && rest.starts_with(tok) {
                // `Jan`/`Mon` only when not followed by a lower-case letter (`January`
                // is tried first; `Janet` is text).
                out.push_str(&render());
                rest = &rest[tok.len()..];
                matched = true;
                break;
            }
        }
        if !matched {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// A date argument: Go's time text, RFC 3339, or Unix seconds.
pub(crate) fn to_time(v: &Value) -> Option<Zoned> {
    match v {
        Value::Number(_) => Timestamp::from_second(to_i64(v)).ok().map(|t| t.to_zoned(TimeZone::UTC)),
        Value::String(text) => {
            if let Ok(ts) = text.parse::<Timestamp>() {
                return Some(ts.to_zoned(TimeZone::UTC));
            }
            // `2006-01-02 15:04:05.999999999 -0700 MST`: drop the zone name.
            let parts: Vec<&str> = text.split(' ').collect();
            if parts.len() >= 3 {
                let joined = format!("{}T{}{}", parts[0], parts[1], parts[2]);
                let fixed = if joined.len() > 5 {
                    let (head, tail) = joined.split_at(joined.len() - 2);
                    format!("{head}:{tail}")
                } else {
                    joined
                };
                return fixed.parse::<Timestamp>().ok().map(|t| t.to_zoned(TimeZone::UTC));
            }
            None
        }
        _ => None,
    }
}

fn zone(name: &str) -> TimeZone {
    if name.is_empty() || name == "UTC" {
        return TimeZone::UTC;
    }
    TimeZone::get(name).unwrap_or(TimeZone::UTC)
}

fn format_in(layout: &str, date: &Value, tz: &str) -> String {
    let z = to_time(date).unwrap_or_else(|| Zoned::now().with_time_zone(TimeZone::UTC));
    go_format(&z.with_time_zone(zone(tz)), layout)
}

/// Go's `time.Duration.String()`.
pub(crate) fn duration_string(nanos: i128) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        let (unit, div) = if u < 1_000 {
            ("ns", 1u128)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&trim_frac(u, div));
        out.push_str(unit);
    } else {
        let secs = u / 1_000_000_000;
        let (h, m) = (secs / 3600, (secs / 60) % 60);
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&trim_frac(u % 60_000_000_000, 1_000_000_000));
        out.push('s');
    }
    if neg { format!("-{out}") } else { out }
}

fn trim_frac(v: u128, div: u128) -> String {
    let whole = v / div;
    let frac = v % div;
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let f = format!("{frac:0width$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// Go's layout as a `strptime` format, for `toDate`.
fn layout_to_strptime(layout: &str) -> String {
    let pairs = [
        ("January", "%B"),
        ("Jan", "%b"),
        ("Monday", "%A"),
        ("Mon", "%a"),
        ("MST", "%Z"),
        ("2006", "%Y"),
        ("Z07:00", "%:z"),
        ("-07:00", "%:z"),
        ("-0700", "%z"),
        ("01", "%m"),
        ("02", "%d"),
        ("15", "%H"),
        ("03", "%I"),
        ("04", "%M"),
        ("05", "%S"),
        ("PM", "%p"),
        (".000000000", "%.9f"),
        (".000000", "%.6f"),
        (".000", "%.3f"),
        (".999999999", "%.f"),
        ("06", "%y"),
        ("1", "%-m"),
        ("2", "%-d"),
        ("3", "%-I"),
    ];
    let mut out = String::new();
    let mut rest = layout;
    'outer: while !rest.is_empty() {
        for (go, st) in pairs {
            if rest.starts_with(go) {
                out.push_str(st);
                rest = &rest[go.len()..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '%' {
            out.push_str("%%");
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn to_date(layout: &str, text: &str) -> Result<Zoned, String> {
    let format = layout_to_strptime(layout);
    let tm = jiff::fmt::strtime::parse(&format, text)
        .map_err(|_| format!("parsing time {text:?} as {layout:?}: cannot parse {text:?} as {layout:?}"))?;
    if let Ok(z) = tm.to_zoned() {
        return Ok(z);
    }
    let dt = tm.to_datetime().map_err(|e| e.to_string())?;
    dt.to_zoned(TimeZone::UTC).map_err(|e| e.to_string())
}

/// A Go duration string (`1h30m`) in nanoseconds.
fn parse_duration(text: &str) -> Result<i128, String> {
    crate::golang::duration::parse_nanos(text).map(i128::from).map_err(|e| e.to_string())
}

fn string(s: String) -> Result<Value, String> {
    Ok(Value::String(s))
}

pub(super) fn add(f: &mut Funcs) {
    use P::{Any, Str};
    f.insert("now", Func::pure(&[], |_| string(go_time_string(&Zoned::now().with_time_zone(TimeZone::UTC)))));
    f.insert("date", Func::pure(&[Str, Any], |a| string(format_in(s(a[0]), a[1], "UTC"))));
    for name in ["dateInZone", "date_in_zone"] {
        f.insert(name, Func::pure(&[Str, Any, Str], |a| string(format_in(s(a[0]), a[1], s(a[2])))));
    }
    f.insert("htmlDate", Func::pure(&[Any], |a| string(format_in("2006-01-02", a[0], "UTC"))));
    f.insert("htmlDateInZone", Func::pure(&[Any, Str], |a| string(format_in("2006-01-02", a[0], s(a[1])))));
    f.insert("unixEpoch", Func::pure(&[Any], |a| {
        string(to_time(a[0]).map_or(0, |z| z.timestamp().as_second()).to_string())
    }));
    f.insert("duration", Func::pure(&[Any], |a| string(duration_string(i128::from(to_i64(a[0])) * 1_000_000_000))));
    f.insert("durationRound", Func::pure(&[Any], |a| {
        let nanos: i128 = match a[0] {
            Value::String(t) => parse_duration(t).unwrap_or(0),
            other => i128::from(to_i64(other)),
        };
        let u = nanos.unsigned_abs();
        let sec = 1_000_000_000u128;
        let units = [
            (sec * 60 * 60 * 24 * 365, "y"),
            (sec * 60 * 60 * 24 * 30, "mo"),
            (sec * 60 * 60 * 24, "d"),
            (sec * 60 * 60, "h"),
            (sec * 60, "m"),
            (sec, "s"),
        ];
        for (size, unit) in units {
            if u > size {
                return string(format!("{}{unit}", u / size));
            }
        }
        string("0s".into())
    }));
    f.insert("ago", Func::pure(&[Any], |a| {
        let then = to_time(a[0]).map_or(0, |z| z.timestamp().as_second());
        let secs = Timestamp::now().as_second() - then;
        string(duration_string(i128::from(secs) * 1_000_000_000))
    }));
    for name in ["toDate", "mustToDate"] {
        f.insert(name, Func::pure(&[Str, Str], |a| to_date(s(a[0]), s(a[1])).map(|z| Value::String(go_time_string(&z)))));
    }
    for name in ["dateModify", "date_modify", "mustDateModify", "must_date_modify"] {
        f.insert(name, Func::pure(&[Str, Any], |a| {
            let z = to_time(a[1]).ok_or("invalid date")?;
            let d = parse_duration(s(a[0]))?;
            let span = jiff::SignedDuration::from_nanos(d as i64);
            let t = z.timestamp().checked_add(span).map_err(|e| e.to_string())?;
            string(go_time_string(&t.to_zoned(z.time_zone().clone())))
        }));
    }
}
