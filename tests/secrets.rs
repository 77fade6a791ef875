//! Secrets safe by default, against the real control plane and the real binary: a Secret
//! cached with `allowSecrets` and no `keep` of its values is served without `data`, with the
//! `informerd.io/data-hash` annotation, which changes when (and only when) its data changes; a
//! resource whose `transform.keep` names `data` serves the values, with the same hash.

use std::collections::BTreeMap;

use informerd::proto::{cache_client::CacheClient, GetRequest};
use informerd_testkit::{self as testkit, wait_synced, Resource, SidecarConfig};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const HASH: &str = "informerd.io/data-hash";

fn secret(name: &str, password: &str) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".into(), "db".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "password".into(),
            ByteString(password.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// The Secret `name` as `resource` serves it once it holds `resource_version` or newer.
async fn served(
    api: &mut CacheClient<Channel>,
    resource: &str,
    ns: &str,
    name: &str,
    resource_version: &str,
) -> anyhow::Result<Value> {
    let got = api
        .get(GetRequest {
            resource: resource.into(),
            namespace: ns.into(),
            name: name.into(),
            min_resource_version: resource_version.into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let object = got.object.expect("Get carries the object");
    Ok(serde_json::from_slice(&object.json)?)
}

fn hash_of(object: &Value) -> String {
    object["metadata"]["annotations"][HASH]
        .as_str()
        .unwrap_or_else(|| panic!("no {HASH} annotation: {object}"))
        .to_string()
}

#[tokio::test]
async fn secret_values_are_withheld_unless_kept_and_their_hash_follows_the_data(
) -> anyhow::Result<()> {
    let mut fixture = testkit::Fixture::new("secrets").await?;
    let ns = fixture.ns().to_string();
    let secrets: Api<Secret> = fixture.api();
    let created = secrets
        .create(&PostParams::default(), &secret("db", "hunter2"))
        .await?;
    let config = SidecarConfig::new()
        .resource(Resource::secrets().namespaces([ns.as_str()]))
        .resource(
            Resource::new("kept-secrets", "v1", "Secret")
                .allow_secrets()
                .namespaces([ns.as_str()])
                .keep(["metadata", "type", "data"]),
        );
    fixture.start_sidecar(BIN.as_ref(), &config)?;
    let mut api = fixture.cache().await?;
    wait_synced(&mut api).await?;

    // By default: no values, the labels and the hash.
    let rv = created
        .resource_version()
        .expect("created has a resourceVersion");
    let withheld = served(&mut api, "secrets", &ns, "db", &rv).await?;
    assert!(withheld.get("data").is_none(), "{withheld}");
    assert!(withheld.get("stringData").is_none(), "{withheld}");
    assert_eq!(withheld["metadata"]["labels"]["app"], "db", "{withheld}");
    assert_eq!(withheld["type"], "Opaque", "the rest of the Secret stays");
    let first = hash_of(&withheld);

    // Kept explicitly: the values, and the same hash.
    let kept = served(&mut api, "kept-secrets", &ns, "db", &rv).await?;
    let data = kept["data"]["password"].as_str().expect("kept data");
    assert_eq!(data, "aHVudGVyMg==", "{kept}");
    assert_eq!(hash_of(&kept), first);

    // A label change leaves the hash; a data change changes it.
    let relabelled = secrets
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "db2"}}})),
        )
        .await?;
    let rv = relabelled.resource_version().expect("resourceVersion");
    let after_label = served(&mut api, "secrets", &ns, "db", &rv).await?;
    assert_eq!(after_label["metadata"]["labels"]["app"], "db2");
    assert_eq!(hash_of(&after_label), first, "labels are not the data");
    let changed = secrets
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "correct horse"}})),
        )
        .await?;
    let rv = changed.resource_version().expect("resourceVersion");
    let after_data = served(&mut api, "secrets", &ns, "db", &rv).await?;
    assert!(after_data.get("data").is_none(), "{after_data}");
    let second = hash_of(&after_data);
    assert_ne!(second, first, "the data changed");
    let kept = served(&mut api, "kept-secrets", &ns, "db", &rv).await?;
    assert_eq!(hash_of(&kept), second);
    assert_eq!(kept["data"]["password"], "Y29ycmVjdCBob3JzZQ==");
    Ok(())
}
