//! The informerd binary: its command line, and which function of [`cli`] runs each command.
//! `serve` is the sidecar (config → fleet → filter → transform → store → api); `get`, `list`,
//! `watch` and `status` are a client of a running sidecar; `check-config`, `rbac` and `bench`
//! read a configuration without a cluster; `inject-webhook` adds the sidecar to pods.

#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

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
    /// Start (or join) an on-demand cache and print its resource name once synced:
    /// `ensure apps/v1 Deployment -n team-a`.
    Ensure(cli::Client<cli::EnsureArgs>),
    /// Print the least-privilege RBAC of a configuration as YAML (Roles, ClusterRoles and
    /// their bindings to the sidecar's ServiceAccount).
    Rbac(cli::RbacArgs),
    /// Run a dump (`kubectl get pods -A -o json`) through a configuration: objects kept, and
    /// bytes per object as JSON, in the store, and allocated.
    Bench(cli::bench::BenchArgs),
    /// Serve the mutating admission webhook that adds informerd as a native sidecar to pods
    /// annotated `informerd.io/inject: "true"` (deploy/inject).
    InjectWebhook(cli::InjectArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Get(client) => cli::run(client),
        Command::List(client) => cli::run(client),
        Command::Watch(client) => cli::run(client),
        Command::Status(client) => cli::run(client),
        Command::Ensure(client) => cli::run(client),
        Command::Bench(args) => cli::bench::run(args),
        Command::CheckConfig { file } => cli::check_config(&file),
        Command::Rbac(args) => cli::rbac(args),
        Command::InjectWebhook(args) => cli::inject_webhook(args),
        Command::Serve { config, kubeconfig } => cli::serve(config, kubeconfig),
    }
}
