//! The least-privilege RBAC a configuration needs (`informerd rbac`): `list` and `watch` on
//! exactly the configured resources (and what `onDemand.allow` allows), a Role and RoleBinding in each listed namespace, a
//! ClusterRole and ClusterRoleBinding for cluster-wide streams and `namespaceSelector` (which
//! also watches Namespaces), all bound to one ServiceAccount.
//!
//! Decision: a module of its own, after `config` in the data flow, not inside it: `config`
//! decides nothing about the cluster, and the generator is not a command either (`cli/rbac.rs`
//! prints it; tests call it). It grants only what the sidecar calls (see `fleet`): streaming
//! lists are watches, the fallback is paginated lists, the namespace selector lists and watches
//! Namespaces, and discovery (`/api`, `/apis`) is open to every authenticated identity through
//! the `system:discovery` ClusterRole. No `get`: informerd never reads a single object.
//! With `server.authorization: kubernetes`, also `create` on tokenreviews and
//! subjectaccessreviews (`reviews`).
//!
//! It must NOT talk to the cluster: plurals and scopes come from [`builtin`], or from the
//! discovery answers the caller passes in ([`Kinds::Discovered`], `informerd rbac
//! --kubeconfig`), and a kind neither knows fails with an error pointing at the file, never
//! with a guessed rule.

pub mod builtin;
mod on_demand;
mod reviews;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::rbac::v1::{
        ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::config::{Config, ConfigError, ResourceConfig, Scope};

/// The verbs of every rule: what a watcher's list and watch need, nothing more.
pub const VERBS: [&str; 2] = ["list", "watch"];

/// Why no RBAC could be generated.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    /// A resource whose rules cannot be derived (a kind that is not built in, a cluster-scoped
    /// kind with namespaces); rendered as `FILE:LINE:COLUMN: field: message`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The objects could not be written as YAML.
    #[error("writing the RBAC objects as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// A kind as RBAC rules name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kind {
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource (plural), e.g. `endpoints`.
    pub plural: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Where the plurals and scopes of the configured kinds come from.
#[derive(Clone, Debug)]
pub enum Kinds {
    /// Kubernetes' built-in kinds ([`builtin`]); any other kind is an error.
    Builtin,
    /// A cluster's discovery: one answer per configured resource, in file order, the kind or
    /// why the cluster does not serve it.
    Discovered(Vec<Result<Kind, String>>),
}

/// Who is granted the rules, and how the objects are named.
#[derive(Clone, Debug)]
pub struct Grantee {
    /// The ServiceAccount the sidecar runs as (the pod's).
    pub service_account: String,
    /// Its namespace.
    pub namespace: String,
    /// The name of every Role, RoleBinding, ClusterRole and ClusterRoleBinding.
    pub name: String,
}

/// The RBAC objects of a configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rbac {
    /// Cluster-wide rules, if any resource needs them.
    pub cluster: Option<(ClusterRole, ClusterRoleBinding)>,
    /// A Role and its binding per listed namespace, by namespace.
    pub namespaces: Vec<(Role, RoleBinding)>,
}

/// API group → resources: one rule each.
type Rules = BTreeMap<String, BTreeSet<String>>;

/// The RBAC that `config` needs, granted to `grantee`, with the kinds' plurals from `kinds`.
pub fn generate(config: &Config, grantee: &Grantee, kinds: &Kinds) -> Result<Rbac, RbacError> {
    let mut cluster = Rules::new();
    let mut namespaced: BTreeMap<String, Rules> = BTreeMap::new();
    for (i, rc) in config.resources.iter().enumerate() {
        let kind = resolve(config, kinds, i, rc)?;
        match &rc.scope {
            Scope::AllNamespaces => grant(&mut cluster, &kind.group, &kind.plural),
            Scope::Selector(_) => {
                // Matching namespaces come and go: only a ClusterRole covers them all.
                grant(&mut cluster, &kind.group, &kind.plural);
                grant(&mut cluster, "", "namespaces");
            }
            Scope::Namespaces(list) => {
                for ns in list {
                    grant(
                        namespaced.entry(ns.clone()).or_default(),
                        &kind.group,
                        &kind.plural,
                    );
                }
            }
        }
    }
    on_demand::rules(config, &mut cluster, &mut namespaced)?;
    let reviews = reviews::rules(config);
    Ok(Rbac {
        cluster: (!cluster.is_empty() || !reviews.is_empty()).then(|| {
            let (mut role, binding) = cluster_objects(grantee, &cluster);
            role.rules.get_or_insert_default().extend(reviews);
            (role, binding)
        }),
        namespaces: namespaced
            .iter()
            .map(|(ns, rules)| namespace_objects(grantee, ns, rules))
            .collect(),
    })
}

/// Grants list and watch on `plural` of `group` in `rules`.
fn grant(rules: &mut Rules, group: &str, plural: &str) {
    rules
        .entry(group.to_string())
        .or_default()
        .insert(plural.to_string());
}

/// The plural and scope of a resource's kind; an error at its `kind` (or at its namespaces)
/// when the rules cannot be derived or could not serve the configured scope.
fn resolve(
    config: &Config,
    kinds: &Kinds,
    index: usize,
    rc: &ResourceConfig,
) -> Result<Kind, ConfigError> {
    let kind = match kinds {
        Kinds::Builtin => builtin::lookup(&rc.group, &rc.kind).ok_or_else(|| {
            format!(
                "{} {} is not a built-in Kubernetes kind, so its resource name (plural) is not \
                 known without the cluster; run informerd rbac with --kubeconfig to ask the \
                 cluster's discovery",
                rc.api_version, rc.kind
            )
        }),
        Kinds::Discovered(answers) => answers[index].clone().map_err(|e| {
            format!(
                "{} {} is not served by the cluster ({e}); check apiVersion and kind, or \
                 install its CustomResourceDefinition",
                rc.api_version, rc.kind
            )
        }),
    }
    .map_err(|message| config.error_at(index, "kind", &message))?;
    if !kind.namespaced && !matches!(rc.scope, Scope::AllNamespaces) {
        let field = match rc.scope {
            Scope::Namespaces(_) => "namespaces",
            _ => "namespaceSelector",
        };
        let message = format!("{} is cluster-scoped: remove {field}", rc.kind);
        return Err(config.error_at(index, field, &message));
    }
    Ok(kind)
}

fn policy_rules(rules: &Rules) -> Vec<PolicyRule> {
    rules
        .iter()
        .map(|(group, resources)| PolicyRule {
            api_groups: Some(vec![group.clone()]),
            resources: Some(resources.iter().cloned().collect()),
            verbs: VERBS.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        })
        .collect()
}

fn meta(grantee: &Grantee, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(grantee.name.clone()),
        namespace: namespace.map(str::to_string),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".to_string(),
            "informerd".to_string(),
        )])),
        ..Default::default()
    }
}

fn subjects(grantee: &Grantee) -> Option<Vec<Subject>> {
    Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: grantee.service_account.clone(),
        namespace: Some(grantee.namespace.clone()),
        ..Default::default()
    }])
}

fn role_ref(grantee: &Grantee, kind: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: grantee.name.clone(),
    }
}

fn cluster_objects(grantee: &Grantee, rules: &Rules) -> (ClusterRole, ClusterRoleBinding) {
    let role = ClusterRole {
        metadata: meta(grantee, None),
        rules: Some(policy_rules(rules)),
        ..Default::default()
    };
    let binding = ClusterRoleBinding {
        metadata: meta(grantee, None),
        role_ref: role_ref(grantee, "ClusterRole"),
        subjects: subjects(grantee),
    };
    (role, binding)
}

fn namespace_objects(grantee: &Grantee, namespace: &str, rules: &Rules) -> (Role, RoleBinding) {
    let role = Role {
        metadata: meta(grantee, Some(namespace)),
        rules: Some(policy_rules(rules)),
    };
    let binding = RoleBinding {
        metadata: meta(grantee, Some(namespace)),
        role_ref: role_ref(grantee, "Role"),
        subjects: subjects(grantee),
    };
    (role, binding)
}

impl Rbac {
    /// The objects as one YAML stream (`---` between documents), ClusterRole first, then each
    /// namespace's Role and RoleBinding in namespace order; `header` lines are written first as
    /// comments.
    pub fn to_yaml(&self, header: &str) -> Result<String, RbacError> {
        let mut docs = Vec::new();
        if let Some((role, binding)) = &self.cluster {
            docs.push(serde_yaml::to_string(role)?);
            docs.push(serde_yaml::to_string(binding)?);
        }
        for (role, binding) in &self.namespaces {
            docs.push(serde_yaml::to_string(role)?);
            docs.push(serde_yaml::to_string(binding)?);
        }
        let comments: String = header.lines().map(|l| format!("# {l}\n")).collect();
        Ok(format!("{comments}{}", docs.join("---\n")))
    }
}

#[cfg(test)]
mod tests;
