//! The chart runs informerd as deploy/ does: the informerd container of each mode (arguments,
//! ports, probes, resources, security context, environment, mounts) and what its pod needs
//! (the pod's security context, the socket's volume, node mode's tolerations and surge rollout)
//! are deploy/sidecar's and deploy/node's, so that a fix to one that the other lacks fails here.
//! Only the names differ on purpose: the image is a value, and the volumes are named
//! informerd-socket and informerd-config so as not to collide with those of the pod they join.

use informerd_testkit::repo_root;
use serde_yaml::{Mapping, Value};

use crate::chart::{chart, object, template};

/// The workload of `kind` in a deploy/ file.
fn deployed(file: &str, kind: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let workload: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(workload["kind"], kind, "{file}");
    workload
}

/// `container` without its image, its volume mounts named as deploy/ names them.
fn comparable(container: &Value) -> Value {
    let mut c = container.clone();
    let fields = c.as_mapping_mut().expect("a container");
    fields.remove("image");
    fields.remove("imagePullPolicy");
    if let Some(mounts) = fields
        .get_mut("volumeMounts")
        .and_then(Value::as_sequence_mut)
    {
        for mount in mounts {
            let name = mount["name"].as_str().unwrap_or_default().to_string();
            mount["name"] = Value::from(name.trim_start_matches("informerd-"));
        }
    }
    c
}

/// The pod's volume `name` (deploy/'s name), without its name.
fn volume(pod: &Value, name: &str) -> Value {
    let found = pod["volumes"]
        .as_sequence()
        .and_then(|v| {
            v.iter()
                .find(|v| v["name"] == name || v["name"] == format!("informerd-{name}").as_str())
        })
        .unwrap_or_else(|| panic!("a volume {name} in {pod:?}"));
    let mut v: Mapping = found.as_mapping().unwrap().clone();
    v.remove("name");
    if let Some(Value::Mapping(config)) = v.get_mut("configMap") {
        config.remove("name"); // the release's name, and kustomize's hashed one
    }
    Value::Mapping(v)
}

fn pod(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

#[test]
fn sidecar_mode_runs_informerd_as_deploy_sidecar_does() {
    let objects = template(
        &chart(),
        "rel",
        "team-a",
        "sidecar: {deployment: {enabled: true}}\n",
    )
    .expect("the sample Deployment renders");
    let chart_pod = pod(object(&objects, "Deployment"));
    let base = deployed("deploy/sidecar/deployment.yaml", "Deployment");
    let base_pod = pod(&base);
    assert_eq!(
        comparable(&chart_pod["initContainers"][0]),
        comparable(&base_pod["initContainers"][0]),
        "the chart's sidecar (left) and deploy/sidecar's (right) differ"
    );
    assert_eq!(chart_pod["securityContext"], base_pod["securityContext"]);
    for name in ["socket", "config"] {
        assert_eq!(
            volume(chart_pod, name),
            volume(base_pod, name),
            "volume {name}"
        );
    }
    // The controller reaches the socket as deploy/sidecar's does.
    let (chart_controller, base_controller) =
        (&chart_pod["containers"][0], &base_pod["containers"][0]);
    assert_eq!(chart_controller["env"], base_controller["env"]);
    assert_eq!(
        comparable(chart_controller)["volumeMounts"],
        base_controller["volumeMounts"]
    );
}

#[test]
fn node_mode_runs_informerd_as_deploy_node_does() {
    let objects = template(&chart(), "rel", "team-a", "mode: node\n").expect("node mode renders");
    let daemonset = object(&objects, "DaemonSet");
    let base = deployed("deploy/node/daemonset.yaml", "DaemonSet");
    let (chart_pod, base_pod) = (pod(daemonset), pod(&base));
    assert_eq!(
        comparable(&chart_pod["containers"][0]),
        comparable(&base_pod["containers"][0]),
        "the chart's informerd (left) and deploy/node's (right) differ"
    );
    for field in ["securityContext", "tolerations"] {
        assert_eq!(chart_pod[field], base_pod[field], "{field}");
    }
    assert_eq!(
        daemonset["spec"]["updateStrategy"],
        base["spec"]["updateStrategy"]
    );
    for name in ["socket", "config"] {
        assert_eq!(
            volume(chart_pod, name),
            volume(base_pod, name),
            "volume {name}"
        );
    }
}
