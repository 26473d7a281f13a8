//! Kubernetes' DNS-1123 name rules (apimachinery's `IsDNS1123Label` and
//! `IsDNS1123Subdomain`), the one copy the API server (object names, CRD names and versions),
//! label selectors and the composition engine (composed resources' names) check names with.

/// The longest DNS-1123 label.
pub(crate) const LABEL_MAX_LEN: usize = 63;

/// The longest DNS-1123 subdomain.
pub(crate) const SUBDOMAIN_MAX_LEN: usize = 253;

/// Kubernetes' words for what a DNS-1123 subdomain must be, as its messages give them.
pub const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Whether `s` is a DNS-1123 label: at most 63 lower-case letters, digits or `-`, starting and
/// ending with a letter or digit (a namespace's name, a CRD's plural and versions).
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= LABEL_MAX_LEN && is_label_format(s)
}

/// Whether `s` is a DNS-1123 subdomain: at most 253 characters of dot-separated labels (what
/// most kinds' names must be). As in Kubernetes, a label of a subdomain is not limited to 63
/// characters; only the whole is.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= SUBDOMAIN_MAX_LEN && has_subdomain_format(s)
}

/// Whether `s` has a DNS-1123 subdomain's form, whatever its length (for callers that report
/// a too long name apart from a badly formed one, as Kubernetes' messages do).
pub(crate) fn has_subdomain_format(s: &str) -> bool {
    s.split('.').all(is_label_format)
}

/// A non-empty run of `[a-z0-9-]` starting and ending with a letter or digit.
fn is_label_format(s: &str) -> bool {
    let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => lower_alnum(first) && lower_alnum(last) && bytes.iter().all(|b| lower_alnum(b) || *b == b'-'),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn labels() {
        for good in ["a", "0", "my-name", "123-abc", &"x".repeat(63)] {
            assert!(is_dns1123_label(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"x".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn subdomains() {
        for good in ["a", "my-app.v1", "example.com", &"x".repeat(253)] {
            assert!(is_dns1123_subdomain(good), "{good}");
        }
        // Kubernetes limits the whole name, not each label: a 64-character label is a valid
        // object name.
        assert!(is_dns1123_subdomain(&format!("{}.example", "x".repeat(64))));
        for bad in ["", ".", "a..b", ".a", "a.", "-a", "a-.b", "Upper", "under_score", &"x".repeat(254)] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        assert!(has_subdomain_format(&"x".repeat(254)));
    }

    proptest! {
        /// The regular expressions Kubernetes documents in its messages, as a reference.
        #[test]
        fn agree_with_kubernetes_regexes(s in "[a-z0-9.A_-]{0,70}") {
            let label = regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap();
            let subdomain = regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").unwrap();
            prop_assert_eq!(is_dns1123_label(&s), s.len() <= 63 && label.is_match(&s));
            prop_assert_eq!(is_dns1123_subdomain(&s), subdomain.is_match(&s));
        }
    }
}
