//! What the authorization tests (tests/authz*.rs) share: reading from informerd as a client
//! with a token.

use std::collections::BTreeSet;

use futures::TryStreamExt;
use informerd::proto::ListRequest;
use informerd_client::AuthorizedCache;
use tonic::Status;

/// The names of the objects `request` lists, or the status that refused it.
pub async fn list_names(
    cache: &mut AuthorizedCache,
    request: ListRequest,
) -> Result<BTreeSet<String>, Status> {
    let chunks: Vec<_> = cache
        .list(request)
        .await?
        .into_inner()
        .try_collect()
        .await?;
    Ok(chunks
        .iter()
        .flat_map(|c| &c.objects)
        .map(|o| o.name.clone())
        .collect())
}
