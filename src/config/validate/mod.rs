//! Validation: turns the file as written ([`RawConfig`]) into the [`Config`] the program uses,
//! compiling selectors, CEL and transforms once, and collecting every problem of the file rather
//! than stopping at the first, so that one run of `check-config` shows them all, in file order.
//!
//! This folder owns the rules of the file's fields, one section per file: the document and its
//! list of resources here, [`server`], [`change_log`], [`on_demand`], and one resource's
//! fields in [`resource`], [`scope`] and [`indexes`]. It must NOT read files or the YAML (that is
//! `yaml.rs` and the serde structs of `raw.rs`), nor ask the cluster anything: what needs
//! discovery is checked later, with [`Config::error_at`].

pub(super) mod authorization;
mod change_log;
pub(super) mod clusters;
mod indexes;
mod limits;
pub(super) mod on_demand;
mod resource;
mod scope;
mod server;
pub(super) mod snapshot;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::diagnostic::{ConfigError, Diagnostic, Source};
use super::model::{resource_path, Config, ResourceConfig, API_VERSION, KIND};
use super::raw::{RawConfig, RawResource};

/// Validates the deserialized file `raw`, whose fields are found in `source`.
pub(super) fn validate(source: Arc<Source>, raw: RawConfig) -> Result<Config, ConfigError> {
    let mut validator = Validator {
        source,
        diagnostics: Vec::new(),
    };
    validator.document(&raw.api_version, &raw.kind);
    let server = validator.server(raw.server.unwrap_or_default());
    let change_log = validator.change_log(raw.change_log.unwrap_or_default());
    let limits = validator.limits(raw.limits.unwrap_or_default());
    let snapshot = raw.snapshot.map(|s| validator.snapshot(s));
    let on_demand = raw.on_demand.map(|o| validator.on_demand(o));
    let clusters = validator.clusters(raw.clusters);
    let resources = validator.resources(raw.resources, on_demand.is_some(), &clusters);
    if !validator.diagnostics.is_empty() {
        let mut diagnostics = validator.diagnostics;
        diagnostics.sort_by_key(|d| (d.line, d.column));
        return Err(ConfigError::Invalid(diagnostics));
    }
    Ok(Config {
        server,
        change_log,
        limits,
        snapshot: snapshot.flatten(),
        resources,
        on_demand: on_demand.flatten(),
        clusters,
        source: validator.source,
    })
}

/// Collects every problem of the file, and compiles what is valid.
struct Validator {
    source: Arc<Source>,
    diagnostics: Vec<Diagnostic>,
}

/// A resource that passed validation, with where it is in the file.
struct Validated {
    /// Its position in `resources`.
    index: usize,
    /// Whether its name is the default one (the lowercase kind).
    defaulted_name: bool,
    resource: ResourceConfig,
}

impl Validator {
    /// Records a problem about the field at `path`.
    fn error(&mut self, path: impl AsRef<str>, message: impl Into<String>) {
        let diagnostic = self.source.diagnostic(path.as_ref(), message, false);
        self.diagnostics.push(diagnostic);
    }

    /// The document's own `apiVersion` and `kind`.
    fn document(&mut self, api_version: &str, kind: &str) {
        if api_version != API_VERSION {
            self.error(
                "apiVersion",
                format!("unsupported apiVersion '{api_version}', expected {API_VERSION}"),
            );
        }
        if kind != KIND {
            self.error(
                "kind",
                format!("unsupported kind '{kind}', expected {KIND}"),
            );
        }
    }

    /// The `resources` list: at least one (none is fine beside `onDemand`), each valid, and
    /// their names unique.
    fn resources(
        &mut self,
        raw: Vec<RawResource>,
        on_demand: bool,
        clusters: &[clusters::ClusterConfig],
    ) -> Vec<ResourceConfig> {
        if raw.is_empty() && !on_demand {
            self.error(
                "resources",
                "no resources: list at least one resource to cache (apiVersion and kind)",
            );
        }
        let mut resources = Vec::with_capacity(raw.len());
        for (index, resource) in raw.into_iter().enumerate() {
            let defaulted_name = resource.name.is_none();
            if let Some(resource) = self.resource(index, resource) {
                resources.push(Validated {
                    index,
                    defaulted_name,
                    resource,
                });
            }
        }
        self.resource_clusters(&mut resources, clusters);
        self.unique_names(&resources);
        resources.into_iter().map(|v| v.resource).collect()
    }

    /// Clients ask for a resource by cluster and name, so no two of a cluster may share one.
    fn unique_names(&mut self, resources: &[Validated]) {
        let mut first_of: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for Validated {
            index: i,
            defaulted_name,
            resource,
        } in resources
        {
            let key = (resource.cluster.as_str(), resource.name.as_str());
            let first = *first_of.entry(key).or_insert(*i);
            if first == *i {
                continue;
            }
            let (path, hint) = if *defaulted_name {
                (
                    format!("resources[{i}]"),
                    " (the default name, the lowercase kind); set `name` to tell them apart",
                )
            } else {
                (resource_path(*i, "name"), "")
            };
            self.error(
                path,
                format!(
                    "duplicate name '{}', also used by resources[{first}]{hint}",
                    resource.name
                ),
            );
        }
    }

    /// A duration as Go and Kubernetes write them (`30s`, `5m`, `1h30m`), of at least `min`;
    /// `None` (and an error at `path`) otherwise. Shared by every duration of the file.
    fn duration(&mut self, path: &str, text: &str, min: Duration) -> Option<Duration> {
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d >= min => Some(d),
            Ok(_) => {
                let min = humantime::format_duration(min);
                self.error(path, format!("{text:?} is too short: at least {min}"));
                None
            }
            Err(e) => {
                self.error(
                    path,
                    format!("{text:?} is not a duration ({e}); write e.g. 30s, 5m or 1h30m"),
                );
                None
            }
        }
    }
}
