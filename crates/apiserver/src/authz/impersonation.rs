//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): the `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>` headers make a request
//! act as another user, when the authenticated user may `impersonate` each of them (users and
//! groups in the core group, ServiceAccounts in their namespace, uids, and `userextras/<key>`
//! in `authentication.k8s.io`), as kube-apiserver's impersonation filter checks them.

use axum::http::HeaderMap;

use super::{Attributes, Authorizer, Decision, ResourceAttributes, SERVICE_ACCOUNT_PREFIX, forbidden};
use crate::authn::{AUTHENTICATED, UserInfo};
use crate::status::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// Whether the request asks to impersonate anyone.
pub fn requested(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| k.as_str().starts_with("impersonate-"))
}

/// The user `requestor` acts as, after checking that they may impersonate every part of it;
/// `None` when no impersonation is asked for.
pub async fn impersonate(authorizer: &Authorizer, requestor: &UserInfo, headers: &HeaderMap) -> Result<Option<UserInfo>, ApiError> {
    if !requested(headers) {
        return Ok(None);
    }
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let Some(username) = values(USER).into_iter().next().filter(|u| !u.is_empty()) else {
        return Err(ApiError::bad_request("requested impersonation of groups, uid or extra without impersonating a user"));
    };
    let check = |verb_target: ResourceAttributes| {
        let attributes = Attributes::for_resource(requestor.clone(), "impersonate", verb_target);
        async move {
            match authorizer.authorize(&attributes).await {
                Decision::Allow => Ok(()),
                Decision::Deny(reason) => Err(forbidden(&attributes, &reason)),
            }
        }
    };
    let core = |resource: &str, name: &str| ResourceAttributes { resource: resource.into(), name: name.into(), version: "v1".into(), ..Default::default() };
    let mut groups = values(GROUP);
    match username.strip_prefix(SERVICE_ACCOUNT_PREFIX).and_then(|rest| rest.split_once(':')) {
        Some((namespace, name)) => {
            check(ResourceAttributes { namespace: namespace.into(), ..core("serviceaccounts", name) }).await?;
            if groups.is_empty() {
                groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")];
            }
        }
        None => check(core("users", &username)).await?,
    }
    for group in &groups {
        check(core("groups", group)).await?;
    }
    let mut user = UserInfo::new(username, groups);
    if user.username == "system:anonymous" {
        user.groups.retain(|g| g != AUTHENTICATED);
    }
    if let Some(uid) = values(UID).into_iter().next() {
        check(core("uids", &uid)).await?;
        user.uid = uid;
    }
    for (name, value) in headers.iter() {
        let Some(key) = name.as_str().strip_prefix(EXTRA) else { continue };
        let Ok(value) = value.to_str() else { continue };
        let key = crate::http::query::percent_decode(key);
        check(ResourceAttributes {
            group: "authentication.k8s.io".into(),
            resource: "userextras".into(),
            subresource: key.clone(),
            name: value.to_string(),
            version: "v1".into(),
            ..Default::default()
        })
        .await?;
        user.extra.entry(key).or_default().push(value.to_string());
    }
    Ok(Some(user))
}
