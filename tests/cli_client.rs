//! The client commands as a user meets them: the real binary (`informerd list/get/watch/
//! status`) against a real sidecar caching the pods of a namespace of the real control plane.
//! The assertions are on what the user sees: tables, JSON documents, messages and exit codes.

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    process::{Command, Output, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use informerd_testkit::{
    self as testkit, create_pods, free_port, ControlPlane, Resource, SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{Patch, PatchParams},
    Api,
};
use serde_json::{json, Value};

/// Only to avoid hanging: every wait is a poll that ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(300);

const PODS: [&str; 3] = ["p0", "p1", "p2"];

/// A namespace with the pods of [`PODS`], and a sidecar caching the pods of that namespace
/// under the resource name `pods`. The namespace is deleted when dropped (testkit's fixture).
struct Fixture {
    base: testkit::Fixture,
}

impl std::ops::Deref for Fixture {
    type Target = testkit::Fixture;
    fn deref(&self) -> &testkit::Fixture {
        &self.base
    }
}

impl Fixture {
    async fn new(base: &str) -> Fixture {
        let mut base = testkit::Fixture::new(base).await.expect("namespace");
        // In order: the last pod's resourceVersion is that of the last write.
        let created = create_pods(
            base.kube(),
            base.ns(),
            PODS.len(),
            &[("app", "cli-test")],
            true,
        )
        .await
        .expect("create pods");
        let last_write = created[PODS.len() - 1]
            .metadata
            .resource_version
            .clone()
            .expect("resourceVersion");
        let config = SidecarConfig::new().resource(
            Resource::pods()
                .namespaces([base.ns()])
                .drop(["metadata.managedFields"]),
        );
        base.start_sidecar(std::path::Path::new(bin()), &config)
            .expect("sidecar");
        let f = Fixture { base };
        // Synced is not enough: the initial list may be served from the apiserver's watch
        // cache, a little behind the writes just made. Read our own last write instead: the
        // scope's events come in resourceVersion order, so the cache then holds every pod.
        let last = PODS[PODS.len() - 1];
        f.ok(&[
            "get",
            "pods",
            last,
            "-n",
            f.ns(),
            "--min-resource-version",
            &last_write,
            "--timeout",
            "300s",
        ]);
        f
    }

    /// `informerd ARGS --socket SOCKET`.
    fn informerd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .arg("--socket")
            .arg(self.sidecar().socket())
            .env_remove("INFORMERD_SOCKET");
        cmd
    }

    /// Runs `informerd ARGS`, with its output.
    fn run(&self, args: &[&str]) -> Output {
        self.informerd(args).output().expect("run informerd")
    }

    /// Runs `informerd ARGS` that must end by itself (a watch that fails), killing it after
    /// [`PATIENCE`] only to avoid hanging.
    fn run_to_end(&self, args: &[&str]) -> Output {
        let mut child = self
            .informerd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run informerd");
        wait_bounded(&mut child);
        child.wait_with_output().expect("output")
    }

    /// Runs `informerd ARGS`, which must succeed; its standard output.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "informerd {args:?}: {}\nstderr: {}\nsidecar log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.sidecar().log()
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// Polls `status -o json` until the resource has synced (the sidecar serves before).
    fn wait_synced(&self) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let out = self.run(&["status", "pods", "-o", "json"]);
            if out.status.success() {
                let status: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
                if status["resources"][0]["synced"] == json!(true) {
                    return status;
                }
            }
            assert!(
                Instant::now() < deadline,
                "pods not synced: {}\nsidecar log:\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.sidecar().log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.kube().clone(), self.ns())
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_informerd")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn names(items: &[Value]) -> BTreeSet<String> {
    items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().expect("name").to_string())
        .collect()
}

fn expected_names() -> BTreeSet<String> {
    PODS.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn list_prints_a_table_with_a_header_and_one_row_per_pod() {
    let f = Fixture::new("cli-list").await;
    // --wait-for-sync and --timeout are passed through (the cache holds every pod by now).
    let table = f.ok(&[
        "list",
        "pods",
        "-n",
        f.ns(),
        "--wait-for-sync",
        "--timeout",
        "300s",
    ]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + PODS.len(), "{table}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header[0], "NAME", "{table}");
    assert!(header.contains(&"REVISION"), "{table}");
    assert!(header.contains(&"STATUS"), "{table}");
    assert!(header.contains(&"AGE"), "{table}");
    assert!(
        !header.contains(&"NAMESPACE"),
        "-n: no NAMESPACE column: {table}"
    );
    let status_col = header.iter().position(|h| *h == "STATUS").unwrap();
    let mut seen = BTreeSet::new();
    for row in &lines[1..] {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), header.len(), "{table}");
        // Never scheduled: the apiserver sets Pending, and nothing changes it.
        assert_eq!(cells[status_col], "Pending", "{table}");
        seen.insert(cells[0].to_string());
    }
    assert_eq!(seen, expected_names(), "{table}");
    // Aligned: every cell of the second column starts where its header does.
    let col = lines[0].find(header[1]).unwrap();
    for row in &lines[1..] {
        assert_ne!(row.as_bytes()[col], b' ', "{table}");
        assert_eq!(row.as_bytes()[col - 1], b' ', "{table}");
    }

    // Across namespaces: a NAMESPACE column first, the same rows.
    let table = f.ok(&["list", "pods", "-A", "--show-labels"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE"), "{table}");
    assert!(lines[0].contains("LABELS"), "{table}");
    assert_eq!(lines.len(), 1 + PODS.len(), "{table}");
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.starts_with(f.ns()) && l.contains("app=cli-test")),
        "{table}"
    );

    // A selector that matches nothing: no table, and a message on stderr.
    let out = f.run(&["list", "pods", "-n", f.ns(), "-l", "app=nothing"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("No resources found"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn list_json_and_yaml_are_kubernetes_lists_of_exactly_the_pods() {
    let f = Fixture::new("cli-json").await;
    let status = f.wait_synced();
    let epoch = status["resources"][0]["epoch"]
        .as_str()
        .expect("epoch string")
        .to_string();

    let list: Value =
        serde_json::from_str(&f.ok(&["list", "pods", "-n", f.ns(), "-o", "json"])).expect("JSON");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().expect("items");
    assert_eq!(
        names(items),
        expected_names(),
        "status: {status}\nlist: {list}\nsidecar log:\n{}",
        f.sidecar().log()
    );
    assert_eq!(items.len(), PODS.len());
    for pod in items {
        assert_eq!(pod["kind"], "Pod");
        assert_eq!(pod["metadata"]["namespace"], json!(f.ns()));
        assert!(pod["metadata"].get("managedFields").is_none(), "{pod}");
    }
    // The resume token: EPOCH:REVISION, of this run of the sidecar.
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv");
    let (e, r) = rv.split_once(':').expect("EPOCH:REVISION");
    assert_eq!(e, epoch);
    assert!(r.parse::<u64>().expect("revision") > 0);

    let yaml = f.ok(&["list", "pods", "-n", f.ns(), "-o", "yaml"]);
    let list: Value = serde_yaml::from_str(&yaml).expect("YAML");
    assert_eq!(list["kind"], "List");
    assert_eq!(
        names(list["items"].as_array().expect("items")),
        expected_names()
    );

    // --fields: identity plus what was asked for.
    let list: Value = serde_json::from_str(&f.ok(&[
        "list",
        "pods",
        "-n",
        f.ns(),
        "-o",
        "json",
        "--fields",
        "status.phase",
    ]))
    .expect("JSON");
    let items = list["items"].as_array().expect("items");
    assert_eq!(names(items), expected_names());
    for pod in items {
        assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
        assert!(pod.get("spec").is_none(), "--fields status.phase: {pod}");
    }
}

#[tokio::test]
async fn get_prints_one_pod_and_a_missing_one_exits_1_with_not_found() {
    let f = Fixture::new("cli-get").await;
    f.wait_synced();

    let pod: Value =
        serde_json::from_str(&f.ok(&["get", "pods", "p1", "-n", f.ns(), "-o", "json"]))
            .expect("JSON");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["name"], "p1");
    let table = f.ok(&["get", "pods", "p1", "-n", f.ns()]);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("p1 "), "{table}");

    let out = f.run(&["get", "pods", "missing", "-n", f.ns()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).starts_with("informerd: NOT_FOUND: "),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("(reason: NotFound)"),
        "{}",
        stderr(&out)
    );

    // A resource the sidecar does not cache.
    let out = f.run(&["get", "widgets", "p1", "-n", f.ns()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("NOT_FOUND"), "{}", stderr(&out));
}

#[tokio::test]
async fn get_with_min_resource_version_returns_the_written_version() {
    let f = Fixture::new("cli-rv").await;
    f.wait_synced();
    let written = f
        .pods()
        .patch(
            "p0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"written": "yes"}}})),
        )
        .await
        .expect("update p0");
    let rv = written.metadata.resource_version.expect("resourceVersion");
    // No polling: the call itself waits until the cache holds the write.
    let pod: Value = serde_json::from_str(&f.ok(&[
        "get",
        "pods",
        "p0",
        "-n",
        f.ns(),
        "--min-resource-version",
        &rv,
        "-o",
        "json",
    ]))
    .expect("JSON");
    assert_eq!(pod["metadata"]["labels"]["written"], "yes", "{pod}");
    let got: u64 = pod["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .parse()
        .expect("numeric rv");
    assert!(got >= rv.parse::<u64>().expect("numeric rv"), "{pod}");
}

#[tokio::test]
async fn status_shows_the_resource_synced_with_its_object_count() {
    let f = Fixture::new("cli-status").await;
    let status = f.wait_synced();
    let pods = &status["resources"][0];
    assert_eq!(pods["name"], "pods");
    assert_eq!(pods["kind"], "Pod");
    assert_eq!(pods["objects"], json!(PODS.len()));
    assert_eq!(pods["scopes"][0]["scope"], json!(f.ns()));
    assert_eq!(pods["scopes"][0]["state"], "Synced");

    let table = f.ok(&["status"]);
    let lines: Vec<&str> = table.lines().collect();
    let header_at = lines
        .iter()
        .position(|l| l.starts_with("RESOURCE "))
        .unwrap_or_else(|| panic!("no resource table: {table}"));
    let header: Vec<&str> = lines[header_at].split_whitespace().collect();
    let row: Vec<&str> = lines[header_at + 1].split_whitespace().collect();
    let cell = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(cell("RESOURCE"), "pods", "{table}");
    assert_eq!(cell("SYNCED"), "true", "{table}");
    assert_eq!(cell("OBJECTS"), PODS.len().to_string(), "{table}");
    assert!(cell("BYTES/OBJECT").parse::<u64>().is_ok(), "{table}");
    assert!(table.contains("SCOPE"), "{table}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(f.ns()) && l.contains("Synced")),
        "{table}"
    );

    let out = f.run(&["status", "widgets"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("NOT_FOUND"), "{}", stderr(&out));
}

/// The lines a child process prints, as they come, on a thread of their own.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a child to end, killing it after [`PATIENCE`] only to avoid hanging.
fn wait_bounded(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("informerd did not end");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The next line, waiting at most [`PATIENCE`] (only to avoid hanging).
fn next_line(rx: &mpsc::Receiver<String>, what: &str) -> String {
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|e| panic!("no {what} from `informerd watch`: {e}"))
}

#[tokio::test]
async fn watch_initial_prints_added_for_each_pod_then_synced_then_changes() {
    let f = Fixture::new("cli-watch").await;
    f.wait_synced();
    let mut child = f
        .informerd(&["watch", "pods", "-n", f.ns(), "--initial", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start watch");
    let rx = lines_of(&mut child);

    let mut added = BTreeSet::new();
    let synced = loop {
        let line = next_line(&rx, "initial event");
        let event: Value = serde_json::from_str(&line).expect("one JSON event per line");
        assert!(event["revision"].as_u64().is_some(), "{line}");
        match event["type"].as_str() {
            Some("ADDED") => {
                assert!(added.insert(event["object"]["metadata"]["name"].to_string()));
            }
            Some("SYNCED") => break event,
            _ => panic!("before SYNCED, only ADDED: {line}"),
        }
    };
    let want: BTreeSet<String> = PODS.iter().map(|p| format!("\"{p}\"")).collect();
    assert_eq!(added, want);
    assert!(synced.get("object").is_none(), "{synced}");

    // Then it follows: an update arrives as MODIFIED, with a later revision.
    f.pods()
        .patch(
            "p2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"changed": "yes"}}})),
        )
        .await
        .expect("update p2");
    let line = next_line(&rx, "MODIFIED event");
    let event: Value = serde_json::from_str(&line).expect("JSON event");
    assert_eq!(event["type"], "MODIFIED", "{line}");
    assert_eq!(event["object"]["metadata"]["labels"]["changed"], "yes");
    assert!(
        event["revision"].as_u64() > synced["revision"].as_u64(),
        "{line}"
    );
    let token = event["resourceVersion"]
        .as_str()
        .expect("token")
        .to_string();

    // Ctrl-C ends it quietly, successfully.
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupted.success());
    let status = wait_bounded(&mut child);
    assert!(status.success(), "after Ctrl-C: {status}");

    // Resuming from that token replays nothing before it: the next change comes first.
    let mut child = f
        .informerd(&["watch", "pods", "-n", f.ns(), "--since", &token])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start watch");
    let rx = lines_of(&mut child);
    let header = next_line(&rx, "table header");
    assert!(header.starts_with("EVENT"), "{header}");
    f.pods()
        .delete("p1", &Default::default())
        .await
        .expect("delete p1");
    // The pod's deletion is graceful: MODIFIED (deletionTimestamp) may come first.
    loop {
        let line = next_line(&rx, "DELETED line");
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[2], "p1", "{line}");
        if cells[0] == "DELETED" {
            break;
        }
        assert_eq!(cells[0], "MODIFIED", "{line}");
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn bad_requests_exit_non_zero_with_the_code_and_reason() {
    let f = Fixture::new("cli-errors").await;
    f.wait_synced();

    let out = f.run(&["list", "pods", "-n", f.ns(), "-l", "app in (a"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("informerd: INVALID_ARGUMENT: "),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("(reason: Invalid)"),
        "{}",
        stderr(&out)
    );

    // A watch that fails prints the message and the reason, and exits non-zero: a token from
    // another run of the sidecar.
    let out = f.run_to_end(&["watch", "pods", "-n", f.ns(), "--since", "1:1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("OUT_OF_RANGE") && stderr(&out).contains("EpochChanged"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--initial"), "{}", stderr(&out));

    let out = f.run_to_end(&["watch", "pods", "--predicate-cel", "object.metadata.name +"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("INVALID_ARGUMENT"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_absent_sidecar_is_named_with_what_to_do() {
    let socket = std::env::temp_dir().join(format!("informerd-none-{}.sock", std::process::id()));
    let out = Command::new(bin())
        .args(["list", "pods", "--socket"])
        .arg(&socket)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&socket.display().to_string()), "{err}");
    assert!(err.contains("informerd serve"), "{err}");

    // $INFORMERD_SOCKET is the default socket.
    let out = Command::new(bin())
        .args(["status"])
        .env("INFORMERD_SOCKET", &socket)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&socket.display().to_string()),
        "{}",
        stderr(&out)
    );
}

/// Runs `informerd status -o json ARGS` (connection flags only); the output.
fn status_via(args: &[&str]) -> Output {
    Command::new(bin())
        .args(["status", "-o", "json"])
        .args(args)
        .env_remove("INFORMERD_SOCKET")
        .output()
        .expect("run informerd")
}

#[tokio::test]
async fn http_and_https_addresses_with_a_ca_and_a_client_certificate() {
    let mut fixture = testkit::Fixture::new("cli-tls").await.expect("namespace");
    let cluster = ControlPlane::get();
    let pods = Resource::pods().namespaces([fixture.ns()]);
    // The control plane's PKI: its CA signed a serving certificate for 127.0.0.1 and a client
    // certificate; the sidecar borrows them.
    let pki = cluster.dir().join("pki");
    let path = |name: &str| pki.join(name).display().to_string();

    // Plaintext on loopback.
    let port = free_port();
    let config = SidecarConfig::new()
        .resource(pods.clone())
        .server(|s| s.listen(format!("127.0.0.1:{port}")));
    let plain = fixture
        .start_sidecar(std::path::Path::new(bin()), &config)
        .expect("sidecar");
    let address = format!("http://127.0.0.1:{port}");
    let out = status_via(&["--address", &address]);
    assert!(
        out.status.success(),
        "{}\nsidecar log:\n{}",
        stderr(&out),
        plain.log()
    );
    let status: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["resources"][0]["name"], "pods");

    // TLS that requires a client certificate signed by the CA.
    let port = free_port();
    let config = SidecarConfig::new().resource(pods).server(|s| {
        s.listen(format!("127.0.0.1:{port}")).tls(
            pki.join("apiserver.crt"),
            pki.join("apiserver.key"),
            Some(&pki.join("ca.crt")),
        )
    });
    // Replaces (stops) the plaintext one.
    let tls = fixture
        .start_sidecar(std::path::Path::new(bin()), &config)
        .expect("sidecar");
    let address = format!("https://127.0.0.1:{port}");
    let ca = path("ca.crt");
    let (cert, key) = (path("admin.crt"), path("admin.key"));

    let out = status_via(&[
        "--address",
        &address,
        "--certificate-authority",
        &ca,
        "--client-certificate",
        &cert,
        "--client-key",
        &key,
    ]);
    assert!(
        out.status.success(),
        "{}\nsidecar log:\n{}",
        stderr(&out),
        tls.log()
    );
    let status: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["resources"][0]["name"], "pods");

    // Without the CA, the server's certificate is not trusted; without the client
    // certificate, the server refuses the client. Either way: exit 1, naming the address.
    for args in [
        vec![
            "--address",
            &address,
            "--client-certificate",
            &cert,
            "--client-key",
            &key,
        ],
        vec!["--address", &address, "--certificate-authority", &ca],
    ] {
        let out = status_via(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&address),
            "{args:?}: {}",
            stderr(&out)
        );
    }

    // TLS options on a plaintext target are a mistake, not ignored.
    let out = status_via(&[
        "--address",
        "http://127.0.0.1:1",
        "--certificate-authority",
        &ca,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("https://"), "{}", stderr(&out));
}
