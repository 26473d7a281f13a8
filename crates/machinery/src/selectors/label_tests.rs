//! Unit tests for label selector parsing, evaluation, printing and the structured form.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{LabelOperator, LabelRequirement, LabelSelector, SelectorError};

fn parse(s: &str) -> LabelSelector {
    match LabelSelector::parse(s) {
        Ok(selector) => selector,
        Err(e) => panic!("{s:?} should parse: {e}"),
    }
}

fn error(s: &str) -> String {
    match LabelSelector::parse(s) {
        Ok(selector) => panic!("{s:?} should fail, got {selector}"),
        Err(e) => e.to_string(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect()
}

fn matches(selector: &str, pairs: &[(&str, &str)]) -> bool {
    parse(selector).matches(Some(&labels(pairs)))
}

#[test]
fn equality_operators() {
    for selector in ["env=prod", "env==prod"] {
        assert!(matches(selector, &[("env", "prod")]));
        assert!(!matches(selector, &[("env", "dev")]));
        assert!(!matches(selector, &[]));
    }
    assert!(matches("env!=prod", &[("env", "dev")]));
    assert!(!matches("env!=prod", &[("env", "prod")]));
    assert!(matches("env!=prod", &[]));
}

#[test]
fn set_operators() {
    assert!(matches("env in (prod, dev)", &[("env", "dev")]));
    assert!(!matches("env in (prod,dev)", &[("env", "qa")]));
    assert!(!matches("env in (prod,dev)", &[]));
    assert!(matches("env notin (prod,dev)", &[("env", "qa")]));
    assert!(!matches("env notin (prod,dev)", &[("env", "prod")]));
    assert!(matches("env notin (prod,dev)", &[]));
}

#[test]
fn existence_operators() {
    assert!(matches("env", &[("env", "")]));
    assert!(!matches("env", &[("other", "x")]));
    assert!(matches("!env", &[("other", "x")]));
    assert!(!matches("!env", &[("env", "x")]));
}

#[test]
fn numeric_operators() {
    assert!(matches("replicas>5", &[("replicas", "6")]));
    assert!(!matches("replicas>5", &[("replicas", "5")]));
    assert!(matches("replicas<5", &[("replicas", "-4")]));
    assert!(matches("replicas<5", &[("replicas", "+4")]));
    assert!(!matches("replicas<5", &[("replicas", "5")]));
    assert!(!matches("replicas<5", &[("replicas", "four")]));
    assert!(!matches("replicas<5", &[]));
    assert!(!matches("replicas>5", &[]));
    assert!(matches("replicas>0005", &[("replicas", "0006")]));
    assert_eq!(
        parse("r>5").requirements()[0].operator(),
        LabelOperator::GreaterThan
    );
    assert_eq!(
        parse("r<5").requirements()[0].operator(),
        LabelOperator::LessThan
    );
}

#[test]
fn numeric_operator_values_must_be_integer_label_values() {
    assert!(error("r>abc").contains(
        r#"values[0]: Invalid value: "abc": for 'Gt', 'Lt' operators, the value must be an integer"#
    ));
    assert!(error("r>").contains("the value must be an integer"));
    assert!(error("r>-5").contains(r#"values[0]: Invalid value: "-5": a valid label must be"#));
    assert!(error("r<99999999999999999999").contains("must be an integer"));
}

#[test]
fn requirements_are_anded() {
    let selector = "app=web,tier in (front,back),!legacy,version>2";
    assert!(matches(
        selector,
        &[("app", "web"), ("tier", "front"), ("version", "3")]
    ));
    assert!(!matches(
        selector,
        &[("app", "web"), ("tier", "front"), ("version", "2")]
    ));
    assert!(!matches(
        selector,
        &[
            ("app", "web"),
            ("tier", "front"),
            ("version", "3"),
            ("legacy", "")
        ]
    ));
}

#[test]
fn whitespace_around_tokens() {
    let selector = parse("  app =  web ,\ttier\nin ( a , b ) , ! legacy ,x != y,z==w, n > 1 ");
    assert_eq!(
        selector.to_string(),
        "app=web,!legacy,n>1,tier in (a,b),x!=y,z==w"
    );
    assert!(parse("   ").is_empty());
}

#[test]
fn empty_selector_matches_everything() {
    let selector = parse("");
    assert!(selector.is_empty());
    assert!(selector.matches(None));
    assert!(selector.matches(Some(&labels(&[("a", "b")]))));
    assert_eq!(selector.to_string(), "");
}

#[test]
fn absent_labels_map() {
    assert!(parse("a!=b,c notin (d),!e").matches(None));
    assert!(!parse("a").matches(None));
    assert!(!parse("a=b").matches(None));
    assert!(parse("a!=b").matches_object(&json!({"metadata": {"name": "x"}})));
    assert!(parse("a=b").matches_object(&json!({"metadata": {"labels": {"a": "b"}}})));
    assert!(!parse("a=b").matches_object(&json!({"metadata": {"labels": null}})));
}

#[test]
fn empty_values() {
    assert!(matches("a=", &[("a", "")]));
    assert!(!matches("a=", &[("a", "x")]));
    assert!(!matches("a=", &[]));
    assert!(matches("a in ()", &[("a", "")]));
    assert!(matches("a in (x,)", &[("a", "")]));
    assert_eq!(parse("a=,b!=").to_string(), "a=,b!=");
}

#[test]
fn keywords_are_valid_keys_and_values() {
    assert!(matches("in=notin", &[("in", "notin")]));
    assert!(matches("notin in (in)", &[("notin", "in")]));
    assert_eq!(parse("in notin (in)").to_string(), "in notin (in)");
}

#[test]
fn canonical_display() {
    let selector = parse("z in (c,a,b,a), a notin (y,x), !m, k, b==2, c!=3, n<9, o>1, p=q");
    assert_eq!(
        selector.to_string(),
        "a notin (x,y),b==2,c!=3,k,!m,n<9,o>1,p=q,z in (a,b,c)"
    );
    assert_eq!(parse(&selector.to_string()), selector);
    assert_eq!(
        "a=b".parse::<LabelSelector>().map(|s| s.to_string()),
        Ok("a=b".to_string())
    );
}

#[test]
fn prefixed_keys() {
    assert!(matches(
        "app.kubernetes.io/name=web",
        &[("app.kubernetes.io/name", "web")]
    ));
    assert!(error("Example.com/name=web").contains("prefix part a lowercase RFC 1123 subdomain"));
    assert!(error("/name=web").contains("prefix part must be non-empty"));
    assert!(error("a/b/c=web").contains("a qualified name must consist of"));
}

#[test]
fn invalid_keys() {
    assert_eq!(
        error("-bad=x"),
        "unable to parse requirement: key: Invalid value: \"-bad\": name part must consist of \
         alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
         character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is \
         '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
    assert!(
        error(&format!("{}=x", "k".repeat(64)))
            .contains("name part must be no more than 63 characters")
    );
    assert!(error("ké=x").contains("key: Invalid value: \"ké\""));
    assert!(error("!-bad").starts_with("unable to parse requirement: key: Invalid value"));
}

#[test]
fn invalid_values() {
    assert!(error("a=-x").starts_with(
        "unable to parse requirement: values[0]: Invalid value: \"-x\": a valid label must be an empty string"
    ));
    assert!(error(&format!("a={}", "v".repeat(64))).contains("must be no more than 63 characters"));
    let both = error("a in (-x, y_)");
    assert!(both.starts_with("unable to parse requirement: [values[0]: Invalid value: \"-x\""));
    assert!(both.contains(", values[1]: Invalid value: \"y_\""));
    assert!(both.ends_with("]"));
    assert!(error("a=b/c").contains("values[0]"));
}

#[test]
fn unbalanced_parentheses() {
    assert_eq!(
        error("a in (b"),
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    assert_eq!(
        error("a in (b,c"),
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    assert_eq!(
        error("a in (b,"),
        "unable to parse requirement: found '', expected: ',', or identifier"
    );
    assert_eq!(
        error("a in b)"),
        "unable to parse requirement: found 'b' expected: '('"
    );
    assert_eq!(
        error("a in ("),
        "unable to parse requirement: found '', expected: ',', ')' or identifier"
    );
    assert_eq!(
        error("a in (b))"),
        "found ')', expected: ',' or 'end of string'"
    );
    assert_eq!(
        error("a in ((b)"),
        "unable to parse requirement: found '(', expected: ',', ')' or identifier"
    );
    assert_eq!(
        error("a in (b c)"),
        "unable to parse requirement: found 'c', expected: ',' or ')'"
    );
    assert_eq!(
        error("a in"),
        "unable to parse requirement: found '' expected: '('"
    );
}

#[test]
fn empty_key() {
    assert_eq!(
        error("=b"),
        "found '=', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        error("!=b"),
        "found '!=', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        error("!"),
        "unable to parse requirement: found '', expected: identifier"
    );
    assert_eq!(
        error("!!a"),
        "unable to parse requirement: found '!', expected: identifier"
    );
    assert_eq!(
        error("(a)"),
        "found '(', expected: !, identifier, or 'end of string'"
    );
}

#[test]
fn missing_operator_or_value() {
    assert_eq!(
        error("a b"),
        "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        error("a=(b)"),
        "unable to parse requirement: found '(', expected: identifier"
    );
    assert_eq!(
        error("a=b c"),
        "found 'c', expected: ',' or 'end of string'"
    );
    assert_eq!(error("!a=b"), "found '=', expected: ',' or 'end of string'");
    assert_eq!(
        error("a=b=c"),
        "found '=', expected: ',' or 'end of string'"
    );
}

#[test]
fn separators() {
    assert_eq!(error("a=b,"), "found '', expected: identifier after ','");
    assert_eq!(error("a=b, "), "found '', expected: identifier after ','");
    assert_eq!(
        error("a=b,,c=d"),
        "found ',', expected: identifier after ','"
    );
    assert_eq!(
        error(","),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        error(",a"),
        "found ',', expected: !, identifier, or 'end of string'"
    );
}

#[test]
fn errors_use_the_label_variant() {
    assert!(matches!(
        LabelSelector::parse("a b"),
        Err(SelectorError::InvalidLabelSelector(_))
    ));
}

#[test]
fn matches_plain_maps() {
    let map: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
    assert!(parse("a in (1,2)").matches_map(&map));
    assert!(!parse("a>1").matches_map(&map));
}

#[test]
fn requirement_constructor_validates() {
    let ok = LabelRequirement::new(
        "a",
        LabelOperator::In,
        vec!["b".into(), "a".into(), "b".into()],
    );
    assert_eq!(
        ok.map(|r| r.values().to_vec()),
        Ok(vec!["a".to_string(), "b".to_string()])
    );
    let err = LabelRequirement::new("a", LabelOperator::Equals, vec!["x".into(), "y".into()]);
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err(r#"values: Invalid value: []string{"x", "y"}: exact-match compatibility requires one single value"#.to_string())
    );
    let err = LabelRequirement::new("a", LabelOperator::GreaterThan, vec![]);
    assert!(err.is_err_and(|e| e.to_string().contains("exactly one value is required")));
}

#[test]
fn structured_form() {
    let selector = LabelSelector::from_label_selector_json(&json!({
        "matchLabels": {"app": "web", "tier": "front"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "owner", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []}
        ]
    }));
    let selector = selector.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        selector.to_string(),
        "app=web,env in (prod,staging),!legacy,owner,tier=front,track notin (canary)"
    );
    let good = labels(&[
        ("app", "web"),
        ("tier", "front"),
        ("env", "prod"),
        ("owner", "me"),
    ]);
    assert!(selector.matches(Some(&good)));
    let mut bad = good.clone();
    bad.insert("track".into(), json!("canary"));
    assert!(!selector.matches(Some(&bad)));
    assert_eq!(
        LabelSelector::parse(&selector.to_string()).as_ref(),
        Ok(&selector)
    );
}

#[test]
fn structured_empty_and_null() {
    for empty in [
        json!({}),
        json!({"matchLabels": {}, "matchExpressions": []}),
        json!({"matchLabels": null}),
    ] {
        let selector =
            LabelSelector::from_label_selector_json(&empty).unwrap_or_else(|e| panic!("{e}"));
        assert!(selector.is_empty());
        assert!(selector.matches(None));
    }
    let nothing =
        LabelSelector::from_label_selector_json(&Value::Null).unwrap_or_else(|e| panic!("{e}"));
    assert!(nothing.is_nothing());
    assert!(!nothing.matches(None));
    assert!(!nothing.matches(Some(&labels(&[("a", "b")]))));
}

#[test]
fn structured_errors() {
    let err = |v: Value| match LabelSelector::from_label_selector_json(&v) {
        Ok(s) => panic!("{v} should fail, got {s}"),
        Err(e) => {
            assert!(matches!(e, SelectorError::InvalidStructuredSelector(_)));
            e.to_string()
        }
    };
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})),
        "\"Gt\" is not a valid label selector operator"
    );
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
        "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
    );
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
        "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist"
    );
    assert!(
        err(json!({"matchExpressions": [{"operator": "Exists"}]}))
            .starts_with("key: Invalid value: \"\": name part must be non-empty")
    );
    assert!(
        err(json!({"matchLabels": {"a": "-b"}})).starts_with("values[0]: Invalid value: \"-b\"")
    );
    assert!(err(json!({"matchLabels": {"a b": "c"}})).starts_with("key: Invalid value: \"a b\""));
    assert!(err(json!({"matchLabels": {"a": 1}})).contains("must be a string"));
    assert!(err(json!({"matchLabels": []})).contains("matchLabels"));
    assert!(err(json!({"matchExpressions": {}})).contains("matchExpressions"));
    assert!(err(json!({"matchExpressions": [1]})).contains("matchExpressions[0]"));
    assert!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}))
            .contains("only strings")
    );
    assert!(err(json!("a=b")).contains("JSON object"));
}
