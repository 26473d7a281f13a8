//! The executor of Go's `text/template`: walks a tree over JSON data with Go's rules for
//! fields, variables, pipelines, function calls and their argument types, and Go's error
//! messages (`template: NAME:LINE:COL: executing "NAME" at <NODE>: MESSAGE`).

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

use super::parse::{Arg, ArgKind, Branch, BranchKind, Command, List, Node, Pipe};
use super::value::{Val, go_type_name, print, truth};
use super::{ExecError, Func, MissingKey, P, Template};

/// Go's `maxExecDepth` is 100000; templates here run on a thread's stack, so nesting of
/// `template`/`include` calls is bounded lower.
pub(crate) const MAX_DEPTH: usize = 1000;

/// Where an error happened: the node Go's `ErrorContext` would name.
#[derive(Clone, Copy)]
enum At<'t> {
    None,
    Arg(&'t Arg),
    Cmd(&'t Command),
    Pipe(&'t Pipe),
    Template(usize, &'t str, Option<&'t Pipe>),
    Branch(&'t Branch, usize),
}

/// How a list ended.
#[derive(PartialEq, Eq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

/// The state of one execution.
pub struct State<'t, 'a> {
    pub(crate) tmpl: &'t Template,
    /// The name of the template being executed.
    name: &'t str,
    /// The text that tree was parsed from and the name it was parsed under.
    text: &'t str,
    parse_name: &'t str,
    vars: Vec<(&'t str, Val<'a>)>,
    at: At<'t>,
    pub(crate) depth: usize,
    /// Output is written here.
    pub(crate) out: String,
    /// How many times each template is being included (function-go-templating's `include`).
    pub includes: BTreeMap<String, usize>,
}

type R<T> = Result<T, ExecError>;

impl<'t, 'a> State<'t, 'a> {
    pub(crate) fn new(tmpl: &'t Template, name: &'t str, dot: Val<'a>) -> R<State<'t, 'a>> {
        let Some(tree) = tmpl.trees.get(name) else {
            return Err(ExecError(format!(
                "template: no template {name:?} associated with template {:?}",
                tmpl.name
            )));
        };
        Ok(State {
            tmpl,
            name,
            text: &tree.text,
            parse_name: &tree.parse_name,
            vars: vec![("$", dot)],
            at: At::None,
            depth: 0,
            out: String::new(),
            includes: BTreeMap::new(),
        })
    }

    /// Runs the named template with `dot`, appending to the output.
    pub(crate) fn run(&mut self, dot: &Val<'a>) -> R<()> {
        let tree = &self.tmpl.trees[self.name];
        self.walk_list(dot, &tree.list)?;
        Ok(())
    }

    /// Runs another template of the set into a fresh output (function-go-templating's
    /// `include`), sharing the depth count.
    /// Runs another template of the set with `dot` and returns its output.
    pub fn execute_nested(&mut self, name: &str, dot: Val<'a>) -> Result<String, String> {
        let Some((key, _)) = self.tmpl.trees.get_key_value(name) else {
            return Err(format!(
                "template: no template {name:?} associated with template {:?}",
                self.tmpl.name
            ));
        };
        if self.depth >= MAX_DEPTH {
            return Err(format!("exceeded maximum template depth ({MAX_DEPTH})"));
        }
        let mut nested = State::new(self.tmpl, key, dot.clone()).map_err(|e| e.0)?;
        nested.depth = self.depth + 1;
        nested.includes = std::mem::take(&mut self.includes);
        let result = nested.run(&dot);
        self.includes = std::mem::take(&mut nested.includes);
        result.map_err(|e| e.0)?;
        Ok(nested.out)
    }

    /// Makes every variable holding `old` hold `new`: Sprig's `set`, `unset` and `merge`
    /// change a dictionary in place, and whoever holds it sees the change.
    pub fn rebind(&mut self, old: &Val<'a>, new: &Val<'a>) {
        for (_, v) in self.vars.iter_mut() {
            let same = match (&*v, old) {
                (Val::Own(x, _), Val::Own(y, _)) => Rc::ptr_eq(x, y),
                (Val::Ref(x, _), Val::Ref(y, _)) => std::ptr::eq(*x, *y),
                _ => false,
            };
            if same {
                *v = new.clone();
            }
        }
    }

    fn location(&self, pos: usize) -> String {
        let pos = pos.min(self.text.len());
        let before = &self.text[..pos];
        let line = 1 + before.matches('\n').count();
        let col = match before.rfind('\n') {
            None => pos,
            Some(nl) => pos - (nl + 1),
        };
        format!("{}:{line}:{col}", self.parse_name)
    }

    fn error<T>(&self, message: impl std::fmt::Display) -> R<T> {
        let name = self.name;
        let (pos, context) = match self.at {
            At::None => return Err(ExecError(format!("template: {name}: {message}"))),
            At::Arg(a) => (a.pos, a.to_string()),
            At::Cmd(c) => (c.pos, c.to_string()),
            At::Pipe(p) => (p.pos, p.to_string()),
            At::Template(pos, tname, pipe) => (
                pos,
                match pipe {
                    Some(p) => format!("{{{{template {tname:?} {p}}}}}"),
                    None => format!("{{{{template {tname:?}}}}}"),
                },
            ),
            At::Branch(b, pos) => {
                let word = match b.kind {
                    BranchKind::If => "if",
                    BranchKind::With => "with",
                    BranchKind::Range => "range",
                };
                (pos, format!("{{{{{word} {}}}}}", b.pipe))
            }
        };
        Err(ExecError(format!(
            "template: {}: executing {name:?} at <{context}>: {message}",
            self.location(pos)
        )))
    }

    fn walk_list(&mut self, dot: &Val<'a>, list: &'t List) -> R<Flow> {
        for node in list {
            let flow = self.walk(dot, node)?;
            if flow != Flow::Normal {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &Val<'a>, node: &'t Node) -> R<Flow> {
        match node {
            Node::Text(t) => self.out.push_str(t),
            Node::Action(pipe) => {
                let v = self.pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.at = At::Pipe(pipe);
                    print(&mut self.out, &v);
                }
            }
            Node::Branch(b) => return self.branch(dot, b),
            Node::Template { pos, name, pipe, .. } => self.template(dot, *pos, name, pipe.as_ref())?,
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn template(&mut self, dot: &Val<'a>, pos: usize, name: &'t str, pipe: Option<&'t Pipe>) -> R<()> {
        self.at = At::Template(pos, name, pipe);
        let Some((key, tree)) = self.tmpl.trees.get_key_value(name) else {
            return self.error(format!("template {name:?} not defined"));
        };
        if self.depth >= MAX_DEPTH {
            return self.error(format!("exceeded maximum template depth ({MAX_DEPTH})"));
        }
        let new_dot = match pipe {
            Some(p) => self.pipeline(dot, p)?,
            None => Val::Missing,
        };
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$", new_dot.clone())]);
        let saved = (self.name, self.text, self.parse_name);
        self.name = key;
        self.text = &tree.text;
        self.parse_name = &tree.parse_name;
        self.depth += 1;
        let result = self.walk_list(&new_dot, &tree.list);
        self.depth -= 1;
        (self.name, self.text, self.parse_name) = saved;
        self.vars = saved_vars;
        result.map(|_| ())
    }

    fn branch(&mut self, dot: &Val<'a>, b: &'t Branch) -> R<Flow> {
        let mark = self.vars.len();
        let result = match b.kind {
            BranchKind::If | BranchKind::With => self.if_or_with(dot, b),
            BranchKind::Range => self.range(dot, b),
        };
        self.vars.truncate(mark);
        result
    }

    fn if_or_with(&mut self, dot: &Val<'a>, b: &'t Branch) -> R<Flow> {
        let val = self.pipeline(dot, &b.pipe)?;
        if truth(&val) {
            if b.kind == BranchKind::With {
                self.walk_list(&val, &b.list)
            } else {
                self.walk_list(dot, &b.list)
            }
        } else if let Some(else_list) = &b.else_list {
            self.walk_list(dot, else_list)
        } else {
            Ok(Flow::Normal)
        }
    }

    fn range(&mut self, dot: &Val<'a>, b: &'t Branch) -> R<Flow> {
        let val = self.pipeline(dot, &b.pipe)?;
        let mark = self.vars.len();
        let mut any = false;
        let mut one = |st: &mut Self, index: Val<'a>, elem: Val<'a>| -> R<bool> {
            any = true;
            let decl = &b.pipe.decl;
            if !decl.is_empty() {
                if b.pipe.is_assign {
                    if decl.len() > 1 {
                        st.set_var(&decl[0], index.clone())?;
                        st.set_var(&decl[1], elem.clone())?;
                    } else {
                        st.set_var(&decl[0], elem.clone())?;
                    }
                } else {
                    let n = st.vars.len();
                    st.vars[n - 1].1 = elem.clone();
                    if decl.len() > 1 {
                        st.vars[n - 2].1 = index;
                    }
                }
            }
            let flow = st.walk_list(&elem, &b.list);
            st.vars.truncate(mark);
            Ok(flow? == Flow::Break)
        };
        match val.get() {
            Value::Array(items) if !val.is_missing() => {
                for i in 0..items.len() {
                    let elem = val.index(i);
                    if one(self, Val::int(i as i64), elem)? {
                        break;
                    }
                }
            }
            Value::Object(map) if !val.is_missing() => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let elem = val.key(&k);
                    if one(self, Val::str(k), elem)? {
                        break;
                    }
                }
            }
            Value::Number(n) if n.is_i64() && !val.is_missing() => {
                if b.pipe.decl.len() > 1 {
                    self.at = At::Branch(b, b.pipe.pos);
                    return self.error(format!("can't use {} to iterate over more than one variable", n));
                }
                for i in 0..n.as_i64().unwrap_or(0) {
                    if one(self, Val::int(i), Val::int(i))? {
                        break;
                    }
                }
            }
            _ if val.is_missing() || val.get().is_null() => {}
            other => {
                self.at = At::Branch(b, b.pipe.pos);
                let shown = super::value::sprint(&[other.clone()]);
                return self.error(format!("range can't iterate over {shown}"));
            }
        }
        if !any && let Some(else_list) = &b.else_list {
            return self.walk_list(dot, else_list);
        }
        Ok(Flow::Normal)
    }

    fn set_var(&mut self, name: &str, value: Val<'a>) -> R<()> {
        for (n, v) in self.vars.iter_mut().rev() {
            if *n == name {
                *v = value;
                return Ok(());
            }
        }
        self.error(format!("undefined variable: {name}"))
    }

    fn var_value(&self, name: &str) -> R<Val<'a>> {
        for (n, v) in self.vars.iter().rev() {
            if *n == name {
                return Ok(v.clone());
            }
        }
        self.error(format!("undefined variable: {name}"))
    }

    fn pipeline(&mut self, dot: &Val<'a>, pipe: &'t Pipe) -> R<Val<'a>> {
        self.at = At::Pipe(pipe);
        let mut value: Option<Val<'a>> = None;
        for cmd in &pipe.cmds {
            let v = self.command(dot, cmd, value.take())?;
            // Go digs a nil interface down to "no value" after every command.
            value = Some(if v.get().is_null() { Val::Missing } else { v });
        }
        let value = value.unwrap_or(Val::Missing);
        for name in &pipe.decl {
            if pipe.is_assign {
                self.set_var(name, value.clone())?;
            } else {
                self.vars.push((name.as_str(), value.clone()));
            }
        }
        Ok(value)
    }

    fn command(&mut self, dot: &Val<'a>, cmd: &'t Command, fin: Option<Val<'a>>) -> R<Val<'a>> {
        let first = &cmd.args[0];
        match &first.kind {
            ArgKind::Field(idents) => return self.field_node(dot, first, idents, &cmd.args, fin),
            ArgKind::Chain(node, fields) => return self.chain_node(dot, first, node, fields, &cmd.args, fin),
            ArgKind::Ident(name) => return self.function(dot, first, name, cmd, &cmd.args[1..], fin),
            ArgKind::Pipe(p) => {
                self.not_a_function(&cmd.args, &fin)?;
                return self.pipeline(dot, p);
            }
            ArgKind::Variable(idents) => return self.variable_node(dot, first, idents, &cmd.args, fin),
            _ => {}
        }
        self.at = At::Arg(first);
        self.not_a_function(&cmd.args, &fin)?;
        match &first.kind {
            ArgKind::Bool(b) => Ok(Val::own(Value::Bool(*b))),
            ArgKind::Dot => Ok(dot.clone()),
            ArgKind::Nil => self.error("nil is not a command"),
            ArgKind::Number { value, .. } => Ok(Val::own(value.clone())),
            ArgKind::Str(s, _) => Ok(Val::str(s.clone())),
            _ => self.error(format!("can't evaluate command {first}")),
        }
    }

    fn not_a_function(&self, args: &[Arg], fin: &Option<Val<'a>>) -> R<()> {
        if args.len() > 1 || fin.is_some() {
            return self.error(format!("can't give argument to non-function {}", args[0]));
        }
        Ok(())
    }

    fn field_node(&mut self, dot: &Val<'a>, node: &'t Arg, idents: &'t [String], args: &'t [Arg], fin: Option<Val<'a>>) -> R<Val<'a>> {
        self.at = At::Arg(node);
        self.field_chain(dot.clone(), idents, args, fin)
    }

    fn variable_node(&mut self, _dot: &Val<'a>, node: &'t Arg, idents: &'t [String], args: &'t [Arg], fin: Option<Val<'a>>) -> R<Val<'a>> {
        self.at = At::Arg(node);
        let value = self.var_value(&idents[0])?;
        if idents.len() == 1 {
            self.not_a_function(args, &fin)?;
            return Ok(value);
        }
        self.field_chain(value, &idents[1..], args, fin)
    }

    fn chain_node(&mut self, dot: &Val<'a>, node: &'t Arg, inner: &'t Arg, fields: &'t [String], args: &'t [Arg], fin: Option<Val<'a>>) -> R<Val<'a>> {
        self.at = At::Arg(node);
        if matches!(inner.kind, ArgKind::Nil) {
            return self.error(format!("indirection through explicit nil in {node}"));
        }
        let recv = self.eval_arg(dot, P::Val, inner)?;
        self.at = At::Arg(node);
        self.field_chain(recv, fields, args, fin)
    }

    fn field_chain(&mut self, mut recv: Val<'a>, idents: &[String], args: &[Arg], fin: Option<Val<'a>>) -> R<Val<'a>> {
        let n = idents.len();
        for ident in &idents[..n - 1] {
            recv = self.field(ident, false, recv)?;
        }
        let has_args = args.len() > 1 || fin.is_some();
        self.field(&idents[n - 1], has_args, recv)
    }

    fn field(&self, name: &str, has_args: bool, recv: Val<'a>) -> R<Val<'a>> {
        if recv.is_missing() {
            if self.tmpl.missing_key == MissingKey::Error {
                return self.error(format!("nil data; no entry for key {name:?}"));
            }
            return Ok(Val::Missing);
        }
        match recv.get() {
            Value::Null => self.error(format!("nil pointer evaluating interface {{}}.{name}")),
            Value::Object(map) => {
                if has_args {
                    return self.error(format!("{name} is not a method but has arguments"));
                }
                if map.contains_key(name) {
                    return Ok(recv.key(name));
                }
                match self.tmpl.missing_key {
                    MissingKey::Invalid => Ok(Val::Missing),
                    MissingKey::Zero => Ok(Val::own(Value::Null)),
                    MissingKey::Error => self.error(format!("map has no entry for key {name:?}")),
                }
            }
            _ => self.error(format!("can't evaluate field {name} in type {}", recv.type_name())),
        }
    }

    fn function(&mut self, dot: &Val<'a>, ident: &'t Arg, name: &str, cmd: &'t Command, args: &'t [Arg], fin: Option<Val<'a>>) -> R<Val<'a>> {
        self.at = At::Arg(ident);
        let Some(func) = self.tmpl.funcs.get(name) else {
            return self.error(format!("{name:?} is not a defined function"));
        };
        self.call(dot, func, At::Cmd(cmd), name, args, fin)
    }

    fn call(&mut self, dot: &Val<'a>, func: &Func, node: At<'t>, name: &str, args: &'t [Arg], fin: Option<Val<'a>>) -> R<Val<'a>> {
        let num_in = args.len() + usize::from(fin.is_some());
        let num_fixed = func.params.len();
        if func.variadic.is_some() {
            if num_in < num_fixed {
                return self.error(format!("wrong number of args for {name}: want at least {num_fixed} got {}", args.len()));
            }
        } else if num_in != num_fixed {
            return self.error(format!("wrong number of args for {name}: want {num_fixed} got {num_in}"));
        }
        // `and` and `or` evaluate their arguments only as far as needed.
        if func.lazy {
            let want = name == "or";
            let mut v = Val::Missing;
            for arg in args {
                v = self.eval_arg(dot, P::Val, arg)?;
                if truth(&v) == want {
                    return Ok(v);
                }
            }
            if let Some(f) = fin {
                v = f;
            }
            return Ok(v);
        }
        let mut argv = Vec::with_capacity(num_in);
        for (i, arg) in args.iter().enumerate() {
            let p = if i < num_fixed { func.params[i] } else { func.variadic.unwrap_or(P::Any) };
            argv.push(self.eval_arg(dot, p, arg)?);
        }
        if let Some(f) = fin {
            let i = argv.len();
            let p = if i < num_fixed { func.params[i] } else { func.variadic.unwrap_or(P::Any) };
            argv.push(self.validate(f, p)?);
        }
        let result = match func.call {
            super::Call::Ctx(f) => f(self, argv),
            super::Call::Pure(f) => {
                let refs: Vec<&Value> = argv.iter().map(Val::get).collect();
                f(&refs).map(Val::own)
            }
        };
        match result {
            Ok(v) => Ok(v),
            Err(e) => {
                self.at = node;
                self.error(format!("error calling {name}: {e}"))
            }
        }
    }

    /// Go's `validateType`: the value as a parameter of type `p` takes it.
    fn validate(&self, v: Val<'a>, p: P) -> R<Val<'a>> {
        if v.is_missing() {
            return match p {
                P::Val => Ok(v),
                P::Any | P::Map | P::Slice => Ok(Val::own(Value::Null)),
                _ => self.error(format!("invalid value; expected {}", p.go_name())),
            };
        }
        let ok = match (p, v.get()) {
            (P::Any | P::Val, _) => true,
            (P::Str, Value::String(_)) => true,
            (P::Int, Value::Number(n)) => !n.is_f64(),
            (P::Float, Value::Number(n)) => n.is_f64(),
            (P::Bool, Value::Bool(_)) => true,
            (P::Map, Value::Object(_)) => true,
            (P::Slice, Value::Array(_)) => true,
            _ => false,
        };
        if ok {
            return Ok(v);
        }
        let got = if v.get().is_null() { "interface {}".to_string() } else { go_type_name(v.get()) };
        self.error(format!("wrong type for value; expected {}; got {got}", p.go_name()))
    }

    fn eval_arg(&mut self, dot: &Val<'a>, p: P, arg: &'t Arg) -> R<Val<'a>> {
        self.at = At::Arg(arg);
        let v = match &arg.kind {
            ArgKind::Dot => dot.clone(),
            ArgKind::Nil => {
                return match p {
                    P::Any | P::Map | P::Slice => Ok(Val::own(Value::Null)),
                    P::Val => Ok(Val::Missing),
                    _ => self.error(format!("cannot assign nil to {}", p.go_name())),
                };
            }
            ArgKind::Field(idents) => self.field_node(dot, arg, idents, std::slice::from_ref(arg), None)?,
            ArgKind::Variable(idents) => self.variable_node(dot, arg, idents, std::slice::from_ref(arg), None)?,
            ArgKind::Pipe(pipe) => self.pipeline(dot, pipe)?,
            ArgKind::Ident(name) => {
                self.at = At::Arg(arg);
                let Some(func) = self.tmpl.funcs.get(name.as_str()) else {
                    return self.error(format!("{name:?} is not a defined function"));
                };
                self.call(dot, func, At::Arg(arg), name, &[], None)?
            }
            ArgKind::Chain(inner, fields) => self.chain_node(dot, arg, inner, fields, std::slice::from_ref(arg), None)?,
            ArgKind::Bool(b) => {
                return match p {
                    P::Bool | P::Any | P::Val => Ok(Val::own(Value::Bool(*b))),
                    P::Str => self.error(format!("expected string; found {arg}")),
                    P::Int => self.error(format!("expected integer; found {arg}")),
                    P::Float => self.error(format!("expected float; found {arg}")),
                    _ => self.error(format!("can't handle {arg} for arg of type {}", p.go_name())),
                };
            }
            ArgKind::Number { value, int, float, .. } => {
                return match p {
                    P::Any | P::Val => Ok(Val::own(value.clone())),
                    P::Int => match int {
                        Some(i) => Ok(Val::int(*i)),
                        None => self.error(format!("expected integer; found {arg}")),
                    },
                    P::Float => match float {
                        Some(f) => Ok(Val::own(super::value::float(*f))),
                        None => self.error(format!("expected float; found {arg}")),
                    },
                    P::Str => self.error(format!("expected string; found {arg}")),
                    P::Bool => self.error(format!("expected bool; found {arg}")),
                    _ => self.error(format!("can't handle {arg} for arg of type {}", p.go_name())),
                };
            }
            ArgKind::Str(s, _) => {
                return match p {
                    P::Str | P::Any | P::Val => Ok(Val::str(s.clone())),
                    P::Int => self.error(format!("expected integer; found {arg}")),
                    P::Float => self.error(format!("expected float; found {arg}")),
                    P::Bool => self.error(format!("expected bool; found {arg}")),
                    _ => self.error(format!("can't handle {arg} for arg of type {}", p.go_name())),
                };
            }
        };
        self.at = At::Arg(arg);
        self.validate(v, p)
    }
}

impl Template {
    /// Runs template `name` of the set over `data`, returning what it printed.
    pub(crate) fn run_named(&self, name: &str, data: &Value) -> Result<String, ExecError> {
        let dot = Val::Ref(data, false);
        let mut state = State::new(self, name, dot.clone())?;
        state.run(&dot)?;
        Ok(state.out)
    }
}
