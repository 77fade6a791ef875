//! Which objects are kept: CEL filters, index key extractors, and Kubernetes label and field
//! selectors, all evaluated locally on the JSON of an object.
//!
//! - [`Filter`]: a CEL expression over `object` that must be true for the object to be stored,
//!   e.g. `object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")`. CEL follows
//!   Kubernetes' conventions: selecting a field that is absent is an error (callers count it and
//!   treat the object as not matching); `has(object.spec.nodeName)` tests presence.
//! - [`StringsExpr`]: the keys of a secondary index, from a field path or a CEL expression.
//! - [`LabelSelector`] and [`FieldSelector`]: the selectors of the Kubernetes API, parsed with
//!   Kubernetes' syntax and validation, matched on cached objects.
//! - [`Shard`]: the apiserver's `shardSelector` (KEP-5866), for a resource that caches one
//!   shard and for a List or Watch that asks for one.
//!
//! This module decides which objects are kept and matches selectors; it never changes an object
//! (that is [`transform`](crate::transform)'s business). CEL lives in `expr`, label selectors
//! in `labels`, field selectors in `fields`.

mod expr;
mod fields;
mod labels;
mod shard;

use thiserror::Error;

pub use expr::{unguarded_reads, ChangePredicate, Filter, StringsExpr};
pub use fields::{FieldOp, FieldRequirement, FieldSelector};
pub use labels::{LabelSelector, Labels, Requirement};
pub use shard::{fnv1a64, Shard};

use crate::vocab::path::PathError;

/// What can go wrong compiling or evaluating a filter, an index expression or a selector.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FilterError {
    /// The CEL expression does not parse, or refers to something other than `object`.
    #[error("CEL does not compile: {0}")]
    Compile(String),
    /// The CEL filter evaluates to something other than a bool.
    #[error("the CEL expression must evaluate to a bool, but it evaluates to a {got} on {sample}")]
    NotBool {
        /// The CEL type it evaluated to.
        got: String,
        /// The sample object it was evaluated on.
        sample: &'static str,
    },
    /// The CEL index expression yields something other than strings.
    #[error(
        "the CEL expression must evaluate to a string or a list of strings, but it evaluates to \
         {got} on {sample}"
    )]
    NotStrings {
        /// What it evaluated to.
        got: String,
        /// The sample object it was evaluated on.
        sample: &'static str,
    },
    /// Evaluating on an object failed (e.g. no such key).
    #[error("CEL evaluation failed: {0}")]
    Evaluation(String),
    /// A field path does not follow the syntax.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A label selector is invalid. `field` names the part of a structured selector at fault
    /// (e.g. `matchExpressions[0].operator`); string selectors name the column in `message`.
    #[error("invalid label selector: {}{message}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
    LabelSelector {
        /// The field of a structured selector at fault.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A field selector is invalid; the message names the column.
    #[error("invalid field selector: {message}")]
    FieldSelector {
        /// What is wrong.
        message: String,
    },
}

/// Writes selector requirements in Kubernetes string syntax: comma-separated (an AND).
fn write_requirements<T: std::fmt::Display>(
    f: &mut std::fmt::Formatter<'_>,
    requirements: &[T],
) -> std::fmt::Result {
    for (i, r) in requirements.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{r}")?;
    }
    Ok(())
}

/// The string syntax of a selector type: `Display` writes its `requirements()` (`$doc` says how),
/// `FromStr` is its `parse`. Both selectors share it, so they cannot drift apart.
macro_rules! string_syntax {
    ($selector:ty, $doc:literal) => {
        impl std::fmt::Display for $selector {
            #[doc = $doc]
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                $crate::filter::write_requirements(f, self.requirements())
            }
        }

        impl std::str::FromStr for $selector {
            type Err = $crate::filter::FilterError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$selector>::parse(s)
            }
        }
    };
}
use string_syntax;
