//! Go's visible string forms that Kubernetes and Crossplane users read in messages: `%q`
//! quoting ([`go_quote`]) and `time.ParseDuration` ([`duration`]). One implementation each,
//! shared by the API server, the runtime and the functions, so every message agrees.

pub mod duration;

/// Quotes `s` the way Go's `%q` does for the strings that show up in
/// Kubernetes error messages (bad values, rule sources), so our messages
/// match kube-apiserver's byte for byte in the common cases.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
