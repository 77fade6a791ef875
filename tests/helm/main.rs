//! deploy/helm/informerd as a platform team meets it: `helm lint` passes; each mode renders,
//! and the real apiserver accepts what it renders (a server-side dry run, in namespaces of the
//! test's own), the sidecar mode also as a controller's own chart includes it, as the chart's
//! README shows; the configuration it renders is one `informerd check-config` accepts; its
//! RBAC is exactly what `informerd rbac` prints for that configuration (for every built-in kind
//! the chart knows, namespace lists, selectors, onDemand and authorization); and bad values
//! fail `helm template` with a message naming the value. parity.rs holds each mode's pod to
//! deploy/'s, rbac.rs the RBAC to `informerd rbac`.
//!
//! helm is the one the Makefile builds from tools/cmd/helm's pinned module (`make
//! .cache/bin/helm`, run here when it is missing or stale; `$INFORMERD_HELM` names another),
//! with its cache and configuration in the repository's `.cache/helm-home`.

mod chart;
mod parity;
mod rbac;

use chart::{
    assert_config_is_valid, chart, dry_run, helm, kinds, pod_spec, template, TempDir, CHART,
};
use informerd_testkit::{unique_prefix, ControlPlane, Fixture, Kubectl};
use serde_yaml::Value;

/// informerd as a native sidecar in `pod`, and the `controller` container reaching its socket.
fn assert_sidecar_joined(pod: &Value) {
    let sidecar = &pod["initContainers"][0];
    assert_eq!(sidecar["name"], "informerd", "{pod:?}");
    // Kept by the apiserver: an API without native sidecars would have dropped it.
    assert_eq!(sidecar["restartPolicy"], "Always", "{sidecar:?}");
    let controller = pod["containers"]
        .as_sequence()
        .and_then(|c| c.iter().find(|c| c["name"] == "controller"))
        .unwrap_or_else(|| panic!("a controller container in {pod:?}"));
    let env = controller["env"].as_sequence().cloned().unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e["name"] == "INFORMERD_SOCKET"
                && e["value"] == "/run/informerd/informerd.sock"),
        "{env:?}"
    );
    let mounts = controller["volumeMounts"]
        .as_sequence()
        .cloned()
        .unwrap_or_default();
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == "informerd-socket" && m["mountPath"] == "/run/informerd"),
        "{mounts:?}"
    );
    let volumes = pod["volumes"].as_sequence().cloned().unwrap_or_default();
    assert!(
        volumes
            .iter()
            .any(|v| v["name"] == "informerd-socket" && v["emptyDir"].is_mapping()),
        "{volumes:?}"
    );
}

#[test]
fn helm_lint_passes_in_each_mode() {
    for mode in ["sidecar", "node"] {
        let set = format!("mode={mode}");
        if let Err(e) = helm(&["lint", "--strict", CHART, "--set", &set]) {
            panic!("helm lint --strict {CHART} --set {set}: {e}");
        }
    }
}

#[tokio::test]
async fn sidecar_mode_renders_what_the_apiserver_accepts() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let mut fixture = Fixture::new("helm-sc").await?;
    let own = fixture.ns().to_string();
    let watched = fixture.add_namespace("helm-sc-w").await?;
    let release = unique_prefix("sc");
    let values = format!(
        "config:\n  resources:\n  - {{apiVersion: v1, kind: Pod, namespaces: [{own}, {watched}]}}\n  \
         - {{apiVersion: v1, kind: Node}}\nsidecar:\n  deployment:\n    enabled: true\n"
    );
    let objects = template(&chart(), &release, &own, &values).map_err(anyhow::Error::msg)?;
    assert_config_is_valid(&objects);
    let accepted = dry_run(&Kubectl::new(cp), &objects);
    for kind in [
        "ServiceAccount",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(
            accepted.keys().any(|k| k.starts_with(&format!("{kind}/"))),
            "{kind} in {:?}",
            accepted.keys()
        );
    }
    let pod = pod_spec(&accepted, "Deployment");
    assert_sidecar_joined(pod);
    assert_eq!(pod["serviceAccountName"], release.clone() + "-informerd");
    Ok(())
}

/// The Deployment template the chart's README shows a controller's chart writing.
fn readme_deployment() -> String {
    let readme = std::fs::read_to_string(chart().join("README.md")).expect("the chart's README");
    let start = readme
        .find("```yaml\n# templates/deployment.yaml")
        .expect("README.md shows a controller chart's templates/deployment.yaml in a yaml block");
    let block = &readme[start + "```yaml\n".len()..];
    block[..block.find("```").unwrap()].to_string()
}

#[tokio::test]
async fn a_controller_chart_includes_the_sidecar_as_the_readme_shows() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let fixture = Fixture::new("helm-dep").await?;
    let ns = fixture.ns().to_string();
    let dir = TempDir::new("helm-controller-chart");
    dir.write(
        "Chart.yaml",
        &format!(
            "apiVersion: v2\nname: controller\nversion: 0.1.0\ndependencies:\n- name: informerd\n  \
             version: 0.1.0\n  repository: file://{}\n",
            chart().display()
        ),
    );
    dir.write(
        "values.yaml",
        &format!("image: controller\ninformerd:\n  config:\n    resources:\n    - {{apiVersion: v1, kind: Pod, namespaces: [{ns}]}}\n"),
    );
    dir.write("templates/deployment.yaml", &readme_deployment());
    helm(&["dependency", "build", dir.0.to_str().unwrap()]).map_err(anyhow::Error::msg)?;
    let objects = template(&dir.0, "ctl", &ns, "{}").map_err(anyhow::Error::msg)?;
    let accepted = dry_run(&Kubectl::new(cp), &objects);
    let pod = pod_spec(&accepted, "Deployment");
    assert_sidecar_joined(pod);
    assert_eq!(
        pod["serviceAccountName"], "ctl-informerd",
        "the ServiceAccount the RBAC binds"
    );
    assert!(
        accepted.contains_key(&format!("Role/{ns}/ctl-informerd")),
        "the dependency's RBAC: {:?}",
        accepted.keys()
    );
    Ok(())
}

#[tokio::test]
async fn node_mode_renders_what_the_apiserver_accepts() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let fixture = Fixture::new("helm-node").await?;
    let ns = fixture.ns().to_string();
    let objects = template(&chart(), &unique_prefix("node"), &ns, "mode: node\n")
        .map_err(anyhow::Error::msg)?;
    assert_config_is_valid(&objects);
    let accepted = dry_run(&Kubectl::new(cp), &objects);
    let pod = pod_spec(&accepted, "DaemonSet");
    let container = &pod["containers"][0];
    assert_eq!(container["name"], "informerd");
    assert!(
        container["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "NODE_NAME"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"),
        "{container:?}"
    );
    let socket = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "informerd-socket")
        .cloned();
    assert_eq!(
        socket.map(|v| v["hostPath"]["path"].clone()),
        Some(Value::from("/var/run/informerd"))
    );
    Ok(())
}

#[test]
fn bad_values_fail_naming_the_value() {
    let cases = [
        (
            "mode: service\n",
            "mode: \"service\" is not a mode of this chart",
        ),
        (
            "config:\n  server: {metrics: \"0.0.0.0:1\"}\n",
            "config.server.metrics: the chart sets it from metricsPort",
        ),
        (
            "config:\n  server: {socket: /tmp/x.sock}\n",
            "config.server.socket: the chart sets it",
        ),
        ("modee: node\n", "additional properties 'modee' not allowed"),
        ("metricsPort: metrics\n", "/metricsPort"),
    ];
    for (values, message) in cases {
        match template(&chart(), "rel", "team-a", values) {
            Ok(objects) => panic!("{values:?} rendered {:?}", kinds(&objects)),
            Err(e) => assert!(e.contains(message), "{values:?}: {e}"),
        }
    }
}
