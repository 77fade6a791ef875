//! informerd under its own least-privilege RBAC with per-client authorization on, end to end on
//! the real control plane: the sidecar runs as a ServiceAccount bound only to what
//! `informerd rbac` prints for its configuration (list and watch on the cached pods, create on
//! tokenreviews and subjectaccessreviews), as it would in a pod, never as the admin.
//!
//! The rules are granted in three steps, so that each review's rule is shown to be needed and
//! its absence to be named: without them a client's call is refused with `UNAVAILABLE` naming
//! the rule informerd lacks (never allowed), and once all are granted the same sidecar, not
//! restarted, serves a reader and refuses a ServiceAccount without a Role.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use informerd::proto::{ListRequest, StatusRequest};
use informerd_client::{connect_with_token, AuthorizedCache, ConnectOptions, Reason, Token};
use informerd_testkit::{
    create_pods, documents, grant_pod_readers, Authorization, ControlPlane, Fixture, Resource,
    Sidecar, SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use tonic::{Code, Status};

mod authz_support;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const PATIENCE: Duration = Duration::from_secs(120);

/// The objects `informerd rbac` printed, typed.
struct Printed {
    cluster_role: ClusterRole,
    cluster_role_binding: ClusterRoleBinding,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
}

/// `informerd rbac` for the configuration `text`, granting the ServiceAccount `ns/informerd`,
/// every object named `ns`.
fn informerd_rbac(text: &str, ns: &str) -> anyhow::Result<Printed> {
    let dir = std::env::temp_dir().join(format!("informerd-rbac-{ns}"));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("informerd.yaml");
    std::fs::write(&config, text)?;
    let out = std::process::Command::new(BIN)
        .args(["rbac", "--service-account", "informerd"])
        .args(["--service-account-namespace", ns, "--name", ns, "--config"])
        .arg(&config)
        .output()?;
    let printed = String::from_utf8(out.stdout)?;
    anyhow::ensure!(
        out.status.success(),
        "informerd rbac: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let of_kind = |kind: &str| -> Vec<serde_yaml::Value> {
        documents(&printed)
            .into_iter()
            .filter(|d| d["kind"] == kind)
            .collect()
    };
    let one = |kind: &str| -> anyhow::Result<serde_yaml::Value> {
        let mut docs = of_kind(kind);
        anyhow::ensure!(docs.len() == 1, "one {kind} in {printed}");
        Ok(docs.remove(0))
    };
    Ok(Printed {
        cluster_role: serde_yaml::from_value(one("ClusterRole")?)?,
        cluster_role_binding: serde_yaml::from_value(one("ClusterRoleBinding")?)?,
        roles: of_kind("Role")
            .into_iter()
            .map(serde_yaml::from_value)
            .collect::<Result<_, _>>()?,
        role_bindings: of_kind("RoleBinding")
            .into_iter()
            .map(serde_yaml::from_value)
            .collect::<Result<_, _>>()?,
    })
}

/// Creates `object`, or replaces it (keeping its resourceVersion) when it exists.
async fn put<K>(api: &Api<K>, object: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let name = object.meta().name.clone().unwrap_or_default();
    match api.get_opt(&name).await? {
        None => drop(api.create(&PostParams::default(), object).await?),
        Some(current) => {
            let mut object = object.clone();
            object.meta_mut().resource_version = current.meta().resource_version.clone();
            api.replace(&name, &PostParams::default(), &object).await?;
        }
    }
    Ok(())
}

/// The printed ClusterRole with only the rules whose resources `keep` accepts.
fn cluster_role_with(printed: &Printed, keep: impl Fn(&str) -> bool) -> ClusterRole {
    let mut role = printed.cluster_role.clone();
    let rules = role.rules.get_or_insert_default();
    rules.retain(|r| r.resources.iter().flatten().all(|resource| keep(resource)));
    role
}

async fn connect(sidecar: &Sidecar, token: &str) -> anyhow::Result<AuthorizedCache> {
    let socket = sidecar.socket().display().to_string();
    Ok(connect_with_token(&socket, &ConnectOptions::default(), Token::new(token)?).await?)
}

async fn list_pods(cache: &mut AuthorizedCache, ns: &str) -> Result<BTreeSet<String>, Status> {
    let request = ListRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        wait_for_sync: true,
        ..Default::default()
    };
    authz_support::list_names(cache, request).await
}

/// Lists as `cache`'s client until `done` accepts the answer (RBAC follows new rules through
/// its own informer), for up to [`PATIENCE`]; returns that answer.
async fn list_until(
    cache: &mut AuthorizedCache,
    ns: &str,
    what: &str,
    done: impl Fn(&Result<BTreeSet<String>, Status>) -> bool,
) -> anyhow::Result<Result<BTreeSet<String>, Status>> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = list_pods(cache, ns).await;
        if done(&answer) {
            return Ok(answer);
        }
        anyhow::ensure!(Instant::now() < deadline, "{what}; last answer: {answer:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether `answer` is the refusal of a sidecar that may not create `review`: `UNAVAILABLE`,
/// naming the resource and what to grant.
fn cannot_review(answer: &Result<BTreeSet<String>, Status>, review: &str) -> bool {
    match answer {
        Ok(names) => panic!("informerd served {names:?} without reviewing the call"),
        Err(s) if s.code() == Code::Unavailable => {
            let message = s.message();
            message.contains("informerd cannot authorize calls")
                && message.contains(&format!("may not create {review}"))
                && message.contains(&format!("grant create on {review} in API group"))
        }
        Err(s) => panic!("informerd refused the call with {s:?}, not UNAVAILABLE"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_only_the_rules_informerd_rbac_prints_it_syncs_and_authorizes_each_client(
) -> anyhow::Result<()> {
    let cluster = ControlPlane::get();
    let mut fixture = Fixture::on(cluster, "authz-rbac").await?;
    let ns = fixture.ns().to_owned();
    // The ClusterRole and its binding `informerd rbac` prints are named after the namespace.
    fixture.delete_on_drop::<ClusterRoleBinding>(&ns);
    fixture.delete_on_drop::<ClusterRole>(&ns);
    run(cluster, fixture.kube(), &ns).await
}

async fn run(cluster: &ControlPlane, admin: &Client, ns: &str) -> anyhow::Result<()> {
    let pods: BTreeSet<String> = create_pods(admin, ns, 2, &[], false)
        .await?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    grant_pod_readers(admin, ns, "reader", &[("reader", ns)]).await?;
    let config = SidecarConfig::new()
        .resource(Resource::pods().namespaces([ns]))
        .server(|s| s.authorization(Authorization::kubernetes()));
    let printed = informerd_rbac(&config.clone().socket("/tmp/unused.sock").to_yaml(), ns)?;
    anyhow::ensure!(
        printed.roles.len() == 1 && printed.role_bindings.len() == 1,
        "one Role for the pods of {ns}"
    );

    // informerd's own identity: its ServiceAccount, bound to the pods' Role and to a
    // ClusterRole without the review rules, for now.
    let as_informerd = cluster.as_service_account(ns, "informerd").await?;
    let roles: Api<Role> = Api::namespaced(admin.clone(), ns);
    let role_bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), ns);
    put(&roles, &printed.roles[0]).await?;
    put(&role_bindings, &printed.role_bindings[0]).await?;
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    let no_reviews = cluster_role_with(&printed, |r| !r.ends_with("reviews"));
    put(&cluster_roles, &no_reviews).await?;
    put(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        &printed.cluster_role_binding,
    )
    .await?;
    let sidecar = Sidecar::start(BIN.as_ref(), &as_informerd, &config)?;

    let reader_token = cluster
        .service_account_token(ns, "reader", &["informerd"], 3600)
        .await?;
    let nobody_token = cluster
        .service_account_token(ns, "nobody", &["informerd"], 3600)
        .await?;
    let mut reader = connect(&sidecar, &reader_token).await?;
    let mut nobody = connect(&sidecar, &nobody_token).await?;

    // No tokenreviews create: who the client is cannot be known.
    let answer = list_until(&mut reader, ns, "no refusal naming tokenreviews", |a| {
        cannot_review(a, "tokenreviews")
    })
    .await?;
    println!("without tokenreviews: {answer:?}");
    // With it, but no subjectaccessreviews create: what the client may read cannot be known.
    let only_tokens = cluster_role_with(&printed, |r| r != "subjectaccessreviews");
    put(&cluster_roles, &only_tokens).await?;
    let answer = list_until(
        &mut reader,
        ns,
        "no refusal naming subjectaccessreviews",
        |a| cannot_review(a, "subjectaccessreviews"),
    )
    .await?;
    println!("without subjectaccessreviews: {answer:?}");
    let log = sidecar.log();
    assert!(
        log.contains("may not create subjectaccessreviews"),
        "informerd's log names the missing rule: {log}"
    );

    // Everything `informerd rbac` printed: the same sidecar, not restarted, authorizes.
    put(&cluster_roles, &printed.cluster_role).await?;
    let answer = list_until(&mut reader, ns, "the reader was not served", Result::is_ok).await?;
    let apiserver = Api::<Pod>::namespaced(cluster.client_as(ns, "reader").await?, ns)
        .list(&ListParams::default())
        .await?;
    let names: BTreeSet<String> = apiserver
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(
        names, pods,
        "the apiserver lists the reader the pods created"
    );
    assert_eq!(answer?, pods, "informerd lists the reader the pods of {ns}");
    let status = reader.status(StatusRequest::default()).await?.into_inner();
    assert!(status.synced, "synced under its own RBAC: {status:?}");
    let refused = list_pods(&mut nobody, ns)
        .await
        .expect_err("a ServiceAccount without a Role is refused");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert_eq!(Reason::of(&refused), Some(Reason::Forbidden), "{refused:?}");
    assert!(
        refused
            .message()
            .contains(&format!("system:serviceaccount:{ns}:nobody"))
            && refused.message().contains("cannot list resource \"pods\""),
        "{refused:?}"
    );
    Ok(())
}
