//! The clusters the fleet caches from: the default one (informerd's own, or its
//! `--kubeconfig`) and the remote ones of `clusters:`, each with its own Kubernetes client and
//! its reachability, which a probe keeps current (Status and metrics show it).
//!
//! Decision: reachability is a probe of `/version` every [`PROBE_INTERVAL`], not a reading of
//! the scopes' errors: a cluster whose caches are all synced and quiet has no error to report
//! until a watch breaks, and a cluster down at start-up has no scope at all. The scopes keep
//! their own errors and retries; the probe only reports.
//!
//! Decision: a remote cluster that is unreachable at start-up does not stop informerd: its
//! resources are resolved (discovery) in the background, retried with backoff up to
//! [`MAX_DISCOVERY_BACKOFF`], and their streams start when it answers (see
//! [`resolve_in_background`]). A default cluster that cannot be reached still stops
//! start-up, as before: informerd cannot serve anything without it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

use super::FleetError;
use crate::config::{ClusterConfig, Config};

/// How often each cluster's apiserver is asked for `/version`.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// How often while it does not answer. Decision: more often than when it does, because the
/// answer that comes back wakes every scope waiting out its backoff ([`Cluster::healed`]):
/// one small request a second per unreachable cluster buys a recovery within a second.
const UNREACHABLE_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a probe waits for the answer before it counts the cluster unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest wait between two discoveries of a resource whose cluster did not answer.
pub const MAX_DISCOVERY_BACKOFF: Duration = Duration::from_secs(30);

/// Whether a cluster answers, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterState {
    /// The name requests use (`""`: the default cluster).
    pub name: String,
    /// Whether the last probe was answered (true until the first probe says otherwise).
    pub reachable: bool,
    /// Why it is unreachable (the last probe's error); empty while reachable.
    pub message: String,
    /// When `reachable` last changed (or the cluster was added).
    pub since: SystemTime,
}

/// One cluster: its client and its reachability.
pub struct Cluster {
    /// The name requests use (`""`: the default cluster).
    pub name: String,
    /// The client its streams use.
    pub client: Client,
    state: Mutex<ClusterState>,
    /// Bumped each time a probe is answered after one was not.
    healed: tokio::sync::watch::Sender<u64>,
}

impl Cluster {
    fn new(name: String, client: Client) -> Arc<Cluster> {
        let state = ClusterState {
            name: name.clone(),
            reachable: true,
            message: String::new(),
            since: SystemTime::now(),
        };
        Arc::new(Cluster {
            name,
            client,
            state: Mutex::new(state),
            healed: tokio::sync::watch::channel(0).0,
        })
    }

    /// Its reachability now.
    pub fn state(&self) -> ClusterState {
        self.state.lock().expect("cluster state poisoned").clone()
    }

    /// Changes each time the cluster answers again after it did not: the scopes' retries
    /// ([`super::scope`]) end their wait then.
    pub fn healed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.healed.subscribe()
    }

    /// Records the answer of a probe (`Err`: why it is unreachable); logs changes.
    fn record(&self, result: Result<(), String>) {
        let mut state = self.state.lock().expect("cluster state poisoned");
        let reachable = result.is_ok();
        let shown = ClusterConfig::display(&self.name);
        if reachable != state.reachable {
            state.since = SystemTime::now();
            match &result {
                Ok(()) => {
                    tracing::info!(cluster = shown, "cluster reachable again");
                    self.healed.send_modify(|n| *n += 1);
                }
                Err(e) => tracing::warn!(cluster = shown, error = %e,
                    "cluster unreachable; its caches serve what they hold while its watches retry"),
            }
        }
        state.reachable = reachable;
        state.message = result.err().unwrap_or_default();
    }

    /// Asks the apiserver for `/version` every [`PROBE_INTERVAL`] (every
    /// [`UNREACHABLE_PROBE_INTERVAL`] while it does not answer), for ever.
    pub async fn probe(self: Arc<Self>) {
        loop {
            let answer = tokio::time::timeout(PROBE_TIMEOUT, self.client.apiserver_version());
            let result = match answer.await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("the apiserver does not answer: {e}")),
                Err(_) => Err(format!(
                    "the apiserver did not answer /version within {}s",
                    PROBE_TIMEOUT.as_secs()
                )),
            };
            let interval = match result {
                Ok(()) => PROBE_INTERVAL,
                Err(_) => UNREACHABLE_PROBE_INTERVAL,
            };
            self.record(result);
            tokio::time::sleep(interval).await;
        }
    }
}

/// How logs, metrics and refusals name a resource: `name` in the default cluster,
/// `cluster/name` in a remote one (a label value per cache, so that two clusters' resources
/// of the same name are two series).
pub fn qualified(cluster: &str, name: &str) -> String {
    if cluster.is_empty() {
        name.to_string()
    } else {
        format!("{cluster}/{name}")
    }
}

/// The default cluster (first, with `default`'s client) and every cluster of `config`, each
/// with a client built from its kubeconfig file and context. A file that cannot be read, or a
/// context it lacks, stops start-up with an error at `clusters[i].kubeconfig`; a cluster that
/// does not answer does not.
pub async fn connect(default: Client, config: &Config) -> Result<Vec<Arc<Cluster>>, FleetError> {
    let mut clusters = vec![Cluster::new(String::new(), default)];
    for (i, c) in config.clusters.iter().enumerate() {
        let unusable = |e: &dyn std::fmt::Display| {
            config.error_at_path(
                &format!("clusters[{i}].kubeconfig"),
                &format!(
                    "cannot use {} for cluster '{}': {e}",
                    c.kubeconfig.display(),
                    c.name
                ),
            )
        };
        let kubeconfig = Kubeconfig::read_from(&c.kubeconfig).map_err(|e| unusable(&e))?;
        let options = KubeConfigOptions {
            context: c.context.clone(),
            ..KubeConfigOptions::default()
        };
        let client_config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| unusable(&e))?;
        let client = super::client(client_config)?;
        clusters.push(Cluster::new(c.name.clone(), client));
    }
    Ok(clusters)
}

/// Calls `attempt` until it succeeds, waiting `delay`, then twice as long each time up to
/// [`MAX_DISCOVERY_BACKOFF`], between tries; `failed` is told each error.
pub async fn resolve_in_background<T, E, F>(
    mut delay: Duration,
    mut attempt: impl FnMut() -> F,
    mut failed: impl FnMut(&E),
) -> T
where
    F: std::future::Future<Output = Result<T, E>>,
{
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(e) => failed(&e),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_DISCOVERY_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn background_resolution_retries_until_it_succeeds() {
        let tries = std::cell::Cell::new(0);
        let mut errors = Vec::new();
        let value = resolve_in_background(
            Duration::from_millis(1),
            || {
                tries.set(tries.get() + 1);
                let n = tries.get();
                async move {
                    if n < 4 {
                        Err(n)
                    } else {
                        Ok("resolved")
                    }
                }
            },
            |e| errors.push(*e),
        )
        .await;
        assert_eq!(value, "resolved");
        assert_eq!(errors, [1, 2, 3]);
    }

    #[tokio::test]
    async fn only_an_answer_after_a_silence_is_a_heal() {
        let config = kube::Config::new("https://127.0.0.1:1".parse().expect("a URL"));
        let cluster = Cluster::new(String::new(), Client::try_from(config).expect("a client"));
        let mut healed = cluster.healed();
        cluster.record(Ok(()));
        assert!(
            !healed.has_changed().expect("a sender"),
            "answering as before"
        );
        cluster.record(Err("down".into()));
        cluster.record(Err("still down".into()));
        assert!(!healed.has_changed().expect("a sender"), "not answering");
        cluster.record(Ok(()));
        assert!(healed.has_changed().expect("a sender"), "answering again");
        healed.borrow_and_update();
        cluster.record(Ok(()));
        assert!(
            !healed.has_changed().expect("a sender"),
            "answering as before"
        );
    }
}
