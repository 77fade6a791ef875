//! `server.metrics` as a kubelet and Prometheus meet it, on the real control plane: `/readyz`
//! answers 503 naming what has not synced (a namespace RBAC forbids) and 200 once it has;
//! `/livez` answers 200 throughout; `/metrics` is read, during writes, by the Prometheus
//! project's own OpenMetrics parser (its Python client, installed by `make`), and its counters
//! move exactly as the writes say: events stored, objects the filter drops, RPCs by method and
//! code, watchers open and ended. A port that is taken stops `serve` with the field and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt;
use informerd::proto::{watch_request::Start, EventType, GetRequest, ListRequest, WatchRequest};
use informerd_client as client;
use informerd_testkit::{
    delete_namespace, free_port, repo_root, unique_namespace, wait_default_service_account,
    ControlPlane,
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
fn write_config(dir: &Path, metrics: &str, resources: &str) -> PathBuf {
    let config = dir.join("informerd.yaml");
    let text = format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  socket: {}\n  metrics: {metrics}\nresources:\n{resources}",
        dir.join("informerd.sock").display()
    );
    std::fs::write(&config, text).expect("write the config");
    config
}

/// Starts `informerd serve` on `config` (a `resources:` section) with `server.metrics` on a
/// free loopback port, as `kubeconfig`; returns once the metrics port answers.
async fn serve(kubeconfig: &Path, dir: PathBuf, resources: &str) -> Serving {
    let port = free_port();
    let config = write_config(&dir, &format!("127.0.0.1:{port}"), resources);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_metrics_follow_the_sync_and_the_writes() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let admin = cp.client().await?;
    let allowed = unique_namespace(&admin, "metrics-a").await?;
    let denied = unique_namespace(&admin, "metrics-denied").await?;
    wait_default_service_account(&admin, &allowed).await?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &allowed);
    for name in ["keep-0", "keep-1", "keep-2", "drop-0", "drop-1"] {
        create_pod(&pods, name).await?;
    }
    grant_pods(&admin, &allowed, &allowed).await?;
    let dir = temp_dir("sync");
    let kubeconfig = dir.join("kubeconfig");
    impersonating_kubeconfig(cp, &allowed, &kubeconfig);
    let resources = format!(
        "- name: pods\n  apiVersion: v1\n  kind: Pod\n  namespaces: [{allowed}, {denied}]\n  filter: \"{FILTER}\"\n"
    );
    let sidecar = serve(&kubeconfig, dir, &resources).await;

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
    let scope = [("resource", "pods"), ("scope", allowed.as_str())];
    let counts = |m: &Samples| {
        (
            m.value("informerd_scope_events_received_total", &scope),
            m.value("informerd_scope_events_stored_total", &scope),
            m.value("informerd_scope_objects_filtered_out_total", &scope),
        )
    };
    assert_eq!(counts(&m), (5.0, 3.0, 2.0), "the initial list");
    assert_eq!(
        m.value("informerd_cache_objects", &[("resource", "pods")]),
        3.0
    );

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

    // A watcher, open while the writes happen.
    let mut watch = api
        .watch(WatchRequest {
            resource: "pods".into(),
            namespace: allowed.clone(),
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
            pods.patch("keep-1", &PatchParams::default(), &Patch::Merge(label))
                .await?;
            anyhow::Ok(())
        })
    };
    let mut scrapes = 0;
    while !writes.is_finished() {
        sidecar.scrape().await;
        scrapes += 1;
    }
    writes.await??;
    assert!(scrapes > 0, "scraped during the writes");
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
    assert!(m.value("informerd_memory_resident_bytes", &[]) > 0.0);

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

    drop(sidecar);
    delete_namespace(&admin, &allowed).await?;
    delete_namespace(&admin, &denied).await?;
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
