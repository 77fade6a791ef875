//! What an expression reads of `object`, found by walking its syntax tree: the fields to convert
//! into CEL values, and the identifiers it cannot resolve.

use cel::common::ast::{operators, Expr, IdedExpr, LiteralValue};

use super::OBJECT;
use crate::vocab::path::FieldPath;

/// Identifiers that are not variables: type names (`type(x) == string`) and the namespaces of
/// functions (`base64.encode(b)`).
const KNOWN_IDENTS: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "timestamp",
    "type",
    "uint",
    "optional",
    "base64",
    "math",
    "strings",
    "lists",
];

/// The fields of `object` an expression reads: converting a whole pod into CEL values for each
/// evaluation would cost far more than evaluating `object.metadata.ownerReferences.exists(...)`.
/// Only the subtrees that the expression selects with constant names are converted; where it
/// uses a value other than by selecting a field of it, the value is converted whole. A field
/// that the conversion leaves out is one the expression never reaches, so the results, errors
/// included, are those of evaluating on the whole object.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Access {
    pub(super) whole: bool,
    pub(super) fields: Vec<(String, Access)>,
}

impl Access {
    fn add(&mut self, path: &[&str]) {
        let mut node = self;
        for name in path {
            if node.whole {
                return;
            }
            let at = match node.fields.iter().position(|(k, _)| k == name) {
                Some(at) => at,
                None => {
                    node.fields.push((name.to_string(), Access::default()));
                    node.fields.len() - 1
                }
            };
            node = &mut node.fields[at].1;
        }
        node.whole = true;
        node.fields.clear();
    }

    pub(super) fn paths(&self, prefix: &mut Vec<String>, out: &mut Vec<FieldPath>) {
        if self.whole {
            out.push(FieldPath::from_fields(prefix.iter().cloned()));
            return;
        }
        for (name, child) in &self.fields {
            prefix.push(name.clone());
            child.paths(prefix, out);
            prefix.pop();
        }
    }
}

/// Walks the expression: records what it reads of `object` and the identifiers it cannot
/// resolve.
pub(super) struct Analysis<'e> {
    pub(super) access: Access,
    /// Variables other than `object` the expression may use (converted whole).
    extra: &'e [&'e str],
    /// Comprehension variables in scope.
    bound: Vec<&'e str>,
    pub(super) undeclared: Option<String>,
}

impl<'e> Analysis<'e> {
    pub(super) fn run(expr: &'e IdedExpr, extra: &'e [&'e str]) -> Analysis<'e> {
        let mut analysis = Analysis {
            access: Access::default(),
            extra,
            bound: Vec::new(),
            undeclared: None,
        };
        analysis.walk(expr);
        analysis
    }

    /// `object.a.b["c"]` as `["a", "b", "c"]`, when `expr` is such a chain of constant selections
    /// on the (unshadowed) `object`.
    fn chain(&self, expr: &'e IdedExpr) -> Option<Vec<&'e str>> {
        match &expr.expr {
            Expr::Ident(name) if name == OBJECT && !self.bound.contains(&OBJECT) => {
                Some(Vec::new())
            }
            Expr::Select(select) => {
                let mut path = self.chain(&select.operand)?;
                path.push(&select.field);
                Some(path)
            }
            Expr::Call(call)
                if call.target.is_none()
                    && call.args.len() == 2
                    && [
                        operators::INDEX,
                        operators::OPT_INDEX,
                        operators::OPT_SELECT,
                    ]
                    .contains(&call.func_name.as_str()) =>
            {
                let Expr::Literal(LiteralValue::String(key)) = &call.args[1].expr else {
                    return None;
                };
                let mut path = self.chain(&call.args[0])?;
                path.push(key.inner());
                Some(path)
            }
            _ => None,
        }
    }

    fn walk(&mut self, expr: &'e IdedExpr) {
        if let Some(path) = self.chain(expr) {
            self.access.add(&path);
            return;
        }
        match &expr.expr {
            Expr::Ident(name) => {
                if !self.bound.contains(&name.as_str())
                    && name != OBJECT
                    && !self.extra.contains(&name.as_str())
                    && !KNOWN_IDENTS.contains(&name.as_str())
                    && self.undeclared.is_none()
                {
                    self.undeclared = Some(name.clone());
                }
            }
            Expr::Select(select) => self.walk(&select.operand),
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target);
                }
                for arg in &call.args {
                    self.walk(arg);
                }
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range);
                self.walk(&c.accu_init);
                let depth = self.bound.len();
                self.bound.push(&c.iter_var);
                if let Some(var) = &c.iter_var2 {
                    self.bound.push(var);
                }
                self.bound.push(&c.accu_var);
                self.walk(&c.loop_cond);
                self.walk(&c.loop_step);
                self.walk(&c.result);
                self.bound.truncate(depth);
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.walk(element);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(e) = &entry.expr {
                        self.walk(&e.key);
                        self.walk(&e.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                        self.walk(&f.value);
                    }
                }
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}
