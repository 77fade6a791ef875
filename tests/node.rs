//! deploy/node, node-local mode, as a platform team meets it: `kubectl kustomize deploy/node |
//! kubectl apply --server-side` (and the example agent beside it) succeeds on the real
//! apiserver; the manifests agree with each other (the socket directory informerd serves in is
//! the hostPath the agent mounts, NODE_NAME comes from the downward API, the agent's token is
//! projected for the audience informerd); RBAC lets informerd list and watch pods cluster-wide
//! and review tokens and access, as the apiserver itself answers; and the ConfigMap's
//! configuration, run by the real binary with NODE_NAME set to a node that seeded pods are bound
//! to, keeps exactly the pods the apiserver lists with that node's field selector.
//!
//! The control plane has no kubelet (nor DaemonSet controller), so informerd runs here rather
//! than in the DaemonSet's pod, with the resources of the deployed ConfigMap as they are
//! (`${NODE_NAME}` included). Decision: `server:` is left out of that run. Its socket and
//! metrics address are the pod's, and its `authorization: kubernetes` is proved by the
//! authorization tests; here the test's client would otherwise need a token, and what is under
//! test is which pods the node's cache keeps.
//!
//! Decision: each run renames the base's namespace and cluster-wide names (`informerd-node`,
//! `informerd-agent`) to a prefix of its own, as tests/deploy.rs does, so that runs never
//! collide on the shared control plane.

use std::{
    collections::BTreeMap,
    process::Command,
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use informerd::proto::ListRequest;
use informerd_testkit::{
    delete_namespace, deployed_config, documents, informerd_rbac, repo_root, unique_prefix,
    volume_at, wait_default_service_account, wait_service_account_may, ControlPlane, Fixture,
    Kubectl, Resource, Server, Sidecar, SidecarConfig,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, Pod, PodSpec},
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{
    api::{ListParams, PostParams},
    Api, Client,
};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// The base's namespace, and the name of its cluster-wide objects; renamed for each run.
const BASE: &str = "informerd-node";
/// The example agent's namespace and cluster-wide names; renamed for each run.
const AGENT: &str = "informerd-agent";
/// Only to avoid hanging: every wait polls and ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(180);

#[test]
fn the_node_config_names_an_unset_node_name_at_its_reference() {
    let file = "deploy/node/informerd.yaml";
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let (line, written) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("fieldSelector:"))
        .expect("a fieldSelector in the node config");
    let column = written
        .find("${NODE_NAME}")
        .expect("spec.nodeName=${NODE_NAME}")
        + 1;
    let out = Command::new(BIN)
        .args(["check-config", file])
        .current_dir(repo_root())
        .env_remove("NODE_NAME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{file}:{}:{column}: resources[0].fieldSelector: environment variable NODE_NAME is not set\n",
            line + 1
        )
    );
}

/// deploy/node/rbac.yaml is exactly what `informerd rbac` prints for deploy/node/informerd.yaml
/// and the base's ServiceAccount (`informerd` in `informerd-node`, objects named
/// `informerd-node`): nothing missing (a resource added to informerd.yaml without its rules
/// would be a forbidden scope on every node) and nothing more (least privilege). The whole file
/// is read, `server.authorization: kubernetes` included, so the TokenReview and
/// SubjectAccessReview rules that per-client authorization needs are compared too. The
/// committed file keeps its comments: the objects are compared, not the text.
#[test]
fn the_node_rbac_is_what_informerd_rbac_prints_for_the_node_config() {
    let printed = informerd_rbac(
        BIN.as_ref(),
        "deploy/node/informerd.yaml",
        ("informerd", BASE, BASE),
        &[("NODE_NAME", "any")],
    );
    for review in ["tokenreviews", "subjectaccessreviews"] {
        assert!(
            printed.contains(&format!("- {review}\n  verbs:\n  - create\n")),
            "`informerd rbac` asks no {review} create for a config with authorization on: {printed}"
        );
    }
    let committed = std::fs::read_to_string(repo_root().join("deploy/node/rbac.yaml")).unwrap();
    assert_eq!(
        documents(&committed),
        documents(&printed),
        "deploy/node/rbac.yaml differs from what `informerd rbac` prints for \
         deploy/node/informerd.yaml; replace its objects with:\n{printed}"
    );
}

#[tokio::test]
async fn the_node_base_applies_and_keeps_exactly_the_pods_of_its_node() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let admin = cp.client().await?;
    let kubectl = Kubectl::new(cp);
    let prefix = unique_prefix("nod");
    let agent_prefix = format!("{prefix}-agent");
    let render = |dir: &str| {
        kubectl
            .run(&["kustomize", dir], "")
            .replace(BASE, &prefix)
            .replace(AGENT, &agent_prefix)
    };
    let base = render("deploy/node");
    let agent = render("deploy/node/example-agent");
    for manifests in [&base, &agent] {
        kubectl.run(&["apply", "--server-side", "-f", "-"], manifests);
    }
    let all = format!("{base}---\n{agent}");
    let applied = kubectl.run(&["get", "-f", "-", "-o", "name"], &all);
    for object in [
        "daemonset.apps/informerd".to_string(),
        "serviceaccount/informerd".into(),
        format!("clusterrole.rbac.authorization.k8s.io/{prefix}"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{prefix}"),
        "daemonset.apps/agent".into(),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{agent_prefix}"),
    ] {
        assert!(
            applied.lines().any(|l| l == object),
            "{object} in {applied}"
        );
    }

    let config = deployed_config(&admin, &prefix, &base).await?;
    let server = &config["server"];
    assert_eq!(
        server["authorization"], "kubernetes",
        "node mode serves many clients: each sees only what it may read"
    );
    let socket = server["socket"].as_str().expect("server.socket");
    the_daemonsets_agree(&admin, &prefix, &agent_prefix, socket).await?;
    the_rbac_suffices(&admin, &prefix, &agent_prefix).await?;

    // Pods bound to fake nodes (node-0...), in namespaces of this run.
    let seeded = format!("{prefix}-s");
    cp.seed(&seeded, 60, 2)?;
    let namespaces = [format!("{seeded}-0"), format!("{seeded}-1")];
    let first = Api::<Pod>::namespaced(admin.clone(), &namespaces[0])
        .list(&ListParams::default().limit(1))
        .await?;
    let node = first.items[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("seeded pods are bound to a node");

    let resources = serde_yaml::to_string(&config["resources"])?;
    assert!(resources.contains("${NODE_NAME}"), "{resources}");
    let deployed = config["resources"]
        .as_sequence()
        .expect("the deployed resources")
        .iter()
        .cloned()
        .fold(SidecarConfig::new(), SidecarConfig::resource_yaml);
    let sidecar =
        Sidecar::start_with_env(BIN.as_ref(), cp, &[("NODE_NAME", node.as_str())], &deployed)?;
    let socket = sidecar.socket().display().to_string();
    let mut api = informerd_client::connect(&socket).await?;

    // Cluster-wide, the cache holds pods of this node only (other tests' pods included).
    let everything = list(&mut api, "").await?;
    for (key, pod) in &everything {
        let bound = pod["spec"]["nodeName"].as_str();
        assert_eq!(bound, Some(node.as_str()), "{key} is not on {node}");
    }
    // In the seeded namespaces, exactly what the apiserver lists with the same selector.
    let selector = format!("spec.nodeName={node}");
    for ns in &namespaces {
        let pods = Api::<Pod>::namespaced(admin.clone(), ns);
        let all = pods.list(&ListParams::default()).await?.items.len();
        let expected: BTreeMap<String, String> = pods
            .list(&ListParams::default().fields(&selector))
            .await?
            .items
            .into_iter()
            .map(|p| {
                let key = format!("{ns}/{}", p.metadata.name.unwrap_or_default());
                (key, p.metadata.resource_version.unwrap_or_default())
            })
            .collect();
        if ns == &namespaces[0] {
            assert!(
                !expected.is_empty(),
                "{ns} has the pod on {node} it was chosen by"
            );
        }
        assert!(expected.len() < all, "{ns}: the selector leaves pods out");
        // A write made just before start-up may arrive a moment after the sync.
        let deadline = Instant::now() + PATIENCE;
        loop {
            let cached: BTreeMap<String, String> = list(&mut api, ns)
                .await?
                .into_iter()
                .map(|(key, pod)| {
                    let version = pod["metadata"]["resourceVersion"].as_str().unwrap_or("");
                    (key, version.to_string())
                })
                .collect();
            if cached == expected {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{ns}: informerd holds {cached:?}, the apiserver lists {expected:?} on {node}; log: {}",
                sidecar.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    drop(sidecar);

    kubectl.run(&["delete", "--wait=false", "-f", "-"], &all);
    for ns in &namespaces {
        delete_namespace(&admin, ns).await?;
    }
    Ok(())
}

/// The DaemonSets as the apiserver kept them: informerd on every node with its node's name,
/// serving in the hostPath directory the agent mounts, the agent with a token for informerd.
async fn the_daemonsets_agree(
    admin: &Client,
    ns: &str,
    agent_ns: &str,
    socket: &str,
) -> anyhow::Result<()> {
    // The apiserver keeps a surge: one informerd serves on every node during a rollout.
    let ds = Api::<DaemonSet>::namespaced(admin.clone(), ns)
        .get("informerd")
        .await?;
    let rolling = ds.spec.and_then(|s| s.update_strategy?.rolling_update);
    let surge = rolling.map(|r| (r.max_surge, r.max_unavailable));
    assert_eq!(
        surge,
        Some((Some(IntOrString::Int(1)), Some(IntOrString::Int(0)))),
        "maxSurge 1, maxUnavailable 0"
    );
    let informerd = pod_spec(admin, ns, "informerd").await?;
    let tolerations = informerd.tolerations.clone().unwrap_or_default();
    assert!(
        tolerations
            .iter()
            .any(|t| t.operator.as_deref() == Some("Exists") && t.key.is_none()),
        "tolerates every taint: {tolerations:?}"
    );
    let container = &informerd.containers[0];
    let node_name = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "NODE_NAME")
        .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(
        node_name,
        Some("spec.nodeName"),
        "NODE_NAME from the downward API"
    );
    let dir = socket.rsplit_once('/').map(|(dir, _)| dir).unwrap();
    let host_dir = host_path_at(&informerd, container, dir).expect("the socket in a hostPath");

    let agent = pod_spec(admin, agent_ns, "agent").await?;
    let container = &agent.containers[0];
    let env = |name: &str| {
        let var = container.env.iter().flatten().find(|e| e.name == name);
        var.and_then(|e| e.value.clone()).unwrap_or_default()
    };
    let agent_socket = env("INFORMERD_SOCKET");
    let (agent_dir, file) = agent_socket.rsplit_once('/').unwrap();
    assert_eq!(
        file,
        socket.rsplit_once('/').unwrap().1,
        "the agent's socket file"
    );
    assert_eq!(
        host_path_at(&agent, container, agent_dir),
        Some(host_dir),
        "the agent mounts the directory informerd serves in"
    );
    let token_file = env("INFORMERD_TOKEN_FILE");
    let (token_dir, token_path) = token_file.rsplit_once('/').unwrap();
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == token_dir)
        .expect("INFORMERD_TOKEN_FILE is in a mounted volume");
    let token = agent
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .and_then(|v| v.projected.as_ref()?.sources.as_ref())
        .and_then(|s| s.iter().find_map(|s| s.service_account_token.clone()))
        .expect("a projected ServiceAccount token");
    assert_eq!(token.audience.as_deref(), Some("informerd"));
    assert_eq!(token.path, token_path);
    assert!(
        token.expiration_seconds.is_some_and(|s| s >= 600),
        "{token:?}"
    );
    Ok(())
}

async fn pod_spec(admin: &Client, ns: &str, name: &str) -> anyhow::Result<PodSpec> {
    let ds = Api::<DaemonSet>::namespaced(admin.clone(), ns)
        .get(name)
        .await?;
    let spec = ds.spec.expect("spec");
    let strategy = spec.update_strategy.expect("an update strategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"), "{name}");
    Ok(spec.template.spec.expect("a pod template"))
}

/// The hostPath of the volume `container` mounts at `path`.
fn host_path_at(pod: &PodSpec, container: &Container, path: &str) -> Option<String> {
    let (_, volume) = volume_at(pod, container, path)?;
    Some(volume.host_path.as_ref()?.path.clone())
}

/// What the apiserver answers for informerd's and the agent's ServiceAccounts: informerd may
/// list and watch pods in every namespace and create TokenReviews and SubjectAccessReviews;
/// the agent may get, list and watch pods in every namespace. Polls: the authorizer follows
/// new bindings through its own informer.
async fn the_rbac_suffices(admin: &Client, ns: &str, agent_ns: &str) -> anyhow::Result<()> {
    let pods = |verb: &str| (verb.to_string(), String::new(), "pods".to_string());
    let create = |group: &str, resource: &str| {
        (
            "create".to_string(),
            group.to_string(),
            resource.to_string(),
        )
    };
    let checks = [
        (ns, "informerd", pods("list")),
        (ns, "informerd", pods("watch")),
        (
            ns,
            "informerd",
            create("authentication.k8s.io", "tokenreviews"),
        ),
        (
            ns,
            "informerd",
            create("authorization.k8s.io", "subjectaccessreviews"),
        ),
        (agent_ns, "agent", pods("get")),
        (agent_ns, "agent", pods("list")),
        (agent_ns, "agent", pods("watch")),
    ];
    for (ns, account, (verb, group, resource)) in checks {
        wait_service_account_may(admin, (ns, account), (&verb, &group, &resource), PATIENCE)
            .await?;
    }
    Ok(())
}

/// The objects informerd lists in `namespace` (all namespaces when empty), once synced, by
/// `namespace/name`.
async fn list(
    api: &mut informerd::proto::cache_client::CacheClient<tonic::transport::Channel>,
    namespace: &str,
) -> anyhow::Result<BTreeMap<String, serde_json::Value>> {
    let request = ListRequest {
        resource: "pods".into(),
        namespace: namespace.into(),
        wait_for_sync: true,
        ..Default::default()
    };
    let chunks: Vec<_> = api.list(request).await?.into_inner().try_collect().await?;
    let mut objects = BTreeMap::new();
    for object in chunks.into_iter().flat_map(|c| c.objects) {
        let key = format!("{}/{}", object.namespace, object.name);
        objects.insert(key, serde_json::from_slice(&object.json)?);
    }
    Ok(objects)
}

/// A surge rollout on one node (deploy/node: `maxSurge: 1`, `maxUnavailable: 0`): the new
/// informerd starts while the old one serves the socket. It waits for the socket without
/// exiting, syncing meanwhile (so that it would become ready and the old pod be stopped), the
/// old one goes on serving; on the old one's SIGTERM the new one takes the same path over, and
/// the old one's exit leaves the new one's socket in place.
#[tokio::test]
async fn a_surge_pod_waits_for_the_socket_and_takes_it_over() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let OneSocket {
        fixture: _fixture,
        dir,
        socket,
        config,
        target,
    } = OneSocket::new(|s| s).await?;
    let mut old = Serving::start(cp, &config, &dir.join("old.log"));
    let old_epoch = old.epoch_at(&target).await;
    let mut new = Serving::start(cp, &config, &dir.join("new.log"));
    let deadline = Instant::now() + PATIENCE;
    while !new.log().contains("every scope synced") {
        assert!(new.running(), "the new one exited: {}", new.log());
        assert!(
            Instant::now() < deadline,
            "the new one never synced: {}",
            new.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        new.log().contains("another process serves on the socket"),
        "{}",
        new.log()
    );
    assert_eq!(
        old.epoch_at(&target).await,
        old_epoch,
        "the old one serves on"
    );

    old.terminate();
    // The old one answers until it stops listening; then the new one does, on the same path.
    let deadline = Instant::now() + PATIENCE;
    let new_epoch = loop {
        let epoch = new.epoch_at(&target).await;
        if epoch != old_epoch {
            break epoch;
        }
        assert!(
            Instant::now() < deadline,
            "the new one never took over: {}",
            new.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    old.wait();
    assert_eq!(
        new.epoch_at(&target).await,
        new_epoch,
        "the old one's exit left the new one's socket: {}",
        old.log()
    );
    new.terminate();
    new.wait();
    assert!(!socket.exists(), "the last one removes its socket");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Two informerds' shared setup: a namespace with a pod (deleted on drop), and a configuration
/// caching its pods on a socket in a fresh directory, its `server` section edited by `server`.
struct OneSocket {
    fixture: Fixture,
    dir: std::path::PathBuf,
    socket: std::path::PathBuf,
    config: std::path::PathBuf,
    target: String,
}

impl OneSocket {
    async fn new(server: impl FnOnce(Server) -> Server) -> anyhow::Result<OneSocket> {
        let fixture = Fixture::new("nod-surge").await?;
        let admin = fixture.kube();
        let ns = fixture.ns().to_owned();
        wait_default_service_account(admin, &ns).await?;
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        Api::<Pod>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &serde_json::from_value(pod)?)
            .await?;
        // Short: a Unix socket path is limited to about 100 bytes.
        let dir = std::env::temp_dir().join(unique_prefix("nod"));
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("s.sock");
        let config = dir.join("informerd.yaml");
        let text = SidecarConfig::new()
            .socket(&socket)
            .server(server)
            .resource(Resource::kind("v1", "Pod").namespaces([&ns]))
            .to_yaml();
        std::fs::write(&config, text)?;
        let target = format!("unix://{}", socket.display());
        Ok(OneSocket {
            fixture,
            dir,
            socket,
            config,
            target,
        })
    }
}

/// A second informerd started by mistake on a socket another one serves, outside a rollout,
/// does not wait for ever: after `server.socketHandoverTimeout` it exits with an error naming
/// the socket and the process serving it (its pid), and the first one serves on, untouched.
#[tokio::test]
async fn a_second_informerd_on_a_served_socket_fails_naming_the_holder() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let one = OneSocket::new(|s| s.socket_handover_timeout("2s")).await?;
    let mut first = Serving::start(cp, &one.config, &one.dir.join("first.log"));
    let epoch = first.epoch_at(&one.target).await;
    let mut second = Serving::start(cp, &one.config, &one.dir.join("second.log"));
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = second.child.try_wait()? {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the second one still waits: {}",
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let log = second.log();
    assert!(!status.success(), "the second one failed: {status}: {log}");
    for named in [
        format!("server.socket {}", one.socket.display()),
        format!("pid {}", first.child.id()),
        "server.socketHandoverTimeout".to_string(),
    ] {
        assert!(log.contains(&named), "{named:?} is not in its error: {log}");
    }
    assert_eq!(
        first.epoch_at(&one.target).await,
        epoch,
        "the first serves on"
    );
    first.terminate();
    first.wait();
    assert!(!one.socket.exists(), "the first one removes its socket");
    std::fs::remove_dir_all(&one.dir)?;
    Ok(())
}

/// `informerd serve` with a configuration, its log in a file; killed when dropped.
struct Serving {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Serving {
    fn start(cp: &ControlPlane, config: &std::path::Path, log: &std::path::Path) -> Serving {
        let child = Command::new(BIN)
            .arg("serve")
            .arg("--config")
            .arg(config)
            .arg("--kubeconfig")
            .arg(cp.kubeconfig())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start informerd serve");
        Serving {
            child,
            log: log.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM, as the kubelet stops a container.
    fn terminate(&self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
    }

    fn wait(&mut self) {
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}: {}", self.log());
    }

    /// The epoch of the informerd that answers a List on `target` once synced (this one must
    /// still run meanwhile).
    async fn epoch_at(&mut self, target: &str) -> u64 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            assert!(self.running(), "exited: {}", self.log());
            if let Ok(mut api) = informerd_client::connect(target).await {
                let request = ListRequest {
                    resource: "pod".into(),
                    wait_for_sync: true,
                    ..Default::default()
                };
                if let Ok(reply) = api.list(request).await {
                    let chunks: Result<Vec<_>, _> = reply.into_inner().try_collect().await;
                    if let Some(last) = chunks.ok().and_then(|c| c.into_iter().last()) {
                        return last.epoch;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no List on {target}: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
