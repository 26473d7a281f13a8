//! Passwords of logins (PostgreSQL Roles, MySQL Users): the one `passwordSecretRef` names,
//! else a generated one published in the connection Secret, and when it must be set again.
//! Passwords never reach a condition, an event or a log.

use oxplane_runtime::client::Kube;
use oxplane_runtime::managed::connection;
use oxplane_runtime::managed::{ExternalError, Managed};
use oxplane_runtime::object;
use serde_json::{Value, json};

use super::server::generate_password;

/// The password `passwordSecretRef` names, if it names one.
pub async fn referenced(kube: &Kube, managed: &Managed) -> Result<Option<String>, ExternalError> {
    let Some(reference) = managed.for_provider().get("passwordSecretRef").cloned() else { return Ok(None) };
    let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
    let key = reference.get("key").and_then(Value::as_str).unwrap_or("password");
    let namespace = managed.namespace().or_else(|| reference.get("namespace").and_then(Value::as_str)).unwrap_or("default");
    let data = connection::read_secret(kube, namespace, name)
        .await
        .map_err(|e| ExternalError::definite(format!("cannot read passwordSecretRef {namespace}/{name}: {e}")))?
        .ok_or_else(|| ExternalError::definite(format!("passwordSecretRef: secret {namespace}/{name} not found")))?;
    let password = data.get(key).ok_or_else(|| ExternalError::definite(format!("passwordSecretRef: secret {namespace}/{name} has no key {key:?}")))?;
    Ok(Some(String::from_utf8_lossy(password).into_owned()))
}

/// The password the connection Secret holds, if the resource publishes one.
pub async fn published(kube: &Kube, managed: &Managed) -> Result<Option<String>, ExternalError> {
    let Some(Ok((namespace, name))) = connection::secret_ref(&managed.object) else { return Ok(None) };
    let data = connection::read_secret(kube, &namespace, &name)
        .await
        .map_err(|e| ExternalError::definite(format!("cannot read connection secret {namespace}/{name}: {e}")))?;
    Ok(data.and_then(|d| d.get("password").map(|p| String::from_utf8_lossy(p).into_owned())))
}

/// Why the password must be set again, if it must: the referenced one changed, the
/// generated one was lost, or `passwordRotationTrigger` asks for a rotation that is due.
pub async fn due(kube: &Kube, managed: &Managed) -> Result<Option<&'static str>, ExternalError> {
    let published = published(kube, managed).await?;
    if let Some(wanted) = referenced(kube, managed).await? {
        return Ok((connection::secret_ref(&managed.object).is_some() && published.as_deref() != Some(wanted.as_str())).then_some("password"));
    }
    if connection::secret_ref(&managed.object).is_some() && published.is_none() {
        return Ok(Some("password"));
    }
    let trigger = managed.for_provider().get("passwordRotationTrigger").and_then(Value::as_str).and_then(object::parse_time);
    let last = managed.object.pointer("/status/atProvider/lastPasswordChange").and_then(Value::as_str).and_then(object::parse_time);
    if let (Some(trigger), Some(last)) = (trigger, last)
        && trigger > last
        && trigger <= jiff::Timestamp::now()
    {
        return Ok(Some("passwordRotationTrigger"));
    }
    Ok(None)
}

/// The password to set: the referenced one, or a new one.
pub async fn next(kube: &Kube, managed: &Managed) -> Result<String, ExternalError> {
    Ok(match referenced(kube, managed).await? {
        Some(password) => password,
        None => generate_password(),
    })
}

/// Records `status.atProvider.lastPasswordChange` as now.
pub fn record_change(managed: &mut Managed) {
    let mut at_provider = managed.object.pointer("/status/atProvider").cloned().unwrap_or_else(|| json!({}));
    at_provider["lastPasswordChange"] = json!(object::now_rfc3339());
    managed.set_at_provider(at_provider);
}
