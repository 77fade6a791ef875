//! The bad-input catalogue (`docs/bad-input.md`) as tests: every row of its configuration,
//! command-line and request tables is run against the real binary (the requests through
//! grpcurl, as a user sends them, to a sidecar caching the real control plane's ConfigMaps), and
//! the answer must be exactly the row's. Every test the catalogue names as backing a row must
//! exist. A failure prints each row's actual answer, ready to paste into the document.

use std::path::{Path, PathBuf};
use std::process::Command;

use informerd_testkit::{
    repo_root, wait_root_ca_published, ControlPlane, Fixture, Index, Resource, Sidecar,
    SidecarConfig,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// What `R` stands for in the configuration rows.
const R: &str = "resources: [{apiVersion: v1, kind: Pod}]";

/// The rows of the first table under the heading `## {section}`: cells without their
/// backticks, `\|` unescaped.
fn rows(section: &str) -> Vec<Vec<String>> {
    let doc =
        std::fs::read_to_string(repo_root().join("docs/bad-input.md")).expect("docs/bad-input.md");
    let heading = format!("## {section}");
    let body = doc
        .split("\n## ")
        .find(|s| format!("## {s}").starts_with(&heading))
        .unwrap_or_else(|| panic!("no section {heading:?} in docs/bad-input.md"));
    let rows: Vec<Vec<String>> = body
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(cells)
        .collect();
    assert!(!rows.is_empty(), "the table of {heading:?} has rows");
    rows
}

/// The cells of a table row.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells
        .iter()
        .map(|c| c.trim().trim_matches('`').trim().to_string())
        .collect()
}

/// A cell's text as the document would show it: code, with `|` escaped, and double backticks
/// when it holds one.
fn cell(text: &str) -> String {
    let text = text.replace('|', "\\|");
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// Panics listing `mismatches` (row id, what it answered), if any.
fn report(section: &str, mismatches: &[(String, String)]) {
    if mismatches.is_empty() {
        return;
    }
    let listing: Vec<String> = mismatches
        .iter()
        .map(|(id, actual)| format!("{id}: {actual}"))
        .collect();
    panic!(
        "{} row(s) of \"{section}\" in docs/bad-input.md differ from what informerd answers; \
         the actual answers:\n{}",
        mismatches.len(),
        listing.join("\n")
    );
}

/// A fresh directory of this test process.
fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("informerd-bad-input-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn config_files_answer_as_the_catalogue_says() {
    let dir = temp_dir("config");
    let mut mismatches = Vec::new();
    for row in rows("Configuration file") {
        let (id, input, answer) = (&row[0], &row[1], &row[2]);
        let text = input.replace(", R", &format!(", {R}"));
        std::fs::write(dir.join("bad.yaml"), format!("{text}\n")).expect("write");
        let out = Command::new(BIN)
            .args(["check-config", "bad.yaml"])
            .current_dir(&dir)
            .output()
            .expect("run informerd");
        let stderr = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
        let actual = stderr.lines().collect::<Vec<_>>().join("<br>");
        if out.status.code() != Some(1) || &actual != answer {
            mismatches.push((
                id.clone(),
                format!("exit {:?}, {}", out.status.code(), cell(&actual)),
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    report("Configuration file", &mismatches);
}

#[test]
fn command_lines_answer_as_the_catalogue_says() {
    let dir = temp_dir("cli");
    let ok = format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver: {{socket: {}}}\n{R}\n",
        dir.join("informerd.sock").display()
    );
    std::fs::write(dir.join("ok.yaml"), ok).expect("write ok.yaml");
    let mut mismatches = Vec::new();
    for row in rows("Command line") {
        let (id, command, exit, answer) = (&row[0], &row[1], &row[2], &row[3]);
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        let out = Command::new(BIN)
            .args(&args)
            .current_dir(&dir)
            .env_remove("INFORMERD_SOCKET")
            .output()
            .expect("run informerd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default().trim_end();
        let code = out.status.code().map(|c| c.to_string()).unwrap_or_default();
        if &code != exit || first != answer {
            mismatches.push((id.clone(), format!("{code} | {}", cell(first))));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    report("Command line", &mismatches);
}

/// What grpcurl printed for one call: the status code (as the document spells it: `OK`,
/// `INVALID_ARGUMENT`, ...) with the `informerd-reason` trailer if any, and the message.
fn grpcurl_answer(stdout: &str, stderr: &str, success: bool) -> (String, String) {
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let reason = field(stdout, "informerd-reason:");
    if success {
        return ("OK".into(), String::new());
    }
    let code = field(stderr, "Code:").unwrap_or_else(|| format!("(no code: {stderr})"));
    // grpcurl spells codes as Go's constants (InvalidArgument): the document as gRPC's own.
    let mut upper = String::new();
    for (i, c) in code.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            upper.push('_');
        }
        upper.push(c.to_ascii_uppercase());
    }
    let code = match reason {
        Some(r) => format!("{upper} {r}"),
        None => upper,
    };
    (code, field(stderr, "Message:").unwrap_or_default())
}

#[tokio::test]
async fn requests_answer_as_the_catalogue_says() {
    let cluster = ControlPlane::get();
    let fixture = Fixture::new("bad-input").await.expect("namespace");
    let kube = fixture.kube().clone();
    let ns = fixture.ns().to_owned();
    let configmaps: Api<ConfigMap> = Api::namespaced(kube.clone(), &ns);
    // The cluster's root CA ConfigMap is published into every namespace: wait for it before
    // the test's own, so that what the sidecar lists (and the revisions in the answers) is the
    // same every run, and `c` is the newest ConfigMap ($RV_C, the namespace's highest
    // resourceVersion: a root CA published after it, on a busy control plane, was not).
    wait_root_ca_published(&kube, &ns)
        .await
        .expect("kube-root-ca.crt is published");
    let mut versions = Vec::new();
    for name in ["a", "b", "c"] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {"payload": name}}))
                .expect("ConfigMap");
        let created = configmaps
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
        versions.push(created.metadata.resource_version.expect("resourceVersion"));
    }
    let config = SidecarConfig::new()
        .resource(
            Resource::configmaps()
                .namespaces([&ns])
                .index(Index::path("payload", "data.payload")),
        )
        .change_log_max_events(1);
    let sidecar = Sidecar::start(BIN.as_ref(), cluster, &config).expect("sidecar");
    let grpcurl = grpcurl_binary();
    let socket = format!("unix://{}", sidecar.socket().display());
    let call = |rpc: &str, request: &str| {
        let out = Command::new(&grpcurl)
            .args(["-plaintext", "-v", "-max-time", "3", "-d", request, &socket])
            .arg(format!("informerd.v1.Cache/{rpc}"))
            .output()
            .expect("run grpcurl");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.success(), stdout, stderr)
    };
    // Synced, and the epoch: a List that waits for the sync.
    let (ok, listed, stderr) = call("List", r#"{"resource": "configmaps", "waitForSync": true}"#);
    assert!(ok, "{stderr}");
    let epoch = listed
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"epoch\": \""))
        .and_then(|e| e.split('"').next())
        .unwrap_or_else(|| panic!("an epoch in {listed}"))
        .to_string();
    let fill = |text: &str| {
        text.replace("$NS", &ns)
            .replace("$EPOCH", &epoch)
            .replace("$RV_C", &versions[2])
            .replace("$RV", &versions[0])
    };
    let mut mismatches = Vec::new();
    for row in rows("Requests") {
        let (id, rpc, request, code, message) = (&row[0], &row[1], &row[2], &row[3], &row[4]);
        let (success, stdout, stderr) = call(rpc, &fill(request));
        let (actual_code, actual_message) = grpcurl_answer(&stdout, &stderr, success);
        if actual_code != *code || actual_message != fill(message) {
            let shown = actual_message
                .replace(&ns, "$NS")
                .replace(&epoch, "$EPOCH")
                .replace(&versions[2], "$RV_C")
                .replace(&versions[0], "$RV");
            mismatches.push((id.clone(), format!("{actual_code} | {}", cell(&shown))));
        }
    }
    drop(sidecar);
    drop(fixture);
    report("Requests", &mismatches);
}

/// grpcurl, built by `make` (`make test` builds it first).
fn grpcurl_binary() -> PathBuf {
    let repo = repo_root();
    let made = Command::new("make")
        .args(["-s", "-C"])
        .arg(&repo)
        .arg(".cache/bin/grpcurl")
        .status()
        .expect("run make");
    assert!(made.success(), "make .cache/bin/grpcurl");
    repo.join(".cache/bin/grpcurl")
}

/// Every test the catalogue names (the last column of every table) exists: `file::...::name`
/// is a `fn name` under `tests/` or `src/`.
#[test]
fn every_test_the_catalogue_names_exists() {
    let doc = std::fs::read_to_string(repo_root().join("docs/bad-input.md")).expect("doc");
    let mut sources = String::new();
    for dir in ["tests", "src"] {
        read_sources(&repo_root().join(dir), &mut sources);
    }
    let mut missing = Vec::new();
    let mut named = 0;
    for line in doc
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #"))
    {
        let cells = cells(line);
        let Some(last) = cells.last().filter(|c| c.contains("::")) else {
            continue;
        };
        named += 1;
        let name = last.rsplit("::").next().unwrap_or_default();
        let (first, _) = last.split_once("::").unwrap_or_default();
        let file_exists = repo_root().join(format!("tests/{first}.rs")).exists()
            || repo_root().join(format!("tests/{first}")).is_dir()
            || repo_root().join(format!("src/{first}")).exists();
        if !file_exists || !sources.contains(&format!("fn {name}(")) {
            missing.push(last.clone());
        }
    }
    assert!(
        named > 40,
        "the catalogue names the tests of its rows ({named})"
    );
    assert!(
        missing.is_empty(),
        "tests named in docs/bad-input.md that do not exist: {missing:?}"
    );
}

fn read_sources(dir: &Path, into: &mut String) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            read_sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
}
