//! Apply conflicts: the [`Conflict`]/[`Conflicts`] values an apply without force returns,
//! and their rendering into Kubernetes' 409 status message and causes.

use std::fmt;

use super::managed::Operation;

/// One field another manager owns whose value the apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// The other manager's operation.
    pub operation: Operation,
    /// The API version the other manager used.
    pub api_version: String,
    /// The subresource the other manager wrote through, if any.
    pub subresource: Option<String>,
    /// The conflicting field, rendered (e.g. `.spec.replicas`).
    pub path: String,
}

impl Conflict {
    /// `conflict with "mgr"[ with subresource "status"][ using v1]`: the per-cause message.
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.owner())
    }

    /// `"mgr"[ with subresource "status"][ using v1]`: who owns the field. Only an `Update`
    /// owner names its API version: Kubernetes leaves it out of an applier's identity, so an
    /// applier is the same owner whatever version it applied through.
    fn owner(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// All conflicts of one apply, in managedFields order then field order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// Number of conflicting fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&conflict_status_message(self).0)
    }
}

impl std::error::Error for Conflicts {}

/// The 409 status message and its causes `(message, field)`, worded as Kubernetes words them.
///
/// One conflict reads `Apply failed with 1 conflict: conflict with "mgr": .spec.x`. Several
/// read `Apply failed with N conflicts: ` followed by one group per owner, owners in the order
/// of their identities (manager, operation, API version, subresource), each group
/// `conflicts with "mgr" using v1:` and one `- .path` line per field, all joined by newlines.
pub fn conflict_status_message(conflicts: &Conflicts) -> (String, Vec<(String, String)>) {
    let causes = conflicts.0.iter().map(|c| (c.cause_message(), c.path.clone())).collect();
    if let [one] = conflicts.0.as_slice() {
        return (format!("Apply failed with 1 conflict: conflict with {}: {}", one.owner(), one.path), causes);
    }
    type Identity<'a> = (&'a str, &'static str, &'a str, Option<&'a str>);
    let mut groups: Vec<(Identity<'_>, String, Vec<&str>)> = Vec::new();
    for c in &conflicts.0 {
        let version = if c.operation == Operation::Update { c.api_version.as_str() } else { "" };
        let identity = (c.manager.as_str(), c.operation.as_str(), version, c.subresource.as_deref());
        match groups.iter_mut().find(|(i, _, _)| *i == identity) {
            Some((_, _, paths)) => paths.push(&c.path),
            None => groups.push((identity, c.owner(), vec![&c.path])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut lines = Vec::new();
    for (_, owner, paths) in &groups {
        lines.push(format!("conflicts with {owner}:"));
        lines.extend(paths.iter().map(|p| format!("- {p}")));
    }
    (format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n")), causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(manager: &str, sub: Option<&str>, path: &str) -> Conflict {
        Conflict {
            manager: manager.into(),
            operation: Operation::Update,
            api_version: "v1".into(),
            subresource: sub.map(Into::into),
            path: path.into(),
        }
    }

    #[test]
    fn single_conflict_message() {
        let (msg, causes) = conflict_status_message(&Conflicts(vec![c("mgr", None, ".spec.x")]));
        assert_eq!(
            msg,
            "Apply failed with 1 conflict: conflict with \"mgr\" using v1: .spec.x"
        );
        assert_eq!(
            causes,
            vec![(
                "conflict with \"mgr\" using v1".to_string(),
                ".spec.x".to_string()
            )]
        );
    }

    #[test]
    fn multiple_conflicts_message() {
        let cs = Conflicts(vec![
            c("a", None, ".spec.x"),
            c("a", None, ".spec.y"),
            c("b", Some("status"), ".status.p"),
        ]);
        let (msg, causes) = conflict_status_message(&cs);
        assert_eq!(
            msg,
            "Apply failed with 3 conflicts: conflicts with \"a\" using v1:\n- .spec.x\n- .spec.y\n\
             conflicts with \"b\" with subresource \"status\" using v1:\n- .status.p"
        );
        assert_eq!(
            causes[2].0,
            "conflict with \"b\" with subresource \"status\" using v1"
        );
        assert_eq!(cs.to_string(), msg);
    }

    #[test]
    fn appliers_are_named_without_a_version_and_owners_sorted() {
        let apply = |manager: &str, path: &str| Conflict { operation: Operation::Apply, ..c(manager, None, path) };
        let (msg, causes) = conflict_status_message(&Conflicts(vec![apply("alice", ".data.a")]));
        assert_eq!(msg, "Apply failed with 1 conflict: conflict with \"alice\": .data.a");
        assert_eq!(causes, vec![("conflict with \"alice\"".to_string(), ".data.a".to_string())]);
        let cs = Conflicts(vec![c("zed", None, ".data.z"), apply("alice", ".data.a"), c("alice", None, ".data.b")]);
        let (msg, _) = conflict_status_message(&cs);
        assert_eq!(
            msg,
            "Apply failed with 3 conflicts: conflicts with \"alice\":\n- .data.a\n\
             conflicts with \"alice\" using v1:\n- .data.b\nconflicts with \"zed\" using v1:\n- .data.z"
        );
    }
}
