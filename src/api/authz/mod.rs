//! Per-client authorization (`server.authorization: kubernetes`): each call carries the client's
//! own ServiceAccount token, and is served only if the apiserver would serve that client the
//! same read. One cache shared by every agent of a node must never show one of them what its
//! own RBAC hides.
//!
//! How a call is decided, in the order it meets the checks:
//! - `token`: the `authorization: Bearer` metadata, reviewed with TokenReview for the
//!   configured audiences (default `informerd`). Missing, expired, forged, or for another
//!   audience: `UNAUTHENTICATED`/`Unauthenticated`.
//! - `access`: SubjectAccessReview for that user, its groups, uid and extra, on the resource's
//!   group and plural in the namespace asked. `PERMISSION_DENIED`/`Forbidden` names the verb,
//!   resource and namespace and what to grant.
//! - `recheck`: a running Watch is decided again every `recheckInterval` and ended with
//!   `PERMISSION_DENIED` (or `UNAUTHENTICATED`) when that changes.
//! - `cache`: decisions are reused like the apiserver's webhook authorizer does (allowed 5m,
//!   denied 30s by default), at most `cacheSize` of them, least recently used out.
//!
//! Decisions, for the next engineer:
//! - Verbs: Get asks `get`. List asks `list`. Watch asks `list` and `watch`: its initial state
//!   and its replays show the same objects a List does, so it needs what an informer needs.
//!   A Get denied without a name is asked again with the name, so that Roles with
//!   `resourceNames` work as on the apiserver (and an allowed answer without a name covers
//!   every name: one cached decision for all Gets of a kind).
//! - Across namespaces (a List or Watch with no namespace of a namespaced resource): served
//!   only if the user may read cluster-wide, as the apiserver requires; otherwise refused,
//!   naming the namespaces of the cache it may not read. Never a silent subset.
//! - Secrets: a List or Watch of core Secrets also asks `get`, whatever the configuration
//!   caches (`allowSecrets`): the objects a List returns are what a `get` would.
//! - Status: any authenticated token. It shows names, counts and scope states, no object.
//! - Health checking and reflection are not authorized: kubelet probes have no token.
//! - A review that fails (apiserver unreachable, informerd not allowed to create reviews) is
//!   `UNAVAILABLE` and never cached; a running Watch survives failed re-checks for up to the
//!   allowed TTL after its last good one.
//!
//! - Tokens are the keys of the token cache as they are: in memory only, never logged, gone
//!   with their entry (at most `cacheSize`, none past its `exp`).
//! - A Watch (or WatchKeys) ended by a re-check is counted in `watchers_ended_total` under the
//!   reason of its status (`Forbidden`, `Unauthenticated`; `UNAVAILABLE` under its code): the
//!   re-check ends the stream's task itself (`send::spawn_stream`), after the events already
//!   buffered, rather than dropping the stream, which would count as `ClientClosed`.
//!
//! What it must NOT do: decide anything itself from RBAC objects, or serve a call whose token
//! or access could not be reviewed.

mod access;
mod cache;
mod metrics;
mod recheck;
mod token;

use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::{Api, Resource};
use crate::config::AuthorizationConfig;
use access::{Kind, Question, Verdict};
use cache::Decisions;
pub use metrics::{AuthzCheck, AUTHZ};
pub use recheck::Revoked;
pub use token::User;

/// At most this many namespaces are reviewed to say which ones a cross-namespace request may
/// not read.
const NAMESPACES_NAMED: usize = 50;

/// Why a decision could not be made.
///
/// Decision: either way the call is refused with `UNAVAILABLE` (never allowed, never cached),
/// and informerd logs it. A review informerd's own RBAC does not allow is a misconfiguration of
/// informerd, not the client's doing: `PERMISSION_DENIED` would tell the client to change its
/// own RBAC. `UNAVAILABLE` tells it to retry, and the call succeeds as soon as the rule is
/// granted, without a restart. The message names the missing rule either way.
#[derive(Debug, Error)]
pub enum AuthzError {
    /// informerd's identity may not create the review (403): its own RBAC lacks the rule.
    #[error(
        "informerd cannot authorize calls: its own identity may not create {resource} in API \
         group {group} (the apiserver answered: {message}); grant create on {resource} in API \
         group {group} to informerd's ServiceAccount through a ClusterRole (`informerd rbac` \
         prints it for server.authorization: kubernetes)"
    )]
    NotAllowed {
        resource: &'static str,
        group: &'static str,
        message: String,
    },
    /// The apiserver did not answer a review.
    #[error(
        "the apiserver's {0} failed: {1}; check that the apiserver is reachable and that \
         informerd may create {0} (`informerd rbac` grants it with server.authorization: \
         kubernetes)"
    )]
    Review(&'static str, #[source] kube::Error),
}

impl AuthzError {
    /// The error of a review of `resource` (in API `group`) that failed with `e`.
    fn review(resource: &'static str, group: &'static str, e: kube::Error) -> AuthzError {
        match e {
            kube::Error::Api(s) if s.code == 403 => AuthzError::NotAllowed {
                resource,
                group,
                message: s.message,
            },
            e => AuthzError::Review(resource, e),
        }
    }

    fn status(&self) -> Status {
        tracing::warn!(error = %self, "a client's call is refused: it could not be authorized");
        Status::unavailable(format!("authorization: {self}; retry"))
    }
}

/// The calls that read objects, and the verbs each needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rpc {
    Get,
    List,
    Watch,
}

impl Rpc {
    fn verbs(self, kind: &Kind) -> &'static [&'static str] {
        match (self, kind.is_secrets()) {
            (Rpc::Get, _) => &["get"],
            (Rpc::List, false) => &["list"],
            (Rpc::List, true) => &["list", "get"],
            (Rpc::Watch, false) => &["list", "watch"],
            (Rpc::Watch, true) => &["list", "watch", "get"],
        }
    }
}

/// An authenticated client: its token (kept to review it again) and who it is.
#[derive(Clone, Debug)]
pub struct Caller {
    token: String,
    user: Arc<User>,
}

/// One read, as decided and re-decided.
#[derive(Clone)]
pub struct Check {
    resource: Arc<Resource>,
    rpc: Rpc,
    /// `None`: all namespaces (or a cluster-scoped resource).
    namespace: Option<String>,
    /// Empty unless a Get.
    name: String,
}

/// The token and decision caches, and the client that asks the apiserver.
pub struct Authorizer {
    client: kube::Client,
    config: AuthorizationConfig,
    tokens: Decisions<String, Result<Arc<User>, String>>,
    verdicts: Decisions<Question, Verdict>,
}

impl Authorizer {
    pub fn new(client: kube::Client, config: &AuthorizationConfig) -> Authorizer {
        Authorizer {
            client,
            config: config.clone(),
            tokens: Decisions::new(config.cache_size),
            verdicts: Decisions::new(config.cache_size),
        }
    }

    fn ttls(&self) -> (Duration, Duration) {
        (self.config.allowed_ttl, self.config.denied_ttl)
    }

    /// Who the call's bearer token authenticates.
    pub async fn authenticate(&self, metadata: &MetadataMap) -> Result<Caller, Status> {
        let token = token::bearer(metadata)?.to_string();
        let user = self.user(&token, None).await?;
        Ok(Caller { token, user })
    }

    /// The user `token` authenticates, reviewed at most `max_age` ago.
    async fn user(&self, token: &str, max_age: Option<Duration>) -> Result<Arc<User>, Status> {
        let key = token.to_string();
        let looked = self
            .tokens
            .get_or_review(&key, max_age, || async {
                let audiences = &self.config.audiences;
                let (user, ttl) =
                    token::review(&self.client, token, audiences, self.ttls()).await?;
                Ok((user.map(Arc::new), ttl))
            })
            .await;
        let (decided, cached) = looked.map_err(|e: AuthzError| {
            AUTHZ.error(AuthzCheck::Token);
            e.status()
        })?;
        AUTHZ.decided(AuthzCheck::Token, decided.is_ok(), cached);
        decided.map_err(|why| token::unauthenticated(format!("the token was refused: {why}")))
    }

    /// Whether `user` may make the read `check`, with decisions made at most `max_age` ago.
    async fn authorize(
        &self,
        user: &Arc<User>,
        check: &Check,
        max_age: Option<Duration>,
    ) -> Result<(), Status> {
        let ar = check.resource.api_resource();
        let kind = Arc::new(Kind {
            group: ar.group.clone(),
            plural: ar.plural.clone(),
        });
        for verb in check.rpc.verbs(&kind) {
            let question = Question {
                user: user.clone(),
                verb,
                kind: kind.clone(),
                namespace: check.namespace.clone().unwrap_or_default(),
                name: String::new(),
            };
            let verdict = self.decide(&question, max_age).await?;
            if verdict.allowed {
                continue;
            }
            if !check.name.is_empty() {
                let named = Question {
                    name: check.name.clone(),
                    ..question.clone()
                };
                let verdict = self.decide(&named, max_age).await?;
                if verdict.allowed {
                    continue;
                }
                return Err(access::forbidden(&named, &verdict.reason));
            }
            if check.namespace.is_none() && check.resource.namespaced() {
                return Err(self.across(&question, &check.resource, max_age).await);
            }
            return Err(access::forbidden(&question, &verdict.reason));
        }
        Ok(())
    }

    /// The verdict on `question`, cached.
    async fn decide(
        &self,
        question: &Question,
        max_age: Option<Duration>,
    ) -> Result<Verdict, Status> {
        let looked = self
            .verdicts
            .get_or_review(question, max_age, || {
                access::review(&self.client, question, self.ttls())
            })
            .await;
        let (verdict, cached) = looked.map_err(|e| {
            AUTHZ.error(AuthzCheck::Access);
            e.status()
        })?;
        AUTHZ.decided(AuthzCheck::Access, verdict.allowed, cached);
        Ok(verdict)
    }

    /// The status refusing `question` asked across namespaces: which namespaces of the cache
    /// the user may not read.
    async fn across(
        &self,
        question: &Question,
        resource: &Resource,
        max_age: Option<Duration>,
    ) -> Status {
        let held = namespaces_held(resource);
        let mut denied = Vec::new();
        for namespace in held.iter().take(NAMESPACES_NAMED) {
            let one = Question {
                namespace: namespace.clone(),
                ..question.clone()
            };
            match self.decide(&one, max_age).await {
                Ok(verdict) if verdict.allowed => {}
                Ok(_) => denied.push(namespace.clone()),
                Err(status) => return status,
            }
        }
        access::forbidden_across(question, &denied, held.len())
    }

    /// Authenticates the caller's token again and re-decides `check`, with nothing older than
    /// the re-check interval.
    async fn recheck(&self, caller: &Caller, check: &Check) -> Result<(), Status> {
        let max_age = Some(self.config.recheck_interval);
        let user = self.user(&caller.token, max_age).await?;
        self.authorize(&user, check, max_age).await
    }
}

/// The namespaces `resource` holds objects of: its scopes' namespaces, or those of its objects
/// for a cluster-wide stream.
fn namespaces_held(resource: &Resource) -> Vec<String> {
    let scopes: Vec<String> = resource
        .status()
        .scopes
        .into_iter()
        .map(|s| s.scope)
        .collect();
    let mut namespaces: Vec<String> = if scopes.iter().any(|s| s == "*") {
        resource
            .store()
            .keys(None)
            .into_iter()
            .filter_map(|k| k.namespace().map(str::to_string))
            .collect()
    } else {
        scopes
            .into_iter()
            .filter(|s| s != "namespaceSelector")
            .collect()
    };
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

impl Api {
    /// Authorizes every call of this API with `config` (nothing changes when its mode is
    /// `none`). Call before serving: the API must not have been cloned yet.
    #[must_use]
    pub fn with_authorization(mut self, client: kube::Client, config: &AuthorizationConfig) -> Api {
        if config.enabled() {
            let inner = Arc::get_mut(&mut self.inner).expect("authorization is set before serving");
            inner.authz = Some(Arc::new(Authorizer::new(client, config)));
        }
        self
    }

    /// The caller of a call: `None` when authorization is off.
    pub(super) async fn caller(&self, metadata: &MetadataMap) -> Result<Option<Caller>, Status> {
        match &self.inner.authz {
            None => Ok(None),
            Some(authz) => authz.authenticate(metadata).await.map(Some),
        }
    }

    /// Whether `caller` may make `rpc` on `resource` in `namespace` (`None`: all namespaces,
    /// or a cluster-scoped resource), for object `name` (Get).
    pub(super) async fn authorize(
        &self,
        caller: Option<&Caller>,
        rpc: Rpc,
        resource: &Arc<Resource>,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Check>, Status> {
        let (Some(authz), Some(caller)) = (&self.inner.authz, caller) else {
            return Ok(None);
        };
        super::clusters::refuse_remote_under_authorization(resource)?;
        let check = Check {
            resource: resource.clone(),
            rpc,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        authz.authorize(&caller.user, &check, None).await?;
        Ok(Some(check))
    }

    /// The status of the first re-check of a running stream's `check` that fails; never
    /// ready when authorization is off. Give it to the stream's task (`spawn_stream`), which
    /// ends with it and counts it under its reason.
    pub(super) fn revoked(&self, caller: Option<Caller>, check: Option<Check>) -> Revoked {
        match (&self.inner.authz, caller, check) {
            (Some(authz), Some(caller), Some(check)) => {
                recheck::revoked(authz.clone(), caller, check)
            }
            _ => Box::pin(std::future::pending()),
        }
    }
}
