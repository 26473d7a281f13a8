//! Checking the input and turning it into typed patches, templates, readiness checks and
//! connection details, with the field-path messages Crossplane gives
//! (`resources[0].patches[1].fromFieldPath: Required value: ...`).
//!
//! All of the input is checked before anything runs, so a bad patch in the last template
//! fails the step before the first template is rendered; patch sets are inlined afterwards.

use serde_json::Value;

use super::input;
use super::transforms::{self, Transform};
use crate::fieldpath::MergeOptions;
use crate::golang::strconv::quote;

/// A path into the input, as Kubernetes' `field.Path` renders it (`a.b[0][key]`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Path(String);

impl Path {
    /// A path starting at a top-level field.
    pub(crate) fn root(name: &str) -> Path {
        Path(name.to_string())
    }

    /// A field of this path.
    pub(crate) fn child(&self, name: &str) -> Path {
        if self.0.is_empty() { Path(name.to_string()) } else { Path(format!("{}.{name}", self.0)) }
    }

    /// An element of this path.
    pub(crate) fn index(&self, index: usize) -> Path {
        Path(format!("{}[{index}]", self.0))
    }

    /// A map key of this path.
    pub(crate) fn key(&self, key: &str) -> Path {
        Path(format!("{}[{key}]", self.0))
    }
}

/// A problem with one field of the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {body}")]
pub(crate) struct FieldError {
    field: String,
    body: String,
}

impl FieldError {
    /// A missing field.
    pub(crate) fn required(path: Path, detail: impl AsRef<str>) -> FieldError {
        FieldError { field: path.0, body: format!("Required value: {}", detail.as_ref()) }
    }

    /// A field with a value that is not allowed.
    pub(crate) fn invalid(path: Path, value: &str, detail: &str) -> FieldError {
        FieldError { field: path.0, body: format!("Invalid value: {}: {detail}", quote(value, false)) }
    }
}

/// Why the input cannot be used; the step's fatal result says this.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InputError {
    /// The input is not a `Resources` object.
    #[error("cannot get Function input: {0}")]
    Decode(String),
    /// A field is missing or wrong.
    #[error("invalid Function input: {0}")]
    Invalid(#[from] FieldError),
    /// A `PatchSet` patch names a patch set that does not exist, or a patch set includes one.
    #[error("cannot resolve PatchSets: {0}")]
    PatchSets(String),
}

/// A patch type (after patch sets are inlined, `PatchSet` is gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// Observed XR → desired composed resource (or environment, in environment patches).
    FromCompositeFieldPath,
    /// Observed composed resource → desired XR (environment → desired XR in environment
    /// patches).
    ToCompositeFieldPath,
    /// Combined from the observed XR.
    CombineFromComposite,
    /// Combined into the desired XR.
    CombineToComposite,
    /// Environment → desired composed resource (or desired XR).
    FromEnvironmentFieldPath,
    /// Observed composed resource (or XR) → environment.
    ToEnvironmentFieldPath,
    /// Combined from the environment.
    CombineFromEnvironment,
    /// Combined into the environment.
    CombineToEnvironment,
}

impl PatchType {
    fn parse(name: &str) -> Option<PatchType> {
        Some(match name {
            "FromCompositeFieldPath" => PatchType::FromCompositeFieldPath,
            "ToCompositeFieldPath" => PatchType::ToCompositeFieldPath,
            "CombineFromComposite" => PatchType::CombineFromComposite,
            "CombineToComposite" => PatchType::CombineToComposite,
            "FromEnvironmentFieldPath" => PatchType::FromEnvironmentFieldPath,
            "ToEnvironmentFieldPath" => PatchType::ToEnvironmentFieldPath,
            "CombineFromEnvironment" => PatchType::CombineFromEnvironment,
            "CombineToEnvironment" => PatchType::CombineToEnvironment,
            _ => return None,
        })
    }

    /// The name users write.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PatchType::FromCompositeFieldPath => "FromCompositeFieldPath",
            PatchType::ToCompositeFieldPath => "ToCompositeFieldPath",
            PatchType::CombineFromComposite => "CombineFromComposite",
            PatchType::CombineToComposite => "CombineToComposite",
            PatchType::FromEnvironmentFieldPath => "FromEnvironmentFieldPath",
            PatchType::ToEnvironmentFieldPath => "ToEnvironmentFieldPath",
            PatchType::CombineFromEnvironment => "CombineFromEnvironment",
            PatchType::CombineToEnvironment => "CombineToEnvironment",
        }
    }

    /// Whether the patch writes to the desired composed resource (rather than reading from
    /// the observed one).
    pub(crate) fn to_composed(self) -> bool {
        matches!(
            self,
            PatchType::FromCompositeFieldPath
                | PatchType::CombineFromComposite
                | PatchType::FromEnvironmentFieldPath
                | PatchType::CombineFromEnvironment
        )
    }
}

/// Where a patch's value comes from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// One field path.
    Field(String),
    /// Several field paths formatted together with a Go format string.
    Combine {
        /// The field paths, in argument order.
        variables: Vec<String>,
        /// The format string.
        format: String,
    },
}

/// A checked patch.
#[derive(Clone, Debug)]
pub(crate) struct Patch {
    /// The patch type.
    pub(crate) patch_type: PatchType,
    /// Where the value comes from.
    pub(crate) source: Source,
    /// Where it goes.
    pub(crate) to: String,
    /// Transforms applied in order.
    pub(crate) transforms: Vec<Transform>,
    /// `policy.fromFieldPath: Required`.
    pub(crate) required: bool,
    /// `policy.toFieldPath` (none: replace).
    pub(crate) merge: Option<MergeOptions>,
}

/// A patch in a template before patch sets are inlined.
#[derive(Clone, Debug)]
enum RawPatch {
    Patch(Patch),
    PatchSet(String),
}

/// A checked readiness check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadinessCheck {
    /// Always ready.
    None,
    /// The field exists.
    NonEmpty(String),
    /// The field is this string.
    MatchString(String, String),
    /// The field is this integer.
    MatchInteger(String, i64),
    /// The field is `true`.
    MatchTrue(String),
    /// The field is `false`.
    MatchFalse(String),
    /// The condition of this type has this status.
    MatchCondition {
        /// The condition type.
        condition_type: String,
        /// The status wanted.
        status: String,
    },
}

impl ReadinessCheck {
    /// What a template without readiness checks uses.
    pub(crate) fn default_checks() -> Vec<ReadinessCheck> {
        vec![ReadinessCheck::MatchCondition { condition_type: "Ready".into(), status: "True".into() }]
    }
}

/// A checked connection detail.
// The variants are named as the connection detail types users write.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ConnectionDetail {
    /// A key of the composed resource's connection details.
    FromConnectionSecretKey {
        /// The XR's key.
        name: String,
        /// The composed resource's key.
        key: String,
    },
    /// A field of the observed composed resource.
    FromFieldPath {
        /// The XR's key.
        name: String,
        /// The field.
        path: String,
    },
    /// A fixed value.
    FromValue {
        /// The XR's key.
        name: String,
        /// The value.
        value: String,
    },
}

/// A checked composed resource template.
#[derive(Clone, Debug)]
pub(crate) struct Template {
    /// The composition resource name.
    pub(crate) name: String,
    /// The base object, if any.
    pub(crate) base: Option<Value>,
    /// Patches, with patch sets inlined.
    pub(crate) patches: Vec<Patch>,
    /// Connection details.
    pub(crate) connection_details: Vec<ConnectionDetail>,
    /// Readiness checks (never empty: the default applies).
    pub(crate) readiness_checks: Vec<ReadinessCheck>,
}

/// `writeConnectionSecretToRef` of the input.
#[derive(Clone, Debug, Default)]
pub(crate) struct SecretRef {
    /// The Secret's name.
    pub(crate) name: Option<String>,
    /// The Secret's namespace.
    pub(crate) namespace: Option<String>,
    /// Patches from the XR to `name`/`namespace`.
    pub(crate) patches: Vec<Patch>,
}

/// The checked input.
#[derive(Clone, Debug, Default)]
pub(crate) struct Input {
    /// Environment patches.
    pub(crate) environment: Vec<Patch>,
    /// The templates, in order.
    pub(crate) templates: Vec<Template>,
    /// Where a modern XR's connection secret goes.
    pub(crate) secret_ref: Option<SecretRef>,
}

/// Decodes and checks the step's input.
pub(crate) fn compile_input(raw: Option<&Value>) -> Result<Input, InputError> {
    let resources: input::Resources = match raw {
        None | Some(Value::Null) => input::Resources::default(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| InputError::Decode(e.to_string()))?,
    };
    compile_resources(&resources)
}

fn compile_resources(r: &input::Resources) -> Result<Input, InputError> {
    let mut patch_sets: Vec<(String, Vec<RawPatch>)> = Vec::new();
    for (i, set) in r.patch_sets.iter().enumerate() {
        let path = Path::root("patchSets").index(i);
        if set.name.is_empty() {
            return Err(FieldError::required(path.child("name"), "name is required").into());
        }
        let patches = compile_patches(&set.patches, &path.child("patches"))?;
        patch_sets.push((set.name.clone(), patches));
    }
    let environment_patches = r.environment.as_ref().map(|e| e.patches.as_slice()).unwrap_or_default();
    if r.resources.is_empty() && environment_patches.is_empty() {
        return Err(FieldError::required(
            Path::root("resources"),
            "resources or environment patches are required",
        )
        .into());
    }
    let mut templates = Vec::new();
    for (i, t) in r.resources.iter().enumerate() {
        templates.push(compile_template(t, &Path::root("resources").index(i))?);
    }
    let mut environment = Vec::new();
    for (i, p) in environment_patches.iter().enumerate() {
        let path = Path::root("environment").child("patches").index(i);
        let type_name = p.type_.as_deref().filter(|t| !t.is_empty()).unwrap_or("FromCompositeFieldPath");
        if !matches!(
            type_name,
            "FromCompositeFieldPath"
                | "ToCompositeFieldPath"
                | "CombineFromComposite"
                | "CombineToComposite"
                | "FromEnvironmentFieldPath"
                | "ToEnvironmentFieldPath"
        ) {
            return Err(
                FieldError::invalid(path.key("type"), type_name, "invalid environment patch type").into()
            );
        }
        environment.push(compile_patch(p, &path)?);
    }
    let secret_ref = match &r.write_connection_secret_to_ref {
        None => None,
        Some(raw) => Some(compile_secret_ref(raw)?),
    };

    // Inline patch sets, now that the whole input is known to be well formed.
    if patch_sets.iter().any(|(_, set)| set.iter().any(|p| matches!(p, RawPatch::PatchSet(_)))) {
        return Err(InputError::PatchSets("a patch in a PatchSet cannot be of type PatchSet".to_string()));
    }
    let mut resolved = Vec::with_capacity(templates.len());
    for (template, raw_patches) in templates {
        let mut patches = Vec::new();
        for p in raw_patches {
            match p {
                RawPatch::Patch(p) => patches.push(p),
                RawPatch::PatchSet(name) => {
                    let Some((_, set)) = patch_sets.iter().find(|(n, _)| *n == name) else {
                        return Err(InputError::PatchSets(format!("cannot find PatchSet by name {name}")));
                    };
                    for p in set {
                        match p {
                            RawPatch::Patch(p) => patches.push(p.clone()),
                            RawPatch::PatchSet(_) => {
                                return Err(InputError::PatchSets(
                                    "a patch in a PatchSet cannot be of type PatchSet".to_string(),
                                ));
                            }
                        }
                    }
                }
            }
        }
        resolved.push(Template { patches, ..template });
    }
    Ok(Input { environment, templates: resolved, secret_ref })
}

fn compile_template(
    t: &input::ComposedTemplate,
    path: &Path,
) -> Result<(Template, Vec<RawPatch>), InputError> {
    if t.name.is_empty() {
        return Err(FieldError::required(path.child("name"), "name is required").into());
    }
    let patches = compile_patches(&t.patches, &path.child("patches"))?;
    let mut connection_details = Vec::new();
    for (i, cd) in t.connection_details.iter().enumerate() {
        connection_details.push(compile_connection_detail(cd, &path.child("connectionDetails").index(i))?);
    }
    let mut readiness_checks = Vec::new();
    for (i, rc) in t.readiness_checks.iter().enumerate() {
        readiness_checks.push(compile_readiness_check(rc, &path.child("readinessChecks").index(i))?);
    }
    if readiness_checks.is_empty() {
        readiness_checks = ReadinessCheck::default_checks();
    }
    let base = t.base.clone().filter(|b| !b.is_null());
    let template =
        Template { name: t.name.clone(), base, patches: Vec::new(), connection_details, readiness_checks };
    Ok((template, patches))
}

fn compile_patches(patches: &[input::Patch], path: &Path) -> Result<Vec<RawPatch>, InputError> {
    let mut out = Vec::with_capacity(patches.len());
    for (i, p) in patches.iter().enumerate() {
        let path = path.index(i);
        if p.type_.as_deref() == Some("PatchSet") {
            let name = p.patch_set_name.clone().unwrap_or_default();
            if name.is_empty() {
                return Err(FieldError::required(
                    path.child("patchSetName"),
                    "patchSetName must be set for patch type PatchSet",
                )
                .into());
            }
            out.push(RawPatch::PatchSet(name));
            continue;
        }
        out.push(RawPatch::Patch(compile_patch(p, &path)?));
    }
    Ok(out)
}

/// Checks one (non-`PatchSet`) patch.
fn compile_patch(p: &input::Patch, path: &Path) -> Result<Patch, FieldError> {
    let type_name = p.type_.as_deref().filter(|t| !t.is_empty()).unwrap_or("FromCompositeFieldPath");
    let patch_type = PatchType::parse(type_name)
        .ok_or_else(|| FieldError::invalid(path.child("type"), type_name, "unknown patch type"))?;
    let to_field_path = p.to_field_path.clone().filter(|t| !t.is_empty());
    let (source, to) = match patch_type {
        PatchType::FromCompositeFieldPath
        | PatchType::ToCompositeFieldPath
        | PatchType::FromEnvironmentFieldPath
        | PatchType::ToEnvironmentFieldPath => {
            let from = p.from_field_path.clone().filter(|f| !f.is_empty()).ok_or_else(|| {
                FieldError::required(
                    path.child("fromFieldPath"),
                    format!("fromFieldPath must be set for patch type {type_name}"),
                )
            })?;
            let to = to_field_path.unwrap_or_else(|| from.clone());
            (Source::Field(from), to)
        }
        PatchType::CombineFromComposite
        | PatchType::CombineToComposite
        | PatchType::CombineFromEnvironment
        | PatchType::CombineToEnvironment => {
            let combine = p.combine.as_ref().ok_or_else(|| {
                FieldError::required(
                    path.child("combine"),
                    format!("combine must be set for patch type {type_name}"),
                )
            })?;
            let to = to_field_path.ok_or_else(|| {
                FieldError::required(
                    path.child("toFieldPath"),
                    format!("toFieldPath must be set for patch type {type_name}"),
                )
            })?;
            (compile_combine(combine, &path.child("combine"))?, to)
        }
    };
    let mut transforms = Vec::with_capacity(p.transforms.len());
    for (i, t) in p.transforms.iter().enumerate() {
        transforms.push(transforms::compile(t, &path.child("transforms").index(i))?);
    }
    let policy = p.policy.clone().unwrap_or_default();
    let merge = match policy.to_field_path.as_deref().unwrap_or("Replace") {
        "Replace" | "" => None,
        "MergeObjects" | "MergeObject" => Some(MergeOptions { keep_map_values: true, append_slice: false }),
        "MergeObjectsAppendArrays" => Some(MergeOptions { keep_map_values: true, append_slice: true }),
        "ForceMergeObjects" => Some(MergeOptions { keep_map_values: false, append_slice: false }),
        "ForceMergeObjectsAppendArrays" | "AppendArray" => {
            Some(MergeOptions { keep_map_values: false, append_slice: true })
        }
        other => {
            return Err(FieldError::invalid(
                path.child("policy").child("toFieldPathPolicy"),
                other,
                "unknown toFieldPathPolicy",
            ));
        }
    };
    let required = match policy.from_field_path.as_deref().unwrap_or("Optional") {
        "Optional" | "" => false,
        "Required" => true,
        other => {
            return Err(FieldError::invalid(
                path.child("policy").child("fromFieldPathPolicy"),
                other,
                "unknown fromFieldPathPolicy",
            ));
        }
    };
    Ok(Patch { patch_type, source, to, transforms, required, merge })
}

fn compile_combine(c: &input::Combine, path: &Path) -> Result<Source, FieldError> {
    let format = match c.strategy.as_str() {
        "string" => c.string.as_ref().map(|s| s.fmt.clone()).ok_or_else(|| {
            FieldError::required(path.child("string"), "string must be set for combine strategy string")
        })?,
        "" => {
            return Err(FieldError::required(path.child("strategy"), "a combine strategy must be provided"));
        }
        other => return Err(FieldError::invalid(path.child("strategy"), other, "unknown strategy type")),
    };
    if c.variables.is_empty() {
        return Err(FieldError::required(path.child("variables"), "at least one variable must be provided"));
    }
    let mut variables = Vec::with_capacity(c.variables.len());
    for (i, v) in c.variables.iter().enumerate() {
        if v.from_field_path.is_empty() {
            return Err(FieldError::required(
                path.child("variables").index(i).child("fromFieldPath"),
                "fromFieldPath must be set for each combine variable",
            ));
        }
        variables.push(v.from_field_path.clone());
    }
    Ok(Source::Combine { variables, format })
}

fn compile_connection_detail(
    cd: &input::ConnectionDetail,
    path: &Path,
) -> Result<ConnectionDetail, FieldError> {
    let type_name = cd.type_.as_deref().unwrap_or_default();
    if type_name.is_empty() {
        return Err(FieldError::required(path.child("type"), "connection detail type is required"));
    }
    if !matches!(type_name, "FromConnectionSecretKey" | "FromFieldPath" | "FromValue") {
        return Err(FieldError::invalid(path.child("type"), type_name, "unknown connection detail type"));
    }
    let name = cd.name.clone().filter(|n| !n.is_empty());
    let Some(name) = name else {
        return Err(FieldError::required(path.child("name"), "name is required"));
    };
    Ok(match type_name {
        "FromValue" => ConnectionDetail::FromValue {
            name,
            value: cd.value.clone().ok_or_else(|| {
                FieldError::required(path.child("value"), "value connection detail requires a value")
            })?,
        },
        "FromConnectionSecretKey" => ConnectionDetail::FromConnectionSecretKey {
            name,
            key: cd.from_connection_secret_key.clone().ok_or_else(|| {
                FieldError::required(
                    path.child("fromConnectionSecretKey"),
                    "from connection secret key connection detail requires a key",
                )
            })?,
        },
        _ => ConnectionDetail::FromFieldPath {
            name,
            path: cd.from_field_path.clone().ok_or_else(|| {
                FieldError::required(
                    path.child("fromFieldPath"),
                    "from field path connection detail requires a field path",
                )
            })?,
        },
    })
}

fn compile_readiness_check(rc: &input::ReadinessCheck, path: &Path) -> Result<ReadinessCheck, FieldError> {
    let field_path = || {
        rc.field_path.clone().ok_or_else(|| FieldError::required(path.child("fieldPath"), "cannot be empty"))
    };
    Ok(match rc.type_.as_str() {
        "None" => ReadinessCheck::None,
        "MatchCondition" => {
            let mc = rc.match_condition.clone().unwrap_or_default();
            ReadinessCheck::MatchCondition {
                condition_type: mc.type_.filter(|t| !t.is_empty()).unwrap_or_else(|| "Ready".to_string()),
                status: mc.status.filter(|s| !s.is_empty()).unwrap_or_else(|| "True".to_string()),
            }
        }
        "MatchString" => {
            let want = rc.match_string.clone().ok_or_else(|| {
                FieldError::required(path.child("matchString"), "cannot be nil for type MatchString")
            })?;
            ReadinessCheck::MatchString(field_path()?, want)
        }
        "MatchInteger" => {
            let want = rc.match_integer.ok_or_else(|| {
                FieldError::required(path.child("matchInteger"), "cannot be nil for type MatchInteger")
            })?;
            ReadinessCheck::MatchInteger(field_path()?, want)
        }
        "NonEmpty" => ReadinessCheck::NonEmpty(field_path()?),
        "MatchTrue" => ReadinessCheck::MatchTrue(field_path()?),
        "MatchFalse" => ReadinessCheck::MatchFalse(field_path()?),
        other => return Err(FieldError::invalid(path.child("type"), other, "unknown readiness check type")),
    })
}

fn compile_secret_ref(raw: &input::ConnectionSecretRef) -> Result<SecretRef, InputError> {
    let mut patches = Vec::new();
    for (i, p) in raw.patches.iter().enumerate() {
        let path = Path::root("writeConnectionSecretToRef").child("patches").index(i);
        let type_name = p.type_.as_deref().filter(|t| !t.is_empty()).unwrap_or("FromCompositeFieldPath");
        if !matches!(type_name, "FromCompositeFieldPath" | "CombineFromComposite") {
            return Err(FieldError::invalid(
                path.child("type"),
                type_name,
                "only FromCompositeFieldPath and CombineFromComposite patches can patch the connection secret reference",
            )
            .into());
        }
        let patch = compile_patch(p, &path)?;
        if !matches!(patch.to.as_str(), "name" | "namespace") {
            return Err(FieldError::invalid(
                path.child("toFieldPath"),
                &patch.to,
                "must be name or namespace",
            )
            .into());
        }
        patches.push(patch);
    }
    Ok(SecretRef { name: raw.name.clone(), namespace: raw.namespace.clone(), patches })
}
