//! What a watcher error means for a scope: the state it leaves the scope in, and a message that
//! says what to fix (shown in status and logged). The watcher retries every error with backoff,
//! so none of these stops a stream.

use kube::{discovery::ApiResource, runtime::watcher};

use super::status::{RelistReason, ScopeState};

/// Why a scope is not serving, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// The apiserver answered 403: RBAC does not allow listing and watching the resource.
    #[error(
        "forbidden: grant list and watch on {plural} (apiGroup {group}) through {grantee}: {source}"
    )]
    Forbidden {
        plural: String,
        /// The API group as RBAC rules spell it (`"" (core)` for the core group).
        group: String,
        /// The RBAC objects that grant access to this scope.
        grantee: String,
        source: watcher::Error,
    },
    /// The apiserver answered 404: the resource is no longer served (its CRD was removed).
    #[error("{api_version} {kind} is no longer served by the apiserver: {source}")]
    NotServed {
        api_version: String,
        kind: String,
        source: watcher::Error,
    },
    /// Any other error (the apiserver unreachable, a dropped connection): kube-rs's own text.
    #[error(transparent)]
    Watch(watcher::Error),
}

impl ScopeError {
    /// Classifies an error of the stream of `ar` in `namespace` (`None`: cluster-wide).
    pub fn new(ar: &ApiResource, namespace: Option<&str>, err: watcher::Error) -> ScopeError {
        match status_code(&err) {
            Some(403) => ScopeError::Forbidden {
                plural: ar.plural.clone(),
                group: if ar.group.is_empty() {
                    "\"\" (core)".to_string()
                } else {
                    ar.group.clone()
                },
                grantee: match namespace {
                    Some(ns) => format!("a Role and RoleBinding in namespace {ns}"),
                    None => "a ClusterRole and ClusterRoleBinding".to_string(),
                },
                source: err,
            },
            Some(404) => ScopeError::NotServed {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
                source: err,
            },
            _ => ScopeError::Watch(err),
        }
    }

    /// The state this error leaves a scope in, before the scope's own history is considered.
    pub fn state(&self) -> ScopeState {
        match self {
            ScopeError::Forbidden { .. } => ScopeState::Forbidden,
            ScopeError::NotServed { .. } | ScopeError::Watch(_) => ScopeState::Failing,
        }
    }

    /// Why the list that follows this error is a relist.
    pub fn relist_reason(&self) -> RelistReason {
        match self {
            ScopeError::Forbidden { .. } => RelistReason::Forbidden,
            ScopeError::Watch(err) if status_code(err) == Some(410) => RelistReason::Expired,
            ScopeError::NotServed { .. } | ScopeError::Watch(_) => RelistReason::Reconnect,
        }
    }

    /// Whether the apiserver rejected the streaming list request itself (an apiserver without
    /// the WatchList feature answers `sendInitialEvents` with 400/422), as opposed to any other
    /// 4xx.
    pub fn refuses_streaming_lists(&self) -> bool {
        match self {
            ScopeError::Watch(watcher::Error::WatchStartFailed(kube::Error::Api(s))) => {
                matches!(s.code, 400 | 422)
                    && (s.message.contains("sendInitialEvents")
                        || s.message.contains("resourceVersionMatch"))
            }
            _ => false,
        }
    }
}

/// The HTTP status the apiserver answered with, if the error is an answer.
pub(super) fn status_code(err: &watcher::Error) -> Option<u16> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use kube::core::Status;

    /// A watch that the apiserver refused to start, answering `code` with `message`.
    pub fn refused(code: u16, message: &str) -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(
            Status::failure(message, "").with_code(code).boxed(),
        ))
    }

    /// The resource the errors of these tests are about.
    pub fn pods() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&())
    }

    #[test]
    fn a_403_names_the_rbac_objects_to_grant() {
        let err = ScopeError::new(&pods(), Some("a"), refused(403, "no"));
        assert_eq!(err.state(), ScopeState::Forbidden);
        assert!(err.to_string().starts_with(
            "forbidden: grant list and watch on pods (apiGroup \"\" (core)) \
             through a Role and RoleBinding in namespace a: failed to start watching object"
        ));
        let cluster = ScopeError::new(&pods(), None, refused(403, "no"));
        assert!(cluster
            .to_string()
            .contains("through a ClusterRole and ClusterRoleBinding: "));
    }

    #[test]
    fn a_404_says_the_resource_is_no_longer_served() {
        let err = ScopeError::new(&pods(), None, refused(404, "gone"));
        assert_eq!(err.state(), ScopeState::Failing);
        assert!(err
            .to_string()
            .starts_with("v1 Pod is no longer served by the apiserver: "));
    }

    #[test]
    fn other_errors_keep_kube_rs_text() {
        let raw = refused(500, "boom").to_string();
        let err = ScopeError::new(&pods(), None, refused(500, "boom"));
        assert_eq!(err.state(), ScopeState::Failing);
        assert_eq!(err.to_string(), raw);
        assert_eq!(
            ScopeError::new(&pods(), None, watcher::Error::NoResourceVersion).to_string(),
            watcher::Error::NoResourceVersion.to_string()
        );
    }

    #[test]
    fn an_error_says_why_the_next_list_is_a_relist() {
        let reason = |code| ScopeError::new(&pods(), None, refused(code, "m")).relist_reason();
        assert_eq!(reason(410), RelistReason::Expired);
        assert_eq!(reason(403), RelistReason::Forbidden);
        assert_eq!(reason(500), RelistReason::Reconnect);
        let gone = watcher::Error::WatchError(Box::new(
            kube::core::Status::failure("too old resource version", "Expired").with_code(410),
        ));
        assert_eq!(
            ScopeError::new(&pods(), None, gone).relist_reason(),
            RelistReason::Expired
        );
    }

    #[test]
    fn only_a_refused_streaming_list_request_refuses_streaming_lists() {
        let refuses = |code, message| {
            ScopeError::new(&pods(), None, refused(code, message)).refuses_streaming_lists()
        };
        assert!(refuses(400, "sendInitialEvents is forbidden for list"));
        assert!(refuses(422, "resourceVersionMatch: unsupported value"));
        assert!(!refuses(400, "bad label selector"));
        assert!(!refuses(403, "sendInitialEvents"));
    }
}
