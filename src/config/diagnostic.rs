//! How a problem in the configuration is reported: a [`Diagnostic`] per problem, rendered
//! `FILE:LINE:COLUMN: field.path: message`, the [`ConfigError`] that carries them, and the
//! [`Source`] that turns a field path into a place in the file.

use std::fmt;
use std::path::PathBuf;

use thiserror::Error;

use super::yaml::{Pos, Positions};

/// One problem in the file, where it is and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name, as given to [`parse`](super::parse) or [`load`](super::load).
    pub file: String,
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
    /// The field, e.g. `resources[0].filter`; empty for the document itself.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl Diagnostic {
    /// A problem at `pos` of `file` (an unknown position counts as line 1, column 1).
    pub(super) fn at(file: &str, pos: Pos, path: String, message: String) -> Diagnostic {
        Diagnostic {
            file: file.to_string(),
            line: pos.line.max(1),
            column: pos.column.max(1),
            path,
            message,
        }
    }

    /// The error of a file with this one problem.
    pub(super) fn into_error(self) -> ConfigError {
        ConfigError::Invalid(vec![self])
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", OneLine(&self.path))?;
        }
        write!(f, "{}", OneLine(&self.message))
    }
}

/// Text written on one line: a key may hold a line break (a YAML complex key), and each
/// diagnostic is one `FILE:LINE:COLUMN: …` line, so control characters are escaped.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// Why a configuration was refused.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{}: cannot read the configuration: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is invalid: one line per problem, `FILE:LINE:COLUMN: field.path: message`.
    #[error("{}", display_lines(.0))]
    Invalid(Vec<Diagnostic>),
}

fn display_lines(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(Diagnostic::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl ConfigError {
    /// The problems in the file (none for a read error).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid(d) => d,
        }
    }
}

/// The file name and the positions of its fields, for errors found after validation.
#[derive(Debug)]
pub(super) struct Source {
    /// The file name, as given to [`parse`](super::parse).
    pub(super) file: String,
    positions: Positions,
}

impl Source {
    pub(super) fn new(file: &str, positions: Positions) -> Source {
        Source {
            file: file.to_string(),
            positions,
        }
    }

    /// A problem about the field at `path`, shown at its key (`at_key`) or at its value; a path
    /// that is not written in the file is shown at its closest written ancestor.
    pub(super) fn diagnostic(
        &self,
        path: &str,
        message: impl Into<String>,
        at_key: bool,
    ) -> Diagnostic {
        let place = self.positions.find(path).unwrap_or_default();
        let pos = if at_key { place.key } else { place.value };
        Diagnostic::at(&self.file, pos, path.to_string(), message.into())
    }
}
