#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::sprintf;
use crate::golang::value::float;

fn int(v: i64) -> Value {
    Value::from(v)
}

/// Each expected string is what Go's `fmt.Sprintf` prints for the same format and Go values.
#[test]
fn verbs_flags_and_error_forms_match_go() {
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        // Strings.
        ("%s", vec![json!("abc")], "abc"),
        ("%v", vec![json!("abc")], "abc"),
        ("%5s|", vec![json!("ab")], "   ab|"),
        ("%-5s|", vec![json!("ab")], "ab   |"),
        ("%05s", vec![json!("ab")], "000ab"),
        ("%.2s", vec![json!("abcdef")], "ab"),
        ("%6s", vec![json!("héllo")], " héllo"),
        ("%q", vec![json!("hi\n")], "\"hi\\n\""),
        ("%#q", vec![json!("hi")], "`hi`"),
        ("%#v", vec![json!("a")], "\"a\""),
        ("%x", vec![json!("hello")], "68656c6c6f"),
        ("%X", vec![json!("hi")], "6869"),
        ("% x", vec![json!("hel")], "68 65 6c"),
        ("%#x", vec![json!("hi")], "0x6869"),
        ("% #x", vec![json!("hi")], "0x68 0x69"),
        // Floats, the type of every number Crossplane hands a function.
        ("%v", vec![float(5.0)], "5"),
        ("%v", vec![float(5.5)], "5.5"),
        ("%v", vec![float(0.1)], "0.1"),
        ("%v", vec![float(1e6)], "1e+06"),
        ("%v", vec![float(100000000.0)], "1e+08"),
        ("%v", vec![float(123456.0)], "123456"),
        ("%d", vec![float(5.0)], "%!d(float64=5)"),
        ("%s", vec![float(5.0)], "%!s(float64=5)"),
        ("%s", vec![float(2.5)], "%!s(float64=2.5)"),
        ("%f", vec![float(5.0)], "5.000000"),
        ("%.2f", vec![float(1.23456)], "1.23"),
        ("%8.3f|", vec![float(1.23456)], "   1.235|"),
        ("%-8.3f|", vec![float(1.23456)], "1.235   |"),
        ("%08.3f", vec![float(-1.23456)], "-001.235"),
        ("%05.1f", vec![float(2.5)], "002.5"),
        ("%+.1f", vec![float(2.0)], "+2.0"),
        ("% .1f", vec![float(2.0)], " 2.0"),
        ("%6.2f|", vec![float(5.0)], "  5.00|"),
        ("%e", vec![float(1234.5678)], "1.234568e+03"),
        ("%E", vec![float(1234.5678)], "1.234568E+03"),
        ("%g", vec![float(0.000012345)], "1.2345e-05"),
        ("%.3g", vec![float(1234.0)], "1.23e+03"),
        ("%x", vec![float(5.0)], "0x1.4p+02"),
        // Integers, as a convert transform to int64 produces them.
        ("%d", vec![int(5)], "5"),
        ("%v", vec![int(5)], "5"),
        ("%d", vec![int(-42)], "-42"),
        ("%05d", vec![int(42)], "00042"),
        ("%05d", vec![int(-42)], "-0042"),
        ("%-5d|", vec![int(42)], "42   |"),
        ("%+d", vec![int(42)], "+42"),
        ("%.3d", vec![int(7)], "007"),
        ("%08.3d", vec![int(7)], "     007"),
        ("%.0d", vec![int(0)], ""),
        ("%5.0d|", vec![int(0)], "     |"),
        ("%x", vec![int(255)], "ff"),
        ("%#x", vec![int(255)], "0xff"),
        ("%X", vec![int(255)], "FF"),
        ("%o", vec![int(255)], "377"),
        ("%#o", vec![int(255)], "0377"),
        ("%O", vec![int(255)], "0o377"),
        ("%b", vec![int(5)], "101"),
        ("%c", vec![int(65)], "A"),
        ("%q", vec![int(65)], "'A'"),
        ("%U", vec![int(0x1F600)], "U+1F600"),
        ("%s", vec![int(5)], "%!s(int64=5)"),
        // Bools and nil.
        ("%t", vec![json!(true)], "true"),
        ("%v", vec![json!(false)], "false"),
        ("%5t", vec![json!(true)], " true"),
        ("%t", vec![json!("x")], "%!t(string=x)"),
        ("%s", vec![json!(true)], "%!s(bool=true)"),
        ("%v", vec![Value::Null], "<nil>"),
        ("%s", vec![Value::Null], "%!s(<nil>)"),
        ("%d", vec![Value::Null], "%!d(<nil>)"),
        // Collections print element by element.
        ("%v", vec![json!(["a", 1.0])], "[a 1]"),
        ("%s", vec![json!(["a", "b"])], "[a b]"),
        ("%d", vec![json!(["a"])], "[%!d(string=a)]"),
        ("%v", vec![json!([null])], "[<nil>]"),
        ("%d", vec![json!([null])], "[<nil>]"),
        ("%s", vec![json!([])], "[]"),
        ("%v", vec![json!({"b": 2.0, "a": "x"})], "map[a:x b:2]"),
        ("%s", vec![json!({"a": 1.0})], "map[a:%!s(float64=1)]"),
        ("%v", vec![json!({})], "map[]"),
        ("%v", vec![json!({"a": {"b": [1.5]}})], "map[a:map[b:[1.5]]]"),
        // Types.
        ("%T", vec![float(5.0)], "float64"),
        ("%T", vec![json!({})], "map[string]interface {}"),
        ("%T", vec![json!([])], "[]interface {}"),
        ("%T", vec![Value::Null], "<nil>"),
        // Percent, missing, extra, no verb, bad verb (flags still apply to the value).
        ("%%", vec![], "%"),
        ("%d%%", vec![int(50)], "50%"),
        ("%s-%s", vec![json!("a")], "a-%!s(MISSING)"),
        ("%d %d", vec![int(1)], "1 %!d(MISSING)"),
        ("hello", vec![json!("x")], "hello%!(EXTRA string=x)"),
        ("%s", vec![json!("a"), float(5.0), Value::Null], "a%!(EXTRA float64=5, <nil>)"),
        ("%", vec![], "%!(NOVERB)"),
        ("%z", vec![json!("a")], "%!z(string=a)"),
        ("%5d", vec![json!("a")], "%!d(string=    a)"),
        // Argument indexes, star width and precision.
        ("%[2]s %[1]s", vec![json!("a"), json!("b")], "b a"),
        ("%[1]s-%[1]s", vec![json!("a")], "a-a"),
        ("%[3]s", vec![json!("a")], "%!s(BADINDEX)"),
        ("%[1]s %s", vec![json!("a"), json!("b")], "a b"),
        ("%*d", vec![int(5), int(42)], "   42"),
        ("%-*d|", vec![int(4), int(7)], "7   |"),
        ("%*d", vec![float(5.0), int(42)], "%!(BADWIDTH)42"),
        ("%.*f", vec![int(2), float(1.23456)], "1.23"),
        ("%.*f", vec![int(-1), float(1.5)], "%!(BADPREC)1.500000"),
        // Plain text and several verbs, as in combine patches.
        ("%s-%s-bucket", vec![json!("team"), json!("dev")], "team-dev-bucket"),
        ("%v-%v", vec![json!("a"), float(3.0)], "a-3"),
    ];
    for (format, args, want) in cases {
        assert_eq!(sprintf(format, &args), want, "Sprintf({format:?}, {args:?})");
    }
}
