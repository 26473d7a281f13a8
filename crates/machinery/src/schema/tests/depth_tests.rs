//! Depth limits: every operation on a schema and an object nested to the
//! maximum depth must fit in a modest thread stack (tokio workers get 2 MiB;
//! these tests allow 1 MiB, in debug builds), and deeper input must be
//! rejected with an error rather than a stack overflow.

use serde_json::{Value, json};

use crate::schema::{MAX_DEPTH, Schema, duplicate_fields, validate_structural};

/// A schema and object alternating objects and arrays, with junctors and defaults at every level.
fn nested(depth: usize) -> (Value, Value) {
    let mut s = json!({"type": "string", "default": "x"});
    let mut o = json!("v");
    for i in 1..depth {
        if i % 2 == 0 {
            s = json!({"type": "object", "properties": {"a": s}, "allOf": [{"properties": {"a": {}}}], "default": {}});
            o = json!({"a": o, "junk": 1});
        } else {
            s = json!({"type": "array", "items": s, "anyOf": [{"minItems": 0}]});
            o = json!([o]);
        }
    }
    (s, o)
}

/// A chain of `not` schemas, the deepest junctor nesting a schema can have.
fn not_chain(depth: usize) -> Value {
    let mut s = json!({"type": "string"});
    for _ in 1..depth {
        s = json!({"not": s});
    }
    s
}

fn in_small_stack(f: impl FnOnce() + Send + 'static) {
    let handle = std::thread::Builder::new().stack_size(1 << 20).spawn(f);
    match handle {
        Ok(h) => assert!(h.join().is_ok(), "operation panicked"),
        Err(e) => panic!("could not spawn: {e}"),
    }
}

#[test]
fn maximum_depth_fits_in_one_mebibyte_of_stack() {
    in_small_stack(|| {
        let (schema, object) = nested(MAX_DEPTH - 1);
        let Ok(s) = Schema::compile(&schema) else {
            panic!("should compile")
        };
        let _ = validate_structural(&schema);
        let mut o = object.clone();
        s.default(&mut o);
        let pruned = s.prune(&mut o);
        assert_eq!(pruned.len(), (MAX_DEPTH - 1) / 2);
        assert!(s.validate(&o).is_empty());
        let chain = not_chain(MAX_DEPTH);
        let Ok(c) = Schema::compile(&chain) else {
            panic!("should compile")
        };
        let _ = c.validate(&json!("s"));
        let _ = validate_structural(&chain);
        let text = "[".repeat(127) + &"]".repeat(127);
        assert!(duplicate_fields(text.as_bytes()).is_ok());
    });
}

#[test]
fn deeper_schemas_are_errors() {
    in_small_stack(|| {
        let (schema, _) = nested(MAX_DEPTH + 1);
        let err = Schema::compile(&schema)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("nesting exceeds the maximum depth of 128"),
            "{err}"
        );
        assert_eq!(validate_structural(&schema), vec![err]);
        assert!(Schema::compile(&not_chain(MAX_DEPTH + 1)).is_err());
    });
}
