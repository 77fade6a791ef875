//! The flags several client commands share (what to select, how to print, whether to wait for
//! the sync) and the parsers of flag values: `NAME=VALUE`, `EPOCH:REVISION`, durations.

use std::time::Duration;

use clap::Args;
use informerd::proto::{IndexLookup, ResumeToken};

use super::output::Format;

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
    pub namespace: Option<String>,
    /// Every namespace (the default; for kubectl habits), with a NAMESPACE column.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// A label selector: `app=web,tier in (a,b),!canary`.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// A field selector on metadata.name, metadata.namespace and path-indexed fields:
    /// `spec.nodeName=node-1`.
    #[arg(long, value_name = "SELECTOR")]
    pub field_selector: Option<String>,
    /// Only objects with this value of a configured index (`indexes:`).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_index)]
    index: Option<Index>,
    /// Return only these fields (comma-separated or repeated): `status.phase`,
    /// `metadata.labels["app"]`. Identity fields always come back.
    #[arg(long, value_name = "PATHS", value_delimiter = ',')]
    pub fields: Vec<String>,
    /// Only one shard of the objects, as the apiserver's shardSelector:
    /// `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`.
    #[arg(long, value_name = "EXPRESSION")]
    pub shard_selector: Option<String>,
}

impl Filters {
    pub fn namespace(&self) -> String {
        self.namespace.clone().unwrap_or_default()
    }

    pub fn index(&self) -> Option<IndexLookup> {
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

/// How `get`, `list` and `watch` print what they read. A command whose `-o` prints more than
/// the format says overrides this help with `mut_arg("output", ...)`.
#[derive(Debug, Args)]
pub struct Printing {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
    /// Add a LABELS column to the table.
    #[arg(long)]
    pub show_labels: bool,
}

/// `--cluster`: which of the sidecar's clusters a command reads.
#[derive(Debug, Args)]
pub struct ClusterArg {
    /// The sidecar's cluster (`clusters[].name` in its configuration); default: the cluster it
    /// runs in.
    #[arg(long, value_name = "NAME", default_value = "")]
    pub cluster: String,
}

/// Whether `get` and `list` wait for the cache to sync, and for how long. `get` waits for more,
/// and says so in its `--timeout` help with `mut_arg`.
#[derive(Debug, Args)]
pub struct Waiting {
    /// Wait until the cache has synced instead of answering from a partial initial list.
    #[arg(long)]
    pub wait_for_sync: bool,
    /// How long the sidecar may wait for --wait-for-sync.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
}

pub fn parse_token(text: &str) -> Result<ResumeToken, String> {
    let bad = || format!("expected EPOCH:REVISION (two numbers), got {text:?}");
    let (epoch, revision) = text.split_once(':').ok_or_else(bad)?;
    Ok(ResumeToken {
        epoch: epoch.trim().parse().map_err(|_| bad())?,
        revision: revision.trim().parse().map_err(|_| bad())?,
    })
}

/// `30s`, `500ms`, `2m`, `1h`, or a number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
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
