//! The calls to a sidecar's API that tests and benchmarks make the same way before they check
//! or measure anything: connecting to its socket, and waiting until it says it has synced.

use std::time::{Duration, Instant};

use bytes::Bytes;
use informerd_client::proto::{cache_client::CacheClient, StatusRequest, StatusResponse};
use tonic::transport::Channel;

use crate::{sidecar::io, Error, Result, Sidecar};

/// How long a sidecar may take to sync before the wait fails (only to avoid hanging: the wait
/// ends as soon as it has synced).
const PATIENCE: Duration = Duration::from_secs(120);

/// A gRPC client of the sidecar, on its socket.
pub async fn connect(sidecar: &Sidecar) -> Result<CacheClient<Channel>> {
    informerd_client::connect(&sidecar.socket().display().to_string())
        .await
        .map_err(|e| Error::Command {
            command: format!("connect to {}", sidecar.socket().display()),
            detail: e.to_string(),
        })
}

/// Polls `Status` until the sidecar says every resource has synced (it serves before); its
/// status then. Works with any client of the API (a plain one, one that sends a token).
pub async fn wait_synced<T>(api: &mut CacheClient<T>) -> Result<StatusResponse>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: hyper::body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        let last = match api.status(StatusRequest::default()).await {
            Ok(status) if status.get_ref().synced => return Ok(status.into_inner()),
            Ok(status) => format!("{:?}", status.into_inner()),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(io(
                &format!("wait for the sidecar to sync (last status: {last})"),
                std::io::ErrorKind::TimedOut.into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
