//! The webapp example (`examples/webapp/`) applied with the real `kubectl` to the real
//! `oxplane`: its Providers, ProviderConfigs, XRD and Composition, then a WebApp. The WebApp's
//! Namespace and ConfigMap appear on a second `oxplane` (the target cluster, reached through a
//! kubeconfig Secret) and its bot user is registered with a REST service the test serves;
//! deleting the WebApp removes all three.

use crate::support;

use std::time::Duration;

use oxplane_providers::http::testing::RestServer;
use serde_json::Value;
use support::{Server, within};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/webapp");

fn example(file: &str) -> String {
    std::fs::read_to_string(format!("{EXAMPLE}/{file}")).unwrap()
}

/// Applies a file, retrying while its kinds are not served yet (CRDs being established).
fn apply_when_served(server: &Server, yaml: &str) {
    let mut last = String::new();
    within(Duration::from_secs(90), &format!("kubectl apply to succeed (last error: {last})"), || match server.kubectl_try(&["apply", "-f", "-"], yaml) {
        Ok(_) => true,
        Err(error) => {
            last = error;
            false
        }
    });
}

fn healthy(server: &Server, what: &str) {
    within(Duration::from_secs(90), &format!("{what} Healthy"), || server.get(&[what]).is_some_and(|p| support::is_true(&p, "Healthy")));
}

#[test]
fn the_webapp_example_composes_objects_on_a_target_cluster_and_an_http_registration() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let directory = rt.block_on(RestServer::start()).unwrap();
    let target = Server::start();
    let control = Server::start();
    let kubeconfig = target.kubeconfig();
    control.kubectl(&["create", "secret", "generic", "target-kubeconfig", "-n", "default", &format!("--from-file=kubeconfig={}", kubeconfig.display())]);

    control.apply(&example("00-providers.yaml"));
    for what in ["providers.pkg.crossplane.io/provider-kubernetes", "providers.pkg.crossplane.io/provider-http", "functions.pkg.crossplane.io/function-patch-and-transform", "functions.pkg.crossplane.io/function-auto-ready"] {
        healthy(&control, what);
    }
    apply_when_served(&control, &example("01-provider-configs.yaml"));
    control.apply(&example("02-xrd.yaml"));
    within(Duration::from_secs(60), "the XRD Established", || {
        control.get(&["compositeresourcedefinitions.apiextensions.crossplane.io/webapps.example.org"]).is_some_and(|x| support::is_true(&x, "Established"))
    });
    control.apply(&example("03-composition.yaml"));
    let webapp = example("04-webapp.yaml").replace("http://127.0.0.1:8080/api/users", &format!("{}/users", directory.base_url()));
    apply_when_served(&control, &webapp);

    let mut last = Value::Null;
    within(Duration::from_secs(120), "the WebApp Ready", || {
        last = control.get(&["webapps.example.org/storefront", "-n", "default"]).unwrap_or(Value::Null);
        support::is_true(&last, "Ready")
    });
    assert!(target.get(&["namespace/shop"]).is_some());
    let settings = target.get(&["configmap/webapp-settings", "-n", "shop"]).expect("the ConfigMap on the target");
    assert_eq!(settings["data"]["color"], "green");
    let users = directory.users();
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["username"], "storefront-bot");
    assert_eq!(users[0]["team"], "shop");
    assert!(control.get(&["configmap/webapp-settings", "-n", "shop", "--ignore-not-found"]).is_none(), "nothing lands on the control plane");

    // A new color reaches the target.
    control.kubectl(&["patch", "webapps.example.org/storefront", "-n", "default", "--type=merge", "-p", r#"{"spec":{"color":"teal"}}"#]);
    within(Duration::from_secs(60), "the new color on the target", || {
        target.get(&["configmap/webapp-settings", "-n", "shop"]).is_some_and(|c| c["data"]["color"] == "teal")
    });

    control.kubectl(&["delete", "webapps.example.org/storefront", "-n", "default", "--timeout=120s"]);
    within(Duration::from_secs(90), "the objects gone from the target and the user unregistered", || {
        target.get(&["configmap/webapp-settings", "-n", "shop"]).is_none() && target.get(&["namespace/shop"]).is_none() && directory.users().is_empty()
    });
}
