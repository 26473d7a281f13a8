//! The lexer of Go's `text/template`: text and actions between (custom) delimiters, with
//! `{{- ` / ` -}}` trimming the whitespace around an action and `{{/* */}}` comments.

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// Plain text outside actions.
    Text(String),
    /// A comment action's text.
    Comment,
    /// The left delimiter.
    LeftDelim,
    /// The right delimiter.
    RightDelim,
    /// Spaces inside an action (they separate arguments).
    Space,
    /// An identifier (a function name).
    Ident(String),
    /// A keyword: block break continue define else end if nil range template with.
    Keyword(&'static str),
    /// `true` or `false`.
    Bool(bool),
    /// `.name`.
    Field(String),
    /// `$name` or `$`.
    Variable(String),
    /// `.` alone.
    Dot,
    /// A number as written.
    Number(String),
    /// A character constant as written (`'a'`).
    Char(String),
    /// A quoted or raw string, unquoted.
    Str(String, String),
    /// `|`.
    Pipe,
    /// `(`.
    LeftParen,
    /// `)`.
    RightParen,
    /// `:=`.
    Declare,
    /// `=`.
    Assign,
    /// `,`.
    Comma,
    /// The end of the input.
    Eof,
}

/// A token with its byte offset and line.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: usize,
    pub line: usize,
}

/// A lexing error: the message and the line it is on.
#[derive(Debug)]
pub(crate) struct LexError {
    pub message: String,
    pub line: usize,
}

const KEYWORDS: [&str; 11] = ["block", "break", "continue", "define", "else", "end", "if", "nil", "range", "template", "with"];

/// Splits `input` into tokens.
pub(crate) fn lex(input: &str, left: &str, right: &str) -> Result<Vec<Token>, LexError> {
    let left = if left.is_empty() { "{{" } else { left };
    let right = if right.is_empty() { "}}" } else { right };
    let mut lx = Lexer { input, left, right, pos: 0, line: 1, tokens: Vec::new(), paren_depth: 0 };
    lx.run()?;
    Ok(lx.tokens)
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

struct Lexer<'a> {
    input: &'a str,
    left: &'a str,
    right: &'a str,
    pos: usize,
    line: usize,
    tokens: Vec<Token>,
    paren_depth: usize,
}

impl Lexer<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, LexError> {
        Err(LexError { message: message.into(), line: self.line })
    }

    fn emit(&mut self, tok: Tok, pos: usize, line: usize) {
        self.tokens.push(Token { tok, pos, line });
    }

    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// Whether a trim marker (`-` then a space) follows a left delimiter at `at`.
    fn trim_after(&self, at: usize) -> bool {
        let b = self.input.as_bytes();
        at + 1 < b.len() && b[at] == b'-' && is_space(char::from(b[at + 1]))
    }

    fn run(&mut self) -> Result<(), LexError> {
        loop {
            // Text up to the next left delimiter.
            let start = self.pos;
            let start_line = self.line;
            let Some(offset) = self.rest().find(self.left) else {
                if self.pos < self.input.len() {
                    let text = self.input[start..].to_string();
                    self.line += text.matches('\n').count();
                    self.pos = self.input.len();
                    self.emit(Tok::Text(text), start, start_line);
                }
                self.emit(Tok::Eof, self.pos, self.line);
                return Ok(());
            };
            let delim_at = self.pos + offset;
            let trim = self.trim_after(delim_at + self.left.len());
            let mut text = &self.input[start..delim_at];
            if trim {
                text = text.trim_end_matches(is_space);
            }
            self.line += self.input[start..delim_at].matches('\n').count();
            if !text.is_empty() {
                self.emit(Tok::Text(text.to_string()), start, start_line);
            }
            self.pos = delim_at;
            self.lex_action(trim)?;
        }
    }

    /// At a left delimiter: lexes one action (or comment) up to its right delimiter.
    fn lex_action(&mut self, trim_left: bool) -> Result<(), LexError> {
        let delim_pos = self.pos;
        let delim_line = self.line;
        self.pos += self.left.len();
        if trim_left {
            self.pos += 2;
        }
        // A comment: `/*` right after the delimiter (and trim marker).
        if self.rest().starts_with("/*") {
            let Some(end) = self.rest().find("*/") else {
                return self.err("unclosed comment");
            };
            let comment_end = self.pos + end + 2;
            self.line += self.input[self.pos..comment_end].matches('\n').count();
            self.pos = comment_end;
            let (trim_right, delim_len) = self.at_right_delim();
            if delim_len == 0 {
                return self.err("comment ends before closing delimiter");
            }
            self.pos += delim_len;
            self.emit(Tok::Comment, delim_pos, delim_line);
            if trim_right {
                self.skip_space();
            }
            return Ok(());
        }
        self.emit(Tok::LeftDelim, delim_pos, delim_line);
        self.paren_depth = 0;
        loop {
            let (trim_right, delim_len) = self.at_right_delim();
            if delim_len > 0 {
                if self.paren_depth > 0 {
                    return self.err("unclosed left paren");
                }
                let at = self.pos;
                let line = self.line;
                // The space before ` -}}` belongs to the marker.
                self.pos += delim_len;
                self.emit(Tok::RightDelim, at, line);
                if trim_right {
                    self.skip_space();
                }
                return Ok(());
            }
            let at = self.pos;
            let line = self.line;
            let Some(c) = self.peek() else {
                return self.err("unclosed action");
            };
            match c {
                '\n' | '\r' => {
                    // Newlines are allowed inside actions.
                    self.space(at, line);
                }
                ' ' | '\t' => self.space(at, line),
                '=' => {
                    self.bump();
                    self.emit(Tok::Assign, at, line);
                }
                ':' => {
                    self.bump();
                    if self.peek() != Some('=') {
                        return self.err("expected :=");
                    }
                    self.bump();
                    self.emit(Tok::Declare, at, line);
                }
                '|' => {
                    self.bump();
                    self.emit(Tok::Pipe, at, line);
                }
                '"' => {
                    let raw = self.quoted()?;
                    let value = unquote(&raw).map_err(|m| LexError { message: m, line })?;
                    self.emit(Tok::Str(value, raw), at, line);
                }
                '`' => {
                    self.bump();
                    let Some(end) = self.rest().find('`') else {
                        return self.err("unterminated raw quoted string");
                    };
                    let value = self.rest()[..end].to_string();
                    self.line += value.matches('\n').count();
                    self.pos += end + 1;
                    let raw = format!("`{value}`");
                    self.emit(Tok::Str(value, raw), at, line);
                }
                '$' => {
                    self.bump();
                    let name = self.word();
                    self.emit(Tok::Variable(format!("${name}")), at, line);
                }
                '\'' => {
                    self.bump();
                    loop {
                        match self.bump() {
                            Some('\\') => {
                                if matches!(self.peek(), None | Some('\n')) {
                                    return self.err("unterminated character constant");
                                }
                                self.bump();
                            }
                            None | Some('\n') => return self.err("unterminated character constant"),
                            Some('\'') => break,
                            Some(_) => {}
                        }
                    }
                    self.emit(Tok::Char(self.input[at..self.pos].to_string()), at, line);
                }
                '.' => {
                    // A number like .5, a field, or dot.
                    let next = self.rest()[1..].chars().next();
                    if next.is_some_and(|n| n.is_ascii_digit()) {
                        self.number(at, line)?;
                    } else {
                        self.bump();
                        let name = self.word();
                        if name.is_empty() {
                            self.emit(Tok::Dot, at, line);
                        } else {
                            self.emit(Tok::Field(format!(".{name}")), at, line);
                        }
                        self.check_terminator()?;
                    }
                }
                '+' | '-' | '0'..='9' => self.number(at, line)?,
                '(' => {
                    self.bump();
                    self.paren_depth += 1;
                    self.emit(Tok::LeftParen, at, line);
                }
                ')' => {
                    self.bump();
                    if self.paren_depth == 0 {
                        return self.err("unexpected right paren");
                    }
                    self.paren_depth -= 1;
                    self.emit(Tok::RightParen, at, line);
                }
                ',' => {
                    self.bump();
                    self.emit(Tok::Comma, at, line);
                }
                c if is_alnum(c) => {
                    let word = self.word();
                    let tok = match word.as_str() {
                        "true" => Tok::Bool(true),
                        "false" => Tok::Bool(false),
                        w => match KEYWORDS.iter().find(|k| **k == w) {
                            Some(k) => Tok::Keyword(k),
                            None => Tok::Ident(word.clone()),
                        },
                    };
                    self.emit(tok, at, line);
                    self.check_terminator()?;
                }
                c => {
                    let shown = if c.is_ascii_graphic() || c == ' ' { format!("{c}") } else { format!("{}", c.escape_unicode()) };
                    return self.err(format!("unrecognized character in action: U+{:04X} '{shown}'", c as u32));
                }
            }
        }
    }

    /// Whether the input continues with the right delimiter, with or without a trim marker:
    /// (trim, length to skip).
    fn at_right_delim(&self) -> (bool, usize) {
        let rest = self.rest();
        let b = rest.as_bytes();
        if b.len() >= 2 && is_space(char::from(b[0])) && b[1] == b'-' && rest[2..].starts_with(self.right) {
            return (true, 2 + self.right.len());
        }
        if rest.starts_with(self.right) {
            return (false, self.right.len());
        }
        (false, 0)
    }

    fn space(&mut self, at: usize, line: usize) {
        while let Some(c) = self.peek() {
            if !is_space(c) {
                break;
            }
            // Stop before ` -}}`: the space is part of the trim marker.
            if self.at_right_delim().0 {
                break;
            }
            self.bump();
        }
        if self.pos == at {
            // A lone space before a trim marker still separates.
            self.bump();
        }
        self.emit(Tok::Space, at, line);
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if !is_space(c) {
                break;
            }
            self.bump();
        }
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !is_alnum(c) {
                break;
            }
            self.bump();
        }
        self.input[start..self.pos].to_string()
    }

    /// After a word: the next character must end it.
    fn check_terminator(&self) -> Result<(), LexError> {
        let Some(c) = self.peek() else { return Ok(()) };
        if is_space(c) || matches!(c, '.' | ',' | '|' | ':' | ')' | '(') || self.rest().starts_with(self.right) {
            return Ok(());
        }
        self.err(format!("bad character U+{:04X} '{c}'", c as u32))
    }

    fn quoted(&mut self) -> Result<String, LexError> {
        let start = self.pos;
        self.bump();
        loop {
            match self.bump() {
                Some('\\') => {
                    if matches!(self.peek(), None | Some('\n')) {
                        return self.err("unterminated quoted string");
                    }
                    self.bump();
                }
                None | Some('\n') => return self.err("unterminated quoted string"),
                Some('"') => break,
                Some(_) => {}
            }
        }
        Ok(self.input[start..self.pos].to_string())
    }

    fn number(&mut self, at: usize, line: usize) -> Result<(), LexError> {
        let start = self.pos;
        if matches!(self.peek(), Some('+' | '-')) {
            self.bump();
        }
        let mut digits = "0123456789_";
        if self.rest().starts_with('0') {
            let r = self.rest().as_bytes();
            if r.len() > 1 {
                match r[1] {
                    b'x' | b'X' => {
                        self.pos += 2;
                        digits = "0123456789abcdefABCDEF_";
                    }
                    b'o' | b'O' => {
                        self.pos += 2;
                        digits = "01234567_";
                    }
                    b'b' | b'B' => {
                        self.pos += 2;
                        digits = "01_";
                    }
                    _ => {}
                }
            }
        }
        let accept_run = |lx: &mut Self, set: &str| {
            while let Some(c) = lx.peek() {
                if !set.contains(c) {
                    break;
                }
                lx.bump();
            }
        };
        accept_run(self, digits);
        if self.peek() == Some('.') {
            self.bump();
            accept_run(self, digits);
        }
        let exp = if digits.len() == 11 { "eE" } else if digits.contains('f') { "pP" } else { "" };
        if self.peek().is_some_and(|c| exp.contains(c)) {
            self.bump();
            if matches!(self.peek(), Some('+' | '-')) {
                self.bump();
            }
            accept_run(self, "0123456789_");
        }
        if self.peek() == Some('i') {
            self.bump();
        }
        if self.peek().is_some_and(is_alnum) {
            self.bump();
            return self.err(format!("bad number syntax: {:?}", &self.input[start..self.pos]));
        }
        self.emit(Tok::Number(self.input[start..self.pos].to_string()), at, line);
        Ok(())
    }
}

/// Go's `strconv.Unquote` of a double-quoted string.
pub(crate) fn unquote(raw: &str) -> Result<String, String> {
    let inner = raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')).ok_or("invalid syntax")?;
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next().ok_or("invalid syntax")?;
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            '\'' => return Err(format!("invalid syntax: {raw}")),
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = (0..n).filter_map(|_| chars.next()).collect();
                let v = u32::from_str_radix(&hex, 16).map_err(|_| format!("invalid syntax: {raw}"))?;
                if e == 'x' {
                    // A byte; Go strings hold bytes, Rust's chars: keep ASCII exact.
                    out.push(char::from_u32(v).ok_or("invalid syntax")?);
                } else {
                    out.push(char::from_u32(v).ok_or("invalid syntax")?);
                }
            }
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    let d = chars.next().and_then(|c| c.to_digit(8)).ok_or("invalid syntax")?;
                    v = v * 8 + d;
                }
                out.push(char::from_u32(v).ok_or("invalid syntax")?);
            }
            _ => return Err(format!("invalid syntax: {raw}")),
        }
    }
    Ok(out)
}
