//! Names of composed resources: `<prefix>-<first 12 hex of sha256(owner uid + composition
//! resource name)>`, deterministic per composite and template so a restart never composes a
//! second copy. The prefix is the composite's `crossplane.io/composite` label; when the name
//! would pass 63 characters the prefix is cut (keeping the `-`).

use sha2::{Digest, Sha256};

/// The longest name a composed resource may have.
pub const MAX_NAME: usize = 63;

/// The deterministic name of the composed resource `resource_name` of the composite whose uid
/// is `owner_uid`.
pub fn composed_name(prefix: &str, owner_uid: &str, resource_name: &str) -> String {
    let digest = Sha256::digest(format!("{owner_uid}{resource_name}").as_bytes());
    let suffix: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let room = MAX_NAME - suffix.len() - 1;
    let prefix = prefix.trim_end_matches('-');
    let mut cut: String = prefix.chars().take(room).collect();
    while cut.ends_with('-') || cut.ends_with('.') {
        cut.pop();
    }
    format!("{cut}-{suffix}")
}


#[cfg(test)]
mod tests {
    use super::*;
    use oxplane_machinery::names::is_dns1123_subdomain;

    #[test]
    fn names_are_deterministic_and_bounded() {
        let a = composed_name("my-xr", "uid-1", "bucket");
        assert_eq!(a, composed_name("my-xr", "uid-1", "bucket"));
        assert_ne!(a, composed_name("my-xr", "uid-2", "bucket"));
        assert_ne!(a, composed_name("my-xr", "uid-1", "role"));
        // sha256("uid-1bucket") begins 5d281fc32eca (from `sha256sum`).
        assert_eq!(a, "my-xr-5d281fc32eca");
        let long = composed_name(&"x".repeat(80), "u", "r");
        assert_eq!(long.len(), MAX_NAME);
        assert!(is_dns1123_subdomain(&long));
        assert!(is_dns1123_subdomain(&a));
    }
}
