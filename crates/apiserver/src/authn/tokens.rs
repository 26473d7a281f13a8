//! Bearer tokens: the admin token and a static token file in kube-apiserver's
//! `--token-auth-file` format, one CSV line per token: `token,user,uid,"group1,group2"` (the
//! groups column is optional; blank lines and lines starting with `#` are skipped).

use std::collections::HashMap;
use std::path::Path;

use super::UserInfo;

/// Tokens and the users they stand for.
#[derive(Clone, Debug, Default)]
pub struct StaticTokens {
    tokens: HashMap<String, UserInfo>,
}

impl StaticTokens {
    /// Only the admin token.
    pub fn admin(token: &str) -> Self {
        let mut tokens = HashMap::new();
        tokens.insert(token.to_string(), UserInfo::admin());
        StaticTokens { tokens }
    }

    /// Adds the tokens of a token file; an unreadable file or a malformed line is an error
    /// naming the line.
    pub fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading the token file {}: {e}", path.display()))?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = split_csv(line).map_err(|why| format!("{}:{}: {why}", path.display(), number + 1))?;
            let [token, user, uid, rest @ ..] = fields.as_slice() else {
                return Err(format!("{}:{}: expected token,user,uid[,\"groups\"]", path.display(), number + 1));
            };
            if token.is_empty() || user.is_empty() {
                return Err(format!("{}:{}: the token and the user name must not be empty", path.display(), number + 1));
            }
            let groups = rest.first().map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_string).collect::<Vec<_>>());
            let mut info = UserInfo::new(user.as_str(), groups.unwrap_or_default());
            info.uid = uid.clone();
            self.tokens.insert(token.clone(), info);
        }
        Ok(())
    }

    /// The user a token stands for. Every known token is compared in constant time, so the
    /// time taken says nothing about how much of a guess matched.
    pub fn user(&self, presented: &str) -> Option<&UserInfo> {
        let mut found = None;
        for (token, user) in &self.tokens {
            if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
                found = Some(user);
            }
        }
        found
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Splits one CSV line (fields may be double-quoted, `""` is a quote inside one). Written by
/// hand: the format is one line of a few fields, not worth a CSV crate.
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    fields.push(field);
    Ok(fields.into_iter().map(|f| f.trim().to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_lines_name_users_uids_and_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "# comment\nt1,bob,1001,\"dev,ops\"\n\nt2,carol,1002\n").unwrap();
        let mut tokens = StaticTokens::admin("admin-token");
        tokens.load_file(&path).unwrap();
        let bob = tokens.user("t1").unwrap();
        assert_eq!((bob.username.as_str(), bob.uid.as_str()), ("bob", "1001"));
        assert_eq!(bob.groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(tokens.user("t2").unwrap().groups, ["system:authenticated"]);
        assert_eq!(tokens.user("admin-token"), Some(&UserInfo::admin()));
        assert!(tokens.user("t3").is_none());
        assert!(tokens.user("t").is_none());
    }

    #[test]
    fn malformed_token_files_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "t1,bob,1\nonly-two,fields\n").unwrap();
        let error = StaticTokens::default().load_file(&path).unwrap_err();
        assert!(error.ends_with("tokens.csv:2: expected token,user,uid[,\"groups\"]"), "{error}");
        std::fs::write(&path, "t1,bob,1,\"dev\n").unwrap();
        assert!(StaticTokens::default().load_file(&path).unwrap_err().contains(":1: unterminated"));
    }
}
