//! Every transform type, each string conversion, and their errors.

use serde_json::{Value, json};

use super::super::compile::Path;
use super::super::input;
use super::super::transforms::{compile, resolve, resolve_all};
use crate::golang::value::float;

/// Compiles a transform written as YAML-shaped JSON.
fn transform(raw: Value) -> super::super::transforms::Transform {
    let raw: input::Transform = serde_json::from_value(raw).unwrap();
    compile(&raw, &Path::root("transforms").index(0)).unwrap()
}

fn compile_error(raw: Value) -> String {
    let raw: input::Transform = serde_json::from_value(raw).unwrap();
    compile(&raw, &Path::root("transforms").index(0)).unwrap_err().to_string()
}

fn run(raw: Value, input: Value) -> Result<Value, String> {
    resolve(&transform(raw), input)
}

#[test]
fn map_transform() {
    let t = json!({"type": "map", "map": {"us-west": "us-west-2", "eu": {"region": "eu-1", "zones": 3}}});
    assert_eq!(run(t.clone(), json!("us-west")).unwrap(), json!("us-west-2"));
    // Map results are JSON read as Go reads it: numbers are float64.
    let out = run(t.clone(), json!("eu")).unwrap();
    assert_eq!(out["zones"], float(3.0));
    assert!(out["zones"].is_f64());
    assert_eq!(run(t.clone(), json!("mars")).unwrap_err(), "key mars is not found in map");
    assert_eq!(run(t, float(1.0)).unwrap_err(), "type float64 is not supported for map transform");
}

#[test]
fn match_transform_literal_regexp_and_fallbacks() {
    let t = json!({"type": "match", "match": {
        "patterns": [
            {"type": "literal", "literal": "small", "result": 1},
            {"literal": "medium", "result": "m"},
            {"type": "regexp", "regexp": "^l+arge$", "result": {"size": "L"}}
        ],
        "fallbackValue": "unknown"
    }});
    assert_eq!(run(t.clone(), json!("small")).unwrap(), float(1.0));
    assert_eq!(run(t.clone(), json!("medium")).unwrap(), json!("m"));
    assert_eq!(run(t.clone(), json!("llarge")).unwrap(), json!({"size": "L"}));
    assert_eq!(run(t.clone(), json!("huge")).unwrap(), json!("unknown"));
    assert_eq!(
        run(t, float(2.0)).unwrap_err(),
        "cannot match pattern at index 0: unsupported input type 'float64'"
    );

    let to_input = json!({"type": "match", "match": {
        "patterns": [{"type": "regexp", "regexp": "^a", "result": "A"}], "fallbackTo": "Input"
    }});
    assert_eq!(run(to_input.clone(), json!("bcd")).unwrap(), json!("bcd"));
    assert_eq!(
        run(to_input, Value::Null).unwrap_err(),
        "cannot match pattern at index 0: unsupported input type 'null'"
    );

    // No fallback value: null.
    let bare = json!({"type": "match", "match": {"patterns": [{"literal": "x", "result": 1}]}});
    assert_eq!(run(bare, json!("y")).unwrap(), Value::Null);

    let both = json!({"type": "match", "match": {
        "patterns": [{"literal": "x", "result": 1}], "fallbackTo": "Input", "fallbackValue": "v"
    }});
    assert_eq!(
        run(both, json!("y")).unwrap_err(),
        "cannot set both a fallback value and the fallback to input flag"
    );
}

#[test]
fn math_transforms() {
    let multiply = json!({"type": "math", "math": {"type": "Multiply", "multiply": 3}});
    // Observed numbers are float64, and so is the product.
    let out = run(multiply.clone(), float(5.0)).unwrap();
    assert_eq!(out, float(15.0));
    assert!(out.is_f64());
    assert_eq!(run(multiply.clone(), float(0.5)).unwrap(), float(1.5));
    // An int64 (from a convert) stays an int64.
    assert_eq!(run(multiply.clone(), json!(4)).unwrap(), json!(12));
    assert_eq!(
        run(multiply, json!("5")).unwrap_err(),
        "input is required to be a number for math transformer, got string"
    );
    // The type defaults to Multiply.
    assert_eq!(run(json!({"type": "math", "math": {"multiply": 2}}), float(2.5)).unwrap(), float(5.0));

    let clamp_min = json!({"type": "math", "math": {"type": "ClampMin", "clampMin": 10}});
    assert_eq!(run(clamp_min.clone(), float(3.0)).unwrap(), json!(10));
    assert_eq!(run(clamp_min, float(12.5)).unwrap(), float(12.5));
    let clamp_max = json!({"type": "math", "math": {"type": "ClampMax", "clampMax": 10}});
    assert_eq!(run(clamp_max.clone(), float(30.0)).unwrap(), json!(10));
    // Clamping compares the integer part: 10.7 is not above 10.
    assert_eq!(run(clamp_max, float(10.7)).unwrap(), float(10.7));
}

#[test]
fn string_format_trim_regexp_join_replace() {
    let format = json!({"type": "string", "string": {"type": "Format", "fmt": "%s-bucket"}});
    assert_eq!(run(format, json!("team")).unwrap(), json!("team-bucket"));
    // Format is the default type; %d of a float64 is Go's error form.
    assert_eq!(
        run(json!({"type": "string", "string": {"fmt": "n=%d"}}), float(5.0)).unwrap(),
        json!("n=%!d(float64=5)")
    );
    assert_eq!(run(json!({"type": "string", "string": {"fmt": "n=%v"}}), float(5.0)).unwrap(), json!("n=5"));
    assert_eq!(
        run(json!({"type": "string", "string": {"fmt": "n=%v"}}), float(5.5)).unwrap(),
        json!("n=5.5")
    );

    let prefix = json!({"type": "string", "string": {"type": "TrimPrefix", "trim": "https://"}});
    assert_eq!(run(prefix.clone(), json!("https://example.com")).unwrap(), json!("example.com"));
    assert_eq!(run(prefix, json!("ftp://x")).unwrap(), json!("ftp://x"));
    let suffix = json!({"type": "string", "string": {"type": "TrimSuffix", "trim": "-prod"}});
    assert_eq!(run(suffix, json!("db-prod")).unwrap(), json!("db"));

    let regexp = json!({"type": "string", "string": {"type": "Regexp", "regexp": {"match": "arn:aws:iam::(\\d+):.*"}}});
    assert_eq!(run(regexp, json!("arn:aws:iam::42:role/x")).unwrap(), json!("arn:aws:iam::42:role/x"));
    let group = json!({"type": "string", "string": {"type": "Regexp", "regexp": {"match": "arn:aws:iam::(\\d+):.*", "group": 1}}});
    assert_eq!(run(group.clone(), json!("arn:aws:iam::42:role/x")).unwrap(), json!("42"));
    assert_eq!(
        run(group, json!("nope")).unwrap_err(),
        "regexp \"arn:aws:iam::(\\\\d+):.*\" had no matches for group 1"
    );

    let join = json!({"type": "string", "string": {"type": "Join", "join": {"separator": ", "}}});
    assert_eq!(run(join.clone(), json!(["a", "b", 3.0])).unwrap(), json!("a, b, 3"));
    assert_eq!(run(join.clone(), json!([])).unwrap(), json!(""));
    assert_eq!(run(join, json!("a")).unwrap_err(), "could not parse input array");

    let replace =
        json!({"type": "string", "string": {"type": "Replace", "replace": {"search": "-", "replace": "_"}}});
    assert_eq!(run(replace, json!("a-b-c")).unwrap(), json!("a_b_c"));
}

#[test]
fn each_string_conversion() {
    let conv = |name: &str| json!({"type": "string", "string": {"type": "Convert", "convert": name}});
    assert_eq!(run(conv("ToUpper"), json!("Hello")).unwrap(), json!("HELLO"));
    assert_eq!(run(conv("ToLower"), json!("HeLLo")).unwrap(), json!("hello"));
    assert_eq!(run(conv("ToUpper"), float(5.0)).unwrap(), json!("5"));
    assert_eq!(run(conv("ToJson"), float(5.0)).unwrap(), json!("5"));
    assert_eq!(
        run(conv("ToJson"), json!({"b": [1.5, "<x>"], "a": true})).unwrap(),
        json!(r#"{"a":true,"b":[1.5,"\u003cx\u003e"]}"#)
    );
    assert_eq!(run(conv("ToJson"), json!("s")).unwrap(), json!("\"s\""));
    assert_eq!(run(conv("ToBase64"), json!("hello")).unwrap(), json!("aGVsbG8="));
    assert_eq!(run(conv("FromBase64"), json!("aGVsbG8=")).unwrap(), json!("hello"));
    assert!(
        run(conv("FromBase64"), json!("ab$d"))
            .unwrap_err()
            .starts_with("string is not valid base64: illegal base64 data at input byte 2")
    );
    assert_eq!(
        run(conv("ToSha1"), json!("hello")).unwrap(),
        json!("aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")
    );
    assert_eq!(
        run(conv("ToSha256"), json!("hello")).unwrap(),
        json!("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
    );
    assert_eq!(
        run(conv("ToSha512"), json!("hello")).unwrap(),
        json!(
            "9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043"
        )
    );
    // Adler-32 of "Wikipedia" is 0x11E60398.
    assert_eq!(run(conv("ToAdler32"), json!("Wikipedia")).unwrap(), json!("300286872"));
    // A non-string is hashed as its JSON: the object {"a":"hello"} hashes like that text.
    {
        use sha2::Digest as _;
        let want = hex::encode(sha2::Sha256::digest(br#"{"a":"hello"}"#));
        assert_eq!(run(conv("ToSha256"), json!({"a": "hello"})).unwrap(), json!(want));
    }
}

#[test]
fn convert_transforms() {
    let to = |t: &str| json!({"type": "convert", "convert": {"toType": t}});
    // From the float64 Crossplane hands over.
    assert_eq!(run(to("string"), float(5.0)).unwrap(), json!("5"));
    assert_eq!(run(to("string"), float(2.5)).unwrap(), json!("2.5"));
    assert_eq!(run(to("int"), float(5.7)).unwrap(), json!(5));
    assert!(run(to("int64"), float(5.0)).unwrap().is_i64());
    assert_eq!(run(to("bool"), float(1.0)).unwrap(), json!(true));
    assert_eq!(run(to("bool"), float(0.0)).unwrap(), json!(false));
    assert_eq!(run(to("float64"), float(5.0)).unwrap(), float(5.0));
    // From strings.
    assert_eq!(run(to("int64"), json!("42")).unwrap(), json!(42));
    assert_eq!(
        run(to("int64"), json!("4.2")).unwrap_err(),
        "strconv.ParseInt: parsing \"4.2\": invalid syntax"
    );
    assert_eq!(run(to("bool"), json!("True")).unwrap(), json!(true));
    assert_eq!(run(to("bool"), json!("0")).unwrap(), json!(false));
    assert_eq!(
        run(to("bool"), json!("yes")).unwrap_err(),
        "strconv.ParseBool: parsing \"yes\": invalid syntax"
    );
    assert_eq!(run(to("float64"), json!("2.5")).unwrap(), float(2.5));
    let quantity = json!({"type": "convert", "convert": {"toType": "float64", "format": "quantity"}});
    assert_eq!(run(quantity.clone(), json!("500m")).unwrap(), float(0.5));
    assert_eq!(run(quantity, json!("1Ki")).unwrap(), float(1024.0));
    let object = json!({"type": "convert", "convert": {"toType": "object", "format": "json"}});
    assert_eq!(run(object.clone(), json!(r#"{"a": 1}"#)).unwrap(), json!({"a": 1.0}));
    assert_eq!(
        run(object, json!("[1]")).unwrap_err(),
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    let array = json!({"type": "convert", "convert": {"toType": "array", "format": "json"}});
    assert_eq!(run(array, json!(r#"["a", 2]"#)).unwrap(), json!(["a", 2.0]));
    // From int64 and bool.
    assert_eq!(run(to("string"), json!(7)).unwrap(), json!("7"));
    assert_eq!(run(to("float64"), json!(7)).unwrap(), float(7.0));
    assert_eq!(run(to("bool"), json!(1)).unwrap(), json!(true));
    assert_eq!(run(to("string"), json!(true)).unwrap(), json!("true"));
    assert_eq!(run(to("int"), json!(true)).unwrap(), json!(1));
    assert_eq!(run(to("float64"), json!(false)).unwrap(), float(0.0));
    // Unsupported pairs and inputs.
    assert_eq!(
        run(to("object"), float(1.0)).unwrap_err(),
        "conversion from float64 to object is not supported with format none"
    );
    assert_eq!(
        run(json!({"type": "convert", "convert": {"toType": "int", "format": "quantity"}}), json!("1"))
            .unwrap_err(),
        "conversion from string to int64 is not supported with format quantity"
    );
    assert_eq!(run(to("string"), json!({"a": 1})).unwrap_err(), "invalid input type map[string]interface {}");
    assert_eq!(run(to("string"), Value::Null).unwrap_err(), "invalid input type <nil>");
}

#[test]
fn transforms_chain_and_errors_name_the_index() {
    let ts = vec![
        transform(json!({"type": "convert", "convert": {"toType": "int64"}})),
        transform(json!({"type": "string", "string": {"fmt": "%03d"}})),
    ];
    assert_eq!(resolve_all(&ts, float(7.0)).unwrap(), json!("007"));
    let failing = vec![
        transform(json!({"type": "string", "string": {"fmt": "%s"}})),
        transform(json!({"type": "math", "math": {"multiply": 2}})),
    ];
    assert_eq!(
        resolve_all(&failing, json!("x")).unwrap_err().to_string(),
        "transform at index 1 returned error: math transform could not resolve: input is required to be a number for math transformer, got string"
    );
}

#[test]
fn bad_transforms_are_refused_with_field_paths() {
    assert_eq!(
        compile_error(json!({"type": "nope"})),
        "transforms[0].type: Invalid value: \"nope\": unknown transform type"
    );
    assert_eq!(
        compile_error(json!({"type": "math"})),
        "transforms[0].math: Required value: given transform type math requires configuration"
    );
    assert_eq!(
        compile_error(json!({"type": "math", "math": {"type": "ClampMin"}})),
        "transforms[0].math.clampMin: Required value: must specify a value if a clamp min math transform is specified"
    );
    assert_eq!(
        compile_error(json!({"type": "math", "math": {"type": "Divide", "multiply": 2}})),
        "transforms[0].math.type: Invalid value: \"Divide\": unknown math transform type"
    );
    assert_eq!(
        compile_error(json!({"type": "map", "map": {}})),
        "transforms[0].map.pairs: Required value: at least one pair must be specified if a map transform is specified"
    );
    assert_eq!(
        compile_error(json!({"type": "match", "match": {"patterns": [{"type": "regexp", "regexp": "("}]}})),
        "transforms[0].match.patterns[0].regexp: Invalid value: \"(\": invalid regexp"
    );
    assert_eq!(
        compile_error(json!({"type": "string", "string": {"type": "Regexp", "regexp": {"match": ""}}})),
        "transforms[0].string.regexp.match: Required value: regexp transform requires a match"
    );
    assert_eq!(
        compile_error(json!({"type": "string", "string": {"type": "Upper"}})),
        "transforms[0].string.type: Invalid value: \"Upper\": unknown string transform type"
    );
    assert_eq!(
        compile_error(json!({"type": "string", "string": {"type": "Convert", "convert": "ToRot13"}})),
        "transforms[0].string.convert: Invalid value: \"ToRot13\": type ToRot13 is not supported for string convert"
    );
    assert_eq!(
        compile_error(json!({"type": "convert", "convert": {"toType": "uint"}})),
        "transforms[0].convert.toType: Invalid value: \"uint\": invalid type"
    );
    assert_eq!(
        compile_error(json!({"type": "convert", "convert": {"toType": "int", "format": "yaml"}})),
        "transforms[0].convert.format: Invalid value: \"yaml\": invalid format"
    );
}
