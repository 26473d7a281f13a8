//! Table tests for `format` checks: valid and invalid samples per format.

use serde_json::json;

use super::{compile, object_with, spec_with};

/// (format, valid samples, invalid samples)
const STRING_FORMATS: &[(&str, &[&str], &[&str])] = &[
    (
        "date-time",
        &[
            "2024-02-29T12:30:00Z",
            "2023-01-01T00:00:00.123456+05:30",
            "1990-12-31t23:59:60z",
            "2024-06-01T10:00:00-07:00",
        ],
        &[
            "2023-02-29T00:00:00Z",
            "2024-01-01 00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-13-01T00:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+5:30",
            "2024-01-01T00:00:00+05:60",
            "",
            "2024-01-01T00:00:00Zjunk",
            "２０２４-01-01T00:00:00Z",
        ],
    ),
    (
        "date",
        &["2024-02-29", "2000-02-29", "1999-12-31"],
        &[
            "2023-02-29",
            "1900-02-29",
            "2024-1-01",
            "2024-04-31",
            "20240101",
            "2024-01-01T00:00:00Z",
        ],
    ),
    (
        "byte",
        &["", "aGVsbG8=", "aGk=", "YWJj", "aGVs\nbG8="],
        &["aGVsbG8", "a===", "aGk!", "====", "a"],
    ),
    (
        "uuid",
        &[
            "123e4567-e89b-12d3-a456-426614174000",
            "123E4567-E89B-12D3-A456-426614174000",
            "123e4567e89b12d3a456426614174000",
        ],
        &[
            "123e4567-e89b-12d3-a456-42661417400",
            "123e4567-e89b-12d3-a456-42661417400g",
            "not-a-uuid",
            "123e4567-e89b12d3-a456-426614174000",
        ],
    ),
    (
        "email",
        &[
            "a@example.com",
            "first.last+tag@sub.example.org",
            "x@localhost",
        ],
        &[
            "plain",
            "@example.com",
            "a@",
            "a..b@example.com",
            ".a@example.com",
            "a@-bad.com",
            "a b@example.com",
        ],
    ),
    (
        "hostname",
        &[
            "example.com",
            "a",
            "my-host.example.com.",
            "xn--bcher-kva.example",
        ],
        &[
            "",
            "-bad.com",
            "bad-.com",
            "a..b",
            "under_score.com",
            "spaces here",
        ],
    ),
    (
        "ipv4",
        &["10.0.0.1", "255.255.255.255", "0.0.0.0"],
        &["256.0.0.1", "1.2.3", "01.2.3.4", "1.2.3.4.5", "::1"],
    ),
    (
        "ipv6",
        &["::1", "2001:db8::8a2e:370:7334", "::ffff:10.0.0.1"],
        &["10.0.0.1", "2001:db8:::1", "gggg::1", ""],
    ),
    (
        "cidr",
        &["10.0.0.0/8", "192.168.0.0/32", "2001:db8::/32", "::/0"],
        &[
            "10.0.0.0/33",
            "10.0.0.0",
            "10.0.0.0/",
            "10.0.0.0/08",
            "::/129",
            "x/8",
        ],
    ),
    (
        "uri",
        &[
            "https://example.com/a?b=c",
            "urn:isbn:0451450523",
            "mailto:a@b.c",
        ],
        &[
            "example.com/path",
            "//host",
            "ht tp://x",
            "1http://x",
            "https://a b",
        ],
    ),
];

#[test]
fn string_format_table() {
    for (format, good, bad) in STRING_FORMATS {
        let s = compile(&spec_with(
            json!({"x": {"type": "string", "format": format}}),
        ));
        for v in *good {
            let errs = s.validate(&object_with(json!({ "x": v })));
            assert!(errs.is_empty(), "{format}: {v:?} should be valid: {errs:?}");
        }
        for v in *bad {
            let errs = s.validate(&object_with(json!({ "x": v })));
            assert_eq!(errs.len(), 1, "{format}: {v:?} should be invalid");
            assert!(
                errs[0]
                    .message
                    .contains(&format!("must be of type {format}")),
                "{}",
                errs[0]
            );
        }
    }
}

#[test]
fn integer_formats() {
    let s32 = compile(&spec_with(
        json!({"x": {"type": "integer", "format": "int32"}}),
    ));
    let s64 = compile(&spec_with(
        json!({"x": {"type": "integer", "format": "int64"}}),
    ));
    for (v, ok32, ok64) in [
        (json!(2147483647), true, true),
        (json!(-2147483648), true, true),
        (json!(2147483648_i64), false, true),
        (json!(-2147483649_i64), false, true),
        (json!(9223372036854775807_i64), false, true),
        (json!(9223372036854775808_u64), false, false),
        (json!(5.0), true, true),
    ] {
        assert_eq!(
            s32.validate(&object_with(json!({ "x": v }))).is_empty(),
            ok32,
            "int32 {v}"
        );
        assert_eq!(
            s64.validate(&object_with(json!({ "x": v }))).is_empty(),
            ok64,
            "int64 {v}"
        );
    }
}
