//! `informerd list`: the cached objects a selection matches, as a table or a Kubernetes `List`
//! whose resourceVersion is the token `watch --since` follows on from.

use clap::Args;
use informerd::proto::{ListRequest, ListResponse, Object};
use tonic::Streaming;

use super::{
    args::{Filters, Printing, Waiting},
    output::{self, Decoded, Format},
    run::{print, with_timeout, Cache, Call},
    CliError,
};

/// `informerd list`.
#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.help(
    "Output format. JSON and YAML print a Kubernetes List whose metadata.resourceVersion is \
     the token `watch --since` follows on from",
)))]
pub struct ListArgs {
    /// The resource's name in the sidecar's configuration (e.g. `pods`).
    resource: String,
    #[command(flatten)]
    filters: Filters,
    #[command(flatten)]
    cluster: super::args::ClusterArg,
    #[command(flatten)]
    waiting: Waiting,
    #[command(flatten)]
    printing: Printing,
}

impl Call for ListArgs {
    async fn call(self, mut cache: Cache) -> Result<(), CliError> {
        let filters = &self.filters;
        let request = ListRequest {
            resource: self.resource.clone(),
            cluster: self.cluster.cluster.clone(),
            namespace: filters.namespace(),
            label_selector: filters.selector.clone().unwrap_or_default(),
            field_selector: filters.field_selector.clone().unwrap_or_default(),
            index: filters.index(),
            fields: filters.fields.clone(),
            shard_selector: filters.shard_selector.clone().unwrap_or_default(),
            wait_for_sync: self.waiting.wait_for_sync,
            chunk_size: 0,
            ..Default::default()
        };
        let mut stream = cache
            .list(with_timeout(request, self.waiting.timeout))
            .await?
            .into_inner();
        let (objects, last) = receive(&mut stream).await?;
        if !last.synced {
            eprintln!(
                "warning: the cache of {} has not finished its initial list: this list may be \
                 incomplete (use --wait-for-sync)",
                self.resource
            );
        }
        let decoded = objects
            .iter()
            .map(output::decode)
            .collect::<Result<Vec<Decoded<'_>>, _>>()?;
        print_list(&self, decoded, &last)
    }
}

/// Every object of the list's chunks, and its last chunk (the token and whether it synced).
async fn receive(
    stream: &mut Streaming<ListResponse>,
) -> Result<(Vec<Object>, ListResponse), CliError> {
    let mut objects = Vec::new();
    loop {
        match stream.message().await? {
            Some(mut chunk) => {
                objects.append(&mut chunk.objects);
                if chunk.last {
                    return Ok((objects, chunk));
                }
            }
            None => return Err(CliError::TruncatedList),
        }
    }
}

/// The table (kubectl's message when there is nothing), or the `List` document.
fn print_list(
    args: &ListArgs,
    decoded: Vec<Decoded<'_>>,
    last: &ListResponse,
) -> Result<(), CliError> {
    let namespace = &args.filters.namespace;
    match args.printing.output {
        Format::Table => {
            if decoded.is_empty() {
                match namespace {
                    Some(ns) => eprintln!("No resources found in {ns} namespace."),
                    None => eprintln!("No resources found."),
                }
                return Ok(());
            }
            let across = namespace.is_none();
            print(&output::object_table(
                &decoded,
                across,
                args.printing.show_labels,
            ))
        }
        format => {
            let items = decoded.into_iter().map(|d| d.json).collect();
            let list = output::list_document(items, last.epoch, last.revision);
            let text = output::document(&list, format, true)?;
            print(&output::quote_token(text, last.epoch, last.revision))
        }
    }
}
