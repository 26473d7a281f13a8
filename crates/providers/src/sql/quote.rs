//! Quoting of SQL identifiers and literals: every name or value that comes from a user goes
//! through here before it is put into a statement, so no object name can inject SQL.
//!
//! MySQL/MariaDB quoting is written here: neither `mysql_async` nor `mysql_common` exports an
//! escaping function, and DDL (`CREATE USER`, `GRANT`) takes no placeholders. Literals are
//! quoted for the default `sql_mode` (backslash escapes on); the provider's connections make
//! sure `NO_BACKSLASH_ESCAPES` is off.
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
    /// MySQL would refuse it.
    #[error("identifier {0:?} is longer than MySQL's limit of 64 characters")]
    TooLongMysql(String),
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

/// The longest database or table name MySQL and MariaDB accept (64 characters).
pub const MYSQL_MAX_IDENTIFIER_CHARS: usize = 64;

/// A MySQL/MariaDB identifier in backticks (`` my`db `` becomes `` `my``db` ``).
pub fn mysql_ident(name: &str) -> Result<String, QuoteError> {
    if name.is_empty() {
        return Err(QuoteError::Empty);
    }
    if name.contains('\0') {
        return Err(QuoteError::Nul(name.into()));
    }
    if name.chars().count() > MYSQL_MAX_IDENTIFIER_CHARS {
        return Err(QuoteError::TooLongMysql(name.into()));
    }
    Ok(format!("`{}`", name.replace('`', "``")))
}

/// A MySQL/MariaDB string literal: `'` doubled, `\` doubled (`it's` becomes `'it''s'`).
pub fn mysql_literal(value: &str) -> Result<String, QuoteError> {
    if value.contains('\0') {
        return Err(QuoteError::Nul(value.into()));
    }
    Ok(format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    /// Reads one token quoted with `quote` from the start of `sql`, as the servers' lexers
    /// do (a doubled quote stands for itself; with `escapes`, a backslash takes the next
    /// character as it is): the value and the rest of the text.
    fn lex_quoted(sql: &str, quote: char, escapes: bool) -> Option<(String, &str)> {
        let body = sql.strip_prefix(quote)?;
        let mut value = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' if escapes => value.push(chars.next()?.1),
                c if c == quote && chars.peek().map(|p| p.1) == Some(quote) => {
                    chars.next();
                    value.push(quote);
                }
                c if c == quote => return Some((value, &body[i + 1..])),
                c => value.push(c),
            }
        }
        None
    }

    /// A PostgreSQL double-quoted identifier.
    fn lex_ident(sql: &str) -> Option<(String, &str)> {
        lex_quoted(sql, '"', false)
    }

    /// A PostgreSQL string literal (`'...'` or `E'...'`, with standard_conforming_strings on).
    fn lex_literal(sql: &str) -> Option<(String, &str)> {
        match sql.strip_prefix(" E").or_else(|| sql.strip_prefix('E')) {
            Some(body) => lex_quoted(body, '\'', true),
            None => lex_quoted(sql, '\'', false),
        }
    }

    /// A MySQL backtick-quoted identifier.
    fn lex_mysql_ident(sql: &str) -> Option<(String, &str)> {
        lex_quoted(sql, '`', false)
    }

    /// A MySQL single-quoted literal (backslash escapes on, as by default).
    fn lex_mysql_literal(sql: &str) -> Option<(String, &str)> {
        lex_quoted(sql, '\'', true)
    }

    proptest! {
        /// MySQL: whatever the name or value, one token that reads back as it, nothing after.
        #[test]
        fn a_mysql_identifier_or_literal_is_one_token(name in "[^\\x00]{1,40}") {
            let quoted = mysql_ident(&name).unwrap();
            prop_assert_eq!(lex_mysql_ident(&quoted).unwrap(), (name.clone(), ""));
            let literal = mysql_literal(&name).unwrap();
            prop_assert_eq!(lex_mysql_literal(&literal).unwrap(), (name, ""));
        }

        #[test]
        fn mysql_quote_and_backslash_heavy_names_stay_one_token(name in "[`'\"\\\\; a-z@%-]{1,30}") {
            let quoted = mysql_ident(&name).unwrap();
            prop_assert_eq!(lex_mysql_ident(&quoted).unwrap(), (name.clone(), ""));
            let literal = mysql_literal(&name).unwrap();
            prop_assert_eq!(lex_mysql_literal(&literal).unwrap(), (name, ""));
        }

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
        assert_eq!(mysql_ident("a`; DROP DATABASE d; --").unwrap(), "`a``; DROP DATABASE d; --`");
        assert_eq!(mysql_literal("it's \\' x").unwrap(), "'it''s \\\\'' x'");
        assert!(matches!(mysql_ident(&"x".repeat(65)), Err(QuoteError::TooLongMysql(_))));
        assert_eq!(mysql_ident(""), Err(QuoteError::Empty));
        assert!(matches!(mysql_literal("a\0b"), Err(QuoteError::Nul(_))));
    }
}
