//! Server-side Table printing (`kubectl get` asks for `as=Table`): the columns of each kind,
//! CRDs' `additionalPrinterColumns`, ages as kubectl shows them, and `includeObject`.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::jsonpath::{JsonPath, scalar_text};
use crate::resource::ResourceDef;

/// Where a column's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnSource {
    /// A JSONPath into the object.
    Path(String),
    /// The human age of `metadata.creationTimestamp`.
    Age,
    /// The number of keys in `data` (plus `binaryData`).
    DataCount,
    /// An Event's `kind/name` of the regarding object.
    EventObject,
    /// An Event's last time seen, as an age.
    EventLastSeen,
    /// A Service's external addresses (`<none>` when it has none).
    ServiceExternalIp,
    /// A Service's ports as kubectl prints them (`443/TCP`, `80:30080/TCP`).
    ServicePorts,
    /// A Service's selector (`app=web`, `<none>`).
    ServiceSelector,
    /// An Endpoints object's `ip:port` pairs.
    EndpointAddresses,
}

/// One printed column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub kind: String,
    /// Optional format (`name` for the first column).
    pub format: String,
    /// Description shown by `kubectl explain`-like tools.
    pub description: String,
    /// 0 shows always, above 0 only with `-o wide`.
    pub priority: i64,
    /// The value.
    pub source: ColumnSource,
}

impl PrinterColumn {
    /// A column.
    pub fn new(name: &str, kind: &str, priority: i64, source: ColumnSource) -> Self {
        PrinterColumn { name: name.into(), kind: kind.into(), format: String::new(), description: String::new(), priority, source }
    }

    /// The `Age` column.
    pub fn age() -> Self {
        PrinterColumn::new("Age", "string", 0, ColumnSource::Age)
    }
}

/// Columns of a CRD version: its `additionalPrinterColumns`, or `Age` when it has none.
pub fn crd_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(columns) = version["additionalPrinterColumns"].as_array() else { return vec![PrinterColumn::age()] };
    columns
        .iter()
        .map(|c| PrinterColumn {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            kind: c["type"].as_str().unwrap_or("string").to_string(),
            format: c["format"].as_str().unwrap_or_default().to_string(),
            description: c["description"].as_str().unwrap_or_default().to_string(),
            priority: c["priority"].as_i64().unwrap_or(0),
            source: ColumnSource::Path(c["jsonPath"].as_str().unwrap_or_default().to_string()),
        })
        .collect()
}

/// Columns of the built-in kinds, after `Name`.
pub fn builtin_columns(group: &str, kind: &str) -> Vec<PrinterColumn> {
    let path = |p: &str| ColumnSource::Path(p.to_string());
    match (group, kind) {
        ("", "Namespace") => vec![PrinterColumn::new("Status", "string", 0, path(".status.phase")), PrinterColumn::age()],
        ("", "ConfigMap") => vec![PrinterColumn::new("Data", "integer", 0, ColumnSource::DataCount), PrinterColumn::age()],
        ("", "Secret") => vec![
            PrinterColumn::new("Type", "string", 0, path(".type")),
            PrinterColumn::new("Data", "integer", 0, ColumnSource::DataCount),
            PrinterColumn::age(),
        ],
        ("", "Event") | ("events.k8s.io", "Event") => vec![
            PrinterColumn::new("Last Seen", "string", 0, ColumnSource::EventLastSeen),
            PrinterColumn::new("Type", "string", 0, path(".type")),
            PrinterColumn::new("Reason", "string", 0, path(".reason")),
            PrinterColumn::new("Object", "string", 0, ColumnSource::EventObject),
            PrinterColumn::new("Message", "string", 0, path(".message")),
        ],
        ("", "Service") => vec![
            PrinterColumn::new("Type", "string", 0, path(".spec.type")),
            PrinterColumn::new("Cluster-IP", "string", 0, path(".spec.clusterIP")),
            PrinterColumn::new("External-IP", "string", 0, ColumnSource::ServiceExternalIp),
            PrinterColumn::new("Port(s)", "string", 0, ColumnSource::ServicePorts),
            PrinterColumn::age(),
            PrinterColumn::new("Selector", "string", 1, ColumnSource::ServiceSelector),
        ],
        ("", "Endpoints") => vec![PrinterColumn::new("Endpoints", "string", 0, ColumnSource::EndpointAddresses), PrinterColumn::age()],
        ("coordination.k8s.io", "Lease") => {
            vec![PrinterColumn::new("Holder", "string", 0, path(".spec.holderIdentity")), PrinterColumn::age()]
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            // kubectl shows the CRD's creation time itself here, not an age.
            vec![PrinterColumn::new("Created At", "string", 0, path(".metadata.creationTimestamp"))]
        }
        _ => vec![PrinterColumn::age()],
    }
}

/// kubectl's rendering of a duration: `45s`, `3m10s`, `5h`, `2d3h`, `4y12d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) },
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) },
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 => if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) },
        _ if d < 730 => format!("{d}d"),
        _ if d < 2920 => if d % 365 == 0 { format!("{}y", d / 365) } else { format!("{}y{}d", d / 365, d % 365) },
        _ => format!("{}y", d / 365),
    }
}

fn age_of(timestamp: Option<&str>) -> Value {
    let parsed = timestamp.and_then(|t| t.parse::<Timestamp>().ok());
    match parsed {
        Some(t) => json!(human_duration(Timestamp::now().as_second() - t.as_second())),
        None => json!("<unknown>"),
    }
}

fn cell(column: &PrinterColumn, object: &Value) -> Value {
    match &column.source {
        ColumnSource::Age => age_of(object["metadata"]["creationTimestamp"].as_str()),
        ColumnSource::DataCount => {
            let count = |v: &Value| v.as_object().map(|m| m.len()).unwrap_or(0);
            json!(count(&object["data"]) + count(&object["binaryData"]))
        }
        ColumnSource::EventObject => {
            let regarding = if object["involvedObject"].is_object() { &object["involvedObject"] } else { &object["regarding"] };
            let kind = regarding["kind"].as_str().unwrap_or_default().to_lowercase();
            json!(format!("{kind}/{}", regarding["name"].as_str().unwrap_or_default()))
        }
        ColumnSource::EventLastSeen => {
            let last = ["lastTimestamp", "eventTime", "deprecatedLastTimestamp", "firstTimestamp"]
                .iter()
                .find_map(|f| object[*f].as_str())
                .or_else(|| object["series"]["lastObservedTime"].as_str())
                .or_else(|| object["metadata"]["creationTimestamp"].as_str());
            age_of(last)
        }
        ColumnSource::ServiceExternalIp => {
            let ingress = object["status"]["loadBalancer"]["ingress"].as_array().into_iter().flatten();
            let from_status = ingress.filter_map(|i| i["ip"].as_str().or_else(|| i["hostname"].as_str()));
            let external = object["spec"]["externalIPs"].as_array().into_iter().flatten().filter_map(Value::as_str);
            let mut all: Vec<&str> = from_status.chain(external).collect();
            if all.is_empty() && object["spec"]["type"] == "ExternalName" {
                all.extend(object["spec"]["externalName"].as_str());
            }
            json!(if all.is_empty() { "<none>".to_string() } else { all.join(",") })
        }
        ColumnSource::ServicePorts => {
            let ports: Vec<String> = object["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let protocol = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64() {
                        Some(node) => format!("{}:{node}/{protocol}", scalar_text(&p["port"])),
                        None => format!("{}/{protocol}", scalar_text(&p["port"])),
                    }
                })
                .collect();
            json!(if ports.is_empty() { "<none>".to_string() } else { ports.join(",") })
        }
        ColumnSource::ServiceSelector => {
            let pairs: Vec<String> = object["spec"]["selector"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", scalar_text(v)))
                .collect();
            json!(if pairs.is_empty() { "<none>".to_string() } else { pairs.join(",") })
        }
        ColumnSource::EndpointAddresses => {
            let mut pairs = Vec::new();
            for subset in object["subsets"].as_array().into_iter().flatten() {
                for address in subset["addresses"].as_array().into_iter().flatten() {
                    let ip = address["ip"].as_str().unwrap_or_default();
                    let ports = subset["ports"].as_array().map(Vec::as_slice).unwrap_or_default();
                    if ports.is_empty() {
                        pairs.push(ip.to_string());
                    }
                    pairs.extend(ports.iter().map(|p| format!("{ip}:{}", scalar_text(&p["port"]))));
                }
            }
            // kubectl shows three and counts the rest.
            let shown = pairs.iter().take(3).cloned().collect::<Vec<_>>().join(",");
            json!(match pairs.len() {
                0 => "<none>".to_string(),
                n if n > 3 => format!("{shown} + {} more...", n - 3),
                _ => shown,
            })
        }
        ColumnSource::Path(path) => {
            let Ok(path) = JsonPath::parse(path) else { return Value::Null };
            let Some(found) = path.find(object).into_iter().next() else { return Value::Null };
            match column.kind.as_str() {
                "date" => age_of(found.as_str()),
                "integer" if found.is_i64() || found.is_u64() => found.clone(),
                "number" if found.is_number() => found.clone(),
                "boolean" if found.is_boolean() => found.clone(),
                "string" => json!(scalar_text(found)),
                _ => Value::Null,
            }
        }
    }
}

/// What rows carry as `object`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// The whole object.
    Object,
    /// Only its metadata (the default).
    PartialObjectMetadata,
}

impl IncludeObject {
    /// Parses the `includeObject` parameter.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") | Some("PartialObjectMetadata") => Ok(IncludeObject::PartialObjectMetadata),
            Some("Object") => Ok(IncludeObject::Object),
            Some("None") => Ok(IncludeObject::None),
            Some(other) => Err(format!("includeObject: Unsupported value: \"{other}\": supported values: \"None\", \"Object\", \"PartialObjectMetadata\"")),
        }
    }
}

/// The column definitions of `resource`: `Name` first.
pub fn column_definitions(resource: &ResourceDef) -> Vec<Value> {
    let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0})];
    for c in &resource.columns {
        defs.push(json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}));
    }
    defs
}

/// One row.
pub fn row(resource: &ResourceDef, object: &Value, include: IncludeObject) -> Value {
    let mut cells = vec![object["metadata"]["name"].clone()];
    cells.extend(resource.columns.iter().map(|c| cell(c, object)));
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = object.clone(),
        IncludeObject::PartialObjectMetadata => {
            row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]});
        }
    }
    row
}

/// A Table of `objects`, with list metadata (resourceVersion, continue).
pub fn table<'a>(resource: &ResourceDef, objects: impl IntoIterator<Item = &'a Value>, metadata: Value, include: IncludeObject, with_columns: bool) -> Value {
    let rows: Vec<Value> = objects.into_iter().map(|o| row(resource, o, include)).collect();
    let mut table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "rows": rows});
    if with_columns {
        table["columnDefinitions"] = Value::Array(column_definitions(resource));
    } else {
        table["columnDefinitions"] = Value::Null;
    }
    table
}

/// The response content type of a Table.
pub const TABLE_CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        for (s, want) in [(5, "5s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (7200, "120m"), (3 * 3600 + 60, "3h1m"),
            (20 * 3600, "20h"), (3 * 86_400 + 3600, "3d1h"), (30 * 86_400, "30d"), (800 * 86_400, "2y70d")] {
            assert_eq!(human_duration(s), want, "{s}");
        }
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn services_and_endpoints_print_as_kubectl_prints_them() {
        let builtins = crate::resource::builtins();
        let service = builtins.iter().find(|r| r.kind == "Service").unwrap();
        let object = json!({"metadata": {"name": "web", "creationTimestamp": "2000-01-01T00:00:00Z"},
            "spec": {"type": "NodePort", "clusterIP": "None", "selector": {"app": "web", "tier": "front"},
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        let cells = row(service, &object, IncludeObject::None)["cells"].clone();
        assert_eq!(cells.as_array().unwrap()[1..5], [json!("NodePort"), json!("None"), json!("<none>"), json!("80:30080/TCP,53/UDP")]);
        assert_eq!(cells[6], "app=web,tier=front");
        let balanced = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}}});
        let cells = row(service, &balanced, IncludeObject::None)["cells"].clone();
        assert_eq!(cells[3], "192.0.2.1,lb.example");
        assert_eq!(cells[4], "<none>");
        assert_eq!(cells[6], "<none>");

        let endpoints = builtins.iter().find(|r| r.kind == "Endpoints").unwrap();
        let cell = |subsets: Value| row(endpoints, &json!({"metadata": {"name": "e"}, "subsets": subsets}), IncludeObject::None)["cells"][1].clone();
        assert_eq!(cell(json!([{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 6443}]}])), "127.0.0.1:6443");
        assert_eq!(cell(json!(null)), "<none>");
        let many = json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 1}, {"port": 2}]}]);
        assert_eq!(cell(many), "10.0.0.1:1,10.0.0.1:2,10.0.0.2:1 + 1 more...");
    }

    #[test]
    fn crd_columns_follow_their_types() {
        let version = json!({"additionalPrinterColumns": [
            {"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
            {"name": "REPLICAS", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1},
            {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]});
        let mut resource = crate::resource::builtins().remove(0);
        resource.columns = crd_columns(&version);
        let object = json!({"metadata": {"name": "x", "creationTimestamp": "2000-01-01T00:00:00Z"},
            "spec": {"replicas": "three"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let row = row(&resource, &object, IncludeObject::None);
        assert_eq!(row["cells"][0], "x");
        assert_eq!(row["cells"][1], "True");
        assert_eq!(row["cells"][2], Value::Null, "a wrongly typed value is an empty cell");
        assert!(row["cells"][3].as_str().unwrap().ends_with('y'));
        assert!(row.get("object").is_none());
        let defs = column_definitions(&resource);
        assert_eq!(defs[2]["priority"], 1);
    }
}
