//! The setup the chaos suite and the soak share: a private control plane with a second
//! kube-apiserver on its etcd, seeded pods, informerd acting as a ServiceAccount that RBAC
//! grants pods per namespace, reaching the apiservers through the fault proxy, with its metrics
//! on a port, and the subscribers.

use std::{
    net::SocketAddr,
    sync::{atomic::AtomicBool, Arc},
};

use informerd_testkit::{
    delete_namespace, free_port, scrape_metrics, FaultProxy, PrivateControlPlane, Resource,
    Samples, Sidecar, SidecarConfig,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::{
    api::{DeleteParams, PostParams},
    Api, Client,
};
use serde_json::json;

use crate::{
    env_number,
    subscriber::{subscribe, Subscriber},
    truth::converge,
    BIN, NAMESPACES, TIER,
};
use rand::{rngs::StdRng, SeedableRng};

/// The ServiceAccount informerd runs as (impersonated), and the ClusterRole bound to it per
/// namespace.
const IDENTITY: &str = "informerd-chaos";

pub struct Rig {
    /// Dropped last (declared last): stops the control plane after everything using it.
    pub client: Client,
    pub prefix: String,
    pub namespaces: Vec<String>,
    pub pods: usize,
    pub proxy: FaultProxy,
    pub sidecar: Sidecar,
    pub socket: String,
    pub metrics_port: u16,
    /// The two kube-apiservers on the same etcd: the first (the one `cluster up` started, which
    /// faults kill) and the second the proxy switches to and back.
    pub apiservers: [SocketAddr; 2],
    /// Times informerd was killed and restarted.
    pub restarts: u64,
    pub stall: Arc<AtomicBool>,
    pub subscribers: Vec<Subscriber>,
    pub plane: PrivateControlPlane,
}

/// The seed of the random faults: CHAOS_SEED, or the time.
fn seed() -> u64 {
    env_number(
        "CHAOS_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs()),
    )
}

impl Rig {
    /// A rig named after `kind` (`chaos`, `soak`) with `pods` pods and CHAOS_SUBSCRIBERS
    /// (default 100) subscribers, once they all agree with the apiserver; with the random
    /// generator of its faults and its seed (printed).
    pub async fn synced(kind: &str, pods: usize) -> anyhow::Result<(Rig, StdRng, u64)> {
        let subscribers = env_number("CHAOS_SUBSCRIBERS", 100) as usize;
        let seed = seed();
        eprintln!("{kind}: random faults from seed {seed} (CHAOS_SEED={seed} repeats them)");
        let prefix = format!("{kind}{:x}", std::process::id());
        let rig = Rig::start(&prefix, pods, NAMESPACES, subscribers).await?;
        converge(&rig)
            .await
            .map_err(|d| anyhow::anyhow!("no agreement before any fault: {d:#?}"))?;
        Ok((rig, StdRng::seed_from_u64(seed), seed))
    }

    /// Starts everything; `subscribers` watch (the first one stalls while `stall` is set).
    pub async fn start(
        prefix: &str,
        pods: usize,
        namespaces: usize,
        subscribers: usize,
    ) -> anyhow::Result<Rig> {
        let plane = tokio::task::block_in_place(PrivateControlPlane::start)?;
        let second = plane.start_second_apiserver().await?;
        let first = plane.apiserver_addr()?;
        let cp = plane.control_plane();
        let client = cp.client().await?;
        let namespaces: Vec<String> = (0..namespaces).map(|i| format!("{prefix}-{i}")).collect();
        tokio::task::block_in_place(|| cp.seed(prefix, pods, namespaces.len()))?;
        create_role(&client).await?;
        for ns in &namespaces {
            grant(&client, ns, &namespaces[0]).await?;
        }
        let proxy = FaultProxy::start(cp).await?;
        let metrics_port = free_port();
        let config = SidecarConfig::new()
            .resource(
                Resource::pods()
                    .namespaces(&namespaces)
                    .filter(&format!(r#"object.metadata.labels["{TIER}"] == "keep""#)),
            )
            .server(|s| s.metrics_port(metrics_port));
        let identity = proxy.control_plane_as(&format!(
            "system:serviceaccount:{}:{IDENTITY}",
            namespaces[0]
        ))?;
        let sidecar = Sidecar::start(BIN.as_ref(), &identity, &config)?;
        let socket = sidecar.socket().to_string_lossy().into_owned();
        let stall = Arc::new(AtomicBool::new(false));
        let subscribers = (0..subscribers)
            .map(|i| subscribe(socket.clone(), (i == 0).then(|| stall.clone())))
            .collect();
        Ok(Rig {
            client,
            prefix: prefix.to_string(),
            namespaces,
            pods,
            proxy,
            sidecar,
            socket,
            metrics_port,
            apiservers: [first, second],
            restarts: 0,
            stall,
            subscribers,
            plane,
        })
    }

    pub async fn metrics(&self) -> anyhow::Result<Samples> {
        Ok(scrape_metrics(self.metrics_port).await?)
    }

    /// Revokes informerd's right to list and watch pods in `namespace`.
    pub async fn revoke(&self, namespace: &str) -> anyhow::Result<()> {
        Api::<RoleBinding>::namespaced(self.client.clone(), namespace)
            .delete(IDENTITY, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// Grants it again (after [`Rig::revoke`], or in a recreated namespace).
    pub async fn restore(&self, namespace: &str) -> anyhow::Result<()> {
        grant(&self.client, namespace, &self.namespaces[0]).await
    }

    /// Stops the subscribers and deletes the namespaces (the control plane goes on drop).
    pub async fn finish(&self) {
        for s in &self.subscribers {
            s.task.abort();
        }
        for ns in &self.namespaces {
            let _ = delete_namespace(&self.client, ns).await;
        }
    }
}

/// The ClusterRole informerd needs for pods: list and watch.
async fn create_role(admin: &Client) -> anyhow::Result<()> {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": IDENTITY},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    }))?;
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await?;
    Ok(())
}

/// Binds that ClusterRole in `namespace` to informerd's ServiceAccount of `sa_namespace`
/// (impersonating it needs no ServiceAccount object).
async fn grant(admin: &Client, namespace: &str, sa_namespace: &str) -> anyhow::Result<()> {
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": IDENTITY},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": IDENTITY},
        "subjects": [{"kind": "ServiceAccount", "name": IDENTITY, "namespace": sa_namespace}]
    }))?;
    match Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
