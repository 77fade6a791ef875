//! Warm restarts of a scope listed with paginated lists, through the real binary, on a
//! kube-apiserver that refuses streaming lists (`--feature-gates=WatchList=false`; the gate is
//! still Beta, not locked, in Kubernetes 1.36): a cold start lists in pages (more objects than
//! one page holds) and syncs; after SIGTERM a restart resumes its watch from the snapshot
//! without a list, and a client resumes with its token and gets exactly what changed
//! meanwhile; a 410 Gone on resume lists again in pages and emits DELETED for what vanished.
//!
//! Decision: one test, in steps, on one private control plane whose only kube-apiserver is
//! restarted with the gate off (so its kubeconfig serves informerd and the test alike, and the
//! 410 step restarts it as it runs, gate included): a private control plane costs tens of
//! seconds and a gigabyte, and each step starts from the state the previous one left.

mod snapshot_support;

use informerd_testkit::PrivateControlPlane;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{ListParams, WatchParams},
    Api,
};
use snapshot_support::{apiserver_changes, change_while_down, plain_log, resume, token, Setup};

/// More than a page (informerd's pages hold 100 objects), so the list follows a `continue`.
const PODS: usize = 130;

const FALLBACK: &str = "the apiserver refuses streaming lists; using paginated lists";

/// How many times the sidecar's log (all its runs) says it fell back to pages.
fn fallbacks(setup: &Setup) -> usize {
    plain_log(&setup.sidecar).matches(FALLBACK).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paginated_scopes_resume_from_the_snapshot_and_relist_in_pages_after_a_410(
) -> anyhow::Result<()> {
    let private = tokio::task::block_in_place(PrivateControlPlane::start)?;
    private
        .restart_apiserver_with(&["--feature-gates=WatchList=false"], async || Ok(()))
        .await?;
    // The apiserver really refuses a streaming list.
    let client = private.control_plane().client().await?;
    let streaming = WatchParams {
        send_initial_events: true,
        ..WatchParams::default()
    };
    match Api::<Pod>::all(client).watch(&streaming, "0").await {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("sendInitialEvents"), "{s:?}");
        }
        Err(e) => anyhow::bail!("not a refusal: {e}"),
        Ok(_) => anyhow::bail!("the apiserver accepted a streaming list"),
    }

    // Cold start: pages, all of them.
    let mut setup = Setup::on(Some(private), "pages", PODS).await?;
    let scope = setup.wait_synced().await?;
    assert_eq!(fallbacks(&setup), 1, "{}", plain_log(&setup.sidecar));
    let before = setup.converge().await?;
    assert_eq!(before.len(), PODS);
    assert_eq!(scope.listed, PODS as u64, "{scope:?}");

    // SIGTERM, changes while down, restart: resumed from the snapshot, no list.
    let at = setup.pods().list(&ListParams::default()).await?.metadata;
    let at = at.resource_version.unwrap_or_default();
    let client_token = token(&setup).await?;
    setup.terminate()?;
    let made = change_while_down(&setup, 0).await?;
    setup.sidecar.restart()?;
    let scope = setup.wait_synced().await?;
    let log = plain_log(&setup.sidecar);
    assert_eq!(scope.state, "Synced");
    assert_eq!(
        scope.listed, 0,
        "no list after a warm restart: {scope:?}\n{log}"
    );
    assert_eq!(scope.relists, 0, "{scope:?}");
    assert!(log.contains("watch resumed from the snapshot"), "{log}");
    let truth = setup.converge().await?;
    let changes = resume(&setup, client_token, before.clone(), &truth).await?;
    let expected = apiserver_changes(&setup, &at, before, &truth).await?;
    assert!(made.iter().all(|c| expected.contains(c)), "{expected:?}");
    assert_eq!(
        changes, expected,
        "exactly the changes made while informerd was down"
    );

    // SIGTERM, changes, etcd compacted past the snapshot and the apiserver restarted (a new
    // watch cache): the resume gets 410 Gone, and the relist is in pages again.
    let before = truth;
    let client_token = token(&setup).await?;
    setup.terminate()?;
    let expected = change_while_down(&setup, 1).await?;
    let private = setup.private.as_ref().expect("a private control plane");
    let compact = async || private.control_plane().advance_and_compact_etcd().await;
    private
        .kill_and_restart_apiserver(async || compact().await.map(drop))
        .await?;
    setup.sidecar.restart()?;
    let scope = setup.wait_synced().await?;
    let log = plain_log(&setup.sidecar);
    assert!(log.contains("too old resource version"), "{log}");
    assert_eq!(fallbacks(&setup), 2, "the relist is in pages: {log}");
    assert!(scope.relists >= 1, "a relist after 410 Gone: {scope:?}");
    let truth = setup.converge().await?;
    assert_eq!(scope.listed, truth.len() as u64, "{scope:?}");
    let changes = resume(&setup, client_token, before, &truth).await?;
    assert_eq!(
        changes, expected,
        "DELETED for what vanished, and the changes"
    );
    setup.cleanup().await;
    Ok(())
}
