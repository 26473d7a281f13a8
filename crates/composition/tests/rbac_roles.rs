//! Crossplane's RBAC manager roles on an in-process server: an XRD gets its four
//! `crossplane:composite:<xrd>:aggregate-to-*` ClusterRoles, which `crossplane-edit` and the
//! others aggregate, so a user bound to `crossplane-edit` in a namespace may create claims
//! there (asked of the server's own authorizer through SubjectAccessReviews); deleting the XRD
//! removes them.

use crate::support;

use oxplane_composition::rbac::cluster_role_kind;
use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};
use support::{Plane, is_true, xrds};

const XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xbuckets.example.org
spec:
  group: example.org
  names: {kind: XBucket, plural: xbuckets}
  claimNames: {kind: Bucket, plural: buckets}
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
"#;

const ROLES: [&str; 4] = [
    "crossplane:composite:xbuckets.example.org:aggregate-to-crossplane",
    "crossplane:composite:xbuckets.example.org:aggregate-to-edit",
    "crossplane:composite:xbuckets.example.org:aggregate-to-view",
    "crossplane:composite:xbuckets.example.org:aggregate-to-browse",
];

/// Whether alice (group `app-team`) may `verb` `resource` in `namespace`, by a SubjectAccessReview.
async fn alice_may(plane: &Plane, verb: &str, resource: &str, namespace: &str) -> bool {
    let reviews = Kind::new("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", false);
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "groups": ["app-team"], "resourceAttributes": {"namespace": namespace, "verb": verb, "group": "example.org", "resource": resource}},
    });
    let answer = plane.runtime.kube.create(&reviews, &review).await.unwrap();
    answer["status"]["allowed"] == json!(true)
}

fn has_rule_for(role: &Value, resource: &str) -> bool {
    role["rules"].as_array().is_some_and(|rules| rules.iter().any(|r| r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == resource))))
}

#[tokio::test]
async fn an_xrds_roles_are_aggregated_for_users_and_go_with_it() {
    let plane = Plane::start().await;
    let kube = &plane.runtime.kube;
    for name in ["crossplane", "crossplane-admin", "crossplane-edit", "crossplane-view", "crossplane-browse", "crossplane:aggregate-to-edit"] {
        assert!(kube.get(&cluster_role_kind(), None, name).await.unwrap().is_some(), "{name} is installed at start");
    }
    plane.apply_yaml(XRD).await;
    let xrd = plane.wait_object(&xrds(), None, "xbuckets.example.org", "Established", |x| is_true(x, "Established")).await;
    for name in ROLES {
        let role = plane.wait_object(&cluster_role_kind(), None, name, "the XRD's ClusterRole", |_| true).await;
        assert_eq!(role["metadata"]["ownerReferences"][0]["uid"], xrd["metadata"]["uid"]);
    }
    let applied = format!("Applied RBAC ClusterRoles: {}", ROLES.join(", "));
    plane.wait_event(&xrd, "Normal", "ApplyClusterRoles", &applied).await;

    // Aggregated: crossplane-edit and crossplane (the core's role) gather the XRD's rules,
    // crossplane-browse only the composites'.
    plane.wait_object(&cluster_role_kind(), None, "crossplane-edit", "crossplane-edit covering the claims", |r| has_rule_for(r, "buckets")).await;
    plane.wait_object(&cluster_role_kind(), None, "crossplane", "crossplane covering finalizers", |r| has_rule_for(r, "xbuckets/finalizers")).await;
    let browse = plane.wait_object(&cluster_role_kind(), None, "crossplane-browse", "crossplane-browse covering composites", |r| has_rule_for(r, "xbuckets")).await;
    assert!(!has_rule_for(&browse, "buckets"), "browse never covers claims");

    plane.apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n").await;
    plane.apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n").await;
    plane
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: app-team-crossplane-edit\n  namespace: team-a\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: crossplane-edit\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: app-team\n",
        )
        .await;
    assert!(alice_may(&plane, "create", "buckets", "team-a").await);
    assert!(!alice_may(&plane, "create", "buckets", "team-b").await);

    kube.delete(&xrds(), None, "xbuckets.example.org", &Default::default()).await.unwrap();
    for name in ROLES {
        plane
            .wait("the XRD's ClusterRole gone with it", async |p| p.runtime.kube.get(&cluster_role_kind(), None, name).await.unwrap().is_none().then_some(()))
            .await;
    }
    plane.wait_object(&cluster_role_kind(), None, "crossplane-edit", "crossplane-edit without the claims", |r| !has_rule_for(r, "buckets")).await;
    assert!(!alice_may(&plane, "create", "buckets", "team-a").await);
}
