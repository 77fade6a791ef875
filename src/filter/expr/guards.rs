//! Reads of fields an object may not have, unguarded by `has()`: in CEL, selecting a field a
//! map lacks is an error, not null, so `object.metadata.ownerReferences.exists(...)` errs on
//! every pod without owners (counted as "does not match", and in Status's filter errors)
//! where the author meant "false". `informerd check-config` warns about each such read, naming
//! the `has()` to add; it never refuses the expression (an error may be what is wanted).
//!
//! Decision: a read of `object.a.b` counts as guarded when the expression tests `has()` of it
//! or of a longer path below it, anywhere (`has(object.a.b) && ...`, or a ternary on it), and
//! the fields every Kubernetes object has need no test. This does not prove the test comes
//! first on every path of evaluation; it catches the common mistake, an expression with no
//! test at all, without false alarms on the usual guarded forms.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::OBJECT;

/// Fields every object served by the apiserver has.
const ALWAYS_PRESENT: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.resourceVersion",
    "metadata.creationTimestamp",
];

/// The paths below `object` (e.g. `metadata.ownerReferences`) that `expression` reads without
/// a `has()` test of them, in the order of first appearance; empty when it does not parse.
pub fn unguarded_reads(expression: &str) -> Vec<String> {
    let Ok(ast) = cel::parser::Parser::new().parse(expression) else {
        return Vec::new();
    };
    let mut walk = Walk::default();
    walk.expr(&ast);
    let mut out: Vec<String> = Vec::new();
    for read in &walk.reads {
        let text = read.join(".");
        let guarded = walk.tested.iter().any(|t| t.starts_with(read));
        if !guarded && !ALWAYS_PRESENT.contains(&text.as_str()) && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// The longest field selections of `object` read, and those tested with `has()`.
#[derive(Default)]
struct Walk {
    reads: Vec<Vec<String>>,
    tested: Vec<Vec<String>>,
}

impl Walk {
    fn expr(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Select(select) => match object_path(&select.operand.expr) {
                Some(mut path) => {
                    path.push(select.field.clone());
                    if select.test {
                        self.tested.push(path);
                    } else {
                        self.reads.push(path);
                    }
                }
                None => self.expr(&select.operand),
            },
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.expr(target);
                }
                call.args.iter().for_each(|a| self.expr(a));
            }
            Expr::Comprehension(c) => {
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    self.expr(part);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(|e| self.expr(e)),
            Expr::Map(map) => map.entries.iter().for_each(|e| self.entry(&e.expr)),
            Expr::Struct(s) => s.entries.iter().for_each(|e| self.entry(&e.expr)),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entry(&mut self, entry: &EntryExpr) {
        match entry {
            EntryExpr::StructField(f) => self.expr(&f.value),
            EntryExpr::MapEntry(m) => {
                self.expr(&m.key);
                self.expr(&m.value);
            }
        }
    }
}

/// `object.a.b` as `[a, b]` (`[]` for `object` itself); `None` for anything else.
fn object_path(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::Ident(name) if name == OBJECT => Some(Vec::new()),
        Expr::Select(select) if !select.test => {
            let mut path = object_path(&select.operand.expr)?;
            path.push(select.field.clone());
            Some(path)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::unguarded_reads;

    #[test]
    fn a_read_without_has_is_named_and_a_guarded_one_is_not() {
        let owners = "object.metadata.ownerReferences.exists(o, o.kind == \"DaemonSet\")";
        assert_eq!(unguarded_reads(owners), ["metadata.ownerReferences"]);
        let guarded = format!("has(object.metadata.ownerReferences) && {owners}");
        assert!(unguarded_reads(&guarded).is_empty());
        let ternary =
            "has(object.metadata.labels) ? object.metadata.labels['app'] == 'web' : false";
        assert!(unguarded_reads(ternary).is_empty());
        // A test of a longer path guards the fields on its way.
        let deep = "has(object.spec.template.spec) && object.spec.template.spec.nodeName == 'a'";
        assert_eq!(unguarded_reads(deep), ["spec.template.spec.nodeName"]);
        assert!(unguarded_reads("object.metadata.name.startsWith('a')").is_empty());
        assert_eq!(
            unguarded_reads("object.spec.nodeName == 'a' || object.spec.nodeName == 'b'"),
            ["spec.nodeName"]
        );
    }
}
