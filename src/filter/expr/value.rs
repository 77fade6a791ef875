//! JSON to CEL values, whole or pruned to the fields an expression reads.

use std::collections::HashMap;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde_json::Value;

use super::access::Access;

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
        Value::Object(map) => Box::new(CelMap::from(
            map.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), to_val(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// Converts the parts of `value` that `access` names.
pub(super) fn to_val_pruned<'v>(value: &'v Value, access: &Access) -> Box<dyn Val + 'v> {
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
