//! The parser of Go's `text/template`: tokens into trees of actions, one tree per defined
//! template, with Go's parse errors (`template: NAME:LINE: MESSAGE`).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::lex::{Tok, Token, lex};

/// A list of nodes (a template body or a branch).
pub(crate) type List = Vec<Node>;

/// A node of a template tree.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Text printed as it is.
    Text(String),
    /// `{{pipeline}}`: prints the pipeline's value unless it declares variables.
    Action(Pipe),
    /// `{{if}}`, `{{with}}` or `{{range}}` with its branches.
    Branch(Box<Branch>),
    /// `{{template "name" pipeline}}`.
    Template { pos: usize, name: String, pipe: Option<Pipe> },
    /// `{{break}}`.
    Break,
    /// `{{continue}}`.
    Continue,
}

/// Which control structure a [`Branch`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BranchKind {
    /// `if`.
    If,
    /// `with`.
    With,
    /// `range`.
    Range,
}

/// `{{if pipe}} list {{else}} else_list {{end}}` and its kin.
#[derive(Clone, Debug)]
pub(crate) struct Branch {
    pub kind: BranchKind,
    pub pipe: Pipe,
    pub list: List,
    pub else_list: Option<List>,
}

/// A pipeline, possibly declaring or assigning variables.
#[derive(Clone, Debug)]
pub(crate) struct Pipe {
    pub pos: usize,
    /// `:=` (declare) rather than `=` (assign).
    pub is_assign: bool,
    pub decl: Vec<String>,
    pub cmds: Vec<Command>,
}

/// One command of a pipeline: a function or operand and its arguments.
#[derive(Clone, Debug)]
pub(crate) struct Command {
    pub pos: usize,
    pub args: Vec<Arg>,
}

/// An argument (or the first word) of a command.
#[derive(Clone, Debug)]
pub(crate) struct Arg {
    pub pos: usize,
    pub line: usize,
    pub kind: ArgKind,
}

/// What an argument is.
#[derive(Clone, Debug)]
pub(crate) enum ArgKind {
    /// `.`.
    Dot,
    /// `nil`.
    Nil,
    /// `true`/`false`.
    Bool(bool),
    /// A number constant: its value as Go's ideal constant (int or float64) and its text;
    /// `int` is set when the constant is an integer.
    Number { value: Value, text: String, int: Option<i64>, float: Option<f64> },
    /// A string constant and its quoted form.
    Str(String, String),
    /// `.a.b`.
    Field(Vec<String>),
    /// `$x.a.b`.
    Variable(Vec<String>),
    /// A function name.
    Ident(String),
    /// `(pipeline)`.
    Pipe(Box<Pipe>),
    /// `(pipeline).a.b` or `$x.a` after a non-field term.
    Chain(Box<Arg>, Vec<String>),
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ArgKind::Dot => f.write_str("."),
            ArgKind::Nil => f.write_str("nil"),
            ArgKind::Bool(b) => write!(f, "{b}"),
            ArgKind::Number { text, .. } => f.write_str(text),
            ArgKind::Str(_, quoted) => f.write_str(quoted),
            ArgKind::Field(idents) => {
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            ArgKind::Variable(idents) => f.write_str(&idents.join(".")),
            ArgKind::Ident(name) => f.write_str(name),
            ArgKind::Pipe(p) => write!(f, "({p})"),
            ArgKind::Chain(arg, fields) => {
                write!(f, "{arg}")?;
                for i in fields {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            f.write_str(&self.decl.join(", "))?;
            f.write_str(if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A parse error, printed as Go prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// The trees a text defines: the top-level one under the template's own name and each
/// `define`/`block`.
pub(crate) struct Parsed {
    pub trees: BTreeMap<String, List>,
}

/// Parses `text` as template `name`; `is_func` says which function names exist.
pub(crate) fn parse(
    name: &str,
    text: &str,
    left: &str,
    right: &str,
    is_func: &dyn Fn(&str) -> bool,
) -> Result<Parsed, ParseError> {
    let tokens = lex(text, left, right).map_err(|e| ParseError(format!("template: {name}:{}: {}", e.line, e.message)))?;
    let mut p = Parser {
        name: name.to_string(),
        left: if left.is_empty() { "{{" } else { left }.to_string(),
        right: if right.is_empty() { "}}" } else { right }.to_string(),
        tokens, i: 0, vars: vec!["$".to_string()], is_func, trees: BTreeMap::new(), range_depth: 0, depth: 0 };
    let list = p.parse_top()?;
    let mut trees = std::mem::take(&mut p.trees);
    // An empty top-level tree does not replace one defined earlier (Go's IsEmptyTree rule).
    if !is_empty_tree(&list) || !trees.contains_key(name) {
        trees.insert(name.to_string(), list);
    }
    Ok(Parsed { trees })
}

/// Whether a tree holds only space and nothing else.
pub(crate) fn is_empty_tree(list: &List) -> bool {
    list.iter().all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()))
}

struct Parser<'a> {
    name: String,
    left: String,
    right: String,
    tokens: Vec<Token>,
    i: usize,
    vars: Vec<String>,
    is_func: &'a dyn Fn(&str) -> bool,
    trees: BTreeMap<String, List>,
    range_depth: usize,
    /// How deeply control structures and parentheses nest here.
    depth: usize,
}

/// Nesting deeper than this is refused: Go's parser grows its stack, ours runs on a thread's.
const MAX_NESTING: usize = 100;

/// What ended a list.
enum End {
    End,
    Else,
}

impl Parser<'_> {
    fn error<T>(&self, line: usize, message: impl fmt::Display) -> Result<T, ParseError> {
        Err(ParseError(format!("template: {}:{line}: {message}", self.name)))
    }

    fn peek(&self) -> &Token {
        &self.tokens[self.i.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.tokens.len() {
            self.i += 1;
        }
        t
    }

    fn next_non_space(&mut self) -> Token {
        loop {
            let t = self.next();
            if t.tok != Tok::Space {
                return t;
            }
        }
    }

    fn peek_non_space(&mut self) -> Token {
        while self.peek().tok == Tok::Space {
            self.i += 1;
        }
        self.peek().clone()
    }

    /// A token as Go's parse errors show it: keywords as `<if>`, others quoted.
    fn describe(&self, t: &Token) -> String {
        let val = match &t.tok {
            Tok::Eof => return "EOF".into(),
            Tok::Keyword(k) => return format!("<{k}>"),
            Tok::Text(s) | Tok::Ident(s) | Tok::Field(s) | Tok::Variable(s) | Tok::Number(s) | Tok::Char(s) => s.clone(),
            Tok::Comment => "comment".into(),
            Tok::LeftDelim => self.left.clone(),
            Tok::RightDelim => self.right.clone(),
            Tok::Space => " ".into(),
            Tok::Bool(b) => b.to_string(),
            Tok::Dot => ".".into(),
            Tok::Str(_, raw) => raw.clone(),
            Tok::Pipe => "|".into(),
            Tok::LeftParen => "(".into(),
            Tok::RightParen => ")".into(),
            Tok::Declare => ":=".into(),
            Tok::Assign => "=".into(),
            Tok::Comma => ",".into(),
        };
        if val.chars().count() > 10 {
            let short: String = val.chars().take(10).collect();
            return format!("{short:?}...");
        }
        format!("{val:?}")
    }

    fn unexpected<T>(&self, t: &Token, context: &str) -> Result<T, ParseError> {
        self.error(t.line, format!("unexpected {} in {context}", self.describe(t)))
    }

    fn parse_top(&mut self) -> Result<List, ParseError> {
        let mut list = Vec::new();
        loop {
            let t = self.peek().clone();
            match &t.tok {
                Tok::Eof => return Ok(list),
                Tok::LeftDelim => {
                    self.next();
                    let d = self.peek_non_space();
                    if d.tok == Tok::Keyword("define") {
                        self.next();
                        self.parse_define(&t)?;
                        continue;
                    }
                    match self.action(&t)? {
                        Action::Node(n) => list.push(n),
                        Action::End(tok) | Action::Else(tok) => {
                            return self.error(tok.line, format!("unexpected {}", Self::describe_end(&tok)));
                        }
                    }
                }
                _ => {
                    if let Some(n) = self.text_node() {
                        list.push(n);
                    }
                }
            }
        }
    }

    fn describe_end(t: &Token) -> &'static str {
        match t.tok {
            Tok::Keyword("else") => "{{else}}",
            _ => "{{end}}",
        }
    }

    fn text_node(&mut self) -> Option<Node> {
        let t = self.next();
        match t.tok {
            Tok::Text(s) => Some(Node::Text(s)),
            _ => None,
        }
    }

    fn parse_define(&mut self, start: &Token) -> Result<(), ParseError> {
        let name_tok = self.next_non_space();
        let name = match &name_tok.tok {
            Tok::Str(s, _) => s.clone(),
            _ => return self.unexpected(&name_tok, "define clause"),
        };
        let close = self.next_non_space();
        if close.tok != Tok::RightDelim {
            return self.unexpected(&close, "define clause");
        }
        let saved = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let (list, end) = self.item_list(start.line)?;
        self.vars = saved;
        if !matches!(end, End::End) {
            return self.error(start.line, "unexpected {{else}} in define clause"); // unreachable in practice
        }
        self.add_tree(&name, list, start.line)
    }

    fn add_tree(&mut self, name: &str, list: List, line: usize) -> Result<(), ParseError> {
        if let Some(existing) = self.trees.get(name)
            && !is_empty_tree(existing)
            && !is_empty_tree(&list)
        {
            let _ = line;
            return Err(ParseError(format!("template: multiple definition of template {name:?}")));
        }
        if !is_empty_tree(&list) || !self.trees.contains_key(name) {
            self.trees.insert(name.to_string(), list);
        }
        Ok(())
    }

    /// Parses nodes up to `{{end}}` or `{{else}}`.
    fn item_list(&mut self, start_line: usize) -> Result<(List, End), ParseError> {
        self.depth += 1;
        let result = self.item_list_inner(start_line);
        self.depth -= 1;
        result
    }

    fn item_list_inner(&mut self, start_line: usize) -> Result<(List, End), ParseError> {
        if self.depth > MAX_NESTING {
            return self.error(self.peek().line, format!("exceeded maximum nesting depth ({MAX_NESTING})"));
        }
        let mut list = Vec::new();
        loop {
            let t = self.peek().clone();
            match &t.tok {
                Tok::Eof => {
                    let _ = start_line;
                    return self.error(t.line, "unexpected EOF");
                }
                Tok::LeftDelim => {
                    self.next();
                    let d = self.peek_non_space();
                    if d.tok == Tok::Keyword("define") {
                        return self.error(d.line, "unexpected <define> in command");
                    }
                    match self.action(&t)? {
                        Action::Node(n) => list.push(n),
                        Action::End(_) => return Ok((list, End::End)),
                        Action::Else(_) => return Ok((list, End::Else)),
                    }
                }
                _ => {
                    if let Some(n) = self.text_node() {
                        list.push(n);
                    }
                }
            }
        }
    }

    fn expect_right_delim(&mut self, context: &str) -> Result<(), ParseError> {
        let t = self.next_non_space();
        if t.tok != Tok::RightDelim {
            return self.unexpected(&t, context);
        }
        Ok(())
    }

    /// After a left delimiter.
    fn action(&mut self, left: &Token) -> Result<Action, ParseError> {
        let t = self.peek_non_space();
        match t.tok {
            Tok::Keyword("block") => {
                self.next();
                self.block(left)
            }
            Tok::Keyword("break") | Tok::Keyword("continue") => {
                self.next();
                let is_break = t.tok == Tok::Keyword("break");
                let word = if is_break { "break" } else { "continue" };
                if self.range_depth == 0 {
                    return self.error(t.line, format!("{{{{{word}}}}} outside {{{{range}}}}"));
                }
                let close = self.next_non_space();
                if close.tok != Tok::RightDelim {
                    return self.unexpected(&close, &format!("{{{{{word}}}}}"));
                }
                Ok(Action::Node(if is_break { Node::Break } else { Node::Continue }))
            }
            Tok::Keyword("else") => {
                self.next();
                Ok(Action::Else(t))
            }
            Tok::Keyword("end") => {
                self.next();
                self.expect_right_delim("end")?;
                Ok(Action::End(t))
            }
            Tok::Keyword("if") => {
                self.next();
                self.branch(BranchKind::If, "if").map(Action::Node)
            }
            Tok::Keyword("range") => {
                self.next();
                self.branch(BranchKind::Range, "range").map(Action::Node)
            }
            Tok::Keyword("with") => {
                self.next();
                self.branch(BranchKind::With, "with").map(Action::Node)
            }
            Tok::Keyword("template") => {
                self.next();
                self.template_call(&t).map(Action::Node)
            }
            _ => {
                let pipe = self.pipeline("command", Tok::RightDelim, left)?;
                Ok(Action::Node(Node::Action(pipe)))
            }
        }
    }

    fn block(&mut self, left: &Token) -> Result<Action, ParseError> {
        let name_tok = self.next_non_space();
        let name = match &name_tok.tok {
            Tok::Str(s, _) => s.clone(),
            _ => return self.unexpected(&name_tok, "block clause"),
        };
        let pipe = self.pipeline("block clause", Tok::RightDelim, left)?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let (list, end) = self.item_list(left.line)?;
        self.vars = saved;
        if !matches!(end, End::End) {
            return self.error(left.line, "unexpected {{else}} in block clause");
        }
        self.add_tree(&name, list, left.line)?;
        Ok(Action::Node(Node::Template { pos: name_tok.pos, name, pipe: Some(pipe) }))
    }

    fn template_call(&mut self, t: &Token) -> Result<Node, ParseError> {
        let name_tok = self.next_non_space();
        let name = match &name_tok.tok {
            Tok::Str(s, _) => s.clone(),
            _ => return self.unexpected(&name_tok, "template clause"),
        };
        let next = self.next_non_space();
        let pipe = if next.tok == Tok::RightDelim {
            None
        } else {
            self.i -= 1;
            Some(self.pipeline("template clause", Tok::RightDelim, t)?)
        };
        Ok(Node::Template { pos: name_tok.pos, name, pipe })
    }

    fn branch(&mut self, kind: BranchKind, context: &str) -> Result<Node, ParseError> {
        let start = self.peek().clone();
        let vars_before = self.vars.len();
        let pipe = self.pipeline(context, Tok::RightDelim, &start)?;
        if kind == BranchKind::Range {
            self.range_depth += 1;
        }
        let (list, end) = self.item_list(start.line)?;
        if kind == BranchKind::Range {
            self.range_depth -= 1;
        }
        let else_list = match end {
            End::End => None,
            End::Else => {
                // `{{else if ...}}` / `{{else with ...}}` nest a branch that shares our {{end}}.
                let t = self.peek_non_space();
                let chained = match (kind, &t.tok) {
                    (BranchKind::If, Tok::Keyword("if")) => Some(BranchKind::If),
                    (BranchKind::With, Tok::Keyword("with")) => Some(BranchKind::With),
                    _ => None,
                };
                if let Some(k) = chained {
                    self.next();
                    let nested = self.branch(k, context)?;
                    Some(vec![nested])
                } else {
                    self.expect_right_delim("else")?;
                    let (else_list, end) = self.item_list(start.line)?;
                    if !matches!(end, End::End) {
                        return self.error(self.peek().line, "expected end; found {{else}}");
                    }
                    Some(else_list)
                }
            }
        };
        self.vars.truncate(vars_before);
        Ok(Node::Branch(Box::new(Branch { kind, pipe, list, else_list })))
    }

    /// A pipeline up to `end` (a right delimiter or right paren).
    fn pipeline(&mut self, context: &str, end: Tok, start: &Token) -> Result<Pipe, ParseError> {
        self.depth += 1;
        let result = self.pipeline_inner(context, end, start);
        self.depth -= 1;
        result
    }

    fn pipeline_inner(&mut self, context: &str, end: Tok, start: &Token) -> Result<Pipe, ParseError> {
        if self.depth > MAX_NESTING {
            return self.error(start.line, format!("exceeded maximum nesting depth ({MAX_NESTING})"));
        }
        let first = self.peek_non_space();
        let mut pipe = Pipe { pos: first.pos, is_assign: false, decl: Vec::new(), cmds: Vec::new() };
        // Variable declarations: `$x :=`, `$x =`, `$i, $e :=` (Go's `decls` loop).
        loop {
            let v_tok = self.peek_non_space();
            let Tok::Variable(v) = &v_tok.tok else { break };
            let v = v.clone();
            let save = self.i;
            self.next();
            let next = self.peek_non_space();
            match next.tok {
                Tok::Declare | Tok::Assign => {
                    self.next();
                    pipe.is_assign = next.tok == Tok::Assign;
                    pipe.decl.push(v.clone());
                    self.vars.push(v);
                }
                Tok::Comma => {
                    self.next();
                    pipe.decl.push(v.clone());
                    self.vars.push(v);
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().tok {
                            Tok::Variable(_) | Tok::RightDelim | Tok::RightParen => continue,
                            _ => return self.error(next.line, "range can only initialize variables"),
                        }
                    }
                    return self.error(next.line, format!("too many declarations in {context}"));
                }
                _ => self.i = save,
            }
            break;
        }
        loop {
            let t = self.peek_non_space();
            if t.tok == end {
                self.next();
                if pipe.cmds.is_empty() {
                    return self.error(t.line, format!("missing value for {context}"));
                }
                for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
                    if let Some(a) = c.args.first()
                        && matches!(a.kind, ArgKind::Bool(_) | ArgKind::Dot | ArgKind::Nil | ArgKind::Number { .. } | ArgKind::Str(..))
                    {
                        return self.error(t.line, format!("non executable command in pipeline stage {}", i + 1));
                    }
                }
                return Ok(pipe);
            }
            match t.tok {
                Tok::Bool(_)
                | Tok::Char(_)
                | Tok::Dot
                | Tok::Field(_)
                | Tok::Ident(_)
                | Tok::Number(_)
                | Tok::Keyword("nil")
                | Tok::Str(..)
                | Tok::Variable(_)
                | Tok::LeftParen => {
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => {
                    let _ = start;
                    return self.unexpected(&t, context);
                }
            }
        }
    }

    fn command(&mut self) -> Result<Command, ParseError> {
        let first = self.peek_non_space();
        let mut cmd = Command { pos: first.pos, args: Vec::new() };
        loop {
            self.peek_non_space();
            if let Some(arg) = self.operand()? {
                cmd.args.push(arg);
            }
            let t = self.next();
            match t.tok {
                Tok::Space => continue,
                Tok::RightDelim | Tok::RightParen => {
                    self.i -= 1;
                }
                Tok::Pipe => {}
                _ => return self.unexpected(&t, "operand"),
            }
            break;
        }
        if cmd.args.is_empty() {
            return self.error(first.line, "empty command");
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> Result<Option<Arg>, ParseError> {
        let Some(node) = self.term()? else { return Ok(None) };
        if let Tok::Field(_) = self.peek().tok {
            let chain_pos = self.peek().pos;
            let chain_line = self.peek().line;
            let mut fields = Vec::new();
            while let Tok::Field(f) = &self.peek().tok {
                fields.push(f[1..].to_string());
                self.next();
            }
            let kind = match node.kind {
                ArgKind::Field(mut idents) => {
                    idents.extend(fields);
                    ArgKind::Field(idents)
                }
                ArgKind::Variable(mut idents) => {
                    idents.extend(fields);
                    ArgKind::Variable(idents)
                }
                ArgKind::Bool(_) | ArgKind::Str(..) | ArgKind::Number { .. } | ArgKind::Nil | ArgKind::Dot => {
                    return self.error(chain_line, format!("unexpected . after term {:?}", node.to_string()));
                }
                other => ArgKind::Chain(Box::new(Arg { pos: node.pos, line: node.line, kind: other }), fields),
            };
            return Ok(Some(Arg { pos: chain_pos, line: chain_line, kind }));
        }
        Ok(Some(node))
    }

    fn term(&mut self) -> Result<Option<Arg>, ParseError> {
        let t = self.next_non_space();
        let kind = match &t.tok {
            Tok::Ident(name) => {
                if !(self.is_func)(name) {
                    return self.error(t.line, format!("function {name:?} not defined"));
                }
                ArgKind::Ident(name.clone())
            }
            Tok::Dot => ArgKind::Dot,
            Tok::Keyword("nil") => ArgKind::Nil,
            Tok::Variable(v) => {
                self.check_var(v, t.line)?;
                ArgKind::Variable(vec![v.clone()])
            }
            Tok::Field(f) => ArgKind::Field(vec![f[1..].to_string()]),
            Tok::Bool(b) => ArgKind::Bool(*b),
            Tok::Char(c) => self.number(c, true, t.line)?,
            Tok::Number(n) => self.number(n, false, t.line)?,
            Tok::LeftParen => {
                let pipe = self.pipeline("parenthesized pipeline", Tok::RightParen, &t)?;
                ArgKind::Pipe(Box::new(pipe))
            }
            Tok::Str(s, raw) => ArgKind::Str(s.clone(), raw.clone()),
            _ => {
                self.i -= 1;
                return Ok(None);
            }
        };
        Ok(Some(Arg { pos: t.pos, line: t.line, kind }))
    }

    fn check_var(&self, v: &str, line: usize) -> Result<(), ParseError> {
        if self.vars.iter().any(|x| x == v) {
            return Ok(());
        }
        self.error(line, format!("undefined variable {v:?}"))
    }

    fn number(&self, text: &str, is_char: bool, line: usize) -> Result<ArgKind, ParseError> {
        if is_char {
            let inner = &text[1..text.len() - 1];
            let c = if let Some(esc) = inner.strip_prefix('\\') {
                match esc {
                    "n" => '\n',
                    "t" => '\t',
                    "r" => '\r',
                    "\\" => '\\',
                    "'" => '\'',
                    "0" => '\0',
                    _ => return self.error(line, format!("malformed character constant: {text}")),
                }
            } else {
                let mut chars = inner.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => c,
                    _ => return self.error(line, format!("malformed character constant: {text}")),
                }
            };
            let n = i64::from(c as u32);
            return Ok(ArgKind::Number { value: Value::from(n), text: text.to_string(), int: Some(n), float: Some(n as f64) });
        }
        if text.ends_with('i') {
            return self.error(line, format!("complex constants are not supported: {text}"));
        }
        let int = parse_int(text);
        let float = parse_float(text).or(int.map(|i| i as f64));
        let Some(f) = float else {
            return self.error(line, format!("illegal number syntax: {text:?}"));
        };
        let is_hex_int = text.contains(['x', 'X']) && !text.contains(['p', 'P']);
        let looks_float = !is_hex_int && text.contains(['.', 'e', 'E', 'p', 'P']);
        // An integer-valued float constant is also an integer (1e3 can be passed as an int).
        let int = int.or_else(|| (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64));
        let value = if looks_float || int.is_none() { super::value::float(f) } else { Value::from(int.unwrap_or_default()) };
        Ok(ArgKind::Number { value, text: text.to_string(), int, float: Some(f) })
    }
}

enum Action {
    Node(Node),
    End(Token),
    Else(Token),
}

fn parse_int(text: &str) -> Option<i64> {
    let t = text.replace('_', "");
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b.to_string()),
        None => (false, t.strip_prefix('+').unwrap_or(&t).to_string()),
    };
    let lower = body.to_ascii_lowercase();
    let v = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()?
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|c| c.is_ascii_digit()) {
        i64::from_str_radix(&lower[1..], 8).ok()?
    } else {
        lower.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn parse_float(text: &str) -> Option<f64> {
    let t = text.replace('_', "");
    if t.to_ascii_lowercase().contains("0x") {
        return None;
    }
    let f: f64 = t.parse().ok()?;
    f.is_finite().then_some(f)
}
