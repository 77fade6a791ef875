//! RPC metrics: a tower layer on the gRPC server that counts every call by service, method and
//! status code, and observes how long it took, from the request to the end of its response
//! (the last message of a stream included), as the gRPC ecosystem's Prometheus middlewares do
//! (`grpc_server_handled_total`, `grpc_server_handling_seconds`).
//!
//! The code is read where gRPC puts it: the `grpc-status` trailer, or the headers of a
//! trailers-only response (an error before the first message). A response dropped before its
//! end (the client cancelled, the connection closed) counts as `CANCELLED`.
//!
//! Decision: the families are process-wide ([`RPC`]), like a client library's default
//! registry: every listener's server gets the layer without the listeners knowing about a
//! registry, and `/metrics` registers the same families.
//!
//! Decision: labels stay bounded by what the server serves: a call that ends `UNIMPLEMENTED`
//! (how tonic answers a path it does not route) is counted under `unknown`, so that clients
//! cannot create series by calling made-up methods.

use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tonic::Code;

use crate::metrics::{family, in_seconds, Listed};

/// `service`, `method` and `code` of a finished call.
type HandledLabels = [(&'static str, String); 3];
/// `service` and `method`.
type MethodLabels = [(&'static str, String); 2];

/// The RPC families.
#[derive(Debug)]
pub struct RpcMetrics {
    handled: Family<HandledLabels, Counter>,
    seconds: Family<MethodLabels, Histogram, fn() -> Histogram>,
}

/// The process's RPC metrics, fed by every [`RpcMetricsLayer`].
pub static RPC: LazyLock<RpcMetrics> = LazyLock::new(|| RpcMetrics {
    handled: Family::default(),
    seconds: Family::new_with_constructor(latency_histogram),
});

/// From 100 µs (a Get over the Unix socket) to about 7 minutes (a long watch), by factors of 4.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 4.0, 12))
}

impl RpcMetrics {
    /// Registers the families in `registry`, listed before their first sample
    /// ([`Listed`]).
    pub fn register(&'static self, registry: &mut Registry) {
        let handled = family(
            "rpc_handled",
            "gRPC calls completed, by service, method and status code",
        );
        registry.register_collector(Box::new(Listed::new(handled, self.handled.clone())));
        let seconds = in_seconds(
            "rpc_handling",
            "How long gRPC calls took, from the request to the end of the response",
        );
        registry.register_collector(Box::new(Listed::new(seconds, self.seconds.clone())));
    }

    /// Records one finished call of `path` (`/package.Service/Method`).
    fn observe(&self, path: &str, code: Code, started: Instant) {
        let (service, method) = match path.trim_start_matches('/').split_once('/') {
            Some((s, m)) if code != Code::Unimplemented => (s.to_string(), m.to_string()),
            _ => ("unknown".to_string(), "unknown".to_string()),
        };
        let code = crate::proto::code_name(code).to_string();
        self.seconds
            .get_or_create(&[("service", service.clone()), ("method", method.clone())])
            .observe(started.elapsed().as_secs_f64());
        self.handled
            .get_or_create(&[("service", service), ("method", method), ("code", code)])
            .inc();
    }
}

/// The layer to add to a gRPC server (`Server::builder().layer(RpcMetricsLayer)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RpcMetricsLayer;

impl<S> tower::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetricsService { inner }
    }
}

/// The service [`RpcMetricsLayer`] wraps around the routes.
#[derive(Debug, Clone)]
pub struct RpcMetricsService<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for RpcMetricsService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    ReqBody: Send + 'static,
{
    type Response = http::Response<ObservedBody<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let call = Call {
            path: request.uri().path().to_string(),
            started: Instant::now(),
        };
        // The clone that was polled ready serves this call; the fresh clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let response = inner.call(request).await?;
            // A trailers-only response carries its status in the headers.
            let code = status_code(response.headers());
            Ok(response.map(|body| ObservedBody {
                inner: body,
                call: Some(call),
                code,
            }))
        })
    }
}

/// A call whose end is not recorded yet.
struct Call {
    path: String,
    started: Instant,
}

/// A response body that records its call when the status arrives, or when it is dropped.
pub struct ObservedBody<B> {
    inner: B,
    /// `None` once recorded.
    call: Option<Call>,
    /// The status seen so far (from the headers of a trailers-only response).
    code: Option<Code>,
}

impl<B> ObservedBody<B> {
    fn record(&mut self, code: Code) {
        if let Some(call) = self.call.take() {
            RPC.observe(&call.path, code, call.started);
        }
    }
}

impl<B> Drop for ObservedBody<B> {
    fn drop(&mut self) {
        // Ended before its status: the client cancelled, or the connection went away.
        let code = self.code.unwrap_or(Code::Cancelled);
        self.record(code);
    }
}

impl<B: Body + Unpin> Body for ObservedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(status_code) {
                    self.record(code);
                }
            }
            Poll::Ready(Some(Err(_))) => self.record(Code::Internal),
            Poll::Ready(None) => {
                let code = self.code.unwrap_or(Code::Unknown);
                self.record(code);
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The `grpc-status` of a header or trailer map, if it has one.
fn status_code(headers: &http::HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from_i32(value.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_counted_under_its_method_and_code_and_made_up_methods_under_unknown() {
        let metrics = RpcMetrics {
            handled: Family::default(),
            seconds: Family::new_with_constructor(latency_histogram),
        };
        let started = Instant::now();
        metrics.observe("/informerd.v1.Cache/Get", Code::NotFound, started);
        metrics.observe("/informerd.v1.Cache/Get", Code::NotFound, started);
        metrics.observe("/informerd.v1.Cache/Made-Up", Code::Unimplemented, started);
        let count = |service: &str, method: &str, code: &str| {
            metrics
                .handled
                .get_or_create(&[
                    ("service", service.to_string()),
                    ("method", method.to_string()),
                    ("code", code.to_string()),
                ])
                .get()
        };
        assert_eq!(count("informerd.v1.Cache", "Get", "NOT_FOUND"), 2);
        assert_eq!(count("unknown", "unknown", "UNIMPLEMENTED"), 1);
        assert_eq!(count("informerd.v1.Cache", "Made-Up", "UNIMPLEMENTED"), 0);
    }

    #[test]
    fn the_status_is_read_from_grpc_status() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(status_code(&headers), None);
        headers.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(status_code(&headers), Some(Code::NotFound));
    }
}
