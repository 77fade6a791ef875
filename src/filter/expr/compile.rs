//! A compiled CEL expression and what it reads of `object`: compiling (with errors that say
//! where), and evaluating on an object.

use std::fmt;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env, Program};
use serde_json::Value;

use super::access::{Access, Analysis};
use super::value::{to_val, to_val_pruned};
use super::OBJECT;
use crate::filter::FilterError;
use crate::vocab::path::FieldPath;

/// The environment of every expression: the standard library, macros (`has`, `all`, `exists`,
/// `exists_one`, `map`, `filter`) and the extensions Kubernetes also offers (strings, lists,
/// math, base64).
pub(super) static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    for extension in [
        cel::extensions::strings,
        cel::extensions::lists,
        cel::extensions::math,
        cel::extensions::encoders,
    ] {
        env.add_extension(extension)
            .expect("the cel crate's extensions do not conflict");
    }
    Arc::new(env)
});

/// The stack of the thread that parses an expression.
///
/// Decision: the cel crate's ANTLR parser recurses about ten frames per level of nesting, and
/// large ones: in a debug build a dozen nested parentheses overflowed a 2 MiB stack (a Tokio
/// worker's, where a Watch request's `predicate_cel` is compiled), and the crate refuses only
/// past 96 levels. Parsing runs on a thread whose stack holds those 96 levels; the stack is
/// address space reserved for the few milliseconds of a parse, not memory touched.
const PARSE_STACK: usize = 256 << 20;

/// The deepest nesting of an expression that compiles.
///
/// Decision: evaluating recurses once per level of the expression (and so do the analysis and
/// dropping it), on whatever thread evaluates: a Tokio worker's 2 MiB. The parser bounds
/// parentheses, lists and calls (96 levels) but not chains of selections (`object.a.a.a...`,
/// parsed in a loop). 32 levels is more than a filter or predicate needs, and what a 2 MiB
/// stack evaluates even in a debug build.
pub(super) const MAX_NESTING: usize = 32;

/// Parses `source` with [`ENV`] on a thread of its own (see [`PARSE_STACK`]), and refuses it
/// if it nests deeper than [`MAX_NESTING`].
fn parse(source: &str) -> Result<Program, FilterError> {
    let parse_and_measure = || {
        let program = ENV
            .compile(source)
            .map_err(|errors| syntax_error(source, &errors))?;
        match nesting(program.expression()) {
            n if n > MAX_NESTING => Err(FilterError::Compile(format!(
                "the expression nests {n} levels deep, more than the {MAX_NESTING} allowed; \
                 write it with fewer nested parentheses, lists, calls or selections"
            ))),
            _ => Ok(program),
        }
    };
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-parse".into())
            .stack_size(PARSE_STACK)
            .spawn_scoped(scope, parse_and_measure)
            .map(|parsing| parsing.join())
    })
    .map_err(|e| {
        FilterError::Compile(format!(
            "cannot start a thread to parse the expression: {e}"
        ))
    })?
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// How deep `expr` nests (1 for a leaf), measured without recursion.
fn nesting<'e>(expr: &'e IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(expr, 1)];
    while let Some((expr, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        let mut push = |child: &'e IdedExpr| pending.push((child, depth + 1));
        match &expr.expr {
            Expr::Select(select) => push(&select.operand),
            Expr::Call(call) => call
                .target
                .iter()
                .map(|t| &**t)
                .chain(&call.args)
                .for_each(push),
            Expr::Comprehension(c) => {
                for child in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    push(child);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(push),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(e) = &entry.expr {
                        push(&e.key);
                        push(&e.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        push(&f.value);
                    }
                }
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    deepest
}

/// The error of an expression that does not parse: the first problem, where, and how many more.
fn syntax_error(source: &str, errors: &cel::ParseErrors) -> FilterError {
    let first = errors.errors.first();
    let message = match first {
        Some(e) => {
            let at = if source.contains('\n') {
                format!("line {}, column {}", e.pos.0, e.pos.1)
            } else {
                format!("column {}", e.pos.1)
            };
            let more = match errors.errors.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            format!("{} at {at} of the expression{more}", e.msg)
        }
        None => "syntax error".to_string(),
    };
    FilterError::Compile(message)
}

/// A compiled expression and what it reads of `object`.
pub(super) struct Compiled {
    pub(super) source: String,
    pub(super) program: Program,
    /// `None`: the whole object; otherwise the fields to convert (see [`Access`]).
    pub(super) access: Option<Access>,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Compiled {
    pub(super) fn compile(source: &str) -> Result<Compiled, FilterError> {
        Self::compile_with(source, &[])
    }

    /// Compiles an expression that may also use the variables `extra`.
    pub(super) fn compile_with(source: &str, extra: &[&str]) -> Result<Compiled, FilterError> {
        let program = parse(source)?;
        let analysis = Analysis::run(program.expression(), extra);
        if let Some(name) = analysis.undeclared {
            let allowed = if extra.is_empty() {
                "`object` only".to_string()
            } else {
                format!("`object` and `{}`", extra.join("`, `"))
            };
            return Err(FilterError::Compile(format!(
                "undeclared reference to '{name}' (the expression can use {allowed})"
            )));
        }
        let access = (!analysis.access.whole).then_some(analysis.access);
        Ok(Compiled {
            source: source.to_string(),
            program,
            access,
        })
    }

    pub(super) fn evaluate(&self, object: &Value) -> Result<cel::Value, FilterError> {
        self.evaluate_with(object, &[])
    }

    /// Evaluates with more variables (converted whole).
    pub(super) fn evaluate_with(
        &self,
        object: &Value,
        extra: &[(&str, &Value)],
    ) -> Result<cel::Value, FilterError> {
        let val = match &self.access {
            None => to_val(object),
            Some(access) => to_val_pruned(object, access),
        };
        let mut context = Context::with_env(Arc::clone(&ENV));
        context.add_variable_as_val(OBJECT, val);
        for (name, value) in extra {
            context.add_variable_as_val(*name, to_val(value));
        }
        self.program
            .execute(&context)
            .map_err(|e| FilterError::Evaluation(e.to_string()))
    }

    /// `None` when the expression needs the whole object.
    pub(super) fn field_paths(&self) -> Option<Vec<FieldPath>> {
        let access = self.access.as_ref()?;
        let mut out = Vec::new();
        access.paths(&mut Vec::new(), &mut out);
        Some(out)
    }
}
