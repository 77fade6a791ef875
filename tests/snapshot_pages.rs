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
use kube::{api::WatchParams, Api};
use snapshot_support::{change_while_down, token, Setup};

/// More than a page (informerd's pages hold 100 objects), so the list follows a `continue`.
const PODS: usize = 130;

const FALLBACK: &str = "the apiserver refuses streaming lists; using paginated lists";

/// How many times the sidecar's log (all its runs) says it fell back to pages.
fn fallbacks(setup: &Setup) -> usize {
    setup.sidecar.plain_log().matches(FALLBACK).count()
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
    assert_eq!(fallbacks(&setup), 1, "{}", setup.sidecar.plain_log());
    let before = setup.converge().await?;
    assert_eq!(before.len(), PODS);
    assert_eq!(scope.listed, PODS as u64, "{scope:?}");

    // SIGTERM, changes while down, restart: resumed from the snapshot, no list.
    let at = setup.apiserver_now().await?;
    let client_token = token(&setup).await?;
    setup.terminate()?;
    let made = change_while_down(&setup, 0).await?;
    setup.sidecar.restart()?;
    setup.assert_resumed_without_a_list().await?;
    let before = setup
        .assert_exact_changes(client_token, before, &at, &made)
        .await?;

    // A 410 Gone on resume: the relist is in pages again.
    let client_token = token(&setup).await?;
    let made = setup.restart_into_a_410(1).await?;
    setup.assert_relisted(client_token, before, &made).await?;
    let log = setup.sidecar.plain_log();
    assert_eq!(fallbacks(&setup), 2, "the relist is in pages: {log}");
    Ok(())
}
