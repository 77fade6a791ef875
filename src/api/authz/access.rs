//! What a client may read: one SubjectAccessReview per (user, verb, resource, namespace, name),
//! asked as the apiserver's RBAC would be asked for the same request, and the
//! `PERMISSION_DENIED` statuses that name what is missing.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use tonic::Status;

use super::token::User;
use super::AuthzError;
use crate::proto::Reason;

/// The resource a request reads, as RBAC names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kind {
    /// The API group; empty for the core group.
    pub group: String,
    /// The plural, e.g. `pods`.
    pub plural: String,
}

impl Kind {
    /// Core Secrets, which are never served without `get` (see the module of `authz`).
    pub fn is_secrets(&self) -> bool {
        self.group.is_empty() && self.plural == "secrets"
    }
}

/// One question to SubjectAccessReview.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Question {
    pub user: Arc<User>,
    pub verb: &'static str,
    pub kind: Arc<Kind>,
    /// Empty: cluster-wide (all namespaces, or a cluster-scoped resource).
    pub namespace: String,
    /// Empty: any object.
    pub name: String,
}

/// Whether the question is allowed, and the authorizer's reason when it says one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: String,
}

/// Asks SubjectAccessReview `question`; the verdict is reused for `allowed_ttl` or
/// `denied_ttl`.
pub async fn review(
    client: &kube::Client,
    question: &Question,
    (allowed_ttl, denied_ttl): (Duration, Duration),
) -> Result<(Verdict, Duration), AuthzError> {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let user = &question.user;
    let request = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            uid: non_empty(&user.uid),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(question.verb.to_string()),
                group: Some(question.kind.group.clone()),
                resource: Some(question.kind.plural.clone()),
                namespace: non_empty(&question.namespace),
                name: non_empty(&question.name),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviewed = kube::Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &request)
        .await
        .map_err(|e| AuthzError::review("subjectaccessreviews", "authorization.k8s.io", e))?;
    let status = reviewed.status.unwrap_or_default();
    let allowed = status.allowed && status.denied != Some(true);
    let verdict = Verdict {
        allowed,
        reason: status.reason.unwrap_or_default(),
    };
    Ok((verdict, if allowed { allowed_ttl } else { denied_ttl }))
}

/// `PERMISSION_DENIED` for `question`, in the apiserver's words, with what to grant.
pub fn forbidden(question: &Question, reason: &str) -> Status {
    let Question {
        user,
        verb,
        kind,
        namespace,
        name,
    } = question;
    let object = if name.is_empty() {
        String::new()
    } else {
        format!(" {name:?}")
    };
    let (scope, grant) = if namespace.is_empty() {
        (
            "at the cluster scope".to_string(),
            "through a ClusterRole and ClusterRoleBinding".to_string(),
        )
    } else {
        (
            format!("in the namespace {namespace:?}"),
            format!("through a Role and RoleBinding in namespace {namespace}"),
        )
    };
    let because = if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    };
    Reason::Forbidden.status(format!(
        "{plural}{object} is forbidden: User {username:?} cannot {verb} resource {plural:?} in \
         API group {group:?} {scope}{because}; grant {verb} on {plural} {grant}",
        plural = kind.plural,
        username = user.username,
        group = kind.group,
    ))
}

/// `PERMISSION_DENIED` for a read across namespaces by a client that may not read
/// cluster-wide: names the namespaces of the cache it may not read (`denied`), or, when it may
/// read each of them, says to ask one namespace at a time, as the apiserver would require.
pub fn forbidden_across(question: &Question, denied: &[String], held: usize) -> Status {
    let Question {
        user, verb, kind, ..
    } = question;
    let which = if denied.is_empty() {
        format!(
            "it may {verb} each of the {held} namespace(s) this cache holds: ask for one \
             namespace at a time"
        )
    } else {
        format!(
            "it may not {verb} {plural} in namespace(s) {} (of the {held} this cache holds); \
             ask for a namespace it may read",
            denied.join(", "),
            plural = kind.plural,
        )
    };
    Reason::Forbidden.status(format!(
        "{plural} is forbidden: User {username:?} cannot {verb} resource {plural:?} in API group \
         {group:?} at the cluster scope, which a request for all namespaces needs; {which}, or \
         grant {verb} on {plural} through a ClusterRole and ClusterRoleBinding",
        plural = kind.plural,
        username = user.username,
        group = kind.group,
    ))
}
