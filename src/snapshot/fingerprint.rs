//! Fingerprints that decide whether a snapshot belongs to this informerd: one of the parts of
//! the configuration that shape a cache, one of the cluster. A snapshot whose fingerprints
//! differ from the running ones is ignored (the cache lists), never served.
//!
//! Decision: the cluster is its API server URL and the CA certificates the kubeconfig (or the
//! in-cluster service account) trusts for it. Both are known without a request, need no RBAC
//! (reading the kube-system Namespace's uid would need `get` on namespaces, which a sidecar's
//! role does not have), and a different cluster has a different CA even at the same URL.

use ring::digest::{Context, SHA256};

use crate::config::ResourceConfig;

use super::format::FORMAT_VERSION;

/// The fingerprint of what shapes one resource's cache: kind, scope, selectors, filter and
/// transform. (Indexes are rebuilt from the objects on load, and the change log's bounds do
/// not change what is stored, so neither counts.)
pub fn of_resource(rc: &ResourceConfig) -> String {
    let mut h = Hasher::new("resource");
    h.part(&rc.name);
    h.part(&rc.api_version);
    h.part(&rc.kind);
    h.part(&format!("{:?}", rc.scope));
    h.part(&format!("{:?}", rc.label_selector));
    h.part(&format!("{:?}", rc.field_selector));
    h.part(&format!("{:?}", rc.shard_selector));
    h.part(&format!("{:?}", rc.filter.as_ref().map(|f| f.source())));
    h.part(&format!("{:?}", rc.transform));
    h.finish()
}

/// The fingerprint of the cluster a client configuration talks to.
pub fn of_cluster(config: &kube::Config) -> String {
    let mut h = Hasher::new("cluster");
    h.part(&config.cluster_url.to_string());
    for cert in config.root_cert.iter().flatten() {
        h.bytes(cert);
    }
    if let Some(file) = &config.root_cert_file {
        // In-cluster: the service account's CA bundle.
        h.bytes(&std::fs::read(file).unwrap_or_default());
    }
    h.finish()
}

/// SHA-256 over length-prefixed parts, so that no two lists of parts hash alike.
struct Hasher(Context);

impl Hasher {
    fn new(domain: &str) -> Self {
        let mut h = Hasher(Context::new(&SHA256));
        h.part(domain);
        h.bytes(&FORMAT_VERSION.to_le_bytes());
        h
    }

    fn part(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn finish(self) -> String {
        self.0
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(yaml: &str) -> ResourceConfig {
        let text = format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n{yaml}"
        );
        let config = crate::config::parse("f.yaml", &text).expect("valid");
        config.resources[0].clone()
    }

    #[test]
    fn what_shapes_the_cache_changes_the_fingerprint_and_nothing_else_does() {
        let base = of_resource(&resource("  namespaces: [a]\n"));
        assert_eq!(
            base,
            of_resource(&resource("  namespaces: [a]\n")),
            "stable"
        );
        assert_eq!(
            base,
            of_resource(&resource(
                "  namespaces: [a]\n  indexes:\n  - name: n\n    path: spec.nodeName\n"
            )),
            "indexes are rebuilt on load"
        );
        for other in [
            "  namespaces: [a, b]\n",
            "  namespaces: [a]\n  labelSelector: app=x\n",
            "  namespaces: [a]\n  fieldSelector: spec.nodeName=n\n",
            "  namespaces: [a]\n  filter: 'object.metadata.name == \"x\"'\n",
            "  namespaces: [a]\n  transform:\n    drop: [status]\n",
            "  namespaces: [a]\n  name: other\n",
        ] {
            assert_ne!(base, of_resource(&resource(other)), "{other}");
        }
    }

    #[test]
    fn another_server_or_ca_is_another_cluster() {
        let config = |url: &str, ca: &[u8]| {
            let mut c = kube::Config::new(url.parse().expect("url"));
            c.root_cert = Some(vec![ca.to_vec()]);
            c
        };
        let base = of_cluster(&config("https://10.0.0.1:6443", b"ca-1"));
        assert_eq!(base, of_cluster(&config("https://10.0.0.1:6443", b"ca-1")));
        assert_ne!(base, of_cluster(&config("https://10.0.0.2:6443", b"ca-1")));
        assert_ne!(base, of_cluster(&config("https://10.0.0.1:6443", b"ca-2")));
    }
}
