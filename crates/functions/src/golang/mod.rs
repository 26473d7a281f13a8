//! Go's visible behaviour, for functions whose users know them from Crossplane's Go code.
//!
//! Crossplane's functions are written in Go and users read their output: a `string.fmt` of
//! `%d` on a number prints `%!d(float64=5)`, `ToJson` escapes `<` as `\u003c`, a TTL is
//! written `1m30s`. This module reproduces those renderings over [`serde_json::Value`]:
//! - [`value`]: which Go type a JSON value stands for (Crossplane hands functions every number
//!   as a float64; a value a function computes may be an int64), and the conversions between
//!   the two views.
//! - [`fmt`]: `fmt.Sprintf` with Go's verbs, flags, width, precision and error forms.
//! - [`json`]: `encoding/json.Marshal` (sorted keys, HTML escaping, Go's float format).
//! - [`duration`] parses Go durations (`time.ParseDuration`).
//! - [`strconv`]: `strconv.FormatFloat` and `strconv.Quote`, which the others build on.

pub mod duration;
pub mod fmt;
pub mod json;
pub mod strconv;
pub mod value;
pub mod yaml;
