//! The client commands of the binary, kubectl-style: `get`, `list`, `watch` and `status` over
//! the gRPC API of a running sidecar.
//!
//! Errors print as `informerd: CODE: message (reason: Reason)` with the gRPC status code and
//! the `informerd-reason` trailer, and exit with status 1; a sidecar that cannot be reached is
//! named by its socket or address, with what to do about it. Output formats are described in
//! [`output`].

pub mod bench;
mod humanize;
mod output;

use std::{io::Write as _, path::PathBuf, process::ExitCode, time::Duration};

use clap::Args;
use informerd::{
    client::{self, ClientError, ConnectOptions},
    proto::{
        self, cache_client::CacheClient, watch_request::Start, GetRequest, IndexLookup,
        ListRequest, ResumeToken, StatusRequest, WatchRequest,
    },
};
use tonic::transport::Channel;

use output::{Decoded, Format};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Connect(#[from] ClientError),
    /// An error status from the sidecar.
    #[error("{}", status_text(.0))]
    Status(tonic::Status),
    #[error("cannot decode the {what}: {source}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write YAML: {0}")]
    Yaml(#[source] serde_yaml::Error),
    #[error("the list stream ended before its last message")]
    TruncatedList,
    /// An error, and what to do about it.
    #[error("{error}")]
    Hinted { error: Box<CliError>, hint: String },
    /// The connection failed under a call.
    #[error("lost the connection to the sidecar at {target}: {reason}")]
    Transport { target: String, reason: String },
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl From<tonic::Status> for CliError {
    fn from(status: tonic::Status) -> Self {
        CliError::Status(status)
    }
}

/// `CODE: message (reason: Reason)`.
fn status_text(status: &tonic::Status) -> String {
    let code = client::code_name(status.code());
    match client::reason(status) {
        Some(reason) => format!("{code}: {} (reason: {reason})", status.message()),
        None => format!("{code}: {}", status.message()),
    }
}

/// Where the sidecar is, and how to reach it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct Connection {
    /// The sidecar's Unix socket [default: $INFORMERD_SOCKET, else /run/informerd/informerd.sock].
    #[arg(long, value_name = "PATH", conflicts_with = "address")]
    socket: Option<PathBuf>,
    /// The sidecar's address instead of its socket: http://127.0.0.1:7070 (server.listen), or
    /// https://HOST:PORT (server.tls, or a TLS proxy in front of the sidecar).
    #[arg(long, value_name = "URL")]
    address: Option<String>,
    /// https: a PEM file of the CA(s) that sign the server's certificate (in addition to the
    /// system's roots).
    #[arg(long, value_name = "FILE")]
    certificate_authority: Option<PathBuf>,
    /// https: a PEM client certificate, for mutual TLS.
    #[arg(long, value_name = "FILE", requires = "client_key")]
    client_certificate: Option<PathBuf>,
    /// https: the PEM private key of --client-certificate.
    #[arg(long, value_name = "FILE", requires = "client_certificate")]
    client_key: Option<PathBuf>,
    /// https: the name to verify the server's certificate against, when not the host's.
    #[arg(long, value_name = "NAME")]
    tls_server_name: Option<String>,
}

impl Connection {
    fn target(&self) -> String {
        if let Some(address) = &self.address {
            return address.clone();
        }
        let path = self
            .socket
            .clone()
            .or_else(|| std::env::var_os("INFORMERD_SOCKET").map(PathBuf::from))
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from(informerd::config::DEFAULT_SOCKET));
        // A path, never a URL, whatever it looks like.
        format!("unix://{}", path.display())
    }

    /// The target, and whether a client certificate is given, for messages.
    fn describe(&self) -> (String, bool) {
        (self.target(), self.client_certificate.is_some())
    }

    async fn connect(&self) -> Result<CacheClient<Channel>, CliError> {
        let options = ConnectOptions {
            ca_file: self.certificate_authority.clone(),
            client_cert: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            server_name: self.tls_server_name.clone(),
            connect_timeout: None,
        };
        Ok(client::connect_with(&self.target(), &options).await?)
    }
}

/// The filters `list` and `watch` share.
#[derive(Debug, Args)]
pub struct Filters {
    /// Only this namespace. Without -n, every namespace (a cache has no current namespace).
    #[arg(
        short = 'n',
        long,
        value_name = "NS",
        conflicts_with = "all_namespaces"
    )]
    namespace: Option<String>,
    /// Every namespace (the default; for kubectl habits), with a NAMESPACE column.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// A label selector: `app=web,tier in (a,b),!canary`.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    selector: Option<String>,
    /// A field selector on metadata.name, metadata.namespace and path-indexed fields:
    /// `spec.nodeName=node-1`.
    #[arg(long, value_name = "SELECTOR")]
    field_selector: Option<String>,
    /// Only objects with this value of a configured index (`indexes:`).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_index)]
    index: Option<Index>,
    /// Return only these fields (comma-separated or repeated): `status.phase`,
    /// `metadata.labels["app"]`. Identity fields always come back.
    #[arg(long, value_name = "PATHS", value_delimiter = ',')]
    fields: Vec<String>,
}

impl Filters {
    fn namespace(&self) -> String {
        self.namespace.clone().unwrap_or_default()
    }

    fn index(&self) -> Option<IndexLookup> {
        self.index.as_ref().map(|i| IndexLookup {
            name: i.name.clone(),
            value: i.value.clone(),
        })
    }
}

/// `--index NAME=VALUE`.
#[derive(Debug, Clone)]
pub struct Index {
    name: String,
    value: String,
}

fn parse_index(text: &str) -> Result<Index, String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok(Index {
            name: name.to_string(),
            value: value.to_string(),
        }),
        _ => Err("expected NAME=VALUE, e.g. node=node-1".into()),
    }
}

fn parse_token(text: &str) -> Result<ResumeToken, String> {
    let bad = || format!("expected EPOCH:REVISION (two numbers), got {text:?}");
    let (epoch, revision) = text.split_once(':').ok_or_else(bad)?;
    Ok(ResumeToken {
        epoch: epoch.trim().parse().map_err(|_| bad())?,
        revision: revision.trim().parse().map_err(|_| bad())?,
    })
}

/// `30s`, `500ms`, `2m`, `1h`, or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("expected a duration like 30s, 500ms or 2m, got {text:?}"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?}: use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
}

/// `--predicate`: when an update (MODIFIED) is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PredicateArg {
    /// metadata.generation changed (spec changes; status-only updates are skipped).
    Generation,
    /// The labels changed.
    Labels,
    /// The annotations changed.
    Annotations,
}

impl PredicateArg {
    fn proto(self) -> proto::Predicate {
        match self {
            PredicateArg::Generation => proto::Predicate::GenerationChanged,
            PredicateArg::Labels => proto::Predicate::LabelsChanged,
            PredicateArg::Annotations => proto::Predicate::AnnotationsChanged,
        }
    }
}

/// `informerd get`.
#[derive(Debug, Args)]
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
    /// Wait until the cache has synced instead of answering from a partial initial list.
    #[arg(long)]
    wait_for_sync: bool,
    /// How long the sidecar may wait (for --min-resource-version or --wait-for-sync); its
    /// default is 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: Format,
    /// Add a LABELS column to the table.
    #[arg(long)]
    show_labels: bool,
    #[command(flatten)]
    connection: Connection,
}

/// `informerd list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The resource's name in the sidecar's configuration (e.g. `pods`).
    resource: String,
    #[command(flatten)]
    filters: Filters,
    /// Wait until the cache has synced instead of answering from a partial initial list.
    #[arg(long)]
    wait_for_sync: bool,
    /// How long the sidecar may wait for --wait-for-sync.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Output format. JSON and YAML print a Kubernetes List whose
    /// metadata.resourceVersion is the token `watch --since` follows on from.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: Format,
    /// Add a LABELS column to the table.
    #[arg(long)]
    show_labels: bool,
    #[command(flatten)]
    connection: Connection,
}

/// `informerd watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The resource's name in the sidecar's configuration (e.g. `pods`).
    resource: String,
    #[command(flatten)]
    filters: Filters,
    /// Replay the changes after this resume token (from `list -o json`'s resourceVersion or a
    /// previous event), then follow.
    #[arg(long, value_name = "EPOCH:REVISION", value_parser = parse_token, conflicts_with = "initial")]
    since: Option<ResumeToken>,
    /// Start with the current objects as ADDED events and one SYNCED event, then follow.
    #[arg(long)]
    initial: bool,
    /// Deliver an update (MODIFIED) only when one of these holds (repeatable); ADDED and
    /// DELETED always come.
    #[arg(long, value_enum, value_name = "WHAT")]
    predicate: Vec<PredicateArg>,
    /// A CEL predicate over `object` and `oldObject`, e.g. `object.spec != oldObject.spec`.
    #[arg(long, value_name = "EXPR")]
    predicate_cel: Option<String>,
    /// Also print BOOKMARK events (the revision the watch has reached, to resume from).
    #[arg(long)]
    bookmarks: bool,
    /// Seconds between BOOKMARK events (the sidecar's default is 10).
    #[arg(long, value_name = "SECONDS")]
    bookmark_interval: Option<u32>,
    /// Wait until the cache has synced before starting.
    #[arg(long)]
    wait_for_sync: bool,
    /// Output format: a table line, a JSON line, or a `---` YAML document per event.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: Format,
    /// Add a LABELS column to the table.
    #[arg(long)]
    show_labels: bool,
    #[command(flatten)]
    connection: Connection,
}

/// `informerd status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this resource.
    resource: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: Format,
    #[command(flatten)]
    connection: Connection,
}

/// Runs `get`.
pub fn get(args: GetArgs) -> ExitCode {
    run(args.connection.describe(), get_async(args))
}

/// Runs `list`.
pub fn list(args: ListArgs) -> ExitCode {
    run(args.connection.describe(), list_async(args))
}

/// Runs `watch` until Ctrl-C or an error.
pub fn watch(args: WatchArgs) -> ExitCode {
    run(args.connection.describe(), watch_async(args))
}

/// Runs `status`.
pub fn status(args: StatusArgs) -> ExitCode {
    run(args.connection.describe(), status_async(args))
}

fn run(
    (target, client_certificate): (String, bool),
    command: impl std::future::Future<Output = Result<(), CliError>>,
) -> ExitCode {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
        .and_then(|rt| rt.block_on(command));
    let (result, extra_hint) = match result {
        Err(CliError::Hinted { error, hint }) => (Err(*error), Some(hint)),
        result => (result, None),
    };
    let result = result.map_err(|e| match e {
        // Not the sidecar's answer: say where the connection was to.
        CliError::Status(status) => match client::transport_failure(&status) {
            Some(reason) => CliError::Transport {
                target: target.clone(),
                reason,
            },
            None => CliError::Status(status),
        },
        e => e,
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `informerd list pods | head`: the reader has all it wants.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("informerd: {e}");
            let hint = match e {
                CliError::Connect(ClientError::Socket { .. }) => Some(
                    "choose the socket with --socket PATH or $INFORMERD_SOCKET, or an address \
                     with --address URL",
                ),
                CliError::Connect(ClientError::Handshake { .. }) => Some(
                    "--certificate-authority FILE trusts the CA that signed the server's \
                     certificate; --tls-server-name NAME checks it for another name",
                ),
                // A TLS server that requires client certificates ends the connection.
                CliError::Transport { .. }
                    if target.starts_with("https://") && !client_certificate =>
                {
                    Some(
                        "if the server requires a client certificate, pass \
                         --client-certificate FILE and --client-key FILE",
                    )
                }
                _ => None,
            };
            for hint in hint.into_iter().chain(extra_hint.as_deref()) {
                eprintln!("hint: {hint}");
            }
            ExitCode::from(1)
        }
    }
}

/// Writes to standard output, flushed (watch events must show as they come).
fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::Output)
}

fn with_timeout<T>(message: T, timeout: Option<Duration>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(t) = timeout {
        request.set_timeout(t);
    }
    request
}

async fn get_async(args: GetArgs) -> Result<(), CliError> {
    let mut cache = args.connection.connect().await?;
    let request = GetRequest {
        resource: args.resource,
        namespace: args.namespace.unwrap_or_default(),
        name: args.name,
        min_resource_version: args.min_resource_version.unwrap_or_default(),
        fields: args.fields,
        wait_for_sync: args.wait_for_sync,
    };
    let response = cache
        .get(with_timeout(request, args.timeout))
        .await?
        .into_inner();
    let Some(object) = response.object else {
        return Err(tonic::Status::internal("the sidecar answered without an object").into());
    };
    let decoded = output::decode(&object)?;
    match args.output {
        Format::Table => print(&output::object_table(
            std::slice::from_ref(&decoded),
            false,
            args.show_labels,
        )),
        format => print(&output::document(&decoded.json, format, true)?),
    }
}

async fn list_async(args: ListArgs) -> Result<(), CliError> {
    let mut cache = args.connection.connect().await?;
    let filters = &args.filters;
    let request = ListRequest {
        resource: args.resource.clone(),
        namespace: filters.namespace(),
        label_selector: filters.selector.clone().unwrap_or_default(),
        field_selector: filters.field_selector.clone().unwrap_or_default(),
        index: filters.index(),
        fields: filters.fields.clone(),
        wait_for_sync: args.wait_for_sync,
        chunk_size: 0,
    };
    let mut stream = cache
        .list(with_timeout(request, args.timeout))
        .await?
        .into_inner();
    let mut objects = Vec::new();
    let last = loop {
        match stream.message().await? {
            Some(mut chunk) => {
                objects.append(&mut chunk.objects);
                if chunk.last {
                    break chunk;
                }
            }
            None => return Err(CliError::TruncatedList),
        }
    };
    if !last.synced {
        eprintln!(
            "warning: the cache of {} has not finished its initial list: this list may be \
             incomplete (use --wait-for-sync)",
            args.resource
        );
    }
    let decoded = objects
        .iter()
        .map(output::decode)
        .collect::<Result<Vec<Decoded<'_>>, _>>()?;
    match args.output {
        Format::Table => {
            if decoded.is_empty() {
                match &filters.namespace {
                    Some(ns) => eprintln!("No resources found in {ns} namespace."),
                    None => eprintln!("No resources found."),
                }
                return Ok(());
            }
            let across = filters.namespace.is_none();
            print(&output::object_table(&decoded, across, args.show_labels))
        }
        format => {
            let items = decoded.into_iter().map(|d| d.json).collect();
            let list = output::list_document(items, last.epoch, last.revision);
            let text = output::document(&list, format, true)?;
            print(&output::quote_token(text, last.epoch, last.revision))
        }
    }
}

async fn watch_async(args: WatchArgs) -> Result<(), CliError> {
    let mut cache = args.connection.connect().await?;
    let filters = &args.filters;
    let start = match (args.since, args.initial) {
        (Some(token), _) => Some(Start::Since(token)),
        (None, true) => Some(Start::SendInitialState(true)),
        (None, false) => None,
    };
    let request = WatchRequest {
        resource: args.resource.clone(),
        namespace: filters.namespace(),
        label_selector: filters.selector.clone().unwrap_or_default(),
        field_selector: filters.field_selector.clone().unwrap_or_default(),
        index: filters.index(),
        fields: filters.fields.clone(),
        start,
        predicates: args.predicate.iter().map(|p| p.proto() as i32).collect(),
        predicate_cel: args.predicate_cel.clone().unwrap_or_default(),
        bookmark_interval_seconds: args.bookmark_interval.unwrap_or(0),
        wait_for_sync: args.wait_for_sync,
    };
    let mut table = output::WatchTable::new(filters.namespace.is_none(), args.show_labels);
    // Where a new watch would resume: the last event handled, once past the initial state.
    let mut resume = args.since.map(|t| output::token(t.epoch, t.revision));
    let mut initial = args.initial;
    let events = async {
        let mut stream = match cache.watch(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => return Err(watch_error(status, resume.as_deref())),
        };
        // The sidecar has accepted the watch: say so at once, before the first event.
        if args.output == Format::Table {
            print(&table.header())?;
        }
        loop {
            let event = match stream.message().await {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(()),
                Err(status) => return Err(watch_error(status, resume.as_deref())),
            };
            if event.r#type == proto::EventType::Synced as i32 {
                initial = false;
            }
            if !initial {
                resume = Some(output::token(event.epoch, event.revision));
            }
            if event.r#type == proto::EventType::Bookmark as i32 && !args.bookmarks {
                continue;
            }
            let decoded = event.object.as_ref().map(output::decode).transpose()?;
            let text = match args.output {
                Format::Table => table.event(&event, decoded.as_ref()),
                Format::Json => {
                    let doc = output::EventDocument::new(&event, decoded.map(|d| d.json));
                    output::document(&doc, Format::Json, false)?
                }
                Format::Yaml => {
                    let doc = output::EventDocument::new(&event, decoded.map(|d| d.json));
                    let text = output::document(&doc, Format::Yaml, false)?;
                    format!(
                        "---\n{}",
                        output::quote_token(text, event.epoch, event.revision)
                    )
                }
            };
            print(&text)?;
        }
    };
    tokio::select! {
        result = events => result,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// A watch's error status, with how to go on when the reason allows.
fn watch_error(status: tonic::Status, resume: Option<&str>) -> CliError {
    let hint = match (client::reason(&status), resume) {
        (Some("ShuttingDown" | "FellBehind"), Some(token)) => {
            format!("resume without a gap: informerd watch ... --since {token}")
        }
        (Some("Expired" | "EpochChanged"), _) => {
            "the token cannot be resumed from: start again with --initial".to_string()
        }
        // The connection dropped (e.g. the sidecar was killed).
        (None, Some(token)) if client::transport_failure(&status).is_some() => {
            format!("resume without a gap: informerd watch ... --since {token}")
        }
        _ => return CliError::Status(status),
    };
    CliError::Hinted {
        error: Box::new(CliError::Status(status)),
        hint,
    }
}

async fn status_async(args: StatusArgs) -> Result<(), CliError> {
    let mut cache = args.connection.connect().await?;
    let status = cache
        .status(StatusRequest {
            resource: args.resource.unwrap_or_default(),
        })
        .await?
        .into_inner();
    match args.output {
        Format::Table => print(&output::status_table(&status)),
        format => print(&output::document(
            &output::status_document(&status),
            format,
            true,
        )?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tokens_indexes_and_durations() {
        let t = parse_token("123:45").unwrap();
        assert_eq!((t.epoch, t.revision), (123, 45));
        assert!(parse_token("123").is_err());
        assert!(parse_token("a:1").is_err());
        let i = parse_index("node=node-1").unwrap();
        assert_eq!((i.name.as_str(), i.value.as_str()), ("node", "node-1"));
        assert!(parse_index("=x").is_err());
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5d").is_err());
    }
}
