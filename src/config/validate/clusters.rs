//! `clusters`: the remote clusters informerd caches from, besides the one it runs in, and each
//! resource's `cluster`. A cluster is a kubeconfig file and optionally one of its contexts; the
//! file is read when the fleet starts (reading files is not validation's job), so a missing
//! file is reported then, naming `clusters[i].kubeconfig`.
//!
//! Decision: the default cluster (the one informerd runs in, or its `--kubeconfig`) has no
//! entry and is named `""` in requests and in the file; Status and metrics show it as
//! [`DEFAULT_CLUSTER`] (`default`), which is therefore reserved: no entry may take it, and a
//! resource's `cluster: default` or a request's `cluster: "default"` mean the default cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Validated, Validator};
use crate::config::model::resource_path;
use crate::config::raw::RawCluster;
use crate::vocab::names::dns1123_label;

/// How Status and metrics name the default cluster, and the name no entry of `clusters` may
/// take.
pub const DEFAULT_CLUSTER: &str = "default";

/// One remote cluster, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The name resources and requests use (a DNS-1123 label, never `default`).
    pub name: String,
    /// The kubeconfig file, as written (relative paths are relative to the working directory,
    /// as for every other path of the file).
    pub kubeconfig: PathBuf,
    /// The context to use; the kubeconfig's `current-context` when `None`.
    pub context: Option<String>,
}

impl ClusterConfig {
    /// The cluster a request or a resource names, as the configuration keys it: `""` for the
    /// default cluster, whether written empty or as [`DEFAULT_CLUSTER`].
    pub fn canonical(name: &str) -> &str {
        if name == DEFAULT_CLUSTER {
            ""
        } else {
            name
        }
    }

    /// How Status, metrics and logs show the cluster `name` (`""`: [`DEFAULT_CLUSTER`]).
    pub fn display(name: &str) -> &str {
        if name.is_empty() {
            DEFAULT_CLUSTER
        } else {
            name
        }
    }
}

impl Validator {
    /// The `clusters` list: each a valid, unique name and a kubeconfig file.
    pub(super) fn clusters(&mut self, raw: Vec<RawCluster>) -> Vec<ClusterConfig> {
        let mut first_of: BTreeMap<String, usize> = BTreeMap::new();
        let mut clusters = Vec::with_capacity(raw.len());
        for (i, c) in raw.into_iter().enumerate() {
            let errors_before = self.diagnostics.len();
            let path = |field: &str| format!("clusters[{i}].{field}");
            if c.name == DEFAULT_CLUSTER {
                self.error(
                    path("name"),
                    "'default' names the cluster informerd runs in (or its --kubeconfig), which \
                     needs no entry: choose another name",
                );
            } else if let Err(e) = dns1123_label(&c.name) {
                self.error(path("name"), format!("invalid name '{}': {e}", c.name));
            } else if let Some(first) = first_of.get(&c.name) {
                self.error(
                    path("name"),
                    format!(
                        "duplicate name '{}', also used by clusters[{first}]",
                        c.name
                    ),
                );
            }
            first_of.entry(c.name.clone()).or_insert(i);
            if c.kubeconfig.trim().is_empty() {
                self.error(
                    path("kubeconfig"),
                    "the kubeconfig path is empty: give the file of the cluster's credentials",
                );
            }
            if c.context.as_deref().is_some_and(|s| s.trim().is_empty()) {
                self.error(
                    path("context"),
                    "the context is empty: name one of the kubeconfig's contexts, or leave \
                     context out to use its current-context",
                );
            }
            if self.diagnostics.len() == errors_before {
                clusters.push(ClusterConfig {
                    name: c.name,
                    kubeconfig: PathBuf::from(c.kubeconfig),
                    context: c.context,
                });
            }
        }
        clusters
    }

    /// Each resource's `cluster` names the default cluster or one of `clusters`; stored in its
    /// canonical form (see [`ClusterConfig::canonical`]).
    pub(super) fn resource_clusters(
        &mut self,
        resources: &mut [Validated],
        clusters: &[ClusterConfig],
    ) {
        for v in resources {
            let cluster = ClusterConfig::canonical(&v.resource.cluster).to_string();
            if !cluster.is_empty() && !clusters.iter().any(|c| c.name == cluster) {
                let defined = if clusters.is_empty() {
                    "none are defined: add it under `clusters` (name, kubeconfig)".to_string()
                } else {
                    let names: Vec<_> = clusters.iter().map(|c| c.name.as_str()).collect();
                    format!(
                        "defined: {} (or leave cluster out for the default cluster)",
                        names.join(", ")
                    )
                };
                self.error(
                    resource_path(v.index, "cluster"),
                    format!("unknown cluster '{cluster}'; {defined}"),
                );
            }
            v.resource.cluster = cluster;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    fn errors(text: &str) -> Vec<String> {
        match parse("c.yaml", text) {
            Ok(_) => Vec::new(),
            Err(e) => e.diagnostics().iter().map(|d| d.to_string()).collect(),
        }
    }

    const HEAD: &str = "apiVersion: informerd.io/v1alpha1\nkind: Config\n";

    #[test]
    fn resources_of_the_same_name_live_in_different_clusters() {
        let text = format!(
            "{HEAD}clusters:\n- name: east\n  kubeconfig: east.yaml\n  context: admin\n\
             resources:\n- apiVersion: v1\n  kind: ConfigMap\n\
             - apiVersion: v1\n  kind: ConfigMap\n  cluster: east\n\
             - apiVersion: v1\n  kind: Pod\n  cluster: default\n"
        );
        let config = parse("c.yaml", &text).expect("valid");
        assert_eq!(config.clusters.len(), 1);
        assert_eq!(config.clusters[0].context.as_deref(), Some("admin"));
        let clusters: Vec<_> = config
            .resources
            .iter()
            .map(|r| r.cluster.as_str())
            .collect();
        assert_eq!(
            clusters,
            ["", "east", ""],
            "`default` is the default cluster"
        );
        assert_eq!(
            config.resource_in("east", "configmap").unwrap().cluster,
            "east"
        );
        assert_eq!(config.resource("configmap").unwrap().cluster, "");
    }

    #[test]
    fn an_unknown_cluster_names_the_defined_ones() {
        let text = format!(
            "{HEAD}clusters:\n- name: east\n  kubeconfig: e\n- name: west\n  kubeconfig: w\n\
             resources:\n- apiVersion: v1\n  kind: Pod\n  cluster: north\n"
        );
        assert_eq!(
            errors(&text),
            [
                "c.yaml:11:12: resources[0].cluster: unknown cluster 'north'; defined: east, west \
              (or leave cluster out for the default cluster)"
            ]
        );
        let none = format!("{HEAD}resources:\n- apiVersion: v1\n  kind: Pod\n  cluster: east\n");
        assert_eq!(
            errors(&none),
            [
                "c.yaml:6:12: resources[0].cluster: unknown cluster 'east'; none are defined: add \
              it under `clusters` (name, kubeconfig)"
            ]
        );
    }

    #[test]
    fn cluster_entries_are_checked() {
        let text = format!(
            "{HEAD}clusters:\n- name: default\n  kubeconfig: a\n- name: East\n  kubeconfig: b\n\
             - name: west\n  kubeconfig: ''\n- name: west\n  kubeconfig: c\n  context: ' '\n\
             resources:\n- apiVersion: v1\n  kind: Pod\n"
        );
        let errors = errors(&text);
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(errors[0].starts_with("c.yaml:4:9: clusters[0].name: 'default' names the"));
        assert!(errors[1].starts_with("c.yaml:6:9: clusters[1].name: invalid name 'East'"));
        assert!(errors[2].starts_with("c.yaml:9:15: clusters[2].kubeconfig: the kubeconfig"));
        assert_eq!(
            errors[3],
            "c.yaml:10:9: clusters[3].name: duplicate name 'west', also used by clusters[2]"
        );
        assert!(errors[4].starts_with("c.yaml:12:12: clusters[3].context: the context is empty"));
    }

    #[test]
    fn names_are_unique_within_a_cluster() {
        let text = format!(
            "{HEAD}clusters:\n- name: east\n  kubeconfig: e\n\
             resources:\n- apiVersion: v1\n  kind: Pod\n  cluster: east\n\
             - apiVersion: v1\n  kind: Pod\n  cluster: east\n"
        );
        let errors = errors(&text);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].contains("resources[1]: duplicate name 'pod'"),
            "{errors:?}"
        );
    }
}
