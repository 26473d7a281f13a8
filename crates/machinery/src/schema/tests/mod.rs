//! Unit and property tests for the schema module, split by responsibility;
//! this file holds the shared helpers.

mod compile_tests;
mod crossplane_tests;
mod default_tests;
mod depth_tests;
mod format_tests;
mod props;
mod props_valid;
mod prune_tests;
mod strict_tests;
mod structural_tests;
mod validate_tests;

use serde_json::{Value, json};

use super::{FieldError, Schema};

/// Compiles a schema that the test knows to be valid.
pub(super) fn compile(schema: &Value) -> Schema {
    match Schema::compile(schema) {
        Ok(s) => s,
        Err(e) => panic!("schema should compile: {e}"),
    }
}

/// A root schema whose `spec` has the given properties, so errors get real paths like `spec.x`.
pub(super) fn spec_with(props: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": { "type": "object", "properties": props }
        }
    })
}

/// A custom resource with the given spec.
pub(super) fn object_with(spec: Value) -> Value {
    json!({
        "apiVersion": "example.org/v1",
        "kind": "Thing",
        "metadata": { "name": "t" },
        "spec": spec
    })
}

/// Errors rendered as `field: message`, sorted, for exact comparison.
pub(super) fn rendered(errors: &[FieldError]) -> Vec<String> {
    let mut v: Vec<String> = errors.iter().map(ToString::to_string).collect();
    v.sort();
    v
}
