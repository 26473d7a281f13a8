//! `admissionregistration.k8s.io/v1` `ValidatingWebhookConfiguration` and
//! `MutatingWebhookConfiguration`: their webhooks as Rust values, their defaults, and the
//! checks kube-apiserver makes before storing one (422 with the same field paths and words).

use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

use crate::status::Cause;

/// Store prefix of ValidatingWebhookConfigurations.
pub const VALIDATING_PREFIX: &str = "/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/";
/// Store prefix of MutatingWebhookConfigurations.
pub const MUTATING_PREFIX: &str = "/registry/admissionregistration.k8s.io/mutatingwebhookconfigurations/";

/// One webhook of a configuration, defaults applied.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// Fully qualified name (`policy.example.com`).
    pub name: String,
    /// Where the webhook is served.
    #[serde(default)]
    pub client_config: ClientConfig,
    /// Which requests it is called for.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// `Fail` (default) or `Ignore`: what a call that fails means.
    #[serde(default)]
    pub failure_policy: Option<String>,
    /// `Exact` or `Equivalent` (default).
    #[serde(default)]
    pub match_policy: Option<String>,
    /// Label selector on the object's namespace.
    #[serde(default)]
    pub namespace_selector: Option<Value>,
    /// Label selector on the object (old or new).
    #[serde(default)]
    pub object_selector: Option<Value>,
    /// `None`, `NoneOnDryRun` (`Some`, `Unknown` are v1beta1 only).
    #[serde(default)]
    pub side_effects: Option<String>,
    /// Call timeout, 1 to 30 seconds (default 10).
    #[serde(default)]
    pub timeout_seconds: Option<i64>,
    /// AdmissionReview versions the webhook understands; `v1` is the one sent.
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    /// Mutating only: `Never` (default) or `IfNeeded`.
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    /// CEL conditions that must all hold for the webhook to be called.
    #[serde(default)]
    pub match_conditions: Vec<MatchCondition>,
}

/// `clientConfig`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    /// `https://host:port/path`.
    #[serde(default)]
    pub url: Option<String>,
    /// A Service reference.
    #[serde(default)]
    pub service: Option<ServiceReference>,
    /// PEM CA bundle, base64 in JSON.
    #[serde(default)]
    pub ca_bundle: Option<String>,
}

/// `clientConfig.service`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// The Service's namespace.
    #[serde(default)]
    pub namespace: String,
    /// The Service's name.
    #[serde(default)]
    pub name: String,
    /// URL path (default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// Service port (default 443).
    #[serde(default)]
    pub port: Option<i64>,
}

/// One rule (`RuleWithOperations`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default)]
    pub operations: Vec<String>,
    /// API groups (`""` core, `*` all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// API versions (`*` all).
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Resources (`pods`, `pods/status`, `*`, `*/*`, `*/status`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (default).
    #[serde(default)]
    pub scope: Option<String>,
}

/// `matchConditions[]`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MatchCondition {
    /// Unique name.
    #[serde(default)]
    pub name: String,
    /// A CEL expression returning a bool.
    #[serde(default)]
    pub expression: String,
}

impl Webhook {
    /// Whether a failed call refuses the request (`Fail`, the default).
    pub fn fails_closed(&self) -> bool {
        self.failure_policy.as_deref() != Some("Ignore")
    }

    /// The call timeout.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_seconds.unwrap_or(10).clamp(1, 30) as u64)
    }

    /// Whether the webhook may be called for a dry-run request.
    pub fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_deref(), Some("None" | "NoneOnDryRun"))
    }

    /// Whether the webhook is called again when a later one changed the object.
    pub fn reinvoked_if_needed(&self) -> bool {
        self.reinvocation_policy.as_deref() == Some("IfNeeded")
    }

    /// The PEM certificates of `caBundle`, if any.
    pub fn ca_pem(&self) -> Result<Option<Vec<u8>>, String> {
        match self.client_config.ca_bundle.as_deref().filter(|b| !b.is_empty()) {
            None => Ok(None),
            Some(bundle) => base64::engine::general_purpose::STANDARD
                .decode(bundle)
                .map(Some)
                .map_err(|e| format!("caBundle is not base64: {e}")),
        }
    }
}

/// The webhooks of a stored configuration (an unreadable one has none: it could not be stored).
pub fn webhooks(configuration: &Value) -> Vec<Webhook> {
    configuration
        .get("webhooks")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|w| serde_json::from_value(w.clone()).ok()).collect())
        .unwrap_or_default()
}

fn cause(reason: &str, field: String, message: String) -> Cause {
    Cause { reason: reason.into(), message, field }
}

fn unsupported(field: String, value: &str, supported: &[&str]) -> Cause {
    let list = supported.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
    cause("FieldValueNotSupported", field, format!("Unsupported value: \"{value}\": supported values: {list}"))
}

/// What kube-apiserver refuses in a configuration; empty when it may be stored.
pub fn validate(configuration: &Value, mutating: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(list) = configuration.get("webhooks").filter(|w| !w.is_null()) else { return causes };
    let Some(list) = list.as_array() else {
        causes.push(cause("FieldValueInvalid", "webhooks".into(), "Invalid value: must be a list".into()));
        return causes;
    };
    let mut names = std::collections::HashSet::new();
    for (i, raw) in list.iter().enumerate() {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        let hook: Webhook = match serde_json::from_value(raw.clone()) {
            Ok(hook) => hook,
            Err(e) => {
                causes.push(cause("FieldValueInvalid", format!("webhooks[{i}]"), format!("Invalid value: {e}")));
                continue;
            }
        };
        if hook.name.is_empty() {
            causes.push(cause("FieldValueRequired", at("name"), "Required value".into()));
        } else if hook.name.split('.').filter(|s| !s.is_empty()).count() < 3 {
            causes.push(cause(
                "FieldValueInvalid",
                at("name"),
                format!("Invalid value: \"{}\": should be a domain with at least three segments separated by dots", hook.name),
            ));
        } else if !names.insert(hook.name.clone()) {
            causes.push(cause("FieldValueDuplicate", at("name"), format!("Duplicate value: \"{}\"", hook.name)));
        }
        if hook.admission_review_versions.is_empty() {
            causes.push(cause(
                "FieldValueRequired",
                at("admissionReviewVersions"),
                "Required value: must specify one of v1, v1beta1".into(),
            ));
        } else if !hook.admission_review_versions.iter().any(|v| v == "v1" || v == "v1beta1") {
            causes.push(cause(
                "FieldValueInvalid",
                at("admissionReviewVersions"),
                format!("Invalid value: {:?}: must include at least one of v1, v1beta1", hook.admission_review_versions),
            ));
        }
        match hook.side_effects.as_deref() {
            None => causes.push(cause(
                "FieldValueRequired",
                at("sideEffects"),
                "Required value: must specify one of None, NoneOnDryRun".into(),
            )),
            Some("None" | "NoneOnDryRun") => {}
            Some(other) => causes.push(unsupported(at("sideEffects"), other, &["None", "NoneOnDryRun"])),
        }
        if let Some(policy) = hook.failure_policy.as_deref().filter(|p| !matches!(*p, "Fail" | "Ignore")) {
            causes.push(unsupported(at("failurePolicy"), policy, &["Fail", "Ignore"]));
        }
        if let Some(policy) = hook.match_policy.as_deref().filter(|p| !matches!(*p, "Exact" | "Equivalent")) {
            causes.push(unsupported(at("matchPolicy"), policy, &["Equivalent", "Exact"]));
        }
        if let Some(seconds) = hook.timeout_seconds.filter(|s| !(1..=30).contains(s)) {
            causes.push(cause(
                "FieldValueInvalid",
                at("timeoutSeconds"),
                format!("Invalid value: {seconds}: the timeout value must be between 1 and 30 seconds"),
            ));
        }
        if mutating {
            if let Some(policy) = hook.reinvocation_policy.as_deref().filter(|p| !matches!(*p, "Never" | "IfNeeded")) {
                causes.push(unsupported(at("reinvocationPolicy"), policy, &["IfNeeded", "Never"]));
            }
        }
        validate_client(&hook, &at("clientConfig"), &mut causes);
        for (r, rule) in hook.rules.iter().enumerate() {
            let rule_at = |f: &str| format!("webhooks[{i}].rules[{r}].{f}");
            for operation in &rule.operations {
                if !matches!(operation.as_str(), "CREATE" | "UPDATE" | "DELETE" | "CONNECT" | "*") {
                    causes.push(unsupported(rule_at("operations"), operation, &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]));
                }
            }
            if rule.operations.is_empty() {
                causes.push(cause("FieldValueRequired", rule_at("operations"), "Required value".into()));
            }
            for (field, values) in [("apiGroups", &rule.api_groups), ("apiVersions", &rule.api_versions), ("resources", &rule.resources)] {
                if values.is_empty() {
                    causes.push(cause("FieldValueRequired", rule_at(field), "Required value".into()));
                }
            }
            if let Some(scope) = rule.scope.as_deref().filter(|s| !matches!(*s, "Cluster" | "Namespaced" | "*")) {
                causes.push(unsupported(rule_at("scope"), scope, &["*", "Cluster", "Namespaced"]));
            }
        }
        for (field, selector) in [("namespaceSelector", &hook.namespace_selector), ("objectSelector", &hook.object_selector)] {
            if let Some(selector) = selector.as_ref().filter(|s| !s.is_null())
                && let Err(e) = crate::selectors::LabelSelector::from_label_selector_json(selector)
            {
                causes.push(cause("FieldValueInvalid", at(field), format!("Invalid value: {}", e.message())));
            }
        }
        let mut condition_names = std::collections::HashSet::new();
        for (c, condition) in hook.match_conditions.iter().enumerate() {
            let condition_at = |f: &str| format!("webhooks[{i}].matchConditions[{c}].{f}");
            if condition.name.is_empty() {
                causes.push(cause("FieldValueRequired", condition_at("name"), "Required value".into()));
            } else if !condition_names.insert(condition.name.clone()) {
                causes.push(cause("FieldValueDuplicate", condition_at("name"), format!("Duplicate value: \"{}\"", condition.name)));
            }
            if condition.expression.is_empty() {
                causes.push(cause("FieldValueRequired", condition_at("expression"), "Required value".into()));
            } else if let Err(e) = super::conditions::compile(&condition.expression) {
                causes.push(cause(
                    "FieldValueInvalid",
                    condition_at("expression"),
                    format!("Invalid value: \"{}\": compilation failed: {e}", condition.expression),
                ));
            }
        }
    }
    causes
}

fn validate_client(hook: &Webhook, at: &str, causes: &mut Vec<Cause>) {
    let config = &hook.client_config;
    match (&config.url, &config.service) {
        (Some(_), Some(_)) | (None, None) => {
            causes.push(cause("FieldValueRequired", at.into(), "Required value: exactly one of url or service is required".into()));
        }
        (Some(url), None) => match url.split_once("://") {
            Some(("https", rest)) if !rest.is_empty() && !rest.starts_with('/') => {
                if url.contains('#') || url.contains('?') {
                    causes.push(cause(
                        "FieldValueInvalid",
                        format!("{at}.url"),
                        format!("Invalid value: \"{url}\": fragments and query parameters are not allowed"),
                    ));
                }
            }
            Some((scheme, _)) if scheme != "https" => causes.push(cause(
                "FieldValueInvalid",
                format!("{at}.url"),
                format!("Invalid value: \"{url}\": 'https' is the only allowed URL scheme"),
            )),
            _ => causes.push(cause("FieldValueInvalid", format!("{at}.url"), format!("Invalid value: \"{url}\": host must be specified"))),
        },
        (None, Some(service)) => {
            if service.name.is_empty() {
                causes.push(cause("FieldValueRequired", format!("{at}.service.name"), "Required value: service name is required".into()));
            }
            if service.namespace.is_empty() {
                causes.push(cause(
                    "FieldValueRequired",
                    format!("{at}.service.namespace"),
                    "Required value: service namespace is required".into(),
                ));
            }
            if let Some(port) = service.port.filter(|p| !(1..=65535).contains(p)) {
                causes.push(cause(
                    "FieldValueInvalid",
                    format!("{at}.service.port"),
                    format!("Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"),
                ));
            }
            if let Some(path) = service.path.as_deref().filter(|p| !p.starts_with('/')) {
                causes.push(cause("FieldValueInvalid", format!("{at}.service.path"), format!("Invalid value: \"{path}\": must start with a '/'")));
            }
        }
    }
    if let Err(e) = hook.ca_pem() {
        causes.push(cause("FieldValueInvalid", format!("{at}.caBundle"), format!("Invalid value: {e}")));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn a_complete_configuration_is_accepted() {
        let config = json!({"webhooks": [{
            "name": "deny.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:9443/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "matchConditions": [{"name": "not-system", "expression": "request.userInfo.username != 'system:admin'"}]
        }]});
        assert!(validate(&config, false).is_empty(), "{:?}", validate(&config, false));
    }

    #[test]
    fn kube_apiserver_refusals_name_their_fields() {
        let config = json!({"webhooks": [
            {"name": "short", "clientConfig": {"url": "http://127.0.0.1/x"}, "failurePolicy": "Maybe", "timeoutSeconds": 31,
             "rules": [{"operations": ["READ"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*"]}]},
            {"name": "two.of.them", "sideEffects": "Some", "admissionReviewVersions": ["v2"], "clientConfig": {},
             "matchConditions": [{"name": "bad", "expression": "1 +"}]},
            {"name": "two.of.them", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "clientConfig": {"service": {"namespace": "default", "name": "svc", "port": 0}}}
        ]});
        let causes = validate(&config, false);
        assert_eq!(fields(&causes), [
            "webhooks[0].name",
            "webhooks[0].admissionReviewVersions",
            "webhooks[0].sideEffects",
            "webhooks[0].failurePolicy",
            "webhooks[0].timeoutSeconds",
            "webhooks[0].clientConfig.url",
            "webhooks[0].rules[0].operations",
            "webhooks[1].admissionReviewVersions",
            "webhooks[1].sideEffects",
            "webhooks[1].clientConfig",
            "webhooks[1].matchConditions[0].expression",
            "webhooks[2].name",
            "webhooks[2].clientConfig.service.port",
        ]);
        assert_eq!(causes[5].message, "Invalid value: \"http://127.0.0.1/x\": 'https' is the only allowed URL scheme");
        assert_eq!(causes[8].message, "Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"");
    }

    #[test]
    fn defaults_are_kubernetes_defaults() {
        let hook: Webhook = serde_json::from_value(json!({"name": "a.b.c"})).unwrap();
        assert!(hook.fails_closed());
        assert_eq!(hook.timeout(), std::time::Duration::from_secs(10));
        assert!(!hook.reinvoked_if_needed());
        assert!(!hook.dry_run_safe());
    }
}
