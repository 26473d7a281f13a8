//! Crossplane's core CRDs on oxplane's own API server: they are accepted and established,
//! discovery and `kubectl get` see their short names, categories and columns, and the YAML
//! users already write for XRDs, Compositions, EnvironmentConfigs, Usages and packages is
//! accepted, defaulted, kept or rejected (with Crossplane's messages) as Crossplane does.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use oxplane_apiserver::server::{Server, ServerConfig};
use oxplane_composition::crds::core_crds;
use serde_json::{Value, json};

/// An in-process API server with every core CRD created and established.
struct Plane {
    client: kube::Client,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<Result<(), oxplane_apiserver::ServeError>>,
    _dir: tempfile::TempDir,
}

impl Plane {
    async fn start() -> Plane {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(ServerConfig::new(dir.path().to_path_buf(), "127.0.0.1:0")).await.unwrap();
        let client = kube::Client::new(server.local_service(), "default");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        let crds = crd_api(&client);
        // Crossplane's CRDs, and those of Operations (served with --enable-operations).
        let all: Vec<Value> = core_crds().unwrap().into_iter().chain(oxplane_composition::crds::operations_crds().unwrap()).collect();
        for crd in all.clone() {
            let name = crd["metadata"]["name"].as_str().unwrap().to_string();
            let crd = serde_json::from_value(crd).unwrap();
            crds.create(&PostParams::default(), &crd).await.unwrap_or_else(|e| panic!("creating {name}: {e}"));
        }
        for crd in all {
            wait_established(&crds, crd["metadata"]["name"].as_str().unwrap()).await;
        }
        Plane { client, stop, serving, _dir: dir }
    }

    /// The API of one kind, cluster-wide or in `default` when namespaced.
    fn api(&self, api_version: &str, kind: &str, plural: &str, namespaced: bool) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap();
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        if namespaced {
            Api::namespaced_with(self.client.clone(), "default", &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        }
    }

    /// Creates a YAML object through the API of its apiVersion.
    async fn create(&self, plural: &str, yaml: &str) -> Result<Value, kube::Error> {
        let object: Value = serde_saphyr::from_str(yaml).unwrap();
        let namespaced = object["metadata"]["namespace"].is_string();
        let api = self.api(object["apiVersion"].as_str().unwrap(), object["kind"].as_str().unwrap(), plural, namespaced);
        let created = api.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await?;
        Ok(serde_json::to_value(created).unwrap())
    }

    /// GET as a server-side Table, as kubectl asks for it.
    async fn table(&self, path: &str) -> Value {
        let mut request = kube::core::Request::new(path).list(&ListParams::default()).unwrap();
        request.headers_mut().insert("accept", "application/json;as=Table;v=v1;g=meta.k8s.io".parse().unwrap());
        self.client.request::<Value>(request).await.unwrap()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.serving.await.unwrap().unwrap();
    }
}

fn crd_api(client: &kube::Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

async fn wait_established(crds: &Api<CustomResourceDefinition>, name: &str) {
    for _ in 0..100 {
        let crd = crds.get(name).await.unwrap();
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} never became Established");
}

/// The message of a 422 Invalid rejection.
fn invalid(result: Result<Value, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{}", status.message);
            status.message
        }
        other => panic!("expected a 422 Invalid, got {other:?}"),
    }
}

/// Column names of a Table, and the cells of its row named `name`.
fn table_row(table: &Value, name: &str) -> (Vec<String>, Vec<Value>) {
    let columns = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect();
    let row = table["rows"].as_array().unwrap().iter().find(|r| r["cells"][0] == name).unwrap_or_else(|| panic!("no row {name} in {table}"));
    (columns, row["cells"].as_array().unwrap().clone())
}

fn condition(kind: &str, status: &str, reason: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "lastTransitionTime": "2026-01-02T03:04:05Z"})
}

/// Replaces an object's status through the status subresource.
async fn set_status(api: &Api<DynamicObject>, name: &str, status: Value) -> Value {
    let patch = Patch::Merge(json!({"status": status}));
    serde_json::to_value(api.patch_status(name, &PatchParams::default(), &patch).await.unwrap()).unwrap()
}

#[tokio::test]
async fn discovery_shows_names_categories_scopes_and_versions() {
    let plane = Plane::start().await;
    // (group/version, plural, shortNames, categories, namespaced)
    type Expected<'a> = (&'a str, &'a str, &'a [&'a str], &'a [&'a str], bool);
    let expected: &[Expected] = &[
        ("apiextensions.crossplane.io/v1", "compositeresourcedefinitions", &["xrd", "xrds"], &["crossplane"], false),
        ("apiextensions.crossplane.io/v2", "compositeresourcedefinitions", &["xrd", "xrds"], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1", "compositions", &["comp"], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1", "compositionrevisions", &["comprev"], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1beta1", "environmentconfigs", &["envcfg"], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1alpha1", "usages", &[], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1beta1", "usages", &[], &["crossplane"], false),
        ("protection.crossplane.io/v1beta1", "usages", &[], &["crossplane"], true),
        ("protection.crossplane.io/v1beta1", "clusterusages", &[], &["crossplane"], false),
        ("pkg.crossplane.io/v1", "providers", &[], &["crossplane", "pkg"], false),
        ("pkg.crossplane.io/v1", "providerrevisions", &[], &["crossplane", "pkgrev"], false),
        ("pkg.crossplane.io/v1", "functions", &[], &["crossplane", "pkg"], false),
        ("pkg.crossplane.io/v1beta1", "functions", &[], &["crossplane", "pkg"], false),
        ("pkg.crossplane.io/v1", "functionrevisions", &[], &["crossplane", "pkgrev"], false),
        ("pkg.crossplane.io/v1beta1", "functionrevisions", &[], &["crossplane", "pkgrev"], false),
        ("pkg.crossplane.io/v1", "configurations", &[], &["crossplane", "pkg"], false),
        ("pkg.crossplane.io/v1", "configurationrevisions", &[], &["crossplane", "pkgrev"], false),
        ("pkg.crossplane.io/v1beta1", "deploymentruntimeconfigs", &[], &["crossplane"], false),
        ("pkg.crossplane.io/v1beta1", "locks", &[], &[], false),
        ("pkg.crossplane.io/v1beta1", "imageconfigs", &[], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1alpha1", "managedresourcedefinitions", &["mrd", "mrds"], &["crossplane"], false),
        ("apiextensions.crossplane.io/v1alpha1", "managedresourceactivationpolicies", &["mrap"], &["crossplane"], false),
    ];
    for (group_version, plural, short_names, categories, namespaced) in expected {
        let list = plane.client.list_api_group_resources(group_version).await.unwrap();
        let resource = list.resources.iter().find(|r| r.name == *plural).unwrap_or_else(|| panic!("{group_version} {plural}"));
        assert_eq!(resource.short_names.clone().unwrap_or_default(), *short_names, "{group_version} {plural}");
        assert_eq!(resource.categories.clone().unwrap_or_default(), *categories, "{group_version} {plural}");
        assert_eq!(resource.namespaced, *namespaced, "{group_version} {plural}");
        let has_status = list.resources.iter().any(|r| r.name == format!("{plural}/status"));
        let expect_status = !matches!(*plural, "compositions" | "environmentconfigs" | "deploymentruntimeconfigs" | "imageconfigs");
        assert_eq!(has_status, expect_status, "{group_version} {plural}/status");
    }

    // `kubectl get crossplane` expands the category over every group.
    let discovery = kube::discovery::Discovery::new(plane.client.clone()).run().await.unwrap();
    let mut in_category = BTreeSet::new();
    for group in discovery.groups() {
        for version in group.versions() {
            let list = plane.client.list_api_group_resources(&format!("{}/{version}", group.name())).await.unwrap();
            for resource in list.resources {
                if resource.categories.unwrap_or_default().iter().any(|c| c == "crossplane") {
                    in_category.insert(format!("{}.{}", resource.name, group.name()));
                }
            }
        }
    }
    let expected: BTreeSet<String> = [
        "compositeresourcedefinitions.apiextensions.crossplane.io",
        "compositions.apiextensions.crossplane.io",
        "compositionrevisions.apiextensions.crossplane.io",
        "environmentconfigs.apiextensions.crossplane.io",
        "usages.apiextensions.crossplane.io",
        "usages.protection.crossplane.io",
        "clusterusages.protection.crossplane.io",
        "providers.pkg.crossplane.io",
        "providerrevisions.pkg.crossplane.io",
        "functions.pkg.crossplane.io",
        "functionrevisions.pkg.crossplane.io",
        "configurations.pkg.crossplane.io",
        "configurationrevisions.pkg.crossplane.io",
        "deploymentruntimeconfigs.pkg.crossplane.io",
        "imageconfigs.pkg.crossplane.io",
        "managedresourcedefinitions.apiextensions.crossplane.io",
        "managedresourceactivationpolicies.apiextensions.crossplane.io",
        // Operations (this plane serves them, as --enable-operations does).
        "operations.ops.crossplane.io",
        "cronoperations.ops.crossplane.io",
        "watchoperations.ops.crossplane.io",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(in_category, expected);

    // The v1 XRD version carries Crossplane's deprecation warning.
    let xrd_crd = crd_api(&plane.client).get("compositeresourcedefinitions.apiextensions.crossplane.io").await.unwrap();
    let v1 = xrd_crd.spec.versions.iter().find(|v| v.name == "v1").unwrap();
    assert_eq!(v1.deprecated, Some(true));
    assert_eq!(
        v1.deprecation_warning.as_deref(),
        Some("CompositeResourceDefinition v1 is deprecated and will be removed in a future release; consider migrating to v2")
    );
    assert!(v1.storage);
    plane.stop().await;
}

const LEGACY_XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xpostgresqlinstances.database.example.org
spec:
  group: database.example.org
  names:
    kind: XPostgreSQLInstance
    plural: xpostgresqlinstances
  claimNames:
    kind: PostgreSQLInstance
    plural: postgresqlinstances
  connectionSecretKeys:
    - username
    - password
  versions:
    - name: v1alpha1
      served: true
      referenceable: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                parameters:
                  type: object
                  properties:
                    storageGB:
                      type: integer
                  required:
                    - storageGB
              required:
                - parameters
"#;

const MODERN_XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xbuckets.storage.example.org
spec:
  group: storage.example.org
  names:
    kind: XBucket
    plural: xbuckets
  versions:
    - name: v1
      served: true
      referenceable: true
      additionalPrinterColumns:
        - name: REGION
          type: string
          jsonPath: .spec.region
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                region:
                  type: string
"#;

#[tokio::test]
async fn xrds_default_by_version_and_reject_what_each_version_forbids() {
    let plane = Plane::start().await;

    // v1 with claims: LegacyCluster and the v1 defaults; the user's schema is kept whole.
    let legacy = plane.create("compositeresourcedefinitions", LEGACY_XRD).await.unwrap();
    assert_eq!(legacy["spec"]["scope"], "LegacyCluster");
    assert_eq!(legacy["spec"]["defaultCompositeDeletePolicy"], "Background");
    assert_eq!(legacy["spec"]["defaultCompositionUpdatePolicy"], "Automatic");
    assert_eq!(legacy["spec"]["claimNames"]["kind"], "PostgreSQLInstance");
    assert_eq!(legacy["spec"]["connectionSecretKeys"], json!(["username", "password"]));
    let schema = &legacy["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert_eq!(schema["properties"]["spec"]["properties"]["parameters"]["required"], json!(["storageGB"]));
    // The same object read through v2.
    let v2 = plane.api("apiextensions.crossplane.io/v2", "CompositeResourceDefinition", "compositeresourcedefinitions", false);
    let through_v2 = serde_json::to_value(v2.get("xpostgresqlinstances.database.example.org").await.unwrap()).unwrap();
    assert_eq!(through_v2["apiVersion"], "apiextensions.crossplane.io/v2");
    assert_eq!(through_v2["spec"]["scope"], "LegacyCluster");

    // v2 without a scope is Namespaced, with no delete policy default.
    let modern = plane.create("compositeresourcedefinitions", MODERN_XRD).await.unwrap();
    assert_eq!(modern["spec"]["scope"], "Namespaced");
    assert!(modern["spec"].get("defaultCompositeDeletePolicy").is_none(), "{modern}");
    assert_eq!(modern["spec"]["versions"][0]["additionalPrinterColumns"][0]["name"], "REGION");

    // v1 claims need LegacyCluster.
    let namespaced_claims = LEGACY_XRD
        .replace("xpostgresqlinstances", "xredis")
        .replace("XPostgreSQLInstance", "XRedis")
        .replace("  claimNames:", "  scope: Namespaced\n  claimNames:");
    let message = invalid(plane.create("compositeresourcedefinitions", &namespaced_claims).await);
    assert!(message.contains(r#"spec: Invalid value: "object": Only LegacyCluster composite resources can offer claims"#), "{message}");

    // v2 refuses claims and XR connection secrets, whatever the scope.
    let v2_claims = MODERN_XRD.replace("xbuckets", "xclaimed").replace("  versions:", "  scope: Cluster\n  claimNames:\n    kind: Bucket\n    plural: buckets\n  versions:");
    let message = invalid(plane.create("compositeresourcedefinitions", &v2_claims).await);
    assert!(message.contains(r#"spec: Invalid value: "object": Claims aren't supported in apiextensions.crossplane.io/v2"#), "{message}");
    let v2_secrets = MODERN_XRD.replace("xbuckets", "xsecrets").replace("  versions:", "  connectionSecretKeys:\n    - url\n  versions:");
    let message = invalid(plane.create("compositeresourcedefinitions", &v2_secrets).await);
    assert!(message.contains("XR connection secrets aren't supported in apiextensions.crossplane.io/v2"), "{message}");
    assert!(!message.contains("Claims aren't supported"), "{message}");

    // LegacyCluster is not a v2 scope.
    let v2_legacy = MODERN_XRD.replace("xbuckets", "xlegacies").replace("  versions:", "  scope: LegacyCluster\n  versions:");
    let message = invalid(plane.create("compositeresourcedefinitions", &v2_legacy).await);
    assert!(message.contains(r#"spec.scope: Unsupported value: "LegacyCluster": supported values: "Namespaced", "Cluster""#), "{message}");

    // A webhook conversion needs its webhook.
    let webhook = MODERN_XRD.replace("xbuckets", "xqueues").replace("XBucket", "XQueue").replace("  versions:", "  conversion:\n    strategy: Webhook\n  versions:");
    let message = invalid(plane.create("compositeresourcedefinitions", &webhook).await);
    assert!(message.contains("spec.conversion: Invalid value: \"object\": Webhook configuration is required when conversion strategy is Webhook"), "{message}");

    // The XRD is named after the CRD it generates.
    let misnamed = MODERN_XRD.replace("name: xbuckets.storage.example.org", "name: buckets.storage.example.org");
    let message = invalid(plane.create("compositeresourcedefinitions", &misnamed).await);
    assert!(message.contains("metadata.name must be spec.names.plural + '.' + spec.group"), "{message}");

    // Plural and singular names must be lowercase (an uppercase plural also misnames the XRD).
    let upper = MODERN_XRD.replace("name: xbuckets", "name: xtables").replace("    plural: xbuckets", "    plural: XTables\n    singular: XTable");
    let message = invalid(plane.create("compositeresourcedefinitions", &upper).await);
    assert!(message.contains("spec.names: Invalid value: \"object\": Plural name must be lowercase"), "{message}");
    assert!(message.contains("spec.names: Invalid value: \"object\": Singular name must be lowercase"), "{message}");

    // The group is immutable; claim names may be added once but not changed.
    let modern_api = plane.api("apiextensions.crossplane.io/v2", "CompositeResourceDefinition", "compositeresourcedefinitions", false);
    let regroup = Patch::Merge(json!({"spec": {"group": "other.example.org"}}));
    let result = modern_api.patch("xbuckets.storage.example.org", &PatchParams::default(), &regroup).await;
    let message = invalid(result.map(|o| serde_json::to_value(o).unwrap()));
    assert!(message.contains("spec.group: Invalid value: \"string\": Value is immutable"), "{message}");

    let unclaimed = LEGACY_XRD.replace("xpostgresqlinstances", "xmysqls").replace("XPostgreSQLInstance", "XMySQL").replace(
        "  claimNames:\n    kind: PostgreSQLInstance\n    plural: postgresqlinstances\n",
        "",
    );
    plane.create("compositeresourcedefinitions", &unclaimed).await.unwrap();
    let v1_api = plane.api("apiextensions.crossplane.io/v1", "CompositeResourceDefinition", "compositeresourcedefinitions", false);
    let add_claims = Patch::Merge(json!({"spec": {"claimNames": {"kind": "MySQL", "plural": "mysqls"}}}));
    let added = v1_api.patch("xmysqls.database.example.org", &PatchParams::default(), &add_claims).await.unwrap();
    assert_eq!(added.data["spec"]["claimNames"]["kind"], "MySQL");
    let rename = Patch::Merge(json!({"spec": {"claimNames": {"kind": "MyDB"}}}));
    let result = v1_api.patch("xmysqls.database.example.org", &PatchParams::default(), &rename).await;
    let message = invalid(result.map(|o| serde_json::to_value(o).unwrap()));
    assert!(message.contains("spec.claimNames: Invalid value: \"object\": Value is immutable"), "{message}");
    let remove = Patch::Merge(json!({"spec": {"claimNames": null}}));
    let result = v1_api.patch("xmysqls.database.example.org", &PatchParams::default(), &remove).await;
    let message = invalid(result.map(|o| serde_json::to_value(o).unwrap()));
    assert!(message.contains("claimNames may be added but not changed or removed"), "{message}");

    // Status: conditions keyed by type, controllers, and the ESTABLISHED/OFFERED columns.
    let status = json!({
        "conditions": [condition("Established", "True", "WatchingCompositeResource"), condition("Offered", "True", "WatchingCompositeResourceClaim")],
        "controllers": {"compositeResourceType": {"apiVersion": "database.example.org/v1alpha1", "kind": "XPostgreSQLInstance"},
                        "compositeResourceClaimType": {"apiVersion": "database.example.org/v1alpha1", "kind": "PostgreSQLInstance"}},
    });
    let written = set_status(&v1_api, "xpostgresqlinstances.database.example.org", status.clone()).await;
    assert_eq!(written["status"]["controllers"], status["controllers"]);
    let table = plane.table("/apis/apiextensions.crossplane.io/v1/compositeresourcedefinitions").await;
    let (columns, cells) = table_row(&table, "xpostgresqlinstances.database.example.org");
    assert_eq!(columns, ["Name", "ESTABLISHED", "OFFERED", "AGE"]);
    assert_eq!((&cells[1], &cells[2]), (&json!("True"), &json!("True")));
    plane.stop().await;
}

const PIPELINE_COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xbuckets-aws
  labels:
    provider: aws
spec:
  compositeTypeRef:
    apiVersion: storage.example.org/v1
    kind: XBucket
  pipeline:
    - step: render-templates
      functionRef:
        name: function-go-templating
      input:
        apiVersion: gotemplating.fn.crossplane.io/v1beta1
        kind: GoTemplate
        source: Inline
        inline:
          template: |
            apiVersion: s3.aws.m.upbound.io/v1beta1
            kind: Bucket
            spec:
              forProvider:
                region: {{ .observed.composite.resource.spec.region }}
    - step: patch-and-transform
      functionRef:
        name: function-patch-and-transform
      input:
        apiVersion: pt.fn.crossplane.io/v1beta1
        kind: Resources
        resources:
          - name: policy
            base:
              apiVersion: s3.aws.m.upbound.io/v1beta1
              kind: BucketPolicy
              spec:
                forProvider:
                  region: us-east-1
            patches:
              - type: FromCompositeFieldPath
                fromFieldPath: spec.region
                toFieldPath: spec.forProvider.region
      credentials:
        - name: aws
          source: Secret
          secretRef:
            namespace: crossplane-system
            name: aws-creds
"#;

const LEGACY_COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xpostgresqlinstances-legacy
spec:
  compositeTypeRef:
    apiVersion: database.example.org/v1alpha1
    kind: XPostgreSQLInstance
  mode: Resources
  writeConnectionSecretsToNamespace: crossplane-system
  patchSets:
    - name: common
      patches:
        - type: FromCompositeFieldPath
          fromFieldPath: spec.parameters.region
          toFieldPath: spec.forProvider.region
  resources:
    - name: instance
      base:
        apiVersion: rds.aws.upbound.io/v1beta1
        kind: Instance
        spec:
          forProvider:
            instanceClass: db.t3.micro
            engine: postgres
          writeConnectionSecretToRef:
            namespace: crossplane-system
      patches:
        - type: PatchSet
          patchSetName: common
        - type: FromCompositeFieldPath
          fromFieldPath: metadata.uid
          toFieldPath: spec.writeConnectionSecretToRef.name
          transforms:
            - type: string
              string:
                type: Format
                fmt: "%s-postgresql"
        - type: FromCompositeFieldPath
          fromFieldPath: spec.parameters.storageGB
          toFieldPath: spec.forProvider.allocatedStorage
      connectionDetails:
        - name: username
          fromConnectionSecretKey: username
        - name: port
          type: FromValue
          value: "5432"
      readinessChecks:
        - type: MatchString
          fieldPath: status.atProvider.dbInstanceStatus
          matchString: available
  environment:
    environmentConfigs:
      - type: Reference
        ref:
          name: example-environment
    patches:
      - type: FromEnvironmentFieldPath
        fromFieldPath: region
        toFieldPath: spec.parameters.region
  publishConnectionDetailsWithStoreConfigRef:
    name: default
"#;

#[tokio::test]
async fn compositions_accept_pipelines_and_refuse_the_legacy_resources_mode() {
    let plane = Plane::start().await;

    // A pipeline: inputs and credentials are kept as written.
    let pipeline = plane.create("compositions", PIPELINE_COMPOSITION).await.unwrap();
    let written: Value = serde_saphyr::from_str(PIPELINE_COMPOSITION).unwrap();
    assert_eq!(pipeline["spec"]["pipeline"], written["spec"]["pipeline"]);

    // Pipeline mode needs a pipeline, whether the mode is written or defaulted.
    let no_pipeline = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: empty\n\
                       spec:\n  compositeTypeRef:\n    apiVersion: storage.example.org/v1\n    kind: XBucket\n";
    let message = invalid(plane.create("compositions", no_pipeline).await);
    assert!(message.contains(r#"spec: Invalid value: "object": an array of pipeline steps is required in Pipeline mode"#), "{message}");
    let explicit = no_pipeline.replace("    kind: XBucket\n", "    kind: XBucket\n  mode: Pipeline\n");
    let message = invalid(plane.create("compositions", &explicit).await);
    assert!(message.contains("an array of pipeline steps is required in Pipeline mode"), "{message}");
    let message = invalid(plane.create("compositions", &no_pipeline.replace("    kind: XBucket\n", "    kind: XBucket\n  mode: Native\n")).await);
    assert!(message.contains(r#"spec.mode: Unsupported value: "Native": supported values: "Pipeline""#), "{message}");
    // The mode defaults to Pipeline.
    assert_eq!(pipeline["spec"]["mode"], "Pipeline");

    // The legacy Resources mode is refused, as Crossplane v2's CRD refuses it, written or not:
    // left out, the mode defaults to Pipeline, which needs a pipeline.
    let message = invalid(plane.create("compositions", LEGACY_COMPOSITION).await);
    assert!(message.contains(r#"spec.mode: Unsupported value: "Resources": supported values: "Pipeline""#), "{message}");
    let unmoded = LEGACY_COMPOSITION.replace("  mode: Resources\n", "").replace("name: xpostgresqlinstances-legacy", "name: xpostgresqlinstances-unmoded");
    assert_ne!(unmoded, LEGACY_COMPOSITION);
    let message = invalid(plane.create("compositions", &unmoded).await);
    assert!(message.contains(r#"spec: Invalid value: "object": an array of pipeline steps is required in Pipeline mode"#), "{message}");

    // A Secret credential needs its secretRef.
    let no_secret_ref = PIPELINE_COMPOSITION
        .replace("name: xbuckets-aws", "name: xbuckets-nosecret")
        .replace("          secretRef:\n            namespace: crossplane-system\n            name: aws-creds\n", "");
    let message = invalid(plane.create("compositions", &no_secret_ref).await);
    assert!(
        message.contains(r#"spec.pipeline[1].credentials[0]: Invalid value: "object": the Secret source requires a secretRef"#),
        "{message}"
    );

    // Steps are a map keyed by step name, and at most 99 long.
    let duplicate = PIPELINE_COMPOSITION.replace("name: xbuckets-aws", "name: dup").replace("step: patch-and-transform", "step: render-templates");
    let message = invalid(plane.create("compositions", &duplicate).await);
    assert!(message.contains(r#"spec.pipeline[1]: Duplicate value: {"step":"render-templates"}"#), "{message}");
    let mut long: Value = serde_saphyr::from_str(PIPELINE_COMPOSITION).unwrap();
    long["metadata"]["name"] = json!("long");
    long["spec"]["pipeline"] = (0..100).map(|i| json!({"step": format!("s{i}"), "functionRef": {"name": "f"}})).collect();
    let api = plane.api("apiextensions.crossplane.io/v1", "Composition", "compositions", false);
    let result = api.create(&PostParams::default(), &serde_json::from_value(long).unwrap()).await;
    let message = invalid(result.map(|o| serde_json::to_value(o).unwrap()));
    assert!(message.contains("spec.pipeline: Too many: 100: must have at most 99 items"), "{message}");

    // compositeTypeRef cannot change.
    let retype = Patch::Merge(json!({"spec": {"compositeTypeRef": {"kind": "XQueue"}}}));
    let result = api.patch("xbuckets-aws", &PatchParams::default(), &retype).await;
    let message = invalid(result.map(|o| serde_json::to_value(o).unwrap()));
    assert!(message.contains("spec.compositeTypeRef: Invalid value: \"object\": Value is immutable"), "{message}");

    // kubectl get compositions.
    let table = plane.table("/apis/apiextensions.crossplane.io/v1/compositions").await;
    let (columns, cells) = table_row(&table, "xbuckets-aws");
    assert_eq!(columns, ["Name", "XR-KIND", "XR-APIVERSION", "AGE"]);
    assert_eq!((&cells[1], &cells[2]), (&json!("XBucket"), &json!("storage.example.org/v1")));

    // A revision of the pipeline composition, as the composition controller writes it.
    let mut revision = written_revision(&pipeline);
    revision["spec"]["revision"] = json!(1);
    let revisions = plane.api("apiextensions.crossplane.io/v1", "CompositionRevision", "compositionrevisions", false);
    let created = revisions.create(&PostParams::default(), &serde_json::from_value(revision).unwrap()).await.unwrap();
    assert_eq!(created.data["spec"]["pipeline"], pipeline["spec"]["pipeline"]);
    assert_eq!(created.data["spec"]["revision"], 1);
    let status = json!({"conditions": [condition("Synced", "True", "ReconcileSuccess"), condition("ValidPipeline", "True", "ValidPipeline")]});
    let written = set_status(&revisions, "xbuckets-aws-1a2b3c4", status.clone()).await;
    assert_eq!(written["status"], status);
    let table = plane.table("/apis/apiextensions.crossplane.io/v1/compositionrevisions").await;
    let (columns, cells) = table_row(&table, "xbuckets-aws-1a2b3c4");
    assert_eq!(columns, ["Name", "REVISION", "XR-KIND", "XR-APIVERSION", "AGE"]);
    assert_eq!(&cells[1..3], &[json!(1), json!("XBucket")]);
    plane.stop().await;
}

/// A CompositionRevision of `composition` (without its number).
fn written_revision(composition: &Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositionRevision",
        "metadata": {"name": "xbuckets-aws-1a2b3c4", "labels": {
            "crossplane.io/composition-name": "xbuckets-aws", "crossplane.io/composition-hash": "1a2b3c4d5e6f"}},
        "spec": composition["spec"].clone(),
    })
}

#[tokio::test]
async fn environment_configs_keep_their_data() {
    let plane = Plane::start().await;
    let yaml = r#"
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata:
  name: example-environment
data:
  region: eu-west-1
  network:
    vpc: vpc-0a1b
    subnets:
      - id: subnet-1
        zone: eu-west-1a
      - id: subnet-2
        zone: eu-west-1b
  replicas: 3
  enabled: true
spec:
  ignored: true
"#;
    let created = plane.create("environmentconfigs", yaml).await.unwrap();
    let written: Value = serde_saphyr::from_str(yaml).unwrap();
    assert_eq!(created["data"], written["data"]);
    assert!(created.get("spec").is_none(), "an EnvironmentConfig has no spec: {created}");
    let table = plane.table("/apis/apiextensions.crossplane.io/v1beta1/environmentconfigs").await;
    let (columns, _) = table_row(&table, "example-environment");
    assert_eq!(columns, ["Name", "AGE"]);
    plane.stop().await;
}

#[tokio::test]
async fn usages_of_all_three_kinds_need_a_user_or_a_reason() {
    let plane = Plane::start().await;

    // The deprecated cluster-scoped Usage, written as v1beta1 and read as v1alpha1.
    let legacy = r#"
apiVersion: apiextensions.crossplane.io/v1beta1
kind: Usage
metadata:
  name: cluster-uses-vpc
  annotations:
    crossplane.io/usage-details: Cluster/prod uses VPC/main
spec:
  of:
    apiVersion: ec2.aws.upbound.io/v1beta1
    kind: VPC
    resourceRef:
      name: main
  by:
    apiVersion: eks.aws.upbound.io/v1beta1
    kind: Cluster
    resourceSelector:
      matchLabels:
        env: prod
      matchControllerRef: true
  replayDeletion: true
"#;
    let created = plane.create("usages", legacy).await.unwrap();
    assert_eq!(created["spec"]["by"]["resourceSelector"]["matchControllerRef"], true);
    let alpha = plane.api("apiextensions.crossplane.io/v1alpha1", "Usage", "usages", false);
    assert_eq!(alpha.get("cluster-uses-vpc").await.unwrap().data["spec"]["replayDeletion"], true);
    let status = json!({"conditions": [condition("Ready", "True", "Available")]});
    set_status(&alpha, "cluster-uses-vpc", status).await;
    let table = plane.table("/apis/apiextensions.crossplane.io/v1beta1/usages").await;
    let (columns, cells) = table_row(&table, "cluster-uses-vpc");
    assert_eq!(columns, ["Name", "DETAILS", "READY", "AGE"]);
    assert_eq!((&cells[1], &cells[2]), (&json!("Cluster/prod uses VPC/main"), &json!("True")));

    // Neither a user nor a reason: refused, in every group.
    let bare = legacy.replace("  by:\n    apiVersion: eks.aws.upbound.io/v1beta1\n    kind: Cluster\n    resourceSelector:\n      matchLabels:\n        env: prod\n      matchControllerRef: true\n", "");
    let message = invalid(plane.create("usages", &bare.replace("cluster-uses-vpc", "bare")).await);
    assert!(message.contains(r#"spec: Invalid value: "object": either "spec.by" or "spec.reason" must be specified."#), "{message}");
    let cluster_usage = bare.replace("apiextensions.crossplane.io/v1beta1", "protection.crossplane.io/v1beta1").replace("kind: Usage", "kind: ClusterUsage");
    let message = invalid(plane.create("clusterusages", &cluster_usage).await);
    assert!(message.contains(r#"either "spec.by" or "spec.reason" must be specified."#), "{message}");
    let with_reason = cluster_usage.replace("  replayDeletion: true\n", "  reason: the production VPC must never be deleted\n");
    let created = plane.create("clusterusages", &with_reason).await.unwrap();
    assert_eq!(created["spec"]["reason"], "the production VPC must never be deleted");

    // Neither a reference nor a selector for the used resource.
    let unresolvable = with_reason.replace("    resourceRef:\n      name: main\n", "").replace("cluster-uses-vpc", "unresolvable");
    let message = invalid(plane.create("clusterusages", &unresolvable).await);
    assert!(message.contains(r#"spec.of: Invalid value: "object": either a resource reference or a resource selector should be set."#), "{message}");

    // The namespaced Usage: another namespace's resource only with a using resource.
    let namespaced = r#"
apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: app-uses-database
  namespace: default
  annotations:
    crossplane.io/usage-details: Deployment/app uses Instance/shared-db in namespace databases
spec:
  of:
    apiVersion: rds.aws.m.upbound.io/v1beta1
    kind: Instance
    resourceRef:
      name: shared-db
      namespace: databases
  by:
    apiVersion: apps/v1
    kind: Deployment
    resourceRef:
      name: app
"#;
    let created = plane.create("usages", namespaced).await.unwrap();
    assert_eq!(created["spec"]["of"]["resourceRef"]["namespace"], "databases");
    let table = plane.table("/apis/protection.crossplane.io/v1beta1/namespaces/default/usages").await;
    let (columns, cells) = table_row(&table, "app-uses-database");
    assert_eq!(columns, ["Name", "DETAILS", "READY", "AGE"]);
    assert_eq!(cells[1], "Deployment/app uses Instance/shared-db in namespace databases");
    let reason_only = namespaced.replace(
        "  by:\n    apiVersion: apps/v1\n    kind: Deployment\n    resourceRef:\n      name: app\n",
        "  reason: shared by every team\n",
    );
    let message = invalid(plane.create("usages", &reason_only.replace("app-uses-database", "cross")).await);
    assert!(message.contains(r#"cross-namespace "spec.of" is not allowed without "spec.by" resource."#), "{message}");
    let by_selector = reason_only.replace("    resourceRef:\n      name: shared-db\n      namespace: databases\n", "    resourceSelector:\n      namespace: databases\n      matchLabels:\n        db: shared\n");
    let message = invalid(plane.create("usages", &by_selector.replace("app-uses-database", "cross-selector")).await);
    assert!(message.contains(r#"cross-namespace "spec.of" is not allowed without "spec.by" resource."#), "{message}");
    let same_namespace = reason_only.replace("      namespace: databases\n", "").replace("app-uses-database", "local");
    plane.create("usages", &same_namespace).await.unwrap();
    plane.stop().await;
}

#[tokio::test]
async fn packages_are_defaulted_and_served_in_every_version() {
    let plane = Plane::start().await;

    // A Provider with only its package gets the documented defaults.
    let provider = r#"
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-aws-s3
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0
"#;
    let created = plane.create("providers", provider).await.unwrap();
    assert_eq!(
        created["spec"],
        json!({
            "package": "xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0",
            "revisionActivationPolicy": "Automatic",
            "revisionHistoryLimit": 1,
            "packagePullPolicy": "IfNotPresent",
            "ignoreCrossplaneConstraints": false,
            "skipDependencyResolution": false,
            "runtimeConfigRef": {"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig", "name": "default"},
        })
    );
    // Crossplane's CRD has no enum for the activation policy.
    let other = provider.replace("name: provider-aws-s3", "name: provider-other").replace("  package:", "  revisionActivationPolicy: Sometimes\n  package:");
    assert_eq!(plane.create("providers", &other).await.unwrap()["spec"]["revisionActivationPolicy"], "Sometimes");
    let providers = plane.api("pkg.crossplane.io/v1", "Provider", "providers", false);
    let status = json!({
        "conditions": [condition("Installed", "True", "ActivePackageRevision"), condition("Healthy", "True", "HealthyPackageRevision")],
        "currentRevision": "provider-aws-s3-7f3a2b1c9d0e",
        "currentIdentifier": "xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0",
        "resolvedPackage": "xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0",
        "appliedImageConfigRefs": [{"name": "mirror", "reason": "RewriteImage"}],
    });
    assert_eq!(set_status(&providers, "provider-aws-s3", status.clone()).await["status"], status);
    let table = plane.table("/apis/pkg.crossplane.io/v1/providers").await;
    let (columns, cells) = table_row(&table, "provider-aws-s3");
    assert_eq!(columns, ["Name", "INSTALLED", "HEALTHY", "PACKAGE", "AGE"]);
    assert_eq!(&cells[1..4], &[json!("True"), json!("True"), json!("xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0")]);

    // A revision, its status, and the revision columns (priority 1 for the wide ones).
    let revision = r#"
apiVersion: pkg.crossplane.io/v1
kind: ProviderRevision
metadata:
  name: provider-aws-s3-7f3a2b1c9d0e
  labels:
    pkg.crossplane.io/package: provider-aws-s3
spec:
  desiredState: Active
  image: xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0
  revision: 1
"#;
    let created = plane.create("providerrevisions", revision).await.unwrap();
    assert_eq!(created["spec"]["packagePullPolicy"], "IfNotPresent");
    assert_eq!(created["spec"]["runtimeConfigRef"], json!({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig", "name": "default"}));
    let message = invalid(plane.create("providerrevisions", &revision.replace("  desiredState: Active\n", "")).await);
    assert!(message.contains("spec.desiredState: Required value"), "{message}");
    let revisions = plane.api("pkg.crossplane.io/v1", "ProviderRevision", "providerrevisions", false);
    let status = json!({
        "conditions": [condition("RevisionHealthy", "True", "HealthyPackageRevision"), condition("RuntimeHealthy", "True", "HealthyPackageRevision"),
                       condition("RuntimeActive", "True", "ActiveRuntime")],
        "foundDependencies": 2, "installedDependencies": 1,
        "objectRefs": [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "buckets.s3.aws.upbound.io", "uid": "5d1c"}],
    });
    assert_eq!(set_status(&revisions, "provider-aws-s3-7f3a2b1c9d0e", status.clone()).await["status"], status);
    let table = plane.table("/apis/pkg.crossplane.io/v1/providerrevisions").await;
    let (columns, cells) = table_row(&table, "provider-aws-s3-7f3a2b1c9d0e");
    let expected = ["Name", "HEALTHY", "RUNTIME-HEALTHY", "RUNTIME-ACTIVE", "REVISION", "IMAGE", "STATE", "DEP-FOUND", "DEP-INSTALLED", "AGE"];
    assert_eq!(columns, expected);
    assert_eq!(&cells[1..9], &[json!("True"), json!("True"), json!("True"), json!(1), json!("xpkg.crossplane.io/crossplane-contrib/provider-aws-s3:v2.0.0"), json!("Active"), json!(2), json!(1)]);
    let priorities: Vec<i64> = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["priority"].as_i64().unwrap_or(0)).collect();
    assert_eq!(priorities, [0, 0, 0, 0, 1, 0, 0, 1, 1, 0]);

    // A Function written as v1beta1 is the same object read as v1.
    let function = r#"
apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8
  revisionActivationPolicy: Manual
  runtimeConfigRef:
    name: debug
"#;
    plane.create("functions", function).await.unwrap();
    let functions = plane.api("pkg.crossplane.io/v1", "Function", "functions", false);
    let read = serde_json::to_value(functions.get("function-patch-and-transform").await.unwrap()).unwrap();
    assert_eq!(read["apiVersion"], "pkg.crossplane.io/v1");
    assert_eq!(read["spec"]["revisionActivationPolicy"], "Manual");
    assert_eq!(read["spec"]["runtimeConfigRef"], json!({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig", "name": "debug"}));
    assert_eq!(read["spec"]["revisionHistoryLimit"], 1);

    // A FunctionRevision reports where its gRPC server listens.
    let function_revision = r#"
apiVersion: pkg.crossplane.io/v1
kind: FunctionRevision
metadata:
  name: function-patch-and-transform-3c9f
spec:
  desiredState: Active
  image: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8
  revision: 1
"#;
    plane.create("functionrevisions", function_revision).await.unwrap();
    let function_revisions = plane.api("pkg.crossplane.io/v1beta1", "FunctionRevision", "functionrevisions", false);
    let written = set_status(&function_revisions, "function-patch-and-transform-3c9f", json!({"endpoint": "dns:///function-patch-and-transform.crossplane-system:9443"})).await;
    assert_eq!(written["status"]["endpoint"], "dns:///function-patch-and-transform.crossplane-system:9443");

    // A Configuration with pull secrets and common labels.
    let configuration = r#"
apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: platform-ref-aws
spec:
  package: xpkg.crossplane.io/upbound/platform-ref-aws:v1.4.0
  packagePullSecrets:
    - name: registry-creds
  commonLabels:
    team: platform
  skipDependencyResolution: true
"#;
    let created = plane.create("configurations", configuration).await.unwrap();
    assert_eq!(created["spec"]["packagePullSecrets"], json!([{"name": "registry-creds"}]));
    assert_eq!(created["spec"]["skipDependencyResolution"], true);
    assert!(created["spec"].get("runtimeConfigRef").is_none());

    // A DeploymentRuntimeConfig is stored as written.
    let runtime_config = r#"
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: debug
spec:
  deploymentTemplate:
    spec:
      selector: {}
      template:
        spec:
          containers:
            - name: package-runtime
              args:
                - --debug
  serviceAccountTemplate:
    metadata:
      name: provider-aws
"#;
    let created = plane.create("deploymentruntimeconfigs", runtime_config).await.unwrap();
    let written: Value = serde_saphyr::from_str(runtime_config).unwrap();
    assert_eq!(created["spec"], written["spec"]);
    plane.stop().await;
}

/// For every kind of Crossplane's that oxplane serves, objects Crossplane's CRDs refuse, each
/// with the message Crossplane's API server gives: one table, one create per row.
#[tokio::test]
async fn every_kind_rejects_what_crossplanes_crds_reject() {
    let plane = Plane::start().await;
    let xrd_v2 = |spec: &str| {
        format!(
            "apiVersion: apiextensions.crossplane.io/v2\nkind: CompositeResourceDefinition\nmetadata:\n  name: xthings.example.org\nspec:\n  group: example.org\n  names: {{kind: XThing, plural: xthings}}\n{spec}  versions:\n  - name: v1\n    served: true\n    referenceable: true\n    schema:\n      openAPIV3Schema: {{type: object}}\n"
        )
    };
    let composition = |spec: &str| {
        format!("apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: things\nspec:\n  compositeTypeRef: {{apiVersion: example.org/v1, kind: XThing}}\n{spec}")
    };
    let revision = |spec: &str| {
        format!("apiVersion: apiextensions.crossplane.io/v1\nkind: CompositionRevision\nmetadata:\n  name: things-1\nspec:\n  revision: 1\n  compositeTypeRef: {{apiVersion: example.org/v1, kind: XThing}}\n{spec}")
    };
    let package = |kind: &str, spec: &str| format!("apiVersion: pkg.crossplane.io/v1\nkind: {kind}\nmetadata:\n  name: pkg\nspec:\n{spec}");
    let step = "  mode: Pipeline\n  pipeline:\n  - step: s\n    functionRef: {name: f}\n";
    let operation = |spec: &str| format!("apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata:\n  name: o\nspec:\n{spec}");
    let cases: Vec<(&str, String, &str)> = vec![
        // CompositeResourceDefinition
        ("compositeresourcedefinitions", xrd_v2("").replace("plural: xthings", "plural: XThings"), "Plural name must be lowercase"),
        ("compositeresourcedefinitions", xrd_v2("  names: {kind: XThing, plural: xthings, singular: XThing}\n").replace("  names: {kind: XThing, plural: xthings}\n  names", "  names"), "Singular name must be lowercase"),
        ("compositeresourcedefinitions", xrd_v2("  scope: Cluster\n  claimNames: {kind: Thing, plural: things}\n"), "Claims aren't supported in apiextensions.crossplane.io/v2"),
        ("compositeresourcedefinitions", xrd_v2("  connectionSecretKeys: [url]\n"), "XR connection secrets aren't supported in apiextensions.crossplane.io/v2"),
        ("compositeresourcedefinitions", xrd_v2("  scope: LegacyCluster\n"), r#"spec.scope: Unsupported value: "LegacyCluster": supported values: "Namespaced", "Cluster""#),
        ("compositeresourcedefinitions", xrd_v2("  defaultCompositionUpdatePolicy: Sometimes\n"), r#"spec.defaultCompositionUpdatePolicy: Unsupported value: "Sometimes": supported values: "Automatic", "Manual""#),
        (
            "compositeresourcedefinitions",
            xrd_v2("").replace("apiextensions.crossplane.io/v2", "apiextensions.crossplane.io/v1").replace("  group:", "  scope: Namespaced\n  claimNames: {kind: Thing, plural: things}\n  group:"),
            "Only LegacyCluster composite resources can offer claims",
        ),
        ("compositeresourcedefinitions", xrd_v2("  conversion: {strategy: Webhook}\n"), "Webhook configuration is required when conversion strategy is Webhook"),
        // Composition and CompositionRevision
        ("compositions", composition("  mode: Pipeline\n"), "an array of pipeline steps is required in Pipeline mode"),
        ("compositions", composition("  mode: Sometimes\n"), r#"spec.mode: Unsupported value: "Sometimes""#),
        ("compositions", composition(&format!("{step}    credentials:\n    - name: c\n      source: Secret\n")), "the Secret source requires a secretRef"),
        ("compositions", composition(&format!("{step}    credentials:\n    - name: c\n      source: Vault\n")), r#"Unsupported value: "Vault": supported values: "None", "Secret""#),
        ("compositions", composition("  mode: Pipeline\n  pipeline:\n  - step: s\n"), "spec.pipeline[0].functionRef: Required value"),
        ("compositionrevisions", revision("  mode: Pipeline\n"), "an array of pipeline steps is required in Pipeline mode"),
        // Usages
        (
            "usages",
            "apiVersion: apiextensions.crossplane.io/v1beta1\nkind: Usage\nmetadata:\n  name: u\nspec:\n  of: {apiVersion: v1, kind: ConfigMap, resourceRef: {name: a}}\n".into(),
            r#"either "spec.by" or "spec.reason" must be specified."#,
        ),
        (
            "usages",
            "apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata:\n  name: u\n  namespace: default\nspec:\n  reason: r\n  of: {apiVersion: v1, kind: ConfigMap}\n".into(),
            "either a resource reference or a resource selector should be set.",
        ),
        (
            "usages",
            "apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata:\n  name: u\n  namespace: default\nspec:\n  reason: r\n  of: {apiVersion: v1, kind: ConfigMap, resourceRef: {name: a, namespace: other}}\n".into(),
            r#"cross-namespace "spec.of" is not allowed without "spec.by" resource."#,
        ),
        (
            "clusterusages",
            "apiVersion: protection.crossplane.io/v1beta1\nkind: ClusterUsage\nmetadata:\n  name: u\nspec:\n  of: {apiVersion: v1, kind: Namespace, resourceRef: {name: a}}\n".into(),
            r#"either "spec.by" or "spec.reason" must be specified."#,
        ),
        // Packages
        ("providers", package("Provider", "  revisionHistoryLimit: 1\n"), "spec.package: Required value"),
        ("providers", package("Provider", "  package: xpkg.crossplane.io/p:v1\n  runtimeConfigRef: {kind: DeploymentRuntimeConfig}\n"), "spec.runtimeConfigRef.name: Required value"),
        ("functions", package("Function", "  packagePullPolicy: Always\n"), "spec.package: Required value"),
        ("configurations", package("Configuration", "  revisionHistoryLimit: 1\n"), "spec.package: Required value"),
        (
            "providerrevisions",
            "apiVersion: pkg.crossplane.io/v1\nkind: ProviderRevision\nmetadata:\n  name: r\nspec:\n  revision: 1\n  desiredState: Active\n".into(),
            "spec.image: Required value",
        ),
        (
            "environmentconfigs",
            "apiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata:\n  name: e\ndata: 1\n".into(),
            r#"data: Invalid value: "integer": data in body must be of type object"#,
        ),
        (
            "functionrevisions",
            "apiVersion: pkg.crossplane.io/v1\nkind: FunctionRevision\nmetadata:\n  name: r\nspec:\n  revision: 1\n  desiredState: Active\n".into(),
            "spec.image: Required value",
        ),
        (
            "configurationrevisions",
            "apiVersion: pkg.crossplane.io/v1\nkind: ConfigurationRevision\nmetadata:\n  name: r\nspec:\n  revision: 1\n  desiredState: Active\n".into(),
            "spec.image: Required value",
        ),
        (
            "deploymentruntimeconfigs",
            "apiVersion: pkg.crossplane.io/v1beta1\nkind: DeploymentRuntimeConfig\nmetadata:\n  name: d\nspec: 1\n".into(),
            r#"spec: Invalid value: "integer": spec in body must be of type object"#,
        ),
        // Operations (served with --enable-operations)
        ("operations", operation("  mode: Pipeline\n  pipeline: []\n"), "spec.pipeline: Invalid value: 0: spec.pipeline in body should have at least 1 items"),
        ("operations", operation(&step.replace("Pipeline", "Sometimes")), r#"spec.mode: Unsupported value: "Sometimes": supported values: "Pipeline""#),
        (
            "operations",
            operation(&format!("{step}    requirements:\n      requiredResources:\n      - {{requirementName: r, apiVersion: v1, kind: ConfigMap, name: a, matchLabels: {{app: demo}}}}\n")),
            "name and matchLabels are mutually exclusive",
        ),
        (
            "cronoperations",
            format!("apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata:\n  name: c\nspec:\n  operationTemplate:\n    spec:\n{}", step.replace("\n  ", "\n      ").replacen("  mode", "      mode", 1)),
            "spec.schedule: Required value",
        ),
        (
            "cronoperations",
            format!("apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata:\n  name: c\nspec:\n  schedule: '@daily'\n  concurrencyPolicy: Sometimes\n  operationTemplate:\n    spec:\n{}", step.replace("\n  ", "\n      ").replacen("  mode", "      mode", 1)),
            r#"spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace""#,
        ),
        (
            "watchoperations",
            format!("apiVersion: ops.crossplane.io/v1alpha1\nkind: WatchOperation\nmetadata:\n  name: w\nspec:\n  operationTemplate:\n    spec:\n{}", step.replace("\n  ", "\n      ").replacen("  mode", "      mode", 1)),
            "spec.watch: Required value",
        ),
    ];
    let mut wrong = Vec::new();
    for (plural, yaml, expected) in &cases {
        match plane.create(plural, yaml).await {
            Err(kube::Error::Api(status)) if status.code == 422 && status.message.contains(expected) => {}
            other => wrong.push(format!("{plural}: expected {expected:?}, got {other:?}\n{yaml}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    plane.stop().await;
}
