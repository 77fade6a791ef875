//! ServiceAccount tokens for tests of per-client authorization: real ones from the TokenRequest
//! API for an audience, and the bad ones a server must refuse (expired, forged), made from real
//! ones so that they differ in that one respect only.

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::{api::PostParams, config::AuthInfo, Api, Config};

use crate::{ControlPlane, Error, Result};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;

impl ControlPlane {
    /// A token of the ServiceAccount `namespace/name` (created if missing) from the
    /// TokenRequest API, for `audiences` (empty: the apiserver's own), valid for `seconds`
    /// (the apiserver's minimum is 600).
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        audiences: &[&str],
        seconds: i64,
    ) -> Result<String> {
        let admin = self.client().await?;
        let sas: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        let sa = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match sas.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: (!audiences.is_empty())
                    .then(|| audiences.iter().map(|a| a.to_string()).collect()),
                expiration_seconds: Some(seconds),
                ..Default::default()
            }),
            ..Default::default()
        };
        let token = sas
            .create_token_request(name, &PostParams::default(), &request)
            .await?;
        token
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::Command {
                command: format!("TokenRequest for {namespace}/{name}"),
                detail: "the apiserver returned no token".into(),
            })
    }

    /// The admin's connection settings with `token` as the only credential: a client that is
    /// whoever the token says.
    pub async fn config_with_token(&self, token: &str) -> Result<Config> {
        let mut config = self.admin_config().await?;
        config.auth_info = AuthInfo {
            token: Some(token.to_string().into()),
            ..Default::default()
        };
        Ok(config)
    }

    /// This control plane as the ServiceAccount `namespace/name` (created if missing): a
    /// kubeconfig of its own (in a fresh temporary directory) whose only credential is a token
    /// of the ServiceAccount for the apiserver, valid for an hour. A [`crate::Sidecar`] started
    /// with it runs as a pod of that ServiceAccount would: RBAC decides everything it may do.
    pub async fn as_service_account(&self, namespace: &str, name: &str) -> Result<ControlPlane> {
        let token = self
            .service_account_token(namespace, name, &[], 3600)
            .await?;
        let path = &self.kubeconfig;
        let bad = |detail: String| Error::Command {
            command: format!("write a copy of {} for {namespace}/{name}", path.display()),
            detail,
        };
        let mut kubeconfig =
            kube::config::Kubeconfig::read_from(path).map_err(|e| bad(e.to_string()))?;
        for named in &mut kubeconfig.auth_infos {
            named.auth_info = Some(AuthInfo {
                token: Some(token.clone().into()),
                ..Default::default()
            });
        }
        let text = serde_yaml::to_string(&kubeconfig).map_err(|e| bad(e.to_string()))?;
        let copy = crate::sidecar::temp_dir()?.join("kubeconfig");
        std::fs::write(&copy, text).map_err(|e| bad(e.to_string()))?;
        Ok(ControlPlane {
            kubeconfig: copy,
            ..self.clone()
        })
    }

    /// `token` (a JWT the apiserver issued) with its claims changed by `edit` and signed again
    /// with this control plane's service-account signing key: e.g. a token that expired, which
    /// the TokenRequest API cannot issue (its shortest lifetime is 10 minutes).
    pub fn resign_token(
        &self,
        token: &str,
        edit: impl FnOnce(&mut serde_json::Value),
    ) -> Result<String> {
        let key_file = self.dir().join("pki/service-account.key");
        let failed = |detail: String| Error::Command {
            command: format!("sign a token with {}", key_file.display()),
            detail,
        };
        let text = std::fs::read_to_string(&key_file).map_err(|e| failed(e.to_string()))?;
        let der = pem::parse(text).map_err(|e| failed(e.to_string()))?;
        let key = ring::signature::RsaKeyPair::from_der(der.contents())
            .map_err(|e| failed(e.to_string()))?;
        let (header, claims) = split(token).ok_or_else(|| failed("not a JWT".into()))?;
        let mut claims: serde_json::Value =
            serde_json::from_slice(&claims).map_err(|e| failed(e.to_string()))?;
        edit(&mut claims);
        let signed = format!("{header}.{}", B64.encode(claims.to_string()));
        let mut signature = vec![0; key.public().modulus_len()];
        key.sign(
            &ring::signature::RSA_PKCS1_SHA256,
            &ring::rand::SystemRandom::new(),
            signed.as_bytes(),
            &mut signature,
        )
        .map_err(|e| failed(e.to_string()))?;
        Ok(format!("{signed}.{}", B64.encode(signature)))
    }
}

/// `token` with its claims changed by `edit` and its signature kept: a forgery.
pub fn forge_token(token: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let (header, claims) = split(token).expect("a JWT");
    let mut claims: serde_json::Value = serde_json::from_slice(&claims).expect("JSON claims");
    edit(&mut claims);
    let signature = token.rsplit('.').next().unwrap_or_default();
    format!("{header}.{}.{signature}", B64.encode(claims.to_string()))
}

/// The encoded header and the decoded claims of a JWT.
fn split(token: &str) -> Option<(&str, Vec<u8>)> {
    let mut parts = token.split('.');
    let header = parts.next()?;
    let claims = B64.decode(parts.next()?).ok()?;
    Some((header, claims))
}

/// Grants the ServiceAccounts `subjects` (name, namespace) get, list and watch on the pods of
/// `namespace`: a Role and a RoleBinding named `name`, as an operator would write them.
pub async fn grant_pod_readers(
    admin: &kube::Client,
    namespace: &str,
    name: &str,
    subjects: &[(&str, &str)],
) -> Result<()> {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    let metadata = kube::api::ObjectMeta {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let role = Role {
        metadata: metadata.clone(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..Default::default()
        }]),
    };
    let subjects = subjects
        .iter()
        .map(|(sa, sa_namespace)| Subject {
            kind: "ServiceAccount".into(),
            name: sa.to_string(),
            namespace: Some(sa_namespace.to_string()),
            ..Default::default()
        })
        .collect();
    let binding = RoleBinding {
        metadata,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.to_string(),
        },
        subjects: Some(subjects),
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await?;
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

/// Waits until the apiserver answers that the ServiceAccount `namespace/name` may `verb`
/// `resource` (of API group `group`, "" for the core group) in every namespace, asking with a
/// SubjectAccessReview as the ServiceAccount's own requests would be judged. Polls: the
/// authorizer follows new bindings through its own informer. Panics, naming the permission and
/// the last answer, if it is still refused after `patience`.
pub async fn wait_service_account_may(
    admin: &kube::Client,
    (namespace, name): (&str, &str),
    (verb, group, resource): (&str, &str, &str),
    patience: std::time::Duration,
) -> Result<()> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{name}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let deadline = std::time::Instant::now() + patience;
    loop {
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if answer.status.as_ref().is_some_and(|s| s.allowed) {
            return Ok(());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{namespace}/{name} may not {verb} {resource} ({group:?}) cluster-wide: {:?}",
            answer.status
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
