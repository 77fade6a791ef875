//! What the builder renders: the fields the sidecar reads, the unset ones left out.

use super::*;

#[test]
fn renders_the_fields_the_sidecar_reads_and_leaves_out_the_unset() {
    let config = SidecarConfig::new()
        .socket("/tmp/s.sock")
        .server(|s| {
            s.metrics_port(9000)
                .socket_mode("0600")
                .authorization(Authorization::kubernetes().denied_ttl("1s"))
        })
        .limits(|l| l.max_object_size("1Ki").max_watchers(2))
        .resource(
            Resource::pods()
                .namespaces(["a", "b"])
                .drop(["metadata.managedFields"])
                .filter(r#"object.metadata.labels["x"] == "y""#)
                .index(Index::path("node", "spec.nodeName")),
        )
        .resource(Resource::secrets().namespaces(["a"]));
    let value: Value = serde_yaml::from_str(&config.to_yaml()).unwrap();
    let expected: Value = serde_yaml::from_str(
        r#"
apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: /tmp/s.sock
  socketMode: "0600"
  metrics: 127.0.0.1:9000
  authorization: {mode: kubernetes, deniedTTL: 1s}
limits: {maxObjectSize: 1Ki, maxWatchers: 2}
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [a, b]
  filter: 'object.metadata.labels["x"] == "y"'
  transform: {drop: [metadata.managedFields]}
  indexes: [{name: node, path: spec.nodeName}]
- {name: secrets, apiVersion: v1, kind: Secret, namespaces: [a], allowSecrets: true}
"#,
    )
    .unwrap();
    assert_eq!(value, expected);
}

#[test]
fn authorization_alone_is_the_shorthand_and_on_demand_only_lists_no_resources() {
    let config = SidecarConfig::new()
        .server(|s| s.authorization(Authorization::kubernetes()))
        .on_demand(OnDemand::new().allow("", &["ConfigMap"]).max_caches(1));
    let value: Value = serde_yaml::from_str(&config.to_yaml()).unwrap();
    assert_eq!(value["server"]["authorization"], "kubernetes");
    assert_eq!(value["resources"], Value::Sequence(vec![]));
    assert_eq!(value["onDemand"]["allow"][0]["group"], "");
    assert_eq!(value["onDemand"]["maxCaches"], 1);
}
