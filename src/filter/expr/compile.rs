//! A compiled CEL expression and what it reads of `object`: compiling (with errors that say
//! where), and evaluating on an object.

use std::fmt;
use std::sync::{Arc, LazyLock};

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

/// Parses `source` with [`ENV`] on a thread of its own (see [`PARSE_STACK`]).
fn parse(source: &str) -> Result<Program, FilterError> {
    let parsed = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-parse".into())
            .stack_size(PARSE_STACK)
            .spawn_scoped(scope, || ENV.compile(source))
            .map(|parsing| parsing.join())
    })
    .map_err(|e| {
        FilterError::Compile(format!(
            "cannot start a thread to parse the expression: {e}"
        ))
    })?
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    parsed.map_err(|errors| syntax_error(source, &errors))
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
