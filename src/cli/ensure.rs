//! `informerd ensure`: asks the sidecar for an on-demand cache of a kind its configuration does
//! not list (within its `onDemand` bounds), waits until it has synced, and prints the resource
//! name to read it by: `informerd list $(informerd ensure apps/v1 Deployment -n team-a)`.

use std::time::Duration;

use clap::Args;
use informerd::proto::EnsureRequest;

use super::{
    args::parse_duration,
    run::{print, with_timeout, Cache, Call},
    CliError,
};

/// `informerd ensure`.
#[derive(Debug, Args)]
pub struct EnsureArgs {
    /// The apiVersion: v1, or group/version (apps/v1).
    api_version: String,
    /// The kind (Deployment); with --resource, its plural (deployments).
    kind: String,
    /// KIND is the resource's plural, not its kind.
    #[arg(long)]
    resource: bool,
    /// A namespace the cache holds (repeatable); none: every namespace.
    #[arg(short = 'n', long = "namespace")]
    namespaces: Vec<String>,
    /// How long to wait for the sync (the cache keeps syncing after it).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    #[command(flatten)]
    cluster: super::args::ClusterArg,
}

impl Call for EnsureArgs {
    async fn call(self, mut cache: Cache) -> Result<(), CliError> {
        let (kind, resource) = if self.resource {
            (String::new(), self.kind)
        } else {
            (self.kind, String::new())
        };
        let request = EnsureRequest {
            api_version: self.api_version,
            kind,
            resource,
            namespaces: self.namespaces,
            cluster: self.cluster.cluster,
        };
        let response = cache
            .ensure(with_timeout(request, self.timeout))
            .await?
            .into_inner();
        print(&format!("{}\n", response.resource))
    }
}
