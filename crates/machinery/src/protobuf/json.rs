//! Helpers that build and read Kubernetes-style JSON objects, and the Kubernetes time formats.
//!
//! [`Out`] writes protobuf values into a JSON object following the Go field semantics of the
//! Kubernetes API types: value (non-pointer) fields are omitted when they hold their zero value,
//! pointer fields are emitted whenever the protobuf field was present. [`In`] reads a JSON object
//! back with Go `encoding/json` leniency (`null` behaves like an absent field) and reports type
//! errors with the JSON path of the offending field.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde_json::{Map, Value};

/// A JSON object.
pub(super) type JsonMap = Map<String, Value>;

/// Standard base64 with padding, like Go's `base64.StdEncoding` (which tolerates non-zero
/// trailing bits when decoding).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Unix seconds of Go's zero `time.Time` (0001-01-01T00:00:00Z), which Kubernetes prints as `null`.
const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Joins a JSON path and a field name.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Builds a JSON object from protobuf field values.
pub(super) struct Out {
    map: JsonMap,
    path: String,
}

impl Out {
    /// Starts an empty object located at `path` (used in error messages).
    pub(super) fn new(path: &str) -> Self {
        Self {
            map: JsonMap::new(),
            path: path.to_owned(),
        }
    }

    /// The JSON path of a field of this object.
    pub(super) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The JSON path of an element of a list field of this object.
    pub(super) fn path_of_item(&self, key: &str, index: usize) -> String {
        format!("{}[{index}]", self.path_of(key))
    }

    /// Sets a field unconditionally.
    pub(super) fn value(&mut self, key: &str, value: Value) {
        self.map.insert(key.to_owned(), value);
    }

    /// A Go `string` field with `omitempty`: omitted when unset or empty.
    pub(super) fn string(&mut self, key: &str, value: Option<String>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.value(key, Value::String(v));
        }
    }

    /// A Go `*string` field: emitted whenever present, even when empty.
    pub(super) fn opt_string(&mut self, key: &str, value: Option<String>) {
        if let Some(v) = value {
            self.value(key, Value::String(v));
        }
    }

    /// A Go integer field with `omitempty`: omitted when unset or zero.
    pub(super) fn int<T: Into<i64>>(&mut self, key: &str, value: Option<T>) {
        if let Some(v) = value.map(Into::into).filter(|v| *v != 0) {
            self.value(key, Value::from(v));
        }
    }

    /// A Go `*int32`/`*int64` field: emitted whenever present, even when zero.
    pub(super) fn opt_int<T: Into<i64>>(&mut self, key: &str, value: Option<T>) {
        if let Some(v) = value {
            self.value(key, Value::from(v.into()));
        }
    }

    /// A Go `*bool` field: emitted whenever present, even when false.
    pub(super) fn opt_bool(&mut self, key: &str, value: Option<bool>) {
        if let Some(v) = value {
            self.value(key, Value::Bool(v));
        }
    }

    /// A `[]string` field: omitted when empty.
    pub(super) fn strings(&mut self, key: &str, values: Vec<String>) {
        if !values.is_empty() {
            self.value(
                key,
                Value::Array(values.into_iter().map(Value::String).collect()),
            );
        }
    }

    /// A `map[string]string` field: omitted when empty.
    pub(super) fn string_map(&mut self, key: &str, values: BTreeMap<String, String>) {
        if !values.is_empty() {
            let map = values
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            self.value(key, Value::Object(map));
        }
    }

    /// A `map[string][]byte` field, values as standard base64: omitted when empty.
    pub(super) fn bytes_map(&mut self, key: &str, values: BTreeMap<String, Vec<u8>>) {
        if !values.is_empty() {
            let map = values
                .into_iter()
                .map(|(k, v)| (k, Value::String(BASE64.encode(v))))
                .collect();
            self.value(key, Value::Object(map));
        }
    }

    /// A struct or pointer-to-struct field: emitted (possibly as `{}`) whenever present.
    pub(super) fn object(&mut self, key: &str, value: Option<JsonMap>) {
        if let Some(v) = value {
            self.value(key, Value::Object(v));
        }
    }

    /// A list of structs: omitted when empty.
    pub(super) fn objects(&mut self, key: &str, values: Vec<JsonMap>) {
        if !values.is_empty() {
            self.value(
                key,
                Value::Array(values.into_iter().map(Value::Object).collect()),
            );
        }
    }

    /// A `metav1.Time` field: RFC 3339 with seconds precision, omitted when unset or zero.
    pub(super) fn time(&mut self, key: &str, value: Option<Time>) -> Result<(), String> {
        if let Some(t) = value {
            let text = time_to_json(&t).map_err(|e| format!("{}: {e}", self.path_of(key)))?;
            if let Some(text) = text {
                self.value(key, Value::String(text));
            }
        }
        Ok(())
    }

    /// A `metav1.MicroTime` field: RFC 3339 with 6 fraction digits, omitted when unset or zero.
    pub(super) fn micro_time(&mut self, key: &str, value: Option<MicroTime>) -> Result<(), String> {
        if let Some(t) = value {
            let text = micro_time_to_json(&t).map_err(|e| format!("{}: {e}", self.path_of(key)))?;
            if let Some(text) = text {
                self.value(key, Value::String(text));
            }
        }
        Ok(())
    }

    /// Returns the built object.
    pub(super) fn finish(self) -> JsonMap {
        self.map
    }
}

/// Reads protobuf field values out of a JSON object.
pub(super) struct In<'a> {
    map: &'a JsonMap,
    path: String,
}

impl<'a> In<'a> {
    /// The object's keys (for maps with arbitrary keys).
    pub(super) fn keys(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    /// Reads the object `map` located at `path` (used in error messages).
    pub(super) fn new(map: &'a JsonMap, path: String) -> Self {
        Self { map, path }
    }

    /// The JSON path of a field of this object.
    pub(super) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The value of a field; `null` counts as absent, like in Go.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn type_error(&self, key: &str, expected: &str) -> String {
        format!("{}: expected {expected}", self.path_of(key))
    }

    /// A string field.
    pub(super) fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.type_error(key, "a string")),
        }
    }

    /// An `int64` field (JSON integers only, like Go).
    pub(super) fn int64(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.type_error(key, "a 64-bit integer")),
        }
    }

    /// An `int32` field (JSON integers in range only, like Go).
    pub(super) fn int32(&self, key: &str) -> Result<Option<i32>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.type_error(key, "a 32-bit integer")),
        }
    }

    /// A boolean field.
    pub(super) fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.type_error(key, "a boolean")),
        }
    }

    /// A list of strings.
    pub(super) fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(format!("{}[{i}]: expected a string", self.path_of(key))),
                })
                .collect(),
            Some(_) => Err(self.type_error(key, "a list of strings")),
        }
    }

    /// A map of strings to strings.
    pub(super) fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>, String> {
        match self.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(format!("{}.{k}: expected a string", self.path_of(key))),
                })
                .collect(),
            Some(_) => Err(self.type_error(key, "an object of strings")),
        }
    }

    /// A map of strings to bytes given as standard base64 strings.
    pub(super) fn bytes_map(&self, key: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
        match self.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => BASE64
                        .decode(s)
                        .map(|bytes| (k.clone(), bytes))
                        .map_err(|e| format!("{}.{k}: invalid base64: {e}", self.path_of(key))),
                    _ => Err(format!(
                        "{}.{k}: expected a base64 string",
                        self.path_of(key)
                    )),
                })
                .collect(),
            Some(_) => Err(self.type_error(key, "an object of base64 strings")),
        }
    }

    /// A nested object.
    pub(super) fn object(&self, key: &str) -> Result<Option<In<'a>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(In::new(map, self.path_of(key)))),
            Some(_) => Err(self.type_error(key, "an object")),
        }
    }

    /// A list of objects.
    pub(super) fn objects(&self, key: &str) -> Result<Vec<In<'a>>, String> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let path = format!("{}[{i}]", self.path_of(key));
                    match item {
                        Value::Object(map) => Ok(In::new(map, path)),
                        _ => Err(format!("{path}: expected an object")),
                    }
                })
                .collect(),
            Some(_) => Err(self.type_error(key, "a list of objects")),
        }
    }

    /// A `metav1.Time` field given as an RFC 3339 string.
    pub(super) fn time(&self, key: &str) -> Result<Option<Time>, String> {
        Ok(self.timestamp(key)?.map(|(seconds, nanos)| Time {
            seconds: Some(seconds),
            nanos: Some(nanos),
        }))
    }

    /// A `metav1.MicroTime` field given as an RFC 3339 string (truncated to microseconds).
    pub(super) fn micro_time(&self, key: &str) -> Result<Option<MicroTime>, String> {
        Ok(self.timestamp(key)?.map(|(seconds, nanos)| MicroTime {
            seconds: Some(seconds),
            nanos: Some(nanos - nanos % 1000),
        }))
    }

    fn timestamp(&self, key: &str) -> Result<Option<(i64, i32)>, String> {
        let Some(text) = self.string(key)? else {
            return Ok(None);
        };
        let parsed: jiff::Timestamp = text
            .parse()
            .map_err(|e| format!("{}: invalid RFC 3339 time {text:?}: {e}", self.path_of(key)))?;
        Ok(Some((parsed.as_second(), parsed.subsec_nanosecond())))
    }
}

/// Formats a `metav1.Time`; `None` means the Go zero time, which Kubernetes prints as `null`.
///
/// Like Go's `metav1.Time.Unmarshal`, an empty message is the zero time and nanoseconds are
/// ignored (the JSON form has seconds precision).
fn time_to_json(t: &Time) -> Result<Option<String>, String> {
    if t.seconds.is_none() && t.nanos.is_none() {
        return Ok(None);
    }
    let seconds = t.seconds.unwrap_or(0);
    if seconds == GO_ZERO_TIME_UNIX {
        return Ok(None);
    }
    let dt = utc(seconds, 0)?;
    Ok(Some(dt.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

/// Formats a `metav1.MicroTime`; `None` means the Go zero time, which Kubernetes prints as `null`.
///
/// Like Go's `metav1.MicroTime.Unmarshal`, nanoseconds are truncated to microseconds and then
/// normalised into the seconds (negative or oversized nanos are tolerated).
fn micro_time_to_json(t: &MicroTime) -> Result<Option<String>, String> {
    if t.seconds.is_none() && t.nanos.is_none() {
        return Ok(None);
    }
    let nanos = i64::from(t.nanos.unwrap_or(0));
    let nanos = nanos - nanos % 1000;
    let seconds = t
        .seconds
        .unwrap_or(0)
        .checked_add(nanos.div_euclid(NANOS_PER_SECOND))
        .ok_or_else(|| "time out of range".to_owned())?;
    let nanos = nanos.rem_euclid(NANOS_PER_SECOND);
    if seconds == GO_ZERO_TIME_UNIX && nanos == 0 {
        return Ok(None);
    }
    let dt = utc(seconds, nanos)?;
    Ok(Some(format!("{}.{:06}Z", dt.strftime("%Y-%m-%dT%H:%M:%S"), nanos / 1000)))
}

/// Converts Unix seconds and nanoseconds (`0..1e9`) to a UTC date-time with a 4-digit year.
fn utc(seconds: i64, nanos: i64) -> Result<jiff::Zoned, String> {
    let nanos = i32::try_from(nanos).map_err(|_| "time out of range".to_owned())?;
    let dt = jiff::Timestamp::new(seconds, nanos)
        .map_err(|_| format!("time out of range ({seconds} seconds since the Unix epoch)"))?
        .to_zoned(jiff::tz::TimeZone::UTC);
    if !(0..=9999).contains(&dt.year()) {
        return Err(format!(
            "time out of range (year {} is not in 0..=9999)",
            dt.year()
        ));
    }
    Ok(dt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(seconds: Option<i64>, nanos: Option<i32>) -> Time {
        Time { seconds, nanos }
    }

    fn micro(seconds: Option<i64>, nanos: Option<i32>) -> MicroTime {
        MicroTime { seconds, nanos }
    }

    #[test]
    fn time_formats() {
        assert_eq!(time_to_json(&time(None, None)), Ok(None));
        assert_eq!(
            time_to_json(&time(Some(GO_ZERO_TIME_UNIX), Some(0))),
            Ok(None)
        );
        assert_eq!(
            time_to_json(&time(Some(0), Some(0))),
            Ok(Some("1970-01-01T00:00:00Z".into()))
        );
        assert_eq!(
            time_to_json(&time(Some(1_704_164_645), Some(999_999_999))),
            Ok(Some("2024-01-02T03:04:05Z".into()))
        );
        assert!(time_to_json(&time(Some(i64::MAX), None)).is_err());
        assert!(time_to_json(&time(Some(i64::MIN), None)).is_err());
        assert!(time_to_json(&time(Some(253_402_300_800), None)).is_err()); // year 10000
    }

    #[test]
    fn micro_time_formats() {
        assert_eq!(micro_time_to_json(&micro(None, None)), Ok(None));
        assert_eq!(
            micro_time_to_json(&micro(Some(1_704_164_645), Some(123_456_789))),
            Ok(Some("2024-01-02T03:04:05.123456Z".into()))
        );
        assert_eq!(
            micro_time_to_json(&micro(Some(1_704_164_645), None)),
            Ok(Some("2024-01-02T03:04:05.000000Z".into()))
        );
        // Negative nanos are truncated toward zero, then normalised, like Go's time.Unix.
        assert_eq!(
            micro_time_to_json(&micro(Some(1_704_164_645), Some(-1_500))),
            Ok(Some("2024-01-02T03:04:04.999999Z".into()))
        );
        assert_eq!(
            micro_time_to_json(&micro(Some(1_704_164_645), Some(i32::MAX))),
            Ok(Some("2024-01-02T03:04:07.147483Z".into()))
        );
        assert!(micro_time_to_json(&micro(Some(i64::MAX), Some(i32::MAX))).is_err());
        assert!(micro_time_to_json(&micro(Some(i64::MIN), Some(i32::MIN))).is_err());
    }

    #[test]
    fn parses_rfc3339_with_offsets_and_fractions() {
        let obj = serde_json::json!({
            "a": "2024-01-02T05:04:05+02:00",
            "b": "2024-01-02T03:04:05.123456789Z",
            "c": "yesterday",
            "d": 5,
        });
        let map = obj.as_object().cloned().unwrap_or_default();
        let r = In::new(&map, "spec".into());
        assert_eq!(r.time("a"), Ok(Some(time(Some(1_704_164_645), Some(0)))));
        assert_eq!(
            r.micro_time("b"),
            Ok(Some(micro(Some(1_704_164_645), Some(123_456_000))))
        );
        assert!(
            r.time("c")
                .unwrap_err()
                .starts_with("spec.c: invalid RFC 3339 time")
        );
        assert_eq!(r.time("d"), Err("spec.d: expected a string".into()));
        assert_eq!(r.time("missing"), Ok(None));
    }
}
