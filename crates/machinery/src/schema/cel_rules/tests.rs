use super::{CelError, CelReason, CelValidator, convert::escape, go_quote};
use serde_json::{Value, json};

fn compile(schema: Value) -> CelValidator {
    match CelValidator::compile(&schema) {
        Ok(Some(v)) => v,
        Ok(None) => panic!("schema has no rules"),
        Err(e) => panic!("compile failed: {e:#?}"),
    }
}

fn compile_err(schema: Value) -> Vec<String> {
    match CelValidator::compile(&schema) {
        Err(e) => e,
        Ok(v) => panic!("expected compile errors, got {v:?}"),
    }
}

/// Root object schema with `spec` holding `spec_schema`.
fn with_spec(spec_schema: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
        }
    })
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "example.org/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec})
}

fn err(field: &str, message: &str) -> CelError {
    CelError {
        reason: CelReason::FieldValueInvalid,
        field: field.to_string(),
        message: message.to_string(),
    }
}

// ---------------------------------------------------------------- compile

#[test]
fn schema_without_rules_compiles_to_none() {
    let s = with_spec(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
    assert!(matches!(CelValidator::compile(&s), Ok(None)));
    assert!(matches!(CelValidator::compile(&json!({})), Ok(None)));
    assert!(matches!(CelValidator::compile(&json!(null)), Ok(None)));
    let empty_list = with_spec(json!({"type": "object", "x-kubernetes-validations": []}));
    assert!(matches!(CelValidator::compile(&empty_list), Ok(None)));
}

#[test]
fn rules_in_combinators_are_ignored() {
    let s = with_spec(json!({
        "type": "object",
        "allOf": [{"x-kubernetes-validations": [{"rule": "false"}]}],
        "anyOf": [{"x-kubernetes-validations": [{"rule": "false"}]}],
        "oneOf": [{"x-kubernetes-validations": [{"rule": "false"}]}],
        "not": {"x-kubernetes-validations": [{"rule": "false"}]},
    }));
    assert!(matches!(CelValidator::compile(&s), Ok(None)));
}

#[test]
fn syntax_error_names_the_schema_path() {
    let errs = compile_err(with_spec(json!({
        "type": "object",
        "properties": {"size": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self > 0"},
            {"rule": "self >"},
        ]}}
    })));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "openAPIV3Schema.properties[spec].properties[size].x-kubernetes-validations[1].rule: Invalid value: \"self >\": compilation failed: "
        ),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("Syntax error"), "{}", errs[0]);
}

#[test]
fn every_bad_rule_is_reported() {
    let errs = compile_err(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.a ==", "message": "x"}],
        "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "string",
                "x-kubernetes-validations": [{"rule": "(("}]}},
            "l": {"type": "array", "items": {"type": "string",
                "x-kubernetes-validations": [{"rule": ""}]}},
        }
    }));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(errs.iter().any(|e| e.starts_with(
        "openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: \"self.a ==\": compilation failed:"
    )));
    assert!(errs.iter().any(|e| e.starts_with(
        "openAPIV3Schema.properties[m].additionalProperties.x-kubernetes-validations[0].rule: Invalid value: \"((\": compilation failed:"
    )));
    assert!(
        errs.contains(
            &"openAPIV3Schema.properties[l].items.x-kubernetes-validations[0].rule: Required value"
                .to_string()
        )
    );
}

#[test]
fn bad_rule_fields_are_reported() {
    let errs = compile_err(with_spec(json!({
        "type": "object",
        "properties": {"x": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "true", "reason": "FieldValueWrong"},
            {"rule": "true", "fieldPath": ".nope"},
            {"rule": "true", "fieldPath": "x"},
            {"rule": "true", "optionalOldSelf": true},
            {"rule": "true", "messageExpression": "'a' +"},
            {"rule": "true", "message": "two\nlines"},
        ]
    })));
    let p = "openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(errs.len(), 6, "{errs:#?}");
    assert_eq!(
        errs[0],
        format!(
            "{p}[0].reason: Unsupported value: \"FieldValueWrong\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
        )
    );
    assert_eq!(
        errs[1],
        format!(
            "{p}[1].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path: does not refer to a valid field"
        )
    );
    assert_eq!(
        errs[2],
        format!(
            "{p}[2].fieldPath: Invalid value: \"x\": fieldPath must be a valid path: expected [ or . but got: x"
        )
    );
    assert_eq!(
        errs[3],
        format!(
            "{p}[3].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
        )
    );
    assert!(errs[4].starts_with(&format!(
        "{p}[4].messageExpression: Invalid value: \"'a' +\": messageExpression compilation failed:"
    )));
    assert_eq!(
        errs[5],
        format!(
            "{p}[5].message: Invalid value: \"two\\nlines\": message must not contain line breaks"
        )
    );
}

#[test]
fn transition_rules_below_uncorrelatable_lists_are_rejected() {
    let errs = compile_err(with_spec(json!({
        "type": "object",
        "properties": {"list": {"type": "array", "items": {
            "type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf"}]
        }}}
    })));
    assert_eq!(
        errs,
        vec![
            "openAPIV3Schema.properties[spec].properties[list].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[spec].properties[list]".to_string()
        ]
    );
}

#[test]
fn validator_is_send_sync_debug_clone() {
    fn assert_traits<T: Send + Sync + std::fmt::Debug + Clone + 'static>() {}
    assert_traits::<CelValidator>();
    let v = compile(with_spec(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "true"}, {"rule": "1 == 1"}]}),
    ));
    assert_eq!(v.rule_count(), 2);
    assert!(format!("{v:?}").contains("rules: 2"));
    let clone = v.clone();
    std::thread::spawn(move || assert!(clone.validate(&obj(json!({})), None).is_empty()))
        .join()
        .unwrap();
}

// ---------------------------------------------------------------- immutability / transition rules

fn immutable_name_schema() -> Value {
    with_spec(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "Value is immutable"}
            ]},
            "other": {"type": "string"}
        }
    }))
}

#[test]
fn immutable_string_field() {
    let v = compile(immutable_name_schema());
    let a = obj(json!({"name": "a", "other": "1"}));
    let b = obj(json!({"name": "b", "other": "1"}));
    let a2 = obj(json!({"name": "a", "other": "2"}));
    // create: transition rules skipped
    assert!(v.validate(&a, None).is_empty());
    // unchanged: ok
    assert!(v.validate(&a2, Some(&a)).is_empty());
    // changed
    assert_eq!(
        v.validate(&b, Some(&a)),
        vec![err(
            "spec.name",
            "Invalid value: \"string\": Value is immutable"
        )]
    );
    // field newly set on update: no correlated old value, skipped
    let none = obj(json!({"other": "1"}));
    assert!(v.validate(&a, Some(&none)).is_empty());
    // old object without spec at all
    assert!(
        v.validate(&a, Some(&json!({"metadata": {"name": "a"}})))
            .is_empty()
    );
}

#[test]
fn immutable_object() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"forProvider": {
            "type": "object",
            "properties": {"region": {"type": "string"}, "tags": {"type": "object", "additionalProperties": {"type": "string"}}},
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]
        }}
    })));
    let a = obj(json!({"forProvider": {"region": "eu", "tags": {"a": "1", "b": "2"}}}));
    let same = obj(json!({"forProvider": {"tags": {"b": "2", "a": "1"}, "region": "eu"}}));
    let changed = obj(json!({"forProvider": {"region": "eu", "tags": {"a": "1", "b": "3"}}}));
    assert!(v.validate(&a, None).is_empty());
    assert!(v.validate(&same, Some(&a)).is_empty());
    assert_eq!(
        v.validate(&changed, Some(&a)),
        vec![err(
            "spec.forProvider",
            "Invalid value: \"object\": Value is immutable"
        )]
    );
}

#[test]
fn state_cannot_leave_active() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"state": {"type": "string", "x-kubernetes-validations": [
            {"rule": "oldSelf != 'Active' || self == 'Active'", "message": "state cannot be changed once it becomes Active"}
        ]}}
    })));
    let pending = obj(json!({"state": "Pending"}));
    let active = obj(json!({"state": "Active"}));
    assert!(v.validate(&pending, None).is_empty());
    assert!(v.validate(&active, Some(&pending)).is_empty());
    assert!(v.validate(&active, Some(&active)).is_empty());
    assert_eq!(
        v.validate(&pending, Some(&active)),
        vec![err(
            "spec.state",
            "Invalid value: \"string\": state cannot be changed once it becomes Active"
        )]
    );
}

#[test]
fn optional_old_self() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"x": {"type": "string", "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self == oldSelf.value()", "message": "immutable once set", "optionalOldSelf": true},
            {"rule": "oldSelf.hasValue() || self.startsWith('new')", "message": "must start with new on create", "optionalOldSelf": true},
            {"rule": "oldSelf.orValue('') != 'locked'", "message": "locked", "optionalOldSelf": true},
        ]}}
    })));
    // create: runs with oldSelf = none
    assert!(v.validate(&obj(json!({"x": "new-1"})), None).is_empty());
    assert_eq!(
        v.validate(&obj(json!({"x": "other"})), None),
        vec![err(
            "spec.x",
            "Invalid value: \"string\": must start with new on create"
        )]
    );
    // update where the field was previously absent: none as well
    assert_eq!(
        v.validate(&obj(json!({"x": "other"})), Some(&obj(json!({})))),
        vec![err(
            "spec.x",
            "Invalid value: \"string\": must start with new on create"
        )]
    );
    // update: runs with oldSelf = optional.of(old)
    assert!(
        v.validate(
            &obj(json!({"x": "other"})),
            Some(&obj(json!({"x": "other"})))
        )
        .is_empty()
    );
    assert_eq!(
        v.validate(&obj(json!({"x": "b"})), Some(&obj(json!({"x": "locked"})))),
        vec![
            err("spec.x", "Invalid value: \"string\": immutable once set"),
            err("spec.x", "Invalid value: \"string\": locked"),
        ]
    );
}

#[test]
fn transition_rule_mixed_with_plain_rules_on_one_node() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self >= oldSelf", "message": "may not decrease"},
            {"rule": "self < 100", "message": "too big"},
            {"rule": "oldSelf.orValue(0) <= self", "message": "may not decrease (optional)", "optionalOldSelf": true},
        ]}}
    })));
    assert!(v.validate(&obj(json!({"n": 5})), None).is_empty());
    assert_eq!(
        v.validate(&obj(json!({"n": 500})), None),
        vec![err("spec.n", "Invalid value: \"integer\": too big")]
    );
    assert_eq!(
        v.validate(&obj(json!({"n": 4})), Some(&obj(json!({"n": 5})))),
        vec![
            err("spec.n", "Invalid value: \"integer\": may not decrease"),
            err(
                "spec.n",
                "Invalid value: \"integer\": may not decrease (optional)"
            ),
        ]
    );
}

// ---------------------------------------------------------------- Crossplane-style rules

#[test]
fn crossplane_spec_rules() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "claimNames": {"type": "object"},
            "resourceRef": {"type": "object"},
            "resourceSelector": {"type": "object"},
        },
        "x-kubernetes-validations": [
            {"rule": "!has(self.claimNames)", "message": "claimNames is not supported"},
            {"rule": "has(self.resourceRef) || has(self.resourceSelector)",
             "message": "either a resource reference or a resource selector should be set."},
        ]
    })));
    assert!(
        v.validate(&obj(json!({"resourceRef": {}})), None)
            .is_empty()
    );
    assert!(
        v.validate(&obj(json!({"resourceSelector": {}})), None)
            .is_empty()
    );
    assert_eq!(
        v.validate(&obj(json!({"claimNames": {}})), None),
        vec![
            err(
                "spec",
                "Invalid value: \"object\": claimNames is not supported"
            ),
            err(
                "spec",
                "Invalid value: \"object\": either a resource reference or a resource selector should be set."
            ),
        ]
    );
    // spec absent: rules on it do not run
    assert!(
        v.validate(&json!({"metadata": {"name": "x"}}), None)
            .is_empty()
    );
}

#[test]
fn composition_pipeline_mode() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "mode": {"type": "string"},
            "pipeline": {"type": "array", "items": {"type": "object"}},
        },
        "x-kubernetes-validations": [
            {"rule": "self.mode == 'Pipeline' && has(self.pipeline)", "message": "an array of pipeline steps is required in Pipeline mode"},
            {"rule": "!has(self.pipeline) || size(self.pipeline) > 0", "message": "pipeline must not be empty"},
            {"rule": "!has(self.pipeline) || self.pipeline.size() > 0", "message": "pipeline must not be empty (method)"},
        ]
    })));
    assert!(
        v.validate(
            &obj(json!({"mode": "Pipeline", "pipeline": [{"step": "a"}]})),
            None
        )
        .is_empty()
    );
    assert_eq!(
        v.validate(&obj(json!({"mode": "Pipeline", "pipeline": []})), None),
        vec![
            err(
                "spec",
                "Invalid value: \"object\": pipeline must not be empty"
            ),
            err(
                "spec",
                "Invalid value: \"object\": pipeline must not be empty (method)"
            ),
        ]
    );
    assert_eq!(
        v.validate(&obj(json!({"mode": "Resources"})), None),
        vec![err(
            "spec",
            "Invalid value: \"object\": an array of pipeline steps is required in Pipeline mode"
        )]
    );
}

#[test]
fn credentials_all_macro() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"credentials": {
            "type": "array",
            "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "source": {"type": "string"}, "secretRef": {"type": "object"}}},
            "x-kubernetes-validations": [
                {"rule": "self.all(s, s.source != 'Secret' || has(s.secretRef))", "message": "the Secret source requires a secretRef"}
            ]
        }}
    })));
    let ok = obj(json!({"credentials": [
        {"name": "a", "source": "None"},
        {"name": "b", "source": "Secret", "secretRef": {"name": "s"}},
    ]}));
    assert!(v.validate(&ok, None).is_empty());
    let bad = obj(json!({"credentials": [{"name": "a", "source": "Secret"}]}));
    assert_eq!(
        v.validate(&bad, None),
        vec![err(
            "spec.credentials",
            "Invalid value: \"array\": the Secret source requires a secretRef"
        )]
    );
}

#[test]
fn string_format_rules() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.matches('^[a-z]+$')", "message": "lowercase letters only"},
            {"rule": "self.lowerAscii() == self"},
        ]}}
    })));
    assert!(v.validate(&obj(json!({"name": "abc"})), None).is_empty());
    assert_eq!(
        v.validate(&obj(json!({"name": "aBc"})), None),
        vec![
            err(
                "spec.name",
                "Invalid value: \"string\": lowercase letters only"
            ),
            err(
                "spec.name",
                "Invalid value: \"string\": failed rule: self.lowerAscii() == self"
            ),
        ]
    );
}

// ---------------------------------------------------------------- placement: lists, maps, absence, null

fn list_map_schema() -> Value {
    with_spec(json!({
        "type": "object",
        "properties": {"ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "protocol"],
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "protocol": {"type": "string"},
                    "port": {"type": "integer"},
                },
                "x-kubernetes-validations": [
                    {"rule": "self.port == oldSelf.port", "message": "port is immutable"},
                    {"rule": "self.port > 0", "message": "port must be positive"},
                ]
            }
        }}
    }))
}

#[test]
fn list_map_items_correlate_by_keys() {
    let v = compile(list_map_schema());
    let old = obj(json!({"ports": [
        {"name": "http", "protocol": "TCP", "port": 80},
        {"name": "dns", "protocol": "UDP", "port": 53},
    ]}));
    // reordered, and a new item added: new item is not checked by the transition rule
    let new = obj(json!({"ports": [
        {"name": "new", "protocol": "TCP", "port": 9000},
        {"name": "dns", "protocol": "UDP", "port": 53},
        {"name": "http", "protocol": "TCP", "port": 80},
    ]}));
    assert!(v.validate(&new, Some(&old)).is_empty());
    // changed port on a correlated item (same name, same protocol)
    let changed = obj(json!({"ports": [
        {"name": "dns", "protocol": "UDP", "port": 5353},
        {"name": "dns", "protocol": "TCP", "port": 1},
    ]}));
    assert_eq!(
        v.validate(&changed, Some(&old)),
        vec![err(
            "spec.ports[0]",
            "Invalid value: \"object\": port is immutable"
        )]
    );
    // plain rule runs per item, with the item index in the path
    let negative = obj(json!({"ports": [
        {"name": "a", "protocol": "TCP", "port": 1},
        {"name": "b", "protocol": "TCP", "port": -1},
    ]}));
    assert_eq!(
        v.validate(&negative, None),
        vec![err(
            "spec.ports[1]",
            "Invalid value: \"object\": port must be positive"
        )]
    );
}

#[test]
fn atomic_list_items_run_per_element() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"list": {"type": "array", "items": {
            "type": "string",
            "x-kubernetes-validations": [{"rule": "self.size() <= 3", "message": "too long"}]
        }}}
    })));
    assert_eq!(
        v.validate(&obj(json!({"list": ["a", "abcd", "b", "efgh"]})), None),
        vec![
            err("spec.list[1]", "Invalid value: \"string\": too long"),
            err("spec.list[3]", "Invalid value: \"string\": too long"),
        ]
    );
}

#[test]
fn additional_properties_run_per_value_and_correlate_by_key() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"labels": {
            "type": "object",
            "additionalProperties": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self.size() < 5", "message": "value too long"},
                {"rule": "self == oldSelf", "message": "label values are immutable"},
            ]}
        }}
    })));
    let old = obj(json!({"labels": {"foo": "a", "bar": "b"}}));
    assert_eq!(
        v.validate(
            &obj(json!({"labels": {"foo": "a", "bar": "c", "new": "toolong"}})),
            Some(&old)
        ),
        vec![
            err(
                "spec.labels[bar]",
                "Invalid value: \"string\": label values are immutable"
            ),
            err(
                "spec.labels[new]",
                "Invalid value: \"string\": value too long"
            ),
        ]
    );
}

#[test]
fn absent_and_null_values_skip_rules() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "opt": {"type": "string", "nullable": true, "x-kubernetes-validations": [{"rule": "false"}]},
            "list": {"type": "array", "items": {"type": "string", "nullable": true,
                "x-kubernetes-validations": [{"rule": "self != ''"}]}},
        }
    })));
    assert!(v.validate(&obj(json!({})), None).is_empty());
    assert!(v.validate(&obj(json!({"opt": null})), None).is_empty());
    assert!(
        v.validate(&obj(json!({"list": [null, "a"]})), None)
            .is_empty()
    );
    assert_eq!(
        v.validate(&obj(json!({"opt": "x", "list": [null, ""]})), None),
        vec![
            err(
                "spec.list[1]",
                "Invalid value: \"string\": failed rule: self != ''"
            ),
            err("spec.opt", "Invalid value: \"string\": failed rule: false"),
        ]
    );
}

#[test]
fn root_rules_use_nil_field_and_restricted_metadata() {
    let v = compile(json!({
        "type": "object",
        "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}},
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('my-')", "message": "name must start with my-"},
            {"rule": "!has(self.metadata.labels)", "message": "labels are not visible to rules"},
            {"rule": "self.kind == 'Thing' && self.apiVersion.startsWith('example.org/')"},
        ]
    }));
    let o = json!({"apiVersion": "example.org/v1", "kind": "Thing",
        "metadata": {"name": "other", "labels": {"a": "b"}, "namespace": "ns"}, "spec": {}});
    assert_eq!(
        v.validate(&o, None),
        vec![err(
            "<nil>",
            "Invalid value: \"object\": name must start with my-"
        )]
    );
}

// ---------------------------------------------------------------- messages, reasons, fieldPath

#[test]
fn field_path_and_reasons() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "x": {"type": "string"},
            "nested": {"type": "object", "properties": {"a.b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "x-kubernetes-validations": [
            {"rule": "self.x != 'bad'", "message": "x must not be bad", "fieldPath": ".x", "reason": "FieldValueForbidden"},
            {"rule": "has(self.x)", "message": "x is required", "fieldPath": ".x", "reason": "FieldValueRequired"},
            {"rule": "false", "message": "dup", "fieldPath": ".nested['a.b']", "reason": "FieldValueDuplicate"},
            {"rule": "false", "message": "in map", "fieldPath": ".m.key1", "reason": "FieldValueInvalid"},
        ]
    })));
    let got = v.validate(&obj(json!({"x": "bad"})), None);
    assert_eq!(
        got,
        vec![
            CelError {
                reason: CelReason::FieldValueForbidden,
                field: "spec.x".into(),
                message: "Forbidden: x must not be bad".into()
            },
            CelError {
                reason: CelReason::FieldValueDuplicate,
                field: "spec.nested.a.b".into(),
                message: "Duplicate value: \"object\"".into()
            },
            err("spec.m[key1]", "Invalid value: \"object\": in map"),
        ]
    );
    // Without x: the first rule errors at run time (reported on the node,
    // not the fieldPath), the second reports Required on spec.x.
    let got = v.validate(&obj(json!({})), None);
    assert_eq!(
        got[0],
        err(
            "spec",
            "Invalid value: \"object\": no such key: x evaluating rule: x must not be bad"
        )
    );
    assert_eq!(
        got[1],
        CelError {
            reason: CelReason::FieldValueRequired,
            field: "spec.x".into(),
            message: "Required value: x is required".into()
        }
    );
    assert_eq!(
        CelReason::FieldValueForbidden.as_str(),
        "FieldValueForbidden"
    );
    assert_eq!(CelReason::default(), CelReason::FieldValueInvalid);
}

#[test]
fn field_path_on_root_rule() {
    let v = compile(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
        "x-kubernetes-validations": [{"rule": "self.spec.size > 0", "fieldPath": ".spec.size", "message": "must be positive"}]
    }));
    assert_eq!(
        v.validate(&json!({"spec": {"size": 0}}), None),
        vec![err(
            "spec.size",
            "Invalid value: \"object\": must be positive"
        )]
    );
}

#[test]
fn message_expression() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"size": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.size < 10", "messageExpression": "'size ' + string(self.size) + ' is too big'", "message": "static"},
            {"rule": "self.size < 10", "messageExpression": "self.missing", "message": "fallback on error"},
            {"rule": "self.size < 10", "messageExpression": "'  '", "message": "fallback on empty"},
            {"rule": "self.size < 10", "messageExpression": "42", "message": "fallback on non-string"},
            {"rule": "self.size < 10", "messageExpression": "self.missing"},
            {"rule": "self.size < 10", "messageExpression": "'  padded  '"},
        ]
    })));
    assert_eq!(
        v.validate(&obj(json!({"size": 12})), None),
        vec![
            err("spec", "Invalid value: \"object\": size 12 is too big"),
            err("spec", "Invalid value: \"object\": fallback on error"),
            err("spec", "Invalid value: \"object\": fallback on empty"),
            err("spec", "Invalid value: \"object\": fallback on non-string"),
            err(
                "spec",
                "Invalid value: \"object\": failed rule: self.size < 10"
            ),
            err("spec", "Invalid value: \"object\": padded"),
        ]
    );
}

#[test]
fn message_is_trimmed_and_default_message_uses_rule() {
    let v = compile(with_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "  false  "},
            {"rule": "false", "message": "  spaced  "},
        ]
    })));
    assert_eq!(
        v.validate(&obj(json!({})), None),
        vec![
            err("spec", "Invalid value: \"object\": failed rule: false"),
            err("spec", "Invalid value: \"object\": spaced"),
        ]
    );
}

// ---------------------------------------------------------------- runtime errors

#[test]
fn runtime_error_is_a_cause_not_a_panic() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "n": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.a == 'x'"},
            {"rule": "self.missing == 'x'", "message": "needs missing"},
            {"rule": "self.n / 0 == 1"},
            {"rule": "self.n + 'a' == 1"},
            {"rule": "[1][3] == 1"},
            {"rule": "self.n"},
            {"rule": "unknownVar == 1"},
            {"rule": "9223372036854775807 + self.n > 0"},
        ]
    })));
    let got = v.validate(&obj(json!({"a": "x", "n": 1})), None);
    let msgs: Vec<&str> = got.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        msgs,
        vec![
            "Invalid value: \"object\": no such key: missing evaluating rule: needs missing",
            "Invalid value: \"object\": division by zero evaluating rule: self.n / 0 == 1",
            "Invalid value: \"object\": 'no such overload: add applied to (int, string)': call arguments did not match a supported operator, function or macro signature for rule: self.n + 'a' == 1",
            "Invalid value: \"object\": index out of bounds: 3 evaluating rule: [1][3] == 1",
            "Invalid value: \"object\": rule evaluated to int, expected bool, evaluating rule: self.n",
            "Invalid value: \"object\": no such attribute: unknownVar evaluating rule: unknownVar == 1",
            "Invalid value: \"object\": integer overflow evaluating rule: 9223372036854775807 + self.n > 0",
        ]
    );
    assert!(
        got.iter()
            .all(|e| e.field == "spec" && e.reason == CelReason::FieldValueInvalid)
    );
}

#[test]
fn runtime_errors_use_node_path_not_field_path() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"x": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.x == 'a'", "fieldPath": ".x", "reason": "FieldValueForbidden"}]
    })));
    assert_eq!(
        v.validate(&obj(json!({})), None),
        vec![err(
            "spec",
            "Invalid value: \"object\": no such key: x evaluating rule: self.x == 'a'"
        )]
    );
}

// ---------------------------------------------------------------- value conversion

#[test]
fn number_types() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "d": {"type": "number"},
            "i": {"type": "integer"},
            "ios": {"x-kubernetes-int-or-string": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
        "x-kubernetes-validations": [
            {"rule": "type(self.d) == double", "message": "d double"},
            {"rule": "type(self.i) == int", "message": "i int"},
            {"rule": "!has(self.ios) || type(self.ios) == int || type(self.ios) == string", "message": "ios"},
            {"rule": "!has(self.free) || type(self.free.f) == double", "message": "free float"},
        ]
    })));
    assert!(
        v.validate(
            &obj(json!({"d": 1, "i": 2, "ios": 3, "free": {"f": 1.5}})),
            None
        )
        .is_empty()
    );
    assert!(
        v.validate(&obj(json!({"d": 1.5, "i": 2.0, "ios": "50%"})), None)
            .is_empty()
    );
    let v2 = compile(with_spec(json!({
        "type": "object",
        "properties": {"ios": {"x-kubernetes-int-or-string": true, "x-kubernetes-validations": [
            {"rule": "type(self) == string ? self.endsWith('%') : self >= 0", "message": "bad"}
        ]}}
    })));
    assert!(v2.validate(&obj(json!({"ios": "5%"})), None).is_empty());
    assert!(v2.validate(&obj(json!({"ios": 5})), None).is_empty());
    assert_eq!(
        v2.validate(&obj(json!({"ios": -1})), None),
        vec![err("spec.ios", "Invalid value: \"\": bad")]
    );
}

#[test]
fn property_name_escaping() {
    assert_eq!(escape("plain").as_deref(), Some("plain"));
    assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
    assert_eq!(escape("x-prop").as_deref(), Some("x__dash__prop"));
    assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
    assert_eq!(
        escape("redact__d").as_deref(),
        Some("redact__underscores__d")
    );
    assert_eq!(escape("___x").as_deref(), Some("__underscores___x"));
    assert_eq!(escape("1abc"), None);
    assert_eq!(escape("a b"), None);
    assert_eq!(escape(""), None);

    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "namespace": {"type": "string"},
            "x-prop": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "x-kubernetes-validations": [
            {"rule": "self.__namespace__ == 'ns' && self.x__dash__prop == 'p'", "message": "escaped"},
            {"rule": "self.labels['app.kubernetes.io/name'] == 'x'", "message": "map keys are not escaped"},
        ]
    })));
    assert!(
        v.validate(
            &obj(
                json!({"namespace": "ns", "x-prop": "p", "labels": {"app.kubernetes.io/name": "x"}})
            ),
            None
        )
        .is_empty()
    );
}

#[test]
fn library_functions() {
    let rules = [
        "self.s.upperAscii() == 'ABC'",
        "'  x '.trim() == 'x'",
        "'a,b'.split(',') == ['a', 'b']",
        "['a', 'b'].join('-') == 'a-b'",
        "self.s.indexOf('b') == 1",
        "self.l.isSorted() && ![3, 1].isSorted()",
        "type(self.s) == string",
        "int('3') == 3 && string(self.n) == '7'",
        "self.l.exists_one(x, x == 2) && self.l.exists(x, x > 2)",
        "self.l.map(x, x * 2) == [2, 4, 6]",
        "self.l.filter(x, x > 1).size() == 2",
        "'abc' in self.m && 2 in self.l",
        "self.s.contains('b') && self.s.startsWith('a') && self.s.endsWith('c')",
        "self.m.all(k, k.size() == 3)",
        "size(self.s) == 3 && self.s.size() == 3",
        "duration('1h') > duration('1m')",
    ];
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "s": {"type": "string"}, "n": {"type": "integer"},
            "l": {"type": "array", "items": {"type": "integer"}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "x-kubernetes-validations": rules.iter().map(|r| json!({"rule": r})).collect::<Vec<_>>(),
    })));
    let got = v.validate(
        &obj(json!({"s": "abc", "n": 7, "l": [1, 2, 3], "m": {"abc": "x"}})),
        None,
    );
    assert!(got.is_empty(), "{got:#?}");
}

#[test]
fn deeply_nested_values_do_not_overflow() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        "x-kubernetes-validations": [{"rule": "self == oldSelf"}, {"rule": "has(self.free)"}]
    })));
    // Deeper than MAX_DEPTH (serde_json's own parser stops at 128, but values
    // can be built in code).
    let mut deep = json!(1);
    for _ in 0..400 {
        deep = json!({"a": deep});
    }
    let o = obj(json!({"free": deep}));
    assert!(v.validate(&o, Some(&o)).is_empty());
}

#[test]
fn go_quoting() {
    assert_eq!(go_quote("object"), "\"object\"");
    assert_eq!(
        go_quote("a\"b\\c\nd\te\u{1}"),
        "\"a\\\"b\\\\c\\nd\\te\\x01\""
    );
}

#[test]
fn display_of_cel_error() {
    let e = err("spec", "Invalid value: \"object\": x");
    assert_eq!(e.to_string(), "spec: Invalid value: \"object\": x");
}

#[test]
fn nested_transition_rules_correlate_through_maps_and_list_maps() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {
            "byName": {"type": "object", "additionalProperties": {
                "type": "object",
                "properties": {"id": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "id is immutable"}
                ]}}
            }},
            "items": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "port": {"type": "integer", "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "port is immutable"}
                    ]}
                }}
            }
        }
    })));
    let old = obj(json!({
        "byName": {"a": {"id": "1"}, "b": {"id": "2"}},
        "items": [{"name": "x", "port": 1}, {"name": "y", "port": 2}],
    }));
    let new = obj(json!({
        "byName": {"a": {"id": "1"}, "b": {"id": "3"}, "c": {"id": "9"}},
        "items": [{"name": "y", "port": 3}, {"name": "x", "port": 1}, {"name": "z", "port": 5}],
    }));
    assert_eq!(
        v.validate(&new, Some(&old)),
        vec![
            err(
                "spec.byName[b].id",
                "Invalid value: \"string\": id is immutable"
            ),
            err(
                "spec.items[0].port",
                "Invalid value: \"integer\": port is immutable"
            ),
        ]
    );
    // old value of the wrong shape: nothing correlates, nothing fails
    assert!(
        v.validate(&new, Some(&obj(json!({"byName": [], "items": {}}))))
            .is_empty()
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("name".to_string()),
                        Just("port".to_string()),
                        "[a-z]{1,3}"
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn fuzz_validator() -> CelValidator {
        compile(with_spec(json!({
            "type": "object",
            "properties": {
                "s": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self.matches('^[a-z]*$') && self.lowerAscii() == self"},
                    {"rule": "self == oldSelf", "messageExpression": "'was ' + oldSelf"},
                ]},
                "n": {"type": "number", "x-kubernetes-validations": [{"rule": "self > 0.5"}]},
                "m": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true,
                    "x-kubernetes-validations": [{"rule": "self == oldSelf"}, {"rule": "string(self).size() < 3"}]}},
                "l": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object",
                        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                        "x-kubernetes-validations": [
                            {"rule": "self.port > oldSelf.port", "fieldPath": ".port", "reason": "FieldValueForbidden"},
                            {"rule": "!oldSelf.hasValue() || oldSelf.value() == self", "optionalOldSelf": true},
                        ]}
                },
            },
            "x-kubernetes-validations": [
                {"rule": "self.all(k, k.size() > 0)"},
                {"rule": "has(self.s) || self.size() >= 0", "messageExpression": "self.missing"},
                {"rule": "self.l.exists(i, i.port == 80)"},
                {"rule": "self.l.map(x, x.port).isSorted()"},
            ]
        })))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Arbitrary, mostly ill-typed objects never panic and give the same
        /// answer twice.
        #[test]
        fn arbitrary_input_never_panics(
            spec in arb_json(),
            old_spec in proptest::option::of(arb_json()),
            s in proptest::option::of(arb_json()),
            l in proptest::option::of(arb_json()),
        ) {
            let v = fuzz_validator();
            let mut spec = spec;
            if let Value::Object(m) = &mut spec {
                if let Some(s) = s { m.insert("s".into(), s); }
                if let Some(l) = l { m.insert("l".into(), l); }
            }
            let new = obj(spec);
            let old = old_spec.map(obj);
            let first = v.validate(&new, old.as_ref());
            let second = v.validate(&new, old.as_ref());
            prop_assert_eq!(&first, &second);
            for e in &first {
                prop_assert!(!e.field.is_empty());
                prop_assert!(!e.message.is_empty());
            }
        }

        /// Arbitrary rule text compiles or fails cleanly, never panics.
        #[test]
        fn arbitrary_rule_text_never_panics(rule in "[a-z.()'!=&|<> 0-9\\[\\]?:,+-]{0,40}") {
            let schema = with_spec(json!({
                "type": "object",
                "x-kubernetes-validations": [{"rule": rule}],
            }));
            if let Ok(Some(v)) = CelValidator::compile(&schema) {
                let _ = v.validate(&obj(json!({"a": 1})), Some(&obj(json!({"a": 2}))));
            }
        }
    }
}

/// Rough timing, run with `cargo test --release -- --ignored --nocapture timing`.
#[test]
#[ignore]
fn timing() {
    let v = compile(with_spec(json!({
        "type": "object",
        "properties": {"size": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self > 0", "message": "must be positive"}
        ]}, "big": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
    })));
    let big: serde_json::Map<String, Value> = (0..500)
        .map(|i| (format!("k{i}"), json!({"v": i, "s": "text"})))
        .collect();
    let o = obj(json!({"size": 3, "big": big}));
    let n = 20_000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        assert!(v.validate(&o, Some(&o)).is_empty());
    }
    println!(
        "1 leaf rule, 500-field sibling: {:?}/validate",
        t.elapsed() / n
    );
    let v2 = compile(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
        "x-kubernetes-validations": [{"rule": "self.spec.size > 0"}]
    }));
    let small = obj(json!({"size": 3}));
    let t = std::time::Instant::now();
    for _ in 0..n {
        assert!(v2.validate(&small, None).is_empty());
    }
    println!("1 root rule, small object: {:?}/validate", t.elapsed() / n);
}
