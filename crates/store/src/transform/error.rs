//! What is wrong with the paths of a transform, named by list and position.

use thiserror::Error;

use crate::vocab::path::PathError;

/// An error in the transform paths.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TransformError {
    /// A path does not follow the syntax.
    #[error("{list}[{index}]: {source}")]
    Path {
        /// `drop` or `keep`.
        list: &'static str,
        /// The position of the path in its list.
        index: usize,
        /// What is wrong.
        source: PathError,
    },
    /// A drop path would remove an identity field.
    #[error("drop[{index}]: '{path}' would remove the identity field {field}, which every stored object keeps")]
    DropsIdentity {
        /// The position of the path in `drop`.
        index: usize,
        /// The path as written.
        path: String,
        /// The identity field it would remove, dotted.
        field: String,
    },
}

impl TransformError {
    /// `("drop" | "keep", index)`: which path of the configuration is wrong.
    pub fn location(&self) -> (&'static str, usize) {
        match self {
            TransformError::Path { list, index, .. } => (list, *index),
            TransformError::DropsIdentity { index, .. } => ("drop", *index),
        }
    }

    /// The message without the location prefix.
    pub fn detail(&self) -> String {
        match self {
            TransformError::Path { source, .. } => source.to_string(),
            TransformError::DropsIdentity { path, field, .. } => format!(
                "'{path}' would remove the identity field {field}, which every stored object keeps"
            ),
        }
    }
}
