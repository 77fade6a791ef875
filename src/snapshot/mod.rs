//! Warm restarts: each cache is written to a snapshot file (its objects, each scope's
//! resourceVersion, its epoch and revision) periodically and on shutdown, and loaded at
//! start-up, so that informerd serves at once and resumes its watches instead of listing
//! everything from the apiserver again, and its clients resume with their tokens.
//!
//! `format` is the file, `file` puts it in place crash-safely, `fingerprint` says whose a
//! snapshot is, `load` checks and restores one, `write` takes them. A snapshot that is not
//! whole, not this format, not this configuration's or cluster's, or older than `maxAge`
//! is ignored with a log line saying why, and the cache lists as on a cold start.
//!
//! This module must NOT decide how a store encodes objects (`store` exports and restores
//! them), nor run watches (the fleet resumes them from the resourceVersions given).

mod file;
mod fingerprint;
mod format;
mod load;
#[cfg(test)]
mod tests;
mod write;

use std::time::Duration;

pub use file::{path, PAUSE_ENV};
pub use fingerprint::of_cluster as cluster_fingerprint;
pub use format::FORMAT_VERSION;
pub use load::restore;
pub use write::Snapshotter;

/// Why a snapshot was not used (or not written).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// There is none (a first start, or snapshots were just turned on).
    #[error("there is no snapshot")]
    Missing,
    /// Reading or writing the file failed.
    #[error("{0}; check that the snapshot directory exists and is writable by informerd")]
    Io(#[from] std::io::Error),
    /// The file does not start like a snapshot.
    #[error("not an informerd snapshot file")]
    NotASnapshot,
    /// Another format version (written by another release of informerd).
    #[error("format version {found}, this informerd reads version {supported}")]
    UnknownVersion {
        /// The file's.
        found: u32,
        /// This build's.
        supported: u32,
    },
    /// The file ends too early: a write that did not finish.
    #[error("truncated: the file ends before its checksum")]
    Truncated,
    /// The bytes are not those written.
    #[error("corrupt: checksum {computed:08x} of the contents, {stored:08x} recorded")]
    Checksum {
        /// What the file says.
        stored: u32,
        /// What its bytes give.
        computed: u32,
    },
    /// Whole, but its contents do not hold together.
    #[error("invalid contents: {0}")]
    Invalid(String),
    /// Taken with another configuration or from another cluster.
    #[error("it was taken {what}")]
    Foreign {
        /// What differs.
        what: &'static str,
    },
    /// Older than `snapshot.maxAge`.
    #[error("written {}s ago, more than snapshot.maxAge ({}s)", .age.as_secs(), .max_age.as_secs())]
    TooOld {
        /// Its age.
        age: Duration,
        /// The configured limit.
        max_age: Duration,
    },
}
