//! `informerd status`: what the sidecar caches and how it is doing.

use clap::Args;
use informerd::proto::StatusRequest;

use super::{
    output::{self, Format},
    run::{print, Cache, Call},
    CliError,
};

/// `informerd status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this resource.
    resource: Option<String>,
    #[command(flatten)]
    cluster: super::args::ClusterArg,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: Format,
}

impl Call for StatusArgs {
    async fn call(self, mut cache: Cache) -> Result<(), CliError> {
        let status = cache
            .status(StatusRequest {
                resource: self.resource.unwrap_or_default(),
                cluster: self.cluster.cluster,
            })
            .await?
            .into_inner();
        match self.output {
            Format::Table => print(&output::status_table(&status)),
            format => print(&output::document(
                &output::status_document(&status),
                format,
                true,
            )?),
        }
    }
}
