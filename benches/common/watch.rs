//! Following watches of the sidecar: watchers on connections of their own, what each received
//! and how its stream ended. Each benchmark checks the deliveries its own way (`check_watcher`
//! in each).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use informerd::proto::{cache_client::CacheClient, EventType, WatchEvent, WatchRequest};
use informerd_client as client;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::{transport::Channel, Streaming};

use super::sidecar::status;

/// The label each benchmark write sets: the write's sequence number.
pub const SEQ_LABEL: &str = "bench-seq";

/// One received event (bookmarks are not kept).
#[derive(Debug, Clone, Copy)]
pub struct Delivery {
    pub revision: u64,
    /// The object's resourceVersion (0 when it is not a number).
    pub rv: u64,
    /// The value of [`SEQ_LABEL`], when it is a number.
    pub seq: Option<u64>,
    pub kind: i32,
    pub at: Instant,
}

#[derive(Debug)]
pub enum End {
    /// Reached the revision of the last write.
    Reached,
    /// The stream ended without a status.
    Closed,
    /// The stream ended with a status.
    Failed(tonic::Status),
    /// The benchmark stopped waiting (it dropped the target's sender).
    GaveUp,
}

impl End {
    /// What is wrong with a watcher that ended so, if anything: it was to reach `target`, got
    /// as far as `last`, and the benchmark waited `waited` after the last write.
    pub fn problem(&self, target: u64, last: u64, waited: Duration) -> Option<String> {
        match self {
            End::Reached => None,
            End::Closed => Some("the stream closed early".into()),
            End::Failed(s) => Some(format!("the stream ended with {}", status_text(s))),
            End::GaveUp => Some(format!(
                "did not reach revision {target} within {} s of the last write (at {last})",
                waited.as_secs()
            )),
        }
    }
}

/// The report's lines on the watchers that went wrong, `bad` (index, what went wrong): a blank
/// line, `heading`, then one line per watcher for the first ten, and how many more there are.
/// None when every watcher was right.
pub fn discrepancies(heading: &str, bad: &[(usize, String)]) -> Vec<String> {
    if bad.is_empty() {
        return Vec::new();
    }
    let mut out = vec![String::new(), heading.to_string()];
    for (i, problems) in bad.iter().take(10) {
        out.push(format!("- watcher {i}: {problems}"));
    }
    if bad.len() > 10 {
        out.push(format!("- ... and {} more", bad.len() - 10));
    }
    out
}

/// A gRPC status as the reports print it: code, informerd's reason, message.
pub fn status_text(s: &tonic::Status) -> String {
    format!(
        "{:?} ({}): {}",
        s.code(),
        client::reason(s).unwrap_or("-"),
        s.message()
    )
}

pub struct Followed {
    pub deliveries: Vec<Delivery>,
    pub end: End,
    /// Kept open until the benchmark lets go of it (the sidecar counts open watches).
    pub stream: Streaming<WatchEvent>,
}

pub fn seq_of(labels: &BTreeMap<String, String>) -> Option<u64> {
    labels.get(SEQ_LABEL).and_then(|v| v.parse().ok())
}

/// Reads a watch until it reaches the target revision (sent once the writes are over).
pub async fn follow(
    mut stream: Streaming<WatchEvent>,
    mut target: watch::Receiver<u64>,
    capacity: usize,
) -> Followed {
    let mut deliveries = Vec::with_capacity(capacity);
    let mut last = 0;
    let end = loop {
        if last >= *target.borrow() {
            break End::Reached;
        }
        tokio::select! {
            m = stream.message() => match m {
                Ok(Some(e)) => {
                    let at = Instant::now();
                    if e.r#type == EventType::Bookmark as i32 {
                        continue;
                    }
                    let (rv, seq) = e
                        .object
                        .as_ref()
                        .map(|o| (o.resource_version.parse().unwrap_or(0), seq_of(&o.labels)))
                        .unwrap_or((0, None));
                    deliveries.push(Delivery { revision: e.revision, rv, seq, kind: e.r#type, at });
                    last = e.revision;
                }
                Ok(None) => break End::Closed,
                Err(s) => break End::Failed(s),
            },
            changed = target.changed() => if changed.is_err() { break End::GaveUp },
        }
    };
    Followed {
        deliveries,
        end,
        stream,
    }
}

/// A watch followed by a task of its own, with the connection it came on.
pub type Follower = JoinHandle<(Followed, CacheClient<Channel>)>;

/// Opens `n` watches of `request`, each on a connection of its own to the sidecar at `socket`,
/// and follows each (see [`follow`]) until the revision `target` says; each expects about
/// `events` events.
pub async fn spawn_followers(
    socket: &str,
    n: usize,
    request: &WatchRequest,
    target: &watch::Receiver<u64>,
    events: u64,
) -> anyhow::Result<Vec<Follower>> {
    // Room for a few events besides the expected ones.
    let capacity = events as usize + 16;
    let mut followers = Vec::with_capacity(n);
    for _ in 0..n {
        let mut api = client::connect(socket).await?;
        let stream = api.watch(request.clone()).await?.into_inner();
        let target = target.clone();
        followers.push(tokio::spawn(async move {
            let followed = follow(stream, target, capacity).await;
            (followed, api)
        }));
    }
    Ok(followers)
}

/// Waits for every follower to reach the target; after `timeout` gives up on those that have
/// not (they end with [`End::GaveUp`]). Returns what they followed, their connections still
/// open, and when the last was done.
pub async fn join_followers(
    followers: Vec<Follower>,
    target: watch::Sender<u64>,
    timeout: Duration,
) -> anyhow::Result<(Vec<(Followed, CacheClient<Channel>)>, Instant)> {
    let mut all = futures::future::join_all(followers);
    let joined = tokio::select! {
        r = &mut all => r,
        _ = tokio::time::sleep(timeout) => {
            drop(target);
            all.await
        }
    };
    let done = Instant::now();
    let followed = joined
        .into_iter()
        .map(|j| j.context("a watcher task panicked"))
        .collect::<anyhow::Result<_>>()?;
    Ok((followed, done))
}

/// Waits (60 s at most) until the sidecar counts `want` open watches of `resource`.
pub async fn wait_watchers(
    api: &mut CacheClient<Channel>,
    resource: &str,
    want: u64,
) -> anyhow::Result<()> {
    let wait = async {
        loop {
            let st = status(api, resource).await?;
            if st.resources.first().map_or(0, |r| r.watchers) == want {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .map_err(|_| anyhow!("the sidecar did not count {want} watches within 60 s"))?
}
