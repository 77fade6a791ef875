//! `informerd serve`: the sidecar itself. Wires config → fleet → filter → transform → store →
//! api, logs once every scope has synced, and stops on Ctrl-C or SIGTERM.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use informerd::{
    api::{Api, ApiError},
    config,
    fleet::{Fleet, FleetError},
    metrics,
    snapshot::{self, Snapshotter},
};
use kube::config::{InferConfigError, KubeconfigError};

/// Why the sidecar did not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The file given with --kubeconfig cannot be read or used.
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: KubeconfigError,
    },
    /// Neither the in-cluster service account nor $KUBECONFIG gives a configuration.
    #[error(transparent)]
    Infer(#[from] InferConfigError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    Api(#[from] ApiError),
    /// `server.metrics` cannot be bound: `FILE:LINE:COLUMN: server.metrics: ...`.
    #[error(transparent)]
    Metrics(#[from] config::ConfigError),
}

/// Runs the sidecar with the configuration at `config` until it is told to stop; an invalid
/// configuration or a failed start is printed, with the exit status 1.
pub fn serve(config: PathBuf, kubeconfig: Option<PathBuf>) -> ExitCode {
    init_tracing();
    let mut cfg = match config::load(&config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let container = config::container::memory_limit();
    cfg.limits = cfg.limits.under_container(container.as_ref());
    if let (Some(c), Some(max)) = (
        &container,
        cfg.limits.container_memory.and(cfg.limits.max_memory),
    ) {
        tracing::info!(
            container_memory_limit = c.limit,
            from = %c.file.display(),
            max_memory = max,
            "limits.maxMemory is not set: new List, Watch and Ensure calls are refused above \
             this share of the container's memory limit"
        );
    }
    if let Some(warning) = container
        .as_ref()
        .and_then(|c| config::container::headroom_warning(&cfg, c.limit))
    {
        tracing::warn!("{warning}");
    }
    for warning in cfg.warnings() {
        tracing::warn!("{warning}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(cfg, kubeconfig)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

pub(super) fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// The sidecar, from start to shutdown.
async fn run(cfg: config::Config, kubeconfig: Option<PathBuf>) -> Result<(), ServeError> {
    // First: a metrics port that is taken stops start-up before anything starts.
    let metrics_port = bind_metrics(&cfg).await?;
    let client_config = match kubeconfig {
        Some(path) => {
            let unusable = |source| ServeError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = kube::config::Kubeconfig::read_from(&path).map_err(unusable)?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(unusable)?
        }
        None => kube::Config::infer().await?,
    };
    let cluster = snapshot::cluster_fingerprint(&client_config);
    let client = informerd::fleet::client(client_config)?;
    let fleet = Arc::new(match &cfg.snapshot {
        Some(s) => {
            Fleet::start_warm(client.clone(), &cfg, |rc, options| {
                snapshot::restore(s, &cluster, rc, options)
            })
            .await?
        }
        None => Fleet::start(client.clone(), &cfg).await?,
    });
    let snapshots = cfg
        .snapshot
        .clone()
        .map(|s| Arc::new(Snapshotter::new(s, cluster, &cfg, &fleet)));
    let periodic = snapshots.as_ref().map(Snapshotter::spawn_periodic);
    let api = Api::new(fleet.clone(), &cfg)
        .with_on_demand(&cfg)
        .with_authorization(client, &cfg.server.authorization);
    tokio::spawn(announce_sync(fleet.clone()));
    let probes = metrics_port.map(|listener| {
        let mut registry = metrics::registry();
        informerd::fleet::metrics::register(&fleet, &mut registry);
        api.register_metrics(&mut registry);
        tokio::spawn(metrics::serve(listener, registry, fleet.clone()))
    });
    // Decision: at SIGTERM the ingest stops before the API does, so that the watches' last
    // words (`api/watch/watcher.rs`) reach the revision the snapshot below holds, and a warm
    // restart resumes every client that read to the end.
    let ingest = fleet.clone();
    let shutdown = async move {
        shutdown_signal().await;
        ingest.stop().await;
    };
    let served = api.serve(&cfg.server, shutdown).await;
    if let Some(probes) = probes {
        probes.abort();
    }
    served?;
    tracing::info!("shutting down");
    fleet.stop().await;
    if let (Some(snapshots), Some(periodic)) = (snapshots, periodic) {
        periodic.abort();
        // After the streams stopped: nothing changes the caches any more (a clean snapshot).
        snapshots.write_all(true).await;
    }
    Ok(())
}

/// Binds `server.metrics` of `cfg`, if it is set; a port that cannot be bound is an error that
/// points at the field.
async fn bind_metrics(
    cfg: &config::Config,
) -> Result<Option<tokio::net::TcpListener>, config::ConfigError> {
    let Some(addr) = cfg.server.metrics else {
        return Ok(None);
    };
    metrics::bind(addr)
        .await
        .map(Some)
        .map_err(|e| cfg.error_at_path("server.metrics", &e.to_string()))
}

/// Logs once when every scope has synced, with what the caches hold.
async fn announce_sync(fleet: Arc<Fleet>) {
    fleet.synced().wait_synced().await;
    for c in fleet.caches() {
        let stats = c.store.stats();
        tracing::info!(resource = %c.name, objects = stats.objects,
            encoded_bytes_per_object = stats.encoded_bytes / stats.objects.max(1),
            "synced");
    }
    tracing::info!(
        allocated_mib = informerd::vocab::memory::allocated_bytes() >> 20,
        "every scope synced"
    );
}

/// Ctrl-C or SIGTERM (what the kubelet sends).
pub(super) async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_port_stops_start_up_pointing_at_the_field() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = taken.local_addr().expect("bound");
        let text = format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  metrics: {addr}\nresources:\n- apiVersion: v1\n  kind: Pod\n"
        );
        let config = config::parse("informerd.yaml", &text).expect("valid");
        let err = bind_metrics(&config)
            .await
            .expect_err("the port is taken")
            .to_string();
        assert!(
            err.starts_with(&format!(
                "informerd.yaml:4:12: server.metrics: cannot listen on {addr}"
            )),
            "{err}"
        );
        assert!(
            err.contains("another process listens on this port: stop it, or choose another port"),
            "{err}"
        );
        drop(taken);
        let listener = bind_metrics(&config)
            .await
            .expect("free again")
            .expect("configured");
        assert_eq!(listener.local_addr().expect("bound"), addr);
    }
}
