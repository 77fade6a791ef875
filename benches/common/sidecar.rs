//! The calls to the sidecar's API that several benchmarks make the same way: `Status` of one
//! resource, and a whole `List` of one namespace.

use futures::TryStreamExt;
use informerd::proto::{
    cache_client::CacheClient, ListRequest, ListResponse, StatusRequest, StatusResponse,
};
use tonic::transport::Channel;

/// The sidecar's status of one resource.
pub async fn status(
    api: &mut CacheClient<Channel>,
    resource: &str,
) -> anyhow::Result<StatusResponse> {
    Ok(api
        .status(StatusRequest {
            resource: resource.into(),
            ..Default::default()
        })
        .await?
        .into_inner())
}

/// Every chunk of a `List` of the namespace `ns`, whole objects.
pub async fn list_namespace(
    api: &mut CacheClient<Channel>,
    resource: &str,
    ns: &str,
) -> anyhow::Result<Vec<ListResponse>> {
    Ok(api
        .list(ListRequest {
            resource: resource.into(),
            namespace: ns.into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .try_collect()
        .await?)
}
