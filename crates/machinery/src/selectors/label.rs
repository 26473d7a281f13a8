//! Label selectors: requirement model, evaluation, canonical printing and the structured form.
//!
//! Parsing of the string form lives in `label_parser`; this file owns what a selector *is*.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use super::error::SelectorError;
use super::label_parser;
use super::validation::{
    aggregate, go_quote, go_string_slice, invalid, label_key_problems, label_value_problems,
};

/// The comparison a single label requirement performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOperator {
    /// `key=value`: the label is present and equal to the value.
    Equals,
    /// `key==value`: same meaning as `Equals`, kept distinct so it prints back as written.
    DoubleEquals,
    /// `key!=value`: the label is absent or differs from the value.
    NotEquals,
    /// `key in (a,b)`: the label is present and equal to one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or equal to none of the values.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is present, an integer, and greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present, an integer, and less than `n`.
    LessThan,
}

impl LabelOperator {
    /// The operator's name as Kubernetes' `selection` package spells it (`in`, `!=`, `gt`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LabelOperator::Equals => "=",
            LabelOperator::DoubleEquals => "==",
            LabelOperator::NotEquals => "!=",
            LabelOperator::In => "in",
            LabelOperator::NotIn => "notin",
            LabelOperator::Exists => "exists",
            LabelOperator::DoesNotExist => "!",
            LabelOperator::GreaterThan => "gt",
            LabelOperator::LessThan => "lt",
        }
    }
}

impl fmt::Display for LabelOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validated `key <op> values` condition of a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelRequirement {
    key: String,
    operator: LabelOperator,
    // Sorted and deduplicated: values form a set, and a canonical order makes printing
    // deterministic and guarantees the printed form parses back.
    values: Vec<String>,
}

impl LabelRequirement {
    /// Builds a requirement, validating key, value count and values as `labels.NewRequirement` does.
    pub fn new(
        key: impl Into<String>,
        operator: LabelOperator,
        values: Vec<String>,
    ) -> Result<Self, SelectorError> {
        Self::build(key.into(), operator, values).map_err(SelectorError::InvalidLabelSelector)
    }

    /// Shared constructor returning the bare message so each caller can choose the error variant.
    pub(crate) fn build(
        key: String,
        operator: LabelOperator,
        mut values: Vec<String>,
    ) -> Result<Self, String> {
        let mut problems = Vec::new();
        let key_problems = label_key_problems(&key);
        if !key_problems.is_empty() {
            problems.push(invalid("key", &go_quote(&key), &key_problems.join("; ")));
        }
        match operator {
            LabelOperator::In | LabelOperator::NotIn if values.is_empty() => {
                problems.push(invalid(
                    "values",
                    &go_string_slice(&values),
                    "for 'in', 'notin' operators, values set can't be empty",
                ))
            }
            LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::NotEquals
                if values.len() != 1 =>
            {
                problems.push(invalid(
                    "values",
                    &go_string_slice(&values),
                    "exact-match compatibility requires one single value",
                ))
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist if !values.is_empty() => problems
                .push(invalid(
                    "values",
                    &go_string_slice(&values),
                    "values set must be empty for exists and does not exist",
                )),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                if values.len() != 1 {
                    problems.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        problems.push(invalid(
                            &format!("values[{i}]"),
                            &go_quote(value),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            let value_problems = label_value_problems(value);
            if !value_problems.is_empty() {
                problems.push(invalid(
                    &format!("values[{i}]"),
                    &go_quote(value),
                    &value_problems.join("; "),
                ));
            }
        }
        if let Some(message) = aggregate(problems) {
            return Err(message);
        }
        values.sort();
        values.dedup();
        Ok(LabelRequirement {
            key,
            operator,
            values,
        })
    }

    /// The label key this requirement inspects.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The comparison performed.
    pub fn operator(&self) -> LabelOperator {
        self.operator
    }

    /// The comparison values, sorted and deduplicated (empty for `Exists`/`DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Evaluates the requirement against the label's value (`None` when the label is absent).
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.binary_search_by(|c| c.as_str().cmp(v)).is_ok();
        match self.operator {
            LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::In => {
                value.is_some_and(has)
            }
            LabelOperator::NotEquals | LabelOperator::NotIn => value.is_none_or(|v| !has(v)),
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                // A label that is not an integer never satisfies a numeric comparison.
                let Some(actual) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let [bound] = self.values.as_slice() else {
                    return false;
                };
                let Ok(bound) = bound.parse::<i64>() else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = self.values.join(",");
        match self.operator {
            LabelOperator::Exists => write!(f, "{}", self.key),
            LabelOperator::DoesNotExist => write!(f, "!{}", self.key),
            LabelOperator::In => write!(f, "{} in ({joined})", self.key),
            LabelOperator::NotIn => write!(f, "{} notin ({joined})", self.key),
            LabelOperator::Equals => write!(f, "{}={joined}", self.key),
            LabelOperator::DoubleEquals => write!(f, "{}=={joined}", self.key),
            LabelOperator::NotEquals => write!(f, "{}!={joined}", self.key),
            LabelOperator::GreaterThan => write!(f, "{}>{joined}", self.key),
            LabelOperator::LessThan => write!(f, "{}<{joined}", self.key),
        }
    }
}

/// A conjunction of label requirements, as received in `labelSelector` or embedded in objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    // Sorted by key (stably) so printing is canonical, as Kubernetes does after parsing.
    requirements: Vec<LabelRequirement>,
    // Kubernetes distinguishes a null structured selector (selects nothing) from an empty one.
    matches_nothing: bool,
}

impl LabelSelector {
    /// A selector with no requirements, which matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector that matches no object (what a null structured selector means in Kubernetes).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            matches_nothing: true,
        }
    }

    /// Parses the string form used by the `labelSelector` query parameter.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let requirements =
            label_parser::parse(input).map_err(SelectorError::InvalidLabelSelector)?;
        Ok(Self::from_requirements(requirements))
    }

    /// Builds a selector from already-validated requirements, putting them in canonical order.
    pub fn from_requirements(mut requirements: Vec<LabelRequirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            matches_nothing: false,
        }
    }

    /// Converts the structured `{matchLabels, matchExpressions}` form; JSON `null` selects nothing.
    pub fn from_label_selector_json(selector: &Value) -> Result<Self, SelectorError> {
        structured(selector).map_err(SelectorError::InvalidStructuredSelector)
    }

    /// The requirements, sorted by key; all must hold for a match.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// True when the selector matches everything (no requirements and not `nothing()`).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.matches_nothing
    }

    /// True when the selector is `nothing()`.
    pub fn is_nothing(&self) -> bool {
        self.matches_nothing
    }

    /// Evaluates against an object's `metadata.labels` map (`None` when the object has no labels).
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.matches_lookup(|key| labels.and_then(|map| map.get(key)).map(json_label_text))
    }

    /// Evaluates against a whole object by reading its `metadata.labels`.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|metadata| metadata.get("labels"))
            .and_then(Value::as_object);
        self.matches(labels)
    }

    /// Evaluates against a plain label map.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_lookup(|key| labels.get(key).map(|v| Cow::Borrowed(v.as_str())))
    }

    fn matches_lookup<'a>(&self, lookup: impl Fn(&str) -> Option<Cow<'a, str>>) -> bool {
        !self.matches_nothing
            && self
                .requirements
                .iter()
                .all(|r| r.matches_value(lookup(&r.key).as_deref()))
    }
}

/// Reads a label value from JSON; non-strings cannot pass API validation, so any rendering is fine,
/// but `null` becomes "" because that is what decoding it into a Go `map[string]string` yields.
fn json_label_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        Value::Null => Cow::Borrowed(""),
        other => Cow::Owned(other.to_string()),
    }
}

impl fmt::Display for LabelSelector {
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

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Converts the structured form, mirroring `metav1.LabelSelectorAsSelector`.
fn structured(selector: &Value) -> Result<LabelSelector, String> {
    let object = match selector {
        Value::Null => return Ok(LabelSelector::nothing()),
        Value::Object(object) => object,
        _ => return Err("label selector must be a JSON object".to_string()),
    };
    let mut requirements = Vec::new();
    match object.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (key, value) in labels {
                let value = match value {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    _ => {
                        return Err(format!(
                            "matchLabels[{}]: value must be a string",
                            go_quote(key)
                        ));
                    }
                };
                requirements.push(LabelRequirement::build(
                    key.clone(),
                    LabelOperator::Equals,
                    vec![value],
                )?);
            }
        }
        Some(_) => return Err("matchLabels: must be an object of string values".to_string()),
    }
    match object.get("matchExpressions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(expressions)) => {
            for (i, expression) in expressions.iter().enumerate() {
                requirements.push(structured_expression(i, expression)?);
            }
        }
        Some(_) => return Err("matchExpressions: must be an array".to_string()),
    }
    Ok(LabelSelector::from_requirements(requirements))
}

fn structured_expression(index: usize, expression: &Value) -> Result<LabelRequirement, String> {
    let Value::Object(expression) = expression else {
        return Err(format!("matchExpressions[{index}]: must be an object"));
    };
    let text = |name: &str| -> Result<String, String> {
        match expression.get(name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!(
                "matchExpressions[{index}].{name}: must be a string"
            )),
        }
    };
    let key = text("key")?;
    let operator_name = text("operator")?;
    let operator = match operator_name.as_str() {
        "In" => LabelOperator::In,
        "NotIn" => LabelOperator::NotIn,
        "Exists" => LabelOperator::Exists,
        "DoesNotExist" => LabelOperator::DoesNotExist,
        _ => {
            return Err(format!(
                "{} is not a valid label selector operator",
                go_quote(&operator_name)
            ));
        }
    };
    let values = match expression.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                _ => Err(format!(
                    "matchExpressions[{index}].values: must contain only strings"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(format!(
                "matchExpressions[{index}].values: must be an array"
            ));
        }
    };
    LabelRequirement::build(key, operator, values)
}
