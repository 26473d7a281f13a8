//! The table of Go templates and their expected output, written from Go's `text/template`
//! documentation and Sprig's; an expectation starting `ERR:` is the whole error text.
//! Data: [`fixture`], decoded as function-go-templating decodes a request (every number a
//! float64).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn fixture() -> Value {
    crate::golang::value::as_float64(json!({
        "str": "hello",
        "num": 3,
        "f": 1.5,
        "big": 1000000,
        "neg": -2,
        "t": true,
        "no": false,
        "nil": null,
        "empty": "",
        "list": ["a", "b", "c"],
        "nums": [1, 2, 3],
        "map": {"b": 2, "a": 1, "c": "x"},
        "nested": {"inner": {"deep": "value"}, "list": [{"name": "n1"}, {"name": "n2"}]},
        "emptylist": [],
        "emptymap": {},
        "html": "<a href=\"x\">&'</a>",
        "mixed": [1, "two", null, true],
        "csv": "a,b,,c",
        "yaml": "a: 1\nb: [x, y]\n",
        "json": "{\"a\": 1, \"b\": [true, null]}",
        "b64": "aGVsbG8=",
        "spaces": "  padded  ",
        "multi": "line1\nline2",
        "words": "hello wide world",
        "ver": "1.2.3",
    }))
}

fn funcs() -> Arc<Funcs> {
    static FUNCS: OnceLock<Arc<Funcs>> = OnceLock::new();
    FUNCS
        .get_or_init(|| {
            let mut f = builtin_funcs();
            f.extend(sprig::funcs());
            Arc::new(f)
        })
        .clone()
}

fn render_with(text: &str, options: &[&str], data: &Value) -> Result<String, String> {
    let mut t = Template::new("t", funcs());
    for o in options {
        t.option(o)?;
    }
    t.parse(text).map_err(|e| e.0)?;
    t.execute(data).map_err(|e| e.0)
}

fn render(text: &str) -> Result<String, String> {
    render_with(text, &[], &fixture())
}

/// (template, expected output or `ERR:` and the error).
const CASES: &[(&str, &str)] = &[
    // Text and comments.
    ("", ""),
    ("plain text", "plain text"),
    ("a{{/* comment */}}b", "ab"),
    ("a {{- /* comment */ -}} b", "ab"),
    ("{{/* multi\nline */}}x", "x"),
    ("a {{- \"b\" -}} c", "abc"),
    ("a\n\n  {{- \"b\"}}", "ab"),
    ("{{\"b\" -}}  \n\t c", "bc"),
    ("{{- 3 }}", "3"),
    ("{{-3}}", "-3"),
    ("{{ 3 -}} \n x", "3x"),
    ("x {{- .str -}} y", "xhelloy"),
    // Fields and printing.
    ("{{.str}}", "hello"),
    ("{{ .str }}", "hello"),
    ("{{.num}}", "3"),
    ("{{.f}}", "1.5"),
    ("{{.big}}", "1e+06"),
    ("{{.neg}}", "-2"),
    ("{{.t}}", "true"),
    ("{{.no}}", "false"),
    ("{{.nil}}", "<no value>"),
    ("{{.missing}}", "<no value>"),
    ("{{.missing.deeper}}", "<no value>"),
    ("{{.empty}}", ""),
    ("{{.list}}", "[a b c]"),
    ("{{.nums}}", "[1 2 3]"),
    ("{{.map}}", "map[a:1 b:2 c:x]"),
    ("{{.nested.inner.deep}}", "value"),
    ("{{.nested.inner}}", "map[deep:value]"),
    ("{{.emptylist}}", "[]"),
    ("{{.emptymap}}", "map[]"),
    ("{{.mixed}}", "[1 two <nil> true]"),
    ("{{.}}", "map[b64:aGVsbG8= big:1e+06 csv:a,b,,c empty: emptylist:[] emptymap:map[] f:1.5 html:<a href=\"x\">&'</a> json:{\"a\": 1, \"b\": [true, null]} list:[a b c] map:map[a:1 b:2 c:x] mixed:[1 two <nil> true] multi:line1\nline2 neg:-2 nested:map[inner:map[deep:value] list:[map[name:n1] map[name:n2]]] nil:<nil> no:false num:3 nums:[1 2 3] spaces:  padded   str:hello t:true ver:1.2.3 words:hello wide world yaml:a: 1\nb: [x, y]\n]"),
    ("{{.nil.x}}", "ERR:template: t:1:6: executing \"t\" at <.nil.x>: nil pointer evaluating interface {}.x"),
    ("{{.str.x}}", "ERR:template: t:1:6: executing \"t\" at <.str.x>: can't evaluate field x in type interface {}"),
    ("{{.str 1}}", "ERR:template: t:1:2: executing \"t\" at <.str>: str is not a method but has arguments"),
    ("{{1 | .str}}", "ERR:template: t:1:6: executing \"t\" at <.str>: str is not a method but has arguments"),
    ("{{$x := \"s\"}}{{$x.f}}", "ERR:template: t:1:17: executing \"t\" at <$x.f>: can't evaluate field f in type string"),
    // Constants.
    ("{{1}}", "1"),
    ("{{1.0}}", "1"),
    ("{{1.5}}", "1.5"),
    ("{{1e3}}", "1000"),
    ("{{0x10}}", "16"),
    ("{{0o17}}", "15"),
    ("{{0b101}}", "5"),
    ("{{1_000}}", "1000"),
    ("{{'a'}}", "97"),
    ("{{'\\n'}}", "10"),
    ("{{\"quoted\\tstring\"}}", "quoted\tstring"),
    ("{{`raw\\n`}}", "raw\\n"),
    ("{{true}}", "true"),
    ("{{false}}", "false"),
    ("{{nil}}", "ERR:template: t:1:2: executing \"t\" at <nil>: nil is not a command"),
    ("{{\"a\" 1}}", "ERR:template: t:1:2: executing \"t\" at <\"a\">: can't give argument to non-function \"a\""),
    ("{{printf \"%T\" 1}}", "int"),
    ("{{printf \"%T\" 1.0}}", "float64"),
    ("{{printf \"%T\" 1e3}}", "float64"),
    ("{{printf \"%T\" .num}}", "float64"),
    ("{{printf \"%T\" \"s\"}}", "string"),
    ("{{printf \"%T\" true}}", "bool"),
    // Variables.
    ("{{$x := 1}}{{$x}}", "1"),
    ("{{$x := .str}}{{$x}}", "hello"),
    ("{{$x := 1}}{{$x = 2}}{{$x}}", "2"),
    ("{{$.str}}", "hello"),
    ("{{with .nested}}{{$.str}}{{end}}", "hello"),
    ("{{$x := .map}}{{$x.a}}", "1"),
    ("{{$y}}", "ERR:template: t:1: undefined variable \"$y\""),
    ("{{if true}}{{$x := 1}}{{end}}{{$x}}", "ERR:template: t:1: undefined variable \"$x\""),
    ("{{$x := 1}}{{if true}}{{$x = 2}}{{end}}{{$x}}", "2"),
    ("{{$x := 1}}{{range .list}}{{$x = .}}{{end}}{{$x}}", "c"),
    ("{{$x := 1}}{{$x := 2}}{{$x}}", "2"),
    ("{{$x := (1)}}{{$x}}", "1"),
    // Pipelines.
    ("{{.str | printf \"%s!\"}}", "hello!"),
    ("{{\"a\" | printf \"%s%s\" \"b\"}}", "ba"),
    ("{{1 | printf \"%d-%d\" 2}}", "2-1"),
    ("{{.str | upper | lower}}", "hello"),
    ("{{(printf \"%s\" .str)}}", "hello"),
    ("{{(.map).a}}", "1"),
    ("{{(index .nested.list 1).name}}", "n2"),
    ("{{.str | 1}}", "ERR:template: t:1: non executable command in pipeline stage 2"),
    ("{{}}", "ERR:template: t:1: missing value for command"),
    ("{{(1) 2}}", "ERR:template: t:1:2: executing \"t\" at <(1) 2>: can't give argument to non-function (1)"),
    // if / else if / else.
    ("{{if true}}yes{{end}}", "yes"),
    ("{{if false}}yes{{end}}", ""),
    ("{{if false}}yes{{else}}no{{end}}", "no"),
    ("{{if .t}}T{{end}}", "T"),
    ("{{if .no}}T{{else}}F{{end}}", "F"),
    ("{{if .nil}}T{{else}}F{{end}}", "F"),
    ("{{if .missing}}T{{else}}F{{end}}", "F"),
    ("{{if .empty}}T{{else}}F{{end}}", "F"),
    ("{{if .str}}T{{else}}F{{end}}", "T"),
    ("{{if .emptylist}}T{{else}}F{{end}}", "F"),
    ("{{if .list}}T{{else}}F{{end}}", "T"),
    ("{{if .emptymap}}T{{else}}F{{end}}", "F"),
    ("{{if .map}}T{{else}}F{{end}}", "T"),
    ("{{if 0}}T{{else}}F{{end}}", "F"),
    ("{{if 0.0}}T{{else}}F{{end}}", "F"),
    ("{{if 1}}T{{else}}F{{end}}", "T"),
    ("{{if false}}a{{else if true}}b{{else}}c{{end}}", "b"),
    ("{{if false}}a{{else if false}}b{{else}}c{{end}}", "c"),
    ("{{if false}}a{{else if false}}b{{else if true}}c{{end}}", "c"),
    ("{{if $x := .str}}{{$x}}{{end}}", "hello"),
    ("{{if true}}a{{else}}b{{else}}c{{end}}", "ERR:template: t:1: expected end; found {{else}}"),
    ("{{if true}}", "ERR:template: t:1: unexpected EOF"),
    ("{{end}}", "ERR:template: t:1: unexpected {{end}}"),
    ("{{else}}", "ERR:template: t:1: unexpected {{else}}"),
    ("{{if}}x{{end}}", "ERR:template: t:1: missing value for if"),
    // with.
    ("{{with .nested.inner}}{{.deep}}{{end}}", "value"),
    ("{{with .missing}}x{{else}}none{{end}}", "none"),
    ("{{with .empty}}x{{else}}none{{end}}", "none"),
    ("{{with $x := .str}}{{$x}}-{{.}}{{end}}", "hello-hello"),
    ("{{with .missing}}a{{else with .str}}{{.}}{{end}}", "hello"),
    ("{{with .missing}}a{{else with .nil}}b{{else}}c{{end}}", "c"),
    // range.
    ("{{range .list}}{{.}}{{end}}", "abc"),
    ("{{range $i, $e := .list}}{{$i}}={{$e}} {{end}}", "0=a 1=b 2=c "),
    ("{{range $e := .list}}{{$e}}{{end}}", "abc"),
    ("{{range .map}}{{.}},{{end}}", "1,2,x,"),
    ("{{range $k, $v := .map}}{{$k}}={{$v}};{{end}}", "a=1;b=2;c=x;"),
    ("{{range .emptylist}}x{{else}}empty{{end}}", "empty"),
    ("{{range .emptymap}}x{{else}}empty{{end}}", "empty"),
    ("{{range .missing}}x{{else}}none{{end}}", "none"),
    ("{{range .nil}}x{{else}}none{{end}}", "none"),
    ("{{range .list}}{{if eq . \"b\"}}{{break}}{{end}}{{.}}{{end}}", "a"),
    ("{{range .list}}{{if eq . \"b\"}}{{continue}}{{end}}{{.}}{{end}}", "ac"),
    ("{{range 3}}{{.}}{{end}}", "012"),
    ("{{range $i := 3}}{{$i}}{{end}}", "012"),
    ("{{range .num}}{{.}}{{end}}", "ERR:template: t:1:8: executing \"t\" at <{{range .num}}>: range can't iterate over 3"),
    ("{{range .str}}{{.}}{{end}}", "ERR:template: t:1:8: executing \"t\" at <{{range .str}}>: range can't iterate over hello"),
    ("{{range .nested.list}}{{.name}} {{end}}", "n1 n2 "),
    ("{{range $i, $e := .nested.list}}{{$i}}:{{$e.name}} {{end}}", "0:n1 1:n2 "),
    ("{{range .list}}{{$.str}}{{end}}", "hellohellohello"),
    ("{{range $i, $e := .list}}{{end}}{{$i}}", "ERR:template: t:1: undefined variable \"$i\""),
    ("{{break}}", "ERR:template: t:1: {{break}} outside {{range}}"),
    ("{{continue}}", "ERR:template: t:1: {{continue}} outside {{range}}"),
    ("{{range .list}}{{.}}{{else}}e{{end}}", "abc"),
    ("{{$x := 0}}{{range .nums}}{{$x = .}}{{end}}{{$x}}", "3"),
    ("{{range $i, $e := .list}}{{if $i}},{{end}}{{$e}}{{end}}", "a,b,c"),
    // define / template / block.
    ("{{define \"T\"}}in T{{end}}{{template \"T\"}}", "in T"),
    ("{{define \"T\"}}{{.}}{{end}}{{template \"T\" .str}}", "hello"),
    ("{{define \"T\"}}{{.}}{{end}}{{template \"T\"}}", "<no value>"),
    ("{{define \"T\"}}{{$}}{{end}}{{template \"T\" 5}}", "5"),
    ("{{template \"nope\"}}", "ERR:template: t:1:11: executing \"t\" at <{{template \"nope\"}}>: template \"nope\" not defined"),
    ("{{block \"B\" .str}}[{{.}}]{{end}}", "[hello]"),
    ("{{define \"A\"}}a{{template \"B\" .}}{{end}}{{define \"B\"}}b{{end}}{{template \"A\"}}", "ab"),
    ("{{define \"T\"}}{{$x}}{{end}}", "ERR:template: t:1: undefined variable \"$x\""),
    ("{{define \"T\"}}{{.missing.x}}{{end}}{{template \"T\" .}}", "<no value>"),
    ("{{define \"T\"}}{{.nil.x}}{{end}}{{template \"T\" .}}", "ERR:template: t:1:20: executing \"T\" at <.nil.x>: nil pointer evaluating interface {}.x"),
    ("{{define \"T\"}}a{{end}}{{define \"T\"}}b{{end}}", "ERR:template: multiple definition of template \"T\""),
    ("{{define \"T\"}}{{template \"T\"}}{{end}}{{template \"T\"}}", "ERR:template: t:1:25: executing \"T\" at <{{template \"T\"}}>: exceeded maximum template depth (1000)"),
    // Builtins: and, or, not.
    ("{{and 1 2}}", "2"),
    ("{{and 0 2}}", "0"),
    ("{{and .str .empty}}", ""),
    ("{{or 0 2}}", "2"),
    ("{{or 0 \"\"}}", ""),
    ("{{or .missing \"d\"}}", "d"),
    ("{{or .str (fail \"never\")}}", "hello"),
    ("{{and false (fail \"never\")}}", "false"),
    ("{{not true}}", "false"),
    ("{{not .missing}}", "true"),
    ("{{not .list}}", "false"),
    ("{{not .emptylist}}", "true"),
    ("{{and}}", "ERR:template: t:1:2: executing \"t\" at <and>: wrong number of args for and: want at least 1 got 0"),
    ("{{not 1 2}}", "ERR:template: t:1:2: executing \"t\" at <not>: wrong number of args for not: want 1 got 2"),
    // len, index, slice.
    ("{{len .str}}", "5"),
    ("{{len .list}}", "3"),
    ("{{len .map}}", "3"),
    ("{{len .emptylist}}", "0"),
    ("{{len \"héllo\"}}", "6"),
    ("{{len .num}}", "ERR:template: t:1:2: executing \"t\" at <len .num>: error calling len: len of type float64"),
    ("{{len .nil}}", "ERR:template: t:1:2: executing \"t\" at <len .nil>: error calling len: len of nil pointer"),
    ("{{index .list 1}}", "b"),
    ("{{index .map \"c\"}}", "x"),
    ("{{index .map \"zz\"}}", "<no value>"),
    ("{{index .nested \"inner\" \"deep\"}}", "value"),
    ("{{index .nested.list 0 \"name\"}}", "n1"),
    ("{{index .str 1}}", "101"),
    ("{{index .list 3}}", "ERR:template: t:1:2: executing \"t\" at <index .list 3>: error calling index: reflect: slice index out of range"),
    ("{{index .list 5}}", "ERR:template: t:1:2: executing \"t\" at <index .list 5>: error calling index: index out of range: 5"),
    ("{{index .list -1}}", "ERR:template: t:1:2: executing \"t\" at <index .list -1>: error calling index: index out of range: -1"),
    ("{{index .list .num}}", "ERR:template: t:1:2: executing \"t\" at <index .list .num>: error calling index: cannot index slice/array with type float64"),
    ("{{index .missing \"a\"}}", "ERR:template: t:1:2: executing \"t\" at <index .missing \"a\">: error calling index: index of untyped nil"),
    ("{{index .map \"zz\" \"a\"}}", "ERR:template: t:1:2: executing \"t\" at <index .map \"zz\" \"a\">: error calling index: index of nil pointer"),
    ("{{index .num 1}}", "ERR:template: t:1:2: executing \"t\" at <index .num 1>: error calling index: can't index item of type float64"),
    ("{{index .list}}", "[a b c]"),
    ("{{slice .str 1 3}}", "ERR:template: t:1:2: executing \"t\" at <slice .str 1 3>: error calling slice: Cannot slice on type string"),
    ("{{slice .list 1}}", "[b c]"),
    ("{{slice .list 1 2}}", "[b]"),
    ("{{slice .list}}", "[a b c]"),
    // print, printf, println.
    ("{{print \"a\" \"b\"}}", "ab"),
    ("{{print 1 2}}", "1 2"),
    ("{{print \"a\" 1 2 \"b\"}}", "a1 2b"),
    ("{{print .missing}}", "<nil>"),
    ("{{print .list}}", "[a b c]"),
    ("{{println \"a\" 1}}", "a 1\n"),
    ("{{printf \"%d\" 5}}", "5"),
    ("{{printf \"%d\" .num}}", "%!d(float64=3)"),
    ("{{printf \"%v\" .num}}", "3"),
    ("{{printf \"%.2f\" .f}}", "1.50"),
    ("{{printf \"%5s|%-5s|\" \"a\" \"b\"}}", "    a|b    |"),
    ("{{printf \"%q\" .str}}", "\"hello\""),
    ("{{printf \"%x\" \"hi\"}}", "6869"),
    ("{{printf \"%s\" .list}}", "[a b c]"),
    ("{{printf \"%v\" .map}}", "map[a:1 b:2 c:x]"),
    ("{{printf \"%s %s\" \"a\"}}", "a %!s(MISSING)"),
    ("{{printf \"%s\" \"a\" \"b\"}}", "a%!(EXTRA string=b)"),
    ("{{printf \"%t\" true}}", "true"),
    ("{{printf \"%05d\" 42}}", "00042"),
    ("{{printf \"%e\" 1234.5}}", "1.234500e+03"),
    ("{{printf \"%g\" .big}}", "1e+06"),
    ("{{printf \"%v\" nil}}", "<nil>"),
    ("{{printf 1}}", "ERR:template: t:1:9: executing \"t\" at <1>: expected string; found 1"),
    // Comparisons.
    ("{{eq 1 1}}", "true"),
    ("{{eq 1 2}}", "false"),
    ("{{eq \"a\" \"a\"}}", "true"),
    ("{{eq .str \"hello\"}}", "true"),
    ("{{eq .num 3.0}}", "true"),
    ("{{eq .num 3}}", "ERR:template: t:1:2: executing \"t\" at <eq .num 3>: error calling eq: incompatible types for comparison"),
    ("{{eq 1 2 3 1}}", "true"),
    ("{{eq 1 2 3}}", "false"),
    ("{{eq .missing \"x\"}}", "false"),
    ("{{eq .missing nil}}", "true"),
    ("{{eq .nil nil}}", "true"),
    ("{{eq true true}}", "true"),
    ("{{eq .map .map}}", "ERR:template: t:1:2: executing \"t\" at <eq .map .map>: error calling eq: non-comparable type map[a:1 b:2 c:x]: map[string]interface {}"),
    ("{{eq 1}}", "ERR:template: t:1:2: executing \"t\" at <eq 1>: error calling eq: missing argument for comparison"),
    ("{{ne 1 2}}", "true"),
    ("{{ne \"a\" \"a\"}}", "false"),
    ("{{ne .num 3}}", "ERR:template: t:1:2: executing \"t\" at <ne .num 3>: error calling ne: incompatible types for comparison"),
    ("{{lt 1 2}}", "true"),
    ("{{lt 2 1}}", "false"),
    ("{{lt 1.5 2.5}}", "true"),
    ("{{lt \"a\" \"b\"}}", "true"),
    ("{{lt .num 4.0}}", "true"),
    ("{{lt .num 4}}", "ERR:template: t:1:2: executing \"t\" at <lt .num 4>: error calling lt: incompatible types for comparison"),
    ("{{lt true false}}", "ERR:template: t:1:2: executing \"t\" at <lt true false>: error calling lt: invalid type for comparison"),
    ("{{lt .missing 1}}", "ERR:template: t:1:2: executing \"t\" at <lt .missing 1>: error calling lt: invalid type for comparison"),
    ("{{le 2 2}}", "true"),
    ("{{le 3 2}}", "false"),
    ("{{gt 3 2}}", "true"),
    ("{{gt 2 2}}", "false"),
    ("{{ge 2 2}}", "true"),
    ("{{ge 1 2}}", "false"),
    ("{{gt (len .list) 2}}", "true"),
    ("{{if eq .str \"hello\" \"bye\"}}match{{end}}", "match"),
    // Escapers.
    ("{{html .html}}", "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;"),
    ("{{js .html}}", "\\u003Ca href\\u003D\\\"x\\\"\\u003E\\u0026\\'\\u003C/a\\u003E"),
    ("{{js \"a=b\\n\"}}", "a\\u003Db\\u000A"),
    ("{{urlquery \"a b&c=d/é\"}}", "a+b%26c%3Dd%2F%C3%A9"),
    ("{{.html | html}}", "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;"),
    ("{{html 1 2}}", "1 2"),
    ("{{html .missing}}", "&lt;no value&gt;"),
    ("{{call .str}}", "ERR:template: t:1:2: executing \"t\" at <call .str>: error calling call: non-function of type string"),
    ("{{call .missing}}", "ERR:template: t:1:2: executing \"t\" at <call .missing>: error calling call: call of nil"),
    // Parse errors.
    ("{{.str", "ERR:template: t:1: unclosed action"),
    ("{{nofunc 1}}", "ERR:template: t:1: function \"nofunc\" not defined"),
    ("{{\"unterminated}}", "ERR:template: t:1: unterminated quoted string"),
    ("{{/* unclosed", "ERR:template: t:1: unclosed comment"),
    ("{{3x}}", "ERR:template: t:1: bad number syntax: \"3x\""),
    ("{{(1}}", "ERR:template: t:1: unclosed left paren"),
    ("{{1)}}", "ERR:template: t:1: unexpected right paren"),
    ("line1\n{{if}}", "ERR:template: t:2: missing value for if"),
    ("{{range $i, $e, $f := .list}}{{end}}", "ERR:template: t:1: too many declarations in range"),
    ("{{with $a, $b := .list}}{{end}}", "ERR:template: t:1: too many declarations in with"),
    ("{{template .str}}", "ERR:template: t:1: unexpected \".str\" in template clause"),
    ("{{.str | \"x\"}}", "ERR:template: t:1: non executable command in pipeline stage 2"),
    ("{{if true}}{{end}}{{end}}", "ERR:template: t:1: unexpected {{end}}"),
    // Execution error positions: line and column.
    ("a\nb {{.nil.x}}", "ERR:template: t:2:8: executing \"t\" at <.nil.x>: nil pointer evaluating interface {}.x"),
    ("line1\n  {{fail \"boom\"}}", "ERR:template: t:2:4: executing \"t\" at <fail \"boom\">: error calling fail: boom"),
    ("{{ upper 1 }}", "ERR:template: t:1:9: executing \"t\" at <1>: expected string; found 1"),
    ("{{ upper .num }}", "ERR:template: t:1:9: executing \"t\" at <.num>: wrong type for value; expected string; got float64"),
    ("{{ upper .nil }}", "ERR:template: t:1:9: executing \"t\" at <.nil>: wrong type for value; expected string; got interface {}"),
    ("{{ upper .missing }}", "ERR:template: t:1:9: executing \"t\" at <.missing>: invalid value; expected string"),
    ("{{ until .num }}", "ERR:template: t:1:9: executing \"t\" at <.num>: wrong type for value; expected int; got float64"),
    ("{{ until (int .num) }}", "[0 1 2]"),
    ("{{ trunc 2.5 \"abc\" }}", "ERR:template: t:1:9: executing \"t\" at <2.5>: expected integer; found 2.5"),
    ("{{ ternary 1 2 \"x\" }}", "ERR:template: t:1:15: executing \"t\" at <\"x\">: expected bool; found \"x\""),
    ("{{ get .list \"a\" }}", "ERR:template: t:1:7: executing \"t\" at <.list>: wrong type for value; expected map[string]interface {}; got []interface {}"),
    // missingkey options.
    ("{{.missing}}|{{.map.zz}}", "<no value>|<no value>"),
];

const MISSINGKEY_CASES: &[(&str, &str, &str)] = &[
    ("missingkey=default", "{{.missing}}", "<no value>"),
    ("missingkey=invalid", "{{.missing}}", "<no value>"),
    ("missingkey=zero", "{{.missing}}", "<no value>"),
    ("missingkey=zero", "{{.missing.x}}", "ERR:template: t:1:10: executing \"t\" at <.missing.x>: nil pointer evaluating interface {}.x"),
    ("missingkey=zero", "{{printf \"%v\" .missing}}", "<nil>"),
    ("missingkey=error", "{{.missing}}", "ERR:template: t:1:2: executing \"t\" at <.missing>: map has no entry for key \"missing\""),
    ("missingkey=error", "{{.map.zz}}", "ERR:template: t:1:6: executing \"t\" at <.map.zz>: map has no entry for key \"zz\""),
    ("missingkey=error", "{{.str}}", "hello"),
    ("missingkey=error", "{{index .map \"zz\"}}", "<no value>"),
    ("missingkey=error", "{{$x := .missing}}", "ERR:template: t:1:8: executing \"t\" at <.missing>: map has no entry for key \"missing\""),
];

/// Sprig cases.
const SPRIG_CASES: &[(&str, &str)] = &[
    // Strings.
    ("{{upper \"abc\"}}", "ABC"),
    ("{{lower \"ABC\"}}", "abc"),
    ("{{title \"hello wide world\"}}", "Hello Wide World"),
    ("{{untitle \"Hello World\"}}", "hello world"),
    ("{{trim .spaces}}", "padded"),
    ("{{trimAll \"$\" \"$5.00$\"}}", "5.00"),
    ("{{trimPrefix \"-\" \"-hello\"}}", "hello"),
    ("{{trimSuffix \"-\" \"hello-\"}}", "hello"),
    ("{{repeat 3 \"ab\"}}", "ababab"),
    ("{{substr 0 5 \"hello world\"}}", "hello"),
    ("{{substr 6 -1 \"hello world\"}}", "world"),
    ("{{trunc 5 \"hello world\"}}", "hello"),
    ("{{trunc -5 \"hello world\"}}", "world"),
    ("{{trunc 50 \"hello\"}}", "hello"),
    ("{{abbrev 5 \"hello world\"}}", "he..."),
    ("{{abbrev 20 \"hello world\"}}", "hello world"),
    ("{{abbrevboth 5 10 \"1234 5678 9123\"}}", "...5678..."),
    ("{{nospace \"h e l l o\"}}", "hello"),
    ("{{initials \"First Try\"}}", "FT"),
    ("{{len (randAlphaNum 8)}}", "8"),
    ("{{len (randAlpha 5)}}", "5"),
    ("{{len (randNumeric 4)}}", "4"),
    ("{{len (randAscii 7)}}", "7"),
    ("{{regexMatch \"^[0-9]+$\" (randNumeric 6)}}", "true"),
    ("{{swapcase \"This Is A.Test\"}}", "tHIS iS a.tEST"),
    ("{{len (shuffle \"hello\")}}", "5"),
    ("{{snakecase \"FirstName\"}}", "first_name"),
    ("{{snakecase \"HTTPServer\"}}", "http_server"),
    ("{{camelcase \"http_server\"}}", "HttpServer"),
    ("{{kebabcase \"FirstName\"}}", "first-name"),
    ("{{wrap 5 \"Hello World\"}}", "Hello\nWorld"),
    ("{{wrapWith 5 \"\\t\" \"Hello World\"}}", "Hello\tWorld"),
    ("{{contains \"cat\" \"catch\"}}", "true"),
    ("{{contains \"dog\" \"catch\"}}", "false"),
    ("{{hasPrefix \"cat\" \"catch\"}}", "true"),
    ("{{hasSuffix \"ch\" \"catch\"}}", "true"),
    ("{{quote \"a\" 1 .missing}}", "\"a\" \"1\""),
    ("{{quote .str}}", "\"hello\""),
    ("{{quote \"a\\\"b\"}}", "\"a\\\"b\""),
    ("{{squote .str}}", "'hello'"),
    ("{{cat \"hello\" \"beautiful\" \"world\"}}", "hello beautiful world"),
    ("{{cat \"a\" .missing 1}}", "a 1"),
    ("{{indent 2 \"a\\nb\"}}", "  a\n  b"),
    ("{{nindent 2 \"a\\nb\"}}", "\n  a\n  b"),
    ("{{replace \" \" \"-\" \"I Am Henry\"}}", "I-Am-Henry"),
    ("{{plural \"one anchovy\" \"many anchovies\" 1}}", "one anchovy"),
    ("{{plural \"one anchovy\" \"many anchovies\" 2}}", "many anchovies"),
    ("{{toString 1}}", "1"),
    ("{{toString .num}}", "3"),
    ("{{toString .list}}", "[a b c]"),
    ("{{toString .missing}}", "<nil>"),
    ("{{split \"$\" \"foo$bar$baz\"}}", "map[_0:foo _1:bar _2:baz]"),
    ("{{(split \"$\" \"foo$bar$baz\")._1}}", "bar"),
    ("{{splitList \",\" .csv}}", "[a b  c]"),
    ("{{splitn \"$\" 2 \"foo$bar$baz\"}}", "map[_0:foo _1:bar$baz]"),
    ("{{join \"-\" .list}}", "a-b-c"),
    ("{{join \",\" .mixed}}", "1,two,true"),
    ("{{join \",\" .str}}", "hello"),
    ("{{sortAlpha (list \"c\" \"a\" \"b\")}}", "[a b c]"),
    ("{{toStrings (list 1 2 3)}}", "[1 2 3]"),
    ("{{until 3}}", "[0 1 2]"),
    ("{{until -3}}", "[0 -1 -2]"),
    ("{{untilStep 3 9 2}}", "[3 5 7]"),
    ("{{untilStep 5 0 -2}}", "[5 3 1]"),
    ("{{seq 3}}", "1 2 3"),
    ("{{seq 2 4}}", "2 3 4"),
    ("{{seq 0 2 6}}", "0 2 4 6"),
    ("{{seq 3 1}}", "3 2 1"),
    ("{{range until 2}}x{{end}}", "xx"),
    ("{{trimall \"x\" \"xxaxx\"}}", "a"),
    // Math.
    ("{{add 1 2 3}}", "6"),
    ("{{add .num 1}}", "4"),
    ("{{add 1.9 1}}", "2"),
    ("{{add1 5}}", "6"),
    ("{{sub 5 2}}", "3"),
    ("{{mul 2 3 4}}", "24"),
    ("{{div 7 2}}", "3"),
    ("{{mod 7 3}}", "1"),
    ("{{div 1 0}}", "ERR:template: t:1:2: executing \"t\" at <div 1 0>: error calling div: runtime error: integer divide by zero"),
    ("{{max 1 5 3}}", "5"),
    ("{{biggest 1 5 3}}", "5"),
    ("{{min 4 2 8}}", "2"),
    ("{{addf 1.5 2}}", "3.5"),
    ("{{addf 0.1 0.2}}", "0.3"),
    ("{{add1f 1.5}}", "2.5"),
    ("{{subf 5 1.5}}", "3.5"),
    ("{{mulf 1.5 2}}", "3"),
    ("{{divf 10 4}}", "2.5"),
    ("{{maxf 1 2.5 2}}", "2.5"),
    ("{{minf 1 2.5 0.5}}", "0.5"),
    ("{{ceil 1.2}}", "2"),
    ("{{floor 1.8}}", "1"),
    ("{{round 3.14159 2}}", "3.14"),
    ("{{round 2.5 0}}", "3"),
    ("{{int \"42\"}}", "42"),
    ("{{int .num}}", "3"),
    ("{{int 3.9}}", "3"),
    ("{{int \"abc\"}}", "0"),
    ("{{int \"0x1F\"}}", "31"),
    ("{{int64 \"7\"}}", "7"),
    ("{{float64 \"1.5\"}}", "1.5"),
    ("{{printf \"%T\" (float64 1)}}", "float64"),
    ("{{printf \"%T\" (int .num)}}", "int"),
    ("{{atoi \"12\"}}", "12"),
    ("{{toDecimal \"0777\"}}", "511"),
    ("{{printf \"%d\" (add 1 2)}}", "3"),
    ("{{eq (add 1 2) 3}}", "true"),
    ("{{len (list 1 2) | add 1}}", "3"),
    // Defaults and flow.
    ("{{default \"d\" .missing}}", "d"),
    ("{{default \"d\" .empty}}", "d"),
    ("{{default \"d\" .str}}", "hello"),
    ("{{default \"d\" .no}}", "d"),
    ("{{default 5 0}}", "5"),
    ("{{.missing | default \"d\"}}", "d"),
    ("{{.str | default \"d\"}}", "hello"),
    ("{{empty .missing}}", "true"),
    ("{{empty .emptymap}}", "true"),
    ("{{empty .list}}", "false"),
    ("{{empty 0}}", "true"),
    ("{{coalesce .missing .empty \"c\"}}", "c"),
    ("{{coalesce .missing}}", "<no value>"),
    ("{{all 1 \"a\" true}}", "true"),
    ("{{all 1 \"\" true}}", "false"),
    ("{{any 0 \"\" true}}", "true"),
    ("{{any 0 \"\"}}", "false"),
    ("{{ternary \"y\" \"n\" true}}", "y"),
    ("{{ternary \"y\" \"n\" false}}", "n"),
    ("{{true | ternary \"y\" \"n\"}}", "y"),
    ("{{fail \"stop here\"}}", "ERR:template: t:1:2: executing \"t\" at <fail \"stop here\">: error calling fail: stop here"),
    ("{{required}}", "ERR:template: t:1: function \"required\" not defined"),
    // Encoding.
    ("{{b64enc \"hello\"}}", "aGVsbG8="),
    ("{{b64dec .b64}}", "hello"),
    ("{{b64dec \"!!\"}}", "illegal base64 data at input byte 0"),
    ("{{b32enc \"hello\"}}", "NBSWY3DP"),
    ("{{b32dec \"NBSWY3DP\"}}", "hello"),
    ("{{toJson .map}}", "{\"a\":1,\"b\":2,\"c\":\"x\"}"),
    ("{{toJson .html}}", "\"\\u003ca href=\\\"x\\\"\\u003e\\u0026'\\u003c/a\\u003e\""),
    ("{{toRawJson .html}}", "\"<a href=\\\"x\\\">&'</a>\""),
    ("{{toJson .nums}}", "[1,2,3]"),
    ("{{toJson .big}}", "1000000"),
    ("{{toJson .missing}}", "null"),
    ("{{toPrettyJson .map}}", "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": \"x\"\n}"),
    ("{{toPrettyJson .nested.list}}", "[\n  {\n    \"name\": \"n1\"\n  },\n  {\n    \"name\": \"n2\"\n  }\n]"),
    ("{{(fromJson .json).a}}", "1"),
    ("{{printf \"%T\" (fromJson .json).a}}", "float64"),
    ("{{(fromJson .json).b}}", "[true <nil>]"),
    ("{{fromJson \"not json\"}}", "<no value>"),
    ("{{mustFromJson \"[\"}}", "ERR:template: t:1:2: executing \"t\" at <mustFromJson \"[\">: error calling mustFromJson: EOF while parsing a list at line 1 column 1"),
    // Lists.
    ("{{list 1 \"a\" true}}", "[1 a true]"),
    ("{{tuple 1 2}}", "[1 2]"),
    ("{{append .list \"d\"}}", "[a b c d]"),
    ("{{push .list \"d\"}}", "[a b c d]"),
    ("{{prepend .list \"z\"}}", "[z a b c]"),
    ("{{first .list}}", "a"),
    ("{{last .list}}", "c"),
    ("{{rest .list}}", "[b c]"),
    ("{{initial .list}}", "[a b]"),
    ("{{first .emptylist}}", "<no value>"),
    ("{{reverse .list}}", "[c b a]"),
    ("{{uniq (list 1 2 1 3 2)}}", "[1 2 3]"),
    ("{{compact (list 1 \"\" 0 \"a\" nil)}}", "[1 a]"),
    ("{{without .list \"b\"}}", "[a c]"),
    ("{{has \"b\" .list}}", "true"),
    ("{{has \"z\" .list}}", "false"),
    ("{{has 1 .missing}}", "false"),
    ("{{concat .list (list \"d\") .nums}}", "[a b c d 1 2 3]"),
    ("{{chunk 2 (list 1 2 3)}}", "[[1 2] [3]]"),
    ("{{first .str}}", "ERR:template: t:1:2: executing \"t\" at <first .str>: error calling first: Cannot find first on type string"),
    ("{{append .str 1}}", "ERR:template: t:1:2: executing \"t\" at <append .str 1>: error calling append: Cannot push on type string"),
    ("{{mustFirst .emptylist}}", "<no value>"),
    ("{{slice .list 1 5}}", "ERR:template: t:1:2: executing \"t\" at <slice .list 1 5>: error calling slice: reflect: slice index out of range"),
    // Dicts.
    ("{{dict \"a\" 1 \"b\" \"x\"}}", "map[a:1 b:x]"),
    ("{{dict \"a\"}}", "map[a:]"),
    ("{{(dict \"a\" 1).a}}", "1"),
    ("{{get .map \"c\"}}", "x"),
    ("{{get .map \"zz\"}}", ""),
    ("{{$d := dict \"a\" 1}}{{$_ := set $d \"b\" 2}}{{$d}}", "map[a:1 b:2]"),
    ("{{$d := dict \"a\" 1 \"b\" 2}}{{$_ := unset $d \"a\"}}{{$d}}", "map[b:2]"),
    ("{{set (dict) \"k\" \"v\"}}", "map[k:v]"),
    ("{{hasKey .map \"a\"}}", "true"),
    ("{{hasKey .map \"z\"}}", "false"),
    ("{{pluck \"name\" (index .nested.list 0) (index .nested.list 1)}}", "[n1 n2]"),
    ("{{keys .map | sortAlpha}}", "[a b c]"),
    ("{{keys (dict \"x\" 1) (dict \"y\" 2) | sortAlpha}}", "[x y]"),
    ("{{pick .map \"a\" \"c\"}}", "map[a:1 c:x]"),
    ("{{omit .map \"a\"}}", "map[b:2 c:x]"),
    ("{{values (dict \"a\" 1 \"b\" 2)}}", "[1 2]"),
    ("{{merge (dict \"a\" 1) (dict \"a\" 2 \"b\" 3)}}", "map[a:1 b:3]"),
    ("{{mergeOverwrite (dict \"a\" 1) (dict \"a\" 2 \"b\" 3)}}", "map[a:2 b:3]"),
    ("{{merge (dict \"a\" (dict \"x\" 1)) (dict \"a\" (dict \"y\" 2))}}", "map[a:map[x:1 y:2]]"),
    ("{{$d := dict \"a\" 1}}{{$_ := merge $d (dict \"c\" 3)}}{{$d}}", "map[a:1 c:3]"),
    ("{{dig \"inner\" \"deep\" \"def\" .nested}}", "value"),
    ("{{dig \"inner\" \"nope\" \"def\" .nested}}", "def"),
    ("{{dig \"a\" \"b\" \"def\" .map}}", "ERR:template: t:1:2: executing \"t\" at <dig \"a\" \"b\" \"def\" .map>: error calling dig: interface conversion: interface {} is float64, not map[string]interface {}"),
    ("{{.nested | dig \"inner\" \"deep\" \"\"}}", "value"),
    ("{{deepCopy .map}}", "map[a:1 b:2 c:x]"),
    // Reflection.
    ("{{typeOf .str}}", "string"),
    ("{{typeOf .num}}", "float64"),
    ("{{typeOf .list}}", "[]interface {}"),
    ("{{typeOf .map}}", "map[string]interface {}"),
    ("{{typeOf .missing}}", "<nil>"),
    ("{{typeIs \"string\" .str}}", "true"),
    ("{{typeIsLike \"string\" .str}}", "true"),
    ("{{kindOf .map}}", "map"),
    ("{{kindOf .list}}", "slice"),
    ("{{kindIs \"string\" .str}}", "true"),
    ("{{deepEqual .list (list \"a\" \"b\" \"c\")}}", "true"),
    // Regular expressions.
    ("{{regexMatch \"^h.*o$\" .str}}", "true"),
    ("{{regexMatch \"(\" .str}}", "false"),
    ("{{regexFindAll \"[a-c]\" \"abcdcba\" 3}}", "[a b c]"),
    ("{{regexFindAll \"[a-c]\" \"abcd\" -1}}", "[a b c]"),
    ("{{regexFind \"l+\" .str}}", "ll"),
    ("{{regexReplaceAll \"a(x*)b\" \"-ab-axxb-\" \"${1}W\"}}", "-W-xxW-"),
    ("{{regexReplaceAllLiteral \"a(x*)b\" \"-ab-axxb-\" \"${1}\"}}", "-${1}-${1}-"),
    ("{{regexSplit \"z+\" \"pizza\" -1}}", "[pi a]"),
    ("{{regexQuoteMeta \"1.5+\"}}", "1\\.5\\+"),
    // Hashes and ids.
    ("{{sha1sum \"hello\"}}", "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"),
    ("{{sha256sum \"hello\"}}", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"),
    ("{{sha512sum \"\" | trunc 16}}", "cf83e1357eefb8bd"),
    ("{{adler32sum \"hello\"}}", "103547413"),
    ("{{len uuidv4}}", "36"),
    ("{{regexMatch \"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$\" uuidv4}}", "true"),
    ("{{len (randBytes 3)}}", "4"),
    // Paths.
    ("{{base \"/a/b/c.txt\"}}", "c.txt"),
    ("{{dir \"/a/b/c.txt\"}}", "/a/b"),
    ("{{clean \"/a//b/../c\"}}", "/a/c"),
    ("{{ext \"x/y.tar.gz\"}}", ".gz"),
    ("{{isAbs \"/a\"}}", "true"),
    ("{{osBase \"a/b\"}}", "b"),
    // Semver.
    ("{{semverCompare \">=1.2.0\" .ver}}", "true"),
    ("{{semverCompare \"^1.3\" .ver}}", "false"),
    ("{{semverCompare \"~1.2.0\" \"1.2.9\"}}", "true"),
    ("{{semverCompare \"1.x\" \"1.9.0\"}}", "true"),
    ("{{semverCompare \"<1.0.0 || >=2.0.0\" \"2.1.0\"}}", "true"),
    ("{{(semver .ver).Minor}}", "2"),
    ("{{(semver \"v2.0.1-beta\").Prerelease}}", "beta"),
    // URLs.
    ("{{(urlParse \"https://user@example.com:8080/p/a?q=1#f\").hostname}}", "example.com"),
    ("{{(urlParse \"https://example.com/p?q=1\").query}}", "q=1"),
    ("{{urlJoin (dict \"scheme\" \"https\" \"host\" \"h.io\" \"path\" \"/x\")}}", "https://h.io/x"),
    // Dates.
    ("{{date \"2006-01-02\" 0}}", "1970-01-01"),
    ("{{date \"Jan 2, 2006 at 3:04pm (MST)\" 86400}}", "Jan 2, 1970 at 12:00am (UTC)"),
    ("{{dateInZone \"2006-01-02 15:04\" 0 \"UTC\"}}", "1970-01-01 00:00"),
    ("{{htmlDate 0}}", "1970-01-01"),
    ("{{unixEpoch \"2020-01-01T00:00:00Z\"}}", "1577836800"),
    ("{{duration 95}}", "1m35s"),
    ("{{duration 3600}}", "1h0m0s"),
    ("{{durationRound \"2h10m\"}}", "2h"),
    ("{{toDate \"2006-01-02\" \"2017-12-31\" | date \"02/01/2006\"}}", "31/12/2017"),
    ("{{dateModify \"1.5h\" \"2020-01-01T00:00:00Z\" | date \"15:04\"}}", "01:30"),
    ("{{regexMatch \"^[0-9]{4}-\" now}}", "true"),
];

fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (text, want) in cases {
        let got = render(text);
        let ok = match (want.strip_prefix("ERR:"), &got) {
            (Some(""), Err(_)) => true,
            (Some(e), Err(g)) => e == g,
            (None, Ok(g)) => g == want,
            _ => false,
        };
        if !ok {
            failures.push(format!("{text:?}\n   want {want:?}\n    got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn go_template_table() {
    check(CASES);
}

#[test]
fn sprig_table() {
    check(SPRIG_CASES);
}

#[test]
fn missingkey_options() {
    let mut failures = Vec::new();
    for (option, text, want) in MISSINGKEY_CASES {
        let got = render_with(text, &[option], &fixture());
        let ok = match (want.strip_prefix("ERR:"), &got) {
            (Some(e), Err(g)) => e == g,
            (None, Ok(g)) => g == want,
            _ => false,
        };
        if !ok {
            failures.push(format!("{option} {text:?}\n   want {want:?}\n    got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(render_with("x", &["missingkey=bogus"], &fixture()), Err("unrecognized option: missingkey=bogus".into()));
}

#[test]
fn the_table_has_at_least_300_cases() {
    assert!(CASES.len() + SPRIG_CASES.len() + MISSINGKEY_CASES.len() >= 300);
}

#[test]
fn deep_nesting_is_refused_not_a_crash() {
    let deep = format!("{}x{}", "{{if true}}".repeat(2000), "{{end}}".repeat(2000));
    assert_eq!(render(&deep), Err("template: t:1: exceeded maximum nesting depth (100)".into()));
    let parens = format!("{{{{{}1{}}}}}", "(".repeat(5000), ")".repeat(5000));
    assert_eq!(render(&parens), Err("template: t:1: exceeded maximum nesting depth (100)".into()));
    let fine = format!("{}x{}", "{{if true}}".repeat(90), "{{end}}".repeat(90));
    assert_eq!(render(&fine).unwrap(), "x");
    let fine_parens = format!("{{{{{}1{}}}}}", "(".repeat(90), ")".repeat(90));
    assert_eq!(render(&fine_parens).unwrap(), "1");
    assert_eq!(render("{{hello}}").unwrap(), "Hello!");
}

#[test]
fn custom_delimiters() {
    let mut t = Template::new("t", funcs());
    t.delims("[[", "]]");
    t.parse("{{.str}} [[.str]] [[- \" x\" -]] [[/* c */]]").unwrap();
    assert_eq!(t.execute(&fixture()).unwrap(), "{{.str}} hello x");
    let mut t = Template::new("t", funcs());
    t.delims("<%", "%>");
    t.parse("<%range .list%><%.%>,<%end%>").unwrap();
    assert_eq!(t.execute(&fixture()).unwrap(), "a,b,c,");
}

#[test]
fn execute_template_and_redefinition() {
    let mut t = Template::new("t", funcs());
    t.parse("{{define \"x\"}}X{{.}}{{end}}top").unwrap();
    assert_eq!(t.execute_template("x", &json!(1)).unwrap(), "X1");
    assert_eq!(t.execute(&json!(null)).unwrap(), "top");
    assert_eq!(
        t.execute_template("nope", &json!(null)).unwrap_err().0,
        "template: no template \"nope\" associated with template \"t\""
    );
    // Only defines: the top level is empty.
    let mut t = Template::new("t", funcs());
    t.parse("{{define \"x\"}}X{{end}}").unwrap();
    assert_eq!(t.execute(&json!(null)).unwrap(), "");
}

proptest! {
    /// `{{- ` removes all the whitespace before an action and ` -}}` all after it; without
    /// the markers whitespace is kept as written.
    #[test]
    fn trimming_removes_exactly_the_adjacent_whitespace(
        before in "[a-z]{0,3}[ \t\n\r]{0,4}",
        after in "[ \t\n\r]{0,4}[a-z]{0,3}",
        word in "[a-z]{1,5}",
    ) {
        let text = format!("{before}{{{{- \"{word}\" -}}}}{after}");
        let got = render(&text).unwrap();
        let want = format!("{}{word}{}", before.trim_end_matches([' ', '\t', '\n', '\r']), after.trim_start_matches([' ', '\t', '\n', '\r']));
        prop_assert_eq!(got, want);
        let plain = format!("{before}{{{{\"{word}\"}}}}{after}");
        prop_assert_eq!(render(&plain).unwrap(), format!("{before}{word}{after}"));
    }

    /// Text outside actions is copied byte for byte.
    #[test]
    fn text_is_copied(text in "[^{}]{0,40}") {
        prop_assert_eq!(render(&text).unwrap(), text);
    }

    /// `html` output never holds a character HTML gives meaning to, and undoing the five
    /// entities gives the input back.
    #[test]
    fn html_escaping_round_trips(s in "\\PC{0,30}") {
        let s = s.replace('\0', "");
        let data = json!({"s": s});
        let got = render_with("{{html .s}}", &[], &data).unwrap();
        prop_assert!(!got.contains(['<', '>', '"', '\'']));
        let back = got.replace("&lt;", "<").replace("&gt;", ">").replace("&#34;", "\"").replace("&#39;", "'").replace("&amp;", "&");
        prop_assert_eq!(back, s);
    }

    /// `js` output has no quote, angle bracket, ampersand or equals sign left bare.
    #[test]
    fn js_escaping_leaves_nothing_bare(s in "[ -~]{0,30}") {
        let data = json!({"s": s});
        let got = render_with("{{js .s}}", &[], &data).unwrap();
        prop_assert!(!got.contains(['<', '>', '&', '=']));
        let unescaped = got.replace("\\u003C", "<").replace("\\u003E", ">").replace("\\u0026", "&")
            .replace("\\u003D", "=").replace("\\\"", "\"").replace("\\'", "'").replace("\\\\", "\\");
        prop_assert_eq!(unescaped, s);
    }

    /// `urlquery` output is only unreserved characters, `+` and `%XX`.
    #[test]
    fn urlquery_output_is_safe(s in "\\PC{0,20}") {
        let data = json!({"s": s});
        let got = render_with("{{urlquery .s}}", &[], &data).unwrap();
        prop_assert!(got.chars().all(|c| c.is_ascii_alphanumeric() || "-_.~+%".contains(c)));
    }
}
