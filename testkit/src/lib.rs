//! Starts, or attaches to, the project's local Kubernetes control plane (etcd, kube-apiserver
//! and kube-controller-manager on 127.0.0.1, built from source by `make tools`), so that
//! integration tests and benchmarks are ordinary `cargo test` / `cargo bench` targets.
//!
//! Which control plane: `INFORMERD_CLUSTER_DIR` when set (`make test` points it at a cluster of
//! its own), otherwise the developer's `.cluster` in the repository (the one `make cluster`
//! starts). Either way `cluster up` is run first; it is idempotent and only prints the
//! kubeconfig path while the cluster is up.
//!
//! Beside it, what tests and benchmarks share rather than copy: a [`Fixture`] of namespaces
//! deleted on drop, sidecar configurations built as values ([`SidecarConfig`]) for a running
//! [`Sidecar`], the pods they write ([`create_pods`], [`Apply`]), and waiting for a sidecar to
//! sync ([`wait_synced`]).

#![forbid(unsafe_code)]

mod apiserver;
mod cgroup;
mod config;
mod etcd;
mod fixture;
/// The real Pod objects recorded from clusters: informerd-store's reader, the one every test
/// and benchmark uses.
pub use informerd_store::fixtures;
mod grpc;
mod health;
mod kubectl;
mod metrics;
mod pods;
mod proxy;
mod sidecar;
mod tls;
mod tokens;

pub use apiserver::PrivateControlPlane;
pub use cgroup::MemoryCgroup;
pub use config::{
    Authorization, Index, Limits, OnDemand, Resource, Server, SidecarConfig, Snapshot, Transform,
};
pub use fixture::Fixture;
pub use grpc::{connect, wait_synced};
pub use kubectl::{deployed_config, documents, informerd_rbac, unique_prefix, volume_at, Kubectl};
pub use metrics::{metrics_text, scrape_metrics, Sample, Samples};
pub use pods::{create_pods, pod, Apply, PodManifest};
pub use proxy::FaultProxy;
pub use sidecar::Sidecar;
pub use tls::{Ca, MountedSecret};
pub use tokens::{forge_token, grant_pod_readers, wait_service_account_may};

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use kube::{
    api::{DeleteParams, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    Api, Client, Config,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A running control plane.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    repo: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

static SHARED: OnceLock<std::result::Result<ControlPlane, String>> = OnceLock::new();

/// A free TCP port on loopback (free when asked; the caller binds it just after).
///
/// Decision: taken below the kernel's ephemeral range, not from `bind(0)`. A port `bind(0)`
/// gives is in that range, and between this call and the caller's bind, any outgoing connection
/// on the machine (the tests open hundreds to the apiserver) may be given it as its local port:
/// CI once failed on "Address already in use" that way. Below the range only an explicit bind
/// can take it; the ports are spread by process id so that test processes running side by side
/// ask for different ones, and each is checked free when handed out.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FLOOR: u32 = 10_000;
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = low.saturating_sub(FLOOR);
    let seed = std::process::id().wrapping_mul(2_654_435_761);
    for _ in 0..span.min(1_000) {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FLOOR + seed.wrapping_add(n.wrapping_mul(7_919)) % span;
        let port = u16::try_from(port).expect("below the ephemeral range");
        // Checked on every address: a port held on any of them fails a later bind on all.
        if std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    // No room below the range (a machine configured so): any free port.
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The repository root (the parent of this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives inside the repository")
        .to_path_buf()
}

/// A tool the Makefile builds (`target`, relative to the repository, e.g. `.cache/bin/helm`):
/// `$env` when set, else `make target` (which rebuilds it when missing or older than its
/// sources) and its path. Panics when make fails: every caller is a test.
pub fn made_tool(env: &str, target: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let made = std::process::Command::new("make")
        .args(["-s", "-C"])
        .arg(repo_root())
        .arg(target)
        .status()
        .expect("run make");
    assert!(made.success(), "make {target} failed");
    repo_root().join(target)
}

impl ControlPlane {
    /// Starts the control plane if it is not running, once per process, and returns it.
    /// Panics with the reason when it cannot be started: every caller is a test or benchmark.
    pub fn get() -> &'static ControlPlane {
        let shared = SHARED.get_or_init(|| Self::start().map_err(|e| e.to_string()));
        match shared {
            Ok(cp) => cp,
            Err(e) => panic!("local control plane unavailable: {e}"),
        }
    }

    fn start() -> Result<ControlPlane> {
        let repo = repo_root();
        let dir = std::env::var_os("INFORMERD_CLUSTER_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join(".cluster"));
        // Builds what is missing; a no-op when `make test` has just built it.
        make(&repo, "control-plane")?;
        let kubeconfig = apiserver::cluster_up(&repo, &dir)?;
        Ok(ControlPlane {
            repo,
            dir,
            kubeconfig,
        })
    }

    /// The admin kubeconfig (client certificate in `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The state directory of this control plane (logs are in `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The binaries `make tools` built: `seed`, `cluster`, `kube-apiserver`, ...
    pub fn bin(&self, name: &str) -> PathBuf {
        self.repo.join(".cache/bin").join(name)
    }

    /// The kube-rs configuration of the admin identity.
    pub async fn admin_config(&self) -> Result<Config> {
        let kc = Kubeconfig::read_from(&self.kubeconfig).map_err(|source| Error::Kubeconfig {
            path: self.kubeconfig.clone(),
            source,
        })?;
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|source| Error::Kubeconfig {
                path: self.kubeconfig.clone(),
                source,
            })
    }

    /// A client acting as the admin.
    pub async fn client(&self) -> Result<Client> {
        Ok(Client::try_from(self.admin_config().await?)?)
    }

    /// The configuration of a non-admin identity: the ServiceAccount `namespace/name` (created
    /// if missing), authenticated with a token from the TokenRequest API. It can do only what
    /// RBAC grants it, which is how tests prove which rules informerd needs.
    pub async fn service_account_config(&self, namespace: &str, name: &str) -> Result<Config> {
        let token = self
            .service_account_token(namespace, name, &[], 3600)
            .await?;
        self.config_with_token(&token).await
    }

    /// A client acting as the ServiceAccount `namespace/name`; see
    /// [`ControlPlane::service_account_config`].
    pub async fn client_as(&self, namespace: &str, name: &str) -> Result<Client> {
        Ok(Client::try_from(
            self.service_account_config(namespace, name).await?,
        )?)
    }

    /// Seeds `pods` realistic pods across `namespaces` namespaces named `{prefix}-0..`, with
    /// the project's seeding tool (server-side apply, status through the status subresource).
    /// Returns the tool's summary line.
    pub fn seed(&self, prefix: &str, pods: usize, namespaces: usize) -> Result<String> {
        make(&self.repo, ".cache/bin/seed")?;
        run(Command::new(self.bin("seed"))
            .arg("pods")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--prefix")
            .arg(prefix)
            .arg("--pods")
            .arg(pods.to_string())
            .arg("--namespaces")
            .arg(namespaces.to_string()))
    }

    /// Churns the pods in `{prefix}-*` namespaces: updates, relabels (the label
    /// `informerd.io/tier` toggles between `keep` and `drop`), status updates, deletes and
    /// creates, at `rate` operations per second for `seconds`. Returns the summary line.
    pub fn churn(
        &self,
        prefix: &str,
        namespaces: usize,
        rate: u32,
        seconds: u32,
    ) -> Result<String> {
        make(&self.repo, ".cache/bin/seed")?;
        run(Command::new(self.bin("seed"))
            .arg("churn")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--prefix")
            .arg(prefix)
            .arg("--namespaces")
            .arg(namespaces.to_string())
            .arg("--rate")
            .arg(rate.to_string())
            .arg("--duration")
            .arg(format!("{seconds}s")))
    }
}

/// Creates a namespace with a unique name derived from `base` and returns its name; tests use
/// one each so that they can share a control plane and run in parallel.
pub async fn unique_namespace(client: &Client, base: &str) -> Result<String> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let name = format!(
        "{base}-{}-{:x}{:x}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(name)
}

/// Waits until the namespace's default ServiceAccount exists: the ServiceAccount admission
/// plugin refuses pods until the serviceaccount controller has made it.
pub async fn wait_default_service_account(client: &Client, namespace: &str) -> Result<()> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    for _ in 0..600 {
        if sas.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(Error::Command {
        command: format!("wait for the default ServiceAccount of {namespace}"),
        detail: "not created within 60 s: is kube-controller-manager running?".into(),
    })
}

/// Waits until the cluster's root CA ConfigMap (`kube-root-ca.crt`) is in the namespace:
/// kube-controller-manager publishes it into every namespace a moment after it exists, so a
/// test that counts or orders a namespace's ConfigMaps waits for it before its own.
pub async fn wait_root_ca_published(client: &Client, namespace: &str) -> Result<()> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    for _ in 0..600 {
        if configmaps.get_opt("kube-root-ca.crt").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(Error::Command {
        command: format!("wait for kube-root-ca.crt in {namespace}"),
        detail: "not published within 60 s: is kube-controller-manager running?".into(),
    })
}

/// Creates or updates a pod of `namespace` by server-side apply (the field manager
/// `informerd-test`, forced): `pod` is its JSON, `apiVersion`, `kind` and `metadata.name`
/// included. Returns the pod as the apiserver stored it.
pub async fn apply_pod(client: &Client, namespace: &str, pod: serde_json::Value) -> Result<Pod> {
    let name = pod["metadata"]["name"]
        .as_str()
        .ok_or_else(|| Error::Command {
            command: format!("apply a pod in {namespace}"),
            detail: "the pod's JSON has no metadata.name".into(),
        })?
        .to_string();
    let params = PatchParams::apply("informerd-test").force();
    Ok(Api::<Pod>::namespaced(client.clone(), namespace)
        .patch(&name, &params, &Patch::Apply(pod))
        .await?)
}

/// Deletes a namespace (the namespace controller removes what it holds).
pub async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    match Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn make(repo: &Path, target: &str) -> Result<String> {
    run(Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(repo)
        .arg(target))
}

fn run(cmd: &mut Command) -> Result<String> {
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| Error::Command {
        command: command.clone(),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            command,
            detail: format!(
                "{}\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::free_port;

    #[test]
    fn free_ports_are_bindable_outside_the_ephemeral_range_and_differ() {
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(32_768);
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        for &port in &ports {
            if low > 10_000 {
                assert!(
                    port < low,
                    "port {port} is in the ephemeral range from {low}"
                );
            }
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    }
}
