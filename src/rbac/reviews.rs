//! With `server.authorization: kubernetes`, informerd asks the apiserver who each client is
//! (TokenReview) and what it may read (SubjectAccessReview): both are `create` on a
//! cluster-scoped virtual resource, granted in the ClusterRole, as the apiserver's
//! `system:auth-delegator` ClusterRole grants them to delegating servers.
//!
//! Decision: the rules themselves rather than a binding to `system:auth-delegator`, so that
//! one ClusterRole lists everything informerd may do.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::config::Config;

/// The rules the review calls need: none unless clients are authorized.
pub fn rules(config: &Config) -> Vec<PolicyRule> {
    if !config.server.authorization.enabled() {
        return Vec::new();
    }
    [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ]
    .into_iter()
    .map(|(group, resource)| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        verbs: vec!["create".to_string()],
        ..Default::default()
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::parse;
    use crate::rbac::{generate, Grantee, Kinds};

    fn cluster_rules(server: &str) -> Option<Vec<(String, String, Vec<String>)>> {
        let text = format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\n{server}resources:\n- apiVersion: \
             v1\n  kind: Pod\n  namespaces: [a]\n"
        );
        let config = parse("informerd.yaml", &text).unwrap();
        let grantee = Grantee {
            service_account: "informerd".into(),
            namespace: "informerd".into(),
            name: "informerd".into(),
        };
        let rbac = generate(&config, &grantee, &Kinds::Builtin).unwrap();
        assert_eq!(rbac.namespaces.len(), 1, "pods of a stay in a Role");
        rbac.cluster.map(|(role, binding)| {
            assert_eq!(binding.role_ref.name, "informerd");
            role.rules
                .unwrap_or_default()
                .into_iter()
                .map(|r| {
                    (
                        r.api_groups.unwrap_or_default().join(","),
                        r.resources.unwrap_or_default().join(","),
                        r.verbs,
                    )
                })
                .collect()
        })
    }

    #[test]
    fn authorizing_clients_adds_the_review_rules_and_nothing_else() {
        assert_eq!(cluster_rules(""), None);
        assert_eq!(cluster_rules("server:\n  authorization: none\n"), None);
        let create = vec!["create".to_string()];
        assert_eq!(
            cluster_rules("server:\n  authorization: kubernetes\n"),
            Some(vec![
                (
                    "authentication.k8s.io".into(),
                    "tokenreviews".into(),
                    create.clone()
                ),
                (
                    "authorization.k8s.io".into(),
                    "subjectaccessreviews".into(),
                    create
                ),
            ])
        );
    }
}
