//! The HTTP client of the fleet's streams: kube-rs's stack, with a bounded read buffer.
//!
//! Every scope is one long-lived watch, so one HTTP/1.1 connection each. hyper grows a
//! connection's read buffer while data arrives faster than it is consumed, up to about 400 KiB
//! by default, and keeps it for the life of the connection: after a big initial list, twenty
//! namespaces held ~10 MiB of idle buffers, more than the cache of their controller-profile pods
//! (see `benches/compare.rs`). Capping it at [`READ_BUFFER`] costs a few more reads while
//! listing and nothing after.
//!
//! The stack is kube-rs's own (`kube::client::ConfigExt`): TLS from the kubeconfig (an exec
//! plugin's client certificate included), base URI, kube-rs's retry of 429/503/504 answers when
//! the config asks for it (`default_retry`, on by default), authentication (tokens refreshed),
//! extra headers; not its HTTP tracing spans. A kubeconfig with a proxy gets kube-rs's default
//! client, which knows proxies, and hyper's default buffer.

use hyper_util::{client::legacy::connect::HttpConnector, rt::TokioExecutor};
use kube::client::{retry::RetryPolicy, Body, ConfigExt};
use tower::{retry::RetryLayer, ServiceBuilder};

use super::FleetError;

/// The most a connection's read buffer grows to (hyper's floor is 8 KiB).
pub const READ_BUFFER: usize = 32 * 1024;

/// Builds the client the fleet watches with.
pub fn client(config: kube::Config) -> Result<kube::Client, FleetError> {
    if config.proxy_url.is_some() {
        return Ok(kube::Client::try_from(config)?);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http)?;
    let hyper: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http1_max_buf_size(READ_BUFFER)
            .build(https);
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(|e: hyper_util::client::legacy::Error| -> tower::BoxError { Box::new(e) })
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}
