//! `informerd bench`: what a configuration keeps of a dump of objects, and what that costs.
//!
//! The dump is what `kubectl get pods -A -o json` prints: a `List` (or a `PodList`, ...), or one
//! object, or several of them one after another (JSON lines; `-` reads standard input). Each
//! configured resource takes the objects of its apiVersion and kind (items of a `PodList` that
//! carry no kind are Pods of the list's apiVersion) and runs them through the sidecar's own
//! pipeline, `ScopeIngest`, as one initial list: CEL filter, transform, and a real `Store`
//! with the configured indexes and change log bounds. What the apiserver does for the sidecar is
//! done here, locally, with the same selector types: the namespace scope, the label selector and
//! the field selector. A `namespaceSelector` needs the Namespace objects, which a dump of pods
//! does not have: every namespace counts as matching, and the output says so.
//!
//! Every figure printed is measured, and labelled with what it measures. Memory is jemalloc's
//! `stats.allocated` (the binary's global allocator), read before and after the store is built.
//!
//! The steps have a file each, in order: reading the dump ([`dump`]), selecting a resource's
//! objects by kind, namespace scope and selectors ([`select`]), running them through the
//! pipeline and reading the allocator ([`measure`]), the figures ([`report`]) and their table
//! ([`table`]). This module holds the command's flags and entry point: it does not read,
//! measure or render anything itself.

mod dump;
mod error;
mod measure;
mod report;
mod select;
mod table;
#[cfg(test)]
mod tests;

use std::{io::Write as _, path::PathBuf, process::ExitCode};

use clap::{Args, ValueEnum};
use informerd::config::{self, Config, ResourceConfig};

pub use error::BenchError;

/// `informerd bench --config FILE --input DUMP.json`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The configuration, validated as `serve` and `check-config` do.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The objects: `kubectl get pods -A -o json > pods.json` (a List), one object, or several
    /// one after another (JSON lines); `-` reads standard input.
    #[arg(long, value_name = "DUMP.json")]
    input: PathBuf,
    /// Only the resource with this name (`resources[].name`).
    #[arg(long, value_name = "NAME")]
    resource: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: BenchFormat,
}

/// How the results are printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum BenchFormat {
    /// Aligned figures, each with what it measures.
    #[default]
    Table,
    /// One JSON document.
    Json,
}

/// Runs the command; errors are printed on stderr and exit with status 1.
pub fn run(args: BenchArgs) -> ExitCode {
    match bench(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e @ BenchError::Config(_)) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("informerd: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench(args: &BenchArgs) -> Result<(), BenchError> {
    let cfg = config::load(&args.config)?;
    let resources = resources(&cfg, args.resource.as_deref())?;
    let (input, text) = dump::read_input(&args.input)?;
    let dump = dump::parse_dump(&input, &text)?;
    drop(text);
    let report = measure::measure(&cfg, &resources, &dump, &input);
    if report.resources.iter().all(|r| r.objects_read == 0) {
        return Err(BenchError::NothingToMeasure {
            configured: resources
                .iter()
                .map(|r| format!("{} {} ({})", r.api_version, r.kind, r.name))
                .collect::<Vec<_>>()
                .join(", "),
            found: report::kinds_text(&report.objects_by_kind),
        });
    }
    let out = match args.output {
        BenchFormat::Table => table::table(&report),
        BenchFormat::Json => {
            let mut s = serde_json::to_string_pretty(&report).expect("a report serializes");
            s.push('\n');
            s
        }
    };
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(BenchError::Output)
}

/// The resources to measure: every one, or the one `--resource` names.
fn resources<'c>(
    cfg: &'c Config,
    name: Option<&str>,
) -> Result<Vec<&'c ResourceConfig>, BenchError> {
    let Some(name) = name else {
        return Ok(cfg.resources.iter().collect());
    };
    let resource = cfg
        .resource(name)
        .ok_or_else(|| BenchError::UnknownResource {
            name: name.to_string(),
            known: cfg
                .resources
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    Ok(vec![resource])
}
