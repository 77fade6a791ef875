//! The JSON patch that injects informerd into a pod, laid out as
//! `deploy/sidecar/deployment.yaml` lays out the sidecar: the same args, probes, resources and
//! security context, the socket on an emptyDir at `/run/informerd`, the configuration from a
//! ConfigMap at `/etc/informerd`.
//!
//! The sidecar goes first among the init containers with `restartPolicy: Always` (a native
//! sidecar): the kubelet starts it, and waits for its startup probe, before every other
//! container, init containers included, and stops it after them. Every container and init
//! container mounts the socket's directory and finds the socket in `$INFORMERD_SOCKET`.

use json_patch::Patch;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{json, Value};

use super::Sidecar;

/// The sidecar container's name: a pod with a container of this name is already injected.
pub const CONTAINER: &str = "informerd";
/// Where the socket's emptyDir is mounted, in every container.
pub const SOCKET_DIR: &str = "/run/informerd";
/// The socket (`server.socket` must say so in the configuration).
pub const SOCKET_PATH: &str = "/run/informerd/informerd.sock";
/// The variable that tells the clients where the socket is.
pub const SOCKET_ENV: &str = "INFORMERD_SOCKET";
/// Where the configuration is mounted; the sidecar reads `informerd.yaml` there.
pub const CONFIG_DIR: &str = "/etc/informerd";

/// The volumes the webhook adds.
///
/// Decision: prefixed names, not deployment.yaml's `socket` and `config`: an injected pod has
/// volumes of its own, and a second volume of one name would make it invalid.
const SOCKET_VOLUME: &str = "informerd-socket";
const CONFIG_VOLUME: &str = "informerd-config";

/// The patch that adds the sidecar configured by `config_map` to `pod`; `None` when the pod
/// already has a container named [`CONTAINER`] (injected already, or by hand).
pub fn patch(pod: &Pod, config_map: &str, sidecar: &Sidecar) -> Option<Patch> {
    if injected(pod) {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let mut ops = Vec::new();
    // Decision: the containers first, by their indices in the pod as received; the sidecar is
    // inserted at the front of initContainers last, so that no index moves under the patch.
    for (list, containers) in [
        ("initContainers", init),
        ("containers", &spec.containers[..]),
    ] {
        for (i, container) in containers.iter().enumerate() {
            connect(&mut ops, &format!("/spec/{list}/{i}"), container);
        }
    }
    let volumes = [
        json!({"name": SOCKET_VOLUME, "emptyDir": {}}),
        // Decision: the one key named, so that a ConfigMap without `informerd.yaml` is reported
        // by the kubelet on the pod ("non-existent config key"), not by informerd's start-up.
        json!({"name": CONFIG_VOLUME, "configMap": {
            "name": config_map,
            "items": [{"key": "informerd.yaml", "path": "informerd.yaml"}],
        }}),
    ];
    append(&mut ops, "/spec/volumes", spec.volumes.is_some(), volumes);
    let container = sidecar_container(sidecar);
    if spec.init_containers.is_some() {
        ops.push(json!({"op": "add", "path": "/spec/initContainers/0", "value": container}));
    } else {
        ops.push(json!({"op": "add", "path": "/spec/initContainers", "value": [container]}));
    }
    Some(serde_json::from_value(Value::Array(ops)).expect("the operations are JSON patch"))
}

/// Whether `pod` has a container named [`CONTAINER`] already (injected, or added by hand).
pub fn injected(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|spec| {
        let init = spec.init_containers.as_deref().unwrap_or_default();
        spec.containers
            .iter()
            .chain(init)
            .any(|c| c.name == CONTAINER)
    })
}

/// Gives the container at `path` the socket: its directory mounted, unless the container
/// mounts something there itself; its path in [`SOCKET_ENV`], unless the container sets that
/// variable itself (a value of its own wins).
fn connect(ops: &mut Vec<Value>, path: &str, container: &Container) {
    let mounts = container.volume_mounts.as_deref().unwrap_or_default();
    if !mounts
        .iter()
        .any(|m| m.mount_path.trim_end_matches('/') == SOCKET_DIR)
    {
        let mount = json!({"name": SOCKET_VOLUME, "mountPath": SOCKET_DIR});
        let exists = container.volume_mounts.is_some();
        append(ops, &format!("{path}/volumeMounts"), exists, [mount]);
    }
    let env = container.env.as_deref().unwrap_or_default();
    if !env.iter().any(|e| e.name == SOCKET_ENV) {
        let var = json!({"name": SOCKET_ENV, "value": SOCKET_PATH});
        append(ops, &format!("{path}/env"), container.env.is_some(), [var]);
    }
}

/// Appends `values` to the list at `path`, creating the list when it does not exist.
fn append<const N: usize>(ops: &mut Vec<Value>, path: &str, exists: bool, values: [Value; N]) {
    if exists {
        for value in values {
            ops.push(json!({"op": "add", "path": format!("{path}/-"), "value": value}));
        }
    } else {
        ops.push(json!({"op": "add", "path": path, "value": values.to_vec()}));
    }
}

/// The sidecar, as deploy/sidecar/deployment.yaml gives it (the comments there say why each
/// setting is what it is).
///
/// Decision: the pod-level settings that deployment.yaml's sidecar runs under (a numeric
/// non-root user and group, seccomp `RuntimeDefault`) are set on the container, not on the
/// pod: the webhook adds a container, it does not change how the pod's own containers run.
fn sidecar_container(sidecar: &Sidecar) -> Value {
    let mut limits = json!({"memory": sidecar.memory_limit});
    if let Some(cpu) = &sidecar.cpu_limit {
        limits["cpu"] = json!(cpu);
    }
    let probe = |path: &str, period: u32, failures: u32| {
        json!({
            "httpGet": {"path": path, "port": "metrics"},
            "periodSeconds": period,
            "failureThreshold": failures,
        })
    };
    json!({
        "name": CONTAINER,
        "image": sidecar.image,
        "restartPolicy": "Always",
        "args": ["serve", "--config", format!("{CONFIG_DIR}/informerd.yaml")],
        "env": [{"name": "RUST_LOG", "value": "info"}],
        "ports": [{"name": "metrics", "containerPort": 9477}],
        "startupProbe": probe("/livez", 1, 30),
        "livenessProbe": probe("/livez", 10, 3),
        "readinessProbe": probe("/readyz", 5, 2),
        "resources": {
            "requests": {"cpu": sidecar.cpu_request, "memory": sidecar.memory_request},
            "limits": limits,
        },
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": SOCKET_VOLUME, "mountPath": SOCKET_DIR},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": true},
        ],
    })
}
