//! Evaluation half: walks an object (and its correlated old object) along the
//! compiled schema tree, runs the rules, and renders kube-apiserver-shaped
//! causes.

use super::convert::to_val;
use super::schema::{Compiled, MAX_DEPTH, Node, Rule};
use super::{CelError, CelReason, go_quote};
use cel::common::types::CelOptional;
use cel::{Context, Env, ExecutionError, Program, Value};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// Entry point of [`super::CelValidator::validate`].
pub(super) fn validate(c: &Compiled, new: &Json, old: Option<&Json>) -> Vec<CelError> {
    let mut w = Walker {
        env: &c.env,
        errors: Vec::new(),
        path: String::new(),
    };
    w.walk(&c.root, new, old, true, 0);
    w.errors
}

struct Walker<'e> {
    env: &'e Arc<Env>,
    errors: Vec<CelError>,
    /// Kubernetes field path of the current node (`spec.list[2]`); empty at the root.
    path: String,
}

/// Outcome of running one program.
enum Outcome {
    Value(Value),
    Error(String),
}

impl Walker<'_> {
    fn walk(&mut self, node: &Node, new: &Json, old: Option<&Json>, root: bool, depth: usize) {
        // Rules never see null (nullable fields): Kubernetes validates only
        // non-null values.
        if new.is_null() || depth > MAX_DEPTH {
            return;
        }
        // Only consult the old object where a transition rule needs it.
        let old = old.filter(|o| node.needs_old && !o.is_null());
        if !node.rules.is_empty() {
            self.run_rules(node, new, old, root);
        }
        let len = self.path.len();
        match new {
            Json::Object(fields) => {
                let old_fields = old.and_then(Json::as_object);
                for (k, v) in fields {
                    let (child, named) = match node.properties.get(k) {
                        Some(c) => (c, true),
                        None => match node.additional.as_deref() {
                            Some(c) => (c, false),
                            None => continue,
                        },
                    };
                    if !child.has_rules {
                        continue;
                    }
                    if named {
                        if !self.path.is_empty() {
                            self.path.push('.');
                        }
                        self.path.push_str(k);
                    } else {
                        self.path.push('[');
                        self.path.push_str(k);
                        self.path.push(']');
                    }
                    let old_v = old_fields.and_then(|o| o.get(k));
                    self.walk(child, v, old_v, false, depth + 1);
                    self.path.truncate(len);
                }
            }
            Json::Array(items) => {
                let Some(item_node) = node.items.as_deref().filter(|n| n.has_rules) else {
                    return;
                };
                let old_items = match (&node.list_map_keys, old) {
                    (Some(keys), Some(Json::Array(old_items))) if item_node.needs_old => {
                        Some(OldItems::new(keys, old_items))
                    }
                    _ => None,
                };
                for (i, v) in items.iter().enumerate() {
                    self.path.push('[');
                    self.path.push_str(&i.to_string());
                    self.path.push(']');
                    let old_v = old_items.as_ref().and_then(|o| o.get(v));
                    self.walk(item_node, v, old_v, false, depth + 1);
                    self.path.truncate(len);
                }
            }
            _ => {}
        }
    }

    /// Runs every rule of `node` against one value. `self` (and `oldSelf`)
    /// are converted once and shared by all the node's rules.
    fn run_rules(&mut self, node: &Node, new: &Json, old: Option<&Json>, root: bool) {
        let mut ctx = Context::with_env(Arc::clone(self.env));
        ctx.add_variable_as_val("self", to_val(new, Some(node), root));

        // Child scopes: one where `oldSelf` is the plain old value (only when
        // there is one), one where it is an optional (for optionalOldSelf).
        let mut plain = ctx.new_inner_scope();
        let has_plain = match old {
            Some(o) if node.rules.iter().any(|r| r.uses_old_self) => {
                plain.add_variable_as_val("oldSelf", to_val(o, Some(node), root));
                true
            }
            _ => false,
        };
        let mut optional = ctx.new_inner_scope();
        if node.rules.iter().any(|r| r.optional_old_self) {
            let opt = match old {
                Some(o) => CelOptional::of(to_val(o, Some(node), root)),
                None => CelOptional::none(),
            };
            optional.add_variable_as_val("oldSelf", Box::new(opt));
        }

        for rule in &node.rules {
            let scope = if rule.optional_old_self {
                &optional
            } else if rule.uses_old_self {
                if !has_plain {
                    // Transition rules need a correlated old value.
                    continue;
                }
                &plain
            } else {
                &ctx
            };
            match execute(&rule.program, scope) {
                Outcome::Value(Value::Bool(true)) => {}
                Outcome::Value(Value::Bool(false)) => {
                    // Kubernetes evaluates messageExpression with the plain
                    // activation (oldSelf only when an old value exists).
                    let msg_scope = if has_plain { &plain } else { &ctx };
                    let detail = rule
                        .message_expression
                        .as_ref()
                        .and_then(|m| message_expression(m, msg_scope))
                        .unwrap_or_else(|| match &rule.message {
                            Some(m) => m.clone(),
                            None => format!("failed rule: {}", rule.source),
                        });
                    let field = self.rule_field(rule);
                    self.errors
                        .push(cause(rule.reason, field, &node.ty, &detail));
                }
                Outcome::Value(other) => {
                    let detail = format!(
                        "rule evaluated to {}, expected bool, evaluating rule: {}",
                        other.type_of(),
                        rule.error_string()
                    );
                    let field = self.node_field();
                    self.errors.push(cause(
                        CelReason::FieldValueInvalid,
                        field,
                        &node.ty,
                        &detail,
                    ));
                }
                Outcome::Error(detail) => {
                    let detail = runtime_error_detail(detail, rule);
                    let field = self.node_field();
                    self.errors.push(cause(
                        CelReason::FieldValueInvalid,
                        field,
                        &node.ty,
                        &detail,
                    ));
                }
            }
        }
    }

    /// The node path as Kubernetes prints it: `<nil>` for the root.
    fn node_field(&self) -> String {
        if self.path.is_empty() {
            "<nil>".to_string()
        } else {
            self.path.clone()
        }
    }

    /// The node path with the rule's normalized `fieldPath` appended.
    fn rule_field(&self, rule: &Rule) -> String {
        match (&rule.field_path, self.path.is_empty()) {
            (None, _) => self.node_field(),
            (Some(fp), true) => fp.clone(),
            (Some(fp), false) => format!("{}.{fp}", self.path),
        }
    }
}

/// Runs a program, turning a panic inside the `cel` crate into an error so
/// that no object can take the server down.
fn execute(program: &Program, ctx: &Context) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| program.execute(ctx))) {
        Ok(Ok(v)) => Outcome::Value(v),
        Ok(Err(e)) => Outcome::Error(error_text(&e)),
        Err(_) => Outcome::Error("internal error: the CEL interpreter panicked".to_string()),
    }
}

/// A successful messageExpression result: a non-empty single-line string
/// (trimmed), as Kubernetes requires; anything else falls back to `message`.
fn message_expression(program: &Program, ctx: &Context) -> Option<String> {
    match execute(program, ctx) {
        Outcome::Value(Value::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n') && s.len() <= 5000).then(|| s.to_string())
        }
        _ => None,
    }
}

/// The cause detail for a rule that failed to evaluate, worded as
/// kube-apiserver words it.
fn runtime_error_detail(err: String, rule: &Rule) -> String {
    if err.starts_with("no such overload") {
        format!(
            "'{err}': call arguments did not match a supported operator, function or macro signature for rule: {}",
            rule.error_string()
        )
    } else {
        format!("{err} evaluating rule: {}", rule.error_string())
    }
}

/// Error text in cel-go's wording where the `cel` crate's differs, since
/// that is what users of kube-apiserver see (e.g. `no such key: foo`).
fn error_text(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(i) => match i {
            Value::Int(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        ExecutionError::NoSuchOverload(o) => format!("no such overload: {o}"),
        ExecutionError::UnsupportedBinaryOperator(op, l, r) => format!(
            "no such overload: {op} applied to ({}, {})",
            l.type_of(),
            r.type_of()
        ),
        ExecutionError::UndeclaredReference(name) => {
            format!("no such attribute: {name}")
        }
        other => {
            let s = other.to_string();
            let mut chars = s.chars();
            match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => s,
            }
        }
    }
}

/// Renders a cause like `field.Error.ErrorBody()` does for each reason.
/// `ty` is the schema type (kube-apiserver's "bad value" for CEL errors).
fn cause(reason: CelReason, field: String, ty: &str, detail: &str) -> CelError {
    let message = match reason {
        CelReason::FieldValueInvalid => format!("Invalid value: {}: {detail}", go_quote(ty)),
        CelReason::FieldValueForbidden => format!("Forbidden: {detail}"),
        CelReason::FieldValueRequired => format!("Required value: {detail}"),
        // field.Duplicate carries no detail in Kubernetes.
        CelReason::FieldValueDuplicate => format!("Duplicate value: {}", go_quote(ty)),
    };
    CelError {
        reason,
        field,
        message,
    }
}

/// Old items of an `x-kubernetes-list-type: map` list, indexed by their map
/// keys, so each new item finds its old counterpart in O(1).
struct OldItems<'o, 'k> {
    keys: &'k [String],
    by_key: HashMap<Vec<Option<String>>, &'o Json>,
}

impl<'o, 'k> OldItems<'o, 'k> {
    fn new(keys: &'k [String], items: &'o [Json]) -> Self {
        let mut by_key = HashMap::with_capacity(items.len());
        for item in items {
            if let Some(k) = item_key(keys, item) {
                // First occurrence wins, like a linear search would.
                by_key.entry(k).or_insert(item);
            }
        }
        OldItems { keys, by_key }
    }

    fn get(&self, new_item: &Json) -> Option<&'o Json> {
        item_key(self.keys, new_item).and_then(|k| self.by_key.get(&k).copied())
    }
}

/// The map-key tuple of a list item (JSON text of each key's value; None for
/// an absent key), or None when the item is not an object.
fn item_key(keys: &[String], item: &Json) -> Option<Vec<Option<String>>> {
    let obj = item.as_object()?;
    Some(
        keys.iter()
            .map(|k| obj.get(k).map(Json::to_string))
            .collect(),
    )
}
