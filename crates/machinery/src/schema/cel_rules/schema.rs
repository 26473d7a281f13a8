//! Compile-time half: walks the raw schema JSON, compiles rules, and builds the
//! compact schema tree that evaluation and JSON-to-CEL conversion run on.

use super::{CelReason, go_quote};
use cel::common::types::{CelBool, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, Program};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

/// Deepest schema/value nesting we recurse into. Real CRDs stay far below it;
/// the cap keeps hostile or buggy input from overflowing the stack (our own
/// recursion, and the `cel` crate's recursive equality/drop of nested values).
pub(super) const MAX_DEPTH: usize = 128;

/// The whole compiled schema.
pub(super) struct Compiled {
    pub env: Arc<Env>,
    pub root: Node,
    pub rule_count: usize,
}

/// One schema node, reduced to what rule placement and value conversion need.
#[derive(Default)]
pub(super) struct Node {
    /// The schema's `type` ("" when absent, e.g. int-or-string); it is the
    /// "bad value" kube-apiserver prints in `Invalid value: "<type>"`.
    pub ty: String,
    pub properties: HashMap<String, Node>,
    pub additional: Option<Box<Node>>,
    pub items: Option<Box<Node>>,
    /// `x-kubernetes-list-map-keys` of an `x-kubernetes-list-type: map` list:
    /// the only lists whose items correlate with old items.
    pub list_map_keys: Option<Vec<String>>,
    pub rules: Vec<Rule>,
    /// Rules here or anywhere below: the walk skips subtrees without any.
    pub has_rules: bool,
    /// Transition rules here or below: only then is the old object consulted.
    pub needs_old: bool,
}

/// One compiled `x-kubernetes-validations` entry.
pub(super) struct Rule {
    /// The rule text, trimmed (what `failed rule: ...` prints).
    pub source: String,
    pub program: Program,
    /// The trimmed `message`, if set.
    pub message: Option<String>,
    pub message_expression: Option<Program>,
    pub reason: CelReason,
    /// Normalized `fieldPath` (e.g. `x.y` or `m[k]`), appended to the node path.
    pub field_path: Option<String>,
    pub uses_old_self: bool,
    pub optional_old_self: bool,
}

impl Rule {
    /// Kubernetes' `ruleErrorString`: the message if any, else the rule.
    pub fn error_string(&self) -> &str {
        self.message.as_deref().unwrap_or(&self.source)
    }
}

/// The shared CEL environment: standard library, the strings extension
/// (`lowerAscii`, `upperAscii`, `trim`, `split`, `join`, `indexOf`, ...), and
/// the Kubernetes list function `isSorted`. Built once per process.
fn env() -> Result<Arc<Env>, String> {
    static ENV: OnceLock<Result<Arc<Env>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .map_err(|e| e.to_string())?;
        env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(env))
    })
    .clone()
}

/// `list.isSorted()`: true when every element is <= the next one.
fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = args
        .first()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let iterable = list
        .as_iterable()
        .ok_or_else(|| ExecutionError::function_error("isSorted", "receiver is not a list"))?;
    let mut iter = iterable.iter();
    let mut prev: Option<&dyn Val> = None;
    while let Some(item) = iter.next() {
        if let Some(p) = prev {
            let comparer = p.as_comparer().ok_or_else(|| {
                ExecutionError::function_error("isSorted", "list elements are not comparable")
            })?;
            if comparer.compare(item)?.is_gt() {
                return Ok(CowVal::owned(CelBool::from(false)));
            }
        }
        prev = Some(item);
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

/// Compiles `source`, turning a panic inside the parser into an error: rule
/// text comes from CRD authors and must never take the server down.
fn compile_program(env: &Env, source: &str) -> Result<Program, String> {
    match catch_unwind(AssertUnwindSafe(|| env.compile(source))) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("internal error: the CEL parser panicked".to_string()),
    }
}

/// Entry point of [`super::CelValidator::compile`].
pub(super) fn compile(schema: &Json) -> Result<Option<Compiled>, Vec<String>> {
    // Cheap pre-scan so the common rule-less schema never builds anything.
    if !contains_rules(schema, 0) {
        return Ok(None);
    }
    let env = env().map_err(|e| vec![format!("openAPIV3Schema: Internal error: {e}")])?;
    let mut ctx = Builder {
        env: &env,
        errors: Vec::new(),
        rule_count: 0,
    };
    let mut path = String::from("openAPIV3Schema");
    let root = ctx.node(schema, &mut path, None, 0);
    if !ctx.errors.is_empty() {
        return Err(ctx.errors);
    }
    let rule_count = ctx.rule_count;
    if rule_count == 0 {
        return Ok(None);
    }
    Ok(Some(Compiled {
        env,
        root,
        rule_count,
    }))
}

/// Whether any `x-kubernetes-validations` entry sits where we would compile it.
fn contains_rules(s: &Json, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(obj) = s.as_object() else {
        return false;
    };
    if obj
        .get("x-kubernetes-validations")
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        return true;
    }
    obj.get("properties")
        .and_then(Json::as_object)
        .is_some_and(|p| p.values().any(|c| contains_rules(c, depth + 1)))
        || obj
            .get("additionalProperties")
            .is_some_and(|c| contains_rules(c, depth + 1))
        || obj
            .get("items")
            .is_some_and(|c| contains_rules(c, depth + 1))
}

struct Builder<'e> {
    env: &'e Env,
    errors: Vec<String>,
    rule_count: usize,
}

impl Builder<'_> {
    /// Builds the node for schema `s` found at schema path `path`.
    /// `uncorrelatable` is the schema path of the nearest enclosing list whose
    /// items cannot be correlated with old items (transition rules are
    /// forbidden below it, as in Kubernetes).
    fn node(
        &mut self,
        s: &Json,
        path: &mut String,
        uncorrelatable: Option<&str>,
        depth: usize,
    ) -> Node {
        let mut node = Node::default();
        let Some(obj) = s.as_object() else {
            return node;
        };
        if depth > MAX_DEPTH {
            self.errors.push(format!(
                "{path}: Invalid value: \"object\": schema nesting exceeds {MAX_DEPTH} levels"
            ));
            return node;
        }
        node.ty = obj
            .get("type")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string();

        let len = path.len();
        if let Some(props) = obj.get("properties").and_then(Json::as_object) {
            for (name, child) in props {
                path.push_str(".properties[");
                path.push_str(name);
                path.push(']');
                let c = self.node(child, path, uncorrelatable, depth + 1);
                path.truncate(len);
                node.properties.insert(name.clone(), c);
            }
        }
        if let Some(ap) = obj.get("additionalProperties").filter(|v| v.is_object()) {
            path.push_str(".additionalProperties");
            let c = self.node(ap, path, uncorrelatable, depth + 1);
            path.truncate(len);
            node.additional = Some(Box::new(c));
        }
        let is_map_list = obj.get("x-kubernetes-list-type").and_then(Json::as_str) == Some("map");
        if is_map_list {
            node.list_map_keys = Some(
                obj.get("x-kubernetes-list-map-keys")
                    .and_then(Json::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(|k| k.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
            // Without keys nothing can be matched: treat the items as uncorrelated.
            .filter(|keys: &Vec<String>| !keys.is_empty());
        }
        if let Some(items) = obj.get("items").filter(|v| v.is_object()) {
            let list_path = path.clone();
            let below = if is_map_list {
                uncorrelatable
            } else {
                Some(list_path.as_str())
            };
            path.push_str(".items");
            let c = self.node(items, path, below, depth + 1);
            path.truncate(len);
            node.items = Some(Box::new(c));
        }

        if let Some(rules) = obj.get("x-kubernetes-validations").and_then(Json::as_array) {
            for (i, raw) in rules.iter().enumerate() {
                let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
                if let Some(rule) = self.rule(raw, &rule_path, &node, uncorrelatable) {
                    node.rules.push(rule);
                    self.rule_count += 1;
                }
            }
        }

        let children = node
            .properties
            .values()
            .chain(node.additional.as_deref())
            .chain(node.items.as_deref());
        let (mut has_rules, mut needs_old) = (false, false);
        for c in children {
            has_rules |= c.has_rules;
            needs_old |= c.needs_old;
        }
        node.has_rules = has_rules || !node.rules.is_empty();
        node.needs_old = needs_old || node.rules.iter().any(|r| r.uses_old_self);
        node
    }

    /// Compiles one rule object; records errors and returns None if it is bad.
    fn rule(
        &mut self,
        raw: &Json,
        path: &str,
        node: &Node,
        uncorrelatable: Option<&str>,
    ) -> Option<Rule> {
        let errors_before = self.errors.len();
        let Some(obj) = raw.as_object() else {
            self.errors.push(format!(
                "{path}: Invalid value: {}: must be an object",
                go_quote(&raw.to_string())
            ));
            return None;
        };
        let source = obj.get("rule").and_then(Json::as_str).unwrap_or_default();
        let mut program = None;
        let mut uses_old_self = false;
        if source.trim().is_empty() {
            self.errors.push(format!("{path}.rule: Required value"));
        } else {
            match compile_program(self.env, source) {
                Ok(p) => {
                    uses_old_self = p.references().has_variable("oldSelf");
                    program = Some(p);
                }
                Err(e) => self.errors.push(format!(
                    "{path}.rule: Invalid value: {}: compilation failed: {e}",
                    go_quote(source)
                )),
            }
        }
        if uses_old_self && let Some(list) = uncorrelatable {
            self.errors.push(format!(
                "{path}.rule: Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {list}",
                go_quote(source)
            ));
        }

        let message = match obj.get("message") {
            None | Some(Json::Null) => None,
            Some(Json::String(m)) if m.trim().is_empty() && !m.is_empty() => {
                self.errors.push(format!(
                    "{path}.message: Invalid value: {}: message must be non-empty if specified",
                    go_quote(m)
                ));
                None
            }
            Some(Json::String(m)) if m.contains('\n') => {
                self.errors.push(format!(
                    "{path}.message: Invalid value: {}: message must not contain line breaks",
                    go_quote(m)
                ));
                None
            }
            Some(Json::String(m)) => Some(m.trim().to_string()).filter(|m| !m.is_empty()),
            Some(other) => {
                self.errors.push(format!(
                    "{path}.message: Invalid value: {}: must be a string",
                    go_quote(&other.to_string())
                ));
                None
            }
        };

        let mut message_expression = None;
        match obj.get("messageExpression") {
            None | Some(Json::Null) => {}
            Some(Json::String(m)) if m.trim().is_empty() => {}
            Some(Json::String(m)) => match compile_program(self.env, m) {
                Ok(p) => message_expression = Some(p),
                Err(e) => self.errors.push(format!(
                    "{path}.messageExpression: Invalid value: {}: messageExpression compilation failed: {e}",
                    go_quote(m)
                )),
            },
            Some(other) => self.errors.push(format!(
                "{path}.messageExpression: Invalid value: {}: must be a string",
                go_quote(&other.to_string())
            )),
        }

        let reason = match obj.get("reason") {
            None | Some(Json::Null) => CelReason::FieldValueInvalid,
            Some(r) => match r.as_str().and_then(CelReason::parse) {
                Some(r) => r,
                None => {
                    let shown = r.as_str().map_or_else(|| r.to_string(), str::to_string);
                    self.errors.push(format!(
                        "{path}.reason: Unsupported value: {}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                        go_quote(&shown)
                    ));
                    CelReason::FieldValueInvalid
                }
            },
        };

        let field_path = match obj.get("fieldPath") {
            None | Some(Json::Null) => None,
            Some(Json::String(fp)) if fp.is_empty() => None,
            Some(Json::String(fp)) => match normalize_field_path(fp, node) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.errors.push(format!(
                        "{path}.fieldPath: Invalid value: {}: fieldPath must be a valid path: {e}",
                        go_quote(fp)
                    ));
                    None
                }
            },
            Some(other) => {
                self.errors.push(format!(
                    "{path}.fieldPath: Invalid value: {}: must be a string",
                    go_quote(&other.to_string())
                ));
                None
            }
        };

        let optional_old_self = obj
            .get("optionalOldSelf")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        if optional_old_self && program.is_some() && !uses_old_self {
            self.errors.push(format!(
                "{path}.optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
            ));
        }

        if self.errors.len() != errors_before {
            return None;
        }
        Some(Rule {
            source: source.trim().to_string(),
            program: program?,
            message,
            message_expression,
            reason,
            field_path,
            uses_old_self,
            optional_old_self,
        })
    }
}

/// Validates a rule's `fieldPath` (`.a.b`, `['a.b']`, keys of
/// additionalProperties maps) against the schema below `node` and returns it
/// in Kubernetes field-path form (`a.b`, `m[k]`).
pub(super) fn normalize_field_path(fp: &str, node: &Node) -> Result<String, String> {
    let mut out = String::new();
    let mut schema = node;
    let mut rest = fp;
    while !rest.is_empty() {
        let (name, after) = if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', ']']).unwrap_or(r.len());
            if end == 0 {
                return Err("unexpected end of JSON path".to_string());
            }
            (r[..end].to_string(), &r[end..])
        } else if let Some(r) = rest.strip_prefix('[') {
            let (name, after) = quoted(r)?;
            let after = after
                .strip_prefix(']')
                .ok_or_else(|| "expected ] after quoted string".to_string())?;
            (name, after)
        } else {
            let tok: String = rest
                .chars()
                .take_while(|c| !matches!(c, '.' | '['))
                .collect();
            return Err(format!("expected [ or . but got: {tok}"));
        };
        if !schema.properties.is_empty() {
            schema = schema
                .properties
                .get(&name)
                .ok_or_else(|| "does not refer to a valid field".to_string())?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(ap) = schema.additional.as_deref() {
            schema = ap;
            out.push('[');
            out.push_str(&name);
            out.push(']');
        } else {
            return Err("does not refer to a valid field".to_string());
        }
        rest = after;
    }
    Ok(out)
}

/// Parses a single-quoted string at the start of `s` (Kubernetes only accepts
/// single quotes in fieldPath brackets) and returns it unescaped plus the rest.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let body = s.strip_prefix('\'').ok_or_else(|| {
        let tok: String = s.chars().take_while(|c| *c != ']').collect();
        format!("expected single quoted string but got {tok}")
    })?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => return Ok((out, &body[i + 1..])),
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                out.push(match e {
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{b}',
                    '\'' => '\'',
                    '\\' => '\\',
                    other => {
                        return Err(format!(
                            "invalid string literal: invalid escape char \\{other}"
                        ));
                    }
                });
            }
            c => out.push(c),
        }
    }
    Err("unexpected end of JSON path".to_string())
}
