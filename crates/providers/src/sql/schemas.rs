//! The CRDs of provider-sql, with upstream's field names, printer columns and categories.

use oxplane_runtime::managed::crd::{ManagedCrd, provider_config_crd, provider_config_usage_crd};
use serde_json::{Value, json};

use super::{MYSQL_GROUP, MYSQL_NAMESPACED_GROUP, PG_GROUP, PG_NAMESPACED_GROUP, VERSION};

fn string() -> Value {
    json!({"type": "string"})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

/// `xRef`: a managed resource by name.
fn reference() -> Value {
    json!({"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"},
        "policy": {"type": "object", "properties": {
            "resolution": {"type": "string", "default": "Required", "enum": ["Required", "Optional"]},
            "resolve": {"type": "string", "enum": ["Always", "IfNotPresent"]}
        }}
    }})
}

/// `xSelector`: a managed resource by labels (or by sharing the selector's controller).
fn selector() -> Value {
    json!({"type": "object", "properties": {
        "matchControllerRef": {"type": "boolean"},
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "policy": {"type": "object", "properties": {
            "resolution": {"type": "string", "default": "Required", "enum": ["Required", "Optional"]},
            "resolve": {"type": "string", "enum": ["Always", "IfNotPresent"]}
        }}
    }})
}

/// Adds `field`, `fieldRef` and `fieldSelector` to `properties`.
fn referencing(properties: &mut Value, field: &str) {
    properties[field] = string();
    properties[format!("{field}Ref")] = reference();
    properties[format!("{field}Selector")] = selector();
}

fn privilege_list() -> Value {
    json!({"type": "array", "items": {"type": "string", "pattern": "^[A-Z]+( [A-Z]+)*$"}})
}

fn database() -> Value {
    let mut properties = json!({
        "template": string(),
        "strategy": {"type": "string", "enum": ["WAL_LOG", "FILE_COPY"]},
        "encoding": string(),
        "lcCollate": string(),
        "lcCType": string(),
        "tablespace": string(),
        "allowConnections": boolean(),
        "connectionLimit": {"type": "integer", "format": "int32"},
        "isTemplate": boolean(),
    });
    referencing(&mut properties, "owner");
    json!({"type": "object", "properties": properties})
}

fn role() -> Value {
    let privileges = ["superUser", "createDb", "createRole", "login", "inherit", "replication", "bypassRls"]
        .iter()
        .map(|p| (p.to_string(), boolean()))
        .collect::<serde_json::Map<_, _>>();
    json!({"type": "object", "properties": {
        "connectionLimit": {"type": "integer", "format": "int32", "minimum": -1},
        "privileges": {"type": "object", "properties": privileges},
        "passwordSecretRef": {"type": "object", "required": ["key", "name"], "properties": {
            "key": string(), "name": string(), "namespace": string()
        }},
        "configurationParameters": {"type": "array", "items": {"type": "object", "properties": {"name": string(), "value": string()}}},
        "passwordRotationTrigger": {"type": "string", "format": "date-time"},
    }})
}

fn role_status() -> Value {
    json!({"type": "object", "properties": {
        "privilegesAsClauses": strings(),
        "configurationParameters": {"type": "array", "items": {"type": "object", "properties": {"name": string(), "value": string()}}},
        "lastPasswordChange": {"type": "string", "format": "date-time"},
    }})
}

fn grant() -> Value {
    let mut properties = json!({
        "privileges": privilege_list(),
        "withOption": {"type": "string", "enum": ["ADMIN", "GRANT"]},
        "revokePublicOnDb": boolean(),
        "columns": strings(),
        "tables": strings(),
        "sequences": strings(),
        "routines": {"type": "array", "items": {"type": "object", "properties": {"name": string(), "args": strings()}}},
        "foreignDataWrappers": strings(),
        "foreignServers": strings(),
        "withInherit": boolean(),
    });
    for field in ["role", "database", "schema", "memberOf"] {
        referencing(&mut properties, field);
    }
    json!({"type": "object", "properties": properties, "x-kubernetes-validations": [{
        "rule": "!has(self.withInherit) || has(self.memberOf) || has(self.memberOfRef) || has(self.memberOfSelector)",
        "message": "withInherit may only be set on memberOf grants"
    }]})
}

fn extension() -> Value {
    let mut properties = json!({"extension": string(), "version": string(), "schema": string()});
    referencing(&mut properties, "database");
    json!({"type": "object", "required": ["extension"], "properties": properties})
}

fn schema() -> Value {
    let mut properties = json!({
        "revokePublicOnSchema": boolean(),
        "dropBehavior": {"type": "string", "enum": ["CASCADE", "RESTRICT"]},
    });
    referencing(&mut properties, "role");
    referencing(&mut properties, "database");
    json!({"type": "object", "properties": properties})
}

fn default_privileges() -> Value {
    let mut properties = json!({
        "privileges": privilege_list(),
        "targetRole": string(),
        "objectType": {"type": "string", "enum": ["table", "sequence", "function", "schema", "type"]},
        "withOption": {"type": "string", "enum": ["ADMIN", "GRANT"]},
    });
    for field in ["role", "database", "schema"] {
        referencing(&mut properties, field);
    }
    // Upstream's rules, with the schema given by reference (which oxplane also takes) counting
    // as given.
    let has_schema = "(has(self.schema) || has(self.schemaRef) || has(self.schemaSelector))";
    json!({"type": "object", "required": ["privileges", "targetRole", "objectType"], "properties": properties, "x-kubernetes-validations": [
        {"rule": format!("!has(self.objectType) || self.objectType == 'schema' || {has_schema}"), "message": "schema is required when objectType is not schema"},
        {"rule": format!("!has(self.objectType) || self.objectType != 'schema' || !{has_schema}"), "message": "schema must not be set when objectType is schema"}
    ]})
}

fn binlog() -> Value {
    json!({"type": "boolean", "description": "false: the change is not written to the binary log (it does not reach replicas)"})
}

fn mysql_database() -> Value {
    json!({"type": "object", "properties": {"binlog": binlog(), "defaultCharacterSet": string(), "defaultCollation": string()}})
}

fn mysql_user() -> Value {
    let options = ["maxQueriesPerHour", "maxUpdatesPerHour", "maxConnectionsPerHour", "maxUserConnections"]
        .iter()
        .map(|o| (o.to_string(), json!({"type": "integer"})))
        .collect::<serde_json::Map<_, _>>();
    json!({"type": "object", "properties": {
        "passwordSecretRef": {"type": "object", "required": ["key", "name"], "properties": {
            "key": string(), "name": string(), "namespace": string()
        }},
        "authenticationPlugin": auth_plugin(),
        "resourceOptions": {"type": "object", "properties": options},
        "binlog": binlog(),
        "passwordRotationTrigger": {"type": "string", "format": "date-time"},
    }, "x-kubernetes-validations": [{
        "rule": "!(has(self.authenticationPlugin) && has(self.passwordSecretRef))",
        "message": "authenticationPlugin and passwordSecretRef are mutually exclusive"
    }]})
}

/// A MySQL User's `authenticationPlugin` (spec and status).
fn auth_plugin() -> Value {
    json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}, "authString": string()}})
}

fn mysql_user_status() -> Value {
    json!({"type": "object", "properties": {
        "resourceOptionsAsClauses": strings(),
        "authenticationPlugin": auth_plugin(),
        "lastPasswordChange": {"type": "string", "format": "date-time"},
    }})
}

fn mysql_grant() -> Value {
    let mut properties = json!({"privileges": strings(), "table": string(), "binlog": binlog()});
    referencing(&mut properties, "user");
    referencing(&mut properties, "database");
    json!({"type": "object", "required": ["privileges"], "properties": properties})
}

fn column(name: &str, type_: &str, path: &str) -> Value {
    json!({"name": name, "type": type_, "jsonPath": path})
}

/// Upstream's printer columns for a kind (READY, SYNCED, then the kind's own, with AGE where
/// upstream puts it).
fn columns(kind: &str, mysql: bool) -> Vec<Value> {
    let mut columns = vec![
        column("READY", "string", ".status.conditions[?(@.type=='Ready')].status"),
        column("SYNCED", "string", ".status.conditions[?(@.type=='Synced')].status"),
    ];
    let age = column("AGE", "date", ".metadata.creationTimestamp");
    let spec = |name: &str, field: &str| column(name, "string", &format!(".spec.forProvider.{field}"));
    match kind {
        "Role" => {
            columns.push(column("CONN LIMIT", "integer", ".spec.forProvider.connectionLimit"));
            columns.push(column("PRIVILEGES", "string", ".status.atProvider.privilegesAsClauses"));
        }
        "Grant" if mysql => columns.extend([age, spec("ROLE", "user"), spec("DATABASE", "database"), spec("PRIVILEGES", "privileges")]),
        "Grant" => columns.extend([age, spec("ROLE", "role"), spec("MEMBER OF", "memberOf"), spec("DATABASE", "database"), spec("PRIVILEGES", "privileges")]),
        "Extension" => columns.extend([spec("DATABASE", "database"), spec("EXTENSION", "extension"), spec("VERSION", "version"), age]),
        "Schema" => columns.extend([age, spec("ROLE", "role"), spec("DATABASE", "database")]),
        "DefaultPrivileges" => columns.extend([
            age,
            spec("ROLE", "role"),
            spec("TARGET_ROLE", "targetRole"),
            spec("SCHEMA", "schema"),
            spec("DATABASE", "database"),
            spec("PRIVILEGES", "privileges"),
        ]),
        // Database, User.
        _ => columns.push(age),
    }
    columns
}

fn managed_crd(group: &str, kind: &str, plural: &str, namespaced: bool) -> Value {
    let mysql = group == MYSQL_GROUP || group == MYSQL_NAMESPACED_GROUP;
    let (for_provider, at_provider) = match kind {
        "Database" if mysql => (mysql_database(), json!({"type": "object"})),
        "User" => (mysql_user(), mysql_user_status()),
        "Grant" if mysql => (mysql_grant(), json!({"type": "object", "properties": {"privileges": strings()}})),
        "Database" => (database(), json!({"type": "object"})),
        "Role" => (role(), role_status()),
        "Grant" => (grant(), json!({"type": "object"})),
        "Extension" => (extension(), json!({"type": "object"})),
        "Schema" => (schema(), json!({"type": "object"})),
        _ => (default_privileges(), json!({"type": "object"})),
    };
    let crd = ManagedCrd {
        group: group.into(),
        version: VERSION.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
        categories: vec!["sql".into()],
        for_provider,
        at_provider,
        extra_columns: Vec::new(),
        for_provider_required: true,
    };
    let mut rendered = crd.render();
    if let Some(version) = rendered.pointer_mut("/spec/versions/0") {
        version["additionalPrinterColumns"] = Value::Array(columns(kind, mysql));
    }
    rendered
}

/// The spec of a PostgreSQL ProviderConfig. `namespaced_secret`: the connection Secret is
/// in the config's own namespace (a namespaced ProviderConfig), so only its name is given.
fn pg_config_spec(namespaced_secret: bool) -> Value {
    let secret_ref = if namespaced_secret {
        json!({"type": "object", "required": ["name"], "properties": {"name": string()}})
    } else {
        json!({"type": "object", "required": ["name", "namespace"], "properties": {"name": string(), "namespace": string()}})
    };
    json!({"type": "object", "required": ["credentials"], "properties": {
        "credentials": {"type": "object", "required": ["source"], "properties": {
            "source": {"type": "string", "enum": ["PostgreSQLConnectionSecret"]},
            "connectionSecretRef": secret_ref,
            // Keys left out keep their standard names (`endpoint`, ...): the controller, not
            // the schema, applies them, so nothing is written into the user's spec.
            "secretKeyMapping": {"type": "object", "properties": {
                "endpoint": {"type": "string"},
                "port": {"type": "string"},
                "username": {"type": "string"},
                "password": {"type": "string"}
            }}
        }},
        "defaultDatabase": {"type": "string", "default": "postgres"},
        "sslMode": {"type": "string", "enum": ["disable", "require", "verify-ca", "verify-full"]}
    }})
}

/// The categories of provider-sql's config and usage kinds.
const CATEGORIES: [&str; 3] = ["crossplane", "provider", "sql"];

/// The CRDs of one database's groups (cluster-scoped and namespaced): its managed kinds,
/// the configs with `config_spec(namespaced_secret)`, and the usages.
fn group_crds(groups: [(&str, bool); 2], kinds: impl Iterator<Item = (&'static str, &'static str)> + Clone, config_spec: fn(bool) -> Value) -> Vec<Value> {
    let mut crds = Vec::new();
    for (group, namespaced) in groups {
        for (kind, plural) in kinds.clone() {
            crds.push(managed_crd(group, kind, plural, namespaced));
        }
        crds.push(provider_config_crd(group, VERSION, "ProviderConfig", "providerconfigs", namespaced, config_spec(namespaced), &CATEGORIES));
        if namespaced {
            crds.push(provider_config_crd(group, VERSION, "ClusterProviderConfig", "clusterproviderconfigs", false, config_spec(false), &CATEGORIES));
        }
        crds.push(provider_config_usage_crd(group, VERSION, "ProviderConfigUsage", "providerconfigusages", namespaced, namespaced, &CATEGORIES));
    }
    crds
}

/// Every PostgreSQL CRD, cluster-scoped and namespaced.
pub fn postgresql_crds() -> Vec<Value> {
    group_crds([(PG_GROUP, false), (PG_NAMESPACED_GROUP, true)], super::PG_KINDS.iter().map(|(k, p, _)| (*k, *p)), pg_config_spec)
}

/// The spec of a MySQL ProviderConfig (`namespaced_secret` as for PostgreSQL).
fn mysql_config_spec(namespaced_secret: bool) -> Value {
    let mut spec = pg_config_spec(namespaced_secret);
    spec["properties"]["credentials"]["properties"]["source"] = json!({"type": "string", "enum": ["MySQLConnectionSecret"]});
    let properties = &mut spec["properties"];
    if let Some(properties) = properties.as_object_mut() {
        properties.remove("defaultDatabase");
        properties.remove("sslMode");
    }
    let secret_key = json!({"type": "object", "properties": {"secretRef": {"type": "object", "required": ["key", "name", "namespace"], "properties": {
        "name": string(), "namespace": string(), "key": string()
    }}}});
    properties["tls"] = json!({"type": "string", "enum": ["true", "skip-verify", "preferred", "custom"]});
    properties["tlsConfig"] = json!({"type": "object", "properties": {
        "caCert": secret_key, "clientCert": secret_key, "clientKey": secret_key, "insecureSkipVerify": boolean()
    }});
    properties["connectionPool"] = json!({"type": "object", "properties": {
        "maxOpenConnections": {"type": "integer", "minimum": 0},
        "maxIdleConnections": {"type": "integer", "minimum": 0},
        "maxConnLifetime": string(),
        "maxConnIdleTime": string()
    }});
    spec
}

/// Every MySQL CRD, cluster-scoped and namespaced.
pub fn mysql_crds() -> Vec<Value> {
    group_crds([(MYSQL_GROUP, false), (MYSQL_NAMESPACED_GROUP, true)], super::MYSQL_KINDS.iter().map(|(k, p, _)| (*k, *p)), mysql_config_spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(crd: &Value, path: &str) -> Vec<String> {
        crd.pointer(path).and_then(Value::as_array).into_iter().flatten().filter_map(|c| c.get("name").or(Some(c)).and_then(Value::as_str).map(str::to_string)).collect()
    }

    /// Every kind of both databases, in both scopes, against upstream's kubebuilder markers:
    /// scope, categories and printer columns.
    #[test]
    fn kinds_columns_and_categories_are_upstreams() {
        let mut crds = postgresql_crds();
        crds.extend(mysql_crds());
        let managed_columns: &[(&str, &[&str])] = &[
            ("databases.postgresql", &["READY", "SYNCED", "AGE"]),
            ("roles.postgresql", &["READY", "SYNCED", "CONN LIMIT", "PRIVILEGES"]),
            ("grants.postgresql", &["READY", "SYNCED", "AGE", "ROLE", "MEMBER OF", "DATABASE", "PRIVILEGES"]),
            ("extensions.postgresql", &["READY", "SYNCED", "DATABASE", "EXTENSION", "VERSION", "AGE"]),
            ("schemas.postgresql", &["READY", "SYNCED", "AGE", "ROLE", "DATABASE"]),
            ("defaultprivileges.postgresql", &["READY", "SYNCED", "AGE", "ROLE", "TARGET_ROLE", "SCHEMA", "DATABASE", "PRIVILEGES"]),
            ("databases.mysql", &["READY", "SYNCED", "AGE"]),
            ("users.mysql", &["READY", "SYNCED", "AGE"]),
            ("grants.mysql", &["READY", "SYNCED", "AGE", "ROLE", "DATABASE", "PRIVILEGES"]),
        ];
        let mut seen = 0;
        for crd in &crds {
            let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let namespaced = name.contains(".sql.m.");
            let scope = crd.pointer("/spec/scope").and_then(Value::as_str).unwrap_or_default();
            let categories = names(crd, "/spec/names/categories");
            let columns = names(crd, "/spec/versions/0/additionalPrinterColumns");
            let short = name.split(".sql.").next().unwrap_or_default();
            if let Some((_, want)) = managed_columns.iter().find(|(k, _)| *k == short) {
                seen += 1;
                assert_eq!(columns, *want, "{name}");
                assert_eq!(categories, ["crossplane", "managed", "sql"], "{name}");
                assert_eq!(scope, if namespaced { "Namespaced" } else { "Cluster" }, "{name}");
            } else if short.starts_with("providerconfigusages.") {
                seen += 1;
                assert_eq!(columns, ["AGE", "CONFIG-NAME", "RESOURCE-KIND", "RESOURCE-NAME"], "{name}");
                assert_eq!(categories, ["crossplane", "provider", "sql"], "{name}");
            } else {
                seen += 1;
                assert!(short.starts_with("providerconfigs.") || short.starts_with("clusterproviderconfigs."), "{name}");
                assert_eq!(columns, ["AGE", "SECRET-NAME"], "{name}");
                assert_eq!(crd.pointer("/spec/versions/0/additionalPrinterColumns/1/priority"), Some(&json!(1)), "{name}");
                assert_eq!(categories, ["crossplane", "provider", "sql"], "{name}");
                assert_eq!(scope, if namespaced && short.starts_with("providerconfigs.") { "Namespaced" } else { "Cluster" }, "{name}");
            }
        }
        // Per group 6 (PostgreSQL) or 3 (MySQL) managed kinds, ProviderConfig and
        // ProviderConfigUsage, in two scopes, and one ClusterProviderConfig per namespaced group.
        assert_eq!(seen, 2 * (6 + 2) + 2 * (3 + 2) + 2);
        assert_eq!(crds.len(), seen);
    }

    #[test]
    fn mysql_user_has_upstreams_fields_and_rule() {
        let user = mysql_crds().into_iter().find(|c| c.pointer("/metadata/name") == Some(&json!("users.mysql.sql.m.crossplane.io"))).unwrap_or_default();
        let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/forProvider";
        let for_provider = user.pointer(spec).cloned().unwrap_or_default();
        for field in ["passwordSecretRef", "authenticationPlugin", "resourceOptions", "binlog", "passwordRotationTrigger"] {
            assert!(for_provider.pointer(&format!("/properties/{field}")).is_some(), "{field}");
        }
        assert!(for_provider.pointer("/x-kubernetes-validations/0/rule").and_then(Value::as_str).is_some_and(|r| r.contains("has(self.authenticationPlugin) && has(self.passwordSecretRef)")));
        let status = user.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/atProvider/properties").cloned().unwrap_or_default();
        assert_eq!(status.pointer("/authenticationPlugin/properties/authString/type"), Some(&json!("string")));
        assert!(status.get("lastPasswordChange").is_some() && status.get("resourceOptionsAsClauses").is_some());
    }
}
