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

    /// `"mgr"[ with subresource "status"][ using v1]`: who owns the field.
    fn owner(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if !self.api_version.is_empty() {
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

/// The 409 status message and its causes `(message, field)`.
///
/// Message: `Apply failed with N conflict(s): ` followed by one group per owner (in first
/// appearance order), groups separated by newlines. A group with one field reads
/// `conflict with "mgr" using v1: .spec.x`; a group with several reads
/// `conflicts with "mgr" using v1:` followed by one `- .path` line per field.
pub fn conflict_status_message(conflicts: &Conflicts) -> (String, Vec<(String, String)>) {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for c in &conflicts.0 {
        let owner = c.owner();
        match groups.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, paths)) => paths.push(&c.path),
            None => groups.push((owner, vec![&c.path])),
        }
    }
    let rendered: Vec<String> = groups
        .iter()
        .map(|(owner, paths)| match paths.as_slice() {
            [one] => format!("conflict with {owner}: {one}"),
            many => {
                let lines: Vec<String> = many.iter().map(|p| format!("- {p}")).collect();
                format!("conflicts with {owner}:\n{}", lines.join("\n"))
            }
        })
        .collect();
    let n = conflicts.len();
    let message = format!(
        "Apply failed with {n} conflict{}: {}",
        if n == 1 { "" } else { "s" },
        rendered.join("\n")
    );
    let causes = conflicts
        .0
        .iter()
        .map(|c| (c.cause_message(), c.path.clone()))
        .collect();
    (message, causes)
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
             conflict with \"b\" with subresource \"status\" using v1: .status.p"
        );
        assert_eq!(
            causes[2].0,
            "conflict with \"b\" with subresource \"status\" using v1"
        );
        assert_eq!(cs.to_string(), msg);
    }
}
