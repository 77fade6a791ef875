//! `informerd bench`: what a configuration keeps of a dump of objects, and what that costs.
//!
//! The dump is what `kubectl get pods -A -o json` prints: a `List` (or a `PodList`, ...), or one
//! object, or several of them one after another (JSON lines; `-` reads standard input). Each
//! configured resource takes the objects of its apiVersion and kind (items of a `PodList` that
//! carry no kind are Pods of the list's apiVersion) and runs them through the sidecar's own
//! pipeline, [`ScopeIngest`], as one initial list: CEL filter, transform, and a real [`Store`]
//! with the configured indexes and change log bounds. What the apiserver does for the sidecar is
//! done here, locally, with the same selector types: the namespace scope, the label selector and
//! the field selector. A `namespaceSelector` needs the Namespace objects, which a dump of pods
//! does not have: every namespace counts as matching, and the output says so.
//!
//! Every figure printed is measured, and labelled with what it measures. Memory is jemalloc's
//! `stats.allocated` (the binary's global allocator), read before and after the store is built.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt::Write as _,
    io::{Read as _, Write as _},
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
};

use clap::{Args, ValueEnum};
use informerd::{
    config::{self, Config, ConfigError, ResourceConfig, Scope},
    filter::{FieldSelector, LabelSelector},
    fleet::{Applied, Decoding, Pipeline, Projected, ScopeIngest},
    store::ObjectKey,
};
use kube::runtime::watcher;

use super::humanize::thousands;
use serde::{Deserialize as _, Serialize};
use serde_json::{Map, Value};

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

/// Why `bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The configuration is invalid: `FILE:LINE:COLUMN: field: message`, as `check-config`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{input}: cannot read the input: {source}")]
    ReadInput {
        input: String,
        #[source]
        source: std::io::Error,
    },
    /// The input is not JSON.
    #[error("{input}:{line}:{column}: {message}")]
    Json {
        input: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A JSON document (starting at `line`) that is not a Kubernetes object or list.
    #[error("{input}:{line}: {what}{message}")]
    Dump {
        input: String,
        line: usize,
        /// `items[3]: `, or empty for the document itself.
        what: String,
        message: String,
    },
    #[error(
        "{input}: the input is empty; expected a List as `kubectl get pods -A -o json` prints it"
    )]
    EmptyInput { input: String },
    #[error("--resource {name}: the configuration has no resource of that name; it has: {known}")]
    UnknownResource { name: String, known: String },
    #[error(
        "no configured resource matches an object of the input: the configuration caches {configured}; \
         the input holds {found}"
    )]
    NothingToMeasure { configured: String, found: String },
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
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
    let resources: Vec<&ResourceConfig> = match &args.resource {
        None => cfg.resources.iter().collect(),
        Some(name) => vec![cfg
            .resource(name)
            .ok_or_else(|| BenchError::UnknownResource {
                name: name.clone(),
                known: cfg
                    .resources
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?],
    };
    let (input, text) = read_input(&args.input)?;
    let dump = parse_dump(&input, &text)?;
    drop(text);
    let report = measure(&cfg, &resources, &dump, &input);
    if report.resources.iter().all(|r| r.objects_read == 0) {
        return Err(BenchError::NothingToMeasure {
            configured: resources
                .iter()
                .map(|r| format!("{} {} ({})", r.api_version, r.kind, r.name))
                .collect::<Vec<_>>()
                .join(", "),
            found: kinds_text(&report.objects_by_kind),
        });
    }
    let out = match args.output {
        BenchFormat::Table => table(&report),
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

fn read_input(path: &std::path::Path) -> Result<(String, String), BenchError> {
    let mut text = String::new();
    let input = if path.as_os_str() == "-" {
        let input = "stdin".to_string();
        std::io::stdin()
            .lock()
            .read_to_string(&mut text)
            .map_err(|source| BenchError::ReadInput {
                input: input.clone(),
                source,
            })?;
        input
    } else {
        let input = path.display().to_string();
        text = std::fs::read_to_string(path).map_err(|source| BenchError::ReadInput {
            input: input.clone(),
            source,
        })?;
        input
    };
    Ok((input, text))
}

// ------------------------------------------------------------------------------------------
// The dump.

/// One object of a dump.
#[derive(Debug)]
struct Item {
    /// The object's `apiVersion`, or its list's for items of a `PodList` (or any `XList`).
    api_version: Option<String>,
    /// The object's `kind`, or the one its list's kind names (`Pod` in a `PodList`).
    kind: Option<String>,
    key: ObjectKey,
    /// The object as given.
    object: Value,
    /// Its compact JSON, in bytes.
    json_bytes: usize,
}

impl Item {
    fn type_name(&self) -> String {
        match (&self.api_version, &self.kind) {
            (Some(v), Some(k)) => format!("{v} {k}"),
            (None, Some(k)) => format!("{k} (no apiVersion)"),
            _ => "no apiVersion/kind".to_string(),
        }
    }
}

/// The objects of a dump, in the order given.
#[derive(Debug)]
struct Dump {
    items: Vec<Item>,
}

/// Reads every JSON document of `text`: each a list (`items`) or one object. `input` names the
/// input in errors.
fn parse_dump(input: &str, text: &str) -> Result<Dump, BenchError> {
    let mut items = Vec::new();
    let mut documents = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    loop {
        let start = documents.byte_offset();
        let skipped = text[start..]
            .find(|c: char| !c.is_ascii_whitespace())
            .unwrap_or(text.len() - start);
        let line = 1 + text[..start + skipped].matches('\n').count();
        let Some(document) = documents.next() else {
            break;
        };
        let document = document.map_err(|e| {
            let message = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            BenchError::Json {
                input: input.to_string(),
                line: e.line(),
                column: e.column(),
                message: message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string(),
            }
        })?;
        read_document(document, &mut items).map_err(|(what, message)| BenchError::Dump {
            input: input.to_string(),
            line,
            what,
            message,
        })?;
    }
    if items.is_empty() && text.trim().is_empty() {
        return Err(BenchError::EmptyInput {
            input: input.to_string(),
        });
    }
    Ok(Dump { items })
}

/// Appends the objects of one document; errors are (`items[i]: ` or empty, message).
fn read_document(document: Value, items: &mut Vec<Item>) -> Result<(), (String, String)> {
    let Value::Object(mut map) = document else {
        return Err((
            String::new(),
            format!(
                "expected a Kubernetes List or object (a JSON object), found {}",
                json_type(&document)
            ),
        ));
    };
    let str_field = |map: &Map<String, Value>, field: &str| {
        map.get(field).and_then(Value::as_str).map(str::to_string)
    };
    if let Some(list) = map.remove("items") {
        let list_kind = str_field(&map, "kind");
        let list_version = str_field(&map, "apiVersion");
        // `PodList` items are Pods of the list's apiVersion; a plain `List` says nothing.
        let inferred_kind = list_kind
            .as_deref()
            .and_then(|k| k.strip_suffix("List"))
            .filter(|k| !k.is_empty())
            .map(str::to_string);
        let elements = match list {
            Value::Array(a) => a,
            Value::Null => Vec::new(),
            other => {
                return Err((
                    "items: ".into(),
                    format!("expected a list of objects, found {}", json_type(&other)),
                ))
            }
        };
        for (i, element) in elements.into_iter().enumerate() {
            let Value::Object(object) = element else {
                return Err((
                    format!("items[{i}]: "),
                    format!("expected an object, found {}", json_type(&element)),
                ));
            };
            let mut kind = str_field(&object, "kind");
            let mut api_version = str_field(&object, "apiVersion");
            if inferred_kind.is_some() && (kind.is_none() || kind == inferred_kind) {
                kind = kind.or_else(|| inferred_kind.clone());
                api_version = api_version.or_else(|| list_version.clone());
            }
            items.push(item(object, api_version, kind).map_err(|m| (format!("items[{i}]: "), m))?);
        }
        return Ok(());
    }
    if map.contains_key("type") && map.contains_key("object") && !map.contains_key("kind") {
        return Err((
            String::new(),
            "this is a watch event, not an object: give the objects, as `kubectl get pods -A \
             -o json` prints them"
                .into(),
        ));
    }
    let kind = str_field(&map, "kind");
    let api_version = str_field(&map, "apiVersion");
    items.push(item(map, api_version, kind).map_err(|m| (String::new(), m))?);
    Ok(())
}

fn item(
    object: Map<String, Value>,
    api_version: Option<String>,
    kind: Option<String>,
) -> Result<Item, String> {
    let meta = object.get("metadata").and_then(Value::as_object);
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("no metadata.name; every object of the input needs one")?;
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let key = ObjectKey::new(namespace, name);
    let object = Value::Object(object);
    // The apiserver sends nothing that does not read as a Kubernetes object; a hand-made dump
    // might, and would measure something the sidecar never holds.
    kube::api::DynamicObject::deserialize(&object)
        .map_err(|e| format!("not a Kubernetes object: {e}"))?;
    let json_bytes = serde_json::to_vec(&object)
        .expect("a JSON value always serializes")
        .len();
    Ok(Item {
        api_version,
        kind,
        key,
        object,
        json_bytes,
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

// ------------------------------------------------------------------------------------------
// The measurement.

/// Everything `bench` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    config: String,
    input: String,
    /// Objects in the input.
    objects_read: usize,
    /// Objects in the input by "apiVersion kind".
    objects_by_kind: BTreeMap<String, usize>,
    resources: Vec<ResourceReport>,
    /// Objects of kinds that none of the measured resources caches.
    objects_not_configured: usize,
    notes: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceReport {
    name: String,
    api_version: String,
    kind: String,
    /// The namespace scope, as applied here.
    scope: String,
    /// Objects of this apiVersion and kind in the input.
    objects_read: usize,
    left_out_by_namespace_scope: usize,
    /// `None`: no labelSelector configured.
    left_out_by_label_selector: Option<usize>,
    left_out_by_field_selector: Option<usize>,
    /// Objects the CEL filter did not keep (evaluation errors included); `None`: no filter.
    left_out_by_filter: Option<u64>,
    /// CEL evaluation errors (each counted as "does not match", as Kubernetes does).
    filter_errors: u64,
    refused_by_store: u64,
    /// Objects given to the pipeline after one with the same namespace/name (the later one
    /// replaces the earlier).
    same_name_as_an_earlier_object: usize,
    /// Objects in the store at the end.
    objects_kept: usize,
    /// Compact JSON of the objects read, as given.
    full_json_bytes_read: usize,
    /// Compact JSON of the kept objects, as given.
    full_json_bytes_kept: usize,
    /// JSON of the stored objects (after the transform), as clients receive them.
    transformed_json_bytes: usize,
    /// The store's `encoded_bytes`: each object's own encoding.
    store_encoded_bytes: usize,
    /// The store's `interned_bytes`: strings and structure interned once, shared by objects.
    store_interned_bytes: usize,
    store_interned_atoms: usize,
    store_change_log_entries: usize,
    /// jemalloc `stats.allocated` after the store was built minus before.
    store_allocated_bytes: usize,
    /// The same reading around an empty store of the same configuration.
    empty_store_allocated_bytes: usize,
    per_object: PerObject,
    /// Full objects kept as JSON ÷ what the store allocated.
    times_less_than_full_json: Option<f64>,
}

/// The figures of [`ResourceReport`] divided by objects (rounded); `None` when there are none.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PerObject {
    full_json_bytes_read: Option<usize>,
    full_json_bytes_kept: Option<usize>,
    transformed_json_bytes: Option<usize>,
    store_encoded_bytes: Option<usize>,
    store_interned_bytes: Option<usize>,
    store_allocated_bytes: Option<usize>,
}

fn per(total: usize, count: usize) -> Option<usize> {
    (count > 0).then(|| (total + count / 2) / count)
}

fn kinds_text(kinds: &BTreeMap<String, usize>) -> String {
    if kinds.is_empty() {
        return "no objects".into();
    }
    kinds
        .iter()
        .map(|(k, n)| format!("{} {k}", thousands(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn measure(cfg: &Config, resources: &[&ResourceConfig], dump: &Dump, input: &str) -> Report {
    let mut objects_by_kind = BTreeMap::new();
    for item in &dump.items {
        *objects_by_kind.entry(item.type_name()).or_insert(0) += 1;
    }
    exact_allocation_stats();
    let mut notes = Vec::new();
    let mut configured = vec![false; dump.items.len()];
    let mut reports = Vec::with_capacity(resources.len());
    // Each store stays alive until the end, so that one resource's measurement cannot free
    // memory in another's.
    let mut stores = Vec::with_capacity(resources.len());
    for rc in resources {
        let items: Vec<&Item> = dump
            .items
            .iter()
            .enumerate()
            .filter(|(_, it)| {
                it.api_version.as_deref() == Some(&rc.api_version)
                    && it.kind.as_deref() == Some(&rc.kind)
            })
            .map(|(i, it)| {
                configured[i] = true;
                it
            })
            .collect();
        if let Scope::Selector(selector) = &rc.scope {
            notes.push(format!(
                "{}: namespaceSelector ({selector}) needs the Namespace objects, which the input \
                 does not have: every namespace was counted as matching",
                rc.name
            ));
        }
        let (report, store) = measure_resource(cfg, rc, &items);
        reports.push(report);
        stores.push(store);
    }
    if resources
        .iter()
        .any(|rc| rc.label_selector.is_some() || rc.field_selector.is_some())
    {
        notes.push(
            "labelSelector and fieldSelector were evaluated here, on the objects as given (the \
             sidecar has the apiserver evaluate them)"
                .into(),
        );
    }
    let without_kind = dump
        .items
        .iter()
        .filter(|it| it.api_version.is_none() || it.kind.is_none())
        .count();
    if without_kind > 0 {
        notes.push(format!(
            "{without_kind} objects have no apiVersion/kind (items of a plain List that do not \
             say theirs) and match no resource"
        ));
    }
    Report {
        config: cfg.file().to_string(),
        input: input.to_string(),
        objects_read: dump.items.len(),
        objects_by_kind,
        objects_not_configured: configured.iter().filter(|c| !**c).count(),
        resources: reports,
        notes,
    }
}

/// Bytes allocated by the process (jemalloc's count).
fn allocated() -> usize {
    informerd::vocab::memory::allocated_bytes() as usize
}

fn exact_allocation_stats() {
    if !informerd::vocab::memory::exact_allocation_stats() {
        tracing::debug!("the thread cache of jemalloc stays on");
    }
}

/// Runs the objects of one resource through scope, selectors, filter, transform and store.
fn measure_resource(
    cfg: &Config,
    rc: &ResourceConfig,
    items: &[&Item],
) -> (ResourceReport, Arc<informerd::store::Writer>) {
    // What the apiserver does for the sidecar: the namespace scope, then the selectors.
    let (scope, namespaces): (String, Option<Vec<&str>>) = match &rc.scope {
        Scope::AllNamespaces => ("all namespaces".into(), None),
        Scope::Namespaces(list) => (
            format!("namespaces {}", list.join(", ")),
            Some(list.iter().map(String::as_str).collect()),
        ),
        Scope::Selector(selector) => (
            format!("all namespaces (namespaceSelector {selector} not evaluated)"),
            None,
        ),
    };
    let label_selector = rc
        .label_selector
        .as_deref()
        .map(|s| LabelSelector::parse(s).expect("validated with the configuration"));
    let field_selector = rc
        .field_selector
        .as_deref()
        .map(|s| FieldSelector::parse(s).expect("validated with the configuration"));
    let mut out_of_scope = 0;
    let mut out_by_labels = 0;
    let mut out_by_fields = 0;
    // Objects by the scope (stream) that lists them: one per listed namespace, as the fleet
    // runs them, or one cluster-wide.
    let mut by_scope: BTreeMap<Option<&str>, Vec<&Item>> = BTreeMap::new();
    for item in items {
        let namespace = item.key.namespace();
        let scope_key = match &namespaces {
            None => None,
            Some(list) => match namespace.filter(|ns| list.contains(ns)) {
                Some(ns) => Some(ns),
                None => {
                    out_of_scope += 1;
                    continue;
                }
            },
        };
        if label_selector
            .as_ref()
            .is_some_and(|s| !s.matches_object(&item.object))
        {
            out_by_labels += 1;
            continue;
        }
        if field_selector
            .as_ref()
            .is_some_and(|s| !s.matches(&item.object))
        {
            out_by_fields += 1;
            continue;
        }
        by_scope.entry(scope_key).or_default().push(item);
    }
    let mut seen = HashSet::new();
    let mut full_bytes_by_key = HashMap::new();
    let mut duplicates = 0;
    for item in by_scope.values().flatten() {
        if !seen.insert(&item.key) {
            duplicates += 1;
        }
        full_bytes_by_key.insert(&item.key, item.json_bytes);
    }
    drop(seen);

    // What a store costs before its first object: tables and the change log's ring.
    let before = allocated();
    let empty = Pipeline::new(&cfg.change_log, rc);
    let empty_allocated = allocated().saturating_sub(before);
    drop(empty);

    // The sidecar's own code path, as an initial list per scope. Nothing else is kept
    // between the two readings of the allocator.
    let before = allocated();
    let pipeline = Pipeline::new(&cfg.change_log, rc);
    let store = pipeline.store.clone();
    let mut counters = Applied::default();
    {
        for (namespace, scope_items) in &by_scope {
            let mut ingest = ScopeIngest::new(pipeline.clone(), namespace.map(str::to_string));
            ingest.handle(watcher::Event::Init);
            // Decoded as the fleet's watchers decode (the transform applied while decoding).
            let _decoding = Decoding::enter(pipeline.decoding());
            for item in scope_items {
                let object =
                    Projected::deserialize(&item.object).expect("a JSON object always decodes");
                ingest.handle(watcher::Event::InitApply(object));
            }
            ingest.handle(watcher::Event::InitDone);
            counters.filtered_out += ingest.counters.filtered_out;
            counters.filter_errors += ingest.counters.filter_errors;
            counters.refused += ingest.counters.refused;
        }
    }
    store.reclaim();
    let after = allocated();
    let allocated = after.saturating_sub(before);

    let stats = store.stats();
    let kept = stats.objects;
    let (_, stored) = store.list(None);
    let transformed: usize = stored.iter().map(|o| o.to_json_bytes().len()).sum();
    let full_kept: usize = stored
        .iter()
        .filter_map(|o| full_bytes_by_key.get(o.key()))
        .sum();
    drop(stored);
    let full_read: usize = items.iter().map(|it| it.json_bytes).sum();
    let report = ResourceReport {
        name: rc.name.clone(),
        api_version: rc.api_version.clone(),
        kind: rc.kind.clone(),
        scope,
        objects_read: items.len(),
        left_out_by_namespace_scope: out_of_scope,
        left_out_by_label_selector: label_selector.map(|_| out_by_labels),
        left_out_by_field_selector: field_selector.map(|_| out_by_fields),
        left_out_by_filter: rc.filter.as_ref().map(|_| counters.filtered_out),
        filter_errors: counters.filter_errors,
        refused_by_store: counters.refused,
        same_name_as_an_earlier_object: duplicates,
        objects_kept: kept,
        full_json_bytes_read: full_read,
        full_json_bytes_kept: full_kept,
        transformed_json_bytes: transformed,
        store_encoded_bytes: stats.encoded_bytes,
        store_interned_bytes: stats.interned_bytes,
        store_interned_atoms: stats.interned_strings,
        store_change_log_entries: stats.log_entries,
        store_allocated_bytes: allocated,
        empty_store_allocated_bytes: empty_allocated,
        per_object: PerObject {
            full_json_bytes_read: per(full_read, items.len()),
            full_json_bytes_kept: per(full_kept, kept),
            transformed_json_bytes: per(transformed, kept),
            store_encoded_bytes: per(stats.encoded_bytes, kept),
            store_interned_bytes: per(stats.interned_bytes, kept),
            store_allocated_bytes: per(allocated, kept),
        },
        times_less_than_full_json: (kept > 0 && allocated > 0)
            .then(|| (full_kept as f64 / allocated as f64 * 10.0).round() / 10.0),
    };
    (report, store)
}

// ------------------------------------------------------------------------------------------
// The table.

fn opt(n: Option<usize>) -> String {
    n.map(thousands).unwrap_or_else(|| "-".into())
}

/// Below this many objects kept, the table says that per-object figures carry the store's
/// fixed costs.
const FEW: usize = 1000;

fn table(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} objects read from {} ({}), measured with {}",
        thousands(report.objects_read),
        report.input,
        kinds_text(&report.objects_by_kind),
        report.config
    );
    if report.objects_not_configured > 0 {
        let _ = writeln!(
            s,
            "{} objects are of kinds no measured resource caches",
            thousands(report.objects_not_configured)
        );
    }
    for r in &report.resources {
        let _ = writeln!(s);
        let _ = writeln!(s, "{} ({} {})", r.name, r.api_version, r.kind);
        if r.objects_read == 0 {
            let _ = writeln!(s, "  no objects of this kind in the input");
            continue;
        }
        let count = |s: &mut String, label: &str, n: Option<usize>, what: &str| {
            let line = format!("  {label:<38} {:>10}   {what}", opt(n));
            let _ = writeln!(s, "{}", line.trim_end());
        };
        count(&mut s, "objects read", Some(r.objects_read), "");
        count(
            &mut s,
            "left out by the namespace scope",
            Some(r.left_out_by_namespace_scope),
            &r.scope,
        );
        count(
            &mut s,
            "left out by labelSelector",
            r.left_out_by_label_selector,
            if r.left_out_by_label_selector.is_some() {
                "evaluated locally"
            } else {
                "none configured"
            },
        );
        count(
            &mut s,
            "left out by fieldSelector",
            r.left_out_by_field_selector,
            if r.left_out_by_field_selector.is_some() {
                "evaluated locally"
            } else {
                "none configured"
            },
        );
        let filter_note = match r.left_out_by_filter {
            Some(_) => format!(
                "CEL filter; {} evaluation errors, each counted as \"does not match\"",
                r.filter_errors
            ),
            None => "no filter configured".into(),
        };
        count(
            &mut s,
            "left out by the filter",
            r.left_out_by_filter.map(|n| n as usize),
            &filter_note,
        );
        if r.refused_by_store > 0 {
            count(
                &mut s,
                "refused by the store",
                Some(r.refused_by_store as usize),
                "e.g. nested too deep: drop the deep fields with a transform",
            );
        }
        if r.same_name_as_an_earlier_object > 0 {
            count(
                &mut s,
                "same namespace/name as an earlier one",
                Some(r.same_name_as_an_earlier_object),
                "the later object replaces the earlier, as in the cache",
            );
        }
        count(&mut s, "objects kept", Some(r.objects_kept), "in the store");
        if r.objects_kept == 0 {
            continue;
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "  {:<38} {:>10}   {:>10}",
            "bytes", "total", "per object"
        );
        let mut figure = |label: &str, total: usize, per: Option<usize>, what: &str| {
            let _ = writeln!(
                s,
                "  {label:<38} {:>10}   {:>10}   {what}",
                thousands(total),
                opt(per)
            );
        };
        figure(
            "full objects read, as JSON",
            r.full_json_bytes_read,
            r.per_object.full_json_bytes_read,
            "compact JSON of every object read, as given",
        );
        figure(
            "full objects kept, as JSON",
            r.full_json_bytes_kept,
            r.per_object.full_json_bytes_kept,
            "compact JSON of the kept objects, as given",
        );
        figure(
            "kept objects after the transform",
            r.transformed_json_bytes,
            r.per_object.transformed_json_bytes,
            "JSON of the stored objects, as clients receive them",
        );
        figure(
            "store: encoded_bytes",
            r.store_encoded_bytes,
            r.per_object.store_encoded_bytes,
            "each object's own encoding",
        );
        figure(
            "store: interned_bytes",
            r.store_interned_bytes,
            r.per_object.store_interned_bytes,
            &format!(
                "{} strings and shapes stored once and shared by the objects (falls per \
                 object as objects grow in number)",
                thousands(r.store_interned_atoms)
            ),
        );
        figure(
            "store: allocated (jemalloc)",
            r.store_allocated_bytes,
            r.per_object.store_allocated_bytes,
            &format!(
                "stats.allocated after building the store minus before: objects, interned \
                 atoms, indexes, change log ({} entries)",
                thousands(r.store_change_log_entries)
            ),
        );
        figure(
            "empty store: allocated (jemalloc)",
            r.empty_store_allocated_bytes,
            None,
            "the same reading around an empty store (tables, change log ring): part of the \
             figure above",
        );
        if let Some(ratio) = r.times_less_than_full_json {
            let _ = writeln!(s);
            let comparison = if ratio >= 1.0 {
                format!("{ratio:.1} times less than")
            } else {
                format!("{:.1} times more than", 1.0 / ratio)
            };
            let _ = writeln!(
                s,
                "  {comparison} the full objects as JSON (full objects kept as JSON / store \
                 allocated)"
            );
        }
        if r.objects_kept < FEW {
            let _ = writeln!(
                s,
                "  with fewer than {} objects kept, the store's tables and shared strings weigh \
                 on every per-object figure; a dump of a real cluster gives steadier ones",
                thousands(FEW)
            );
        }
    }
    if !report.notes.is_empty() {
        let _ = writeln!(s);
        for note in &report.notes {
            let _ = writeln!(s, "note: {note}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str, owner: &str) -> Value {
        json!({
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": "1", "labels": {"app": name},
                         "ownerReferences": [{"kind": owner, "name": "o", "uid": "u"}]},
            "spec": {"nodeName": "node-1"},
            "status": {"phase": "Running"}
        })
    }

    fn typed(mut v: Value) -> Value {
        v["apiVersion"] = json!("v1");
        v["kind"] = json!("Pod");
        v
    }

    fn parse(text: &str) -> Result<Dump, BenchError> {
        parse_dump("dump.json", text)
    }

    fn types(dump: &Dump) -> Vec<(Option<&str>, Option<&str>, String)> {
        dump.items
            .iter()
            .map(|i| {
                (
                    i.api_version.as_deref(),
                    i.kind.as_deref(),
                    i.key.to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_pod_list_gives_its_items_the_kind_it_names() {
        let text = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                          "items": [pod("a", "x", "DaemonSet"), pod("b", "y", "Job")]})
        .to_string();
        let dump = parse(&text).unwrap();
        assert_eq!(
            types(&dump),
            vec![
                (Some("v1"), Some("Pod"), "a/x".to_string()),
                (Some("v1"), Some("Pod"), "b/y".to_string())
            ]
        );
        assert_eq!(
            dump.items[0].json_bytes,
            pod("a", "x", "DaemonSet").to_string().len()
        );
    }

    #[test]
    fn a_kubectl_list_keeps_each_items_own_kind() {
        let mut deployment = typed(pod("a", "d", "X"));
        deployment["apiVersion"] = json!("apps/v1");
        deployment["kind"] = json!("Deployment");
        let text = serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List",
            "items": [typed(pod("a", "x", "DaemonSet")), deployment, pod("a", "bare", "X")]}))
        .unwrap();
        let dump = parse(&text).unwrap();
        assert_eq!(
            types(&dump),
            vec![
                (Some("v1"), Some("Pod"), "a/x".to_string()),
                (Some("apps/v1"), Some("Deployment"), "a/d".to_string()),
                (None, None, "a/bare".to_string()),
            ]
        );
        // Compact JSON, whatever the indentation of the input.
        assert_eq!(
            dump.items[0].json_bytes,
            typed(pod("a", "x", "DaemonSet")).to_string().len()
        );
    }

    #[test]
    fn single_objects_and_json_lines_are_read_in_order() {
        let one = typed(pod("a", "x", "DaemonSet")).to_string();
        assert_eq!(types(&parse(&one).unwrap()).len(), 1);
        let lines = format!(
            "{one}\n{}\n\n{}\n",
            typed(pod("a", "y", "Job")),
            json!({"kind": "PodList", "apiVersion": "v1", "items": [pod("b", "z", "Job")]})
        );
        let dump = parse(&lines).unwrap();
        assert_eq!(
            types(&dump).into_iter().map(|t| t.2).collect::<Vec<_>>(),
            ["a/x", "a/y", "b/z"]
        );
        assert!(
            parse(r#"{"kind": "PodList", "apiVersion": "v1", "items": null}"#)
                .unwrap()
                .items
                .is_empty()
        );
    }

    #[test]
    fn errors_say_where() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(
            err("{\"kind\": \"List\",\n \"items\": [}"),
            "dump.json:2:12: expected value"
        );
        assert_eq!(
            err(&format!(
                "{}\n{{\"kind\": \"PodList\", \"items\": [{{\"metadata\": {{}}}}]}}",
                typed(pod("a", "x", "Job"))
            )),
            "dump.json:2: items[0]: no metadata.name; every object of the input needs one"
        );
        assert_eq!(
            err(r#"{"type": "ADDED", "object": {}}"#),
            "dump.json:1: this is a watch event, not an object: give the objects, as `kubectl \
             get pods -A -o json` prints them"
        );
        assert_eq!(
            err("[1]"),
            "dump.json:1: expected a Kubernetes List or object (a JSON object), found a list"
        );
        assert_eq!(
            err(r#"{"items": [3]}"#),
            "dump.json:1: items[0]: expected an object, found a number"
        );
        assert!(err(r#"{"metadata": {"name": "x", "labels": {"a": 1}}}"#)
            .starts_with("dump.json:1: not a Kubernetes object: "));
        assert_eq!(
            err(" \n "),
            "dump.json: the input is empty; expected a List as `kubectl get pods -A -o json` prints it"
        );
    }

    fn config(resource: &str) -> Config {
        config::parse(
            "c.yaml",
            &format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n{resource}"),
        )
        .unwrap()
    }

    fn run_on(cfg: &Config, items: Vec<Value>) -> Report {
        let text = json!({"kind": "PodList", "apiVersion": "v1", "items": items}).to_string();
        let dump = parse(&text).unwrap();
        let resources: Vec<&ResourceConfig> = cfg.resources.iter().collect();
        measure(cfg, &resources, &dump, "dump.json")
    }

    #[test]
    fn scope_selectors_and_filter_each_count_what_they_leave_out() {
        let cfg = config(
            "- apiVersion: v1\n  kind: Pod\n  namespaces: [a, b]\n  labelSelector: app!=l\n  \
             fieldSelector: metadata.name!=f\n  filter: 'object.metadata.ownerReferences.exists(o, o.kind == \"DaemonSet\")'\n  \
             transform:\n    keep: [metadata.name]\n",
        );
        let mut no_owner = pod("b", "e", "X");
        no_owner["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        let report = run_on(
            &cfg,
            vec![
                pod("a", "x", "DaemonSet"),
                pod("b", "y", "DaemonSet"),
                pod("c", "z", "DaemonSet"), // out of scope
                pod("a", "l", "DaemonSet"), // label selector
                pod("a", "f", "DaemonSet"), // field selector
                pod("a", "j", "Job"),       // filter
                no_owner,                   // filter: CEL error
                pod("a", "x", "DaemonSet"), // the same again
            ],
        );
        let r = &report.resources[0];
        assert_eq!(r.objects_read, 8);
        assert_eq!(r.left_out_by_namespace_scope, 1);
        assert_eq!(r.left_out_by_label_selector, Some(1));
        assert_eq!(r.left_out_by_field_selector, Some(1));
        assert_eq!(r.left_out_by_filter, Some(2));
        assert_eq!(r.filter_errors, 1);
        assert_eq!(r.same_name_as_an_earlier_object, 1);
        assert_eq!(r.objects_kept, 2);
        assert_eq!(r.scope, "namespaces a, b");
        let full = pod("a", "x", "DaemonSet").to_string().len();
        assert_eq!(r.per_object.full_json_bytes_kept, Some(full));
        assert!(r.per_object.transformed_json_bytes.unwrap() < full);
        assert!(r.store_encoded_bytes > 0 && r.store_interned_bytes > 0);
        assert!(report.notes[0].contains("evaluated here"));
        let text = table(&report);
        assert!(text.contains("objects kept"), "{text}");
    }

    #[test]
    fn a_namespace_selector_counts_every_namespace_and_says_so() {
        let cfg = config(
            "- apiVersion: v1\n  kind: Pod\n  namespaceSelector:\n    matchLabels: {team: x}\n",
        );
        let report = run_on(&cfg, vec![pod("a", "x", "Job"), pod("b", "y", "Job")]);
        assert_eq!(report.resources[0].objects_kept, 2);
        assert_eq!(report.resources[0].left_out_by_filter, None);
        assert!(report.notes[0].contains("namespaceSelector (team=x)"));
        assert!(report.notes[0].contains("every namespace was counted as matching"));
    }

    #[test]
    fn objects_of_other_kinds_are_left_to_other_resources() {
        let cfg = config("- apiVersion: apps/v1\n  kind: Deployment\n");
        let report = run_on(&cfg, vec![pod("a", "x", "Job")]);
        assert_eq!(report.resources[0].objects_read, 0);
        assert_eq!(report.objects_not_configured, 1);
    }
}
