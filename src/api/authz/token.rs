//! Who a client is: the bearer token of its `authorization` metadata, reviewed by the
//! apiserver's TokenReview API for informerd's audiences, as the apiserver itself authenticates
//! a ServiceAccount token.
//!
//! Decision: informerd never verifies a token's signature itself; TokenReview does, including
//! the audience, expiry and whether the ServiceAccount (and the pod a projected token is bound
//! to) still exists. The token's `exp` claim is read only to cache an accepted review no longer
//! than the token lives.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::PostParams;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::AuthzError;
use crate::proto::Reason;

/// An authenticated user, as TokenReview names it: what SubjectAccessReview is asked about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The bearer token of a call, or `UNAUTHENTICATED` naming what to send.
pub fn bearer(metadata: &MetadataMap) -> Result<&str, Status> {
    let Some(value) = metadata.get("authorization") else {
        return Err(unauthenticated(
            "no token: send `authorization: Bearer <token>` metadata with a ServiceAccount \
             token for the audience informerd (a projected token)",
        ));
    };
    value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthenticated("the authorization metadata is not `Bearer <token>`"))
}

/// `UNAUTHENTICATED` with the reason trailer.
pub fn unauthenticated(message: impl std::fmt::Display) -> Status {
    Reason::Unauthenticated.status(format!("authentication: {message}"))
}

/// Reviews `token` for `audiences`: the user it authenticates and how long that may be
/// reused (at most `allowed_ttl`, never past the token's expiry), or why it is refused (reused
/// for `denied_ttl`).
pub async fn review(
    client: &kube::Client,
    token: &str,
    audiences: &[String],
    (allowed_ttl, denied_ttl): (Duration, Duration),
) -> Result<(Result<User, String>, Duration), AuthzError> {
    let request = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_string(),
            audiences: Some(audiences.to_vec()),
        },
        ..Default::default()
    };
    let reviewed = kube::Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &request)
        .await
        .map_err(|e| AuthzError::review("tokenreviews", "authentication.k8s.io", e))?;
    let status = reviewed.status.unwrap_or_default();
    let user = status.user.filter(|_| status.authenticated == Some(true));
    let Some(user) = user else {
        let why = status
            .error
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "the token is not valid".to_string());
        return Ok((Err(why), denied_ttl));
    };
    let ttl = match expiry(token).map(|exp| exp.duration_since(SystemTime::now())) {
        Some(Ok(left)) => left.min(allowed_ttl),
        // Expired since the review (or a clock skew): do not reuse it.
        Some(Err(_)) => Duration::ZERO,
        None => allowed_ttl,
    };
    Ok((
        Ok(User {
            username: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }),
        ttl,
    ))
}

/// The `exp` claim of a JWT, unverified: only used to bound how long a review is reused.
pub fn expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    Some(UNIX_EPOCH + Duration::from_secs(exp))
}

#[cfg(test)]
mod tests {
    use tonic::metadata::MetadataValue;
    use tonic::Code;

    use super::*;

    fn with(value: &'static str) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        metadata.insert("authorization", MetadataValue::from_static(value));
        metadata
    }

    #[test]
    fn a_bearer_token_is_required() {
        assert_eq!(bearer(&with("Bearer abc")).unwrap(), "abc");
        for refused in [MetadataMap::new(), with("Basic abc"), with("Bearer  ")] {
            let status = bearer(&refused).unwrap_err();
            assert_eq!(status.code(), Code::Unauthenticated);
            assert_eq!(Reason::of(&status), Some(Reason::Unauthenticated));
        }
    }

    #[test]
    fn the_expiry_comes_from_the_exp_claim() {
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"aud":["informerd"],"exp":1900000000}"#);
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{claims}.signature");
        assert_eq!(
            expiry(&token),
            Some(UNIX_EPOCH + Duration::from_secs(1_900_000_000))
        );
        assert_eq!(expiry("not-a-jwt"), None);
    }
}
