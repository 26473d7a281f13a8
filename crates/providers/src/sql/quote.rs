//! Quoting of SQL identifiers and literals: every name or value that comes from a user goes
//! through here before it is put into a statement, so no object name can inject SQL.
//!
//! PostgreSQL quoting is `postgres-protocol`'s (the driver's own); what this module adds is
//! the checks the server would otherwise make in surprising ways (NUL bytes, which no
//! PostgreSQL string can hold, and identifiers longer than the server keeps, which it would
//! silently truncate so that the object could never be found again by its name).

/// The longest identifier PostgreSQL keeps (NAMEDATALEN - 1 bytes); longer ones are truncated.
pub const PG_MAX_IDENTIFIER_BYTES: usize = 63;

/// Why a name or value cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuoteError {
    /// Empty names are not identifiers.
    #[error("an empty name is not a valid identifier")]
    Empty,
    /// PostgreSQL cannot store NUL bytes.
    #[error("{0:?} contains a NUL character, which PostgreSQL cannot store")]
    Nul(String),
    /// PostgreSQL would truncate it.
    #[error("identifier {0:?} is longer than PostgreSQL's limit of 63 bytes")]
    TooLong(String),
}

/// A PostgreSQL identifier, double-quoted (`my"db` becomes `"my""db"`).
pub fn pg_ident(name: &str) -> Result<String, QuoteError> {
    if name.is_empty() {
        return Err(QuoteError::Empty);
    }
    if name.contains('\0') {
        return Err(QuoteError::Nul(name.into()));
    }
    if name.len() > PG_MAX_IDENTIFIER_BYTES {
        return Err(QuoteError::TooLong(name.into()));
    }
    Ok(postgres_protocol::escape::escape_identifier(name))
}

/// A PostgreSQL string literal (`it's` becomes `'it''s'`; with a backslash, an `E'...'`
/// literal with the backslash doubled).
pub fn pg_literal(value: &str) -> Result<String, QuoteError> {
    if value.contains('\0') {
        return Err(QuoteError::Nul(value.into()));
    }
    Ok(postgres_protocol::escape::escape_literal(value))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    /// Reads one double-quoted identifier from the start of `sql` as PostgreSQL's lexer
    /// does: returns the name and the rest of the text.
    fn lex_ident(sql: &str) -> Option<(String, &str)> {
        let mut chars = sql.char_indices();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut name = String::new();
        let mut chars = chars.peekable();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if chars.peek().map(|p| p.1) == Some('"') {
                    chars.next();
                    name.push('"');
                } else {
                    return Some((name, &sql[i + 1..]));
                }
            } else {
                name.push(c);
            }
        }
        None
    }

    /// Reads one string literal (`'...'` or `E'...'`, with standard_conforming_strings on)
    /// from the start of `sql`.
    fn lex_literal(sql: &str) -> Option<(String, &str)> {
        let (escapes, body) = match sql.strip_prefix(" E'").or_else(|| sql.strip_prefix("E'")) {
            Some(body) => (true, body),
            None => (false, sql.strip_prefix('\'')?),
        };
        let mut value = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' if escapes => value.push(chars.next()?.1),
                '\'' if chars.peek().map(|p| p.1) == Some('\'') => {
                    chars.next();
                    value.push('\'');
                }
                '\'' => return Some((value, &body[i + 1..])),
                c => value.push(c),
            }
        }
        None
    }

    proptest! {
        /// Whatever the name, the quoted form is one identifier token that reads back as the
        /// name, with nothing after it: a statement built around it has exactly the shape
        /// the code wrote.
        #[test]
        fn a_quoted_identifier_is_one_token_holding_the_name(name in "[^\\x00]{1,20}") {
            prop_assume!(name.len() <= PG_MAX_IDENTIFIER_BYTES);
            let quoted = pg_ident(&name).unwrap();
            let (read, rest) = lex_ident(&quoted).unwrap();
            prop_assert_eq!(read, name);
            prop_assert_eq!(rest, "");
        }

        #[test]
        fn a_quoted_literal_is_one_token_holding_the_value(value in "[^\\x00]{0,40}") {
            let quoted = pg_literal(&value).unwrap();
            let (read, rest) = lex_literal(&quoted).unwrap();
            prop_assert_eq!(read, value);
            prop_assert_eq!(rest, "");
        }

        #[test]
        fn quote_and_backslash_heavy_names_stay_one_token(name in "[\"'\\\\; a-z-]{1,30}") {
            let quoted = pg_ident(&name).unwrap();
            prop_assert_eq!(lex_ident(&quoted).unwrap(), (name.clone(), ""));
            let literal = pg_literal(&name).unwrap();
            prop_assert_eq!(lex_literal(&literal).unwrap(), (name, ""));
        }
    }

    #[test]
    fn names_the_server_would_mangle_are_refused() {
        assert_eq!(pg_ident(""), Err(QuoteError::Empty));
        assert!(matches!(pg_ident("a\0b"), Err(QuoteError::Nul(_))));
        assert!(matches!(pg_literal("a\0b"), Err(QuoteError::Nul(_))));
        assert!(matches!(pg_ident(&"x".repeat(64)), Err(QuoteError::TooLong(_))));
        assert_eq!(pg_ident(&"x".repeat(63)).unwrap().len(), 65);
        assert_eq!(pg_ident("a\"; DROP TABLE t; --").unwrap(), "\"a\"\"; DROP TABLE t; --\"");
    }
}
