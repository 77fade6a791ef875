//! The configuration file: one YAML document in Kubernetes style, validated at start-up with
//! errors that name the file, line, column and field.
//!
//! ```yaml
//! apiVersion: informerd.io/v1alpha1
//! kind: Config
//! server:                      # optional
//!   socket: /run/informerd/informerd.sock   # the default
//!   listen: 127.0.0.1:7070    # optional TCP; loopback only, unless tls is set
//!   tls:                       # optional; required for a non-loopback listen address
//!     certFile: /etc/informerd/tls.crt
//!     keyFile: /etc/informerd/tls.key
//!     clientCAFile: /etc/informerd/ca.crt   # optional: require client certificates
//! changeLog:                   # optional bounds of the store's change log
//!   maxEvents: 10000           # the default
//!   maxBytes: 64Mi             # the default; Kubernetes quantity syntax
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

mod quantity;
mod raw;
mod yaml;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use thiserror::Error;

use crate::filter::{FieldSelector, Filter, FilterError, LabelSelector, StringsExpr};
use crate::transform::Transform;
use crate::vocab::names::{dns1123_label, dns1123_subdomain};

pub use quantity::parse_bytes;
pub use yaml::{Place, Pos};

/// The `apiVersion` of the configuration file.
pub const API_VERSION: &str = "informerd.io/v1alpha1";
/// The `kind` of the configuration file.
pub const KIND: &str = "Config";
/// The default Unix socket of the gRPC API.
pub const DEFAULT_SOCKET: &str = "/run/informerd/informerd.sock";
/// The default bound of the change log, in events. The log exists to resume watches after a
/// short disconnect (a client that falls further behind relists, as with the apiserver's own
/// watch cache); every entry costs about 110 bytes of its own even though it shares the
/// object's bytes, so 100,000 entries would cost more than the 100,000 pods they describe
/// (measured with `cargo bench --bench cache_memory`). 10,000 events cover 100 seconds of
/// churn at 100 changes per second.
pub const DEFAULT_MAX_EVENTS: usize = 10_000;
/// The default bound of the change log, in bytes (64Mi).
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// One problem in the file, where it is and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name, as given to [`parse`] or [`load`].
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

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
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

/// The `server` section: where the gRPC API listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The Unix domain socket (default [`DEFAULT_SOCKET`]).
    pub socket: PathBuf,
    /// An optional TCP address: loopback, or any address when `tls` is set.
    pub listen: Option<SocketAddr>,
    /// TLS for the TCP address.
    pub tls: Option<TlsConfig>,
}

/// `server.tls`: the server's certificate and key (PEM), and optionally the CA that client
/// certificates must be signed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_file: Option<PathBuf>,
}

/// The `changeLog` section: bounds of the store's log of recent changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeLogConfig {
    /// At most this many events (default [`DEFAULT_MAX_EVENTS`]).
    pub max_events: usize,
    /// At most this many bytes (default [`DEFAULT_MAX_BYTES`]).
    pub max_bytes: usize,
}

/// Which namespaces a resource is watched in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One cluster-wide stream (also the only scope of cluster-scoped kinds).
    AllNamespaces,
    /// One stream per listed namespace.
    Namespaces(Vec<String>),
    /// One stream per Namespace that matches the selector, started and stopped as they come
    /// and go.
    Selector(LabelSelector),
}

/// A secondary index of a resource.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// The name clients use.
    pub name: String,
    /// What the keys are.
    pub expr: StringsExpr,
}

/// One cached resource, validated and compiled.
#[derive(Clone, Debug)]
pub struct ResourceConfig {
    /// The name clients use: `name`, or the lowercase kind.
    pub name: String,
    /// `v1` or `group/version`, as written.
    pub api_version: String,
    /// The API group; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Pod`.
    pub kind: String,
    /// Which namespaces.
    pub scope: Scope,
    /// The server-side label selector (validated, as written).
    pub label_selector: Option<String>,
    /// The server-side field selector (validated, as written).
    pub field_selector: Option<String>,
    /// The CEL filter an object must pass to be stored.
    pub filter: Option<Filter>,
    /// What is kept of each object (the identity transform if none is configured).
    pub transform: Transform,
    /// Secondary indexes.
    pub indexes: Vec<IndexConfig>,
    /// Whether caching Secrets was opted into.
    pub allow_secrets: bool,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the gRPC API listens.
    pub server: ServerConfig,
    /// Bounds of the change log.
    pub change_log: ChangeLogConfig,
    /// The cached resources, in file order.
    pub resources: Vec<ResourceConfig>,
    source: Arc<Source>,
}

/// The file name and the positions of its fields, for errors found after validation.
#[derive(Debug)]
struct Source {
    file: String,
    positions: yaml::Positions,
}

impl Source {
    fn diagnostic(&self, path: &str, message: impl Into<String>, at_key: bool) -> Diagnostic {
        let place = self.positions.find(path).unwrap_or_default();
        let pos = if at_key { place.key } else { place.value };
        Diagnostic {
            file: self.file.clone(),
            line: pos.line.max(1),
            column: pos.column.max(1),
            path: path.to_string(),
            message: message.into(),
        }
    }
}

impl Config {
    /// An error about field `field` (e.g. `kind`, `namespaces`, `indexes[0].cel`) of resource
    /// `resource_index`, pointing into the file: `FILE:LINE:COL: resources[i].field: message`.
    pub fn error_at(&self, resource_index: usize, field: &str, message: &str) -> ConfigError {
        self.error_at_path(&format!("resources[{resource_index}].{field}"), message)
    }

    /// An error about any field of the file, by its path (e.g. `server.listen`).
    pub fn error_at_path(&self, path: &str, message: &str) -> ConfigError {
        ConfigError::Invalid(vec![self.source.diagnostic(path, message, false)])
    }

    /// The file name the configuration was read from.
    pub fn file(&self) -> &str {
        &self.source.file
    }

    /// The resource clients call `name`.
    pub fn resource(&self, name: &str) -> Option<&ResourceConfig> {
        self.resources.iter().find(|r| r.name == name)
    }
}

/// Reads and validates the configuration file at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&path.display().to_string(), &text)
}

/// Validates the configuration in `text`; `file_name` is used in error messages.
pub fn parse(file_name: &str, text: &str) -> Result<Config, ConfigError> {
    let fail = |pos: Pos, path: String, message: String| {
        ConfigError::Invalid(vec![Diagnostic {
            file: file_name.to_string(),
            line: pos.line.max(1),
            column: pos.column.max(1),
            path,
            message,
        }])
    };
    let (value, positions) = yaml::parse(text).map_err(|e| fail(e.pos, e.path, e.message))?;
    let source = Arc::new(Source {
        file: file_name.to_string(),
        positions,
    });
    if value.is_null() {
        return Err(fail(
            Pos { line: 1, column: 1 },
            String::new(),
            format!(
                "the file is empty; expected apiVersion: {API_VERSION}, kind: {KIND} and resources"
            ),
        ));
    }
    if !value.is_object() {
        return Err(ConfigError::Invalid(vec![source.diagnostic(
            "",
            "expected a map with apiVersion, kind and resources",
            false,
        )]));
    }
    let raw: raw::RawConfig = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = match e.path().to_string() {
            p if p == "." => String::new(),
            p => p,
        };
        let message = e.inner().to_string();
        // An unknown field is best shown at its key; other errors at the value.
        let at_key = message.starts_with("unknown field");
        ConfigError::Invalid(vec![source.diagnostic(&path, message, at_key)])
    })?;
    Validator {
        source,
        diagnostics: Vec::new(),
    }
    .validate(raw)
}

/// Collects every problem of the file, and compiles what is valid.
struct Validator {
    source: Arc<Source>,
    diagnostics: Vec<Diagnostic>,
}

impl Validator {
    fn error(&mut self, path: impl AsRef<str>, message: impl Into<String>) {
        let diagnostic = self.source.diagnostic(path.as_ref(), message, false);
        self.diagnostics.push(diagnostic);
    }

    fn validate(mut self, raw: raw::RawConfig) -> Result<Config, ConfigError> {
        if raw.api_version != API_VERSION {
            self.error(
                "apiVersion",
                format!(
                    "unsupported apiVersion '{}', expected {API_VERSION}",
                    raw.api_version
                ),
            );
        }
        if raw.kind != KIND {
            self.error(
                "kind",
                format!("unsupported kind '{}', expected {KIND}", raw.kind),
            );
        }
        let server = self.server(raw.server.unwrap_or_default());
        let change_log = self.change_log(raw.change_log.unwrap_or_default());
        if raw.resources.is_empty() {
            self.error(
                "resources",
                "no resources: list at least one resource to cache (apiVersion and kind)",
            );
        }
        let mut resources = Vec::with_capacity(raw.resources.len());
        for (i, resource) in raw.resources.into_iter().enumerate() {
            let defaulted_name = resource.name.is_none();
            if let Some(r) = self.resource(i, resource) {
                resources.push((i, defaulted_name, r));
            }
        }
        // Unique names.
        let mut first_of: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, defaulted, r) in &resources {
            let first = *first_of.entry(&r.name).or_insert(*i);
            if first != *i {
                let hint = if *defaulted {
                    " (the default name, the lowercase kind); set `name` to tell them apart"
                } else {
                    ""
                };
                let path = if *defaulted {
                    format!("resources[{i}]")
                } else {
                    format!("resources[{i}].name")
                };
                self.error(
                    path,
                    format!(
                        "duplicate name '{}', also used by resources[{first}]{hint}",
                        r.name
                    ),
                );
            }
        }
        if !self.diagnostics.is_empty() {
            self.diagnostics.sort_by_key(|d| (d.line, d.column));
            return Err(ConfigError::Invalid(self.diagnostics));
        }
        Ok(Config {
            server,
            change_log,
            resources: resources.into_iter().map(|(_, _, r)| r).collect(),
            source: self.source,
        })
    }

    fn server(&mut self, raw: raw::RawServer) -> ServerConfig {
        let socket = match raw.socket {
            Some(s) if s.trim().is_empty() => {
                self.error("server.socket", "the socket path is empty");
                PathBuf::from(DEFAULT_SOCKET)
            }
            Some(s) => PathBuf::from(s),
            None => PathBuf::from(DEFAULT_SOCKET),
        };
        let tls = raw.tls.and_then(|t| self.tls(t));
        let has_tls = tls.is_some();
        let listen_given = raw.listen.is_some();
        let listen = raw
            .listen
            .and_then(|text| match text.parse::<SocketAddr>() {
                Ok(addr) if addr.ip().is_loopback() || has_tls => Some(addr),
                Ok(addr) => {
                    self.error(
                        "server.listen",
                        format!(
                            "{addr} is not a loopback address; informerd serves data its \
                             clients may not otherwise read, so beyond 127.0.0.0/8 and [::1] it \
                             needs server.tls (certFile, keyFile, and clientCAFile to require \
                             client certificates)"
                        ),
                    );
                    None
                }
                Err(_) => {
                    self.error(
                        "server.listen",
                        format!(
                            "'{text}' is not an address; expected IP:PORT, e.g. 127.0.0.1:7070"
                        ),
                    );
                    None
                }
            });
        if has_tls && !listen_given {
            self.error(
                "server.tls",
                "TLS applies to the TCP address: set server.listen too (the Unix socket is \
                 never encrypted)",
            );
        }
        ServerConfig {
            socket,
            listen,
            tls,
        }
    }

    fn tls(&mut self, raw: raw::RawTls) -> Option<TlsConfig> {
        let file = |this: &mut Self, field: &str, value: Option<String>| match value {
            Some(v) if !v.trim().is_empty() => Some(PathBuf::from(v)),
            _ => {
                this.error(
                    format!("server.tls.{field}"),
                    "is required: a PEM file path",
                );
                None
            }
        };
        let cert_file = file(self, "certFile", raw.cert_file);
        let key_file = file(self, "keyFile", raw.key_file);
        Some(TlsConfig {
            cert_file: cert_file?,
            key_file: key_file?,
            client_ca_file: raw.client_ca_file.map(PathBuf::from),
        })
    }

    fn change_log(&mut self, raw: raw::RawChangeLog) -> ChangeLogConfig {
        let max_events = match raw.max_events {
            None => DEFAULT_MAX_EVENTS,
            Some(0) => {
                self.error("changeLog.maxEvents", "must be at least 1");
                DEFAULT_MAX_EVENTS
            }
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let max_bytes = match raw.max_bytes {
            None => Some(DEFAULT_MAX_BYTES as u64),
            Some(serde_json::Value::Number(n)) => match n.as_u64() {
                Some(b) => Some(b),
                None => {
                    self.error(
                        "changeLog.maxBytes",
                        format!("{n} is not a whole, non-negative number of bytes"),
                    );
                    None
                }
            },
            Some(serde_json::Value::String(s)) => match parse_bytes(&s) {
                Ok(b) => Some(b),
                Err(e) => {
                    self.error("changeLog.maxBytes", e);
                    None
                }
            },
            Some(other) => {
                self.error(
                    "changeLog.maxBytes",
                    format!("expected a quantity such as 64Mi, found {other}"),
                );
                None
            }
        };
        let max_bytes = match max_bytes {
            Some(0) => {
                self.error("changeLog.maxBytes", "must be at least 1 byte");
                DEFAULT_MAX_BYTES
            }
            Some(b) => usize::try_from(b).unwrap_or(usize::MAX),
            None => DEFAULT_MAX_BYTES,
        };
        ChangeLogConfig {
            max_events,
            max_bytes,
        }
    }

    /// Validates one resource; `None` if any of it is invalid (the errors are recorded).
    fn resource(&mut self, i: usize, raw: raw::RawResource) -> Option<ResourceConfig> {
        let errors_before = self.diagnostics.len();
        let at = |field: &str| format!("resources[{i}].{field}");

        // apiVersion: "v1" or "group/version".
        let (group, version) = match raw.api_version.split_once('/') {
            None => (String::new(), raw.api_version.clone()),
            Some((group, version)) => (group.to_string(), version.to_string()),
        };
        let version_ok = dns1123_label(&version).is_ok() && !version.contains('/');
        if group == "core" {
            self.error(
                at("apiVersion"),
                format!("the core group is written without a group: apiVersion: {version}"),
            );
        } else if raw.api_version.is_empty() {
            self.error(
                at("apiVersion"),
                "apiVersion is empty; expected 'v1' or 'group/version'",
            );
        } else if !version_ok
            || (raw.api_version.contains('/') && dns1123_subdomain(&group).is_err())
        {
            self.error(
                at("apiVersion"),
                format!(
                    "'{}' is not an apiVersion; expected 'v1' or 'group/version', e.g. apps/v1",
                    raw.api_version
                ),
            );
        }

        // kind
        let kind = raw.kind.clone();
        if kind.is_empty() {
            self.error(at("kind"), "kind is empty; expected a kind such as Pod");
        } else if !(kind.starts_with(|c: char| c.is_ascii_alphabetic())
            && kind.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            self.error(
                at("kind"),
                format!(
                    "'{kind}' is not a kind; kinds are written in CamelCase, e.g. Pod, Deployment"
                ),
            );
        } else if kind == "Secret" && group.is_empty() && !raw.allow_secrets {
            self.error(
                at("kind"),
                "caching Secrets needs an explicit opt-in: set `allowSecrets: true` on this \
                 resource (the cache serves them to every client of informerd, whatever its own \
                 RBAC allows)",
            );
        }

        // name
        let name = raw.name.clone().unwrap_or_else(|| kind.to_lowercase());
        if let Err(e) = dns1123_label(&name) {
            match raw.name {
                Some(_) => self.error(at("name"), format!("invalid name '{name}': {e}")),
                None if !kind.is_empty() => self.error(
                    at("kind"),
                    format!("the default name '{name}' (the lowercase kind) is invalid: {e}; set `name`"),
                ),
                None => {}
            }
        }

        // scope
        let scope = match (raw.namespaces, raw.namespace_selector) {
            (Some(_), Some(_)) => {
                self.error(
                    at("namespaceSelector"),
                    "set either namespaces or namespaceSelector, not both",
                );
                Scope::AllNamespaces
            }
            (Some(namespaces), None) => {
                if namespaces.is_empty() {
                    self.error(
                        at("namespaces"),
                        "the list is empty; list namespaces, or remove `namespaces` to watch all \
                         namespaces",
                    );
                }
                for (j, ns) in namespaces.iter().enumerate() {
                    if let Err(e) = dns1123_label(ns) {
                        self.error(
                            at(&format!("namespaces[{j}]")),
                            format!("invalid namespace '{ns}': {e}"),
                        );
                    } else if namespaces[..j].contains(ns) {
                        self.error(
                            at(&format!("namespaces[{j}]")),
                            format!("namespace '{ns}' is listed twice"),
                        );
                    }
                }
                Scope::Namespaces(namespaces)
            }
            (None, Some(selector)) => {
                let selector = meta::LabelSelector {
                    match_labels: selector.match_labels,
                    match_expressions: selector.match_expressions.map(|exprs| {
                        exprs
                            .into_iter()
                            .map(|e| meta::LabelSelectorRequirement {
                                key: e.key,
                                operator: e.operator,
                                values: e.values,
                            })
                            .collect()
                    }),
                };
                match LabelSelector::from_k8s(&selector) {
                    Ok(s) => Scope::Selector(s),
                    Err(FilterError::LabelSelector { field, message }) => {
                        let path = match field {
                            Some(f) => at(&format!("namespaceSelector.{f}")),
                            None => at("namespaceSelector"),
                        };
                        self.error(path, format!("invalid label selector: {message}"));
                        Scope::AllNamespaces
                    }
                    Err(e) => {
                        self.error(at("namespaceSelector"), e.to_string());
                        Scope::AllNamespaces
                    }
                }
            }
            (None, None) => Scope::AllNamespaces,
        };

        // server-side selectors
        let label_selector = raw.label_selector.filter(|s| !s.trim().is_empty());
        if let Some(s) = &label_selector {
            if let Err(e) = LabelSelector::parse(s) {
                self.error(at("labelSelector"), e.to_string());
            }
        }
        let field_selector = raw.field_selector.filter(|s| !s.trim().is_empty());
        if let Some(s) = &field_selector {
            if let Err(e) = FieldSelector::parse(s) {
                self.error(at("fieldSelector"), e.to_string());
            }
        }

        // filter
        let filter = match raw.filter.filter(|f| !f.trim().is_empty()) {
            None => None,
            Some(expr) => match Filter::compile(&expr) {
                Ok(f) => Some(f),
                Err(e) => {
                    self.error(at("filter"), e.to_string());
                    None
                }
            },
        };

        // transform
        let transform = match raw.transform {
            None => Transform::identity(),
            Some(t) => match Transform::new(&t.drop, &t.keep) {
                Ok(t) => t,
                Err(e) => {
                    let (list, index) = e.location();
                    self.error(at(&format!("transform.{list}[{index}]")), e.detail());
                    Transform::identity()
                }
            },
        };

        // indexes
        let mut indexes = Vec::with_capacity(raw.indexes.len());
        for (j, index) in raw.indexes.into_iter().enumerate() {
            let field = |f: &str| at(&format!("indexes[{j}].{f}"));
            let name_ok = !index.name.is_empty()
                && index.name.len() <= 63
                && index
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !name_ok {
                self.error(
                    field("name"),
                    format!(
                        "invalid index name '{}': use 1 to 63 letters, digits, '-', '_' or '.'",
                        index.name
                    ),
                );
            } else if indexes.iter().any(|ix: &IndexConfig| ix.name == index.name) {
                self.error(
                    field("name"),
                    format!("duplicate index name '{}'", index.name),
                );
            }
            let expr = match (index.path, index.cel) {
                (Some(path), None) => StringsExpr::path(&path).map_err(|e| ("path", e)),
                (None, Some(cel)) => StringsExpr::cel(&cel).map_err(|e| ("cel", e)),
                (Some(_), Some(_)) => {
                    self.error(
                        at(&format!("indexes[{j}]")),
                        "set either path or cel, not both",
                    );
                    continue;
                }
                (None, None) => {
                    self.error(
                        at(&format!("indexes[{j}]")),
                        "set path (a field path such as spec.nodeName) or cel (an expression \
                         yielding strings)",
                    );
                    continue;
                }
            };
            match expr {
                Ok(expr) => indexes.push(IndexConfig {
                    name: index.name,
                    expr,
                }),
                Err((which, e)) => self.error(field(which), e.to_string()),
            }
        }

        if self.diagnostics.len() > errors_before {
            return None;
        }
        Some(ResourceConfig {
            name,
            api_version: raw.api_version,
            group,
            version,
            kind,
            scope,
            label_selector,
            field_selector,
            filter,
            transform,
            indexes,
            allow_secrets: raw.allow_secrets,
        })
    }
}

#[cfg(test)]
mod tests;
