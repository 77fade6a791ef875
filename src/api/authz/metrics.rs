//! Authorization metrics (`server.authorization: kubernetes`): every decision by what was
//! checked (`token`: TokenReview, `access`: SubjectAccessReview), its result, and whether the
//! decision cache answered (`hit`) or the apiserver was asked (`miss`); and the reviews that
//! failed. `cache="miss"` counts exactly the reviews informerd sent.
//!
//! Decision: process-wide families ([`AUTHZ`]), like the RPC metrics: the authorizer counts
//! without knowing about a registry.

use std::sync::LazyLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::{family, Listed};

/// What a decision was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthzCheck {
    /// TokenReview: who the client is.
    Token,
    /// SubjectAccessReview: what it may read.
    Access,
}

impl AuthzCheck {
    fn as_str(self) -> &'static str {
        match self {
            AuthzCheck::Token => "token",
            AuthzCheck::Access => "access",
        }
    }
}

type DecisionLabels = [(&'static str, &'static str); 3];
type CheckLabels = [(&'static str, &'static str); 1];

/// The authorization families.
#[derive(Debug, Default)]
pub struct AuthzMetrics {
    decisions: Family<DecisionLabels, Counter>,
    errors: Family<CheckLabels, Counter>,
}

/// The process's authorization metrics.
pub static AUTHZ: LazyLock<AuthzMetrics> = LazyLock::new(AuthzMetrics::default);

impl AuthzMetrics {
    /// Registers the families in `registry`, listed before their first sample
    /// ([`Listed`]).
    pub fn register(&'static self, registry: &mut Registry) {
        let decisions = family(
            "authz_decisions",
            "Authorization decisions, by check (token, access), result (allowed, denied) and \
             cache (hit, or miss: a review sent to the apiserver)",
        );
        registry.register_collector(Box::new(Listed::new(decisions, self.decisions.clone())));
        let errors = family(
            "authz_review_errors",
            "TokenReviews and SubjectAccessReviews that failed (the call was refused with \
             UNAVAILABLE), by check",
        );
        registry.register_collector(Box::new(Listed::new(errors, self.errors.clone())));
    }

    /// Counts a decision.
    pub fn decided(&self, check: AuthzCheck, allowed: bool, cached: bool) {
        let result = if allowed { "allowed" } else { "denied" };
        let cache = if cached { "hit" } else { "miss" };
        self.decisions
            .get_or_create(&[
                ("check", check.as_str()),
                ("result", result),
                ("cache", cache),
            ])
            .inc();
    }

    /// Counts a review that failed.
    pub fn error(&self, check: AuthzCheck) {
        self.errors
            .get_or_create(&[("check", check.as_str())])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_counted_by_check_result_and_cache() {
        let metrics: &'static AuthzMetrics = Box::leak(Box::default());
        let mut registry = Registry::with_prefix(crate::metrics::PREFIX);
        metrics.register(&mut registry);
        metrics.decided(AuthzCheck::Access, true, false);
        metrics.decided(AuthzCheck::Access, true, true);
        metrics.decided(AuthzCheck::Access, true, true);
        metrics.decided(AuthzCheck::Token, false, false);
        metrics.error(AuthzCheck::Token);
        let text = crate::metrics::render(&registry);
        for line in [
            r#"informerd_authz_decisions_total{check="access",result="allowed",cache="miss"} 1"#,
            r#"informerd_authz_decisions_total{check="access",result="allowed",cache="hit"} 2"#,
            r#"informerd_authz_decisions_total{check="token",result="denied",cache="miss"} 1"#,
            r#"informerd_authz_review_errors_total{check="token"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
