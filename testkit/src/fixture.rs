//! What an integration test stands on: namespaces of its own on a control plane, an admin
//! client, and optionally a sidecar caching them; the namespaces (and the cluster-scoped objects
//! it was told of) are deleted when the fixture is dropped, also when the test failed (a panic
//! unwinds through the drop).

use std::path::Path;

use informerd_client::proto::cache_client::CacheClient;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DeleteParams, DynamicObject};
use kube::{Api, Client};
use tonic::transport::Channel;

use crate::{delete_namespace, unique_namespace, ControlPlane, Result, Sidecar, SidecarConfig};

/// Namespaces owned by one test, its kube [`Client`] (the admin), and its sidecar once started.
///
/// Dropping it kills the sidecar and asks the apiserver to delete every namespace it created,
/// without waiting for them to be gone (the namespace controller finishes in the background).
pub struct Fixture {
    cluster: ControlPlane,
    kube: Client,
    namespaces: Vec<String>,
    /// Cluster-scoped objects the test made (CRDs, ClusterRoles), deleted on drop too.
    cluster_objects: Vec<(ApiResource, String)>,
    sidecar: Option<Sidecar>,
}

impl Fixture {
    /// A namespace named after `base` (made unique) on the shared control plane.
    pub async fn new(base: &str) -> Result<Fixture> {
        Self::on(ControlPlane::get(), base).await
    }

    /// A namespace named after `base` on `cluster` (a private control plane, a fault proxy's).
    pub async fn on(cluster: &ControlPlane, base: &str) -> Result<Fixture> {
        let kube = cluster.client().await?;
        let mut fixture = Fixture {
            cluster: cluster.clone(),
            kube,
            namespaces: Vec::new(),
            cluster_objects: Vec::new(),
            sidecar: None,
        };
        fixture.add_namespace(base).await?;
        Ok(fixture)
    }

    /// `pods` realistic pods over `namespaces` namespaces `{prefix}-0`, `{prefix}-1`, ... made
    /// by the project's seeder ([`ControlPlane::seed`]) on the shared control plane; the fixture
    /// owns (and deletes) those namespaces, and [`Fixture::ns`] is the first.
    pub async fn seeded(prefix: &str, pods: usize, namespaces: usize) -> Result<Fixture> {
        let cluster = ControlPlane::get();
        let mut fixture = Fixture {
            cluster: cluster.clone(),
            kube: cluster.client().await?,
            namespaces: Vec::new(),
            cluster_objects: Vec::new(),
            sidecar: None,
        };
        // Owned before they exist: a seeder that fails half-way leaves nothing behind.
        fixture
            .namespaces
            .extend((0..namespaces).map(|i| format!("{prefix}-{i}")));
        cluster.seed(prefix, pods, namespaces)?;
        Ok(fixture)
    }

    /// Creates another namespace named after `base`, owned (and deleted) like the first; its
    /// name.
    pub async fn add_namespace(&mut self, base: &str) -> Result<String> {
        let ns = unique_namespace(&self.kube, base).await?;
        self.namespaces.push(ns.clone());
        Ok(ns)
    }

    /// Deletes the cluster-scoped object `name` of kind `K` (a CRD, a ClusterRole) with the
    /// namespaces, after them.
    pub fn delete_on_drop<K>(&mut self, name: &str)
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>,
        K::DynamicType: Default,
    {
        let resource = ApiResource::erase::<K>(&K::DynamicType::default());
        self.cluster_objects.push((resource, name.to_string()));
    }

    /// The first namespace.
    pub fn ns(&self) -> &str {
        &self.namespaces[0]
    }

    /// Every namespace, in the order they were made.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// The admin client.
    pub fn kube(&self) -> &Client {
        &self.kube
    }

    /// The control plane the namespaces are on.
    pub fn cluster(&self) -> &ControlPlane {
        &self.cluster
    }

    /// The pods of the first namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.kube.clone(), self.ns())
    }

    /// Objects of kind `K` in the first namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.kube.clone(), self.ns())
    }

    /// Starts `bin serve` with `config` against this fixture's control plane (replacing a
    /// sidecar started before); see [`Sidecar::start`].
    pub fn start_sidecar(&mut self, bin: &Path, config: &SidecarConfig) -> Result<&mut Sidecar> {
        self.sidecar = None;
        let sidecar = Sidecar::start(bin, &self.cluster, config)?;
        Ok(self.sidecar.insert(sidecar))
    }

    /// [`Fixture::start_sidecar`], the process in the cgroup of directory `cgroup`; see
    /// [`Sidecar::start_in_cgroup`].
    pub fn start_sidecar_in_cgroup(
        &mut self,
        bin: &Path,
        cgroup: &Path,
        config: &SidecarConfig,
    ) -> Result<&mut Sidecar> {
        self.sidecar = None;
        let sidecar = Sidecar::start_in_cgroup(bin, &self.cluster, cgroup, config)?;
        Ok(self.sidecar.insert(sidecar))
    }

    /// The sidecar; panics when none was started.
    pub fn sidecar(&self) -> &Sidecar {
        self.sidecar
            .as_ref()
            .expect("the fixture's sidecar was started")
    }

    /// The sidecar, to restart or stop it; panics when none was started.
    pub fn sidecar_mut(&mut self) -> &mut Sidecar {
        self.sidecar
            .as_mut()
            .expect("the fixture's sidecar was started")
    }

    /// A new gRPC client of the sidecar, on its socket.
    pub async fn cache(&self) -> Result<CacheClient<Channel>> {
        crate::connect(self.sidecar()).await
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The sidecar first: it must not see its namespaces go and log errors about them.
        self.sidecar = None;
        let namespaces = std::mem::take(&mut self.namespaces);
        let objects = std::mem::take(&mut self.cluster_objects);
        if namespaces.is_empty() && objects.is_empty() {
            return;
        }
        // Decision: on a thread with a runtime (and client) of its own, joined. `drop` cannot
        // await, the test's runtime may be a current-thread one blocked in this very call (so
        // its client's connection task cannot run), and during a panic it may be shutting down.
        // Only the DELETE requests are waited for, not the namespaces' finalization.
        let cluster = self.cluster.clone();
        let deleted = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let client = cluster.client().await.map_err(|e| e.to_string())?;
                for ns in &namespaces {
                    delete_namespace(&client, ns)
                        .await
                        .map_err(|e| format!("delete namespace {ns}: {e}"))?;
                }
                for (resource, name) in &objects {
                    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
                    match api.delete(name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => return Err(format!("delete {} {name}: {e}", resource.kind)),
                    }
                }
                Ok::<_, String>(())
            })
        })
        .join();
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: fixture cleanup: {e}"),
            Err(_) => eprintln!("warning: fixture cleanup panicked"),
        }
    }
}
