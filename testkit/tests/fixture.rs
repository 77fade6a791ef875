//! The promise the fixture makes every integration test: its namespaces are deleted when it is
//! dropped, also when the test panicked on the way, on a multi-thread or a current-thread
//! runtime (whose only thread is the one dropping it).

use informerd_testkit::Fixture;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

/// Whether the namespace is gone or being deleted (the fixture does not wait for the end).
async fn deleted(client: &kube::Client, name: &str) -> bool {
    match Api::<Namespace>::all(client.clone()).get_opt(name).await {
        Ok(None) => true,
        Ok(Some(ns)) => ns.metadata.deletion_timestamp.is_some(),
        Err(e) => panic!("get namespace {name}: {e}"),
    }
}

#[tokio::test]
async fn a_panicking_test_still_deletes_its_namespaces() {
    let (tx, rx) = std::sync::mpsc::channel();
    let failed = tokio::spawn(async move {
        let mut fixture = Fixture::new("testkit-panic").await.expect("fixture");
        fixture
            .add_namespace("testkit-panic-b")
            .await
            .expect("second");
        tx.send(fixture.namespaces().to_vec()).expect("send");
        panic!("a failed assertion");
    })
    .await;
    assert!(failed.is_err_and(|e| e.is_panic()));
    let names = rx.recv().expect("the namespaces were made");
    let client = informerd_testkit::ControlPlane::get()
        .client()
        .await
        .expect("client");
    for name in &names {
        assert!(deleted(&client, name).await, "{name} was not deleted");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_fixture_dropped_on_a_current_thread_runtime_deletes_its_namespace() {
    let fixture = Fixture::new("testkit-drop").await.expect("fixture");
    let name = fixture.ns().to_owned();
    let client = fixture.kube().clone();
    drop(fixture);
    assert!(deleted(&client, &name).await, "{name} was not deleted");
}
