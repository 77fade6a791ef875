//! `informerd watch`: follows a resource's changes, one table line, JSON line or YAML document
//! per event, until Ctrl-C or an error; an error that a new watch can resume from says how.

use clap::Args;
use informerd::proto::{
    watch_request::Start, EventType, Predicate, ResumeToken, WatchEvent, WatchRequest,
};
use informerd_client as client;

use super::{
    args::{parse_token, Filters, Printing},
    output::{self, Format, WatchTable},
    run::{print, Cache, Call},
    CliError,
};

/// `informerd watch`.
#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.help(
    "Output format: a table line, a JSON line, or a `---` YAML document per event",
)))]
pub struct WatchArgs {
    /// The resource's name in the sidecar's configuration (e.g. `pods`).
    resource: String,
    #[command(flatten)]
    cluster: super::args::ClusterArg,
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
    #[command(flatten)]
    printing: Printing,
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
    fn proto(self) -> Predicate {
        match self {
            PredicateArg::Generation => Predicate::GenerationChanged,
            PredicateArg::Labels => Predicate::LabelsChanged,
            PredicateArg::Annotations => Predicate::AnnotationsChanged,
        }
    }
}

impl Call for WatchArgs {
    /// Follows the events until Ctrl-C, the end of the stream or an error.
    async fn call(self, mut cache: Cache) -> Result<(), CliError> {
        let request = request(&self);
        let mut follower = Follower::new(&self);
        let events = async {
            let mut stream = match cache.watch(request).await {
                Ok(response) => response.into_inner(),
                Err(status) => return Err(follower.error(status)),
            };
            // The sidecar has accepted the watch: say so at once, before the first event.
            if self.printing.output == Format::Table {
                print(&follower.table.header())?;
            }
            loop {
                match stream.message().await {
                    Ok(Some(event)) => {
                        if let Some(text) = follower.event(&event)? {
                            print(&text)?;
                        }
                    }
                    Ok(None) => return Ok(()),
                    Err(status) => return Err(follower.error(status)),
                }
            }
        };
        tokio::select! {
            result = events => result,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    }
}

/// The request the flags ask for.
fn request(args: &WatchArgs) -> WatchRequest {
    let filters = &args.filters;
    let start = match (args.since, args.initial) {
        (Some(token), _) => Some(Start::Since(token)),
        (None, true) => Some(Start::SendInitialState(true)),
        (None, false) => None,
    };
    WatchRequest {
        resource: args.resource.clone(),
        cluster: args.cluster.cluster.clone(),
        namespace: filters.namespace(),
        label_selector: filters.selector.clone().unwrap_or_default(),
        field_selector: filters.field_selector.clone().unwrap_or_default(),
        index: filters.index(),
        fields: filters.fields.clone(),
        shard_selector: filters.shard_selector.clone().unwrap_or_default(),
        start,
        predicates: args.predicate.iter().map(|p| p.proto() as i32).collect(),
        predicate_cel: args.predicate_cel.clone().unwrap_or_default(),
        bookmark_interval_seconds: args.bookmark_interval.unwrap_or(0),
        wait_for_sync: args.wait_for_sync,
        send_previous: false,
        // The table's LABELS column reads the map.
        omit_labels: false,
    }
}

/// What following a watch keeps from one event to the next.
struct Follower {
    output: Format,
    bookmarks: bool,
    table: WatchTable,
    /// Where a new watch would resume: the last event handled, once past the initial state.
    resume: Option<String>,
    /// Before the SYNCED event that ends `--initial`'s current objects.
    initial: bool,
}

impl Follower {
    fn new(args: &WatchArgs) -> Follower {
        Follower {
            output: args.printing.output,
            bookmarks: args.bookmarks,
            table: WatchTable::new(args.filters.namespace.is_none(), args.printing.show_labels),
            resume: args.since.map(|t| output::token(t.epoch, t.revision)),
            initial: args.initial,
        }
    }

    /// Takes one event: the text to print for it, if any.
    fn event(&mut self, event: &WatchEvent) -> Result<Option<String>, CliError> {
        if event.r#type == EventType::Synced as i32 {
            self.initial = false;
        }
        if !self.initial {
            self.resume = Some(output::token(event.epoch, event.revision));
        }
        if event.r#type == EventType::Bookmark as i32 && !self.bookmarks {
            return Ok(None);
        }
        let decoded = event.object.as_ref().map(output::decode).transpose()?;
        let text = match self.output {
            Format::Table => self.table.event(event, decoded.as_ref()),
            format => {
                let doc = output::EventDocument::new(event, decoded.map(|d| d.json));
                let text = output::document(&doc, format, false)?;
                match format {
                    Format::Yaml => format!(
                        "---\n{}",
                        output::quote_token(text, event.epoch, event.revision)
                    ),
                    _ => text,
                }
            }
        };
        Ok(Some(text))
    }

    /// The watch ended with an error status: with a hint from where it got to.
    fn error(&self, status: tonic::Status) -> CliError {
        watch_error(status, self.resume.as_deref())
    }
}

/// A watch's error status, with how to go on when the reason allows.
fn watch_error(status: tonic::Status, resume: Option<&str>) -> CliError {
    use client::Reason;
    let hint = match (Reason::of(&status), resume) {
        (Some(Reason::ShuttingDown | Reason::FellBehind), Some(token)) => {
            format!("resume without a gap: informerd watch ... --since {token}")
        }
        (Some(Reason::Expired | Reason::EpochChanged), _) => {
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
