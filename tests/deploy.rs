//! deploy/ as a platform team meets it: the committed RBAC is what `informerd rbac` prints for
//! the committed configuration; `kubectl kustomize deploy/sidecar | kubectl apply --server-side`
//! succeeds on the real apiserver; and the sidecar, run with the identity those manifests create
//! (a TokenRequest token of their ServiceAccount) and the configuration of their ConfigMap, syncs
//! every scope, and reports a scope forbidden, naming the verb, once its Role loses that verb;
//! the Deployment's probes, called on the configured metrics server, say ready then unready.
//! `informerd rbac --kubeconfig` names a custom resource by the plural discovery gives.
//!
//! The control plane has no kubelet, so the sidecar runs here rather than in the pod. kubectl is
//! the one the Makefile builds from the control plane's release (`make .cache/bin/kubectl`;
//! `$INFORMERD_KUBECTL` names another).
//!
//! Decision: each run renames the example's namespaces (`informerd-example`, `-0`, `-1`, in the
//! manifests and inside the ConfigMap's configuration alike) to a prefix of its own, so that runs
//! never collide and the committed base stays usable as it is. A kustomize `namespace:` cannot do
//! it: it would move the Roles out of the namespaces they grant, and not reach the configuration.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use informerd::proto::{ResourceStatus, StatusRequest};
use informerd_testkit::{
    delete_namespace, documents, repo_root, unique_prefix, wait_default_service_account,
    ControlPlane, Kubectl,
};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{api::PostParams, config::Kubeconfig, Api, Client};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// The namespace prefix of the committed example, renamed for each run.
const EXAMPLE: &str = "informerd-example";
/// The ServiceAccount deploy/sidecar creates and binds.
const SERVICE_ACCOUNT: &str = "controller";
/// Only to avoid hanging: every wait polls and ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(180);

#[test]
fn the_committed_rbac_is_what_informerd_rbac_prints_for_the_committed_config() {
    let path = repo_root().join("deploy/sidecar/rbac.yaml");
    let committed = std::fs::read_to_string(&path).expect("deploy/sidecar/rbac.yaml");
    // The file's first line records the command that generated it, between backticks.
    let command = committed
        .lines()
        .next()
        .and_then(|l| l.split('`').nth(1))
        .expect("rbac.yaml starts with the command that generated it, in backticks");
    let args: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(args[..2], ["informerd", "rbac"], "{command}");
    let out = Command::new(BIN)
        .args(&args[1..])
        .current_dir(repo_root())
        .output()
        .expect("run informerd rbac");
    assert!(
        out.status.success(),
        "`{command}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "deploy/sidecar/rbac.yaml is not what `{command}` prints for the configuration next to it: \
         run `make deploy-rbac` and commit the result"
    );
}

#[test]
fn rbac_on_a_bad_config_prints_what_check_config_prints() {
    let dir = std::env::temp_dir().join(format!("informerd-rbac-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  namespaces: [Not_A_Name]\n",
    )
    .unwrap();
    let run = |args: &[&str]| Command::new(BIN).args(args).output().unwrap();
    let rbac = run(&["rbac", "--config", file.to_str().unwrap()]);
    let check = run(&["check-config", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(rbac.status.code(), Some(1));
    assert!(rbac.stdout.is_empty(), "no RBAC for a bad config");
    let stderr = String::from_utf8_lossy(&rbac.stderr);
    assert!(
        stderr.starts_with(&format!("{}:6:", file.display())),
        "FILE:LINE:COLUMN: {stderr}"
    );
    assert_eq!(stderr, String::from_utf8_lossy(&check.stderr));
}

#[tokio::test]
async fn the_sidecar_base_applies_and_serves_with_the_identity_it_creates() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let admin = cp.client().await?;
    let kubectl = Kubectl::new(cp);
    let prefix = unique_prefix("dpl");
    let [own, ns0, ns1] = ["", "-0", "-1"].map(|s| format!("{prefix}{s}"));

    let manifests = kubectl
        .run(&["kustomize", "deploy/sidecar"], "")
        .replace(EXAMPLE, &prefix);
    kubectl.run(&["apply", "--server-side", "-f", "-"], &manifests);
    let applied = kubectl.run(&["get", "-f", "-", "-o", "name"], &manifests);
    for object in [
        "deployment.apps/controller".to_string(),
        format!("serviceaccount/{SERVICE_ACCOUNT}"),
        format!("role.rbac.authorization.k8s.io/{prefix}"),
        format!("rolebinding.rbac.authorization.k8s.io/{prefix}"),
    ] {
        assert!(
            applied.lines().any(|l| l == object),
            "{object} in {applied}"
        );
    }
    // The apiserver kept the sidecar native (an API version without it would drop the field).
    let deployment = Api::<Deployment>::namespaced(admin.clone(), &own)
        .get("controller")
        .await?;
    let pod = deployment.spec.and_then(|s| s.template.spec).unwrap();
    let sidecar = &pod.init_containers.unwrap()[0];
    assert_eq!(
        (sidecar.name.as_str(), sidecar.restart_policy.as_deref()),
        ("informerd", Some("Always"))
    );
    // The example overlay builds on the base.
    let example = kubectl.run(&["kustomize", "deploy/example"], "");
    assert!(
        example.contains("image: informerd-demo-controller:0.1.0"),
        "{example}"
    );
    for ns in [&ns0, &ns1] {
        wait_default_service_account(&admin, ns).await?;
        create_pod(&admin, ns).await?;
    }

    // The deployed configuration, with the socket and the metrics port moved to this machine.
    let dir = tempdir(&prefix);
    let (config, metrics) = deployed_config(&admin, &own, &manifests, &dir).await?;
    let probes = Probes::of(&manifests);
    let kubeconfig = service_account_kubeconfig(cp, &own, &dir).await?;

    let mut sidecar = Serve::start(&config, &kubeconfig, &dir);
    let status = sidecar.wait_for("every scope synced", |r| r.synced).await;
    let states = scope_states(&status);
    assert_eq!(
        states,
        [
            (ns0.clone(), "Synced".into()),
            (ns1.clone(), "Synced".into())
        ]
    );
    assert_eq!(status.objects, 2, "the pod of each namespace");
    assert_eq!(
        http_status(metrics, &probes.readiness),
        200,
        "ready once synced"
    );
    assert_eq!(http_status(metrics, &probes.liveness), 200);
    assert_eq!(http_status(metrics, &probes.startup), 200);
    drop(sidecar);

    // One verb less in the Role of one namespace: that scope is forbidden, the other serves.
    let role = role_without_watch(&manifests, &ns1);
    kubectl.run(&["apply", "--server-side", "-f", "-"], &role);
    wait_denied(&admin, &own, &ns1).await?;
    let mut sidecar = Serve::start(&config, &kubeconfig, &dir);
    let status = sidecar
        .wait_for("a forbidden scope beside a synced one", |r| {
            scope_states(r)
                == [
                    (ns0.clone(), "Synced".into()),
                    (ns1.clone(), "Forbidden".into()),
                ]
        })
        .await;
    let forbidden = status.scopes.iter().find(|s| s.scope == ns1).unwrap();
    assert!(
        forbidden
            .last_error
            .contains(r#"cannot watch resource "pods""#),
        "the error names the missing verb: {}",
        forbidden.last_error
    );
    assert!(
        forbidden.last_error.contains(&format!(
            "grant list and watch on pods (apiGroup \"\" (core)) through a Role and RoleBinding in namespace {ns1}"
        )),
        "{}",
        forbidden.last_error
    );
    assert_eq!(status.objects, 1, "the synced namespace's pod still serves");
    assert_eq!(
        http_status(metrics, &probes.readiness),
        503,
        "not ready: a scope is forbidden"
    );
    assert_eq!(
        http_status(metrics, &probes.liveness),
        200,
        "alive: no restart would help"
    );
    drop(sidecar);

    for ns in [&own, &ns0, &ns1] {
        delete_namespace(&admin, ns).await?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[tokio::test]
async fn rbac_with_a_kubeconfig_asks_discovery_for_custom_resources() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let admin = cp.client().await?;
    // A plural no rule of English would guess.
    let group = format!("{}.informerd.io", unique_prefix("dpl"));
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgetries.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "gadgetries", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))?;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.create(&PostParams::default(), &crd).await?;
    let dir = tempdir(&group);
    let write = |name: &str, resources: &str| {
        let path = dir.join(name);
        let text =
            format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n{resources}");
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let config = write(
        "informerd.yaml",
        &format!("- {{apiVersion: {group}/v1, kind: Gadget, namespaces: [a]}}\n- {{apiVersion: v1, kind: Pod}}\n"),
    );
    let kubeconfig = cp.kubeconfig().display().to_string();
    let rbac = |args: &[&str]| Command::new(BIN).arg("rbac").args(args).output().unwrap();

    let offline = rbac(&["--config", &config]);
    assert_eq!(offline.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&offline.stderr);
    assert!(stderr.contains(&format!("{config}:4:")), "{stderr}");
    assert!(
        stderr.contains("run informerd rbac with --kubeconfig"),
        "{stderr}"
    );

    // Discovery serves the new group shortly after the CRD is created.
    let deadline = Instant::now() + PATIENCE;
    let online = loop {
        let out = rbac(&["--config", &config, "--kubeconfig", &kubeconfig]);
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stdout = String::from_utf8_lossy(&online.stdout);
    assert!(
        online.status.success(),
        "{}",
        String::from_utf8_lossy(&online.stderr)
    );
    let docs = documents(&stdout);
    let rules = |kind: &str| {
        let doc = docs.iter().find(|d| d["kind"] == kind).unwrap();
        serde_yaml::to_string(&doc["rules"]).unwrap()
    };
    assert_eq!(
        rules("Role"),
        format!("- apiGroups:\n  - {group}\n  resources:\n  - gadgetries\n  verbs:\n  - list\n  - watch\n")
    );
    assert_eq!(
        rules("ClusterRole"),
        "- apiGroups:\n  - ''\n  resources:\n  - pods\n  verbs:\n  - list\n  - watch\n"
    );

    let unserved = write(
        "unserved.yaml",
        &format!("- {{apiVersion: {group}/v1, kind: Widget}}\n"),
    );
    let out = rbac(&["--config", &unserved, "--kubeconfig", &kubeconfig]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with(&format!("{unserved}:4:"))
            && stderr.contains(&format!("{group}/v1 Widget is not served by the cluster")),
        "{stderr}"
    );

    crds.delete(&format!("gadgetries.{group}"), &Default::default())
        .await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Short: a Unix socket path is limited to about 100 bytes.
fn tempdir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(prefix);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn create_pod(client: &Client, ns: &str) -> anyhow::Result<()> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web"},
        // Unscheduled, so that deleting its namespace needs no kubelet to confirm.
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    });
    informerd_testkit::apply_pod(client, ns, pod).await?;
    Ok(())
}

/// Reads the ConfigMap the manifests deployed back from the apiserver and writes its
/// configuration to `dir`, with the socket in `dir` and the metrics port a free one on
/// loopback; returns the file and that port. The configured metrics port must be the one the
/// Deployment's probes call.
async fn deployed_config(
    admin: &Client,
    ns: &str,
    manifests: &str,
    dir: &Path,
) -> anyhow::Result<(PathBuf, u16)> {
    let docs = documents(manifests);
    let mut config = informerd_testkit::deployed_config(admin, ns, manifests).await?;
    let server = &mut config["server"];
    server["socket"] = dir.join("informerd.sock").display().to_string().into();
    let configured = server["metrics"]
        .as_str()
        .expect("server.metrics, which the Deployment's probes call");
    let port = sidecar_container(&docs)["ports"]
        .as_sequence()
        .and_then(|ports| ports.iter().find(|p| p["name"] == "metrics"))
        .and_then(|p| p["containerPort"].as_u64())
        .expect("the sidecar's port named metrics");
    assert!(
        configured.ends_with(&format!(":{port}")),
        "server.metrics {configured} is not the metrics port {port} the probes call"
    );
    let free = informerd_testkit::free_port();
    server["metrics"] = format!("127.0.0.1:{free}").into();
    let path = dir.join("informerd.yaml");
    std::fs::write(&path, serde_yaml::to_string(&config)?)?;
    Ok((path, free))
}

/// The informerd container of the Deployment in `docs`.
fn sidecar_container(docs: &[serde_yaml::Value]) -> &serde_yaml::Value {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["template"]["spec"]["initContainers"]
        .as_sequence()
        .and_then(|c| c.iter().find(|c| c["name"] == "informerd"))
        .expect("informerd among the init containers")
}

/// The paths the kubelet probes the sidecar on.
struct Probes {
    startup: String,
    liveness: String,
    readiness: String,
}

impl Probes {
    fn of(manifests: &str) -> Probes {
        let docs = documents(manifests);
        let container = sidecar_container(&docs);
        let path = |probe: &str| {
            let get = &container[probe]["httpGet"];
            assert_eq!(get["port"], "metrics", "{probe} on the metrics port");
            get["path"].as_str().expect("an httpGet path").to_string()
        };
        Probes {
            startup: path("startupProbe"),
            liveness: path("livenessProbe"),
            readiness: path("readinessProbe"),
        }
    }
}

/// The HTTP status of `GET path` on the loopback `port`, as the kubelet's probe gets it.
fn http_status(port: u16, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {reply:?}"))
}

/// A kubeconfig for the deployed ServiceAccount: a token from the TokenRequest API, as the
/// kubelet mounts one into the pod.
async fn service_account_kubeconfig(
    cp: &ControlPlane,
    ns: &str,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let identity = cp.service_account_config(ns, SERVICE_ACCOUNT).await?;
    let mut kubeconfig = Kubeconfig::read_from(cp.kubeconfig())?;
    for user in &mut kubeconfig.auth_infos {
        user.auth_info = Some(identity.auth_info.clone());
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_yaml::to_string(&kubeconfig)?)?;
    Ok(path)
}

/// The Role of namespace `ns` in `manifests`, without the verb `watch`.
fn role_without_watch(manifests: &str, ns: &str) -> String {
    let mut role = documents(manifests)
        .into_iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == ns)
        .expect("a Role in each watched namespace");
    for rule in role["rules"].as_sequence_mut().unwrap() {
        let verbs = rule["verbs"].as_sequence_mut().unwrap();
        assert!(verbs.iter().any(|v| v == "watch"), "{verbs:?}");
        verbs.retain(|v| v != "watch");
    }
    serde_yaml::to_string(&role).unwrap()
}

/// Waits until RBAC denies the ServiceAccount `watch` on pods in `ns1` (the authorizer follows
/// Role changes through its own informer).
async fn wait_denied(admin: &Client, own: &str, ns1: &str) -> anyhow::Result<()> {
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{own}:{SERVICE_ACCOUNT}")),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns1.into()),
                verb: Some("watch".into()),
                resource: Some("pods".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if !answer.status.is_some_and(|s| s.allowed) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("RBAC still allows watch on pods in {ns1}")
}

/// Scope label → state, in scope order.
fn scope_states(status: &ResourceStatus) -> Vec<(String, String)> {
    let mut states: Vec<_> = status
        .scopes
        .iter()
        .map(|s| (s.scope.clone(), s.state.clone()))
        .collect();
    states.sort();
    states
}

/// `informerd serve` with a configuration and kubeconfig; killed when dropped.
struct Serve {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Serve {
    fn start(config: &Path, kubeconfig: &Path, dir: &Path) -> Serve {
        let socket = dir.join("informerd.sock");
        let _ = std::fs::remove_file(&socket);
        let log = dir.join("informerd.log");
        let child = Command::new(BIN)
            .arg("serve")
            .arg("--config")
            .arg(config)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start informerd serve");
        Serve { child, socket, log }
    }

    /// Polls the Status RPC until the resource `pods` satisfies `done`; its status then.
    async fn wait_for(
        &mut self,
        what: &str,
        done: impl Fn(&ResourceStatus) -> bool,
    ) -> ResourceStatus {
        let deadline = Instant::now() + PATIENCE;
        let mut last = None;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("informerd serve exited with {status}: {}", self.log());
            }
            let target = format!("unix://{}", self.socket.display());
            if let Ok(mut api) = informerd_client::connect(&target).await {
                let request = StatusRequest {
                    resource: "pods".into(),
                    ..Default::default()
                };
                if let Ok(reply) = api.status(request).await {
                    let resource = reply.into_inner().resources.remove(0);
                    if done(&resource) {
                        return resource;
                    }
                    last = Some(resource);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "waited for {what}; last status {last:?}; log: {}",
            self.log()
        );
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
