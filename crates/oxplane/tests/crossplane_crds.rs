//! Crossplane's own kinds as kubectl sees them, on a server with `--enable-operations`: for
//! every kind oxplane serves, objects Crossplane's CRDs refuse are refused with the same
//! message (kubectl's output line), one valid object per kind is accepted, and `kubectl get`
//! prints Crossplane's columns under its short names.
//!
//! What the tables were checked against (crossplane/crossplane, as published): the generated
//! CRDs `cluster/crds/apiextensions.crossplane.io_compositeresourcedefinitions.yaml`
//! (`group`, `names`, `claimNames` and `enforcedCompositionRef` immutable each on its own field),
//! `protection.crossplane.io_usages.yaml` and `apis/protection/v1beta1/usage_types.go`
//! (`apiVersion` and `kind` of `of` and `by` optional, the cross-namespace rule),
//! `pkg.crossplane.io_providers.yaml` and `pkg.crossplane.io_providerrevisions.yaml` and the
//! package types (`runtimeConfigRef` defaulted to the DeploymentRuntimeConfig `default`, no enum
//! on `revisionActivationPolicy` or `desiredState`), `apiextensions.crossplane.io_environmentconfigs.yaml`
//! (category `crossplane`), `ops.crossplane.io_operations.yaml` (controller-gen v0.19.0),
//! `apiextensions.crossplane.io_compositions.yaml` at v2.3.4 (`mode` only `Pipeline`), the XRD's
//! `defaultCompositionRevisionSelector` (a `metav1.LabelSelector`), and the
//! DeploymentRuntimeConfig types (`ObjectMeta` of name, labels and annotations, an apps/v1
//! `DeploymentSpec` with `selector` and `template` required),
//! `apiextensions.crossplane.io_managedresourcedefinitions.yaml` and `mrd_policy_types.go`
//! (`group`, `names` and `scope` immutable, `activate` with at least one entry); for
//! the v2-only rules (XRD scopes, claims refused in v2, lowercase names) and the columns of
//! revisions and the MRD's one-way `state`, Crossplane's v2 API types as the specification of
//! this project records them.

use crate::support::{Server, within};

use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// What is wrong with the answer to a write that should have been refused with every one of
/// `expected` in kubectl's output (its "The <kind> "<name>" is invalid:" line, then the causes,
/// on that line or, when there are several, one per line); none when it was.
pub fn unexpected_answer(what: &str, answer: Result<String, String>, expected: &[String]) -> Option<String> {
    match answer {
        Ok(out) => Some(format!("{what}: accepted: {out}")),
        Err(error) if !expected.iter().all(|e| error.contains(e.as_str())) => Some(format!("{what}:\n  got:  {error}\n  want: {expected:?}")),
        Err(_) => None,
    }
}

/// kubectl's words for a 422 of the object `kind`/`name` with `cause` among its causes.
pub fn invalid(kind: &str, name: &str, cause: &str) -> Vec<String> {
    vec![format!(r#"The {kind} "{name}" is invalid: "#), cause.to_string()]
}

/// A manifest of one object.
fn object(api_version: &str, kind: &str, name: &str, rest: &str) -> String {
    format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n{rest}")
}

fn xrd_v2(spec: &str) -> String {
    object(
        "apiextensions.crossplane.io/v2",
        "CompositeResourceDefinition",
        "xthings.example.org",
        &format!(
            "spec:\n  group: example.org\n  names: {{kind: XThing, plural: xthings}}\n{spec}  versions:\n  - name: v1\n    served: true\n    referenceable: true\n    schema:\n      openAPIV3Schema: {{type: object}}\n"
        ),
    )
}

fn xrd_v1(name: &str, spec: &str) -> String {
    object(
        "apiextensions.crossplane.io/v1",
        "CompositeResourceDefinition",
        &format!("x{name}s.legacy.example.org"),
        &format!(
            "spec:\n  group: legacy.example.org\n  names: {{kind: X{name}, plural: x{name}s}}\n{spec}  versions:\n  - name: v1\n    served: true\n    referenceable: true\n    schema:\n      openAPIV3Schema: {{type: object}}\n"
        ),
    )
}

fn composition(name: &str, spec: &str) -> String {
    object("apiextensions.crossplane.io/v1", "Composition", name, &format!("spec:\n  compositeTypeRef: {{apiVersion: example.org/v1, kind: XThing}}\n{spec}"))
}

const STEP: &str = "  mode: Pipeline\n  pipeline:\n  - step: render\n    functionRef: {name: function-dummy}\n";

/// The smallest Deployment spec Crossplane's DeploymentRuntimeConfig CRD accepts.
const DEPLOYMENT: &str = "      selector: {}\n      template: {}\n";

fn drc(spec: &str) -> String {
    object("pkg.crossplane.io/v1beta1", "DeploymentRuntimeConfig", "d", &format!("spec:\n{spec}"))
}

fn operation(spec: &str) -> String {
    object("ops.crossplane.io/v1alpha1", "Operation", "tidy", &format!("spec:\n{spec}"))
}

/// A ManagedResourceDefinition of `things.example.org` in `state`, with more spec lines.
fn mrd(state: &str, rest: &str) -> String {
    object(
        "apiextensions.crossplane.io/v1alpha1",
        "ManagedResourceDefinition",
        "things.example.org",
        &format!(
            "spec:\n  group: example.org\n  names: {{kind: Thing, plural: things}}\n  scope: Cluster\n  state: {state}\n{rest}  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {{type: object}}\n"
        ),
    )
}

fn template() -> String {
    format!("  operationTemplate:\n    spec:\n{}", STEP.lines().map(|l| format!("    {l}\n")).collect::<String>())
}

/// (what, manifest, the line kubectl prints), for objects Crossplane's CRDs refuse.
fn refused() -> Vec<(&'static str, String, Vec<String>)> {
    let usage = |api_version: &str, kind: &str, namespace: bool, spec: &str| {
        let meta = if namespace { "  namespace: default\n" } else { "" };
        format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: u\n{meta}spec:\n{spec}")
    };
    let package = |kind: &str, spec: &str| object("pkg.crossplane.io/v1", kind, "pkg", &format!("spec:\n{spec}"));
    let revision = |kind: &str, spec: &str| object("pkg.crossplane.io/v1", kind, "rev", &format!("spec:\n{spec}"));
    let xrd = |cause: &str| invalid("CompositeResourceDefinition", "xthings.example.org", cause);
    vec![
        ("XRD: uppercase plural", xrd_v2("").replace("plural: xthings", "plural: XThings"), xrd(r#"spec.names: Invalid value: "object": Plural name must be lowercase"#)),
        ("XRD v2: claims", xrd_v2("  scope: Cluster\n  claimNames: {kind: Thing, plural: things}\n"), xrd(r#"spec: Invalid value: "object": Claims aren't supported in apiextensions.crossplane.io/v2"#)),
        ("XRD v2: connection secret keys", xrd_v2("  connectionSecretKeys: [url]\n"), xrd(r#"spec: Invalid value: "object": XR connection secrets aren't supported in apiextensions.crossplane.io/v2"#)),
        ("XRD v2: legacy scope", xrd_v2("  scope: LegacyCluster\n"), xrd(r#"spec.scope: Unsupported value: "LegacyCluster": supported values: "Namespaced", "Cluster""#)),
        (
            "XRD v1: claims of a namespaced XR",
            xrd_v1("db", "  scope: Namespaced\n  claimNames: {kind: DB, plural: dbs}\n"),
            invalid("CompositeResourceDefinition", "xdbs.legacy.example.org", r#"spec: Invalid value: "object": Only LegacyCluster composite resources can offer claims"#),
        ),
        (
            "XRD v1: delete policy",
            xrd_v1("db", "  defaultCompositeDeletePolicy: Sometimes\n"),
            invalid("CompositeResourceDefinition", "xdbs.legacy.example.org", r#"spec.defaultCompositeDeletePolicy: Unsupported value: "Sometimes": supported values: "Background", "Foreground""#),
        ),
        (
            "XRD: webhook conversion without a webhook",
            xrd_v2("  conversion: {strategy: Webhook}\n"),
            xrd(r#"spec.conversion: Invalid value: "object": Webhook configuration is required when conversion strategy is Webhook"#),
        ),
        ("XRD: no versions", xrd_v2("").split("  versions:").next().unwrap_or_default().to_string(), xrd("spec.versions: Required value")),
        ("Composition: Pipeline mode without steps", composition("c", "  mode: Pipeline\n"), invalid("Composition", "c", r#"spec: Invalid value: "object": an array of pipeline steps is required in Pipeline mode"#)),
        // An enum error keeps the CRD's CEL rules from running, and kube-apiserver says so.
        (
            "Composition: unknown mode",
            composition("c", "  mode: Sometimes\n"),
            [invalid("Composition", "c", r#"spec.mode: Unsupported value: "Sometimes""#), vec![format!("<nil>: {}", oxplane_machinery::schema::RULES_NOT_CHECKED)]].concat(),
        ),
        ("Composition: step without a function", composition("c", "  mode: Pipeline\n  pipeline:\n  - step: render\n"), invalid("Composition", "c", "spec.pipeline[0].functionRef: Required value")),
        (
            "Composition: Secret credentials without a secretRef",
            composition("c", &format!("{STEP}    credentials:\n    - name: db\n      source: Secret\n")),
            invalid("Composition", "c", r#"spec.pipeline[0].credentials[0]: Invalid value: "object": the Secret source requires a secretRef"#),
        ),
        (
            "Composition: a required resource by name and labels",
            composition(
                "c",
                &format!("{STEP}    requirements:\n      requiredResources:\n      - {{requirementName: r, apiVersion: v1, kind: ConfigMap, name: a, matchLabels: {{a: b}}}}\n"),
            ),
            invalid("Composition", "c", r#"spec.pipeline[0].requirements.requiredResources[0]: Invalid value: "object": name and matchLabels are mutually exclusive"#),
        ),
        ("Composition: two steps of one name", composition("c", &format!("{STEP}  - step: render\n    functionRef: {{name: function-auto-ready}}\n")), invalid("Composition", "c", "spec.pipeline[1]: Duplicate value")),
        (
            "Composition: no composite type",
            object("apiextensions.crossplane.io/v1", "Composition", "c", &format!("spec:\n{STEP}")),
            invalid("Composition", "c", "spec.compositeTypeRef: Required value"),
        ),
        (
            "CompositionRevision: no revision",
            object("apiextensions.crossplane.io/v1", "CompositionRevision", "c-1", &format!("spec:\n  compositeTypeRef: {{apiVersion: example.org/v1, kind: XThing}}\n{STEP}")),
            invalid("CompositionRevision", "c-1", "spec.revision: Required value"),
        ),
        (
            "EnvironmentConfig: data not an object",
            object("apiextensions.crossplane.io/v1beta1", "EnvironmentConfig", "e", "data: 1\n"),
            invalid("EnvironmentConfig", "e", r#"data: Invalid value: "integer": data in body must be of type object"#),
        ),
        (
            "Usage (apiextensions): neither by nor reason",
            usage("apiextensions.crossplane.io/v1beta1", "Usage", false, "  of: {apiVersion: v1, kind: Namespace, resourceRef: {name: a}}\n"),
            invalid("Usage", "u", r#"spec: Invalid value: "object": either "spec.by" or "spec.reason" must be specified."#),
        ),
        (
            "Usage: of names nothing",
            usage("protection.crossplane.io/v1beta1", "Usage", true, "  reason: r\n  of: {apiVersion: v1, kind: ConfigMap}\n"),
            invalid("Usage", "u", r#"spec.of: Invalid value: "object": either a resource reference or a resource selector should be set."#),
        ),
        (
            "Usage: another namespace without by",
            usage("protection.crossplane.io/v1beta1", "Usage", true, "  reason: r\n  of: {apiVersion: v1, kind: ConfigMap, resourceRef: {name: a, namespace: other}}\n"),
            invalid("Usage", "u", r#"spec: Invalid value: "object": cross-namespace "spec.of" is not allowed without "spec.by" resource."#),
        ),
        ("Usage: no of", usage("protection.crossplane.io/v1beta1", "Usage", true, "  reason: r\n"), invalid("Usage", "u", "spec.of: Required value")),
        (
            "ClusterUsage: by names nothing",
            usage("protection.crossplane.io/v1beta1", "ClusterUsage", false, "  of: {apiVersion: v1, kind: Namespace, resourceRef: {name: a}}\n  by: {apiVersion: v1, kind: Namespace}\n"),
            invalid("ClusterUsage", "u", r#"spec.by: Invalid value: "object": either a resource reference or a resource selector should be set."#),
        ),
        ("Provider: no package", package("Provider", "  revisionHistoryLimit: 2\n"), invalid("Provider", "pkg", "spec.package: Required value")),
        (
            "Provider: a history limit that is not a number",
            package("Provider", "  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\n  revisionHistoryLimit: some\n"),
            invalid("Provider", "pkg", r#"spec.revisionHistoryLimit: Invalid value: "string": spec.revisionHistoryLimit in body must be of type integer"#),
        ),
        (
            "Function: a runtime config without a name",
            package("Function", "  package: xpkg.crossplane.io/crossplane-contrib/function-dummy:v0.4.1\n  runtimeConfigRef: {kind: DeploymentRuntimeConfig}\n"),
            invalid("Function", "pkg", "spec.runtimeConfigRef.name: Required value"),
        ),
        ("Configuration: no package", package("Configuration", "  skipDependencyResolution: true\n"), invalid("Configuration", "pkg", "spec.package: Required value")),
        ("ProviderRevision: no image", revision("ProviderRevision", "  revision: 1\n  desiredState: Active\n"), invalid("ProviderRevision", "rev", "spec.image: Required value")),
        ("FunctionRevision: no revision", revision("FunctionRevision", "  image: xpkg.crossplane.io/f:v1\n  desiredState: Active\n"), invalid("FunctionRevision", "rev", "spec.revision: Required value")),
        (
            "ConfigurationRevision: no desired state",
            revision("ConfigurationRevision", "  image: xpkg.crossplane.io/c:v1\n  revision: 1\n"),
            invalid("ConfigurationRevision", "rev", "spec.desiredState: Required value"),
        ),
        (
            "DeploymentRuntimeConfig: a template that is not an object",
            object("pkg.crossplane.io/v1beta1", "DeploymentRuntimeConfig", "d", "spec:\n  deploymentTemplate: big\n"),
            invalid("DeploymentRuntimeConfig", "d", r#"spec.deploymentTemplate: Invalid value: "string": spec.deploymentTemplate in body must be of type object"#),
        ),
        (
            "DeploymentRuntimeConfig: a Deployment spec without selector and template",
            drc("  deploymentTemplate:\n    spec:\n      replicas: 2\n"),
            [invalid("DeploymentRuntimeConfig", "d", "spec.deploymentTemplate.spec.selector: Required value"), vec!["spec.deploymentTemplate.spec.template: Required value".to_string()]].concat(),
        ),
        (
            "DeploymentRuntimeConfig: replicas that are not a number",
            drc(&format!("  deploymentTemplate:\n    spec:\n      replicas: two\n{DEPLOYMENT}")),
            invalid("DeploymentRuntimeConfig", "d", r#"spec.deploymentTemplate.spec.replicas: Invalid value: "string": spec.deploymentTemplate.spec.replicas in body must be of type integer"#),
        ),
        (
            "DeploymentRuntimeConfig: a container without a name",
            drc("  deploymentTemplate:\n    spec:\n      selector: {}\n      template:\n        spec:\n          containers:\n          - args: [--debug]\n"),
            invalid("DeploymentRuntimeConfig", "d", "spec.deploymentTemplate.spec.template.spec.containers[0].name: Required value"),
        ),
        (
            "DeploymentRuntimeConfig: a pod spec without containers",
            drc("  deploymentTemplate:\n    spec:\n      selector: {}\n      template:\n        spec:\n          serviceAccountName: runtime\n"),
            invalid("DeploymentRuntimeConfig", "d", "spec.deploymentTemplate.spec.template.spec.containers: Required value"),
        ),
        (
            "DeploymentRuntimeConfig: labels that are not a map",
            drc("  serviceAccountTemplate:\n    metadata:\n      labels: 7\n"),
            invalid("DeploymentRuntimeConfig", "d", r#"spec.serviceAccountTemplate.metadata.labels: Invalid value: "integer": spec.serviceAccountTemplate.metadata.labels in body must be of type object"#),
        ),
        (
            "DeploymentRuntimeConfig: a Service name that is not a string",
            drc("  serviceTemplate:\n    metadata:\n      name: 5\n"),
            invalid("DeploymentRuntimeConfig", "d", r#"spec.serviceTemplate.metadata.name: Invalid value: "integer": spec.serviceTemplate.metadata.name in body must be of type string"#),
        ),
        ("DeploymentRuntimeConfig: a Service spec", drc("  serviceTemplate:\n    spec:\n      type: NodePort\n"), vec![r#"unknown field "spec.serviceTemplate.spec""#.to_string()]),
        (
            "XRD: a default revision selector expression without an operator",
            xrd_v2("  defaultCompositionRevisionSelector:\n    matchExpressions:\n    - {key: channel, values: [stable]}\n"),
            xrd("spec.defaultCompositionRevisionSelector.matchExpressions[0].operator: Required value"),
        ),
        (
            "Composition: the legacy Resources mode",
            composition("c", &STEP.replace("mode: Pipeline", "mode: Resources")),
            invalid("Composition", "c", r#"spec.mode: Unsupported value: "Resources": supported values: "Pipeline""#),
        ),
        ("Operation: no steps", operation("  mode: Pipeline\n  pipeline: []\n"), invalid("Operation", "tidy", "spec.pipeline: Invalid value: 0: spec.pipeline in body should have at least 1 items")),
        ("Operation: unknown mode", operation(&STEP.replace("mode: Pipeline", "mode: Later")), invalid("Operation", "tidy", r#"spec.mode: Unsupported value: "Later": supported values: "Pipeline""#)),
        (
            "CronOperation: no schedule",
            object("ops.crossplane.io/v1alpha1", "CronOperation", "nightly", &format!("spec:\n{}", template())),
            invalid("CronOperation", "nightly", "spec.schedule: Required value"),
        ),
        (
            "CronOperation: unknown concurrency policy",
            object("ops.crossplane.io/v1alpha1", "CronOperation", "nightly", &format!("spec:\n  schedule: '0 0 * * *'\n  concurrencyPolicy: Queue\n{}", template())),
            invalid("CronOperation", "nightly", r#"spec.concurrencyPolicy: Unsupported value: "Queue": supported values: "Allow", "Forbid", "Replace""#),
        ),
        ("ImageConfig: no matchImages", object("pkg.crossplane.io/v1beta1", "ImageConfig", "mirror", "spec:\n  rewriteImage: {prefix: mirror.example.org/}\n"), invalid("ImageConfig", "mirror", "spec.matchImages: Required value")),
        (
            "ImageConfig: an empty matchImages",
            object("pkg.crossplane.io/v1beta1", "ImageConfig", "mirror", "spec:\n  matchImages: []\n"),
            invalid("ImageConfig", "mirror", r#"spec.matchImages: Invalid value: "array": matchImages should have at least one element."#),
        ),
        (
            "ImageConfig: a match type other than Prefix",
            object("pkg.crossplane.io/v1beta1", "ImageConfig", "mirror", "spec:\n  matchImages:\n  - {type: Regex, prefix: xpkg.example.org/}\n"),
            invalid("ImageConfig", "mirror", r#"spec.matchImages[0].type: Unsupported value: "Regex": supported values: "Prefix""#),
        ),
        (
            "ImageConfig: a rewrite without a prefix",
            object("pkg.crossplane.io/v1beta1", "ImageConfig", "mirror", "spec:\n  matchImages:\n  - prefix: xpkg.example.org/\n  rewriteImage: {}\n"),
            invalid("ImageConfig", "mirror", "spec.rewriteImage.prefix: Required value"),
        ),
        (
            "Lock: a package without its source",
            object("pkg.crossplane.io/v1beta1", "Lock", "other", "packages:\n- {name: platform-1, version: v1.0.0, dependencies: []}\n"),
            invalid("Lock", "other", "packages[0].source: Required value"),
        ),
        (
            "Lock: a dependency without constraints",
            object("pkg.crossplane.io/v1beta1", "Lock", "other", "packages:\n- {name: platform-1, source: xpkg.example.org/platform, version: v1.0.0, dependencies: [{package: xpkg.example.org/nop}]}\n"),
            invalid("Lock", "other", "packages[0].dependencies[0].constraints: Required value"),
        ),
        (
            "ManagedResourceDefinition: an unknown state",
            mrd("Paused", ""),
            invalid("ManagedResourceDefinition", "things.example.org", r#"spec.state: Unsupported value: "Paused": supported values: "Active", "Inactive""#),
        ),
        (
            "ManagedResourceDefinition: an uppercase plural",
            mrd("Inactive", "").replace("plural: things", "plural: Things"),
            invalid("ManagedResourceDefinition", "things.example.org", r#"spec.names: Invalid value: "object": Plural name must be lowercase"#),
        ),
        (
            "ManagedResourceDefinition: no versions",
            mrd("Inactive", "").split("  versions:").next().unwrap_or_default().to_string(),
            invalid("ManagedResourceDefinition", "things.example.org", "spec.versions: Required value"),
        ),
        (
            "ManagedResourceActivationPolicy: nothing to activate",
            object("apiextensions.crossplane.io/v1alpha1", "ManagedResourceActivationPolicy", "none", "spec:\n  activate: []\n"),
            invalid("ManagedResourceActivationPolicy", "none", "spec.activate: Invalid value: 0: spec.activate in body should have at least 1 items"),
        ),
        (
            "WatchOperation: a watch without a kind",
            object("ops.crossplane.io/v1alpha1", "WatchOperation", "on-change", &format!("spec:\n  watch: {{apiVersion: v1}}\n{}", template())),
            invalid("WatchOperation", "on-change", "spec.watch.kind: Required value"),
        ),
    ]
}

/// One valid object per kind: (plural to get it by, manifest).
fn valid() -> Vec<(&'static str, String)> {
    let revision = |kind: &str, name: &str| {
        object("pkg.crossplane.io/v1", kind, name, "spec:\n  image: 127.0.0.1:9/example/package:v1.0.0\n  revision: 1\n  desiredState: Inactive\n")
    };
    vec![
        ("xrd", xrd_v2("")),
        ("xrd", xrd_v1("db", "  claimNames: {kind: DB, plural: dbs}\n  enforcedCompositionRef: {name: dbs}\n")),
        ("comp", composition("things", STEP)),
        ("comprev", object("apiextensions.crossplane.io/v1", "CompositionRevision", "things-manual", &format!("spec:\n  revision: 7\n  compositeTypeRef: {{apiVersion: example.org/v1, kind: XThing}}\n{STEP}"))),
        ("envcfg", object("apiextensions.crossplane.io/v1beta1", "EnvironmentConfig", "settings", "data: {region: eu-west-1}\n")),
        ("usages.apiextensions.crossplane.io", object("apiextensions.crossplane.io/v1beta1", "Usage", "keep-namespace", "spec:\n  reason: shared\n  of: {apiVersion: v1, kind: Namespace, resourceRef: {name: default}}\n")),
        ("usages.protection.crossplane.io", "apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata:\n  name: keep-settings\n  namespace: default\nspec:\n  reason: shared\n  of: {kind: ConfigMap, apiVersion: v1, resourceRef: {name: settings}}\n".to_string()),
        ("clusterusages", object("protection.crossplane.io/v1beta1", "ClusterUsage", "keep-default", "spec:\n  reason: shared\n  of: {apiVersion: v1, kind: Namespace, resourceRef: {name: default}}\n")),
        ("providers", object("pkg.crossplane.io/v1", "Provider", "provider-nop", "spec:\n  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\n")),
        ("functions", object("pkg.crossplane.io/v1beta1", "Function", "function-dummy", "spec:\n  package: xpkg.crossplane.io/crossplane-contrib/function-dummy:v0.4.1\n")),
        ("configurations", object("pkg.crossplane.io/v1", "Configuration", "platform", "spec:\n  package: 127.0.0.1:9/example/platform:v1.0.0\n  skipDependencyResolution: true\n")),
        ("configurationrevisions", revision("ConfigurationRevision", "platform-manual")),
        ("deploymentruntimeconfigs", object("pkg.crossplane.io/v1beta1", "DeploymentRuntimeConfig", "empty", &format!("spec:\n  deploymentTemplate:\n    spec:\n{DEPLOYMENT}"))),
        (
            "deploymentruntimeconfigs",
            object(
                "pkg.crossplane.io/v1beta1",
                "DeploymentRuntimeConfig",
                "debug",
                "spec:\n  deploymentTemplate:\n    metadata: {labels: {team: platform}}\n    spec:\n      replicas: 1\n      selector: {}\n      strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}}\n      template:\n        metadata: {annotations: {example.org/debug: 'on'}}\n        spec:\n          containers:\n          - name: package-runtime\n            args: [--debug, --poll=1m]\n            resources: {limits: {memory: 512Mi}}\n  serviceTemplate:\n    metadata: {name: runtime}\n  serviceAccountTemplate:\n    metadata: {name: runtime, annotations: {example.org/role: runtime}}\n",
            ),
        ),
        ("imageconfigs", object("pkg.crossplane.io/v1beta1", "ImageConfig", "mirror", "spec:\n  matchImages:\n  - {type: Prefix, prefix: xpkg.example.org/}\n  rewriteImage: {prefix: mirror.example.org/}\n")),
        (
            "locks",
            object("pkg.crossplane.io/v1beta1", "Lock", "other", "packages:\n- {name: platform-1, source: xpkg.example.org/platform, version: v1.0.0, dependencies: [{package: xpkg.example.org/nop, constraints: '>=v0.1.0'}]}\n"),
        ),
        ("mrd", mrd("Inactive", "  connectionDetails:\n  - {name: password, description: The admin password.}\n")),
        ("mrap", object("apiextensions.crossplane.io/v1alpha1", "ManagedResourceActivationPolicy", "examples", "spec:\n  activate: [things.example.org, '*.aws.example.org']\n")),
        ("ops", operation(STEP)),
        ("cronops", object("ops.crossplane.io/v1alpha1", "CronOperation", "nightly", &format!("spec:\n  schedule: '0 0 1 1 *'\n{}", template()))),
        ("watchops", object("ops.crossplane.io/v1alpha1", "WatchOperation", "on-change", &format!("spec:\n  watch: {{apiVersion: v1, kind: ConfigMap, matchLabels: {{watched: 'yes'}}}}\n{}", template()))),
    ]
}

/// What Crossplane's CRDs refuse, oxplane refuses with the same words; what they accept it
/// accepts.
#[test]
fn every_kind_refuses_what_crossplanes_crds_refuse() {
    let server = Server::start_with(&["--enable-operations"]);
    let mut wrong = Vec::new();
    for (what, manifest, expected) in refused() {
        wrong.extend(unexpected_answer(what, server.kubectl_try(&["create", "-f", "-"], &manifest), &expected));
    }
    for (plural, manifest) in valid() {
        if let Err(error) = server.kubectl_try(&["create", "--dry-run=server", "-f", "-"], &manifest) {
            wrong.push(format!("valid {plural} refused: {error}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Changes Crossplane's CRDs forbid once an object exists.
#[test]
fn immutable_fields_stay_as_they_were_created() {
    let server = Server::start_with(&["--enable-operations"]);
    server.apply(&xrd_v1("db", "  claimNames: {kind: DB, plural: dbs}\n  enforcedCompositionRef: {name: dbs}\n"));
    server.apply(&composition("things", STEP));
    server.apply(&mrd("Active", ""));
    server.apply(&object("ops.crossplane.io/v1alpha1", "WatchOperation", "on-change", &format!("spec:\n  watch: {{apiVersion: v1, kind: ConfigMap}}\n{}", template())));
    // Through v1, the version the XRD was written in: v2 refuses claims altogether.
    let xrd = "compositeresourcedefinitions.v1.apiextensions.crossplane.io/xdbs.legacy.example.org";
    const XRD: &str = "CompositeResourceDefinition";
    const DB: &str = "xdbs.legacy.example.org";
    let cases: &[(&str, &str, Vec<String>)] = &[
        (xrd, r#"{"spec":{"group":"other.example.org"}}"#, invalid(XRD, DB, r#"spec.group: Invalid value: "string": Value is immutable"#)),
        (xrd, r#"{"spec":{"claimNames":{"kind":"Database","plural":"databases"}}}"#, invalid(XRD, DB, r#"spec.claimNames: Invalid value: "object": Value is immutable"#)),
        (xrd, r#"{"spec":{"enforcedCompositionRef":{"name":"other"}}}"#, invalid(XRD, DB, r#"spec.enforcedCompositionRef: Invalid value: "object": Value is immutable"#)),
        (xrd, r#"{"spec":{"names":{"kind":"XDatabase","plural":"xdbs"}}}"#, invalid(XRD, DB, r#"spec.names: Invalid value: "object": Value is immutable"#)),
        ("composition/things", r#"{"spec":{"compositeTypeRef":{"kind":"XOther"}}}"#, invalid("Composition", "things", r#"spec.compositeTypeRef: Invalid value: "object": Value is immutable"#)),
        (
            "mrd/things.example.org",
            r#"{"spec":{"state":"Inactive"}}"#,
            invalid("ManagedResourceDefinition", "things.example.org", r#"spec.state: Invalid value: "string": state cannot be changed once it becomes Active"#),
        ),
        (
            "mrd/things.example.org",
            r#"{"spec":{"group":"other.example.org"}}"#,
            invalid("ManagedResourceDefinition", "things.example.org", r#"spec.group: Invalid value: "string": Value is immutable"#),
        ),
        (
            "watchoperation/on-change",
            r#"{"spec":{"watch":{"kind":"Secret"}}}"#,
            invalid("WatchOperation", "on-change", r#"spec.watch.kind: Invalid value: "string": kind is immutable"#),
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(target, patch, expected)| {
            unexpected_answer(&format!("{target} {patch}"), server.kubectl_try(&["patch", target, "--type=merge", "-p", patch], ""), expected)
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `kubectl get` of each kind (by its short name where it has one) prints Crossplane's columns;
/// packages get Crossplane's defaults, the `default` runtime config among them.
#[test]
fn kubectl_get_prints_crossplanes_columns() {
    let server = Server::start_with(&["--enable-operations"]);
    server.kubectl(&["create", "configmap", "settings", "-n", "default"]);
    for (_, manifest) in valid() {
        server.apply(&manifest);
    }
    // ProviderRevisions and FunctionRevisions come from their packages.
    within(T, "the packages' revisions", || {
        ["providerrevisions", "functionrevisions"].iter().all(|plural| server.get(&[plural]).is_some_and(|l| l["items"].as_array().is_some_and(|i| !i.is_empty())))
    });
    let revisions = "NAME HEALTHY RUNTIME-HEALTHY RUNTIME-ACTIVE IMAGE STATE AGE";
    let wide_revisions = "NAME HEALTHY RUNTIME-HEALTHY RUNTIME-ACTIVE REVISION IMAGE STATE DEP-FOUND DEP-INSTALLED AGE";
    let headers: &[(&[&str], &str)] = &[
        (&["xrd"], "NAME ESTABLISHED OFFERED AGE"),
        (&["comp"], "NAME XR-KIND XR-APIVERSION AGE"),
        (&["comprev"], "NAME REVISION XR-KIND XR-APIVERSION AGE"),
        (&["envcfg"], "NAME AGE"),
        (&["usages.apiextensions.crossplane.io"], "NAME DETAILS READY AGE"),
        (&["usages.protection.crossplane.io", "-n", "default"], "NAME DETAILS READY AGE"),
        (&["clusterusages"], "NAME DETAILS READY AGE"),
        (&["providers"], "NAME INSTALLED HEALTHY PACKAGE AGE"),
        (&["functions"], "NAME INSTALLED HEALTHY PACKAGE AGE"),
        (&["configurations"], "NAME INSTALLED HEALTHY PACKAGE AGE"),
        (&["providerrevisions"], revisions),
        (&["functionrevisions", "-o", "wide"], wide_revisions),
        (&["configurationrevisions"], "NAME HEALTHY IMAGE STATE AGE"),
        (&["configurationrevisions", "-o", "wide"], "NAME HEALTHY REVISION IMAGE STATE DEP-FOUND DEP-INSTALLED AGE"),
        (&["deploymentruntimeconfigs"], "NAME AGE"),
        (&["mrd"], "NAME STATE ESTABLISHED AGE"),
        (&["mrds"], "NAME STATE ESTABLISHED AGE"),
        (&["mrap"], "NAME AGE"),
        (&["ops"], "NAME SYNCED SUCCEEDED AGE"),
        (&["cronops"], "NAME SCHEDULE SYNCED SCHEDULING LAST SCHEDULE LAST SUCCESS AGE"),
        (&["watchops"], "NAME KIND COUNT SYNCED WATCHING LAST SCHEDULE LAST SUCCESS AGE"),
    ];
    let mut wrong = Vec::new();
    for (args, expected) in headers {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        let out = server.kubectl(&all);
        let header = out.lines().next().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        if header != *expected {
            wrong.push(format!("kubectl get {}: {header:?}, want {expected:?}", args.join(" ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Defaults from the CRDs: the DeploymentRuntimeConfig `default` exists and is referenced.
    assert!(server.get(&["deploymentruntimeconfig", "default"]).is_some(), "the core creates the default runtime config");
    let function = server.get(&["function", "function-dummy"]).unwrap();
    assert_eq!(
        function["spec"]["runtimeConfigRef"],
        serde_json::json!({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig", "name": "default"})
    );
    assert_eq!(function["spec"]["revisionActivationPolicy"], "Automatic");
    assert_eq!(function["spec"]["revisionHistoryLimit"], 1);
    // An EnvironmentConfig is in the crossplane category, as Crossplane's is.
    let crossplane = server.kubectl(&["get", "crossplane", "-o", "name"]);
    assert!(crossplane.lines().any(|l| l == "environmentconfig.apiextensions.crossplane.io/settings"), "{crossplane}");
}
