//! Legacy ServiceAccount token Secrets, as kube-controller-manager's tokens controller keeps
//! them: a Secret of type `kubernetes.io/service-account-token` whose annotation
//! `kubernetes.io/service-account.name` names a ServiceAccount gets a signed `token`, the CA
//! (`ca.crt`) and its `namespace` in its data, and the ServiceAccount's uid in the annotation
//! `kubernetes.io/service-account.uid`. A token Secret whose ServiceAccount does not exist (or
//! is another of the same name) is deleted, so its token dies with its ServiceAccount.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::runner::{Queue, Reconciler};
use crate::authn::service_accounts::{SA_NAME_ANNOTATION, SA_UID_ANNOTATION, TOKEN_SECRET_TYPE};
use crate::cache::{CacheEvent, EventType};
use crate::objects;
use crate::ops::{self, DeleteOptions, ObjectTarget, WriteOptions, lifecycle};
use crate::state::AppState;
use crate::status::{ApiError, Reason};

const SECRETS: &str = "/registry/core/secrets/";
const ACCOUNTS: &str = "/registry/core/serviceaccounts/";
const COMPONENT: &str = "tokens-controller";

/// Fills and removes legacy token Secrets.
#[derive(Default)]
pub struct TokensController {
    /// Token Secret (`namespace/name`) → its ServiceAccount (`namespace/name`).
    secrets: HashMap<String, String>,
}

fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    object["metadata"]["annotations"][key].as_str().unwrap_or_default()
}

fn data<'a>(object: &'a Value, key: &str) -> &'a str {
    object["data"][key].as_str().unwrap_or_default()
}

impl Reconciler for TokensController {
    type Item = String;

    fn name(&self) -> &'static str {
        "serviceaccount-tokens"
    }

    fn reset(&mut self) {
        self.secrets.clear();
    }

    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<String>) {
        if let Some(secret) = event.key.strip_prefix(SECRETS) {
            let is_token = event.object["type"].as_str() == Some(TOKEN_SECRET_TYPE);
            if event.kind == EventType::Deleted || !is_token {
                self.secrets.remove(secret);
                return;
            }
            let namespace = secret.split('/').next().unwrap_or_default();
            self.secrets.insert(secret.to_string(), format!("{namespace}/{}", annotation(&event.object, SA_NAME_ANNOTATION)));
            queue.add(secret.to_string());
        } else if let Some(account) = event.key.strip_prefix(ACCOUNTS) {
            for (secret, owner) in &self.secrets {
                if owner == account {
                    queue.add(secret.clone());
                }
            }
        }
    }

    async fn reconcile(&mut self, state: &AppState, item: String, _queue: &mut Queue<String>) -> Result<(), ApiError> {
        let Some(tokens) = state.authenticator.service_accounts.clone() else { return Ok(()) };
        let Some(secret) = state.cache.get(&format!("{SECRETS}{item}")).0 else { return Ok(()) };
        if secret["type"].as_str() != Some(TOKEN_SECRET_TYPE) || lifecycle::is_deleting(&secret) {
            return Ok(());
        }
        let (Some(namespace), Some(name)) = (objects::meta_str(&secret, "namespace"), objects::meta_str(&secret, "name")) else { return Ok(()) };
        let account_name = annotation(&secret, SA_NAME_ANNOTATION);
        let Some(resource) = state.registry.get("", "v1", "secrets") else { return Ok(()) };
        let target = ObjectTarget { resource: &resource, namespace: Some(namespace), name, subresource: None };
        let account = state.cache.get(&format!("{ACCOUNTS}{namespace}/{account_name}")).0;
        let account_uid = account.as_deref().and_then(|a| objects::meta_str(a, "uid")).unwrap_or_default();
        let wanted_uid = annotation(&secret, SA_UID_ANNOTATION);
        if account.is_none() || (!wanted_uid.is_empty() && wanted_uid != account_uid) {
            tracing::info!(namespace, secret = name, service_account = account_name, "deleting a token Secret whose ServiceAccount does not exist");
            let options = DeleteOptions { uid: objects::meta_str(&secret, "uid").map(String::from), ..Default::default() };
            return match ops::delete(state, &target, &options).await {
                Err(error) if !matches!(error.reason, Reason::NotFound | Reason::Conflict) => Err(error),
                _ => Ok(()),
            };
        }
        let ca = STANDARD.encode(&tokens.ca_pem);
        let encoded_namespace = STANDARD.encode(namespace);
        if !data(&secret, "token").is_empty() && data(&secret, "ca.crt") == ca && data(&secret, "namespace") == encoded_namespace && wanted_uid == account_uid {
            return Ok(());
        }
        let token = tokens.issue_legacy(namespace, name, account_name, account_uid).map_err(ApiError::internal)?;
        let account_uid = account_uid.to_string();
        ops::modify(state, &target, &WriteOptions::internal(COMPONENT), |object| {
            if !object["data"].is_object() {
                object["data"] = json!({});
            }
            if data(object, "token").is_empty() {
                object["data"]["token"] = json!(STANDARD.encode(&token));
            }
            object["data"]["ca.crt"] = json!(ca);
            object["data"]["namespace"] = json!(encoded_namespace);
            if !object["metadata"]["annotations"].is_object() {
                object["metadata"]["annotations"] = json!({});
            }
            object["metadata"]["annotations"][SA_UID_ANNOTATION] = json!(account_uid);
            true
        })
        .await?;
        Ok(())
    }
}
