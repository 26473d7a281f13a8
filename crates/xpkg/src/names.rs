//! Names Crossplane derives from packages: revision names (`FriendlyID`) and the DNS labels
//! they are made of (`ToDNSLabel`), written from their published behaviour.

/// A DNS label from any text, as Crossplane's `ToDNSLabel`: only `[a-z0-9]` kept, `.`, `/`,
/// `:` and `-` turned into `-` (never first, last, or at index 62), at most 63 characters, no
/// leading or trailing `-`. Upper-case letters are dropped, not lowered.
pub fn to_dns_label(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() >= 63 {
            break;
        }
        match c {
            'a'..='z' | '0'..='9' => out.push(c),
            '.' | '/' | ':' | '-' if !out.is_empty() && out.len() != 62 => out.push('-'),
            _ => {}
        }
    }
    out.trim_matches('-').to_string()
}

/// The name of a package's revision for an image digest, as Crossplane's released versions
/// name it: `ToDNSLabel(<first 50 characters of the package name>-<first 12 hex of the
/// digest>)`.
pub fn revision_name(package: &str, digest: &str) -> String {
    let hex = digest.split_once(':').map_or(digest, |(_, hex)| hex);
    let name: String = package.chars().take(50).collect();
    let id: String = hex.chars().take(12).collect();
    to_dns_label(&format!("{name}-{id}"))
}

/// The repository a reference names, without its tag or digest (a dependency's `source`).
pub fn source(reference: &str) -> &str {
    let without_digest = reference.split_once('@').map_or(reference, |(repo, _)| repo);
    // A `:` after the last `/` starts the tag; one before it is a registry port.
    match (without_digest.rfind('/'), without_digest.rfind(':')) {
        (Some(slash), Some(colon)) if colon > slash => &without_digest[..colon],
        _ => without_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_names_follow_crossplane() {
        assert_eq!(revision_name("provider-nop", "sha256:1a2b3c4d5e6f7a8b9c"), "provider-nop-1a2b3c4d5e6f");
        assert_eq!(revision_name("Platform.Ref", "sha256:0123456789abcdef"), "latform-ef-0123456789ab");
        let long = "a".repeat(70);
        let name = revision_name(&long, "sha256:0123456789abcdef");
        assert_eq!(name, format!("{}-0123456789ab", "a".repeat(50)));
        assert!(name.len() <= 63);
        assert_eq!(to_dns_label("-x/y:z."), "x-y-z");
        assert_eq!(to_dns_label(&"b".repeat(80)).len(), 63);
    }

    #[test]
    fn sources_drop_tags_and_digests_not_ports() {
        assert_eq!(source("127.0.0.1:5000/platform/buckets:v0.1.0"), "127.0.0.1:5000/platform/buckets");
        assert_eq!(source("127.0.0.1:5000/platform/buckets"), "127.0.0.1:5000/platform/buckets");
        assert_eq!(source("xpkg.crossplane.io/org/fn@sha256:abc"), "xpkg.crossplane.io/org/fn");
        assert_eq!(source("xpkg.crossplane.io/org/fn:v1@sha256:abc"), "xpkg.crossplane.io/org/fn");
    }
}
