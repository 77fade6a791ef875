//! `server.metrics` as a kubelet and Prometheus meet it, on the real control plane: `/readyz`
//! answers 503 naming what has not synced (a namespace RBAC forbids) and 200 once it has;
//! `/livez` answers 200 throughout; `/metrics` is read, during writes, by the Prometheus
//! project's own OpenMetrics parser (its Python client, installed by `make`), and its counters
//! move exactly as the writes say: events stored, objects the filter drops, RPCs by method and
//! code, watchers open and ended (each a test of its own, on namespaces of its own). A port
//! that is taken stops `serve` with the field and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt;
use informerd::proto::{watch_request::Start, EventType, GetRequest, ListRequest, WatchRequest};
use informerd_client as client;
use informerd_testkit::{
    free_port, repo_root, wait_default_service_account, ControlPlane, Fixture, Resource,
    SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// The filter of the test's config: pods named `drop-*` are not kept.
const FILTER: &str = "!object.metadata.name.startsWith('drop-')";
/// The identity the sidecar runs as (impersonated by the admin), granted pods per namespace.
const SERVICE_ACCOUNT: &str = "informerd";

/// An `informerd serve` process, killed when dropped, with its directory.
struct Serving {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Serving {
    fn socket(&self) -> String {
        self.dir.join("informerd.sock").display().to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("informerd.log")).unwrap_or_default()
    }

    async fn get(&self, path: &str) -> Response {
        http_get(self.port, path).await
    }

    /// `/metrics`, parsed by the Prometheus client's OpenMetrics parser.
    async fn scrape(&self) -> Samples {
        let response = self.get("/metrics").await;
        assert_eq!(response.status, 200, "{}", response.body);
        assert!(
            response
                .content_type
                .starts_with("application/openmetrics-text; version=1.0.0"),
            "{}",
            response.content_type
        );
        parse_openmetrics(&response.body)
    }
}

/// One HTTP answer.
struct Response {
    status: u16,
    content_type: String,
    body: String,
}

/// A plain HTTP/1.1 GET, as a kubelet probe makes it.
async fn http_get(port: u16, path: &str) -> Response {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the metrics port accepts connections");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.expect("receive");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_string();
    Response {
        status,
        content_type,
        body: body.to_string(),
    }
}

/// Samples by name and labels (sorted `k=v` pairs joined by `,`).
struct Samples(BTreeMap<(String, String), f64>);

impl Samples {
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        self.0.get(&(name.to_string(), labels.join(","))).copied()
    }

    /// A sample that must be there.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }
}

/// Parses an exposition with `prometheus_client.openmetrics.parser` (which refuses anything
/// that is not valid OpenMetrics), built by `make` into its own virtualenv.
fn parse_openmetrics(text: &str) -> Samples {
    let python = promparse();
    let script = "import sys, json\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        out = []\n\
        for family in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in family.samples:\n\
        \x20       out.append([s.name, ','.join(sorted(f'{k}={v}' for k, v in s.labels.items())), s.value])\n\
        print(json.dumps(out))\n";
    let mut child = Command::new(&python)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the Prometheus client's parser");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write the exposition");
    let out = child.wait_with_output().expect("the parser ends");
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<(String, String, f64)> =
        serde_json::from_slice(&out.stdout).expect("the parser's JSON");
    Samples(rows.into_iter().map(|(n, l, v)| ((n, l), v)).collect())
}

/// The parser's Python, made by `make` when missing (a fresh machine).
fn promparse() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = repo_root();
            let target = ".cache/promparse/bin/python";
            let status = Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(&root)
                .arg(target)
                .status()
                .expect("run make");
            assert!(status.success(), "make {target} failed");
            root.join(target)
        })
        .clone()
}

/// A kubeconfig that acts as the ServiceAccount `namespace/informerd`, through the admin's
/// right to impersonate: RBAC decides what the sidecar may list, as in a pod.
fn impersonating_kubeconfig(cp: &ControlPlane, namespace: &str, path: &Path) {
    let mut kubeconfig =
        kube::config::Kubeconfig::read_from(cp.kubeconfig()).expect("the admin kubeconfig");
    for user in &mut kubeconfig.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            auth.impersonate = Some(format!(
                "system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"
            ));
        }
    }
    let text = serde_yaml::to_string(&kubeconfig).expect("kubeconfig as YAML");
    std::fs::write(path, text).expect("write the kubeconfig");
}

/// Lets the ServiceAccount `sa_namespace/informerd` list and watch pods in `namespace`.
async fn grant_pods(admin: &Client, namespace: &str, sa_namespace: &str) -> anyhow::Result<()> {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "informerd-metrics"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    }))?;
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "informerd-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "informerd-metrics"},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": sa_namespace}]
    }))?;
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

async fn create_pod(pods: &Api<Pod>, name: &str) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    Ok(())
}

/// Writes `dir/informerd.yaml`: a socket in `dir`, `server.metrics: {metrics}`, and
/// `resources` (the `resources:` section).
///
/// Decision: text, not testkit's `SidecarConfig`, for the test whose error names the line and
/// column of `server.metrics`: the text's layout is what it checks.
fn write_config(dir: &Path, metrics: &str, resources: &str) -> PathBuf {
    let config = dir.join("informerd.yaml");
    let text = format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  socket: {}\n  metrics: {metrics}\nresources:\n{resources}",
        dir.join("informerd.sock").display()
    );
    std::fs::write(&config, text).expect("write the config");
    config
}

/// Starts `informerd serve` caching `pods`, its socket in `dir` and `server.metrics` on a free
/// loopback port, as `kubeconfig`; returns once the metrics port answers.
async fn serve(kubeconfig: &Path, dir: PathBuf, pods: Resource) -> Serving {
    let port = free_port();
    let config = dir.join("informerd.yaml");
    let text = SidecarConfig::new()
        .socket(dir.join("informerd.sock"))
        .server(|s| s.metrics_port(port))
        .resource(pods)
        .to_yaml();
    std::fs::write(&config, text).expect("write the config");
    let log = std::fs::File::create(dir.join("informerd.log")).expect("the log file");
    let child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stderr(log)
        .spawn()
        .expect("start informerd serve");
    let mut serving = Serving { child, dir, port };
    for _ in 0..600 {
        if let Ok(Some(status)) = serving.child.try_wait() {
            panic!("informerd exited with {status}: {}", serving.log());
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return serving;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the metrics port did not answer in 60 s: {}", serving.log());
}

/// Waits, up to two minutes, until `check` holds.
async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Waits, up to two minutes, until `read` gives `expected`; fails with what it last gave.
async fn eventually<T, F, Fut>(what: &str, expected: T, mut read: F)
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let got = read().await;
        if got == expected {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            assert_eq!(got, expected, "{what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("informerd-metrics-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// A namespace `allowed` with pods `keep-0..2` and `drop-0..1`, and a sidecar caching its pods
/// (with [`FILTER`]) as a ServiceAccount granted them; with `denied`, a second namespace it is
/// not granted (yet). The namespaces are deleted on drop.
struct Setup {
    fixture: Fixture,
    allowed: String,
    denied: String,
    pods: Api<Pod>,
    sidecar: Serving,
}

impl Setup {
    async fn new(base: &str, with_denied: bool) -> anyhow::Result<Setup> {
        let cp = ControlPlane::get();
        let mut fixture = Fixture::new(&format!("{base}-a")).await?;
        let admin = fixture.kube().clone();
        let allowed = fixture.ns().to_owned();
        let mut namespaces = vec![allowed.clone()];
        let denied = if with_denied {
            let denied = fixture.add_namespace(&format!("{base}-denied")).await?;
            namespaces.push(denied.clone());
            denied
        } else {
            String::new()
        };
        wait_default_service_account(&admin, &allowed).await?;
        let pods: Api<Pod> = Api::namespaced(admin.clone(), &allowed);
        for name in ["keep-0", "keep-1", "keep-2", "drop-0", "drop-1"] {
            create_pod(&pods, name).await?;
        }
        grant_pods(&admin, &allowed, &allowed).await?;
        let dir = temp_dir(base);
        let kubeconfig = dir.join("kubeconfig");
        impersonating_kubeconfig(cp, &allowed, &kubeconfig);
        let pods_resource = Resource::pods().namespaces(namespaces).filter(FILTER);
        let sidecar = serve(&kubeconfig, dir, pods_resource).await;
        Ok(Setup {
            fixture,
            allowed,
            denied,
            pods,
            sidecar,
        })
    }

    /// Waits until the sidecar is ready (every scope synced).
    async fn wait_ready(&self) {
        wait_until("/readyz answers 200", || async {
            self.sidecar.get("/readyz").await.status == 200
        })
        .await;
    }

    /// (received, stored, filtered out) events of the allowed namespace.
    fn counts(&self, m: &Samples) -> (f64, f64, f64) {
        let scope = [("resource", "pods"), ("scope", self.allowed.as_str())];
        (
            m.value("informerd_scope_events_received_total", &scope),
            m.value("informerd_scope_events_stored_total", &scope),
            m.value("informerd_scope_objects_filtered_out_total", &scope),
        )
    }

    /// A watch of the allowed namespace, read to its SYNCED.
    async fn synced_watch(
        &self,
        api: &mut client::proto::cache_client::CacheClient<tonic::transport::Channel>,
    ) -> anyhow::Result<tonic::Streaming<client::proto::WatchEvent>> {
        let mut watch = api
            .watch(WatchRequest {
                resource: "pods".into(),
                namespace: self.allowed.clone(),
                start: Some(Start::SendInitialState(true)),
                ..Default::default()
            })
            .await?
            .into_inner();
        while let Some(event) = watch.message().await? {
            if event.r#type == EventType::Synced as i32 {
                break;
            }
        }
        Ok(watch)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_a_forbidden_namespace_until_it_is_granted_and_livez_answers_throughout(
) -> anyhow::Result<()> {
    let Setup {
        fixture,
        allowed,
        denied,
        sidecar,
        ..
    } = Setup::new("metrics-ready", true).await?;
    let admin = fixture.kube().clone();
    // Not ready while RBAC forbids a namespace: the answer names the resource and the scope.
    let forbidden = format!("{denied}: Forbidden");
    wait_until("/readyz names the forbidden namespace", || async {
        let r = sidecar.get("/readyz").await;
        assert_eq!(r.status, 503, "not synced: {}", r.body);
        r.body.contains(&forbidden)
    })
    .await;
    let readyz = sidecar.get("/readyz").await;
    assert!(
        readyz.body.contains("[-]pods not synced: ")
            && readyz.body.ends_with("readyz check failed\n"),
        "{}",
        readyz.body
    );
    assert_eq!(sidecar.get("/livez").await.status, 200);
    let m = sidecar.scrape().await;
    assert_eq!(
        m.value("informerd_resource_synced", &[("resource", "pods")]),
        0.0
    );
    let state = |m: &Samples, scope: &str, state: &str| {
        m.value(
            "informerd_scope_state",
            &[("resource", "pods"), ("scope", scope), ("state", state)],
        )
    };
    assert_eq!(state(&m, &denied, "Forbidden"), 1.0);

    // Granted: the scope syncs on its next retry, and the sidecar is ready.
    grant_pods(&admin, &denied, &allowed).await?;
    wait_until("/readyz answers 200", || async {
        sidecar.get("/readyz").await.status == 200
    })
    .await;
    assert_eq!(
        sidecar.get("/readyz").await.body,
        "[+]pods ok\nreadyz check passed\n"
    );
    let m = sidecar.scrape().await;
    assert_eq!(
        m.value("informerd_resource_synced", &[("resource", "pods")]),
        1.0
    );
    assert_eq!(state(&m, &denied, "Synced"), 1.0);
    assert_eq!(sidecar.get("/livez").await.status, 200);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_list_is_counted_as_received_stored_and_filtered_out() -> anyhow::Result<()> {
    let setup = Setup::new("metrics-list", false).await?;
    setup.wait_ready().await;
    let m = setup.sidecar.scrape().await;
    assert_eq!(setup.counts(&m), (5.0, 3.0, 2.0), "the initial list");
    assert_eq!(
        m.value("informerd_cache_objects", &[("resource", "pods")]),
        3.0
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpcs_are_counted_by_method_and_code() -> anyhow::Result<()> {
    let setup = Setup::new("metrics-rpc", false).await?;
    setup.wait_ready().await;
    let (allowed, sidecar) = (&setup.allowed, &setup.sidecar);
    // RPCs: counted by method and code.
    let mut api = client::connect(&sidecar.socket()).await?;
    let list = ListRequest {
        resource: "pods".into(),
        namespace: allowed.clone(),
        ..Default::default()
    };
    for _ in 0..2 {
        let chunks: Vec<_> = api
            .list(list.clone())
            .await?
            .into_inner()
            .try_collect()
            .await?;
        let listed: usize = chunks.iter().map(|c| c.objects.len()).sum();
        assert_eq!(listed, 3);
    }
    let get = |name: &str| GetRequest {
        resource: "pods".into(),
        namespace: allowed.clone(),
        name: name.into(),
        ..Default::default()
    };
    api.get(get("keep-0")).await?;
    let missing = api.get(get("drop-0")).await.expect_err("filtered out");
    assert_eq!(missing.code(), tonic::Code::NotFound);

    let m = sidecar.scrape().await;
    let rpc = |m: &Samples, method: &str, code: &str| {
        m.get(
            "informerd_rpc_handled_total",
            &[
                ("service", "informerd.v1.Cache"),
                ("method", method),
                ("code", code),
            ],
        )
    };
    assert_eq!(rpc(&m, "List", "OK"), Some(2.0));
    assert_eq!(rpc(&m, "Get", "OK"), Some(1.0));
    assert_eq!(rpc(&m, "Get", "NOT_FOUND"), Some(1.0));
    assert_eq!(
        m.get(
            "informerd_rpc_handling_seconds_count",
            &[("service", "informerd.v1.Cache"), ("method", "List")]
        ),
        Some(2.0)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_counted_while_they_happen_and_sent_to_a_watcher() -> anyhow::Result<()> {
    let setup = Setup::new("metrics-writes", false).await?;
    setup.wait_ready().await;
    let (pods, sidecar) = (&setup.pods, &setup.sidecar);
    let mut api = client::connect(&sidecar.socket()).await?;
    // A watcher, open while the writes happen.
    let _watch = setup.synced_watch(&mut api).await?;
    let counts = |m: &Samples| setup.counts(m);
    // Writes, scraped while they happen: 4 kept pods and 3 dropped ones created, a kept one
    // relabelled. (No deletion: how many events one makes depends on graceful deletion.)
    let writes = {
        let pods = pods.clone();
        tokio::spawn(async move {
            for i in 0..4 {
                create_pod(&pods, &format!("keep-new-{i}")).await?;
                if i < 3 {
                    create_pod(&pods, &format!("drop-new-{i}")).await?;
                }
            }
            let label = json!({"metadata": {"labels": {"relabelled": "yes"}}});
            let patched = pods
                .patch("keep-1", &PatchParams::default(), &Patch::Merge(label))
                .await?;
            anyhow::Ok(patched.metadata.resource_version.unwrap_or_default())
        })
    };
    let mut scrapes = 0;
    while !writes.is_finished() {
        sidecar.scrape().await;
        scrapes += 1;
    }
    let last_write: f64 = writes.await??.parse()?;
    assert!(scrapes > 0, "scraped during the writes");
    // The cache's resourceVersion reaches the last write's (a controller's "has the cache
    // seen my write" check), for the resource and its scope.
    wait_until(
        "informerd_cache_resource_version reaches the last write",
        || async {
            let m = sidecar.scrape().await;
            let scope = [("resource", "pods"), ("scope", setup.allowed.as_str())];
            let resource = m.get("informerd_cache_resource_version", &scope[..1]);
            let scope = m.get("informerd_scope_resource_version", &scope);
            resource.unwrap_or(0.0) >= last_write && scope.unwrap_or(0.0) >= last_write
        },
    )
    .await;
    // (received, stored, filtered out): 8 events, 5 of them stored, 3 dropped.
    let expected = (5.0 + 8.0, 3.0 + 5.0, 2.0 + 3.0);
    eventually("the writes are counted", expected, || async {
        counts(&sidecar.scrape().await)
    })
    .await;
    let sent = |m: &Samples, kind: &str| {
        m.get(
            "informerd_watch_events_sent_total",
            &[("resource", "pods"), ("type", kind)],
        )
    };
    let added_modified = (Some(3.0 + 4.0), Some(1.0));
    eventually("the watcher is sent the writes", added_modified, || async {
        let m = sidecar.scrape().await;
        (sent(&m, "ADDED"), sent(&m, "MODIFIED"))
    })
    .await;
    let m = sidecar.scrape().await;
    assert_eq!(
        m.value("informerd_cache_objects", &[("resource", "pods")]),
        7.0
    );
    assert_eq!(sent(&m, "SYNCED"), Some(1.0));
    assert_eq!(m.value("informerd_watchers", &[("resource", "pods")]), 1.0);
    assert!(m.value("informerd_memory_resident_bytes", &[]) > 0.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_whose_client_goes_is_ended_as_client_closed() -> anyhow::Result<()> {
    let setup = Setup::new("metrics-closed", false).await?;
    setup.wait_ready().await;
    let sidecar = &setup.sidecar;
    let mut api = client::connect(&sidecar.socket()).await?;
    let watch = setup.synced_watch(&mut api).await?;
    // The client goes: the watcher ends, counted as ClientClosed, and the watch RPC as
    // CANCELLED.
    drop(watch);
    drop(api);
    wait_until("the watcher ends", || async {
        let m = sidecar.scrape().await;
        m.get("informerd_watchers", &[("resource", "pods")]) == Some(0.0)
            && m.get(
                "informerd_watchers_ended_total",
                &[("resource", "pods"), ("reason", "ClientClosed")],
            ) == Some(1.0)
    })
    .await;

    Ok(())
}

#[test]
fn a_metrics_port_that_is_taken_stops_serve_with_the_field_and_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("bound");
    let dir = temp_dir("taken");
    let config = write_config(&dir, &addr.to_string(), "- apiVersion: v1\n  kind: Pod\n");
    // No kubeconfig is needed: the port is bound before anything else starts.
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--kubeconfig")
        .arg(dir.join("no-such-kubeconfig"))
        .output()
        .expect("run informerd serve");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:5:12: server.metrics: cannot listen on {addr}",
            config.display()
        )) && stderr.contains("stop it, or choose another port"),
        "{stderr}"
    );
}
