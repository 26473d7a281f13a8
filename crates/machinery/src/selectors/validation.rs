//! Label key/value validation and the Kubernetes-style wording of validation errors.
//!
//! The wording mirrors apimachinery's validation messages so that clients (and humans
//! used to `kubectl`) see familiar text when a selector is rejected.

use std::collections::HashSet;

const NAME_MAX_LEN: usize = 63;
const VALUE_MAX_LEN: usize = 63;

const QUALIFIED_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character";
const QUALIFIED_NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const SUBDOMAIN_REGEX: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric \
     characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const VALUE_REGEX: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

/// Renders "rule (e.g. 'x', or 'y', regex used for validation is '...')" as Kubernetes does.
fn regex_hint(rule: &str, regex: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{rule} (e.g. {}regex used for validation is '{regex}')",
        examples.join("or ")
    )
}

fn max_len_problem(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// True for a non-empty run of `[A-Za-z0-9_.-]` that starts and ends alphanumeric.
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Every reason `key` is not a valid label key (a qualified name, as annotation keys are too);
/// empty when it is valid.
pub fn label_key_problems(key: &str) -> Vec<String> {
    let name_hint = || {
        regex_hint(
            QUALIFIED_NAME_RULE,
            QUALIFIED_NAME_REGEX,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let mut problems = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > crate::names::SUBDOMAIN_MAX_LEN {
                    problems.push(format!("prefix part {}", max_len_problem(crate::names::SUBDOMAIN_MAX_LEN)));
                }
                if !crate::names::has_subdomain_format(prefix) {
                    problems.push(format!(
                        "prefix part {}",
                        regex_hint(crate::names::SUBDOMAIN_RULE, SUBDOMAIN_REGEX, &["example.com"])
                    ));
                }
            }
            *name
        }
        _ => {
            problems.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_hint()
            ));
            return problems;
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_string());
    } else if name.len() > NAME_MAX_LEN {
        problems.push(format!("name part {}", max_len_problem(NAME_MAX_LEN)));
    }
    if !is_qualified_name_part(name) {
        problems.push(format!("name part {}", name_hint()));
    }
    problems
}

/// Every reason `value` is not a valid label value; empty when it is valid.
pub fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > VALUE_MAX_LEN {
        problems.push(max_len_problem(VALUE_MAX_LEN));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        problems.push(regex_hint(
            VALUE_RULE,
            VALUE_REGEX,
            &["MyValue", "my_value", "12345"],
        ));
    }
    problems
}

pub(crate) use crate::golang::go_quote;

/// Renders a string list like Go's `%#v` of a `[]string`, used for "values" errors.
pub(crate) fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_string();
    }
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Formats one field error as `path: Invalid value: <value>: detail`.
pub(crate) fn invalid(path: &str, rendered_value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {rendered_value}: {detail}")
}

/// Joins several messages the way Kubernetes aggregates errors: one stays bare, many get `[a, b]`.
pub(crate) fn aggregate(messages: Vec<String>) -> Option<String> {
    // A set keeps this linear: a hostile `in (...)` list can produce one message per value.
    let mut seen = HashSet::with_capacity(messages.len());
    let mut unique: Vec<String> = Vec::with_capacity(messages.len());
    for message in messages {
        if seen.insert(message.clone()) {
            unique.push(message);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_keys() {
        for key in [
            "a",
            "A1",
            "app.kubernetes.io/name",
            "x_y-z.w",
            "example.com/a",
            &"k".repeat(63),
        ] {
            assert!(label_key_problems(key).is_empty(), "{key}");
        }
    }

    #[test]
    fn rejects_invalid_keys() {
        for key in [
            "",
            "-a",
            "a-",
            "a b",
            "a/b/c",
            "/a",
            "a/",
            "Example.com/a",
            "ex..com/a",
            "é",
            &"k".repeat(64),
        ] {
            assert!(!label_key_problems(key).is_empty(), "{key:?}");
        }
    }

    #[test]
    fn key_messages_follow_kubernetes_wording() {
        let problems = label_key_problems("a-");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("name part must consist of alphanumeric characters"));
        assert!(problems[0].contains("(e.g. 'MyName', or 'my.name', or '123-abc', regex used"));
        assert_eq!(label_key_problems("").len(), 2);
        assert_eq!(
            label_key_problems(&"k".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(label_key_problems("A.com/x")[0].starts_with("prefix part a lowercase RFC 1123"));
        assert!(label_key_problems("a/b/c")[0].starts_with("a qualified name must consist"));
        let long_prefix = format!("{}/x", "a".repeat(254));
        assert_eq!(
            label_key_problems(&long_prefix),
            vec!["prefix part must be no more than 253 characters"]
        );
    }

    #[test]
    fn validates_values() {
        for value in ["", "a", "A-b_c.d", "123", &"v".repeat(63)] {
            assert!(label_value_problems(value).is_empty(), "{value}");
        }
        for value in ["-a", "a_", ".", "a b", "ü", "a/b", &"v".repeat(64)] {
            assert!(!label_value_problems(value).is_empty(), "{value:?}");
        }
        assert_eq!(
            label_value_problems(&format!("-{}", "v".repeat(63))).len(),
            2
        );
    }

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("ü"), "\"ü\"");
        assert_eq!(go_string_slice(&[]), "[]string(nil)");
        assert_eq!(
            go_string_slice(&["a".into(), "b".into()]),
            "[]string{\"a\", \"b\"}"
        );
    }

    #[test]
    fn aggregates_messages() {
        assert_eq!(aggregate(vec![]), None);
        assert_eq!(aggregate(vec!["x".into()]), Some("x".into()));
        assert_eq!(aggregate(vec!["x".into(), "x".into()]), Some("x".into()));
        assert_eq!(
            aggregate(vec!["x".into(), "y".into()]),
            Some("[x, y]".into())
        );
    }
}
