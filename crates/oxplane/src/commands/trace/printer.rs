//! The output forms of `trace`, matching Crossplane's: a table (default and wide) aligned the
//! way kubectl's tab writer aligns it, Graphviz dot, JSON and YAML.

use std::fmt::Write as _;

use serde_json::Value;

use super::tree::{Node, is_package, is_package_revision};
use crate::commands::yaml::yaml;

/// The output forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// A table.
    Default,
    /// A table with full messages and more columns.
    Wide,
    /// The tree as JSON.
    Json,
    /// A Graphviz graph.
    Dot,
    /// The tree as YAML.
    Yaml,
}

/// Prints one tree.
pub fn print(output: Output, root: &Node) -> String {
    match output {
        Output::Default | Output::Wide => table(std::slice::from_ref(root), output == Output::Wide),
        Output::Dot => dot(std::slice::from_ref(root)),
        Output::Json => {
            let mut out = String::new();
            json_node(&mut out, root, "");
            out.push('\n');
            out
        }
        Output::Yaml => {
            let mut out = yaml(&yaml_node(root), 0);
            out.push('\n');
            out
        }
    }
}

/// Prints the trees of every object of a kind (`trace TYPE` without a name).
pub fn print_list(output: Output, roots: &[Node]) -> String {
    match output {
        Output::Default | Output::Wide => table(roots, output == Output::Wide),
        Output::Dot => dot(roots),
        Output::Json => {
            let mut out = String::from("{\n  \"items\": [");
            for (i, root) in roots.iter().enumerate() {
                out.push_str(if i == 0 { "\n    " } else { ",\n    " });
                json_node(&mut out, root, "    ");
            }
            out.push_str(if roots.is_empty() { "]\n}\n" } else { "\n  ]\n}\n" });
            out
        }
        Output::Yaml => {
            let items: Vec<Value> = roots.iter().map(yaml_node).collect();
            let mut out = yaml(&serde_json::json!({ "items": items }), 0);
            out.push('\n');
            out
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Table

/// Cells aligned like Go's text/tabwriter with kubectl's settings (minimum width 6, padding 3,
/// spaces): every cell but a line's last is padded to its column's widest cell plus 3. Written
/// here because the alignment must match byte for byte, widths counted in characters.
fn tabwrite(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(|r| r.len().saturating_sub(1)).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter().filter(|r| c + 1 < r.len()).map(|r| r[c].chars().count() + 3).max().unwrap_or(0).max(6)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if c + 1 < row.len() {
                out.extend(std::iter::repeat_n(' ', widths[c] - cell.chars().count()));
            }
        }
        out.push('\n');
    }
    out
}

/// A condition's status, `-` when absent.
fn dash(node: &Node, type_: &str) -> String {
    match node.condition(type_).and_then(|c| c["status"].as_str()) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "-".to_string(),
    }
}

fn field<'a>(condition: Option<&'a Value>, name: &str) -> &'a str {
    condition.and_then(|c| c[name].as_str()).unwrap_or_default()
}

/// `reason: message`, the message cut to its last 64 bytes outside wide mode.
fn with_message(reason: &str, message: &str, wide: bool) -> String {
    let mut message = message.to_string();
    if !wide && message.len() > 64 {
        let mut start = message.len() - 64;
        while !message.is_char_boundary(start) {
            start += 1;
        }
        message = format!("...{}", &message[start..]);
    }
    if message.is_empty() { reason.to_string() } else { format!("{reason}: {message}") }
}

/// The STATUS cell of a resource row: Deleting, the fetch error, the Ready reason when Synced
/// and Ready are both True, else the first of Synced and Ready that is not True and says why.
fn resource_status(node: &Node, wide: bool) -> String {
    let ready = node.condition("Ready");
    let synced = node.condition("Synced");
    let is_true = |c: Option<&Value>| field(c, "status") == "True";
    let says = |c: Option<&Value>| !field(c, "reason").is_empty() || !field(c, "message").is_empty();
    if !node.object["metadata"]["deletionTimestamp"].is_null() {
        return "Deleting".to_string();
    }
    if let Some(error) = &node.error {
        return with_message("Error", &error.message, wide);
    }
    if is_true(ready) && is_true(synced) {
        return field(ready, "reason").to_string();
    }
    if !is_true(synced) && says(synced) {
        return with_message(field(synced, "reason"), field(synced, "message"), wide);
    }
    with_message(field(ready, "reason"), field(ready, "message"), wide)
}

/// The cells of a package row: VERSION, INSTALLED, HEALTHY, STATE, STATUS (and PACKAGE).
fn package_cells(node: &Node, wide: bool) -> (String, String, String, String, String, String) {
    let healthy = node.condition("Healthy");
    let installed = node.condition("Installed");
    let is_true = |c: Option<&Value>| field(c, "status") == "True";
    let says = |c: Option<&Value>| !field(c, "reason").is_empty() || !field(c, "message").is_empty();
    let (group, kind) = (node.group(), node.kind());
    let mut state = String::new();
    let mut image = String::new();
    let status = if let Some(error) = &node.error {
        with_message("Error", &error.message, wide)
    } else if is_package(group, kind) {
        image = node.object["spec"]["package"].as_str().unwrap_or_default().to_string();
        if is_true(healthy) && is_true(installed) {
            field(healthy, "reason").to_string()
        } else if !is_true(installed) && says(installed) {
            with_message(field(installed, "reason"), field(installed, "message"), wide)
        } else if !is_true(healthy) && says(healthy) {
            with_message(field(healthy, "reason"), field(healthy, "message"), wide)
        } else {
            with_message(field(installed, "reason"), field(installed, "message"), wide)
        }
    } else if is_package_revision(group, kind) {
        state = node.object["spec"]["desiredState"].as_str().unwrap_or_default().to_string();
        image = node.object["spec"]["image"].as_str().unwrap_or_default().to_string();
        with_message(field(healthy, "reason"), field(healthy, "message"), wide)
    } else if super::tree::is_runtime_config(group, kind) {
        String::new()
    } else {
        "Unknown package type".to_string()
    };
    let (image, version) = split_tag(&image);
    let state = if state.is_empty() { "-".to_string() } else { state };
    (image, version, dash(node, "Installed"), dash(node, "Healthy"), state, status)
}

/// An image reference's repository (with its registry) and tag (`latest` when it has none);
/// the whole reference and no tag when it is not a tag reference (a digest, say).
fn split_tag(reference: &str) -> (String, String) {
    if reference.is_empty() || reference.contains('@') {
        return (reference.to_string(), String::new());
    }
    let last_slash = reference.rfind('/').map(|i| i + 1).unwrap_or(0);
    match reference[last_slash..].rfind(':') {
        Some(i) => {
            let at = last_slash + i;
            let tag = &reference[at + 1..];
            let valid = !tag.is_empty()
                && tag.len() <= 128
                && tag.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                && !tag.starts_with(['.', '-']);
            if valid { (reference[..at].to_string(), tag.to_string()) } else { (reference.to_string(), String::new()) }
        }
        None => (reference.to_string(), "latest".to_string()),
    }
}

fn table(roots: &[Node], wide: bool) -> String {
    let packages = roots.first().is_some_and(|r| is_package(r.group(), r.kind()) || is_package_revision(r.group(), r.kind()));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let header: Vec<&str> = match (packages, wide) {
        (true, false) => vec!["NAME", "VERSION", "INSTALLED", "HEALTHY", "STATE", "STATUS", ""],
        (true, true) => vec!["NAME", "PACKAGE", "VERSION", "INSTALLED", "HEALTHY", "STATE", "STATUS", ""],
        (false, false) => vec!["NAME", "SYNCED", "READY", "STATUS"],
        (false, true) => vec!["NAME", "RESOURCE", "SYNCED", "READY", "STATUS"],
    };
    rows.push(header.into_iter().map(str::to_string).collect());
    for root in roots {
        table_rows(&mut rows, root, None, "", packages, wide);
    }
    tabwrite(&rows)
}

/// Appends the rows of `node` and its subtree, depth first; `last` is whether the node is its
/// parent's last child (None for a root).
fn table_rows(rows: &mut Vec<Vec<String>>, node: &Node, last: Option<bool>, prefix: &str, packages: bool, wide: bool) {
    let mut name = String::new();
    let child_prefix = match last {
        None => prefix.to_string(),
        Some(true) => {
            name.push_str(prefix);
            name.push_str("└─ ");
            format!("{prefix}   ")
        }
        Some(false) => {
            name.push_str(prefix);
            name.push_str("├─ ");
            format!("{prefix}│  ")
        }
    };
    let _ = write!(name, "{}/{}", node.kind(), node.name());
    if !node.namespace().is_empty() {
        let _ = write!(name, " ({})", node.namespace());
    }
    if packages {
        let (image, version, installed, healthy, state, status) = package_cells(node, wide);
        let mut row = vec![name];
        if wide {
            row.push(image);
        }
        row.extend([version, installed, healthy, state, status, String::new()]);
        rows.push(row);
    } else {
        let mut row = vec![name];
        if wide {
            let resource = node.object["metadata"]["annotations"]["crossplane.io/composition-resource-name"].as_str();
            row.push(resource.unwrap_or_default().to_string());
        }
        row.extend([dash(node, "Synced"), dash(node, "Ready"), resource_status(node, wide)]);
        rows.push(row);
    }
    let count = node.children.len();
    for (i, child) in node.children.iter().enumerate() {
        table_rows(rows, child, Some(i + 1 == count), &child_prefix, packages, wide);
    }
}

// ---------------------------------------------------------------------------------------------
// Dot

/// An undirected Graphviz graph, one node per object (labelled with its name, apiVersion,
/// namespace and conditions) numbered breadth first; nodes are written in the order of their
/// numbers as strings ("0", "1", "10", "2", ...) as Crossplane's graph library orders them.
fn dot(roots: &[Node]) -> String {
    let mut labels: Vec<String> = Vec::new();
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let mut queue: std::collections::VecDeque<(&Node, Option<usize>)> = roots.iter().map(|r| (r, None)).collect();
    while let Some((node, parent)) = queue.pop_front() {
        let id = labels.len();
        if let Some(parent) = parent {
            edges.push((parent, id));
        }
        labels.push(dot_label(node));
        queue.extend(node.children.iter().map(|c| (c, Some(id))));
    }
    let mut order: Vec<usize> = (0..labels.len()).collect();
    order.sort_by_key(|i| i.to_string());
    let mut out = String::from("graph  {\n\t\n");
    for i in order {
        let _ = writeln!(out, "\tn{}[label=\"{}\",penwidth=\"2\"];", i + 1, dot_escape(&labels[i]));
    }
    for (from, to) in edges {
        let _ = writeln!(out, "\tn{}--n{};", from + 1, to + 1);
    }
    out.push_str("\t\n}\n");
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn dot_label(node: &Node) -> String {
    let status = |type_: &str| field(node.condition(type_), "status").to_string();
    let api_version = node.object["apiVersion"].as_str().unwrap_or_default();
    let (group, kind) = (node.group(), node.kind());
    let mut lines = Vec::new();
    if is_package(group, kind) || is_package_revision(group, kind) {
        let revision = is_package_revision(group, kind);
        let image = node.object["spec"][if revision { "image" } else { "package" }].as_str();
        lines.push(format!("Name: {}", node.name()));
        lines.push(format!("ApiVersion: {api_version}"));
        lines.push(format!("Package: {}", image.unwrap_or_default()));
        if !revision && !status("Installed").is_empty() {
            lines.push(format!("Installed: {}", status("Installed")));
        }
        lines.push(format!("Healthy: {}", status("Healthy")));
        let state = field(node.condition("Healthy"), "reason");
        if revision && !state.is_empty() {
            lines.push(format!("State: {state}"));
        }
        if image.is_none() {
            lines.push(format!("Error: spec.{}: no such key", if revision { "image" } else { "package" }));
        }
    } else {
        lines.push(format!("Name: {}/{}", kind, node.name()));
        lines.push(format!("ApiVersion: {api_version}"));
        if !node.namespace().is_empty() {
            lines.push(format!("Namespace: {}", node.namespace()));
        }
        lines.push(format!("Ready: {}", status("Ready")));
        lines.push(format!("Synced: {}", status("Synced")));
    }
    let mut label = lines.join("\n");
    label.push('\n');
    label
}

// ---------------------------------------------------------------------------------------------
// JSON and YAML

/// Writes a node as Crossplane's JSON printer does: `object`, then `error`, then `children`
/// (struct order), objects' keys sorted, two-space indent, and `<`, `>`, `&` escaped as Go's
/// encoder escapes them.
fn json_node(out: &mut String, node: &Node, indent: &str) {
    let inner = format!("{indent}  ");
    out.push_str("{\n");
    let _ = write!(out, "{inner}\"object\": {}", json_value(&node.object, &inner));
    if let Some(error) = &node.error {
        let value = match &error.status {
            Some(status) => serde_json::json!({ "ErrStatus": status }),
            None => serde_json::json!({}),
        };
        let _ = write!(out, ",\n{inner}\"error\": {}", json_value(&value, &inner));
    }
    if !node.children.is_empty() {
        let _ = write!(out, ",\n{inner}\"children\": [");
        for (i, child) in node.children.iter().enumerate() {
            out.push_str(if i == 0 { "\n" } else { ",\n" });
            let child_indent = format!("{inner}  ");
            out.push_str(&child_indent);
            json_node(out, child, &child_indent);
        }
        let _ = write!(out, "\n{inner}]");
    }
    let _ = write!(out, "\n{indent}}}");
}

/// A value pretty-printed with two spaces, its lines after the first indented by `indent`.
fn json_value(value: &Value, indent: &str) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    let text = text.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    text.replace('\n', &format!("\n{indent}"))
}

/// The node as the map Crossplane's YAML printer marshals (keys sorted when written).
fn yaml_node(node: &Node) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("object".into(), node.object.clone());
    if let Some(error) = &node.error {
        map.insert(
            "error".into(),
            match &error.status {
                Some(status) => serde_json::json!({ "ErrStatus": status }),
                None => serde_json::json!({}),
            },
        );
    }
    if !node.children.is_empty() {
        map.insert("children".into(), Value::Array(node.children.iter().map(yaml_node).collect()));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests;
