//! The `onDemand` section: the bounds within which clients may ask (the `Ensure` RPC) for a
//! cache the static `resources` do not list: which API groups and kinds, which namespaces, the
//! filter and transform applied to every such cache, how many may run at once, how many
//! objects each may hold, and how long one may stay without a client before it is stopped.
//!
//! Decision: the validated type and the section's serde struct live here rather than in
//! `model.rs` and `raw.rs` (which re-export or reference them), so that this section stays in
//! one file while others change the model.
//!
//! Decision: `maxObjects` bounds each on-demand cache, not their total: the operator bounds the
//! total with `maxCaches × maxObjects`, and a cache that outgrows its bound is stopped alone,
//! without touching the caches other clients use.

use std::time::Duration;

use serde::Deserialize;

use crate::config::raw::RawTransform;
use crate::filter::Filter;
use crate::transform::Transform;
use crate::vocab::names::{dns1123_label, dns1123_subdomain};

use super::Validator;

/// How many on-demand caches may run at once when `maxCaches` is left out.
pub const DEFAULT_MAX_CACHES: usize = 10;
/// How many objects one on-demand cache may hold when `maxObjects` is left out.
pub const DEFAULT_MAX_OBJECTS: usize = 100_000;
/// How long an on-demand cache may stay without a client when `idleTimeout` is left out.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// `onDemand` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOnDemand {
    #[serde(default)]
    pub allow: Vec<RawAllow>,
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
    #[serde(default)]
    pub filter: Option<String>,
    #[serde(default)]
    pub transform: Option<RawTransform>,
    #[serde(default)]
    pub max_caches: Option<u64>,
    #[serde(default)]
    pub max_objects: Option<u64>,
    #[serde(default)]
    pub idle_timeout: Option<String>,
    #[serde(default)]
    pub allow_secrets: bool,
}

/// One entry of `onDemand.allow` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAllow {
    /// The API group; `""` for the core group.
    pub group: String,
    /// The kinds of that group; every kind when left out.
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
}

/// One API group clients may ask caches of, and which of its kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedGroup {
    /// The API group; empty for the core group.
    pub group: String,
    /// The kinds allowed; `None`: every kind of the group.
    pub kinds: Option<Vec<String>>,
}

/// `onDemand`, validated.
#[derive(Clone, Debug)]
pub struct OnDemandConfig {
    /// `allow`: the groups (and kinds) that may be asked for.
    pub allow: Vec<AllowedGroup>,
    /// `namespaces`: the namespaces that may be asked for; `None`: every namespace.
    pub namespaces: Option<Vec<String>>,
    /// The CEL filter every on-demand cache applies.
    pub filter: Option<Filter>,
    /// What every on-demand cache keeps of each object.
    pub transform: Transform,
    /// `maxCaches`: how many on-demand caches may run at once.
    pub max_caches: usize,
    /// `maxObjects`: how many objects one on-demand cache may hold.
    pub max_objects: usize,
    /// `idleTimeout`: how long a cache may stay without a client before it is stopped.
    pub idle_timeout: Duration,
    /// `allowSecrets`: whether core Secrets may be asked for (never by default).
    pub allow_secrets: bool,
}

impl OnDemandConfig {
    /// Whether a cache of `kind` in `group` may be asked for; otherwise the bound that refuses
    /// it, named as in the file.
    pub fn allows_kind(&self, group: &str, kind: &str) -> Result<(), String> {
        let shown = if group.is_empty() {
            format!("{kind} (core group)")
        } else {
            format!("{kind}.{group}")
        };
        if kind == "Secret" && group.is_empty() && !self.allow_secrets {
            return Err(format!(
                "{shown} is outside onDemand.allowSecrets: Secrets are cached on demand only \
                 when the operator sets it"
            ));
        }
        let allowed = self.allow.iter().any(|a| {
            a.group == group
                && a.kinds
                    .as_ref()
                    .is_none_or(|kinds| kinds.iter().any(|k| k == kind))
        });
        if allowed {
            return Ok(());
        }
        let groups: Vec<String> = self
            .allow
            .iter()
            .map(|a| {
                let g = if a.group.is_empty() { "core" } else { &a.group };
                match &a.kinds {
                    None => format!("{g}: every kind"),
                    Some(kinds) => format!("{g}: {}", kinds.join(", ")),
                }
            })
            .collect();
        Err(format!(
            "{shown} is outside onDemand.allow (which allows {}); ask the operator to add it",
            if groups.is_empty() {
                "nothing".to_string()
            } else {
                groups.join("; ")
            }
        ))
    }

    /// Whether a cache of `namespaces` (empty: every namespace) may be asked for; otherwise
    /// the bound that refuses it.
    pub fn allows_namespaces(&self, namespaces: &[String]) -> Result<(), String> {
        let Some(allowed) = &self.namespaces else {
            return Ok(());
        };
        if namespaces.is_empty() {
            return Err(format!(
                "every namespace is outside onDemand.namespaces (which allows {}); name the \
                 namespaces",
                allowed.join(", ")
            ));
        }
        match namespaces.iter().find(|ns| !allowed.contains(ns)) {
            None => Ok(()),
            Some(ns) => Err(format!(
                "namespace {ns:?} is outside onDemand.namespaces (which allows {})",
                allowed.join(", ")
            )),
        }
    }
}

impl Validator {
    /// `onDemand`; `None` when any of it is invalid (the errors recorded).
    pub(super) fn on_demand(&mut self, raw: RawOnDemand) -> Option<OnDemandConfig> {
        let errors_before = self.diagnostics.len();
        if raw.allow.is_empty() {
            self.error(
                "onDemand.allow",
                "is required: list the API groups (and kinds) clients may ask caches of, e.g. \
                 [{group: example.com, kinds: [Widget]}]",
            );
        }
        for (i, allow) in raw.allow.iter().enumerate() {
            self.allowed_group(i, allow);
        }
        if let Some(namespaces) = &raw.namespaces {
            for (i, ns) in namespaces.iter().enumerate() {
                if let Err(e) = dns1123_label(ns) {
                    self.error(
                        format!("onDemand.namespaces[{i}]"),
                        format!("invalid namespace '{ns}': {e}"),
                    );
                }
            }
        }
        let filter = self.filter_at("onDemand.filter", raw.filter);
        let transform = self.transform_at("onDemand.transform", raw.transform);
        let max_caches = self.count("onDemand.maxCaches", raw.max_caches);
        let max_objects = self.count("onDemand.maxObjects", raw.max_objects);
        let idle_timeout = match raw.idle_timeout {
            None => Some(DEFAULT_IDLE_TIMEOUT),
            Some(text) => self.duration("onDemand.idleTimeout", &text, Duration::from_secs(1)),
        };
        if self.diagnostics.len() > errors_before {
            return None;
        }
        let size = |n: Option<u64>, default| n.map_or(default, |n| n as usize);
        Some(OnDemandConfig {
            allow: raw
                .allow
                .into_iter()
                .map(|a| AllowedGroup {
                    group: a.group,
                    kinds: a.kinds,
                })
                .collect(),
            namespaces: raw.namespaces,
            filter,
            transform,
            max_caches: size(max_caches, DEFAULT_MAX_CACHES),
            max_objects: size(max_objects, DEFAULT_MAX_OBJECTS),
            idle_timeout: idle_timeout?,
            allow_secrets: raw.allow_secrets,
        })
    }

    /// `onDemand.allow[i]`: a group (empty for core) and CamelCase kinds.
    fn allowed_group(&mut self, i: usize, allow: &RawAllow) {
        if !allow.group.is_empty() {
            if let Err(e) = dns1123_subdomain(&allow.group) {
                self.error(
                    format!("onDemand.allow[{i}].group"),
                    format!(
                        "invalid API group '{}': {e}; write \"\" for the core group",
                        allow.group
                    ),
                );
            }
        }
        for (k, kind) in allow.kinds.iter().flatten().enumerate() {
            if !(kind.starts_with(|c: char| c.is_ascii_alphabetic())
                && kind.chars().all(|c| c.is_ascii_alphanumeric()))
            {
                self.error(
                    format!("onDemand.allow[{i}].kinds[{k}]"),
                    format!("'{kind}' is not a kind; kinds are written in CamelCase, e.g. Widget"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    fn file(on_demand: &str) -> String {
        format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nonDemand:\n{on_demand}")
    }

    fn errors(on_demand: &str) -> Vec<String> {
        match parse("informerd.yaml", &file(on_demand)) {
            Ok(_) => panic!("accepted:\n{on_demand}"),
            Err(e) => e.diagnostics().iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn on_demand_alone_needs_no_static_resources_and_takes_the_defaults() {
        let config = parse(
            "informerd.yaml",
            &file("  allow: [{group: example.com, kinds: [Widget]}]\n"),
        )
        .expect("valid");
        let od = config.on_demand.expect("onDemand set");
        assert!(config.resources.is_empty());
        assert_eq!(od.max_caches, super::DEFAULT_MAX_CACHES);
        assert_eq!(od.max_objects, super::DEFAULT_MAX_OBJECTS);
        assert_eq!(od.idle_timeout, super::DEFAULT_IDLE_TIMEOUT);
        assert!(od.allows_kind("example.com", "Widget").is_ok());
        let refused = od.allows_kind("example.com", "Gadget").unwrap_err();
        assert!(refused.contains("onDemand.allow"), "{refused}");
        assert!(od.allows_namespaces(&[]).is_ok());
    }

    #[test]
    fn namespaces_and_secrets_are_bounds() {
        let config = parse(
            "informerd.yaml",
            &file("  allow: [{group: \"\"}]\n  namespaces: [a, b]\n  idleTimeout: 2s\n"),
        )
        .expect("valid");
        let od = config.on_demand.expect("onDemand set");
        assert!(od.allows_kind("", "ConfigMap").is_ok());
        assert!(od
            .allows_kind("", "Secret")
            .unwrap_err()
            .contains("onDemand.allowSecrets"));
        assert!(od.allows_namespaces(&["a".into()]).is_ok());
        let refused = od.allows_namespaces(&["c".into()]).unwrap_err();
        assert!(refused.contains("onDemand.namespaces"), "{refused}");
        assert!(od.allows_namespaces(&[]).is_err());
        assert_eq!(od.idle_timeout, std::time::Duration::from_secs(2));
    }

    #[test]
    fn every_bad_field_is_reported_at_its_place() {
        let found = errors(
            "  allow: [{group: Bad_Group, kinds: [wid-get]}]\n  namespaces: [Nope]\n  \
             filter: 'object.'\n  maxCaches: 0\n  idleTimeout: soon\n",
        );
        let joined = found.join("\n");
        for path in [
            "onDemand.allow[0].group",
            "onDemand.allow[0].kinds[0]",
            "onDemand.namespaces[0]",
            "onDemand.filter",
            "onDemand.maxCaches",
            "onDemand.idleTimeout",
        ] {
            assert!(joined.contains(path), "{path} missing in:\n{joined}");
        }
        assert!(errors("  maxCaches: 3\n")
            .join("\n")
            .contains("onDemand.allow: is required"));
    }
}
