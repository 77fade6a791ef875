//! One entry of the configuration's `resources` (what is cached, filtered and transformed
//! how) and its parts: the transform and the indexes.

use std::collections::BTreeMap;

use serde::Serialize;

/// One entry of `resources`: what is cached, from where, filtered and transformed how.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    api_version: String,
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespaces: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_selector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field_selector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_selector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<String>,
    #[serde(skip_serializing_if = "Transform::is_empty")]
    transform: Transform,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    indexes: Vec<Index>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_secrets: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<String>,
}

impl Resource {
    /// A resource named `name` (what clients ask for) of `apiVersion` and `kind`, in every
    /// namespace until [`Resource::namespaces`] says otherwise.
    pub fn new(name: &str, api_version: &str, kind: &str) -> Resource {
        Resource {
            name: Some(name.to_string()),
            ..Self::kind(api_version, kind)
        }
    }

    /// A resource without a `name` (the sidecar derives it from the kind).
    pub fn kind(api_version: &str, kind: &str) -> Resource {
        Resource {
            name: None,
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespaces: None,
            namespace_selector: None,
            label_selector: None,
            field_selector: None,
            shard_selector: None,
            filter: None,
            transform: Transform::default(),
            indexes: Vec::new(),
            allow_secrets: false,
            cluster: None,
        }
    }

    /// `pods`: core Pods.
    pub fn pods() -> Resource {
        Self::new("pods", "v1", "Pod")
    }

    /// `configmaps`: core ConfigMaps.
    pub fn configmaps() -> Resource {
        Self::new("configmaps", "v1", "ConfigMap")
    }

    /// `secrets`: core Secrets, with the opt-in `allowSecrets` they require.
    pub fn secrets() -> Resource {
        Resource {
            allow_secrets: true,
            ..Self::new("secrets", "v1", "Secret")
        }
    }

    /// `namespaces`: the scope, one watch per namespace.
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// `namespaceSelector.matchLabels`.
    pub fn namespace_selector(mut self, match_labels: &[(&str, &str)]) -> Self {
        self.namespace_selector = Some(LabelSelector {
            match_labels: match_labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
        self
    }

    /// `labelSelector`, passed to the apiserver.
    pub fn label_selector(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }

    /// `fieldSelector`, passed to the apiserver.
    pub fn field_selector(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }

    /// `shardSelector`: the apiserver's shard expression (KEP-5866), passed to it and checked.
    pub fn shard_selector(mut self, selector: &str) -> Self {
        self.shard_selector = Some(selector.to_string());
        self
    }

    /// `filter`: the CEL expression an object must satisfy to be stored.
    pub fn filter(mut self, cel: &str) -> Self {
        self.filter = Some(cel.to_string());
        self
    }

    /// `transform`.
    pub fn transform(mut self, transform: Transform) -> Self {
        self.transform = transform;
        self
    }

    /// Adds paths to `transform.drop`.
    pub fn drop<S: Into<String>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.transform = self.transform.drop(paths);
        self
    }

    /// Adds paths to `transform.keep`.
    pub fn keep<S: Into<String>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.transform = self.transform.keep(paths);
        self
    }

    /// Adds an entry to `indexes`.
    pub fn index(mut self, index: Index) -> Self {
        self.indexes.push(index);
        self
    }

    /// `allowSecrets: true`.
    pub fn allow_secrets(mut self) -> Self {
        self.allow_secrets = true;
        self
    }

    /// `cluster`: read from the named entry of `clusters`.
    pub fn cluster(mut self, name: &str) -> Self {
        self.cluster = Some(name.to_string());
        self
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct LabelSelector {
    match_labels: BTreeMap<String, String>,
}

/// `transform`: paths dropped from, or kept of, each object before it is stored.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Transform {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    drop: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    keep: Vec<String>,
}

impl Transform {
    /// Adds paths to `drop`.
    pub fn drop<S: Into<String>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.drop.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Adds paths to `keep`.
    pub fn keep<S: Into<String>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.keep.extend(paths.into_iter().map(Into::into));
        self
    }

    pub(super) fn is_empty(&self) -> bool {
        self.drop.is_empty() && self.keep.is_empty()
    }
}

/// An entry of `indexes`: a field path or a CEL expression yielding strings.
#[derive(Debug, Clone, Serialize)]
pub struct Index {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cel: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    labels: bool,
}

impl Index {
    /// An index on a field path (`spec.nodeName`).
    pub fn path(name: &str, path: &str) -> Index {
        Index {
            name: name.to_string(),
            path: Some(path.to_string()),
            cel: None,
            labels: false,
        }
    }

    /// An index on a CEL expression.
    pub fn cel(name: &str, cel: &str) -> Index {
        Index {
            name: name.to_string(),
            path: None,
            cel: Some(cel.to_string()),
            labels: false,
        }
    }

    /// The label index (`labels: true`).
    pub fn labels(name: &str) -> Index {
        Index {
            name: name.to_string(),
            path: None,
            cel: None,
            labels: true,
        }
    }
}
