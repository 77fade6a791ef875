//! CEL over `object`: the [`Filter`] predicate and the [`StringsExpr`] index key extractor.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{operators, Expr, IdedExpr, LiteralValue};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use cel::{Context, Env, Program};
use serde_json::Value;

use super::FilterError;
use crate::vocab::path::{FieldPath, Segment};

/// The one variable expressions see.
const OBJECT: &str = "object";
/// The previous state of the object, in [`ChangePredicate`]s.
const OLD_OBJECT: &str = "oldObject";

/// The environment of every expression: the standard library, macros (`has`, `all`, `exists`,
/// `exists_one`, `map`, `filter`) and the extensions Kubernetes also offers (strings, lists,
/// math, base64).
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
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

/// Sample objects evaluated at compile time: an empty object, and a pod with the usual fields.
/// See [`Filter::compile`].
fn samples() -> &'static [(&'static str, Value)] {
    static SAMPLES: LazyLock<Vec<(&'static str, Value)>> = LazyLock::new(|| {
        vec![
            ("an empty object", serde_json::json!({})),
            (
                "a sample pod",
                serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": "web-7d4b9c8f6-x2x7z",
                        "generateName": "web-7d4b9c8f6-",
                        "namespace": "default",
                        "uid": "0b6f9c62-4a5e-4f57-8a8e-2d1c9d2b1a01",
                        "resourceVersion": "1234",
                        "generation": 1,
                        "creationTimestamp": "2024-01-01T00:00:00Z",
                        "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6"},
                        "annotations": {"example.com/note": "x"},
                        "ownerReferences": [{
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "web-7d4b9c8f6",
                            "uid": "5d1c7e8a-3b2f-4c6d-9e0a-1f2b3c4d5e6f",
                            "controller": true,
                            "blockOwnerDeletion": true
                        }],
                        "finalizers": ["example.com/cleanup"]
                    },
                    "spec": {
                        "nodeName": "node-1",
                        "serviceAccountName": "default",
                        "containers": [{
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "MODE", "value": "prod"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}
                        }],
                        "volumes": [{"name": "data", "emptyDir": {}}]
                    },
                    "status": {
                        "phase": "Running",
                        "podIP": "10.244.0.5",
                        "hostIP": "172.18.0.2",
                        "qosClass": "Burstable",
                        "startTime": "2024-01-01T00:00:01Z",
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [{
                            "name": "web", "ready": true, "restartCount": 0, "image": "nginx:1.27"
                        }]
                    }
                }),
            ),
        ]
    });
    &SAMPLES
}

/// A compiled expression and what it reads of `object`.
struct Compiled {
    source: String,
    program: Program,
    /// `None`: the whole object; otherwise the fields to convert (see [`Access`]).
    access: Option<Access>,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// The fields of `object` an expression reads: converting a whole pod into CEL values for each
/// evaluation would cost far more than evaluating `object.metadata.ownerReferences.exists(...)`.
/// Only the subtrees that the expression selects with constant names are converted; where it
/// uses a value other than by selecting a field of it, the value is converted whole. A field
/// that the conversion leaves out is one the expression never reaches, so the results, errors
/// included, are those of evaluating on the whole object.
#[derive(Clone, Debug, Default, PartialEq)]
struct Access {
    whole: bool,
    fields: Vec<(String, Access)>,
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

    fn paths(&self, prefix: &mut Vec<String>, out: &mut Vec<FieldPath>) {
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
struct Analysis<'e> {
    access: Access,
    /// Variables other than `object` the expression may use (converted whole).
    extra: &'e [&'e str],
    /// Comprehension variables in scope.
    bound: Vec<&'e str>,
    undeclared: Option<String>,
}

impl<'e> Analysis<'e> {
    fn run(expr: &'e IdedExpr, extra: &'e [&'e str]) -> Analysis<'e> {
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

/// Converts JSON into CEL values, borrowing its strings.
fn to_val(value: &Value) -> Box<dyn Val + '_> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            Box::new(CelList::from(items.iter().map(to_val).collect::<Vec<_>>()))
        }
        Value::Object(map) => Box::new(CelMap::from(
            map.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), to_val(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// Converts the parts of `value` that `access` names.
fn to_val_pruned<'v>(value: &'v Value, access: &Access) -> Box<dyn Val + 'v> {
    match value {
        Value::Object(map) if !access.whole => Box::new(CelMap::from(
            access
                .fields
                .iter()
                .filter_map(|(name, child)| {
                    let (key, value) = map.get_key_value(name.as_str())?;
                    Some((CelMapKey::from(key.as_str()), to_val_pruned(value, child)))
                })
                .collect::<HashMap<_, _>>(),
        )),
        _ => to_val(value),
    }
}

fn type_name(value: &cel::Value) -> String {
    value.type_of().to_string()
}

impl Compiled {
    fn compile(source: &str) -> Result<Compiled, FilterError> {
        Self::compile_with(source, &[])
    }

    /// Compiles an expression that may also use the variables `extra`.
    fn compile_with(source: &str, extra: &[&str]) -> Result<Compiled, FilterError> {
        let program = ENV.compile(source).map_err(|errors| {
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
        })?;
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

    fn evaluate(&self, object: &Value) -> Result<cel::Value, FilterError> {
        self.evaluate_with(object, &[])
    }

    /// Evaluates with more variables (converted whole).
    fn evaluate_with(
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
    fn field_paths(&self) -> Option<Vec<FieldPath>> {
        let access = self.access.as_ref()?;
        let mut out = Vec::new();
        access.paths(&mut Vec::new(), &mut out);
        Some(out)
    }
}

/// A compiled CEL expression over `object` that evaluates to a bool: the `filter` of a resource.
///
/// The cel crate has no type checker (Kubernetes type-checks CEL against the schema of the
/// kind), so [`Filter::compile`] rejects what it can without one: syntax errors, references to
/// variables other than `object`, and expressions that evaluate to something other than a bool
/// on sample objects (an empty object and a typical pod). An expression that only fails at run
/// time on some objects (`object.spec.nodeName == "a"` on a pod without a node: no such key)
/// compiles; [`Filter::matches`] returns the error, which callers count as "does not match".
/// Guard optional fields with `has()`, as in Kubernetes:
/// `has(object.spec.nodeName) && object.spec.nodeName == "node-1"`.
///
/// ```
/// use informerd::filter::Filter;
/// use serde_json::json;
///
/// let f = Filter::compile(r#"object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")"#)?;
/// let pod = json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "kube-proxy"}]}});
/// assert!(f.matches(&pod)?);
/// assert!(f.matches(&json!({"metadata": {}})).is_err()); // no such key: ownerReferences
/// assert!(Filter::compile("object.metadata.name").is_err()); // a string, not a bool
/// # Ok::<(), informerd::filter::FilterError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Filter {
    inner: Arc<Compiled>,
}

impl Filter {
    /// Compiles `expression`; see the type's documentation for what is checked.
    pub fn compile(expression: &str) -> Result<Filter, FilterError> {
        let compiled = Compiled::compile(expression)?;
        check_bool(|object| compiled.evaluate(object))?;
        Ok(Filter {
            inner: Arc::new(compiled),
        })
    }

    /// Evaluates the expression on `object`. Errors (a missing field, a type mismatch) are
    /// errors, as in Kubernetes; callers treat them as "does not match".
    pub fn matches(&self, object: &Value) -> Result<bool, FilterError> {
        match self.inner.evaluate(object)? {
            cel::Value::Bool(b) => Ok(b),
            other => Err(FilterError::Evaluation(format!(
                "the filter evaluated to a {}, not a bool",
                type_name(&other)
            ))),
        }
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The fields of `object` the expression reads (each with everything below it), or `None`
    /// when it uses the object as a whole. A decoder can keep just these (with
    /// [`Transform`](crate::transform::Transform)) before filtering.
    pub fn field_paths(&self) -> Option<Vec<FieldPath>> {
        self.inner.field_paths()
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}

#[derive(Debug)]
enum StringsKind {
    Path(FieldPath),
    Cel(Compiled),
}

/// Refuses an expression that evaluates to something other than a bool on a sample object
/// (evaluation errors are for run time: they depend on the object).
fn check_bool(
    evaluate: impl Fn(&Value) -> Result<cel::Value, FilterError>,
) -> Result<(), FilterError> {
    for (sample, object) in samples() {
        if let Ok(value) = evaluate(object) {
            if !matches!(value, cel::Value::Bool(_)) {
                return Err(FilterError::NotBool {
                    got: type_name(&value),
                    sample,
                });
            }
        }
    }
    Ok(())
}

/// A CEL expression over `object` and `oldObject` that evaluates to a bool: whether a watcher
/// cares about an update (a watch's `predicate_cel`), e.g. `object.spec != oldObject.spec`.
///
/// Compiled and checked like a [`Filter`]. An evaluation error counts as "cares": a watcher
/// never misses an update because its predicate could not be evaluated.
///
/// ```
/// use informerd::filter::ChangePredicate;
/// use serde_json::json;
///
/// let p = ChangePredicate::compile("object.spec != oldObject.spec")?;
/// assert!(!p.matches(&json!({"spec": {"a": 1}}), &json!({"spec": {"a": 1}})));
/// assert!(p.matches(&json!({"spec": {"a": 2}}), &json!({"spec": {"a": 1}})));
/// assert!(ChangePredicate::compile("newObject.spec").is_err());
/// # Ok::<(), informerd::filter::FilterError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ChangePredicate {
    inner: Arc<Compiled>,
}

impl ChangePredicate {
    /// Compiles `expression`; it must evaluate to a bool on sample objects.
    pub fn compile(expression: &str) -> Result<ChangePredicate, FilterError> {
        let compiled = Compiled::compile_with(expression, &[OLD_OBJECT])?;
        check_bool(|object| compiled.evaluate_with(object, &[(OLD_OBJECT, object)]))?;
        Ok(ChangePredicate {
            inner: Arc::new(compiled),
        })
    }

    /// Whether the update from `old` to `new` passes; true when evaluation fails.
    pub fn matches(&self, new: &Value, old: &Value) -> bool {
        !matches!(
            self.inner.evaluate_with(new, &[(OLD_OBJECT, old)]),
            Ok(cel::Value::Bool(false))
        )
    }
}

/// An index key extractor: a field path or a CEL expression yielding a string or a list of
/// strings.
///
/// A path (the syntax of [`FieldPath`]) may fan out with `[*]`; at its end, strings are taken
/// as they are, numbers and booleans as their JSON text, and a list yields each of its scalar
/// elements; absent fields, nulls and objects yield nothing. Values are deduplicated, in order.
///
/// ```
/// use informerd::filter::StringsExpr;
/// use serde_json::json;
///
/// let pod = json!({"spec": {"nodeName": "node-1"},
///                  "metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
/// assert_eq!(StringsExpr::path("spec.nodeName")?.values(&pod), ["node-1"]);
/// assert_eq!(StringsExpr::path("metadata.ownerReferences[*].uid")?.values(&pod), ["a", "b"]);
/// assert_eq!(StringsExpr::cel("object.metadata.ownerReferences.map(o, o.uid)")?.values(&pod), ["a", "b"]);
/// assert!(StringsExpr::path("spec.hostname")?.values(&pod).is_empty());
/// # Ok::<(), informerd::filter::FilterError>(())
/// ```
#[derive(Clone, Debug)]
pub struct StringsExpr {
    inner: Arc<StringsKind>,
}

impl StringsExpr {
    /// A field path, e.g. `spec.nodeName`, `metadata.ownerReferences[*].uid`,
    /// `metadata.labels["app"]`.
    pub fn path(path: &str) -> Result<StringsExpr, FilterError> {
        let path = FieldPath::parse(path)?;
        Ok(StringsExpr {
            inner: Arc::new(StringsKind::Path(path)),
        })
    }

    /// A CEL expression over `object` that yields a string, a list of strings, or null (no
    /// key). As for [`Filter::compile`], an expression that yields something else on the
    /// sample objects is rejected.
    pub fn cel(expression: &str) -> Result<StringsExpr, FilterError> {
        let compiled = Compiled::compile(expression)?;
        for (sample, object) in samples() {
            if let Ok(value) = compiled.evaluate(object) {
                if let Err(got) = strings_of(value) {
                    return Err(FilterError::NotStrings { got, sample });
                }
            }
        }
        Ok(StringsExpr {
            inner: Arc::new(StringsKind::Cel(compiled)),
        })
    }

    /// The keys of `object`: empty when the field is absent or the expression fails.
    pub fn values(&self, object: &Value) -> Vec<String> {
        self.try_values(object).unwrap_or_default()
    }

    /// The keys of `object`, or the error of the CEL expression.
    pub fn try_values(&self, object: &Value) -> Result<Vec<String>, FilterError> {
        match &*self.inner {
            StringsKind::Path(path) => {
                let mut out = Vec::new();
                collect(object, path.segments(), &mut out);
                dedup(&mut out);
                Ok(out)
            }
            StringsKind::Cel(compiled) => {
                let mut out = strings_of(compiled.evaluate(object)?).map_err(|got| {
                    FilterError::Evaluation(format!(
                        "the expression evaluated to {got}, not a string or a list of strings"
                    ))
                })?;
                dedup(&mut out);
                Ok(out)
            }
        }
    }

    /// The path or expression as written.
    pub fn source(&self) -> &str {
        match &*self.inner {
            StringsKind::Path(path) => path.as_str(),
            StringsKind::Cel(compiled) => &compiled.source,
        }
    }

    /// The field path, when the keys are a field's values (not CEL).
    pub fn as_path(&self) -> Option<&FieldPath> {
        match &*self.inner {
            StringsKind::Path(path) => Some(path),
            StringsKind::Cel(_) => None,
        }
    }

    /// The fields of `object` the extractor reads, or `None` when it needs the whole object.
    pub fn field_paths(&self) -> Option<Vec<FieldPath>> {
        match &*self.inner {
            StringsKind::Path(path) => Some(vec![path.clone()]),
            StringsKind::Cel(compiled) => compiled.field_paths(),
        }
    }
}

impl fmt::Display for StringsExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}

/// The strings of a CEL result, or the description of what it is instead.
fn strings_of(value: cel::Value) -> Result<Vec<String>, String> {
    match value {
        cel::Value::String(s) => Ok(vec![s.to_string()]),
        cel::Value::Null => Ok(Vec::new()),
        cel::Value::List(items) => items
            .iter()
            .map(|item| match item {
                cel::Value::String(s) => Ok(s.to_string()),
                other => Err(format!("a list with a {} element", type_name(other))),
            })
            .collect(),
        other => Err(format!("a {}", type_name(&other))),
    }
}

fn dedup(values: &mut Vec<String>) {
    if values.len() > 1 {
        let mut seen = ahash::AHashSet::with_capacity(values.len());
        values.retain(|v| seen.insert(v.clone()));
    }
}

/// Collects the keys under `segments` of `value`.
fn collect(value: &Value, segments: &[Segment], out: &mut Vec<String>) {
    let Some((first, rest)) = segments.split_first() else {
        match value {
            Value::Array(items) => {
                for item in items {
                    push_scalar(item, out);
                }
            }
            other => push_scalar(other, out),
        }
        return;
    };
    match (first, value) {
        (Segment::Field(name), Value::Object(map)) => {
            if let Some(v) = map.get(name) {
                collect(v, rest, out);
            }
        }
        (Segment::Any, Value::Array(items)) => {
            for item in items {
                collect(item, rest, out);
            }
        }
        (Segment::Any, Value::Object(map)) => {
            for item in map.values() {
                collect(item, rest, out);
            }
        }
        _ => {}
    }
}

fn push_scalar(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Number(n) => out.push(n.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
