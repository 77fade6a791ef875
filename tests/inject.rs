//! The sidecar injection webhook as the real kube-apiserver calls it: `informerd
//! inject-webhook` serving HTTPS on loopback, registered by a MutatingWebhookConfiguration
//! (`failurePolicy: Fail`) that selects this test's namespace alone (other tests share the
//! apiserver). A pod annotated `informerd.io/inject: "true"` is stored with the sidecar as
//! deploy/sidecar/deployment.yaml gives it, and the socket in every container; a pod without
//! the annotation, or with informerd already, is stored as sent; a bad annotation refuses the
//! pod naming the annotation; a replaced serving certificate is served without a restart.
//!
//! The control plane has no kubelet: the pods stay Pending, which is all this needs.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use informerd::inject::{ANNOTATION_CONFIG, ANNOTATION_INJECT, CONTAINER, SOCKET_ENV, SOCKET_PATH};
use informerd_testkit::{documents, free_port, repo_root, Ca, Fixture, Kubectl, MountedSecret};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use rcgen::ExtendedKeyUsagePurpose;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// Only to avoid hanging: every wait polls and ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(120);
const IMAGE: &str = "informerd:injected";

/// `informerd inject-webhook` on a port of its own; killed when dropped.
struct Webhook {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl Webhook {
    fn start(dir: &std::path::Path, secret: &MountedSecret) -> Webhook {
        let port = free_port();
        let log = dir.join("webhook.log");
        let child = Command::new(BIN)
            .arg("inject-webhook")
            .args(["--listen", &format!("127.0.0.1:{port}"), "--image", IMAGE])
            .arg("--cert-file")
            .arg(secret.path("tls.crt"))
            .arg("--key-file")
            .arg(secret.path("tls.key"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start informerd inject-webhook");
        Webhook { child, log, port }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The webhook configuration: pods created in `namespace` alone, sent to the webhook at
/// `port`, trusted through `ca`.
fn registration(name: &str, namespace: &str, port: u16, ca: &Ca) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "inject.informerd.io",
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}/inject"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca.pem()),
            },
            "rules": [{
                "operations": ["CREATE"],
                "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
            }],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    })
}

fn pod(name: &str, annotations: Value, containers: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": containers},
    }))
    .expect("pod")
}

fn annotated(name: &str) -> Pod {
    let annotations = json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: "controller-config"});
    pod(name, annotations, json!([{"name": "app", "image": "app"}]))
}

/// Polls a dry-run creation of an annotated pod until `done` holds for its result (the
/// apiserver sees a new or changed webhook configuration a moment after it is written).
async fn until_dry_run(
    pods: &Api<Pod>,
    webhook: &Webhook,
    what: &str,
    done: impl Fn(&kube::Result<Pod>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    loop {
        let result = pods.create(&params, &annotated("probe")).await;
        if done(&result) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {PATIENCE:?}: {what}; last: {result:?}\nwebhook log:\n{}",
            webhook.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn has_sidecar(result: &kube::Result<Pod>) -> bool {
    result.as_ref().is_ok_and(|p| {
        let init = p.spec.as_ref().and_then(|s| s.init_containers.as_ref());
        init.is_some_and(|init| init.iter().any(|c| c.name == CONTAINER))
    })
}

/// Whether every field `expected` sets has the same value in `actual` (the apiserver adds
/// defaults: probe timeouts, port protocols).
fn within(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| within(v, av))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| within(e, a))
        }
        _ => expected == actual,
    }
}

/// Whether each element of `expected` is [`within`] some element of `actual` (the apiserver
/// adds the ServiceAccount token's volume and mounts).
fn each_within(expected: &Value, actual: &Value) -> bool {
    let actual = actual.as_array().map(Vec::as_slice).unwrap_or_default();
    let expected = expected.as_array().expect("a list");
    expected.iter().all(|e| actual.iter().any(|a| within(e, a)))
}

/// deploy/sidecar/deployment.yaml: its informerd container and its pod's security context.
fn documented() -> (Value, Value) {
    let path = repo_root().join("deploy/sidecar/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/sidecar/deployment.yaml");
    let deployment: Deployment = serde_yaml::from_str(&text).expect("a Deployment");
    let spec = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    let init = spec.init_containers.expect("init containers");
    let informerd = init
        .into_iter()
        .find(|c| c.name == CONTAINER)
        .expect("informerd");
    let json = serde_json::to_value(&informerd).expect("json");
    (
        json,
        serde_json::to_value(spec.security_context).expect("json"),
    )
}

fn socket_env(container: &Container) -> Option<String> {
    let env = container.env.as_deref().unwrap_or_default();
    env.iter()
        .find(|e| e.name == SOCKET_ENV)
        .and_then(|e| e.value.clone())
}

/// The stored pod has the sidecar as deploy/sidecar/deployment.yaml gives it.
fn assert_injected_as_documented(stored: &Pod) {
    let spec = stored.spec.clone().expect("spec");
    let init = spec.init_containers.clone().expect("init containers");
    assert_eq!(init[0].name, CONTAINER, "the sidecar comes first: {init:?}");
    let informerd = serde_json::to_value(&init[0]).expect("json");
    assert_eq!(informerd["restartPolicy"], "Always", "a native sidecar");
    assert_eq!(informerd["image"], IMAGE);
    let (expected, pod_security) = documented();
    for field in [
        "args",
        "env",
        "ports",
        "startupProbe",
        "livenessProbe",
        "readinessProbe",
        "resources",
    ] {
        assert!(
            within(&expected[field], &informerd[field]),
            "{field}: deployment.yaml has {}, the injected sidecar {}",
            expected[field],
            informerd[field]
        );
    }
    let security = &informerd["securityContext"];
    assert!(within(&expected["securityContext"], security), "{security}");
    for field in ["runAsUser", "runAsGroup", "seccompProfile"] {
        assert_eq!(
            security[field], pod_security[field],
            "securityContext.{field}"
        );
    }
    let mounts = &informerd["volumeMounts"];
    let sidecar_mounts = json!([
        {"name": "informerd-socket", "mountPath": "/run/informerd"},
        {"name": "informerd-config", "mountPath": "/etc/informerd", "readOnly": true},
    ]);
    assert!(each_within(&sidecar_mounts, mounts), "{mounts}");
    let volumes = serde_json::to_value(spec.volumes.expect("volumes")).expect("json");
    let config_map = json!({
        "name": "controller-config",
        "items": [{"key": "informerd.yaml", "path": "informerd.yaml"}],
    });
    let added = json!([
        {"name": "informerd-socket", "emptyDir": {}},
        {"name": "informerd-config", "configMap": config_map},
    ]);
    assert!(each_within(&added, &volumes), "{volumes}");
}

#[tokio::test]
async fn annotated_pods_get_the_sidecar_and_bad_annotations_are_refused() {
    let mut fixture = Fixture::new("inject").await.expect("namespace");
    let dir = std::env::temp_dir().join(format!("informerd-inject-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut secret = MountedSecret::new(dir.join("secret"));
    let (ca_a, ca_b) = (Ca::new("webhook CA A"), Ca::new("webhook CA B"));
    let (cert_a, cert_b) = (
        ca_a.issue(ExtendedKeyUsagePurpose::ServerAuth),
        ca_b.issue(ExtendedKeyUsagePurpose::ServerAuth),
    );
    secret.publish(&[("tls.crt", &cert_a.0), ("tls.key", &cert_a.1)]);
    let webhook = Webhook::start(&dir, &secret);

    let name = fixture.ns().to_string();
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(fixture.kube().clone());
    fixture.delete_on_drop::<MutatingWebhookConfiguration>(&name);
    let apply = PatchParams::apply("informerd-test").force();
    let register = |ca: &Ca| Patch::Apply(registration(&name, fixture.ns(), webhook.port, ca));
    configurations
        .patch(&name, &apply, &register(&ca_a))
        .await
        .expect("register the webhook");
    let pods = fixture.pods();
    until_dry_run(
        &pods,
        &webhook,
        "the apiserver calls the webhook",
        has_sidecar,
    )
    .await;

    // Annotated: the sidecar as documented; every container finds the socket, except where it
    // names its own.
    let containers = json!([
        {"name": "app", "image": "app"},
        {"name": "own", "image": "own", "env": [{"name": SOCKET_ENV, "value": "/mine.sock"}]},
    ]);
    let annotations = json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: "controller-config"});
    let sent = pod("injected", annotations, containers.clone());
    let stored = pods
        .create(&PostParams::default(), &sent)
        .await
        .expect("created");
    assert_injected_as_documented(&stored);
    let spec = stored.spec.clone().expect("spec");
    assert_eq!(
        socket_env(&spec.containers[0]).as_deref(),
        Some(SOCKET_PATH)
    );
    assert_eq!(
        socket_env(&spec.containers[1]).as_deref(),
        Some("/mine.sock")
    );
    for c in &spec.containers {
        let mounts = c.volume_mounts.as_deref().unwrap_or_default();
        assert!(
            mounts.iter().any(|m| m.mount_path == "/run/informerd"),
            "{}: {mounts:?}",
            c.name
        );
    }

    // Not annotated, or "false", or informerd there already: stored as sent.
    let by_hand = json!([{"name": CONTAINER, "image": "mine"}, {"name": "app", "image": "app"}]);
    let untouched = [
        pod("plain", json!({}), containers.clone()),
        pod(
            "declined",
            json!({ANNOTATION_INJECT: "false"}),
            containers.clone(),
        ),
        pod(
            "by-hand",
            json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: "c"}),
            by_hand,
        ),
    ];
    for sent in untouched {
        let stored = pods
            .create(&PostParams::default(), &sent)
            .await
            .expect("created");
        let spec = stored.spec.expect("spec");
        let name = sent.metadata.name.as_deref().unwrap_or_default();
        assert_eq!(spec.init_containers, None, "{name}");
        assert_eq!(
            spec.containers.len(),
            sent.spec.expect("spec").containers.len(),
            "{name}"
        );
        assert_eq!(
            socket_env(&spec.containers[0]),
            None,
            "{name}: not given the socket"
        );
    }

    // Bad annotations: refused, naming the annotation and what to set.
    let bad = [
        (
            json!({ANNOTATION_INJECT: "yes"}),
            "annotation informerd.io/inject is \"yes\": set it to \"true\"",
        ),
        (
            json!({ANNOTATION_INJECT: "true"}),
            "annotation informerd.io/config is missing",
        ),
        (
            json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: "Not_A_Name"}),
            "annotation informerd.io/config is \"Not_A_Name\", which is not a ConfigMap name",
        ),
    ];
    for (annotations, message) in bad {
        let sent = pod("bad", annotations, containers.clone());
        let refused = pods.create(&PostParams::default(), &sent).await;
        let Err(kube::Error::Api(status)) = refused else {
            panic!("{message}: not refused: {refused:?}");
        };
        assert!(status.message.contains(message), "{message}: {status:?}");
        assert_eq!(status.code, 400, "{status:?}");
    }

    // A new certificate from another CA: the apiserver trusting only CA B refuses pods while
    // the webhook serves A, and injects again once the webhook serves B, without a restart.
    configurations
        .patch(&name, &apply, &register(&ca_b))
        .await
        .expect("trust CA B");
    until_dry_run(&pods, &webhook, "CA A is no longer trusted", |r| r.is_err()).await;
    secret.publish(&[("tls.crt", &cert_b.0), ("tls.key", &cert_b.1)]);
    until_dry_run(&pods, &webhook, "the webhook serves B", has_sidecar).await;

    drop(fixture);
    drop(webhook);
    let _ = std::fs::remove_dir_all(&dir);
}

/// deploy/inject as a platform team applies it: accepted by the real apiserver (a server-side
/// dry run, in a namespace of this run's own), the webhook registered for pods' creation in
/// opted-in namespaces, `failurePolicy: Fail`, at the path the webhook serves, through the
/// Service in front of the Deployment's port.
#[tokio::test]
async fn deploy_inject_is_accepted_by_the_apiserver() {
    let fixture = Fixture::new("inject-deploy").await.expect("namespace");
    let kubectl = Kubectl::new(fixture.cluster());
    let rendered = kubectl.run(&["kustomize", "deploy/inject"], "");
    let rendered = rendered.replace("informerd-inject", fixture.ns());
    let docs: Vec<_> = documents(&rendered)
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .collect();
    let kind = |k: &str| docs.iter().find(|d| d["kind"] == k).expect(k).clone();
    let webhook = &kind("MutatingWebhookConfiguration")["webhooks"][0];
    assert_eq!(webhook["failurePolicy"].as_str(), Some("Fail"));
    let selector = &webhook["namespaceSelector"]["matchLabels"]["informerd.io/inject"];
    assert_eq!(selector.as_str(), Some("enabled"));
    assert_eq!(
        webhook["rules"][0]["operations"][0].as_str(),
        Some("CREATE")
    );
    let service = &webhook["clientConfig"]["service"];
    assert_eq!(service["path"].as_str(), Some(informerd::inject::PATH));
    assert_eq!(service["name"], kind("Service")["metadata"]["name"]);
    let deployment = kind("Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"][0].as_str(), Some("inject-webhook"));
    let manifests: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_yaml::to_string(d).expect("yaml")))
        .collect();
    let applied = kubectl.run(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        &manifests,
    );
    assert!(
        applied.contains("mutatingwebhookconfiguration"),
        "{applied}"
    );
}

/// A serving certificate that does not load stops the webhook at start, naming the flag.
#[test]
fn a_bad_certificate_at_start_up_names_the_flag() {
    let dir = std::env::temp_dir().join(format!("informerd-inject-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut secret = MountedSecret::new(dir.join("secret"));
    let (_, key) = Ca::new("CA").issue(ExtendedKeyUsagePurpose::ServerAuth);
    secret.publish(&[("tls.crt", "garbage"), ("tls.key", &key)]);
    let out = Command::new(BIN)
        .args([
            "inject-webhook",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("--cert-file")
        .arg(secret.path("tls.crt"))
        .arg("--key-file")
        .arg(secret.path("tls.key"))
        .output()
        .expect("run informerd inject-webhook");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let expected = format!(
        "informerd inject-webhook: --cert-file {}: holds no PEM certificate",
        secret.path("tls.crt").display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
