//! The watcher of a [`Api::delta_resume`] handle over a cold sidecar restart (a new epoch, as
//! when a client moves to another replica): it resumes by delta, so the stream carries the
//! changes made meanwhile (an `Apply` of the changed and the created pod, a `Delete` of the
//! deleted one) and no new `Init` cycle of every pod; a reflector over it then holds what the
//! apiserver holds. Without the option the same restart starts a new `Init` cycle
//! (`sidecar_restart.rs`), and so does a sidecar whose `limits.maxRequestSize` is below the
//! held entries: the watcher falls back to a full relist rather than asking again.

mod common;

use std::collections::BTreeSet;
use std::pin::pin;

use common::{apply_pod, delete_pod, delta_changes, labels, Fixture};
use futures::TryStreamExt;
use informerd_client::{watcher, Api};
use informerd_testkit::{create_pods, wait_synced};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{Config, Event};
use kube::ResourceExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_resume_watcher_yields_only_the_changes_after_a_cold_restart() -> anyhow::Result<()>
{
    let mut fx = Fixture::new("kubers-delta").await?;
    let mut last = String::new();
    for name in ["a", "b", "c", "d"] {
        last = apply_pod(fx.kube(), fx.ns(), name, &labels(&[("v", "1")])).await?;
    }
    let pods: Api<Pod> = Api::namespaced(fx.cache().await?, "pods", fx.ns()).delta_resume();
    // The sidecar holds every pod before the watch starts (its initial state is the cache's).
    pods.get_at_least("d", &last).await?;
    let mut events = pin!(watcher(pods, Config::default()));
    let initial = initial_cycle(&mut events).await?;
    assert_eq!(initial.len(), 4);

    // A cold restart (no snapshot): a new epoch, the watcher's token refused.
    fx.sidecar_mut().terminate()?;
    delete_pod(fx.kube(), fx.ns(), "a").await?;
    apply_pod(fx.kube(), fx.ns(), "new", &labels(&[])).await?;
    apply_pod(fx.kube(), fx.ns(), "d", &labels(&[("v", "2")])).await?;
    fx.sidecar_mut().restart()?;
    wait_synced(&mut fx.cache().await?).await?;

    let after = delta_changes(&mut events, 3).await?;
    assert_eq!(
        after,
        BTreeSet::from([
            "apply d".to_string(),
            "apply new".to_string(),
            "delete a".to_string()
        ]),
        "the changes, and nothing of the unchanged pods b and c"
    );
    Ok(())
}

/// Reads the initial cycle to its `InitDone`; the names it applied.
async fn initial_cycle<S>(events: &mut std::pin::Pin<&mut S>) -> anyhow::Result<BTreeSet<String>>
where
    S: futures::Stream<Item = Result<Event<Pod>, kube::runtime::watcher::Error>>,
{
    let mut names = BTreeSet::new();
    loop {
        match events.try_next().await? {
            Some(Event::Init) => {}
            Some(Event::InitApply(p)) => {
                names.insert(p.name_any());
            }
            Some(Event::InitDone) => return Ok(names),
            other => panic!("before InitDone: {other:?}"),
        }
    }
}

/// Held entries over the sidecar's `limits.maxRequestSize` (70 pods: 1,120 bytes, over 1 KiB):
/// the delta resume is refused (`RequestTooLarge`) and the watcher relists in full, with a new
/// `Init` cycle that holds every pod, instead of retrying the delta for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_entries_over_the_request_limit_fall_back_to_a_full_relist() -> anyhow::Result<()> {
    let mut fx = Fixture::with("kubers-delta-limit", |c| {
        c.limits(|l| l.max_request_size("1Ki"))
    })
    .await?;
    let created = create_pods(fx.kube(), fx.ns(), 70, &[("app", "delta")], false).await?;
    let pods: Api<Pod> = Api::namespaced(fx.cache().await?, "pods", fx.ns()).delta_resume();
    let newest = created
        .iter()
        .max_by_key(|p| {
            p.resource_version()
                .unwrap_or_default()
                .parse::<u64>()
                .unwrap_or(0)
        })
        .expect("70 pods");
    pods.get_at_least(
        &newest.name_any(),
        &newest.resource_version().unwrap_or_default(),
    )
    .await?;
    let mut events = pin!(watcher(pods, Config::default()));
    assert_eq!(initial_cycle(&mut events).await?.len(), 70);

    fx.sidecar_mut().terminate()?;
    delete_pod(fx.kube(), fx.ns(), "p0").await?;
    fx.sidecar_mut().restart()?;
    wait_synced(&mut fx.cache().await?).await?;
    let relisted = initial_cycle(&mut events).await?;
    assert_eq!(relisted.len(), 69, "a full relist, without the deleted pod");
    assert!(!relisted.contains("p0"));
    Ok(())
}
