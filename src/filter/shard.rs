//! A shard of the objects (issue 32), by the same expression as the apiserver's `shardSelector`
//! (KEP-5866, alpha in 1.36), used twice: a resource that caches one shard of the apiserver's
//! objects (`resources[i].shardSelector`, so K replicas of informerd each hold 1/K), and a List
//! or Watch that asks for a shard of the cache (`shard_selector`, so a sharded controller asks
//! informerd for its shard as it would ask the apiserver).
//!
//! The expression is `shardRange(FIELD, 'START', 'END')`, or several joined by `||`, FIELD being
//! `object.metadata.uid` or `object.metadata.namespace` (the same in every range). An object is
//! in the shard when the 64-bit FNV-1a hash of that field's value lies in one of the ranges,
//! START inclusive and END exclusive, each a `0x` and 16 lowercase hex digits, END up to
//! `0x10000000000000000` (2^64). The rules and messages follow the apiserver's parser
//! (`k8s.io/apiserver/pkg/sharding`), so an expression is accepted here exactly when the
//! apiserver accepts it.

use cel::common::ast::{Expr, LiteralValue};
use serde_json::Value;

/// The field a shard hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Uid,
    Namespace,
}

/// A parsed shard selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    field: Field,
    /// `[start, end)` over the hash space, end at most 2^64.
    ranges: Vec<(u128, u128)>,
}

impl Shard {
    /// Parses an expression; the error says what is wrong, as the apiserver's does.
    pub fn parse(expression: &str) -> Result<Shard, String> {
        let expression = expression.trim();
        if expression.is_empty() {
            return Err("an empty shard selector is not allowed; omit it for every object".into());
        }
        let parsed = cel::parser::Parser::new()
            .parse(expression)
            .map_err(|e| format!("CEL parse error: {e}"))?;
        let mut ranges = Vec::new();
        walk(&parsed.expr, &mut ranges)?;
        let field = ranges[0].0;
        if let Some((other, _, _)) = ranges.iter().find(|(f, _, _)| *f != field) {
            return Err(format!(
                "all shard ranges must use the same field, got {} and {}",
                path(field),
                path(*other)
            ));
        }
        Ok(Shard {
            field,
            ranges: ranges.into_iter().map(|(_, s, e)| (s, e)).collect(),
        })
    }

    /// Whether the object is in the shard (an object without the field hashes the empty
    /// string, as the apiserver reads a missing field).
    pub fn contains(&self, object: &Value) -> bool {
        let meta = object.get("metadata");
        let field = |name: &str| meta.and_then(|m| m.get(name)).and_then(Value::as_str);
        self.contains_meta(field("namespace"), field("uid"))
    }

    /// [`Shard::contains`] of an object's namespace and uid.
    pub fn contains_meta(&self, namespace: Option<&str>, uid: Option<&str>) -> bool {
        let value = match self.field {
            Field::Uid => uid,
            Field::Namespace => namespace,
        };
        self.contains_value(value.unwrap_or_default())
    }

    /// Whether a value of the shard's field hashes into one of its ranges.
    pub fn contains_value(&self, value: &str) -> bool {
        let hash = u128::from(fnv1a64(value.as_bytes()));
        self.ranges.iter().any(|(s, e)| *s <= hash && hash < *e)
    }

    /// Whether the shard hashes the namespace (then an object's key decides it).
    pub fn by_namespace(&self) -> bool {
        self.field == Field::Namespace
    }
}

fn path(field: Field) -> &'static str {
    match field {
        Field::Uid => "object.metadata.uid",
        Field::Namespace => "object.metadata.namespace",
    }
}

/// FNV-1a, 64 bits (Go's `hash/fnv.New64a`, which the apiserver uses).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn walk(expr: &Expr, out: &mut Vec<(Field, u128, u128)>) -> Result<(), String> {
    let Expr::Call(call) = expr else {
        return Err("expected a shardRange() call or the || operator".into());
    };
    match call.func_name.as_str() {
        "_||_" if call.args.len() == 2 && call.target.is_none() => {
            walk(&call.args[0].expr, out)?;
            walk(&call.args[1].expr, out)
        }
        "shardRange" if call.target.is_none() => {
            if call.args.len() != 3 {
                return Err(format!(
                    "shardRange() requires exactly 3 arguments, got {}",
                    call.args.len()
                ));
            }
            let field = match field_path(&call.args[0].expr).as_deref() {
                Some("object.metadata.uid") => Field::Uid,
                Some("object.metadata.namespace") => Field::Namespace,
                Some(other) => {
                    return Err(format!(
                        "unsupported field path {other:?}; supported: object.metadata.uid, \
                         object.metadata.namespace"
                    ))
                }
                None => {
                    return Err(
                        "shardRange() first argument: expected a field path such as \
                                object.metadata.uid"
                            .into(),
                    )
                }
            };
            let start = hex(&call.args[1].expr, "hexStart")?;
            let end = hex(&call.args[2].expr, "hexEnd")?;
            if start >= end {
                return Err(format!(
                    "shard range start {start:#018x} must be less than end {end:#018x}"
                ));
            }
            out.push((field, start, end));
            Ok(())
        }
        other => Err(format!(
            "unsupported function {other:?}; only shardRange() and || are allowed"
        )),
    }
}

/// `object.metadata.uid` from its select chain.
fn field_path(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => Some(format!(
            "{}.{}",
            field_path(&select.operand.expr)?,
            select.field
        )),
        _ => None,
    }
}

/// A bound: `'0x'` and 16 lowercase hex digits, or `'0x10000000000000000'`.
fn hex(expr: &Expr, name: &str) -> Result<u128, String> {
    let Expr::Literal(LiteralValue::String(s)) = expr else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0x8000000000000000')"
        ));
    };
    let s: &str = s.inner();
    let Some(digits) = s.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {s:?}"));
    };
    if digits.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if let Some(c) = digits
        .chars()
        .find(|c| !c.is_ascii_digit() && !('a'..='f').contains(c))
    {
        return Err(format!("{name}: invalid hex character {c:?} in {s:?}"));
    }
    match digits.len() {
        16 => {}
        17 if s == "0x10000000000000000" => {}
        17 => {
            return Err(format!(
                "{name}: a 17-digit hex value must be '0x10000000000000000' (2^64), got {s:?}"
            ))
        }
        n if n > 17 => {
            return Err(format!(
                "{name}: hex value too long ({n} chars, max 17): {digits:?}"
            ))
        }
        n => {
            return Err(format!(
                "{name} must be a 0x-prefixed 16-digit hex value, got {s:?} (did you mean \
                 \"0x{}{digits}\"?)",
                "0".repeat(16 - n)
            ))
        }
    }
    Ok(u128::from_str_radix(digits, 16).expect("checked hex digits"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HALF: &str = "0x8000000000000000";

    fn shard(expr: &str) -> Shard {
        Shard::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    #[test]
    fn the_hash_is_go_fnv_1a_64() {
        // Values from Go's hash/fnv (New64a) and FNV's published test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn two_halves_split_every_object_once() {
        let low = shard(&format!(
            "shardRange(object.metadata.uid, '0x0000000000000000', '{HALF}')"
        ));
        let high = shard(&format!(
            "shardRange(object.metadata.uid, '{HALF}', '0x10000000000000000')"
        ));
        let whole = shard(&format!(
            "shardRange(object.metadata.uid, '0x0000000000000000', '{HALF}') || \
             shardRange(object.metadata.uid, '{HALF}', '0x10000000000000000')"
        ));
        let (mut lows, mut highs) = (0, 0);
        for i in 0..1000u64 {
            // UUID-like, as the apiserver's uids are random (FNV-1a spreads short strings
            // that differ in one character poorly across its high bits).
            let r = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 29);
            let uid = format!(
                "{:08x}-{:04x}-4{:03x}-8000-{:012x}",
                r >> 32,
                r & 0xffff,
                i,
                r
            );
            let object = json!({"metadata": {"uid": uid}});
            assert!(
                low.contains(&object) != high.contains(&object),
                "uid-{i}: in one half"
            );
            assert!(whole.contains(&object));
            lows += usize::from(low.contains(&object));
            highs += usize::from(high.contains(&object));
        }
        assert!(
            lows > 400 && highs > 400,
            "{lows} / {highs}: the hash spreads"
        );
    }

    #[test]
    fn the_namespace_can_be_the_field() {
        let s = shard(
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0xaf63dc4c8601ec8d')",
        );
        assert!(s.by_namespace());
        assert!(s.contains(&json!({"metadata": {"namespace": "a"}})));
        let s = shard(
            "shardRange(object.metadata.namespace, '0xaf63dc4c8601ec8d', '0x10000000000000000')",
        );
        assert!(!s.contains(&json!({"metadata": {"namespace": "a"}})));
    }

    #[test]
    fn bad_selectors_say_what_is_wrong() {
        let cases = [
            ("", "empty shard selector"),
            ("shardRange(", "CEL parse error"),
            ("size(object) > 1", "unsupported function"),
            (
                "shardRange(object.metadata.name, '0x0000000000000000', '0x1000000000000000')",
                "unsupported field path",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x1000000000000000')",
                "did you mean \"0x0000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
                "must be '0x10000000000000000'",
            ),
            (
                "shardRange(object.metadata.uid, '0x000000000000000G', '0x1000000000000000')",
                "invalid hex character",
            ),
            (
                "shardRange(object.metadata.uid, '0x8000000000000000', '0x1000000000000000')",
                "must be less than end",
            ),
            (
                "shardRange(object.metadata.uid, 1, '0x1000000000000000')",
                "hexStart must be a string literal",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000')",
                "exactly 3 arguments",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x1000000000000000') || \
                 shardRange(object.metadata.namespace, '0x1000000000000000', '0x2000000000000000')",
                "must use the same field",
            ),
        ];
        for (expr, want) in cases {
            let err = Shard::parse(expr).expect_err(expr);
            assert!(err.contains(want), "{expr}: {err}");
        }
    }
}
