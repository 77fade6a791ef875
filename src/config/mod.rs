//! The configuration file: one YAML document in Kubernetes style, validated at start-up with
//! errors that name the file, line, column and field.
//!
//! ```yaml
//! apiVersion: informerd.io/v1alpha1
//! kind: Config
//! server:                      # optional
//!   socket: /run/informerd/informerd.sock   # the default
//!   socketMode: "0660"        # the default: owner and group may connect; octal, quoted
//!   listen: 127.0.0.1:7070    # optional TCP; loopback only, unless tls is set
//!   tls:                       # optional; required for a non-loopback listen address
//!     certFile: /etc/informerd/tls.crt
//!     keyFile: /etc/informerd/tls.key
//!     clientCAFile: /etc/informerd/ca.crt   # optional: require client certificates
//!   metrics: 0.0.0.0:9477     # optional plain HTTP: /livez, /readyz, /metrics; any address
//!                             # (no cached data is served there); default off
//!   authorization: kubernetes # optional: check each client's token and RBAC (default none);
//!                             # or a mapping, see validate/authorization.rs
//! changeLog:                   # optional bounds of the store's change log
//!   maxEvents: 10000           # the default
//!   maxBytes: 64Mi             # the default; Kubernetes quantity syntax
//! limits:                      # optional; what is refused beyond each: docs/bad-input.md
//!   maxObjectSize: 3Mi         # the default; larger objects (as the store encodes them) are skipped
//!   maxWatchers: 1000          # the default; Watch calls open at once
//!   maxConcurrentLists: 100    # the default; List calls open at once
//!   maxRequestSize: 4Mi        # the default; one request message
//!   maxMemory: 200Mi           # above it new List, Watch and Ensure calls are refused; default
//!                              # 75% of the container's memory limit (config/container.rs), else off
//! snapshot:                    # optional warm restarts (docs/operating.md, "Warm restart"); default off
//!   directory: /var/lib/informerd   # where each cache's snapshot file is written
//!   interval: 5m               # the default: how often, besides on SIGTERM
//!   maxAge: 1h                 # the default: an older snapshot is not resumed from
//! resources:
//! - name: pods                 # optional; default: the lowercase kind; a unique DNS-1123 label
//!   apiVersion: v1             # "v1" or "group/version"
//!   kind: Pod
//!   namespaces: [a, b]         # or namespaceSelector (a LabelSelector on Namespaces);
//!                              # neither: all namespaces, in one cluster-wide stream
//!   labelSelector: "app=foo"   # server-side, Kubernetes syntax
//!   fieldSelector: "spec.nodeName=node-1"
//!   filter: 'object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")'  # CEL, a bool
//!   transform:
//!     drop: [metadata.managedFields]
//!     keep: []
//!   indexes:
//!   - name: node
//!     path: spec.nodeName      # exactly one of path and cel
//!   allowSecrets: false        # must be true to cache core/v1 Secrets
//! ```
//!
//! [`parse`] validates everything that can be checked without a cluster, reports every problem it
//! finds (one line each: `FILE:LINE:COLUMN: field.path: message`), and compiles selectors, CEL
//! and transforms once, into the [`Config`] the rest of the program uses. Problems found later
//! (discovery says a kind does not exist) still point into the file with [`Config::error_at`].
//!
//! This module owns the file: reading it ([`load`]), its YAML with the place of every field
//! (`yaml`), `${VAR}` values from the environment (`env`), the serde structs of the file as
//! written (`raw`), byte quantities (`quantity`), the rules of every field (`validate`), the
//! validated types and their defaults (`model`) and how problems are reported (`diagnostic`).
//! It must NOT talk to the cluster (what needs discovery is checked by the fleet, which reports
//! it with [`Config::error_at`]), nor hold any state beyond the [`Config`] it returns.

pub mod container;
mod diagnostic;
mod env;
mod limits;
mod model;
mod quantity;
mod raw;
mod validate;
mod warnings;
mod yaml;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

pub use diagnostic::{ConfigError, Diagnostic};
pub use limits::{
    LimitsConfig, DEFAULT_MAX_CONCURRENT_LISTS, DEFAULT_MAX_OBJECT_SIZE, DEFAULT_MAX_REQUEST_SIZE,
    DEFAULT_MAX_WATCHERS,
};
pub use model::{
    AuthorizationConfig, AuthorizationMode, ChangeLogConfig, ClusterConfig, Config, IndexConfig,
    ResourceConfig, Scope, ServerConfig, TlsConfig, API_VERSION, DEFAULT_CLUSTER,
    DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS, DEFAULT_SOCKET, DEFAULT_SOCKET_MODE, KIND,
};
pub use quantity::parse_bytes;
pub use validate::on_demand::{
    AllowedGroup, OnDemandConfig, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CACHES, DEFAULT_MAX_OBJECTS,
};
pub use validate::snapshot::{SnapshotConfig, DEFAULT_SNAPSHOT_INTERVAL, DEFAULT_SNAPSHOT_MAX_AGE};
pub use yaml::{Place, Pos};

use diagnostic::Source;

/// Reads and validates the configuration file at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&path.display().to_string(), &text)
}

/// Validates the configuration in `text`, `${VAR}`s from the process's environment (see `env`);
/// `file_name` is used in error messages.
pub fn parse(file_name: &str, text: &str) -> Result<Config, ConfigError> {
    parse_with_env(file_name, text, &env::process)
}

/// [`parse`], with `${VAR}`s from `env`.
fn parse_with_env(file_name: &str, text: &str, env: env::Lookup) -> Result<Config, ConfigError> {
    let (value, positions) = yaml::parse(text, env).map_err(|errors| {
        let at = |e: yaml::YamlError| Diagnostic::at(file_name, e.pos, e.path, e.message);
        ConfigError::Invalid(errors.into_iter().map(at).collect())
    })?;
    if value.is_null() {
        let message = format!(
            "the file is empty; expected apiVersion: {API_VERSION}, kind: {KIND} and resources"
        );
        let pos = Pos { line: 1, column: 1 };
        return Err(Diagnostic::at(file_name, pos, String::new(), message).into_error());
    }
    let source = Arc::new(Source::new(file_name, positions));
    if !value.is_object() {
        let message = "expected a map with apiVersion, kind and resources";
        return Err(source.diagnostic("", message, false).into_error());
    }
    let raw = deserialize(value, &source)?;
    validate::validate(source, raw)
}

/// The document as written, with serde's errors (unknown fields, wrong types, missing fields)
/// pointing into the file.
fn deserialize(value: Value, source: &Source) -> Result<raw::RawConfig, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = match e.path().to_string() {
            p if p == "." => String::new(),
            p => p,
        };
        let message = e.inner().to_string();
        // An unknown field is best shown at its key; other errors at the value.
        let at_key = message.starts_with("unknown field");
        source.diagnostic(&path, message, at_key).into_error()
    })
}

#[cfg(test)]
mod tests;
