//! JSON to CEL values, whole or pruned to the fields an expression reads.
//!
//! Decision: CEL iterates a map's keys "in no particular order" (the spec, cel-go and so
//! Kubernetes' own CEL alike), and the `cel` crate's maps are `std` `HashMap`s, whose order
//! depends on a hasher seed drawn for each map. An index expression such as
//! `object.metadata.labels.map(k, k).join(",")` would then give one object a different key at
//! each evaluation, and a change predicate comparing `object` with `oldObject` would flap. So
//! every map built here hashes with one seed, drawn once per process ([`SEED`]): the same keys
//! inserted in the same order iterate in the same order, so one object (or two equal objects)
//! always evaluates to the same value. The order is still not sorted and differs between
//! processes, and a map that CEL copies itself (an element of a list literal, `[object][0]`)
//! is rebuilt by the crate with a fresh seed; an expression whose result should not depend on
//! the order sorts (`.sort()`). Making every order fixed needs a change in the `cel` crate.

use std::collections::HashMap;
use std::hash::RandomState;
use std::sync::LazyLock;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde_json::Value;

use super::access::Access;

/// The hasher seed of every map converted from JSON (see the module's decision).
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);

/// A map with [`SEED`]'s hasher, holding `entries` (at most `len`) inserted in their order.
fn seeded<'v>(
    len: usize,
    entries: impl Iterator<Item = (CelMapKey<'v>, Box<dyn Val + 'v>)>,
) -> Box<dyn Val + 'v> {
    let mut map = HashMap::with_capacity_and_hasher(len, SEED.clone());
    map.extend(entries);
    Box::new(CelMap::from(map))
}

/// Converts JSON into CEL values, borrowing its strings.
pub(super) fn to_val(value: &Value) -> Box<dyn Val + '_> {
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
        Value::Object(map) => {
            let entries = map.iter();
            seeded(
                map.len(),
                entries.map(|(k, v)| (CelMapKey::from(k.as_str()), to_val(v))),
            )
        }
    }
}

/// Converts the parts of `value` that `access` names.
pub(super) fn to_val_pruned<'v>(value: &'v Value, access: &Access) -> Box<dyn Val + 'v> {
    match value {
        Value::Object(map) if !access.whole => seeded(
            access.fields.len(),
            access.fields.iter().filter_map(|(name, child)| {
                let (key, value) = map.get_key_value(name.as_str())?;
                Some((CelMapKey::from(key.as_str()), to_val_pruned(value, child)))
            }),
        ),
        _ => to_val(value),
    }
}
