//! Why `bench` failed: each error names the file, line or flag to fix.

use informerd::config::ConfigError;

/// Why `bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The configuration is invalid: `FILE:LINE:COLUMN: field: message`, as `check-config`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{input}: cannot read the input: {source}")]
    ReadInput {
        input: String,
        #[source]
        source: std::io::Error,
    },
    /// The input is not JSON.
    #[error("{input}:{line}:{column}: {message}")]
    Json {
        input: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A JSON document (starting at `line`) that is not a Kubernetes object or list.
    #[error("{input}:{line}: {what}{message}")]
    Dump {
        input: String,
        line: usize,
        /// `items[3]: `, or empty for the document itself.
        what: String,
        message: String,
    },
    #[error(
        "{input}: the input is empty; expected a List as `kubectl get pods -A -o json` prints it"
    )]
    EmptyInput { input: String },
    #[error("--resource {name}: the configuration has no resource of that name; it has: {known}")]
    UnknownResource { name: String, known: String },
    #[error(
        "no configured resource matches an object of the input: the configuration caches {configured}; \
         the input holds {found}"
    )]
    NothingToMeasure { configured: String, found: String },
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
}
