//! A storm client: what one controller beside the sidecar does across a reconnect storm. It
//! holds its own view of the pods (key `namespace/name` → resourceVersion), kept by a Watch
//! (initial state, then changes) or by WatchKeys (each key read as a controller's reconcile
//! reads it: from the object the key carries, `send_objects`, or by a Get of each key), and
//! reconnects as a client does: with its resume token, falling back to a new initial state
//! when the sidecar says `Expired` or `EpochChanged`.
//!
//! Shared by `tests/storm.rs` (50 clients, checked against the apiserver) and
//! `benches/storm.rs` (300 clients, timed), so both storms are made of the same clients.
//!
//! The storm's conductor holds a [`Control`]: closing its gate keeps every client from
//! reconnecting, [`Control::cut`] drops every client's connection at once, and opening the
//! gate lets them all reconnect in the same instant (the worst case of a storm). Each client
//! publishes a [`Progress`]: its view, how far it is from a target view, and its reconnects.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use informerd_client::keys::watch_keys;
use informerd_client::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, GetRequest, KeyEventType,
    KeysSubscription, ResumeToken, WatchRequest,
};
use informerd_client::Reason;
use tokio::sync::watch;
use tonic::transport::Channel;
use tonic::{Code, Status};

/// `namespace/name` → resourceVersion.
pub type View = HashMap<String, String>;

/// How a client follows the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Watch with the initial state, resumed with the token of its last event.
    Watch,
    /// WatchKeys, resumed with the last token of its events; each key read from the object it
    /// carries, or by a Get when [`Spec::get_each`] is set.
    Keys,
}

/// What one client follows, and where.
#[derive(Debug, Clone)]
pub struct Spec {
    pub kind: Kind,
    /// The sidecar's socket.
    pub socket: String,
    /// The namespace watched; empty for every namespace the sidecar caches.
    pub namespace: String,
    /// WatchKeys: read each key by a Get instead of from the object the key carries.
    pub get_each: bool,
}

/// What a client has done and holds, read by the conductor.
#[derive(Debug, Default)]
pub struct Progress {
    pub view: View,
    /// The view it must reach, when the conductor has set one.
    target: Option<Arc<View>>,
    /// Keys whose value in `view` differs from `target`'s (absent on one side included).
    wrong: usize,
    /// When the view last became equal to the target (None while it differs).
    pub current_at: Option<Instant>,
    /// Sessions started (the first one included).
    pub sessions: u64,
    /// Times it started again from nothing: a Watch's initial state, a WatchKeys resync.
    pub relists: u64,
    /// Why the last session ended.
    pub last_end: String,
    /// It holds a resume token (a WatchKeys stream has none until a resync is acknowledged).
    pub resumable: bool,
    /// The revision of its token (0 without one).
    pub token_revision: u64,
}

impl Progress {
    /// Sets the view to reach; `current_at` restarts from now if it is reached already.
    pub fn set_target(&mut self, target: Arc<View>) {
        self.wrong = differences(&self.view, &target);
        self.current_at = (self.wrong == 0).then(Instant::now);
        self.target = Some(target);
    }

    pub fn set(&mut self, key: String, rv: String) {
        let before = self.matches(&key, self.view.get(&key));
        let after = self.matches(&key, Some(&rv));
        self.view.insert(key, rv);
        self.count(before, after);
    }

    pub fn remove(&mut self, key: &str) {
        let before = self.matches(key, self.view.get(key));
        let after = self.matches(key, None);
        self.view.remove(key);
        self.count(before, after);
    }

    /// A new view at once (a Watch's initial state).
    fn replace(&mut self, view: View) {
        self.view = view;
        if let Some(target) = &self.target {
            self.wrong = differences(&self.view, target);
            self.current_at = (self.wrong == 0).then(Instant::now);
        }
    }

    fn matches(&self, key: &str, value: Option<&String>) -> bool {
        match &self.target {
            Some(t) => t.get(key) == value,
            None => true,
        }
    }

    fn count(&mut self, before: bool, after: bool) {
        if self.target.is_none() || before == after {
            return;
        }
        if after {
            self.wrong -= 1;
            if self.wrong == 0 {
                self.current_at = Some(Instant::now());
            }
        } else {
            self.wrong += 1;
            self.current_at = None;
        }
    }
}

/// Keys whose values differ between `a` and `b`.
fn differences(a: &View, b: &View) -> usize {
    let changed = a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).count();
    changed + b.keys().filter(|k| !a.contains_key(*k)).count()
}

/// The conductor's hold on every client.
pub struct Control {
    gate: watch::Sender<bool>,
    cuts: watch::Sender<u64>,
}

/// A client's side of [`Control`].
#[derive(Clone)]
pub struct Signals {
    gate: watch::Receiver<bool>,
    cuts: watch::Receiver<u64>,
}

impl Control {
    /// A control with its gate open.
    pub fn new() -> (Control, Signals) {
        let (gate, gate_rx) = watch::channel(true);
        let (cuts, cuts_rx) = watch::channel(0);
        let signals = Signals {
            gate: gate_rx,
            cuts: cuts_rx,
        };
        (Control { gate, cuts }, signals)
    }

    /// Clients whose session ends wait until the gate opens again.
    pub fn close_gate(&self) {
        self.gate.send_replace(false);
    }

    pub fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    /// Every client drops its connection now (a network cut between clients and sidecar).
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }
}

/// Starts a client; it runs until the runtime ends. Its progress is shared with the caller.
pub fn spawn(spec: Spec, signals: Signals) -> Arc<Mutex<Progress>> {
    let progress = Arc::new(Mutex::new(Progress::default()));
    tokio::spawn(run(spec, signals, progress.clone()));
    progress
}

async fn run(spec: Spec, mut signals: Signals, progress: Arc<Mutex<Progress>>) {
    let mut token: Option<ResumeToken> = None;
    loop {
        // Decision: wait_for returns at once while the gate is open; an error means the
        // conductor is gone, and so is the client.
        if signals.gate.wait_for(|open| *open).await.is_err() {
            return;
        }
        let cut = *signals.cuts.borrow_and_update();
        let session = session(&spec, &mut token, &progress);
        let end = tokio::select! {
            end = session => end,
            _ = signals.cuts.wait_for(|n| *n != cut) => Err(Status::cancelled("cut by the storm")),
        };
        let why = match end {
            Ok(()) => "the stream ended".to_owned(),
            Err(status) => {
                if matches!(
                    Reason::of(&status),
                    Some(Reason::Expired | Reason::EpochChanged)
                ) {
                    token = None;
                }
                format!("{:?}: {}", status.code(), status.message())
            }
        };
        progress.lock().unwrap().last_end = why;
        // A sidecar that is restarting refuses connections for a while: retry soon, with
        // jitter, as a client's backoff does.
        let pause = 50 + rand::random::<u64>() % 100;
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// One connection and one stream, until it ends.
async fn session(
    spec: &Spec,
    token: &mut Option<ResumeToken>,
    progress: &Mutex<Progress>,
) -> Result<(), Status> {
    let mut api = informerd_client::connect(&spec.socket)
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    progress.lock().unwrap().sessions += 1;
    match spec.kind {
        Kind::Watch => watch_session(&mut api, spec, token, progress).await,
        Kind::Keys => keys_session(&mut api, spec, token, progress).await,
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

async fn watch_session(
    api: &mut CacheClient<Channel>,
    spec: &Spec,
    token: &mut Option<ResumeToken>,
    progress: &Mutex<Progress>,
) -> Result<(), Status> {
    let start = match *token {
        Some(t) => Start::Since(t),
        None => Start::SendInitialState(true),
    };
    let request = WatchRequest {
        resource: "pods".into(),
        namespace: spec.namespace.clone(),
        start: Some(start),
        bookmark_interval_seconds: 1,
        ..Default::default()
    };
    let mut events = api.watch(request).await?.into_inner();
    // The initial state, until SYNCED; None when resuming.
    let mut initial = token.is_none().then(View::new);
    if initial.is_some() {
        progress.lock().unwrap().relists += 1;
    }
    while let Some(event) = events.message().await? {
        let kind = event.r#type();
        let here = ResumeToken {
            epoch: event.epoch,
            revision: event.revision,
        };
        if kind == EventType::Synced {
            let view = initial.take().unwrap_or_default();
            let mut p = progress.lock().unwrap();
            p.replace(view);
            p.resumable = true;
            p.token_revision = here.revision;
            *token = Some(here);
            continue;
        }
        if let (Some(view), Some(o)) = (initial.as_mut(), &event.object) {
            view.insert(key(&o.namespace, &o.name), o.resource_version.clone());
            continue;
        }
        if let Some(o) = &event.object {
            let mut p = progress.lock().unwrap();
            match kind {
                EventType::Deleted => p.remove(&key(&o.namespace, &o.name)),
                _ => p.set(key(&o.namespace, &o.name), o.resource_version.clone()),
            }
        }
        *token = Some(here);
        progress.lock().unwrap().token_revision = here.revision;
    }
    Ok(())
}

async fn keys_session(
    api: &mut CacheClient<Channel>,
    spec: &Spec,
    token: &mut Option<ResumeToken>,
    progress: &Mutex<Progress>,
) -> Result<(), Status> {
    let subscription = KeysSubscription {
        resource: "pods".into(),
        namespace: spec.namespace.clone(),
        since: *token,
        send_objects: !spec.get_each,
        // Only the identity fields travel, as for the Get below.
        fields: match spec.get_each {
            true => Vec::new(),
            false => IDENTITY.iter().map(|f| f.to_string()).collect(),
        },
        ..Default::default()
    };
    let (mut events, acker) = watch_keys(api, subscription).await?;
    // The keys sent since RESYNC_START, while a resync runs.
    let mut resync: Option<HashSet<String>> = None;
    while let Some(event) = events.message().await? {
        match event.r#type() {
            KeyEventType::ResyncStart => {
                resync = Some(HashSet::new());
                progress.lock().unwrap().relists += 1;
                // The old token is no longer a resume point: a resync's own arrive once its
                // keys are acknowledged.
                *token = None;
            }
            KeyEventType::ResyncEnd => {
                if let Some(sent) = resync.take() {
                    let mut p = progress.lock().unwrap();
                    let gone: Vec<String> = p
                        .view
                        .keys()
                        .filter(|k| !sent.contains(*k))
                        .cloned()
                        .collect();
                    gone.iter().for_each(|k| p.remove(k));
                }
            }
            KeyEventType::Key => {
                let Some(k) = &event.key else { continue };
                let name = key(&k.namespace, &k.name);
                let rv = if event.deleted {
                    None
                } else if spec.get_each {
                    get(api, &k.namespace, &k.name).await?
                } else {
                    // None: the object left the cache after the key was marked; its
                    // deletion follows as a key.
                    event.object.as_ref().map(|o| o.resource_version.clone())
                };
                {
                    let mut p = progress.lock().unwrap();
                    match rv {
                        Some(rv) => p.set(name.clone(), rv),
                        None => p.remove(&name),
                    }
                }
                if let Some(sent) = resync.as_mut() {
                    sent.insert(name);
                }
                acker.ack_event(&event);
            }
            _ => {}
        }
        if let Some(t) = event.token {
            *token = Some(t);
        }
        let mut p = progress.lock().unwrap();
        p.resumable = token.is_some();
        p.token_revision = token.map_or(0, |t| t.revision);
    }
    Ok(())
}

/// The fields a client reads of an object: the identity fields (always sent) alone.
const IDENTITY: [&str; 1] = ["metadata.name"];

/// The resourceVersion the sidecar holds for a pod (None: not found), read as a controller's
/// reconcile reads it; only the identity fields travel.
async fn get(
    api: &mut CacheClient<Channel>,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, Status> {
    let request = GetRequest {
        resource: "pods".into(),
        namespace: namespace.into(),
        name: name.into(),
        fields: IDENTITY.iter().map(|f| f.to_string()).collect(),
        ..Default::default()
    };
    match api.get(request).await {
        Ok(r) => Ok(r.into_inner().object.map(|o| o.resource_version)),
        Err(s) if s.code() == Code::NotFound => Ok(None),
        Err(s) => Err(s),
    }
}
