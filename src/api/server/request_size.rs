//! `limits.maxRequestSize`: the largest request message the Cache service decodes. tonic
//! enforces it before reading the message (`max_decoding_message_size`), and answers
//! `OUT_OF_RANGE` "decoded message length too large"; this wrapper turns that answer into
//! `RESOURCE_EXHAUSTED` naming the configuration key.
//!
//! Decision: `RESOURCE_EXHAUSTED`, what gRPC's own implementations (grpc-go, C-core) answer to
//! a message over the receiver's limit; `OUT_OF_RANGE` means "relist" (`Expired`,
//! `EpochChanged`) in this API and must not be sent for anything else. The trailer says
//! `RequestTooLarge`, so that a client does not retry the same request as it would after
//! `FellBehind` or a busy limit.

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::{Code, Status};
use tower::Service;

use crate::api::reason::Reason;

/// What tonic's message starts with when a request is over the limit.
const TONIC_TOO_LARGE: &str = "Error, decoded message length too large: found ";

/// A service (the Cache service, with its decoding limit set to `limit`) whose answers to
/// requests over `limit` name `limits.maxRequestSize`.
#[derive(Clone)]
pub struct RequestSize<S> {
    inner: S,
    limit: u64,
}

impl<S> RequestSize<S> {
    /// Wraps `inner`, which refuses requests over `limit` bytes.
    pub fn new(inner: S, limit: u64) -> Self {
        RequestSize { inner, limit }
    }
}

impl<S: NamedService> NamedService for RequestSize<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for RequestSize<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let limit = self.limit;
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            // A refused request is answered with the status in the headers (trailers-only).
            Ok(match Status::from_header_map(response.headers()) {
                Some(s) if s.code() == Code::OutOfRange => match too_large(s.message(), limit) {
                    Some(status) => status.into_http(),
                    None => response,
                },
                _ => response,
            })
        })
    }
}

/// The status for tonic's `message` when it says a request was over `limit`.
fn too_large(message: &str, limit: u64) -> Option<Status> {
    let rest = message.strip_prefix(TONIC_TOO_LARGE)?;
    let found = rest.split(' ').next().unwrap_or("?");
    Some(Reason::RequestTooLarge.status(format!(
        "the request is {found} bytes, over limits.maxRequestSize ({limit} bytes) of this \
         sidecar: send a smaller request (fewer or shorter selectors, fields, CEL), or raise \
         limits.maxRequestSize in its configuration"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tonics_size_refusal_is_rewritten() {
        let tonic = format!("{TONIC_TOO_LARGE}2000 bytes, the limit is: 1024 bytes");
        let status = too_large(&tonic, 1024).expect("rewritten");
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(Reason::of(&status), Some(Reason::RequestTooLarge));
        assert!(
            status
                .message()
                .starts_with("the request is 2000 bytes, over limits.maxRequestSize (1024 bytes)"),
            "{}",
            status.message()
        );
        assert!(too_large("revision 3 is no longer in the change log", 1024).is_none());
    }
}
