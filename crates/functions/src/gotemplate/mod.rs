//! Go's `text/template`, over JSON data, with Go's semantics and error messages.
//!
//! Written here rather than taken from a crate: the Rust ports of Go templates (`gtmpl`,
//! and the Jinja-family engines, which are a different language) do not reproduce what
//! Crossplane users rely on: float64 numbers that do not compare with integer constants
//! (`incompatible types for comparison`), `<no value>` for a missing key, `missingkey`
//! options, maps ranged in key order, typed function parameters (`wrong type for value;
//! expected int; got float64`), `{{break}}`/`{{continue}}`, `else if`/`else with`, and the
//! exact `template: NAME:LINE:COL: executing ...` errors. Every one of these is a case of the
//! test table in `tests/`.
//!
//! - [`lex`](self) and `parse`: text into trees (`define`/`block` add named trees).
//! - `exec`: walks a tree over a [`Val`]; functions are called through [`Func`] with Go's
//!   argument checks.
//! - `builtins`: Go's predefined functions; [`sprig`]: Sprig v3's function set (without
//!   `env`/`expandenv`).
//!
//! Numbers keep their Go type in their JSON form (see [`crate::golang::value`]): a float
//! number is a float64 (every number in Crossplane's request is), an integer number an int.
//! Not reproduced: methods on data (JSON has none), `call` of a function value (JSON holds
//! none, so `call` always reports a non-function), complex numbers, nesting of `template`
//! calls deeper than 1000 (Go allows 100000) and of control structures or parentheses deeper
//! than 100 (Go has no limit): the engine runs on a thread's fixed stack.

mod builtins;
mod exec;
mod lex;
mod parse;
pub mod sprig;
mod value;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

pub use exec::State;
pub use parse::ParseError;
pub use value::{Val, go_type_name, sprint, to_string, truth};

/// A parameter type of a function, as Go's reflection checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum P {
    /// `interface {}`: anything; no value becomes nil.
    Any,
    /// `reflect.Value`: anything, "no value" kept.
    Val,
    /// `string`.
    Str,
    /// `int`.
    Int,
    /// `float64`.
    Float,
    /// `bool`.
    Bool,
    /// `map[string]interface {}`.
    Map,
    /// `[]interface {}`.
    Slice,
}

impl P {
    /// The Go name of the type.
    pub fn go_name(self) -> &'static str {
        match self {
            P::Any => "interface {}",
            P::Val => "reflect.Value",
            P::Str => "string",
            P::Int => "int",
            P::Float => "float64",
            P::Bool => "bool",
            P::Map => "map[string]interface {}",
            P::Slice => "[]interface {}",
        }
    }
}

/// A function that needs the execution state (to return data by reference, or to run other
/// templates).
pub type CtxCall = for<'t, 'a> fn(&mut State<'t, 'a>, Vec<Val<'a>>) -> Result<Val<'a>, String>;

/// A function of its arguments' values alone.
pub type PureCall = fn(&[&Value]) -> Result<Value, String>;

/// How a function is called, with arguments already checked against its parameter types.
#[derive(Clone, Copy)]
pub enum Call {
    /// With the execution state.
    Ctx(CtxCall),
    /// On values.
    Pure(PureCall),
}

/// A function templates can call.
#[derive(Clone, Copy)]
pub struct Func {
    /// The fixed parameters.
    pub params: &'static [P],
    /// The type of the variadic parameters, if the function takes any.
    pub variadic: Option<P>,
    /// `and`/`or`: arguments are evaluated only as far as needed.
    pub lazy: bool,
    /// The implementation.
    pub call: Call,
}

impl Func {
    /// A function of the state with fixed parameters.
    pub const fn ctx(params: &'static [P], call: CtxCall) -> Func {
        Func { params, variadic: None, lazy: false, call: Call::Ctx(call) }
    }

    /// A function of the state with fixed parameters followed by any number of `variadic`.
    pub const fn ctx_variadic(params: &'static [P], variadic: P, call: CtxCall) -> Func {
        Func { params, variadic: Some(variadic), lazy: false, call: Call::Ctx(call) }
    }

    /// A function of values with fixed parameters.
    pub const fn pure(params: &'static [P], call: PureCall) -> Func {
        Func { params, variadic: None, lazy: false, call: Call::Pure(call) }
    }

    /// A function of values with fixed parameters followed by any number of `variadic`.
    pub const fn pure_variadic(params: &'static [P], variadic: P, call: PureCall) -> Func {
        Func { params, variadic: Some(variadic), lazy: false, call: Call::Pure(call) }
    }
}

/// A table of functions by name.
pub type Funcs = HashMap<&'static str, Func>;

/// Go's predefined template functions (`and`, `or`, `not`, `len`, `index`, `slice`,
/// `print`, `printf`, `println`, `eq`..`ge`, `html`, `js`, `urlquery`, `call`).
pub fn builtin_funcs() -> Funcs {
    builtins::funcs()
}

/// The `missingkey` option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingKey {
    /// `missingkey=default` / `invalid`: a missing key is "no value".
    #[default]
    Invalid,
    /// `missingkey=zero`: the map's zero value (nil).
    Zero,
    /// `missingkey=error`: execution stops.
    Error,
}

/// An execution error, printed as Go prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecError(pub String);

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ExecError {}

/// One named tree and where it was parsed from.
pub(crate) struct Tree {
    list: parse::List,
    text: Arc<str>,
    parse_name: String,
}

/// A set of templates sharing functions and options, as Go's `*template.Template`.
pub struct Template {
    name: String,
    trees: BTreeMap<String, Tree>,
    missing_key: MissingKey,
    left: String,
    right: String,
    funcs: Arc<Funcs>,
}

impl Template {
    /// A new template called `name` using `funcs`.
    pub fn new(name: &str, funcs: Arc<Funcs>) -> Template {
        Template {
            name: name.to_string(),
            trees: BTreeMap::new(),
            missing_key: MissingKey::Invalid,
            left: "{{".into(),
            right: "}}".into(),
            funcs,
        }
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the action delimiters (empty: the default `{{` / `}}`).
    pub fn delims(&mut self, left: &str, right: &str) {
        self.left = if left.is_empty() { "{{".into() } else { left.into() };
        self.right = if right.is_empty() { "}}".into() } else { right.into() };
    }

    /// Applies an option such as `missingkey=error` (Go panics on an unknown option; this
    /// reports it).
    pub fn option(&mut self, option: &str) -> Result<(), String> {
        let Some((key, value)) = option.split_once('=') else {
            return Err(format!("unrecognized option: {option}"));
        };
        if key != "missingkey" {
            return Err(format!("unrecognized option: {option}"));
        }
        self.missing_key = match value {
            "invalid" | "default" => MissingKey::Invalid,
            "zero" => MissingKey::Zero,
            "error" => MissingKey::Error,
            _ => return Err(format!("unrecognized option: {option}")),
        };
        Ok(())
    }

    /// Parses `text` into the set: its top level becomes this template, its `define`s and
    /// `block`s named templates.
    pub fn parse(&mut self, text: &str) -> Result<(), ParseError> {
        let funcs = self.funcs.clone();
        let parsed = parse::parse(&self.name, text, &self.left, &self.right, &|n| funcs.contains_key(n))?;
        let text: Arc<str> = Arc::from(text);
        for (name, list) in parsed.trees {
            if let Some(existing) = self.trees.get(&name)
                && parse::is_empty_tree(&list)
                && !parse::is_empty_tree(&existing.list)
            {
                continue;
            }
            self.trees.insert(name, Tree { list, text: text.clone(), parse_name: self.name.clone() });
        }
        Ok(())
    }

    /// Whether the set has a template called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    /// Runs this template over `data`.
    pub fn execute(&self, data: &Value) -> Result<String, ExecError> {
        if !self.trees.contains_key(&self.name) {
            return Err(ExecError(format!("template: {0}: {0:?} is an incomplete or empty template", self.name)));
        }
        self.run_named(&self.name, data)
    }

    /// Runs the template called `name` over `data`.
    pub fn execute_template(&self, name: &str, data: &Value) -> Result<String, ExecError> {
        self.run_named(name, data)
    }
}
