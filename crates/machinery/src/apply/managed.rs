//! `metadata.managedFields` entries: the [`ManagedFieldsEntry`] model, its exact Kubernetes
//! JSON shape, parsing from an object, and the list bookkeeping shared by apply and update
//! (finding a manager's entry, trimming, dropping empty entries).

use serde_json::{Map, Value};

use super::ApplyError;
use super::fieldset::FieldSet;

/// The kind of write that produced a managedFields entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A server-side apply (`PATCH` with `application/apply-patch+yaml`).
    Apply,
    /// Any other write: create, update, or a non-apply patch.
    Update,
}

impl Operation {
    /// The wire spelling (`"Apply"` / `"Update"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry: which manager owns which fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedFieldsEntry {
    /// The field manager name.
    pub manager: String,
    /// The operation kind; entries are keyed by (manager, operation, subresource).
    pub operation: Operation,
    /// The API version the manager used for its last write.
    pub api_version: String,
    /// RFC 3339 time of the manager's last change, if known.
    pub time: Option<String>,
    /// The owned fields.
    pub fields: FieldSet,
    /// The subresource written through (e.g. `"status"`), if any.
    pub subresource: Option<String>,
}

fn invalid(msg: impl Into<String>) -> ApplyError {
    ApplyError::InvalidManagedFields(msg.into())
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, ApplyError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{key} must be a string"))),
    }
}

impl ManagedFieldsEntry {
    /// Whether this entry is the one for (manager, operation, subresource).
    pub fn is_for(&self, manager: &str, operation: Operation, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// Parses one entry. `operation` is required; `fieldsType`, when present, must be
    /// `FieldsV1`; a missing `fieldsV1` means no fields; other fields are optional strings.
    pub fn from_json(v: &Value) -> Result<ManagedFieldsEntry, ApplyError> {
        let obj = v
            .as_object()
            .ok_or_else(|| invalid("entry must be an object"))?;
        let operation = match opt_string(obj, "operation")?.as_deref() {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            Some(other) => {
                return Err(invalid(format!(
                    "operation must be Apply or Update, not {other:?}"
                )));
            }
            None => return Err(invalid("operation is required")),
        };
        match opt_string(obj, "fieldsType")?.as_deref() {
            None | Some("FieldsV1") => {}
            Some(other) => {
                return Err(invalid(format!(
                    "fieldsType must be FieldsV1, not {other:?}"
                )));
            }
        }
        let fields = match obj.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(f) => FieldSet::from_fields_v1(f)?,
        };
        Ok(ManagedFieldsEntry {
            manager: opt_string(obj, "manager")?.unwrap_or_default(),
            operation,
            api_version: opt_string(obj, "apiVersion")?.unwrap_or_default(),
            time: opt_string(obj, "time")?,
            fields,
            subresource: opt_string(obj, "subresource")?.filter(|s| !s.is_empty()),
        })
    }

    /// Serializes in Kubernetes' shape and field order: `manager`, `operation`, `apiVersion`,
    /// `time` (if set), `fieldsType`, `fieldsV1`, `subresource` (if set).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        m.insert(
            "operation".into(),
            Value::String(self.operation.as_str().into()),
        );
        m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        if let Some(t) = &self.time {
            m.insert("time".into(), Value::String(t.clone()));
        }
        m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), Value::String(s.clone()));
        }
        Value::Object(m)
    }
}

/// Reads `metadata.managedFields` from an object (absent or null means none).
pub fn parse_managed_fields(object: &Value) -> Result<Vec<ManagedFieldsEntry>, ApplyError> {
    match object.get("metadata").and_then(|m| m.get("managedFields")) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, e)| {
                ManagedFieldsEntry::from_json(e).map_err(|err| match err {
                    ApplyError::InvalidManagedFields(m) => invalid(format!("[{i}]: {m}")),
                    ApplyError::InvalidFieldsV1(m) => invalid(format!("[{i}].fieldsV1: {m}")),
                    other => other,
                })
            })
            .collect(),
        Some(_) => Err(invalid("must be a list")),
    }
}

/// Serializes entries as the `metadata.managedFields` JSON list.
pub fn managed_fields_to_json(entries: &[ManagedFieldsEntry]) -> Value {
    Value::Array(entries.iter().map(ManagedFieldsEntry::to_json).collect())
}

/// Folds duplicate (manager, operation, subresource) entries into the first one, so each
/// manager has one set to work with (stored data could hold duplicates; Kubernetes' own
/// decoder also treats them as one manager).
pub(crate) fn normalize(entries: &[ManagedFieldsEntry]) -> Vec<ManagedFieldsEntry> {
    let mut out: Vec<ManagedFieldsEntry> = Vec::with_capacity(entries.len());
    for e in entries {
        match out
            .iter_mut()
            .find(|o| o.is_for(&e.manager, e.operation, e.subresource.as_deref()))
        {
            Some(o) => o.fields = o.fields.union(&e.fields),
            None => out.push(e.clone()),
        }
    }
    out
}

/// Trims every entry to `present` and drops entries left empty.
pub(crate) fn trim(
    entries: Vec<ManagedFieldsEntry>,
    present: &FieldSet,
) -> Vec<ManagedFieldsEntry> {
    entries
        .into_iter()
        .map(|mut e| {
            e.fields = e.fields.intersection(present);
            e
        })
        .filter(|e| !e.fields.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entry_json_round_trip_in_kubernetes_shape() {
        let v = json!({"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
                       "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:spec": {"f:replicas": {}}}});
        let e = ManagedFieldsEntry::from_json(&v).unwrap();
        assert_eq!(e.operation, Operation::Apply);
        assert_eq!(e.subresource, None);
        assert_eq!(e.to_json(), v);
        assert_eq!(e.to_json().as_object().unwrap().len(), 6);
        let v = json!({"manager": "ctl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"});
        assert_eq!(ManagedFieldsEntry::from_json(&v).unwrap().to_json(), v);
    }

    #[test]
    fn malformed_entries_are_errors() {
        for bad in [
            json!(1),
            json!({"manager": "m"}),
            json!({"manager": "m", "operation": "Delete"}),
            json!({"manager": 1, "operation": "Apply"}),
            json!({"operation": "Apply", "fieldsType": "FieldsV2"}),
            json!({"operation": "Apply", "fieldsV1": {"bogus": {}}}),
            json!({"operation": "Apply", "time": 5}),
        ] {
            assert!(ManagedFieldsEntry::from_json(&bad).is_err(), "{bad}");
        }
        assert!(parse_managed_fields(&json!({"metadata": {"managedFields": {}}})).is_err());
        let err = parse_managed_fields(
            &json!({"metadata": {"managedFields": [{"operation": "Apply", "fieldsV1": []}]}}),
        )
        .unwrap_err();
        assert!(
            matches!(err, ApplyError::InvalidManagedFields(ref m) if m.starts_with("[0].fieldsV1")),
            "{err}"
        );
    }

    #[test]
    fn parses_object_managed_fields() {
        let obj = json!({"metadata": {"name": "x", "managedFields": [
            {"manager": "a", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}},
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:j": {}}}}
        ]}});
        let entries = parse_managed_fields(&obj).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            managed_fields_to_json(&entries),
            obj["metadata"]["managedFields"]
        );
        assert!(parse_managed_fields(&json!({})).unwrap().is_empty());
    }

    #[test]
    fn normalize_folds_duplicates() {
        let mk = |f: Value| ManagedFieldsEntry {
            manager: "m".into(),
            operation: Operation::Update,
            api_version: "v1".into(),
            time: None,
            fields: FieldSet::from_fields_v1(&f).unwrap(),
            subresource: None,
        };
        let out = normalize(&[mk(json!({"f:a": {}})), mk(json!({"f:b": {}}))]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].fields.to_fields_v1(), json!({"f:a": {}, "f:b": {}}));
    }
}
