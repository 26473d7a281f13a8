//! Continue tokens: an opaque string that pins a paginated range to its snapshot revision, its
//! prefix and the last key returned. Every backend encodes them the same way.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{Revision, StoreError, StoreResult};

const VERSION: &str = "v1";

/// Where a paginated range continues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Continuation {
    /// The snapshot revision of the first page.
    pub revision: Revision,
    /// The last key already returned; the next page starts after it.
    pub last_key: String,
}

/// Encodes a token for the next page of a range over `prefix`.
pub(crate) fn encode(revision: Revision, prefix: &str, last_key: &str) -> String {
    let raw = format!("{VERSION}\0{revision}\0{prefix}\0{last_key}");
    URL_SAFE_NO_PAD.encode(raw)
}

/// Decodes a token, checking that it belongs to a range over `prefix`.
pub(crate) fn decode(token: &str, prefix: &str) -> StoreResult<Continuation> {
    let invalid = |why: &str| StoreError::InvalidContinue(why.to_string());
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid("not base64"))?;
    let raw = String::from_utf8(raw).map_err(|_| invalid("not UTF-8"))?;
    let mut parts = raw.splitn(4, '\0');
    let (Some(version), Some(revision), Some(token_prefix), Some(last_key)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid("malformed"));
    };
    if version != VERSION {
        return Err(invalid("unknown version"));
    }
    if token_prefix != prefix {
        return Err(invalid("issued for a different prefix"));
    }
    let revision = revision.parse().map_err(|_| invalid("bad revision"))?;
    Ok(Continuation { revision, last_key: last_key.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_checks_the_prefix() {
        let token = encode(42, "/registry/a/", "/registry/a/x\0y");
        let c = decode(&token, "/registry/a/").unwrap();
        assert_eq!(c, Continuation { revision: 42, last_key: "/registry/a/x\0y".into() });
        assert!(matches!(decode(&token, "/registry/b/"), Err(StoreError::InvalidContinue(_))));
        assert!(matches!(decode("%%%", "/"), Err(StoreError::InvalidContinue(_))));
        assert!(matches!(decode(&URL_SAFE_NO_PAD.encode("v1\0x\0/\0k"), "/"), Err(StoreError::InvalidContinue(_))));
    }
}
