//! The pods tests and benchmarks write: a minimal pod's manifest, and many of them applied at
//! once (server-side apply, so that a retried write is harmless).

use std::collections::BTreeMap;

use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use crate::{wait_default_service_account, Error, Result};

/// A minimal pod: one `busybox` container, the labels and node it is given.
#[derive(Debug, Clone)]
pub struct PodManifest {
    name: String,
    labels: BTreeMap<String, String>,
    node_name: Option<String>,
}

/// A minimal pod named `name` ([`PodManifest`]).
pub fn pod(name: &str) -> PodManifest {
    PodManifest {
        name: name.to_string(),
        labels: BTreeMap::new(),
        node_name: None,
    }
}

impl PodManifest {
    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds labels.
    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        for (k, v) in labels {
            self.labels.insert(k.to_string(), v.to_string());
        }
        self
    }

    /// `spec.nodeName` (no pod is scheduled otherwise: no scheduler runs).
    pub fn node_name(mut self, node: &str) -> Self {
        self.node_name = Some(node.to_string());
        self
    }

    /// Its JSON, `apiVersion` and `kind` included (what server-side apply takes).
    pub fn json(&self) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
        if let Some(node) = &self.node_name {
            spec["nodeName"] = json!(node);
        }
        let mut metadata = json!({"name": self.name});
        if !self.labels.is_empty() {
            metadata["labels"] = json!(self.labels);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    }

    /// Creates or updates it in `namespace` ([`crate::apply_pod`]); the pod as stored.
    pub async fn apply(&self, client: &Client, namespace: &str) -> Result<Pod> {
        crate::apply_pod(client, namespace, self.json()).await
    }
}

/// Creates (or updates) the pods `p0` .. `p{count - 1}` of `namespace` with `labels`, once the
/// namespace's default ServiceAccount lets pods in: 16 at a time, or one after the other when
/// `in_order` (then the last pod's resourceVersion is that of the last write). The pods as
/// stored, in name order.
pub async fn create_pods(
    client: &Client,
    namespace: &str,
    count: usize,
    labels: &[(&str, &str)],
    in_order: bool,
) -> Result<Vec<Pod>> {
    wait_default_service_account(client, namespace).await?;
    let manifests = (0..count).map(|i| pod(&format!("p{i}")).labels(labels).json());
    let apply = Apply::new().concurrency(if in_order { 1 } else { 16 });
    apply
        .pods(&Api::namespaced(client.clone(), namespace), manifests)
        .await
}

/// How [`Apply::pods`] writes: the field manager, the object or its status, how many at once.
#[derive(Debug, Clone)]
pub struct Apply {
    manager: String,
    status: bool,
    concurrency: usize,
}

impl Default for Apply {
    fn default() -> Self {
        Self::new()
    }
}

impl Apply {
    /// As the field manager `informerd-test`, forced, 16 at a time.
    pub fn new() -> Apply {
        Apply {
            manager: "informerd-test".into(),
            status: false,
            concurrency: 16,
        }
    }

    /// Another field manager.
    pub fn manager(mut self, manager: &str) -> Self {
        self.manager = manager.to_string();
        self
    }

    /// Through the status subresource (a manifest of `status` as a kubelet would write it).
    pub fn status(mut self) -> Self {
        self.status = true;
        self
    }

    /// How many writes are in flight at most (1: in order).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Applies each manifest (named by its `metadata.name`), tried again while a busy
    /// apiserver refuses it (429, 5xx); the pods as stored, in the order given.
    pub async fn pods(
        &self,
        pods: &Api<Pod>,
        manifests: impl IntoIterator<Item = Value>,
    ) -> Result<Vec<Pod>> {
        let params = PatchParams::apply(&self.manager).force();
        stream::iter(manifests)
            .map(|body| {
                let params = &params;
                async move {
                    let name = body["metadata"]["name"]
                        .as_str()
                        .ok_or_else(|| Error::Command {
                            command: "apply a pod".into(),
                            detail: format!("no metadata.name in {body}"),
                        })?
                        .to_string();
                    let mut attempt = 0;
                    loop {
                        let patch = Patch::Apply(&body);
                        let result = if self.status {
                            pods.patch_status(&name, params, &patch).await
                        } else {
                            pods.patch(&name, params, &patch).await
                        };
                        match result {
                            Ok(pod) => return Ok(pod),
                            Err(kube::Error::Api(s))
                                if attempt < 5 && (s.code == 429 || s.code >= 500) => {}
                            Err(e) => return Err(Error::from(e)),
                        }
                        attempt += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(200 << attempt)).await;
                    }
                }
            })
            .buffered(self.concurrency)
            .try_collect()
            .await
    }
}
