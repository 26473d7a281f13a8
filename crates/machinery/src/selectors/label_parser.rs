//! Lexer and recursive-descent parser for the string form of label selectors.
//!
//! Accepts and rejects exactly what kube-apiserver's `labels.Parse` does, including its
//! corner cases (empty values in `in (...)` lists, `k=` meaning "equals the empty string"),
//! and words errors the same way, because clients may surface these messages verbatim.

use std::collections::BTreeSet;

use super::label::{LabelOperator, LabelRequirement};
use super::validation::{go_quote, invalid, label_key_problems};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    End,
    Identifier,
    In,
    NotIn,
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    OpenParen,
    CloseParen,
    Comma,
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
}

const END: Token<'static> = Token {
    kind: Kind::End,
    text: "",
};

impl Token<'_> {
    /// Outside operator position the keywords `in`/`notin` are ordinary words (keys or values).
    fn is_word(&self) -> bool {
        matches!(self.kind, Kind::Identifier | Kind::In | Kind::NotIn)
    }
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_symbol(b: u8) -> bool {
    matches!(b, b'!' | b'=' | b'<' | b'>' | b'(' | b')' | b',')
}

/// Splits the input into tokens, always ending with an `End` token.
///
/// Kubernetes' lexer treats a NUL byte as end-of-input when it starts a token and silently
/// swallows it when it ends one; the same is done here so `%00` in a query behaves identically.
fn tokenize(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let slice = |start: usize, end: usize| input.get(start..end).unwrap_or("");
    let mut tokens = Vec::new();
    let mut pos = 0;
    loop {
        while bytes.get(pos).copied().is_some_and(is_whitespace) {
            pos += 1;
        }
        let Some(&first) = bytes.get(pos) else { break };
        if first == 0 {
            break;
        }
        let start = pos;
        let kind = if is_symbol(first) {
            let doubled = bytes.get(pos + 1) == Some(&b'=');
            pos += 1;
            match first {
                b'!' if doubled => {
                    pos += 1;
                    Kind::NotEquals
                }
                b'=' if doubled => {
                    pos += 1;
                    Kind::DoubleEquals
                }
                b'!' => Kind::Bang,
                b'=' => Kind::Equals,
                b'<' => Kind::LessThan,
                b'>' => Kind::GreaterThan,
                b'(' => Kind::OpenParen,
                b')' => Kind::CloseParen,
                _ => Kind::Comma,
            }
        } else {
            while bytes
                .get(pos)
                .is_some_and(|&b| b != 0 && !is_whitespace(b) && !is_symbol(b))
            {
                pos += 1;
            }
            match slice(start, pos) {
                "in" => Kind::In,
                "notin" => Kind::NotIn,
                _ => Kind::Identifier,
            }
        };
        tokens.push(Token {
            kind,
            text: slice(start, pos),
        });
        if bytes.get(pos) == Some(&0) {
            pos += 1;
        }
    }
    tokens.push(END);
    tokens
}

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens.get(self.pos).copied().unwrap_or(END)
    }

    fn next(&mut self) -> Token<'a> {
        let token = self.peek();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        token
    }

    fn selector(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let token = self.peek();
            if token.kind == Kind::End {
                return Ok(requirements);
            }
            if !token.is_word() && token.kind != Kind::Bang {
                return Err(format!(
                    "found '{}', expected: !, identifier, or 'end of string'",
                    token.text
                ));
            }
            let requirement = self
                .requirement()
                .map_err(|e| format!("unable to parse requirement: {e}"))?;
            requirements.push(requirement);
            let separator = self.next();
            match separator.kind {
                Kind::End => return Ok(requirements),
                Kind::Comma => {
                    let following = self.peek();
                    if !following.is_word() && following.kind != Kind::Bang {
                        return Err(format!(
                            "found '{}', expected: identifier after ','",
                            following.text
                        ));
                    }
                }
                _ => {
                    return Err(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        separator.text
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelRequirement, String> {
        let mut token = self.next();
        let negated = token.kind == Kind::Bang;
        if negated {
            token = self.next();
        }
        if !token.is_word() {
            return Err(format!("found '{}', expected: identifier", token.text));
        }
        let key = token.text.to_string();
        let key_problems = label_key_problems(&key);
        if !key_problems.is_empty() {
            return Err(invalid("key", &go_quote(&key), &key_problems.join("; ")));
        }
        // `!key` ends the requirement whatever follows; a stray operator is then reported by
        // the caller as an unexpected token, which is how Kubernetes words it.
        if negated {
            return LabelRequirement::build(key, LabelOperator::DoesNotExist, Vec::new());
        }
        if matches!(self.peek().kind, Kind::End | Kind::Comma) {
            return LabelRequirement::build(key, LabelOperator::Exists, Vec::new());
        }
        let operator_token = self.next();
        let operator = match operator_token.kind {
            Kind::In => LabelOperator::In,
            Kind::NotIn => LabelOperator::NotIn,
            Kind::Equals => LabelOperator::Equals,
            Kind::DoubleEquals => LabelOperator::DoubleEquals,
            Kind::NotEquals => LabelOperator::NotEquals,
            Kind::GreaterThan => LabelOperator::GreaterThan,
            Kind::LessThan => LabelOperator::LessThan,
            _ => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    operator_token.text
                ));
            }
        };
        let values = match operator {
            LabelOperator::In | LabelOperator::NotIn => self.value_set()?,
            _ => self.single_value()?,
        };
        LabelRequirement::build(key, operator, values)
    }

    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let open = self.next();
        if open.kind != Kind::OpenParen {
            return Err(format!("found '{}' expected: '('", open.text));
        }
        let first = self.peek();
        if first.kind == Kind::CloseParen {
            // `()` is accepted and means the single empty value.
            self.next();
            return Ok(vec![String::new()]);
        }
        if !first.is_word() && first.kind != Kind::Comma {
            return Err(format!(
                "found '{}', expected: ',', ')' or identifier",
                first.text
            ));
        }
        let values = self.value_list()?;
        let close = self.next();
        if close.kind != Kind::CloseParen {
            return Err(format!("found '{}', expected: ')'", close.text));
        }
        Ok(values.into_iter().collect())
    }

    /// Reads values up to (not including) `)`; a missing value next to a comma means "".
    fn value_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut values = BTreeSet::new();
        loop {
            let token = self.next();
            if token.is_word() {
                values.insert(token.text.to_string());
                let following = self.peek();
                match following.kind {
                    Kind::Comma => continue,
                    Kind::CloseParen => return Ok(values),
                    _ => {
                        return Err(format!("found '{}', expected: ',' or ')'", following.text));
                    }
                }
            }
            if token.kind != Kind::Comma {
                return Err(format!(
                    "found '{}', expected: ',', or identifier",
                    token.text
                ));
            }
            // Kubernetes only skips one extra comma here, so `(,,)` is an error while
            // `(,,,)` is not; reproduced deliberately for compatibility.
            if values.is_empty() {
                values.insert(String::new());
            }
            match self.peek().kind {
                Kind::CloseParen => {
                    values.insert(String::new());
                    return Ok(values);
                }
                Kind::Comma => {
                    self.next();
                    values.insert(String::new());
                }
                _ => {}
            }
        }
    }

    fn single_value(&mut self) -> Result<Vec<String>, String> {
        let token = self.peek();
        if matches!(token.kind, Kind::End | Kind::Comma) {
            return Ok(vec![String::new()]);
        }
        self.next();
        if token.is_word() {
            Ok(vec![token.text.to_string()])
        } else {
            Err(format!("found '{}', expected: identifier", token.text))
        }
    }
}

/// Parses a `labelSelector` string into its requirements, in input order.
pub(crate) fn parse(input: &str) -> Result<Vec<LabelRequirement>, String> {
    Parser {
        tokens: tokenize(input),
        pos: 0,
    }
    .selector()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(input: &str) -> Vec<Kind> {
        tokenize(input).iter().map(|t| t.kind).collect()
    }

    #[test]
    fn tokenizes_symbols_greedily() {
        assert_eq!(
            kinds("a!=b==c=d!e<f>(g),"),
            vec![
                Kind::Identifier,
                Kind::NotEquals,
                Kind::Identifier,
                Kind::DoubleEquals,
                Kind::Identifier,
                Kind::Equals,
                Kind::Identifier,
                Kind::Bang,
                Kind::Identifier,
                Kind::LessThan,
                Kind::Identifier,
                Kind::GreaterThan,
                Kind::OpenParen,
                Kind::Identifier,
                Kind::CloseParen,
                Kind::Comma,
                Kind::End,
            ]
        );
        assert_eq!(
            kinds("!!===="),
            vec![
                Kind::Bang,
                Kind::NotEquals,
                Kind::DoubleEquals,
                Kind::Equals,
                Kind::End
            ]
        );
    }

    #[test]
    fn tokenizes_keywords_and_whitespace() {
        assert_eq!(
            kinds(" in\tnotin\r\nIN "),
            vec![Kind::In, Kind::NotIn, Kind::Identifier, Kind::End]
        );
        assert_eq!(kinds(""), vec![Kind::End]);
    }

    #[test]
    fn nul_byte_behaves_like_kubernetes() {
        // Ending a token: swallowed. Starting a token: end of input.
        assert_eq!(
            kinds("a\0b"),
            vec![Kind::Identifier, Kind::Identifier, Kind::End]
        );
        assert_eq!(kinds("a \0 b"), vec![Kind::Identifier, Kind::End]);
        assert_eq!(parse("a=b\0").map(|r| r.len()), Ok(1));
    }

    #[test]
    fn value_lists_with_missing_values() {
        let values = |s: &str| parse(s).map(|r| r[0].values().to_vec());
        assert_eq!(values("k in ()"), Ok(vec![String::new()]));
        assert_eq!(values("k in (,)"), Ok(vec![String::new()]));
        assert_eq!(values("k in (a,)"), Ok(vec![String::new(), "a".into()]));
        assert_eq!(values("k in (,a)"), Ok(vec![String::new(), "a".into()]));
        assert_eq!(
            values("k in (a,,b)"),
            Ok(vec![String::new(), "a".into(), "b".into()])
        );
        assert_eq!(values("k in (,,,)"), Ok(vec![String::new()]));
        assert!(values("k in (,,)").is_err());
    }
}
