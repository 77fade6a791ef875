//! The informerd binary: `serve` wires config → fleet → filter → transform → store → api;
//! `get`, `list`, `watch` and `status` are a client of a running sidecar.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use std::sync::Arc;

use informerd::{api::Api, config, fleet::Fleet};

mod cli;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "informerd",
    version,
    about = "One filtered, field-stripped cache of Kubernetes objects for the controllers beside it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the sidecar with a configuration file.
    Serve {
        /// The configuration (apiVersion: informerd.io/v1alpha1, kind: Config).
        #[arg(long)]
        config: PathBuf,
        /// A kubeconfig to use instead of the in-cluster service account or $KUBECONFIG.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Validate a configuration file and exit; errors are `FILE:LINE:COLUMN: field: message`.
    CheckConfig {
        /// The configuration file.
        file: PathBuf,
    },
    /// Print one cached object: `get pods web-1 -n shop -o yaml`.
    Get(cli::Client<cli::GetArgs>),
    /// List cached objects: `list pods -A -l app=web`.
    List(cli::Client<cli::ListArgs>),
    /// Follow changes, one line or document per event: `watch pods --initial -o json`.
    Watch(cli::Client<cli::WatchArgs>),
    /// What the sidecar caches and how it is doing: sync state, objects, memory, scopes.
    Status(cli::Client<cli::StatusArgs>),
    /// Run a dump (`kubectl get pods -A -o json`) through a configuration: objects kept, and
    /// bytes per object as JSON, in the store, and allocated.
    Bench(cli::bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Get(client) => cli::run(client),
        Command::List(client) => cli::run(client),
        Command::Watch(client) => cli::run(client),
        Command::Status(client) => cli::run(client),
        Command::Bench(args) => cli::bench::run(args),
        Command::CheckConfig { file } => match config::load(&file) {
            Ok(cfg) => {
                println!("{}: ok ({} resources)", file.display(), cfg.resources.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        },
        Command::Serve { config, kubeconfig } => {
            init_tracing();
            let cfg = match config::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(1);
                }
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            match rt.block_on(serve(cfg, kubeconfig)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

async fn serve(
    cfg: config::Config,
    kubeconfig: Option<PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    let client_config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(&path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer().await?,
    };
    let client = informerd::fleet::client(client_config)?;
    let fleet = Arc::new(Fleet::start(client, &cfg).await?);
    let api = Api::new(fleet.clone(), &cfg);
    tokio::spawn(announce_sync(fleet.clone()));
    api.serve(&cfg.server, shutdown_signal()).await?;
    tracing::info!("shutting down");
    fleet.shutdown();
    Ok(())
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
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
