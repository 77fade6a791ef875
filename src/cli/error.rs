//! Why a client command failed, and how a gRPC status reads in its message:
//! `CODE: message (reason: Reason)`.

use informerd_client::{self as client, ClientError};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Connect(#[from] ClientError),
    /// An error status from the sidecar.
    #[error("{}", status_text(.0))]
    Status(tonic::Status),
    #[error("cannot decode the {what}: {source}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write YAML: {0}")]
    Yaml(#[source] serde_yaml::Error),
    #[error("the list stream ended before its last message")]
    TruncatedList,
    /// An error, and what to do about it.
    #[error("{error}")]
    Hinted { error: Box<CliError>, hint: String },
    /// The connection failed under a call.
    #[error("lost the connection to the sidecar at {target}: {reason}")]
    Transport { target: String, reason: String },
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl From<tonic::Status> for CliError {
    fn from(status: tonic::Status) -> Self {
        CliError::Status(status)
    }
}

/// `CODE: message (reason: Reason)`.
fn status_text(status: &tonic::Status) -> String {
    let code = client::code_name(status.code());
    match client::reason(status) {
        Some(reason) => format!("{code}: {} (reason: {reason})", status.message()),
        None => format!("{code}: {}", status.message()),
    }
}
