//! Query parameters of list, watch, and write requests, parsed leniently the way kube-apiserver
//! does (kube-rs sends a leading `?&`, empty pairs are ignored) but strictly about values.

use crate::status::ApiError;

/// The parameters a request may carry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Query {
    /// `watch=true|1`.
    pub watch: bool,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `fieldValidation`.
    pub field_validation: Option<String>,
    /// `dryRun`.
    pub dry_run: Option<String>,
    /// `force`.
    pub force: bool,
    /// `includeObject` (Table requests).
    pub include_object: Option<String>,
    /// `propagationPolicy` given as a query parameter.
    pub propagation_policy: Option<String>,
    /// `orphanDependents` (the deprecated form of `propagationPolicy=Orphan`).
    pub orphan_dependents: Option<bool>,
}

fn boolean(name: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "true" | "1" | "True" | "TRUE" => Ok(true),
        "false" | "0" | "False" | "FALSE" | "" => Ok(false),
        other => Err(ApiError::bad_request(format!("invalid value for {name}: {other:?} is not a boolean"))),
    }
}

fn number(name: &str, value: &str) -> Result<u64, ApiError> {
    value.parse().map_err(|_| ApiError::bad_request(format!("invalid value for {name}: {value:?} is not a non-negative integer")))
}

impl Query {
    /// Parses a raw query string (without the `?`).
    pub fn parse(raw: Option<&str>) -> Result<Query, ApiError> {
        let mut query = Query::default();
        let Some(raw) = raw else { return Ok(query) };
        for (key, value) in form_pairs(raw) {
            match key.as_str() {
                "watch" => query.watch = boolean(&key, &value)?,
                "resourceVersion" => query.resource_version = Some(value).filter(|v| !v.is_empty()),
                "resourceVersionMatch" => query.resource_version_match = Some(value).filter(|v| !v.is_empty()),
                "limit" => query.limit = number(&key, &value)? as usize,
                "continue" => query.continue_token = Some(value).filter(|v| !v.is_empty()),
                "labelSelector" => query.label_selector = Some(value).filter(|v| !v.is_empty()),
                "fieldSelector" => query.field_selector = Some(value).filter(|v| !v.is_empty()),
                "allowWatchBookmarks" => query.allow_watch_bookmarks = boolean(&key, &value)?,
                "timeoutSeconds" => query.timeout_seconds = Some(number(&key, &value)?),
                "sendInitialEvents" => query.send_initial_events = Some(boolean(&key, &value)?),
                "fieldManager" => query.field_manager = Some(value),
                "fieldValidation" => query.field_validation = Some(value),
                "dryRun" => query.dry_run = Some(value),
                "force" => query.force = boolean(&key, &value)?,
                "includeObject" => query.include_object = Some(value),
                "propagationPolicy" => query.propagation_policy = Some(value),
                "orphanDependents" => query.orphan_dependents = Some(boolean(&key, &value)?),
                // Parameters clients send that change nothing here (`timeout`, `pretty`, ...).
                _ => {}
            }
        }
        Ok(query)
    }
}

/// Splits `a=1&b=x%20y` into decoded pairs, skipping empty ones.
pub(crate) fn form_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+` (a space in form encoding); invalid escapes stay as they are.
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_kube_rs_and_kubectl_send() {
        let q = Query::parse(Some("&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=0")).unwrap();
        assert!(q.watch && q.allow_watch_bookmarks);
        assert_eq!((q.timeout_seconds, q.resource_version.as_deref()), (Some(290), Some("0")));
        let q = Query::parse(Some("labelSelector=app%3Ddemo%2Ctier+in+%28a%2Cb%29&limit=500")).unwrap();
        assert_eq!(q.label_selector.as_deref(), Some("app=demo,tier in (a,b)"));
        assert_eq!(q.limit, 500);
    }

    #[test]
    fn rejects_malformed_values() {
        assert!(Query::parse(Some("limit=ten")).is_err());
        assert!(Query::parse(Some("watch=maybe")).is_err());
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
