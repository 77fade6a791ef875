//! `informerd get`: one cached object, as a table row or the object itself.

use clap::Args;
use informerd::proto::GetRequest;

use super::{
    args::{Printing, Waiting},
    output::{self, Format},
    run::{print, with_timeout, Cache, Call},
    CliError,
};

/// `informerd get`.
#[derive(Debug, Args)]
#[command(mut_arg("timeout", |a| a.help(
    "How long the sidecar may wait (for --min-resource-version or --wait-for-sync); its \
     default is 30s",
)))]
pub struct GetArgs {
    /// The resource's name in the sidecar's configuration (e.g. `pods`).
    resource: String,
    /// The object's name.
    name: String,
    /// The object's namespace (none for cluster-scoped objects).
    #[arg(short = 'n', long, value_name = "NS")]
    namespace: Option<String>,
    /// Read your own write: wait until the cache holds this resourceVersion of the object (the
    /// one the API server returned) or a later one.
    #[arg(long, value_name = "RV")]
    min_resource_version: Option<String>,
    /// Return only these fields (comma-separated or repeated).
    #[arg(long, value_name = "PATHS", value_delimiter = ',')]
    fields: Vec<String>,
    #[command(flatten)]
    cluster: super::args::ClusterArg,
    #[command(flatten)]
    waiting: Waiting,
    #[command(flatten)]
    printing: Printing,
}

impl Call for GetArgs {
    async fn call(self, mut cache: Cache) -> Result<(), CliError> {
        let request = GetRequest {
            resource: self.resource,
            cluster: self.cluster.cluster,
            namespace: self.namespace.unwrap_or_default(),
            name: self.name,
            min_resource_version: self.min_resource_version.unwrap_or_default(),
            fields: self.fields,
            wait_for_sync: self.waiting.wait_for_sync,
            // The table's LABELS column reads the map.
            omit_labels: false,
        };
        let response = cache
            .get(with_timeout(request, self.waiting.timeout))
            .await?
            .into_inner();
        let Some(object) = response.object else {
            return Err(tonic::Status::internal("the sidecar answered without an object").into());
        };
        let decoded = output::decode(&object)?;
        match self.printing.output {
            Format::Table => print(&output::object_table(
                std::slice::from_ref(&decoded),
                false,
                self.printing.show_labels,
            )),
            format => print(&output::document(&decoded.json, format, true)?),
        }
    }
}
