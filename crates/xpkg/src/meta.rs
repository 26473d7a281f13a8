//! A `package.yaml` stream: the package's meta object (`meta.pkg.crossplane.io` Provider,
//! Configuration or Function) and the objects it installs, with Crossplane's rules: documents
//! that are empty or comments only are skipped; a document of a kind neither the meta nor the
//! object scheme knows fails the whole package; exactly one meta object; and each package type
//! may hold only its own kinds (a Provider its CRDs, MRDs and webhook configurations, a
//! Configuration its XRDs, Compositions, MRAPs and Operations, a Function its input CRDs).
//!
//! The package manager applies these rules in Crossplane's three steps, each with Crossplane's
//! words: [`read`] is its parser (an unknown kind fails the stream), [`Stream::validate`] its
//! validator (blocks the install: `not exactly one package meta type`, `package meta type is
//! not Configuration`), [`Package::lint`] its linter (a kind the type may not hold is only a
//! warning) and [`Package::installable`] its establisher's filter (such an object is skipped).
//! [`parse`] and [`Package::check_kinds`] are the strict form `oxplane xpkg build` refuses with.

use serde_json::Value;

use crate::XpkgError;

/// The group of package meta objects.
pub const META_GROUP: &str = "meta.pkg.crossplane.io";

/// The three package types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackageType {
    /// A provider.
    Provider,
    /// A Configuration (XRDs and Compositions).
    Configuration,
    /// A composition function.
    Function,
}

impl PackageType {
    /// The meta and package kind's name.
    pub fn kind(self) -> &'static str {
        match self {
            PackageType::Provider => "Provider",
            PackageType::Configuration => "Configuration",
            PackageType::Function => "Function",
        }
    }

    /// The `(group, kind)`s a package of this type may contain, in the order of Crossplane's
    /// linter for the type (its error lists them so).
    pub fn allowed(self) -> &'static [(&'static str, &'static str)] {
        match self {
            PackageType::Provider => &[
                ("apiextensions.k8s.io", "CustomResourceDefinition"),
                ("apiextensions.crossplane.io", "ManagedResourceDefinition"),
                ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
                ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
            ],
            PackageType::Configuration => &[
                ("apiextensions.crossplane.io", "CompositeResourceDefinition"),
                ("apiextensions.crossplane.io", "ManagedResourceActivationPolicy"),
                ("apiextensions.crossplane.io", "Composition"),
                ("ops.crossplane.io", "Operation"),
                ("ops.crossplane.io", "CronOperation"),
                ("ops.crossplane.io", "WatchOperation"),
            ],
            PackageType::Function => &[("apiextensions.k8s.io", "CustomResourceDefinition")],
        }
    }
}

/// The kinds any package stream may hold (Crossplane's object scheme), by group: versions and
/// kinds.
fn known_object(group: &str, version: &str, kind: &str) -> bool {
    match group {
        "apiextensions.crossplane.io" => match version {
            "v1" => matches!(kind, "CompositeResourceDefinition" | "Composition" | "CompositionRevision"),
            "v1alpha1" => matches!(kind, "ManagedResourceDefinition" | "ManagedResourceActivationPolicy" | "Usage" | "ClusterUsage"),
            "v1beta1" => matches!(kind, "Usage" | "EnvironmentConfig"),
            "v2" => matches!(kind, "CompositeResourceDefinition" | "Usage" | "ClusterUsage"),
            _ => false,
        },
        "ops.crossplane.io" => version == "v1alpha1" && matches!(kind, "Operation" | "CronOperation" | "WatchOperation"),
        "apiextensions.k8s.io" => matches!(version, "v1" | "v1beta1") && kind == "CustomResourceDefinition",
        "admissionregistration.k8s.io" => version == "v1" && matches!(kind, "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"),
        _ => false,
    }
}

/// The package type of a meta object's version and kind, if it is one.
fn meta_type(version: &str, kind: &str) -> Option<PackageType> {
    let package = match kind {
        "Provider" => PackageType::Provider,
        "Configuration" => PackageType::Configuration,
        "Function" => PackageType::Function,
        _ => return None,
    };
    let known = match version {
        "v1" => true,
        "v1alpha1" => package != PackageType::Function,
        "v1beta1" => package == PackageType::Function,
        _ => false,
    };
    known.then_some(package)
}

/// A parsed package.
#[derive(Clone, Debug, PartialEq)]
pub struct Package {
    /// Its type.
    pub package_type: PackageType,
    /// The meta object.
    pub meta: Value,
    /// The objects, in stream order.
    pub objects: Vec<Value>,
}

impl Package {
    /// The meta object's `metadata.name`.
    pub fn name(&self) -> &str {
        self.meta.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }

    /// Checks that every object is of a kind this package type may contain; the error names
    /// the first that is not.
    pub fn check_kinds(&self) -> Result<(), XpkgError> {
        for object in &self.objects {
            let (group, _, kind) = gvk(object);
            if !self.package_type.allowed().contains(&(group, kind)) {
                let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                return Err(XpkgError::Invalid(format!(
                    "a {} package may not contain {kind}.{group} {name:?}",
                    self.package_type.kind(),
                    group = if group.is_empty() { "core" } else { group }
                )));
            }
        }
        Ok(())
    }

    /// Crossplane's linter: the first object of a kind this type may not hold, in its words
    /// (`object did not pass any of the linters with following errors: object is not an XRD,
    /// ...`; a Function's one rule alone: `object is not a CRD`). Only a warning: such an
    /// object is skipped ([`Package::installable`]), the rest is installed.
    pub fn lint(&self) -> Result<(), String> {
        let order = self.package_type.allowed();
        for object in &self.objects {
            let (group, _, kind) = gvk(object);
            if order.contains(&(group, kind)) {
                continue;
            }
            let words: Vec<&str> = order.iter().map(|(g, k)| not_a(g, k)).collect();
            return Err(match words.as_slice() {
                [one] => one.to_string(),
                many => format!("object did not pass any of the linters with following errors: {}", many.join(", ")),
            });
        }
        Ok(())
    }

    /// The objects the package manager installs (Crossplane's establisher's filter): those of
    /// the kinds this type may hold, and none of a Function (its CRDs describe its input only).
    pub fn installable(&self) -> Vec<&Value> {
        if self.package_type == PackageType::Function {
            return Vec::new();
        }
        let allowed = self.package_type.allowed();
        self.objects.iter().filter(|o| allowed.contains(&(gvk(o).0, gvk(o).2))).collect()
    }

    /// The stream as `crossplane xpkg build` writes it: `---`, the meta object, then each
    /// object, each followed by `---`.
    pub fn to_stream(&self) -> Result<String, XpkgError> {
        let mut out = String::from("---\n");
        for document in std::iter::once(&self.meta).chain(&self.objects) {
            out.push_str(&serde_yaml_ng::to_string(document).map_err(|e| XpkgError::Invalid(format!("cannot encode an object: {e}")))?);
            out.push_str("---\n");
        }
        Ok(out)
    }
}

/// `(group, version, kind)` of an object.
fn gvk(object: &Value) -> (&str, &str, &str) {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    (group, version, object.get("kind").and_then(Value::as_str).unwrap_or_default())
}

/// A `package.yaml` stream as read, before it is validated: the meta objects (any number) and
/// the objects, in stream order.
#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    /// The meta objects and their package types.
    pub metas: Vec<(PackageType, Value)>,
    /// The other objects.
    pub objects: Vec<Value>,
}

impl Stream {
    /// Crossplane's validator for a package installed as `expected`: exactly one meta object,
    /// of that type. (Its third check, that `spec.crossplane.version` is a constraint, is the
    /// package manager's, which reads constraints.)
    pub fn validate(self, expected: PackageType) -> Result<Package, XpkgError> {
        let mut metas = self.metas;
        let (Some((package_type, meta)), true) = (metas.pop(), metas.is_empty()) else {
            return Err(XpkgError::Invalid("not exactly one package meta type".into()));
        };
        if package_type != expected {
            return Err(XpkgError::Invalid(format!("package meta type is not {}", expected.kind())));
        }
        Ok(Package { package_type, meta, objects: self.objects })
    }
}

/// Crossplane's linter's word for an object that is not of one kind (`object is not a CRD`).
fn not_a(group: &str, kind: &str) -> &'static str {
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => "object is not a CRD",
        ("apiextensions.crossplane.io", "ManagedResourceDefinition") => "object is not an MRD",
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => "object is not an ValidatingWebhookConfiguration",
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => "object is not a MutatingWebhookConfiguration",
        ("apiextensions.crossplane.io", "CompositeResourceDefinition") => "object is not an XRD",
        ("apiextensions.crossplane.io", "Composition") => "object is not a Composition",
        ("apiextensions.crossplane.io", "ManagedResourceActivationPolicy") => "object is not an ManagedResourceActivationPolicy",
        ("ops.crossplane.io", "Operation") => "object is not an Operation",
        ("ops.crossplane.io", "CronOperation") => "object is not a CronOperation",
        _ => "object is not a WatchOperation",
    }
}

/// Reads every document of a YAML stream; empty documents are skipped.
pub fn documents(text: &str, source: &str) -> Result<Vec<Value>, XpkgError> {
    let mut out = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = <Value as serde::Deserialize>::deserialize(document).map_err(|e| XpkgError::Invalid(format!("{source}: document {}: {e}", i + 1)))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Reads a `package.yaml` stream as Crossplane's parser does: every document a meta object or
/// of a kind packages may hold, in any number.
pub fn read(text: &str) -> Result<Stream, XpkgError> {
    let mut metas = Vec::new();
    let mut objects = Vec::new();
    for document in documents(text, crate::STREAM_FILE)? {
        if !document.is_object() {
            return Err(XpkgError::Invalid(format!("{}: a document is not an object", crate::STREAM_FILE)));
        }
        let (group, version, kind) = gvk(&document);
        if group == META_GROUP {
            let Some(package_type) = meta_type(version, kind) else {
                return Err(XpkgError::Invalid(format!("unknown package meta kind {kind:?} of {META_GROUP}/{version}")));
            };
            metas.push((package_type, document));
            continue;
        }
        if !known_object(group, version, kind) {
            let api_version = document.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
            return Err(XpkgError::Invalid(format!("no Crossplane package may contain {kind:?} of {api_version:?}")));
        }
        objects.push(document);
    }
    Ok(Stream { metas, objects })
}

/// Parses a `package.yaml` stream: exactly one meta object, every other document of a kind
/// packages may hold. Which kinds this type may hold is [`Package::check_kinds`].
pub fn parse(text: &str) -> Result<Package, XpkgError> {
    let stream = read(text)?;
    let expected = match stream.metas.as_slice() {
        [(package_type, _)] => *package_type,
        _ => return Err(XpkgError::Invalid("not exactly one package meta type".into())),
    };
    stream.validate(expected)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const CONFIGURATION: &str = "
# a comment-only document
---
apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata: {name: platform}
spec: {crossplane: {version: '>=v1.14.0'}}
---
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xthings.example.org}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: things}
";

    #[test]
    fn a_configuration_parses_with_its_objects_in_order() {
        let package = parse(CONFIGURATION).unwrap();
        assert_eq!(package.package_type, PackageType::Configuration);
        assert_eq!(package.name(), "platform");
        let kinds: Vec<&str> = package.objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["CompositeResourceDefinition", "Composition"]);
        package.check_kinds().unwrap();
        // Written and read again, it is the same package.
        assert_eq!(parse(&package.to_stream().unwrap()).unwrap(), package);
    }

    #[test]
    fn meta_objects_must_be_exactly_one() {
        let none = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: a}\n";
        assert_eq!(parse(none).unwrap_err().to_string(), "not exactly one package meta type");
        let two = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: a}\n---\napiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: b}\n";
        assert_eq!(parse(two).unwrap_err().to_string(), "not exactly one package meta type");
        assert!(parse("apiVersion: meta.pkg.crossplane.io/v1beta1\nkind: Provider\nmetadata: {name: a}\n").unwrap_err().to_string().contains("unknown package meta kind"));
        assert_eq!(parse("apiVersion: meta.pkg.crossplane.io/v1beta1\nkind: Function\nmetadata: {name: f}\n").unwrap().package_type, PackageType::Function);
    }

    #[test]
    fn unknown_kinds_fail_the_package_and_foreign_kinds_fail_the_type() {
        let configmap = format!("{CONFIGURATION}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n");
        assert_eq!(parse(&configmap).unwrap_err().to_string(), "no Crossplane package may contain \"ConfigMap\" of \"v1\"");
        let crd = format!("{CONFIGURATION}---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: bs.example.org}}\n");
        let package = parse(&crd).unwrap();
        assert_eq!(
            package.check_kinds().unwrap_err().to_string(),
            "a Configuration package may not contain CustomResourceDefinition.apiextensions.k8s.io \"bs.example.org\""
        );
        let provider = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: bs.example.org}\n";
        parse(provider).unwrap().check_kinds().unwrap();
    }

    #[test]
    fn the_package_manager_validates_lints_and_filters_in_crossplanes_words() {
        let two = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: a}\n---\napiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: b}\n";
        assert_eq!(read(two).unwrap().validate(PackageType::Configuration).unwrap_err().to_string(), "not exactly one package meta type");
        let none = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: a}\n";
        assert_eq!(read(none).unwrap().validate(PackageType::Configuration).unwrap_err().to_string(), "not exactly one package meta type");
        let provider = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\n";
        assert_eq!(read(provider).unwrap().validate(PackageType::Configuration).unwrap_err().to_string(), "package meta type is not Configuration");

        let mixed = format!("{CONFIGURATION}---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: bs.example.org}}\n");
        let package = read(&mixed).unwrap().validate(PackageType::Configuration).unwrap();
        assert_eq!(
            package.lint().unwrap_err(),
            "object did not pass any of the linters with following errors: object is not an XRD, object is not an ManagedResourceActivationPolicy, object is not a Composition, object is not an Operation, object is not a CronOperation, object is not a WatchOperation"
        );
        let kinds: Vec<&str> = package.installable().iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["CompositeResourceDefinition", "Composition"], "the CRD is skipped");
        assert_eq!(parse(CONFIGURATION).unwrap().lint(), Ok(()));

        let provider_with_xrd = format!("{provider}---\napiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {{name: x}}\n");
        assert_eq!(
            parse(&provider_with_xrd).unwrap().lint().unwrap_err(),
            "object did not pass any of the linters with following errors: object is not a CRD, object is not an MRD, object is not an ValidatingWebhookConfiguration, object is not a MutatingWebhookConfiguration"
        );
        let function = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: f}\n---\napiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\n";
        let function = parse(function).unwrap();
        assert_eq!(function.lint().unwrap_err(), "object is not a CRD");
        let with_crd = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: f}\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: inputs.fn.example.org}\n";
        let with_crd = parse(with_crd).unwrap();
        assert_eq!((with_crd.lint(), with_crd.installable().len()), (Ok(()), 0), "a Function's CRDs are never installed");
    }

    /// One object of each kind a package may hold, against each package type.
    #[test]
    fn each_type_holds_only_its_own_kinds() {
        let objects = [
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            ("apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"),
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
            ("apiextensions.crossplane.io/v1", "CompositeResourceDefinition"),
            ("apiextensions.crossplane.io/v2", "CompositeResourceDefinition"),
            ("apiextensions.crossplane.io/v1", "Composition"),
            ("apiextensions.crossplane.io/v1alpha1", "ManagedResourceActivationPolicy"),
            ("ops.crossplane.io/v1alpha1", "Operation"),
            ("ops.crossplane.io/v1alpha1", "CronOperation"),
            ("ops.crossplane.io/v1alpha1", "WatchOperation"),
        ];
        let allowed = |package: &str, kind: &str| match package {
            "Provider" => matches!(kind, "CustomResourceDefinition" | "ManagedResourceDefinition" | "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"),
            "Configuration" => matches!(kind, "CompositeResourceDefinition" | "Composition" | "ManagedResourceActivationPolicy" | "Operation" | "CronOperation" | "WatchOperation"),
            _ => kind == "CustomResourceDefinition",
        };
        for package in ["Provider", "Configuration", "Function"] {
            for (api_version, kind) in objects {
                let text = format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: {package}\nmetadata: {{name: p}}\n---\napiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: o}}\n");
                let checked = parse(&text).unwrap().check_kinds();
                assert_eq!(checked.is_ok(), allowed(package, kind), "{package} holding {kind} of {api_version}: {checked:?}");
                if let Err(error) = checked {
                    assert!(error.to_string().starts_with(&format!("a {package} package may not contain {kind}.")), "{error}");
                }
            }
        }
    }
}
