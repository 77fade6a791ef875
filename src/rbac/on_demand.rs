//! The rules `onDemand.allow` needs: `list` and `watch` on every kind clients may ask caches
//! of, in the namespaces of `onDemand.namespaces` (a Role each) or cluster-wide (the
//! ClusterRole) when it is left out.
//!
//! Decision: an entry without `kinds` (every kind of its group) is granted as `resources: ["*"]`
//! of that group, which is what it allows; a listed kind needs its plural, known for
//! Kubernetes' built-in kinds ([`super::builtin`]); any other is an error at
//! `onDemand.allow[i].kinds[k]` (no guessed rule): list its group without kinds, or grant its
//! plural by hand. A cluster-scoped built-in kind is granted in the ClusterRole (Ensure asks
//! for it with no namespace).
//!
//! Decision: these rules are of the default cluster only. A remote cluster's access is its
//! kubeconfig user's, granted by that cluster's operator.

use std::collections::BTreeMap;

use super::{builtin, grant, Rules};
use crate::config::{Config, ConfigError};

/// Adds the rules of `config`'s `onDemand.allow` to `cluster` (the ClusterRole's) and
/// `namespaced` (each namespace's Role).
pub(super) fn rules(
    config: &Config,
    cluster: &mut Rules,
    namespaced: &mut BTreeMap<String, Rules>,
) -> Result<(), ConfigError> {
    let Some(on_demand) = &config.on_demand else {
        return Ok(());
    };
    for (i, allow) in on_demand.allow.iter().enumerate() {
        // (plural, namespaced) of each kind the entry allows.
        let mut plurals = Vec::new();
        match &allow.kinds {
            None => plurals.push(("*".to_string(), true)),
            Some(kinds) => {
                for (k, kind) in kinds.iter().enumerate() {
                    let found = builtin::lookup(&allow.group, kind).ok_or_else(|| {
                        config.error_at_path(
                            &format!("onDemand.allow[{i}].kinds[{k}]"),
                            &format!(
                                "{kind} is not a built-in Kubernetes kind, so its resource name \
                                 (plural) is not known to informerd rbac; list the group \
                                 without kinds to grant all of it, or grant its plural by hand"
                            ),
                        )
                    })?;
                    plurals.push((found.plural, found.namespaced));
                }
            }
        }
        for (plural, in_namespaces) in plurals {
            match (&on_demand.namespaces, in_namespaces) {
                (Some(list), true) => {
                    for ns in list {
                        grant(
                            namespaced.entry(ns.clone()).or_default(),
                            &allow.group,
                            &plural,
                        );
                    }
                }
                _ => grant(cluster, &allow.group, &plural),
            }
        }
    }
    Ok(())
}
