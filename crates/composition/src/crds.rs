//! The CustomResourceDefinitions of Crossplane's own API kinds (XRDs, Compositions and their
//! revisions, EnvironmentConfigs, Usages, packages, ManagedResourceDefinitions and their
//! activation policies), which the control plane applies at start
//! so that users can apply their existing Crossplane YAML unchanged.
//!
//! The CRDs live as YAML files under `crds/<group>/<plural>.yaml`, the form users and tools
//! read; they are embedded in the binary so that no file has to be found at run time.

use serde_json::Value;

/// One embedded CRD file: its path under `crds/` and its text.
struct CrdFile {
    path: &'static str,
    text: &'static str,
}

/// Embeds each file and keeps its path for error messages.
macro_rules! crd_files {
    ($($path:literal),* $(,)?) => {
        [$(CrdFile { path: $path, text: include_str!(concat!("../crds/", $path)) }),*]
    };
}

/// Every core CRD, in the order they are applied: definitions and compositions first, then
/// usages, then packages, then managed resource definitions and their activation policies,
/// so a reader of the list meets the kinds in the spec's order.
const FILES: [CrdFile; 18] = crd_files![
    "apiextensions.crossplane.io/compositeresourcedefinitions.yaml",
    "apiextensions.crossplane.io/compositions.yaml",
    "apiextensions.crossplane.io/compositionrevisions.yaml",
    "apiextensions.crossplane.io/environmentconfigs.yaml",
    "apiextensions.crossplane.io/usages.yaml",
    "protection.crossplane.io/usages.yaml",
    "protection.crossplane.io/clusterusages.yaml",
    "pkg.crossplane.io/providers.yaml",
    "pkg.crossplane.io/providerrevisions.yaml",
    "pkg.crossplane.io/functions.yaml",
    "pkg.crossplane.io/functionrevisions.yaml",
    "pkg.crossplane.io/configurations.yaml",
    "pkg.crossplane.io/configurationrevisions.yaml",
    "pkg.crossplane.io/deploymentruntimeconfigs.yaml",
    "pkg.crossplane.io/locks.yaml",
    "pkg.crossplane.io/imageconfigs.yaml",
    "apiextensions.crossplane.io/managedresourcedefinitions.yaml",
    "apiextensions.crossplane.io/managedresourceactivationpolicies.yaml",
];

/// The CRDs of Crossplane's Operations (alpha), served only with `--enable-operations`.
const OPERATION_FILES: [CrdFile; 3] = crd_files![
    "ops.crossplane.io/operations.yaml",
    "ops.crossplane.io/cronoperations.yaml",
    "ops.crossplane.io/watchoperations.yaml",
];

/// A core CRD file that could not be turned into a CRD object.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The file is not valid YAML.
    #[error("cannot parse core CRD file {file}: {source}")]
    Parse {
        /// Path of the file under `crds/`.
        file: &'static str,
        /// What the YAML parser reported.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The file parsed, but is not an `apiextensions.k8s.io/v1` CustomResourceDefinition.
    #[error("core CRD file {file} is not an apiextensions.k8s.io/v1 CustomResourceDefinition")]
    NotACrd {
        /// Path of the file under `crds/`.
        file: &'static str,
    },
}

/// Every core CRD as a JSON object, in a fixed order, ready to be created or applied.
pub fn core_crds() -> Result<Vec<Value>, CrdError> {
    FILES.iter().map(parse).collect()
}

/// The Operation, CronOperation and WatchOperation CRDs.
pub fn operations_crds() -> Result<Vec<Value>, CrdError> {
    OPERATION_FILES.iter().map(parse).collect()
}

/// Parses one file and checks that it holds a CRD.
fn parse(file: &CrdFile) -> Result<Value, CrdError> {
    let crd: Value = serde_saphyr::from_str(file.text).map_err(|source| CrdError::Parse {
        file: file.path,
        source: Box::new(source),
    })?;
    let is_crd = crd["apiVersion"] == "apiextensions.k8s.io/v1" && crd["kind"] == "CustomResourceDefinition";
    if is_crd { Ok(crd) } else { Err(CrdError::NotACrd { file: file.path }) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_file_is_named_after_the_crd_it_holds() {
        let crds = core_crds().unwrap();
        assert_eq!(crds.len(), FILES.len());
        for (file, crd) in FILES.iter().zip(&crds) {
            let group = crd["spec"]["group"].as_str().unwrap();
            let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
            assert_eq!(file.path, format!("{group}/{plural}.yaml"));
            assert_eq!(crd["metadata"]["name"], format!("{plural}.{group}"));
        }
    }

    #[test]
    fn operation_crds_are_cluster_scoped_and_named_after_their_files() {
        let crds = operations_crds().unwrap();
        for (file, crd) in OPERATION_FILES.iter().zip(&crds) {
            let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
            assert_eq!(file.path, format!("ops.crossplane.io/{plural}.yaml"));
            assert_eq!(crd["spec"]["scope"], "Cluster");
            assert_eq!(crd["spec"]["versions"][0]["name"], "v1alpha1");
        }
        let columns = |i: usize| -> Vec<String> {
            crds[i]["spec"]["versions"][0]["additionalPrinterColumns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(columns(0), ["SYNCED", "SUCCEEDED", "AGE"]);
        assert_eq!(columns(1), ["SCHEDULE", "SYNCED", "SCHEDULING", "LAST SCHEDULE", "LAST SUCCESS", "AGE"]);
        assert_eq!(columns(2), ["KIND", "COUNT", "SYNCED", "WATCHING", "LAST SCHEDULE", "LAST SUCCESS", "AGE"]);
    }

    #[test]
    fn every_crd_has_one_storage_version_and_a_schema_per_version() {
        for crd in core_crds().unwrap() {
            let name = crd["metadata"]["name"].as_str().unwrap().to_string();
            let versions = crd["spec"]["versions"].as_array().unwrap();
            let storage = versions.iter().filter(|v| v["storage"] == true).count();
            assert_eq!(storage, 1, "{name}");
            for version in versions {
                assert_eq!(version["schema"]["openAPIV3Schema"]["type"], "object", "{name}");
            }
        }
    }

    #[test]
    fn every_crd_is_cluster_scoped_except_the_namespaced_usage() {
        let namespaced: Vec<String> = core_crds()
            .unwrap()
            .into_iter()
            .filter(|crd| crd["spec"]["scope"] == "Namespaced")
            .map(|crd| crd["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(namespaced, ["usages.protection.crossplane.io"]);
    }

    #[test]
    fn ambiguous_yaml_scalars_stay_strings() {
        // Enum values such as None must not turn into nulls or booleans on the way in.
        let crds = core_crds().unwrap();
        let composition = &crds[1]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let source = &composition["properties"]["pipeline"]["items"]["properties"]["credentials"]["items"]["properties"]["source"];
        assert_eq!(source["enum"], serde_json::json!(["None", "Secret"]));
        let provider = &crds[7]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(provider["revisionHistoryLimit"]["default"], 1);
        assert_eq!(provider["skipDependencyResolution"]["default"], false);
    }

    #[test]
    fn a_file_that_is_not_a_crd_is_named_in_the_error() {
        let bad = CrdFile { path: "x/y.yaml", text: "apiVersion: v1\nkind: ConfigMap\n" };
        let error = parse(&bad).unwrap_err();
        assert_eq!(error.to_string(), "core CRD file x/y.yaml is not an apiextensions.k8s.io/v1 CustomResourceDefinition");
        let broken = CrdFile { path: "x/z.yaml", text: "a: [unclosed\n" };
        let error = parse(&broken).unwrap_err();
        assert!(error.to_string().starts_with("cannot parse core CRD file x/z.yaml: "), "{error}");
    }
}
