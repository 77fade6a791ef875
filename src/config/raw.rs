//! The configuration file as written: serde structs, camelCase, unknown fields rejected.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub server: Option<RawServer>,
    #[serde(default)]
    pub change_log: Option<RawChangeLog>,
    #[serde(default)]
    pub limits: Option<RawLimits>,
    pub snapshot: Option<RawSnapshot>,
    #[serde(default)]
    pub resources: Vec<RawResource>,
    #[serde(default)]
    pub on_demand: Option<super::validate::on_demand::RawOnDemand>,
    /// Remote clusters: see `validate/clusters.rs`.
    #[serde(default)]
    pub clusters: Vec<RawCluster>,
}

/// One entry of `clusters`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCluster {
    pub name: String,
    pub kubeconfig: String,
    #[serde(default)]
    pub context: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawServer {
    #[serde(default)]
    pub socket: Option<String>,
    #[serde(default)]
    pub socket_mode: Option<String>,
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default)]
    pub tls: Option<RawTls>,
    #[serde(default)]
    pub metrics: Option<String>,
    /// `kubernetes`, `none`, or a mapping: see `validate/authorization.rs`.
    #[serde(default)]
    pub authorization: Option<Value>,
    /// A duration (`10m`): see `api/server/handover.rs`.
    #[serde(default)]
    pub socket_handover_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTls {
    #[serde(default)]
    pub cert_file: Option<String>,
    #[serde(default)]
    pub key_file: Option<String>,
    #[serde(default, rename = "clientCAFile")]
    pub client_ca_file: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawChangeLog {
    #[serde(default)]
    pub max_events: Option<u64>,
    /// A quantity string (`64Mi`) or a number of bytes.
    #[serde(default)]
    pub max_bytes: Option<Value>,
}

/// `limits`: sizes are quantity strings (`3Mi`) or numbers of bytes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLimits {
    #[serde(default)]
    pub max_object_size: Option<Value>,
    #[serde(default)]
    pub max_watchers: Option<u64>,
    #[serde(default)]
    pub max_concurrent_lists: Option<u64>,
    #[serde(default)]
    pub max_request_size: Option<Value>,
    #[serde(default)]
    pub max_memory: Option<Value>,
}

/// `snapshot`: durations as Go and Kubernetes write them (`5m`, `1h30m`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawSnapshot {
    #[serde(default)]
    pub directory: Option<String>,
    /// Durations as Go and Kubernetes write them (`5m`, `1h30m`).
    #[serde(default)]
    pub interval: Option<String>,
    #[serde(default)]
    pub max_age: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawResource {
    #[serde(default)]
    pub name: Option<String>,
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
    #[serde(default)]
    pub namespace_selector: Option<RawLabelSelector>,
    #[serde(default)]
    pub label_selector: Option<String>,
    #[serde(default)]
    pub field_selector: Option<String>,
    #[serde(default)]
    pub shard_selector: Option<String>,
    #[serde(default)]
    pub filter: Option<String>,
    #[serde(default)]
    pub transform: Option<RawTransform>,
    #[serde(default)]
    pub indexes: Vec<RawIndex>,
    #[serde(default)]
    pub allow_secrets: bool,
    /// A name of `clusters`; absent: the default cluster.
    #[serde(default)]
    pub cluster: Option<String>,
}

/// A Kubernetes `LabelSelector`, with unknown fields rejected (k8s-openapi's type ignores them).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLabelSelector {
    #[serde(default)]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub match_expressions: Option<Vec<RawRequirement>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTransform {
    #[serde(default)]
    pub drop: Vec<String>,
    #[serde(default)]
    pub keep: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawIndex {
    pub name: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub cel: Option<String>,
    /// `labels: true`: the label index (`NAMESPACE/KEY=VALUE` per label).
    #[serde(default)]
    pub labels: bool,
}
