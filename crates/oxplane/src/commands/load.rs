//! Reading the YAML a command works on offline, as Crossplane's CLI reads it, with its
//! messages: one object from a file; a stream of them from a file or from every `.yaml`/`.yml`
//! file of a directory (sorted by name; `render` ignores subdirectories, `validate` walks
//! them); or from standard input (`-`).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

/// The objects of the YAML stream in `path` (a file, or a directory of YAML files); empty
/// documents are skipped.
pub fn stream(path: &Path) -> anyhow::Result<Vec<Value>> {
    let metadata = std::fs::metadata(path).with_context(|| format!("cannot load YAML stream from file: cannot open file {}", path.display()))?;
    let files = if metadata.is_dir() {
        let files = yaml_files(path)?;
        if files.is_empty() {
            bail!("cannot load YAML stream from file: no YAML files found in {:?} (.yaml or .yml)", path.display().to_string());
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut objects = Vec::new();
    for file in files {
        objects.extend(documents(&file)?);
    }
    Ok(objects)
}

/// The one object in the YAML file `path`.
pub fn one(path: &Path, what: &str) -> anyhow::Result<Value> {
    let mut objects = documents(path).with_context(|| format!("cannot read {what} file"))?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        0 => bail!("cannot unmarshal {what} YAML: {} holds no object", path.display()),
        n => bail!("cannot unmarshal {what} YAML: {} holds {n} objects, expected one", path.display()),
    }
}

fn documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot open file {}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// The objects of a YAML stream read from `origin` (a file name, or `stdin`).
fn parse(text: &str, origin: &str) -> anyhow::Result<Vec<Value>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).with_context(|| format!("cannot parse YAML stream {origin}"))?;
    let mut objects = Vec::new();
    for document in documents {
        match document {
            Value::Null => {}
            Value::Object(_) => objects.push(document),
            other => bail!("cannot parse YAML stream {origin}: a document is not an object: {other}"),
        }
    }
    Ok(objects)
}

/// The objects of `sources`: a comma-separated list of files and directories (walked with
/// their subdirectories, `.yaml`/`.yml` files in name order), or `-` for standard input.
pub fn sources(sources: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for source in sources.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if source == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).context("cannot read standard input")?;
            objects.extend(parse(&text, "stdin")?);
            continue;
        }
        let path = Path::new(source);
        let metadata = std::fs::metadata(path).with_context(|| format!("cannot open {source}"))?;
        if metadata.is_dir() {
            for file in yaml_files_below(path)? {
                objects.extend(documents(&file)?);
            }
        } else {
            objects.extend(documents(path)?);
        }
    }
    Ok(objects)
}

fn yaml_files_below(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).with_context(|| format!("cannot read directory {}", dir.display()))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(yaml_files_below(&path)?);
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            files.push(path);
        }
    }
    Ok(files)
}

fn yaml_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot get YAML files: cannot read directory {}", dir.display()))? {
        let path = entry?.path();
        let yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
        if yaml && !path.is_dir() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// `apiVersion` split into group and version (`v1` is the core group).
pub fn group_version(object: &Value) -> (String, String) {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// `kind`, or "".
pub fn kind(object: &Value) -> &str {
    object.get("kind").and_then(Value::as_str).unwrap_or_default()
}

/// `metadata.name`, or "".
pub fn name(object: &Value) -> &str {
    object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_directory_is_read_file_by_file_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), "kind: B\n---\n---\nkind: C\n").unwrap();
        std::fs::write(dir.path().join("a.yml"), "kind: A\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "kind: Ignored\n").unwrap();
        std::fs::create_dir(dir.path().join("sub.yaml")).unwrap();
        let kinds: Vec<String> = stream(dir.path()).unwrap().iter().map(|o| kind(o).to_string()).collect();
        assert_eq!(kinds, ["A", "B", "C"]);
    }

    #[test]
    fn sources_walk_directories_and_take_comma_separated_lists() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("nested")).unwrap();
        std::fs::write(dir.path().join("nested/b.yaml"), "kind: B\n").unwrap();
        std::fs::write(dir.path().join("a.yaml"), "kind: A\n").unwrap();
        let single = dir.path().join("c.yml");
        std::fs::write(&single, "kind: C\n").unwrap();
        let list = format!("{},{}", dir.path().join("nested").display(), single.display());
        let kinds: Vec<String> = sources(&list).unwrap().iter().map(|o| kind(o).to_string()).collect();
        assert_eq!(kinds, ["B", "C"]);
        let all: Vec<String> = sources(&dir.path().display().to_string()).unwrap().iter().map(|o| kind(o).to_string()).collect();
        assert_eq!(all, ["A", "C", "B"]);
        assert!(sources("/no/such/place").is_err());
    }

    #[test]
    fn an_empty_directory_and_a_scalar_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = stream(dir.path()).unwrap_err().to_string();
        assert!(error.contains("no YAML files found in"), "{error}");
        std::fs::write(dir.path().join("x.yaml"), "just text\n").unwrap();
        let error = format!("{:#}", stream(dir.path()).unwrap_err());
        assert!(error.contains("a document is not an object"), "{error}");
        let error = format!("{:#}", one(&dir.path().join("missing.yaml"), "composite resource").unwrap_err());
        assert!(error.starts_with("cannot read composite resource file"), "{error}");
    }
}
