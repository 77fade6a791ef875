//! One entry of `resources`, validated step by step: what it is (apiVersion, kind, name), which
//! namespaces ([`scope`](super::scope)), what the apiserver filters (label, field and shard
//! selectors), what informerd filters (CEL) and strips (transform), and its
//! [`indexes`](super::indexes).

use std::fmt::Display;

use crate::config::model::{resource_path, ResourceConfig};
use crate::config::raw::{RawResource, RawTransform};
use crate::filter::{FieldSelector, Filter, LabelSelector, Shard};
use crate::transform::Transform;
use crate::vocab::names::{dns1123_label, dns1123_subdomain};

use super::Validator;

/// The validator, at one resource: fields are named relative to `resources[index]`.
pub(super) struct ResourceFields<'v> {
    validator: &'v mut Validator,
    index: usize,
}

impl Validator {
    /// Validates one resource; `None` if any of it is invalid (the errors are recorded).
    pub(super) fn resource(&mut self, index: usize, raw: RawResource) -> Option<ResourceConfig> {
        let errors_before = self.diagnostics.len();
        let mut fields = ResourceFields {
            validator: self,
            index,
        };
        let (group, version) = fields.api_version(&raw.api_version);
        fields.kind(&raw.kind, &group, raw.allow_secrets);
        let name = fields.name(raw.name, &raw.kind);
        let scope = fields.scope(raw.namespaces, raw.namespace_selector);
        let label_selector =
            fields.selector("labelSelector", raw.label_selector, LabelSelector::parse);
        let field_selector =
            fields.selector("fieldSelector", raw.field_selector, FieldSelector::parse);
        let shard_selector = fields.selector("shardSelector", raw.shard_selector, Shard::parse);
        let filter = fields.filter(raw.filter);
        let transform = fields.transform(raw.transform);
        let indexes = fields.indexes(raw.indexes);
        if self.diagnostics.len() > errors_before {
            return None;
        }
        Some(ResourceConfig {
            name,
            api_version: raw.api_version,
            group,
            version,
            kind: raw.kind,
            scope,
            label_selector,
            field_selector,
            shard_selector,
            filter,
            transform,
            indexes,
            allow_secrets: raw.allow_secrets,
            cluster: raw.cluster.unwrap_or_default(),
        })
    }
}

impl ResourceFields<'_> {
    /// Records a problem about `field` of this resource (e.g. `kind`, `indexes[0].cel`).
    pub(super) fn error(&mut self, field: &str, message: impl Into<String>) {
        let path = resource_path(self.index, field);
        self.validator.error(path, message);
    }

    /// `apiVersion`: `v1` or `group/version`; the group (empty for the core group) and the
    /// version, as written even when invalid (the error recorded).
    fn api_version(&mut self, api_version: &str) -> (String, String) {
        let (group, version) = match api_version.split_once('/') {
            None => (String::new(), api_version.to_string()),
            Some((group, version)) => (group.to_string(), version.to_string()),
        };
        let version_ok = dns1123_label(&version).is_ok() && !version.contains('/');
        if group == "core" {
            self.error(
                "apiVersion",
                format!("the core group is written without a group: apiVersion: {version}"),
            );
        } else if api_version.is_empty() {
            self.error(
                "apiVersion",
                "apiVersion is empty; expected 'v1' or 'group/version'",
            );
        } else if !version_ok || (api_version.contains('/') && dns1123_subdomain(&group).is_err()) {
            self.error(
                "apiVersion",
                format!(
                    "'{api_version}' is not an apiVersion; expected 'v1' or 'group/version', \
                     e.g. apps/v1"
                ),
            );
        }
        (group, version)
    }

    /// `kind`: CamelCase, and core/v1 Secrets only when opted into.
    fn kind(&mut self, kind: &str, group: &str, allow_secrets: bool) {
        if kind.is_empty() {
            self.error("kind", "kind is empty; expected a kind such as Pod");
        } else if !(kind.starts_with(|c: char| c.is_ascii_alphabetic())
            && kind.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            self.error(
                "kind",
                format!(
                    "'{kind}' is not a kind; kinds are written in CamelCase, e.g. Pod, Deployment"
                ),
            );
        } else if kind == "Secret" && group.is_empty() && !allow_secrets {
            self.error(
                "kind",
                "caching Secrets needs an explicit opt-in: set `allowSecrets: true` on this \
                 resource (the cache serves them to every client of informerd, whatever its own \
                 RBAC allows)",
            );
        }
    }

    /// `name`, or by default the lowercase kind: a DNS-1123 label either way.
    fn name(&mut self, name: Option<String>, kind: &str) -> String {
        let given = name.is_some();
        let name = name.unwrap_or_else(|| kind.to_lowercase());
        if let Err(e) = dns1123_label(&name) {
            if given {
                self.error("name", format!("invalid name '{name}': {e}"));
            } else if !kind.is_empty() {
                self.error(
                    "kind",
                    format!(
                        "the default name '{name}' (the lowercase kind) is invalid: {e}; set \
                         `name`"
                    ),
                );
            }
        }
        name
    }

    /// A server-side selector (`labelSelector`, `fieldSelector`): blank is none; otherwise it
    /// must parse, and is kept as written.
    fn selector<T, E: Display>(
        &mut self,
        field: &str,
        text: Option<String>,
        parse: fn(&str) -> Result<T, E>,
    ) -> Option<String> {
        let text = non_blank(text)?;
        if let Err(e) = parse(&text) {
            self.error(field, e.to_string());
        }
        Some(text)
    }

    /// `filter`: a CEL expression that must compile (and yield a bool).
    fn filter(&mut self, expr: Option<String>) -> Option<Filter> {
        let path = resource_path(self.index, "filter");
        self.validator.filter_at(&path, expr)
    }

    /// `transform`: the identity when absent, or when invalid (the error recorded at the path
    /// at fault).
    fn transform(&mut self, raw: Option<RawTransform>) -> Transform {
        let path = resource_path(self.index, "transform");
        self.validator.transform_at(&path, raw)
    }
}

impl Validator {
    /// A `filter` at `path` (of a resource, or of `onDemand`): a CEL expression that must
    /// compile (and yield a bool); blank is none.
    pub(super) fn filter_at(&mut self, path: &str, expr: Option<String>) -> Option<Filter> {
        let expr = non_blank(expr)?;
        Filter::compile(&expr)
            .map_err(|e| self.error(path, e.to_string()))
            .ok()
    }

    /// A `transform` at `path`: the identity when absent, or when invalid (the error recorded
    /// at the entry at fault, e.g. `PATH.drop[2]`).
    pub(super) fn transform_at(&mut self, path: &str, raw: Option<RawTransform>) -> Transform {
        let Some(raw) = raw else {
            return Transform::identity();
        };
        Transform::new(&raw.drop, &raw.keep).unwrap_or_else(|e| {
            let (list, index) = e.location();
            self.error(format!("{path}.{list}[{index}]"), e.detail());
            Transform::identity()
        })
    }
}

/// An optional text, with blank text counted as absent.
fn non_blank(text: Option<String>) -> Option<String> {
    text.filter(|s| !s.trim().is_empty())
}
