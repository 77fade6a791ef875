//! The patch and the review in-process: what an injected pod looks like, that injecting twice
//! changes nothing, that a container's own INFORMERD_SOCKET wins, and how bad annotations are
//! refused. The apiserver applying the patch is tests/inject.rs.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

use super::*;

fn sidecar() -> Sidecar {
    Sidecar::with_image("informerd:test")
}

fn pod(annotations: Value, spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "annotations": annotations},
        "spec": spec,
    }))
    .expect("pod")
}

/// The pod after `patch`, as the apiserver would apply it.
fn injected_pod(pod: &Pod) -> Pod {
    let patch = patch(pod, "my-config", &sidecar()).expect("a patch");
    let mut value = serde_json::to_value(pod).expect("json");
    json_patch::patch(&mut value, &patch).expect("the patch applies");
    serde_json::from_value(value).expect("still a pod")
}

fn env(container: &k8s_openapi::api::core::v1::Container) -> Vec<(String, Option<String>)> {
    let vars = container.env.clone().unwrap_or_default();
    vars.into_iter().map(|e| (e.name, e.value)).collect()
}

#[test]
fn the_sidecar_comes_first_and_every_container_gets_the_socket() {
    let before = pod(
        json!({}),
        json!({
            "initContainers": [{"name": "migrate", "image": "m"}],
            "containers": [
                {"name": "a", "image": "a", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "b", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }),
    );
    let after = injected_pod(&before);
    let spec = after.spec.expect("spec");
    let init = spec.init_containers.expect("init containers");
    assert_eq!(init.len(), 2);
    let informerd = &init[0];
    assert_eq!(informerd.name, CONTAINER);
    assert_eq!(informerd.restart_policy.as_deref(), Some("Always"));
    assert_eq!(informerd.image.as_deref(), Some("informerd:test"));
    let args = informerd.args.clone().expect("args");
    assert_eq!(args, ["serve", "--config", "/etc/informerd/informerd.yaml"]);
    let startup = informerd.startup_probe.clone().expect("startup probe");
    let get = startup.http_get.expect("httpGet");
    assert_eq!(get.path.as_deref(), Some("/livez"));
    let readiness = informerd.readiness_probe.clone().expect("readiness probe");
    assert_eq!(
        readiness.http_get.expect("httpGet").path.as_deref(),
        Some("/readyz")
    );
    let security = informerd
        .security_context
        .clone()
        .expect("security context");
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(init[1].name, "migrate");
    let volumes: Vec<_> = spec
        .volumes
        .expect("volumes")
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(volumes, ["data", "informerd-socket", "informerd-config"]);
    for container in init.iter().chain(&spec.containers) {
        let mounts = container.volume_mounts.clone().expect("mounts");
        assert!(
            mounts
                .iter()
                .any(|m| m.name == "informerd-socket" && m.mount_path == SOCKET_DIR),
            "{} mounts the socket: {mounts:?}",
            container.name
        );
        if container.name != CONTAINER {
            let socket = (SOCKET_ENV.to_string(), Some(SOCKET_PATH.to_string()));
            assert!(
                env(container).contains(&socket),
                "{}: {:?}",
                container.name,
                env(container)
            );
        }
    }
    assert_eq!(env(&spec.containers[0])[0], ("X".into(), Some("1".into())));
}

#[test]
fn injecting_twice_changes_nothing() {
    let before = pod(
        json!({}),
        json!({"containers": [{"name": "a", "image": "a"}]}),
    );
    let after = injected_pod(&before);
    assert!(injected(&after));
    assert_eq!(patch(&after, "my-config", &sidecar()), None);
}

#[test]
fn a_socket_variable_the_container_sets_is_kept() {
    let before = pod(
        json!({}),
        json!({"containers": [
            {"name": "a", "image": "a", "env": [{"name": SOCKET_ENV, "value": "/elsewhere.sock"}]},
        ]}),
    );
    let after = injected_pod(&before);
    let vars = env(&after.spec.expect("spec").containers[0]);
    assert_eq!(
        vars,
        [(SOCKET_ENV.to_string(), Some("/elsewhere.sock".to_string()))]
    );
}

#[test]
fn annotations_ask_for_the_sidecar_or_are_refused_naming_the_one_to_fix() {
    let of = |annotations: Value| {
        let annotations = serde_json::from_value(annotations).expect("map");
        Request::of(Some(&annotations), "team-a")
    };
    assert_eq!(Request::of(None, "team-a"), Ok(Request::Nothing));
    assert_eq!(
        of(json!({ANNOTATION_INJECT: "false"})),
        Ok(Request::Nothing)
    );
    let asked = of(json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: "cfg.v1"}));
    let config_map = "cfg.v1".to_string();
    assert_eq!(asked, Ok(Request::Inject { config_map }));
    let bad = of(json!({ANNOTATION_INJECT: "yes"})).expect_err("refused");
    assert!(
        bad.starts_with("annotation informerd.io/inject is \"yes\": set it to \"true\""),
        "{bad}"
    );
    let missing = of(json!({ANNOTATION_INJECT: "true"})).expect_err("refused");
    assert!(
        missing.starts_with("annotation informerd.io/config is missing"),
        "{missing}"
    );
    assert!(missing.contains("namespace \"team-a\""), "{missing}");
    for name in ["Config", "-cfg", "cfg_1", "a..b", &"a".repeat(254)] {
        let invalid = of(json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: name}));
        let message = invalid.expect_err(name);
        assert!(
            message.contains("not a ConfigMap name"),
            "{name}: {message}"
        );
    }
}

fn review_of(annotations: Value) -> Value {
    let request = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "team-a",
            "name": "",
            "userInfo": {},
            "object": {
                "metadata": {"generateName": "p-", "annotations": annotations},
                "spec": {"containers": [{"name": "a", "image": "a"}]},
            },
        },
    });
    let body = serde_json::to_vec(&request).expect("json");
    serde_json::from_slice(&review(&body, &sidecar())).expect("an AdmissionReview")
}

#[test]
fn reviews_answer_with_a_patch_nothing_or_a_refusal() {
    let injected = review_of(json!({ANNOTATION_INJECT: "true", ANNOTATION_CONFIG: "cfg"}));
    let response = &injected["response"];
    assert_eq!(response["uid"], "u-1");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");

    let untouched = review_of(json!({}));
    assert_eq!(untouched["response"]["allowed"], true);
    assert_eq!(untouched["response"].get("patch"), None);

    let refused = review_of(json!({ANNOTATION_INJECT: "on"}));
    let response = &refused["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    assert_eq!(response["status"]["reason"], "Invalid");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("annotation informerd.io/inject is \"on\""),
        "{message}"
    );

    let garbage = review(b"{}", &sidecar());
    let garbage: Value = serde_json::from_slice(&garbage).expect("json");
    assert_eq!(garbage["response"]["allowed"], false);
    let message = garbage["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.starts_with("the request is not an AdmissionReview of a Pod: "),
        "{message}"
    );
}
