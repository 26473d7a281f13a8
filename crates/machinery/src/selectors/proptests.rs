//! Property tests: printed selectors parse back to equivalent selectors, and no input panics.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use super::{
    FieldSelector, LabelOperator, LabelRequirement, LabelSelector, escape_value, unescape_value,
};

// Small pools make keys collide between selectors and label sets, so matches are exercised.
const KEYS: &[&str] = &[
    "a",
    "b",
    "app",
    "example.com/tier",
    "in",
    "notin",
    "x_y.z-1",
];
const VALUES: &[&str] = &["", "a", "b", "in", "notin", "v1", "0", "7", "42"];
const NUMBERS: &[&str] = &["0", "7", "42", "0042", "123", "9223372036854775807"];
const LABEL_VALUES: &[&str] = &[
    "",
    "a",
    "b",
    "in",
    "v1",
    "0",
    "7",
    "42",
    "-3",
    "+8",
    "x y",
    "99999999999999999999",
];
const LABEL_TOKENS: &[&str] = &[
    "a", "b", "in", "notin", "x.io/k", "1", "-", "(", ")", ",", "!", "=", "==", "!=", "<", ">",
    " ", "\t", "\0", "é",
];
const FIELD_TOKENS: &[&str] = &[
    "a", "b.c", "=", "==", "!=", "!", ",", "\\", "\\,", "\\=", "\\\\", " ", "é",
];

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    select(pool).prop_map(str::to_string)
}

fn requirement() -> impl Strategy<Value = LabelRequirement> {
    (
        pick(KEYS),
        0..9usize,
        prop::collection::vec(pick(VALUES), 1..4),
        pick(NUMBERS),
    )
        .prop_filter_map("requirement must be valid", |(key, op, values, number)| {
            let first = values.first().cloned().unwrap_or_default();
            let (operator, values) = match op {
                0 => (LabelOperator::Equals, vec![first]),
                1 => (LabelOperator::DoubleEquals, vec![first]),
                2 => (LabelOperator::NotEquals, vec![first]),
                3 => (LabelOperator::In, values),
                4 => (LabelOperator::NotIn, values),
                5 => (LabelOperator::Exists, Vec::new()),
                6 => (LabelOperator::DoesNotExist, Vec::new()),
                7 => (LabelOperator::GreaterThan, vec![number]),
                _ => (LabelOperator::LessThan, vec![number]),
            };
            LabelRequirement::new(key, operator, values).ok()
        })
}

fn label_set() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(pick(KEYS), pick(LABEL_VALUES), 0..6)
}

fn soup(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(pick(pool), 0..14).prop_map(|tokens| tokens.concat())
}

fn to_json(labels: &BTreeMap<String, String>) -> Map<String, Value> {
    labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn printed_label_selector_parses_to_equivalent(
        requirements in prop::collection::vec(requirement(), 0..6),
        label_sets in prop::collection::vec(label_set(), 1..8),
    ) {
        let selector = LabelSelector::from_requirements(requirements);
        let printed = selector.to_string();
        let reparsed = match LabelSelector::parse(&printed) {
            Ok(reparsed) => reparsed,
            Err(e) => return Err(TestCaseError::fail(format!("{printed:?} failed to parse: {e}"))),
        };
        prop_assert_eq!(&reparsed, &selector);
        prop_assert_eq!(reparsed.to_string(), printed);
        for labels in &label_sets {
            let expected = selector.matches_map(labels);
            prop_assert_eq!(reparsed.matches_map(labels), expected);
            prop_assert_eq!(reparsed.matches(Some(&to_json(labels))), expected);
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(input in any::<String>()) {
        let _ = LabelSelector::parse(&input);
        let _ = FieldSelector::parse(&input);
        let _ = unescape_value(&input);
        let _ = LabelSelector::from_label_selector_json(&Value::String(input));
    }

    #[test]
    fn arbitrary_bytes_as_lossy_strings_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let input = String::from_utf8_lossy(&bytes);
        let _ = LabelSelector::parse(&input);
        let _ = FieldSelector::parse(&input);
    }

    #[test]
    fn label_token_soup_is_stable_when_accepted(input in soup(LABEL_TOKENS)) {
        if let Ok(selector) = LabelSelector::parse(&input) {
            let printed = selector.to_string();
            let reparsed = LabelSelector::parse(&printed);
            prop_assert_eq!(reparsed.as_ref(), Ok(&selector), "input {:?} printed {:?}", input, printed);
        }
    }

    #[test]
    fn field_token_soup_is_stable_when_accepted(input in soup(FIELD_TOKENS)) {
        if let Ok(selector) = FieldSelector::parse(&input) {
            let printed = selector.to_string();
            let mut expected = selector.requirements().to_vec();
            expected.sort();
            let mut actual = match FieldSelector::parse(&printed) {
                Ok(reparsed) => reparsed.requirements().to_vec(),
                Err(e) => return Err(TestCaseError::fail(format!("{printed:?} failed to parse: {e}"))),
            };
            actual.sort();
            prop_assert_eq!(actual, expected);
        }
    }

    #[test]
    fn field_escaping_round_trips(value in any::<String>()) {
        prop_assert_eq!(unescape_value(&escape_value(&value)), Ok(value.clone()));
        let selector = FieldSelector::parse(&format!("f={}", escape_value(&value)));
        prop_assert_eq!(selector.map(|s| s.requirements()[0].value().to_string()), Ok(value));
    }
}
