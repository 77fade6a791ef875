//! The [`LabelSelector`]: requirements that must all hold, matched on labels and objects.

use serde_json::Value;

use super::parse::Parser;
use super::requirement::Requirement;
use super::source::Labels;
use crate::filter::FilterError;

/// A parsed, validated label selector: all requirements must hold (AND). The empty selector
/// matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub(super) requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Parses the Kubernetes string syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    /// `a`, `!a`, `a>1`, `a<1`, joined by commas (AND). Keys and values are validated as
    /// Kubernetes does; errors name the column.
    ///
    /// ```
    /// use informerd::filter::LabelSelector;
    /// use std::collections::BTreeMap;
    ///
    /// let s = LabelSelector::parse("app in (web,api), tier!=db, !canary").unwrap();
    /// let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    /// assert!(s.matches(&labels));
    /// let err = LabelSelector::parse("app=~web").unwrap_err();
    /// assert_eq!(err.to_string(), "invalid label selector: unknown operator '=~' at column 4");
    /// ```
    pub fn parse(text: &str) -> Result<LabelSelector, FilterError> {
        let requirements =
            Parser::new(text)
                .parse()
                .map_err(|(column, message)| FilterError::LabelSelector {
                    field: None,
                    message: format!("{message} at column {column}"),
                })?;
        Ok(LabelSelector { requirements })
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the selector matches everything (it has no requirement).
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches_value(labels.label(r.key())))
    }

    /// Whether the `metadata.labels` of an object (JSON) satisfy every requirement.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.matches(&labels)
    }
}

crate::filter::string_syntax!(
    LabelSelector,
    "The Kubernetes string syntax, e.g. for `ListParams::labels`."
);
