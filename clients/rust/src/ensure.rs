//! [`ensure`]: asks the sidecar for a cache of a kind its configuration does not list (within
//! the operator's `onDemand` bounds), and returns the resource name to read it by, once the
//! cache has synced. The sidecar stops the cache after `onDemand.idleTimeout` without a client
//! (no Watch open, no call naming it): a controller that reads it keeps it.

use std::time::Duration;

use kube::Resource;
use tonic::transport::Channel;

use crate::proto::{cache_client::CacheClient, EnsureRequest};
use crate::{Api, Error};

/// Ensures a cache of `K` (its apiVersion and kind) in `namespaces` (none: every namespace, and
/// cluster-scoped kinds), waiting up to `timeout` for it to sync; returns an [`Api`] over it
/// (in `namespace`, `""` for all of the cache's).
///
/// Refusals are [`Error::Status`]: `Forbidden` naming the bound (`onDemand.allow`,
/// `onDemand.namespaces`, `onDemand.maxCaches`) or the RBAC rule; `NotCaughtUp` when `timeout`
/// passes before the sync (the cache keeps syncing: call again).
pub async fn ensure<K>(
    cache: CacheClient<Channel>,
    namespaces: &[&str],
    namespace: &str,
    timeout: Duration,
) -> Result<Api<K>, Error>
where
    K: Resource<DynamicType = ()> + serde::de::DeserializeOwned,
{
    ensure_in(cache, "", namespaces, namespace, timeout).await
}

/// Like [`ensure`], in the sidecar's remote cluster `cluster` (its `clusters[].name`; empty:
/// the cluster it runs in); the [`Api`] returned reads that cluster. A cluster that does not
/// answer is `NotSynced` (UNAVAILABLE) naming it: retry with backoff.
pub async fn ensure_in<K>(
    cache: CacheClient<Channel>,
    cluster: &str,
    namespaces: &[&str],
    namespace: &str,
    timeout: Duration,
) -> Result<Api<K>, Error>
where
    K: Resource<DynamicType = ()> + serde::de::DeserializeOwned,
{
    let kind = (K::api_version(&()), K::kind(&()));
    let name = ensure_resource_in(
        cache.clone(),
        cluster,
        (&kind.0, &kind.1),
        namespaces,
        timeout,
    )
    .await?;
    Ok(Api::namespaced(cache, &name, namespace).cluster(cluster))
}

/// Like [`ensure`], by apiVersion and kind (for kinds without a Rust type); returns the
/// resource name to use with Get, List and Watch.
pub async fn ensure_resource(
    cache: CacheClient<Channel>,
    api_version: &str,
    kind: &str,
    namespaces: &[&str],
    timeout: Duration,
) -> Result<String, Error> {
    ensure_resource_in(cache, "", (api_version, kind), namespaces, timeout).await
}

/// Like [`ensure_resource`], in the sidecar's remote cluster `cluster` (empty: its own), for
/// `(apiVersion, kind)`.
pub async fn ensure_resource_in(
    mut cache: CacheClient<Channel>,
    cluster: &str,
    (api_version, kind): (&str, &str),
    namespaces: &[&str],
    timeout: Duration,
) -> Result<String, Error> {
    let mut request = tonic::Request::new(EnsureRequest {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        cluster: cluster.to_string(),
        ..Default::default()
    });
    request.set_timeout(timeout);
    match cache.ensure(request).await {
        Ok(response) => Ok(response.into_inner().resource),
        Err(status) => Err(Error::Status {
            call: "Ensure",
            resource: format!("{api_version} {kind}"),
            status: Box::new(status),
        }),
    }
}
