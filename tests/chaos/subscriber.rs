//! The subscribers: each watches `pods` through the Rust client for ever, folds the stream into
//! the state it implies, and records every revision that did not grow within an epoch.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use informerd::proto::{watch_request::Start, EventType, ResumeToken, WatchRequest};
use informerd_client as client;

use crate::truth::{Held, State};

/// What one subscriber has seen: its folded state, per epoch, and its checks.
#[derive(Debug, Default)]
pub struct Seen {
    epoch: u64,
    /// The last resume point (SYNCED or a change), for `since`.
    revision: u64,
    /// True once the initial state of the current watch is complete.
    pub synced: bool,
    pub state: State,
    pub events: u64,
    /// Revisions that did not grow within an epoch: must stay empty.
    pub disorder: Vec<String>,
    /// Watches refused with `EpochChanged` (informerd restarted).
    pub epoch_changes: u64,
}

pub struct Subscriber {
    pub seen: Arc<Mutex<Seen>>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Watches `pods` for ever: from the initial state, resuming after errors, relisting (a new
/// watch with the initial state) on `Expired` or `EpochChanged`. A stalled subscriber stops
/// reading while `stall` is set.
pub fn subscribe(socket: String, stall: Option<Arc<AtomicBool>>) -> Subscriber {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let _ = watch_once(&socket, &shared, stall.as_deref()).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    Subscriber { seen, task }
}

/// One Watch call, until its stream ends or fails; the error says how the next one starts.
async fn watch_once(
    socket: &str,
    seen: &Mutex<Seen>,
    stall: Option<&AtomicBool>,
) -> anyhow::Result<()> {
    let start = {
        let s = seen.lock().unwrap();
        if s.synced {
            Start::Since(ResumeToken {
                epoch: s.epoch,
                revision: s.revision,
            })
        } else {
            Start::SendInitialState(true)
        }
    };
    let mut cache = client::connect(socket).await?;
    let request = WatchRequest {
        resource: "pods".into(),
        start: Some(start),
        ..Default::default()
    };
    let mut stream = match cache.watch(request).await {
        Ok(s) => s.into_inner(),
        Err(status) => return Err(relist_if_told(seen, status)),
    };
    if seen.lock().unwrap().synced {
        // A resume: the state folds on.
    } else {
        seen.lock().unwrap().state.clear();
    }
    loop {
        while stall.is_some_and(|s| s.load(Ordering::SeqCst)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        match stream.message().await {
            Ok(Some(event)) => fold(&mut seen.lock().unwrap(), &event),
            Ok(None) => return Ok(()),
            Err(status) => return Err(relist_if_told(seen, status)),
        }
    }
}

/// On `Expired` or `EpochChanged` the next watch starts from the initial state.
fn relist_if_told(seen: &Mutex<Seen>, status: tonic::Status) -> anyhow::Error {
    let reason = client::Reason::of(&status);
    if matches!(
        reason,
        Some(client::Reason::Expired | client::Reason::EpochChanged)
    ) {
        let mut seen = seen.lock().unwrap();
        seen.synced = false;
        seen.epoch_changes += u64::from(reason == Some(client::Reason::EpochChanged));
    }
    anyhow::anyhow!("watch: {status}")
}

fn fold(s: &mut Seen, event: &informerd::proto::WatchEvent) {
    s.events += 1;
    let kind = EventType::try_from(event.r#type).unwrap_or(EventType::Unspecified);
    if event.epoch != s.epoch {
        s.epoch = event.epoch;
        s.revision = 0;
    }
    let resume_point = s.synced || kind == EventType::Synced;
    if resume_point {
        // A change has a revision of its own; a BOOKMARK, or the SYNCED of a new watch's
        // initial state (0 while informerd has stored nothing yet), may repeat the last one.
        let grows = event.revision > s.revision
            || (matches!(kind, EventType::Bookmark | EventType::Synced)
                && event.revision == s.revision);
        if !grows {
            s.disorder.push(format!(
                "{kind:?} at revision {} after {}",
                event.revision, s.revision
            ));
        }
        s.revision = event.revision;
    }
    match (kind, &event.object) {
        (EventType::Synced, _) => s.synced = true,
        (EventType::Added | EventType::Modified, Some(o)) => {
            let key = format!("{}/{}", o.namespace, o.name);
            // Never moved back (a relist served by a lagging apiserver must not undo a newer
            // change). Decision: resourceVersions are compared as numbers here, which only
            // this test may do: they are etcd revisions of the suite's own control plane.
            let number = |rv: &str| rv.parse::<u64>().unwrap_or_default();
            if let Some(held) = s.state.get(&key) {
                if number(&o.resource_version) < number(&held.resource_version) {
                    s.disorder.push(format!(
                        "{kind:?} moved {key} back from resourceVersion {held} to {}",
                        o.resource_version,
                        held = held.resource_version
                    ));
                }
            }
            s.state.insert(key, Held::of_object(o));
        }
        (EventType::Deleted, Some(o)) => {
            s.state.remove(&format!("{}/{}", o.namespace, o.name));
        }
        _ => {}
    }
}
