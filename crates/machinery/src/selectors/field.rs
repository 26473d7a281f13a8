//! Field selectors: parsing, escaping, evaluation through a caller-supplied field lookup.
//!
//! Like kube-apiserver's `fields.ParseSelector`, no whitespace is trimmed and field names are
//! not validated here: which fields exist is the resource's business, checked by the caller
//! through [`FieldSelector::requirements`] or [`FieldSelector::check_supported`].

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::error::SelectorError;

/// The comparison a field requirement performs (`==` parses as `Equals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FieldOperator {
    /// `field=value` or `field==value`.
    Equals,
    /// `field!=value`.
    NotEquals,
}

impl FieldOperator {
    /// The operator as it is printed in the canonical string form.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        }
    }
}

/// One `field <op> value` condition; the value is stored unescaped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldRequirement {
    field: String,
    operator: FieldOperator,
    value: String,
}

impl FieldRequirement {
    /// Builds a requirement from a field path, an operator and an unescaped value.
    pub fn new(
        field: impl Into<String>,
        operator: FieldOperator,
        value: impl Into<String>,
    ) -> Self {
        FieldRequirement {
            field: field.into(),
            operator,
            value: value.into(),
        }
    }

    /// The field path, e.g. `metadata.name`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The comparison performed.
    pub fn operator(&self) -> FieldOperator {
        self.operator
    }

    /// The unescaped value compared against.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Evaluates against the field's value; an absent field compares as "" like in Kubernetes.
    pub fn matches_value(&self, actual: Option<&str>) -> bool {
        let equal = actual.unwrap_or("") == self.value;
        match self.operator {
            FieldOperator::Equals => equal,
            FieldOperator::NotEquals => !equal,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.field,
            self.operator.as_str(),
            escape_value(&self.value)
        )
    }
}

/// A conjunction of field requirements, as received in the `fieldSelector` query parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// A selector with no requirements, which matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses the string form used by the `fieldSelector` query parameter.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut terms = split_terms(input);
        // Kubernetes sorts the raw terms first; doing the same keeps the canonical print order
        // and the choice of which error is reported identical.
        terms.sort_unstable();
        let mut requirements = Vec::with_capacity(terms.len());
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let Some((field, operator, raw_value)) = split_term(term) else {
                return Err(SelectorError::InvalidFieldSelector(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                )));
            };
            let value = unescape_value(raw_value)?;
            requirements.push(FieldRequirement::new(field, operator, value));
        }
        Ok(FieldSelector { requirements })
    }

    /// Builds a selector from requirements, kept in the given order.
    pub fn from_requirements(requirements: Vec<FieldRequirement>) -> Self {
        FieldSelector { requirements }
    }

    /// The requirements; all must hold for a match.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// True when the selector has no requirements and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Evaluates using `lookup` to resolve a field path to its value (`None` when absent).
    pub fn matches(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches_value(lookup(&r.field).as_deref()))
    }

    /// Evaluates against a JSON object, resolving each field path with [`field_value`].
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(|path| field_value(object, path))
    }

    /// The value `field` must equal, if the selector pins it with `=`/`==` (useful for indexes).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.operator == FieldOperator::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Fails with `field label not supported: <field>` for the first field `is_supported` rejects.
    pub fn check_supported(
        &self,
        is_supported: impl Fn(&str) -> bool,
    ) -> Result<(), SelectorError> {
        match self.requirements.iter().find(|r| !is_supported(&r.field)) {
            Some(r) => Err(SelectorError::UnsupportedField(r.field.clone())),
            None => Ok(()),
        }
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Splits on commas that are not escaped by a preceding backslash.
fn split_terms(input: &str) -> Vec<&str> {
    if input.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(input.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(input.get(start..).unwrap_or(""));
    terms
}

/// Splits a term at the leftmost operator; at one position `!=` and `==` win over `=`.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    let bytes = term.as_bytes();
    for i in 0..bytes.len() {
        let (operator, len) = match (bytes.get(i), bytes.get(i + 1)) {
            (Some(b'!'), Some(b'=')) => (FieldOperator::NotEquals, 2),
            (Some(b'='), Some(b'=')) => (FieldOperator::Equals, 2),
            (Some(b'='), _) => (FieldOperator::Equals, 1),
            _ => continue,
        };
        return Some((term.get(..i)?, operator, term.get(i + len..)?));
    }
    None
}

/// Escapes `\`, `,` and `=` so a value can be embedded in a field selector string.
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reverses [`escape_value`], rejecting unknown escapes and bare `,`/`=` as Kubernetes does.
pub fn unescape_value(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => out.push(escaped),
                Some(other) => {
                    return Err(SelectorError::InvalidFieldSelector(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    )));
                }
                None => {
                    return Err(SelectorError::InvalidFieldSelector(
                        "invalid field selector: invalid escape sequence: \\".to_string(),
                    ));
                }
            },
            // Kubernetes prints the code point number here; the character itself is clearer.
            ',' | '=' => {
                return Err(SelectorError::InvalidFieldSelector(format!(
                    "invalid field selector: unescaped character in value: '{c}'"
                )));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Resolves a dotted path (e.g. `involvedObject.kind`) in a JSON object to a selector value.
///
/// Strings are returned as-is and numbers/booleans as their JSON text; a missing path, `null`,
/// an object or an array yields `None`, which field selectors compare as the empty string.
pub fn field_value(object: &Value, path: &str) -> Option<String> {
    let mut current = object;
    for segment in path.split('.') {
        current = current.as_object()?.get(segment)?;
    }
    match current {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> FieldSelector {
        match FieldSelector::parse(s) {
            Ok(selector) => selector,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    fn error(s: &str) -> String {
        match FieldSelector::parse(s) {
            Ok(selector) => panic!("{s:?} should fail, got {selector:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |field| {
            pairs
                .iter()
                .find(|(k, _)| *k == field)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn parses_each_operator() {
        let selector = parse("a=1,b==2,c!=3");
        let ops: Vec<_> = selector
            .requirements()
            .iter()
            .map(|r| (r.field(), r.operator(), r.value()))
            .collect();
        assert_eq!(
            ops,
            vec![
                ("a", FieldOperator::Equals, "1"),
                ("b", FieldOperator::Equals, "2"),
                ("c", FieldOperator::NotEquals, "3"),
            ]
        );
        assert_eq!(selector.to_string(), "a=1,b=2,c!=3");
    }

    #[test]
    fn evaluates_with_lookup() {
        let selector = parse("metadata.name=web,status.phase!=Failed");
        assert!(selector.matches(lookup(&[
            ("metadata.name", "web"),
            ("status.phase", "Running")
        ])));
        assert!(selector.matches(lookup(&[("metadata.name", "web")])));
        assert!(!selector.matches(lookup(&[
            ("metadata.name", "web"),
            ("status.phase", "Failed")
        ])));
        assert!(!selector.matches(lookup(&[("metadata.name", "db")])));
    }

    #[test]
    fn absent_field_compares_as_empty_string() {
        assert!(parse("spec.nodeName=").matches(|_| None));
        assert!(parse("spec.nodeName==").matches(|_| None));
        assert!(!parse("spec.nodeName!=").matches(|_| None));
        assert!(parse("spec.nodeName!=node1").matches(|_| None));
        assert!(!parse("spec.nodeName=node1").matches(|_| None));
    }

    #[test]
    fn empty_selector_and_empty_terms() {
        assert!(parse("").is_empty());
        assert!(parse("").matches(|_| None));
        assert_eq!(parse(",a=b,,").requirements().len(), 1);
    }

    #[test]
    fn sorts_terms_and_prints_canonically() {
        assert_eq!(parse("b==2,a!=1").to_string(), "a!=1,b=2");
    }

    #[test]
    fn whitespace_is_not_trimmed() {
        let selector = parse("metadata.name = web");
        assert_eq!(selector.requirements()[0].field(), "metadata.name ");
        assert_eq!(selector.requirements()[0].value(), " web");
    }

    #[test]
    fn splits_at_leftmost_operator() {
        let selector = parse("a!b=c");
        assert_eq!(selector.requirements()[0].field(), "a!b");
        assert_eq!(
            error("a!==b"),
            "invalid field selector: unescaped character in value: '='"
        );
        assert_eq!(parse("=v").requirements()[0].field(), "");
    }

    #[test]
    fn escaped_values() {
        let selector = parse(r"a=x\,y\=z\\w,b=c");
        assert_eq!(selector.requirements()[0].value(), r"x,y=z\w");
        assert_eq!(selector.requirements()[1].value(), "c");
        assert_eq!(selector.to_string(), r"a=x\,y\=z\\w,b=c");
        assert!(selector.matches(lookup(&[("a", r"x,y=z\w"), ("b", "c")])));
        assert_eq!(escape_value(r"a,b=c\d"), r"a\,b\=c\\d");
        assert_eq!(unescape_value(r"a\,b\=c\\d"), Ok(r"a,b=c\d".to_string()));
    }

    #[test]
    fn rejects_malformed_terms() {
        assert_eq!(
            error("a=b,nonsense"),
            "invalid selector: 'a=b,nonsense'; can't understand 'nonsense'"
        );
        assert_eq!(
            error(r"a=\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            error(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            error("a=b=c"),
            "invalid field selector: unescaped character in value: '='"
        );
        assert!(error(r"a\=b=c").contains("unescaped character"));
    }

    #[test]
    fn exact_match_and_supported_fields() {
        let selector = parse("metadata.name=web,metadata.namespace!=kube-system");
        assert_eq!(selector.requires_exact_match("metadata.name"), Some("web"));
        assert_eq!(selector.requires_exact_match("metadata.namespace"), None);
        assert_eq!(
            selector.check_supported(|f| f.starts_with("metadata.")),
            Ok(())
        );
        let err = parse("spec.foo=x").check_supported(|f| f == "metadata.name");
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err("field label not supported: spec.foo".into())
        );
    }

    #[test]
    fn field_value_walks_json() {
        let object = json!({
            "metadata": {"name": "web", "generation": 3, "labels": {"a": "b"}},
            "spec": {"unschedulable": true, "ratio": 1.5, "nothing": null, "list": [1]},
            "involvedObject": {"kind": "Pod"}
        });
        assert_eq!(field_value(&object, "metadata.name"), Some("web".into()));
        assert_eq!(
            field_value(&object, "metadata.generation"),
            Some("3".into())
        );
        assert_eq!(
            field_value(&object, "spec.unschedulable"),
            Some("true".into())
        );
        assert_eq!(field_value(&object, "spec.ratio"), Some("1.5".into()));
        assert_eq!(
            field_value(&object, "involvedObject.kind"),
            Some("Pod".into())
        );
        assert_eq!(field_value(&object, "spec.nothing"), None);
        assert_eq!(field_value(&object, "spec.list"), None);
        assert_eq!(field_value(&object, "metadata.labels"), None);
        assert_eq!(field_value(&object, "metadata.name.deeper"), None);
        assert_eq!(field_value(&object, "status.phase"), None);
        assert!(parse("involvedObject.kind=Pod,spec.unschedulable=true").matches_object(&object));
        assert!(parse("status.phase=").matches_object(&object));
        assert!(!parse("metadata.generation!=3").matches_object(&object));
    }
}
