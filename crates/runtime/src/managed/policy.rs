//! Management policies: which of Observe, Create, Update, LateInitialize and Delete the
//! controller may do to an external resource, and whether deletion of a managed resource
//! deletes the external one. Pure logic, property-tested.

use std::collections::BTreeSet;

use serde_json::Value;

/// One management action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ManagementAction {
    /// `Observe`.
    Observe,
    /// `Create`.
    Create,
    /// `Update`.
    Update,
    /// `LateInitialize`.
    LateInitialize,
    /// `Delete`.
    Delete,
    /// `*`: everything.
    All,
}

impl ManagementAction {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "Observe" => ManagementAction::Observe,
            "Create" => ManagementAction::Create,
            "Update" => ManagementAction::Update,
            "LateInitialize" => ManagementAction::LateInitialize,
            "Delete" => ManagementAction::Delete,
            "*" => ManagementAction::All,
            _ => return None,
        })
    }

    /// The spelling in `spec.managementPolicies`.
    pub fn as_str(self) -> &'static str {
        match self {
            ManagementAction::Observe => "Observe",
            ManagementAction::Create => "Create",
            ManagementAction::Update => "Update",
            ManagementAction::LateInitialize => "LateInitialize",
            ManagementAction::Delete => "Delete",
            ManagementAction::All => "*",
        }
    }
}

/// `spec.deletionPolicy` of a cluster-scoped (legacy) managed resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Delete the external resource with the managed resource (the default).
    Delete,
    /// Leave the external resource behind.
    Orphan,
}

/// The policies of one managed resource, as read from its spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagementPolicies {
    actions: BTreeSet<ManagementAction>,
    /// Whether the list was the default `["*"]` (absent or exactly that).
    default_set: bool,
    /// `Some` for cluster-scoped (legacy) managed resources, which also have a deletion policy.
    deletion_policy: Option<DeletionPolicy>,
    /// Entries that are not actions (reported as invalid).
    unknown: Vec<String>,
}

/// The sets Crossplane supports (order irrelevant); `*` alone is also supported.
const SUPPORTED: &[&[ManagementAction]] = {
    use ManagementAction::*;
    &[
        &[Observe, Create, Update, LateInitialize, Delete],
        &[Observe],
        &[],
        &[Observe, Create, Update, Delete],
        &[Observe, Create, Update, LateInitialize],
        &[Observe, Create, Update],
        &[Observe, Create, Delete, LateInitialize],
        &[Observe, Create, LateInitialize],
        &[Observe, Create, Delete],
        &[Observe, Create],
        &[Observe, Delete],
        &[Observe, Update],
        &[Observe, LateInitialize],
        &[Observe, Update, LateInitialize],
    ]
};

impl ManagementPolicies {
    /// Reads `spec.managementPolicies` (default `["*"]`) and, for a cluster-scoped managed
    /// resource, `spec.deletionPolicy` (default `Delete`).
    pub fn of(managed: &Value, cluster_scoped: bool) -> Self {
        let mut actions = BTreeSet::new();
        let mut unknown = Vec::new();
        let default_set = match managed.pointer("/spec/managementPolicies") {
            None | Some(Value::Null) => {
                actions.insert(ManagementAction::All);
                true
            }
            Some(Value::Array(list)) => {
                for item in list {
                    match item.as_str().and_then(ManagementAction::parse) {
                        Some(action) => {
                            actions.insert(action);
                        }
                        None => unknown.push(item.to_string()),
                    }
                }
                actions.len() == 1 && actions.contains(&ManagementAction::All) && unknown.is_empty()
            }
            Some(other) => {
                unknown.push(other.to_string());
                false
            }
        };
        let deletion_policy = cluster_scoped.then(|| match managed.pointer("/spec/deletionPolicy").and_then(Value::as_str) {
            Some("Orphan") => DeletionPolicy::Orphan,
            _ => DeletionPolicy::Delete,
        });
        ManagementPolicies { actions, default_set, deletion_policy, unknown }
    }

    fn allows(&self, action: ManagementAction) -> bool {
        self.actions.contains(&ManagementAction::All) || self.actions.contains(&action)
    }

    /// The policies as the user wrote them, for messages.
    pub fn describe(&self) -> String {
        let mut items: Vec<&str> = self.actions.iter().map(|a| a.as_str()).collect();
        items.extend(self.unknown.iter().map(String::as_str));
        format!("[{}]", items.join(" "))
    }

    /// `None` when the set is supported, else the reason it is not.
    pub fn validate(&self) -> Option<String> {
        if !self.unknown.is_empty() || !self.is_supported() {
            return Some(format!(
                "`spec.managementPolicies` is set to a value({}) which is not supported. Check docs for supported policies",
                self.describe()
            ));
        }
        None
    }

    fn is_supported(&self) -> bool {
        if self.actions.contains(&ManagementAction::All) {
            return self.actions.len() == 1;
        }
        SUPPORTED.iter().any(|set| set.len() == self.actions.len() && set.iter().all(|a| self.actions.contains(a)))
    }

    /// An empty list pauses the resource.
    pub fn is_paused(&self) -> bool {
        self.actions.is_empty() && self.unknown.is_empty()
    }

    /// May observe (every supported non-empty set includes Observe or `*`).
    pub fn should_observe(&self) -> bool {
        self.allows(ManagementAction::Observe)
    }

    /// May create the external resource.
    pub fn should_create(&self) -> bool {
        self.allows(ManagementAction::Create)
    }

    /// May update the external resource.
    pub fn should_update(&self) -> bool {
        self.allows(ManagementAction::Update)
    }

    /// May write values observed from the external resource into the spec.
    pub fn should_late_initialize(&self) -> bool {
        self.allows(ManagementAction::LateInitialize)
    }

    /// The set is exactly `{Observe}`.
    pub fn should_only_observe(&self) -> bool {
        self.actions.len() == 1 && self.actions.contains(&ManagementAction::Observe)
    }

    /// Whether deleting the managed resource deletes the external resource. For namespaced
    /// managed resources: the policies include Delete. For cluster-scoped ones (which also have
    /// a deletion policy): `deletionPolicy: Delete` with Delete in the policies, or a
    /// non-default set that names Delete explicitly. So `deletionPolicy: Orphan` with `["*"]`
    /// orphans.
    pub fn should_delete(&self) -> bool {
        match self.deletion_policy {
            None => self.allows(ManagementAction::Delete),
            Some(policy) => {
                (policy == DeletionPolicy::Delete && self.allows(ManagementAction::Delete))
                    || (!self.default_set && self.actions.contains(&ManagementAction::Delete))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn policies(list: Value, cluster: bool, deletion: Option<&str>) -> ManagementPolicies {
        let mut mr = json!({"spec": {"managementPolicies": list}});
        if let Some(d) = deletion {
            mr["spec"]["deletionPolicy"] = json!(d);
        }
        ManagementPolicies::of(&mr, cluster)
    }

    /// (set, create, update, late-init, delete (namespaced), only-observe).
    type Row = (&'static [&'static str], bool, bool, bool, bool, bool);

    /// Every supported set with what it allows, written from the reference table.
    #[test]
    fn every_supported_set() {
        let table: &[Row] = &[
            (&["*"], true, true, true, true, false),
            (&["Observe", "Create", "Update", "LateInitialize", "Delete"], true, true, true, true, false),
            (&["Observe"], false, false, false, false, true),
            (&["Observe", "Create", "Update", "Delete"], true, true, false, true, false),
            (&["Observe", "Create", "Update", "LateInitialize"], true, true, true, false, false),
            (&["Observe", "Create", "Update"], true, true, false, false, false),
            (&["Observe", "Create", "Delete", "LateInitialize"], true, false, true, true, false),
            (&["Observe", "Create", "LateInitialize"], true, false, true, false, false),
            (&["Observe", "Create", "Delete"], true, false, false, true, false),
            (&["Observe", "Create"], true, false, false, false, false),
            (&["Observe", "Delete"], false, false, false, true, false),
            (&["Observe", "Update"], false, true, false, false, false),
            (&["Observe", "LateInitialize"], false, false, true, false, false),
            (&["Observe", "Update", "LateInitialize"], false, true, true, false, false),
        ];
        for (set, create, update, late, delete, only) in table {
            let p = policies(json!(set), false, None);
            assert_eq!(p.validate(), None, "{set:?}");
            assert!(!p.is_paused(), "{set:?}");
            assert!(p.should_observe(), "{set:?}");
            assert_eq!(p.should_create(), *create, "{set:?} create");
            assert_eq!(p.should_update(), *update, "{set:?} update");
            assert_eq!(p.should_late_initialize(), *late, "{set:?} late-init");
            assert_eq!(p.should_delete(), *delete, "{set:?} delete");
            assert_eq!(p.should_only_observe(), *only, "{set:?} only observe");
        }
    }

    #[test]
    fn unsupported_sets_and_unknown_actions_are_invalid() {
        for bad in [json!(["Create"]), json!(["Observe", "Create", "Update", "Delete", "*"]), json!(["Observe", "Teleport"]), json!("*")] {
            let p = policies(bad.clone(), false, None);
            let message = p.validate().unwrap_or_default();
            assert!(message.contains("which is not supported. Check docs for supported policies"), "{bad}: {message}");
        }
    }

    #[test]
    fn empty_pauses_and_absent_is_everything() {
        assert!(policies(json!([]), false, None).is_paused());
        let absent = ManagementPolicies::of(&json!({"spec": {}}), true);
        assert!(absent.should_create() && absent.should_delete() && !absent.is_paused());
    }

    #[test]
    fn legacy_delete_decision() {
        // (policies, deletionPolicy, deletes)
        let cases = [
            (json!(["*"]), None, true),
            (json!(["*"]), Some("Delete"), true),
            (json!(["*"]), Some("Orphan"), false),
            (json!(["Observe", "Create", "Update", "Delete"]), Some("Orphan"), true),
            (json!(["Observe", "Create", "Update", "Delete"]), Some("Delete"), true),
            (json!(["Observe", "Create", "Update"]), Some("Delete"), false),
            (json!(["Observe"]), None, false),
            (json!(["Observe", "Delete"]), Some("Orphan"), true),
        ];
        for (set, deletion, deletes) in cases {
            assert_eq!(policies(set.clone(), true, deletion).should_delete(), deletes, "{set} {deletion:?}");
        }
        // Namespaced resources have no deletion policy: it is ignored.
        assert!(policies(json!(["*"]), false, Some("Orphan")).should_delete());
    }

    proptest! {
        /// Order and duplicates never matter, and a supported set's permissions are exactly
        /// membership (or `*`).
        #[test]
        fn permissions_are_membership(picks in proptest::collection::vec(0usize..5, 0..8), shuffle in any::<u64>()) {
            let names = ["Observe", "Create", "Update", "LateInitialize", "Delete"];
            let mut list: Vec<&str> = picks.iter().map(|i| names[*i]).collect();
            let p1 = policies(json!(list.clone()), false, None);
            let len = list.len();
            if len > 1 {
                list.rotate_left((shuffle as usize) % len);
            }
            let p2 = policies(json!(list.clone()), false, None);
            prop_assert_eq!(p1.validate(), p2.validate());
            if p1.validate().is_none() {
                prop_assert_eq!(p1.should_create(), list.contains(&"Create"));
                prop_assert_eq!(p1.should_update(), list.contains(&"Update"));
                prop_assert_eq!(p1.should_late_initialize(), list.contains(&"LateInitialize"));
                prop_assert_eq!(p1.should_delete(), list.contains(&"Delete"));
            }
        }
    }
}
