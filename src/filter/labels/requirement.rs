//! One requirement of a label selector: its key, how it matches a label's value, and its string
//! syntax.

use std::collections::BTreeSet;
use std::fmt;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`, `key==value`, matchLabels: the label exists and has this value.
    Equals(String, String),
    /// `key!=value`: the label is absent or has another value.
    NotEquals(String, String),
    /// `key in (a,b)`: the label exists and has one of the values.
    In(String, BTreeSet<String>),
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn(String, BTreeSet<String>),
    /// `key`: the label exists.
    Exists(String),
    /// `!key`: the label does not exist.
    DoesNotExist(String),
    /// `key>n`: the label exists and is an integer greater than `n`.
    GreaterThan(String, i64),
    /// `key<n`: the label exists and is an integer less than `n`.
    LessThan(String, i64),
}

impl Requirement {
    /// The label key the requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::Equals(k, _)
            | Requirement::NotEquals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::GreaterThan(k, _)
            | Requirement::LessThan(k, _) => k,
        }
    }

    /// Whether a label value (`None`: absent) satisfies the requirement.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self {
            Requirement::Equals(_, v) => value == Some(v.as_str()),
            Requirement::NotEquals(_, v) => value != Some(v.as_str()),
            Requirement::In(_, vs) => value.is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(_, vs) => value.is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(_) => value.is_some(),
            Requirement::DoesNotExist(_) => value.is_none(),
            Requirement::GreaterThan(_, n) => value
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Requirement::LessThan(_, n) => value
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |vs: &BTreeSet<String>| vs.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, vs) => write!(f, "{k} in ({})", set(vs)),
            Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", set(vs)),
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
            Requirement::GreaterThan(k, n) => write!(f, "{k}>{n}"),
            Requirement::LessThan(k, n) => write!(f, "{k}<{n}"),
        }
    }
}
