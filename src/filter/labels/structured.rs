//! The structured `LabelSelector` of API objects (`matchLabels`, `matchExpressions`), validated
//! as Kubernetes does and converted into requirements.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::requirement::Requirement;
use super::selector::LabelSelector;
use crate::filter::FilterError;
use crate::vocab::names::{label_value, qualified_name};

impl LabelSelector {
    /// Converts the structured selector of API objects (`matchLabels` and `matchExpressions`
    /// with `In`, `NotIn`, `Exists`, `DoesNotExist`), validated as Kubernetes does. An empty
    /// selector matches everything. Errors name the offending field, e.g.
    /// `matchExpressions[1].operator`.
    pub fn from_k8s(selector: &meta::LabelSelector) -> Result<LabelSelector, FilterError> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(match_label(key, value)?);
        }
        for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
            requirements.push(match_expression(i, expr)?);
        }
        Ok(LabelSelector { requirements })
    }
}

/// The error of the structured selector's field `field`.
fn error(field: String, message: String) -> FilterError {
    FilterError::LabelSelector {
        field: Some(field),
        message,
    }
}

/// One entry of `matchLabels`.
fn match_label(key: &str, value: &str) -> Result<Requirement, FilterError> {
    let field = format!("matchLabels.{key}");
    qualified_name(key).map_err(|e| error(field.clone(), format!("invalid key '{key}': {e}")))?;
    label_value(value).map_err(|e| error(field, format!("invalid value '{value}': {e}")))?;
    Ok(Requirement::Equals(key.to_string(), value.to_string()))
}

/// The `i`th entry of `matchExpressions`.
fn match_expression(
    i: usize,
    expr: &meta::LabelSelectorRequirement,
) -> Result<Requirement, FilterError> {
    let field = |name: &str| format!("matchExpressions[{i}].{name}");
    let key = &expr.key;
    qualified_name(key).map_err(|e| error(field("key"), format!("invalid key '{key}': {e}")))?;
    let values = expr.values.clone().unwrap_or_default();
    for (j, value) in values.iter().enumerate() {
        label_value(value).map_err(|e| {
            error(
                field(&format!("values[{j}]")),
                format!("invalid value '{value}': {e}"),
            )
        })?;
    }
    let set: BTreeSet<String> = values.iter().cloned().collect();
    match expr.operator.as_str() {
        "In" | "NotIn" if set.is_empty() => Err(error(
            field("values"),
            format!("must be non-empty when operator is {}", expr.operator),
        )),
        "In" => Ok(Requirement::In(key.clone(), set)),
        "NotIn" => Ok(Requirement::NotIn(key.clone(), set)),
        "Exists" | "DoesNotExist" if !values.is_empty() => Err(error(
            field("values"),
            format!("must be empty when operator is {}", expr.operator),
        )),
        "Exists" => Ok(Requirement::Exists(key.clone())),
        "DoesNotExist" => Ok(Requirement::DoesNotExist(key.clone())),
        other => Err(error(
            field("operator"),
            format!("unknown operator '{other}', expected one of In, NotIn, Exists, DoesNotExist"),
        )),
    }
}
