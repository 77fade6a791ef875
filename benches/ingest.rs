//! Ingest throughput without the network: the same recorded list and watch bodies decoded and
//! applied by informerd's pipeline and by a kube-rs reflector, beside a parse-only pass over the
//! same text (serde_json's floor: what kube-rs cannot go below).
//!
//! `cargo bench --bench ingest` (pods: `INGEST_PODS`, default 10000; timed iterations of each
//! pass: `INGEST_ITERATIONS`, default 5).
//!
//! Input, recorded once from the local control plane and cached in `benches/results/tmp/`
//! (git-ignored), so that later runs do not touch the network:
//! - list bodies: the `PodList` of each namespace `seed-0..19`, as the apiserver returned it
//!   (the pods are seeded first if the cluster has fewer; a recording of fewer pods than the
//!   cluster holds takes a page of `INGEST_PODS / 20` pods per namespace).
//! - watch bodies, built from the list items byte for byte: one `{"type":"ADDED","object":...}`
//!   line per pod (the object with the `kind` and `apiVersion` that watch events carry), then
//!   one `MODIFIED` line per pod with a new `resourceVersion` and one more label.
//!
//! Every pass runs in this process, on one thread, over the same bytes, with the allocator of
//! the informerd binary (jemalloc):
//! - parse-only: `serde_json::from_str::<IgnoredAny>` of each line (or list body);
//! - kube-rs typed reflector: each line decoded as `WatchEvent<Pod>` with `serde_json::from_str`
//!   (list bodies as `ObjectList<Pod>`), as kube-rs's watcher does, and applied to a reflector `Writer<Pod>`,
//!   one per namespace as a reflector per namespace stream would (`Init`, `InitApply` for the
//!   initial list (the ADDED lines of a streaming list, or the items of a list body),
//!   `InitDone`, then `Apply` for the MODIFIED lines); also with managedFields cleared before
//!   the writer, as `.modify(|p| p.managed_fields_mut().clear())` does;
//! - informerd: each line decoded by `fleet::decode::watch_line` (list bodies by
//!   `fleet::decode::list_body`: informerd's own reader, the profile's transform applied while
//!   reading), as the fleet's watch and list requests do, and handed to `ScopeIngest` (one
//!   per namespace, all feeding one store made by `fleet::Pipeline::new`) configured from YAML
//!   like the sidecar: the "controller" profile, and everything but managedFields;
//! - protobuf (issue 17: client-go reads built-in kinds as `application/vnd.kubernetes.protobuf`):
//!   the same pods recorded in protobuf, decoded with `k8s-pb`, alone (that format's floor) and
//!   converted to the controller profile's JSON, then through `ScopeIngest` as above; checked
//!   once to store exactly what informerd's JSON path stores (`ingest/protobuf.rs`).
//!
//! A pass's time covers decoding and applying; building the stores before and dropping them
//! after are outside it. The table shows the best (shortest) of the iterations, which are
//! interleaved so that a busy moment of the shared machine hits every pass alike;
//! `benches/results/ingest.json` has every iteration. Each pass is checked (objects held, changes
//! made, fields kept) and the run fails if one did not do its work. A breakdown of informerd's
//! path by stage follows the table. Figures are printed, never asserted: the target is informerd
//! at least 5 times the kube-rs typed reflector's events per second.
//!
//! Not measured, as it is the same for both clients: reading the HTTP body, splitting it into
//! lines and checking that they are UTF-8 (kube-rs's `LinesCodec`). MB is 10^6 bytes of input.

mod common;
#[path = "ingest/pod_json.rs"]
mod pod_json;
#[path = "ingest/protobuf.rs"]
mod protobuf;

use std::{
    fmt,
    hint::black_box,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, ensure, Context, Result};
use common::cluster::{count_pods, pods_resource};
use common::stats::round;
use common::{env_or, results};
use informerd::{
    config::{self, Config},
    fleet::{decode, Decoded, Decoding, Pipeline, Projected, ScopeIngest},
    store::{ObjectKey, Store},
    transform::{CONTROLLER_DROP, CONTROLLER_KEEP},
    vocab::reader::Reader,
};
use informerd_testkit::{ControlPlane, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{DynamicObject, ListParams},
    core::{ObjectList, WatchEvent},
    runtime::{reflector::store::Writer, watcher},
    ResourceExt,
};
use serde::{
    de::{DeserializeOwned, IgnoredAny},
    Deserialize,
};
use serde_json::{json, value::RawValue, Value};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const NAMESPACES: usize = 20;
const PREFIX: &str = "seed";
/// The most pods a run may add to what the cluster has.
const MAX_SEEDED: usize = 10_000;
/// The label each MODIFIED line adds.
const SEQ_LABEL: &str = "informerd.io/bench-seq";

fn main() -> Result<()> {
    let wanted: usize = env_or("INGEST_PODS", 10_000)?;
    let iterations = env_or("INGEST_ITERATIONS", 5usize)?.max(1);
    ensure!(
        wanted >= NAMESPACES,
        "INGEST_PODS must be at least {NAMESPACES}"
    );

    let started = Instant::now();
    let recording = recording(wanted)?;
    let mut bodies = Bodies::build(&recording)?;
    bodies.pb = protobuf::load(&recording.dir, &bodies)?;
    drop(recording);
    eprintln!(
        "input: {} pods in {} namespaces; list bodies {:.1} MB, watch lines {:.1} MB \
         ({} ADDED + {} MODIFIED); ready in {:.1}s",
        bodies.pods,
        bodies.namespaces.len(),
        mb(bodies.list_bytes()),
        mb(bodies.watch_bytes()),
        bodies.pods,
        bodies.pods,
        started.elapsed().as_secs_f64()
    );

    let controller = informerd_config(&bodies.namespaces, CONTROLLER_KEEP, CONTROLLER_DROP)?;
    let full = informerd_config(&bodies.namespaces, &[], CONTROLLER_DROP)?;
    protobuf::verify(&bodies, &controller)?;
    let passes = [
        Pass::Floor,
        Pass::KubeTyped { strip: false },
        Pass::KubeTyped { strip: true },
        Pass::Informerd {
            profile: Profile::Controller,
            config: &controller,
        },
        Pass::Informerd {
            profile: Profile::FullMinusManagedFields,
            config: &full,
        },
        Pass::Protobuf(protobuf::PbPass::Floor),
        Pass::Protobuf(protobuf::PbPass::Informerd {
            config: &controller,
        }),
    ];
    let mut rows: Vec<Row> = Vec::new();
    for input in [Input::Watch, Input::List] {
        for pass in &passes {
            rows.push(Row {
                pass: pass.label(),
                input,
                events: 0,
                bytes: match pass {
                    Pass::Protobuf(_) => bodies.pb.bytes(input),
                    _ => bodies.bytes(input),
                },
                times: Vec::new(),
            });
        }
    }
    for i in 0..iterations {
        eprintln!("iteration {}/{iterations}", i + 1);
        let mut r = rows.iter_mut();
        for input in [Input::Watch, Input::List] {
            for pass in &passes {
                let row = r.next().expect("a row per pass and input");
                let (events, secs) = pass.run(&bodies, input)?;
                row.events = events;
                row.times.push(secs);
            }
        }
    }

    let breakdown = breakdown(&bodies, &controller, iterations.min(3))?;
    let report = Report {
        pods: bodies.pods,
        namespaces: bodies.namespaces.len(),
        iterations,
        rows,
        breakdown,
    };
    print!("{report}");
    let written = results::write_json("ingest.json", &report.json())?;
    eprintln!("wrote {written}");
    Ok(())
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

// ---------------------------------------------------------------------------------------------
// The recording

/// The list body of each namespace, as the apiserver returned it.
struct Recording {
    lists: Vec<(String, String)>,
    /// Where it is cached.
    dir: PathBuf,
}

fn namespaces() -> Vec<String> {
    common::cluster::namespaces(PREFIX, NAMESPACES)
}

fn cache_dir(pods: usize) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("benches/results/tmp/ingest-{pods}-pods"))
}

/// The recording of `wanted` pods: from the cache, or from the control plane (then cached).
fn recording(wanted: usize) -> Result<Recording> {
    if let Some(r) = read_cache(&cache_dir(wanted))? {
        eprintln!("input: the recording in benches/results/tmp/ingest-{wanted}-pods");
        return Ok(r);
    }
    let cp = ControlPlane::get();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = rt.block_on(cp.client())?;
    let present = rt.block_on(count_pods(&client, &namespaces()))?;
    let mut wanted = wanted;
    if present < wanted {
        if wanted > present + MAX_SEEDED {
            eprintln!(
                "INGEST_PODS={wanted}: the cluster has {present} pods in {PREFIX}-*; a run seeds \
                 at most {MAX_SEEDED} more, so {} it is",
                present + MAX_SEEDED
            );
            wanted = present + MAX_SEEDED;
            if let Some(r) = read_cache(&cache_dir(wanted))? {
                return Ok(r);
            }
        }
        eprintln!("seeding {wanted} pods into {NAMESPACES} namespaces ({present} present)");
        eprintln!(
            "{}",
            cp.seed(PREFIX, wanted, NAMESPACES)
                .map_err(|e| anyhow!("{e}"))?
                .trim()
        );
    }
    // All of each namespace when every seeded pod is wanted; a first page of each otherwise.
    let limit = (wanted < present).then(|| wanted.div_ceil(NAMESPACES) as u32);
    let lists = rt.block_on(async {
        let mut lists = Vec::with_capacity(NAMESPACES);
        for ns in namespaces() {
            let mut lp = ListParams::default();
            if let Some(limit) = limit {
                lp = lp.limit(limit);
            }
            let request = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/pods"))
                .list(&lp)
                .map_err(|e| anyhow!("list request: {e}"))?;
            let body = client.request_text(request).await?;
            lists.push((ns, body));
        }
        Ok::<_, anyhow::Error>(lists)
    })?;
    let recording = Recording {
        lists,
        dir: cache_dir(wanted),
    };
    write_cache(&cache_dir(wanted), &recording)?;
    eprintln!(
        "input: recorded from the control plane into benches/results/tmp/ingest-{wanted}-pods"
    );
    Ok(recording)
}

fn read_cache(dir: &Path) -> Result<Option<Recording>> {
    if !dir.join("complete").exists() {
        return Ok(None);
    }
    let mut lists = Vec::with_capacity(NAMESPACES);
    for ns in namespaces() {
        let path = dir.join(format!("{ns}.json"));
        let body = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        lists.push((ns, body));
    }
    Ok(Some(Recording {
        lists,
        dir: dir.to_path_buf(),
    }))
}

fn write_cache(dir: &Path, recording: &Recording) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    for (ns, body) in &recording.lists {
        std::fs::write(dir.join(format!("{ns}.json")), body)?;
    }
    // Written last: a recording cut short is not reused.
    std::fs::write(dir.join("complete"), "")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The bodies

/// What every pass reads.
struct Bodies {
    namespaces: Vec<String>,
    /// Per namespace: its `PodList` body.
    lists: Vec<String>,
    /// Per namespace: the pods of its list in order, each listed once and watched once.
    added: Vec<Vec<Box<str>>>,
    modified: Vec<Vec<Box<str>>>,
    pods: usize,
    /// The same pods in protobuf.
    pb: protobuf::PbBodies,
}

#[derive(Deserialize)]
struct RawList<'a> {
    metadata: RawListMeta,
    #[serde(borrow)]
    items: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawListMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: String,
}

impl Bodies {
    fn build(recording: &Recording) -> Result<Bodies> {
        let mut parsed = Vec::with_capacity(recording.lists.len());
        for (ns, body) in &recording.lists {
            let list: RawList =
                serde_json::from_str(body).with_context(|| format!("the PodList of {ns}"))?;
            parsed.push(list);
        }
        // MODIFIED lines carry resourceVersions after every listed one.
        let mut next_rv = 1 + parsed
            .iter()
            .map(|l| l.metadata.resource_version.parse::<u64>())
            .try_fold(0u64, |m, rv| rv.map(|rv| m.max(rv)))
            .context("a list resourceVersion that is not a number")?;
        let mut bodies = Bodies {
            namespaces: Vec::new(),
            lists: Vec::new(),
            added: Vec::new(),
            modified: Vec::new(),
            pods: 0,
            pb: protobuf::PbBodies::default(),
        };
        for ((ns, body), list) in recording.lists.iter().zip(&parsed) {
            ensure!(!list.items.is_empty(), "{ns} has no pods in the recording");
            let mut added = Vec::with_capacity(list.items.len());
            let mut modified = Vec::with_capacity(list.items.len());
            for item in &list.items {
                let item = item.get().trim().as_bytes();
                added.push(watch_line("ADDED", item));
                let line = watch_line("MODIFIED", &modified_item(item, next_rv)?);
                check_modified(&line, next_rv)?;
                modified.push(line);
                next_rv += 1;
            }
            bodies.pods += list.items.len();
            bodies.namespaces.push(ns.clone());
            bodies.lists.push(body.clone());
            bodies.added.push(added);
            bodies.modified.push(modified);
        }
        Ok(bodies)
    }

    fn list_bytes(&self) -> usize {
        self.lists.iter().map(String::len).sum()
    }

    fn watch_bytes(&self) -> usize {
        self.added
            .iter()
            .chain(&self.modified)
            .flatten()
            .map(|l| l.len())
            .sum()
    }

    fn bytes(&self, input: Input) -> usize {
        match input {
            Input::Watch => self.watch_bytes(),
            Input::List => self.list_bytes(),
        }
    }

    fn per_namespace(&self, ns: usize) -> usize {
        self.added[ns].len()
    }
}

/// A watch event line as the apiserver writes it: the list item with `kind` and `apiVersion`
/// first.
fn watch_line(kind: &str, item: &[u8]) -> Box<str> {
    assert!(item.len() > 2 && item[0] == b'{' && item[1] == b'"');
    let mut line = Vec::with_capacity(item.len() + 64);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",");
    line.extend_from_slice(&item[1..]);
    line.push(b'}');
    String::from_utf8(line)
        .expect("built from UTF-8 text")
        .into_boxed_str()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The item with `metadata.resourceVersion` set to `rv` and the label [`SEQ_LABEL`] added,
/// everything else byte for byte (metadata is the first field of an item, so the first
/// `"resourceVersion":"` and `"labels":{` are its own; [`check_modified`] makes sure).
fn modified_item(item: &[u8], rv: u64) -> Result<Vec<u8>> {
    const RV: &[u8] = b"\"resourceVersion\":\"";
    const LABELS: &[u8] = b"\"labels\":{";
    let at = find(item, RV).context("a pod without resourceVersion")? + RV.len();
    let end = at
        + item[at..]
            .iter()
            .position(|&b| b == b'"')
            .context("an unterminated resourceVersion")?;
    let mut out = Vec::with_capacity(item.len() + 64);
    out.extend_from_slice(&item[..at]);
    out.extend_from_slice(rv.to_string().as_bytes());
    out.extend_from_slice(&item[end..]);
    let at = find(&out, LABELS).context("a seeded pod without labels")? + LABELS.len();
    let label = format!("\"{SEQ_LABEL}\":\"{rv}\",");
    out.splice(at..at, label.bytes());
    Ok(out)
}

fn check_modified(line: &str, rv: u64) -> Result<()> {
    let v: Value = serde_json::from_str(line).context("a MODIFIED line is not JSON")?;
    let meta = &v["object"]["metadata"];
    let rv = rv.to_string();
    ensure!(
        meta["resourceVersion"] == *rv
            && meta["labels"][SEQ_LABEL] == *rv
            && v["object"]["kind"] == "Pod",
        "a MODIFIED line does not carry its new resourceVersion and label in metadata"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The passes

#[derive(Clone, Copy, PartialEq, Eq)]
enum Input {
    /// The ADDED lines as a streaming initial list, then the MODIFIED lines.
    Watch,
    /// One `PodList` body per namespace as an initial list.
    List,
}

impl Input {
    fn label(self) -> &'static str {
        match self {
            Input::Watch => "watch",
            Input::List => "list",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Profile {
    Controller,
    FullMinusManagedFields,
}

enum Pass<'a> {
    Floor,
    KubeTyped {
        strip: bool,
    },
    Informerd {
        profile: Profile,
        config: &'a Config,
    },
    Protobuf(protobuf::PbPass<'a>),
}

impl Pass<'_> {
    fn label(&self) -> &'static str {
        match self {
            Pass::Floor => "parse-only floor (IgnoredAny)",
            Pass::KubeTyped { strip: false } => "kube-rs typed reflector",
            Pass::KubeTyped { strip: true } => "kube-rs typed reflector, managedFields cleared",
            Pass::Informerd {
                profile: Profile::Controller,
                ..
            } => "informerd, controller profile",
            Pass::Informerd {
                profile: Profile::FullMinusManagedFields,
                ..
            } => "informerd, all but managedFields",
            Pass::Protobuf(pass) => pass.label(),
        }
    }

    /// Runs the pass once; returns the events it handled and its time in seconds. The time
    /// stops before the result is checked and dropped.
    fn run(&self, bodies: &Bodies, input: Input) -> Result<(usize, f64)> {
        match self {
            Pass::Floor => {
                let start = Instant::now();
                let events = floor(bodies, input)?;
                Ok((events, start.elapsed().as_secs_f64()))
            }
            Pass::KubeTyped { strip } => {
                let start = Instant::now();
                let (events, writers) = kube_typed(bodies, input, *strip)?;
                let secs = start.elapsed().as_secs_f64();
                check_kube(bodies, input, *strip, &writers)?;
                drop(writers);
                Ok((events, secs))
            }
            Pass::Informerd { profile, config } => {
                let pipeline = Pipeline::new(&config.change_log, &config.resources[0]);
                let start = Instant::now();
                let (events, changes) = informerd_pass(bodies, input, &pipeline)?;
                let secs = start.elapsed().as_secs_f64();
                check_informerd(bodies, input, *profile, &pipeline.store, changes)?;
                drop(pipeline);
                Ok((events, secs))
            }
            Pass::Protobuf(pass) => pass.run(bodies, input),
        }
    }
}

fn floor(bodies: &Bodies, input: Input) -> Result<usize> {
    match input {
        Input::Watch => {
            let mut events = 0;
            for line in bodies.added.iter().chain(&bodies.modified).flatten() {
                black_box(serde_json::from_str::<IgnoredAny>(black_box(line))?);
                events += 1;
            }
            Ok(events)
        }
        Input::List => {
            for body in &bodies.lists {
                black_box(serde_json::from_str::<IgnoredAny>(black_box(body))?);
            }
            Ok(bodies.pods)
        }
    }
}

fn kube_typed(bodies: &Bodies, input: Input, strip: bool) -> Result<(usize, Vec<Writer<Pod>>)> {
    let mut writers: Vec<Writer<Pod>> = (0..bodies.namespaces.len())
        .map(|_| Writer::default())
        .collect();
    let modify = |mut pod: Pod| {
        if strip {
            pod.managed_fields_mut().clear();
        }
        pod
    };
    let events = feed(
        bodies,
        input,
        &serde_decoder(),
        |ns, event: watcher::Event<Pod>| {
            let event = match event {
                watcher::Event::InitApply(pod) => watcher::Event::InitApply(modify(pod)),
                watcher::Event::Apply(pod) => watcher::Event::Apply(modify(pod)),
                other => other,
            };
            writers[ns].apply_watcher_event(&event);
            black_box(&event);
        },
    )?;
    Ok((events, writers))
}

/// How a client decodes the bodies into `T`: a watch line, and a list body.
struct Decoder<T: Clone> {
    line: fn(&str) -> Result<WatchEvent<T>>,
    list: fn(&str) -> Result<ObjectList<T>>,
}

/// kube-rs's decoding: serde_json from the line's text, as `Client::request_events` and
/// `Api::list` decode.
fn serde_decoder<T: DeserializeOwned + Clone>() -> Decoder<T> {
    Decoder {
        line: |line| Ok(serde_json::from_str(line)?),
        list: |body| Ok(serde_json::from_str(body)?),
    }
}

/// informerd's decoding, the fleet's own (`fleet::decode`, as its watch and list requests
/// decode): the transform of the `Decoding` scope applied while reading.
fn fleet_decoder() -> Decoder<Projected> {
    Decoder {
        line: |line| {
            decode::watch_line(line)
                .context("a watch line decoded as nothing")?
                .map_err(|e| anyhow!("{e}"))
        },
        list: |body| Ok(decode::list_body(body)?),
    }
}

/// Hands the bodies to `handle` as a watcher of each namespace (by index) would, each object
/// decoded by `decoder`: for the watch input `Init`, an `InitApply` per ADDED line, `InitDone`,
/// then an `Apply` per MODIFIED line; for the list input, the body decoded, then `Init`, an
/// `InitApply` per item, `InitDone`. Returns the objects handed over.
fn feed<T: Clone>(
    bodies: &Bodies,
    input: Input,
    decoder: &Decoder<T>,
    mut handle: impl FnMut(usize, watcher::Event<T>),
) -> Result<usize> {
    let mut events = 0;
    let event = |line: &str, added: bool| event_object((decoder.line)(black_box(line))?, added);
    match input {
        Input::Watch => {
            for (ns, lines) in bodies.added.iter().enumerate() {
                handle(ns, watcher::Event::Init);
                for line in lines {
                    handle(ns, watcher::Event::InitApply(event(line, true)?));
                    events += 1;
                }
                handle(ns, watcher::Event::InitDone);
            }
            for (ns, lines) in bodies.modified.iter().enumerate() {
                for line in lines {
                    handle(ns, watcher::Event::Apply(event(line, false)?));
                    events += 1;
                }
            }
        }
        Input::List => {
            for (ns, body) in bodies.lists.iter().enumerate() {
                let list = (decoder.list)(black_box(body))?;
                handle(ns, watcher::Event::Init);
                for obj in list.items {
                    handle(ns, watcher::Event::InitApply(obj));
                    events += 1;
                }
                handle(ns, watcher::Event::InitDone);
            }
        }
    }
    Ok(events)
}

/// The object of an event that must be an ADDED one (`added`) or a MODIFIED one.
fn event_object<T>(event: WatchEvent<T>, added: bool) -> Result<T> {
    match event {
        WatchEvent::Added(obj) if added => Ok(obj),
        WatchEvent::Modified(obj) if !added => Ok(obj),
        _ if added => bail!("an ADDED line decoded as another event"),
        _ => bail!("a MODIFIED line decoded as another event"),
    }
}

fn check_kube(bodies: &Bodies, input: Input, strip: bool, writers: &[Writer<Pod>]) -> Result<()> {
    for (ns, writer) in writers.iter().enumerate() {
        let state = writer.as_reader().state();
        ensure!(
            state.len() == bodies.per_namespace(ns),
            "kube-rs reflector of {}: {} pods held, {} expected",
            bodies.namespaces[ns],
            state.len(),
            bodies.per_namespace(ns)
        );
        let pod = &state[0];
        let modified = pod.labels().contains_key(SEQ_LABEL);
        ensure!(
            modified == (input == Input::Watch),
            "kube-rs reflector: the MODIFIED events were not applied"
        );
        let managed = pod
            .metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| !m.is_empty());
        ensure!(
            managed != strip,
            "kube-rs reflector: managedFields {}",
            if strip { "kept" } else { "missing" }
        );
    }
    Ok(())
}

fn informerd_config(namespaces: &[String], keep: &[&str], drop: &[&str]) -> Result<Config> {
    let yaml = SidecarConfig::new()
        .resource(pods_resource(namespaces, keep, drop))
        .to_yaml();
    config::parse("ingest-bench.yaml", &yaml).map_err(|e| anyhow!("{e}"))
}

/// The fleet's path: its own decoding into `Projected` (the transform applied while
/// decoding, `fleet::decode`), then `ScopeIngest` (one per namespace, as the fleet runs them) into one store.
/// Returns events and changes made.
fn informerd_pass(bodies: &Bodies, input: Input, pipeline: &Pipeline) -> Result<(usize, u64)> {
    let mut scopes = scopes(bodies, pipeline);
    // As the fleet's streams decode: the transform applied while decoding (no filter here).
    let _decoding = Decoding::enter(pipeline.decoding());
    let events = feed(bodies, input, &fleet_decoder(), |ns, event| {
        black_box(scopes[ns].handle(event));
    })?;
    Ok((events, changes(&scopes, "informerd")?))
}

/// A `ScopeIngest` per namespace, all feeding `pipeline`'s store.
fn scopes(bodies: &Bodies, pipeline: &Pipeline) -> Vec<ScopeIngest> {
    bodies
        .namespaces
        .iter()
        .map(|ns| ScopeIngest::new(pipeline.clone(), Some(ns.clone())))
        .collect()
}

/// The changes the scopes made; an error if one filtered out or refused an object.
fn changes(scopes: &[ScopeIngest], pass: &str) -> Result<u64> {
    let mut changes = 0;
    for scope in scopes {
        let c = scope.counters;
        ensure!(
            c.filtered_out == 0 && c.refused == 0,
            "{pass}: {c:?} (nothing may be filtered out or refused)"
        );
        changes += c.changes;
    }
    Ok(changes)
}

fn check_informerd(
    bodies: &Bodies,
    input: Input,
    profile: Profile,
    store: &Store,
    changes: u64,
) -> Result<()> {
    ensure!(
        store.len() == bodies.pods,
        "informerd: the store holds {} objects, {} expected",
        store.len(),
        bodies.pods
    );
    let expected = match input {
        Input::Watch => 2 * bodies.pods,
        Input::List => bodies.pods,
    } as u64;
    ensure!(
        changes == expected && store.revision() == expected,
        "informerd: {changes} changes (store revision {}), {expected} expected",
        store.revision()
    );
    for (ns, namespace) in bodies.namespaces.iter().enumerate() {
        let first: Value = serde_json::from_str(&bodies.added[ns][0])?;
        let name = first["object"]["metadata"]["name"]
            .as_str()
            .context("a pod without a name")?;
        let stored = store
            .get(&ObjectKey::new(Some(namespace), name))
            .with_context(|| format!("informerd: {namespace}/{name} is not in the store"))?;
        let obj = stored.as_json();
        ensure!(
            obj["metadata"].get("managedFields").is_none(),
            "informerd: managedFields kept"
        );
        ensure!(
            obj["metadata"]["labels"].get(SEQ_LABEL).is_some() == (input == Input::Watch),
            "informerd: the MODIFIED events were not applied"
        );
        ensure!(
            obj["spec"].get("containers").is_some() == (profile == Profile::FullMinusManagedFields)
                && obj["spec"]["nodeName"] == first["object"]["spec"]["nodeName"],
            "informerd: the stored spec is not what the profile keeps"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Where informerd's time goes

/// One stage's time, summed over the namespaces, best of the iterations.
struct Stage {
    label: &'static str,
    secs: f64,
}

impl Stage {
    fn micros_per_event(&self, events: usize) -> f64 {
        self.secs * 1e6 / events as f64
    }

    /// The cells every table of stages starts with: `| label | seconds | µs/event |`.
    fn cells(&self, events: usize) -> String {
        format!(
            "| {} | {:.3} | {:.1} |",
            self.label,
            self.secs,
            self.micros_per_event(events)
        )
    }
}

/// The breakdown's stages, in the order of its timings.
const STAGES: [&str; 3] = [
    "decode::watch_line (informerd's reader, controller profile applied while decoding, onto a tape)",
    "Writer::apply_tape_within, ADDED events (encode from the tape, intern, index, log)",
    "Writer::apply_tape_within, MODIFIED events (replaces the old version; no index here, so it is not decoded)",
];

/// The decodings informerd does not use, each timed in a pass of its own.
const ALTERNATIVES: [&str; 6] = [
    "decode WatchEvent<Pod> (kube-rs typed; decode only, no reflector)",
    "decode WatchEvent<serde_json::Value> (whole objects)",
    "decode WatchEvent<DynamicObject> (informerd's path before projecting while decoding)",
    "decode WatchEvent<IgnoredAny> (kube-rs's event envelope, the object skipped: the floor through kube-rs)",
    "decode::watch_line alone (informerd's decoding, no store between the lines)",
    "Reader::skip of the whole line (informerd's reader finding the line's end: its floor)",
];

fn stages(labels: &[&'static str], times: &[Duration]) -> Vec<Stage> {
    labels
        .iter()
        .zip(times)
        .map(|(label, t)| Stage {
            label,
            secs: t.as_secs_f64(),
        })
        .collect()
}

/// The time to decode every line as `T` through serde_json, and nothing else.
fn decode_all<'a, T: DeserializeOwned>(
    lines: impl Iterator<Item = &'a Box<str>>,
) -> Result<Duration> {
    time_all(lines, |line| Ok(serde_json::from_str::<T>(line)?))
}

/// The time `f` takes over every line (its result dropped), and nothing else.
fn time_all<'a, T>(
    lines: impl Iterator<Item = &'a Box<str>>,
    f: impl Fn(&str) -> Result<T>,
) -> Result<Duration> {
    let start = Instant::now();
    for line in lines {
        black_box(f(black_box(line))?);
    }
    Ok(start.elapsed())
}

struct Breakdown {
    events: usize,
    /// informerd's stages, in order; they add up to about the whole path.
    stages: Vec<Stage>,
    /// The same bytes decoded other ways (not informerd's path today), for comparison.
    alternatives: Vec<Stage>,
    /// The average watch line, and the average JSON of what the profile stores of it.
    line_bytes: usize,
    kept_bytes: usize,
}

/// informerd's path on the watch lines (controller profile) stage by stage: each event goes
/// through the stages one after the other, as in the pipeline, with the clock read between
/// stages; then the same lines decoded in ways informerd does not use today, each in a pass of
/// its own. Best of `iterations` for every stage.
fn breakdown(bodies: &Bodies, config: &Config, iterations: usize) -> Result<Breakdown> {
    let rc = &config.resources[0];
    let transform = rc.transform.clone();
    let mut best: Vec<Stage> = Vec::new();
    let mut best_alt: Vec<Stage> = Vec::new();
    let keep_best = |best: &mut Vec<Stage>, run: Vec<Stage>| {
        if best.is_empty() {
            *best = run;
        } else {
            for (b, r) in best.iter_mut().zip(run) {
                b.secs = b.secs.min(r.secs);
            }
        }
    };
    let added = || bodies.added.iter().flatten();
    let modified = || bodies.modified.iter().flatten();
    let all = || added().chain(modified());
    let mut kept_bytes = 0;
    for _ in 0..iterations {
        // [decode, store ADDED, store MODIFIED]
        let mut t = [Duration::ZERO; 3];
        let store = Pipeline::new(&config.change_log, rc).store;
        let decoding = Decoding::enter(Some(&transform));
        for (i, line) in all().enumerate() {
            let t0 = Instant::now();
            let obj: Projected = match (fleet_decoder().line)(black_box(line))? {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
                _ => bail!("an unexpected event"),
            };
            let t1 = Instant::now();
            black_box(match obj.object {
                Decoded::Tape(tape) => store.apply_tape_within(&tape, u64::MAX)?,
                Decoded::Json(value) => store.apply(value)?,
            });
            let t2 = Instant::now();
            t[0] += t1 - t0;
            t[if i < bodies.pods { 1 } else { 2 }] += t2 - t1;
        }
        drop(decoding);
        ensure!(
            store.len() == bodies.pods && store.revision() == 2 * bodies.pods as u64,
            "breakdown: the store holds {} objects at revision {}",
            store.len(),
            store.revision()
        );
        let (_, stored) = store.list(None);
        kept_bytes = stored
            .iter()
            .map(|o| o.to_json_bytes().len())
            .sum::<usize>()
            / bodies.pods;
        drop(stored);
        drop(store);
        keep_best(&mut best, stages(&STAGES, &t));

        // The same lines, decoded in ways informerd does not use.
        let a = [
            decode_all::<WatchEvent<Pod>>(all())?,
            decode_all::<WatchEvent<Value>>(all())?,
            decode_all::<WatchEvent<DynamicObject>>(all())?,
            decode_all::<WatchEvent<IgnoredAny>>(all())?,
            {
                let _decoding = Decoding::enter(Some(&transform));
                let line = fleet_decoder().line;
                time_all(all(), line)?
            },
            time_all(all(), |l| Ok(Reader::new(l).skip()?))?,
        ];
        keep_best(&mut best_alt, stages(&ALTERNATIVES, &a));
    }
    Ok(Breakdown {
        events: 2 * bodies.pods,
        stages: best,
        alternatives: best_alt,
        line_bytes: bodies.watch_bytes() / (2 * bodies.pods),
        kept_bytes,
    })
}

// ---------------------------------------------------------------------------------------------
// The report

struct Row {
    pass: &'static str,
    input: Input,
    events: usize,
    bytes: usize,
    /// Seconds of each iteration.
    times: Vec<f64>,
}

impl Row {
    fn best(&self) -> f64 {
        self.times.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn median(&self) -> f64 {
        let mut t = self.times.clone();
        t.sort_by(f64::total_cmp);
        let n = t.len();
        if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2.0
        }
    }

    fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.best()
    }

    fn mb_per_sec(&self) -> f64 {
        mb(self.bytes) / self.best()
    }
}

struct Report {
    pods: usize,
    namespaces: usize,
    iterations: usize,
    rows: Vec<Row>,
    breakdown: Breakdown,
}

impl Report {
    fn row(&self, input: Input, pass: &str) -> &Row {
        self.rows
            .iter()
            .find(|r| r.input == input && r.pass == pass)
            .expect("every pass ran on every input")
    }

    fn kube(&self, input: Input) -> &Row {
        self.row(input, Pass::KubeTyped { strip: false }.label())
    }

    fn floor(&self, input: Input) -> &Row {
        self.row(input, Pass::Floor.label())
    }

    /// (this pass's events/s ÷ kube-rs typed's, the floor's events/s ÷ this pass's)
    fn ratios(&self, row: &Row) -> (f64, f64) {
        let eps = row.events_per_sec();
        (
            eps / self.kube(row.input).events_per_sec(),
            self.floor(row.input).events_per_sec() / eps,
        )
    }

    fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let (vs_kube, floor_over) = self.ratios(r);
                json!({
                    "pass": r.pass,
                    "input": r.input.label(),
                    "events": r.events,
                    "inputBytes": r.bytes,
                    "bestSeconds": r.best(),
                    "medianSeconds": r.median(),
                    "iterationSeconds": r.times,
                    "eventsPerSecond": r.events_per_sec().round(),
                    "megabytesPerSecond": round(r.mb_per_sec(), 1),
                    "timesKubeTyped": round(vs_kube, 2),
                    "floorTimesThis": round(floor_over, 2),
                })
            })
            .collect();
        let b = &self.breakdown;
        let stages = |stages: &[Stage]| -> Vec<Value> {
            stages
                .iter()
                .map(|s| {
                    json!({
                        "stage": s.label,
                        "bestSeconds": s.secs,
                        "microsecondsPerEvent": round(s.micros_per_event(b.events), 1),
                    })
                })
                .collect()
        };
        let headline = self.row(Input::Watch, "informerd, controller profile");
        json!({
            "benchmark": "ingest",
            "what": "events per second decoding and applying the same recorded bodies, in process, one thread",
            "statistic": "best of the iterations (median and every iteration also given)",
            "pods": self.pods,
            "namespaces": self.namespaces,
            "iterations": self.iterations,
            "target": "informerd (controller profile, watch) at least 5 times the kube-rs typed reflector's events per second",
            "informerdTimesKubeTyped": round(self.ratios(headline).0, 2),
            "rows": rows,
            "protobuf": protobuf::json(self),
            "breakdown": {
                "what": "informerd's path on the watch lines, controller profile, stage by stage with the clock read between stages (best of the iterations per stage); alternatives: the same lines decoded other ways, each in a pass of its own",
                "events": b.events,
                "averageLineBytes": b.line_bytes,
                "averageStoredJsonBytes": b.kept_bytes,
                "stages": stages(&b.stages),
                "alternatives": stages(&b.alternatives),
            },
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\n## Ingest throughput: {} pods in {} namespaces, best of {} iterations, one thread\n",
            self.pods, self.namespaces, self.iterations
        )?;
        writeln!(
            f,
            "| pass | input | events | seconds | events/s | MB/s | × kube-rs typed | floor ÷ pass |"
        )?;
        writeln!(f, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")?;
        for r in &self.rows {
            let (vs_kube, floor_over) = self.ratios(r);
            writeln!(
                f,
                "| {} | {} | {} | {:.3} | {:.0} | {:.1} | {:.2} | {:.2} |",
                r.pass,
                r.input.label(),
                r.events,
                r.best(),
                r.events_per_sec(),
                r.mb_per_sec(),
                vs_kube,
                floor_over
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "watch: {} ADDED lines as streaming initial lists, then {} MODIFIED lines; list: one \
             PodList body per namespace. × kube-rs typed: events/s ÷ the kube-rs typed \
             reflector's on the same input; floor ÷ pass: the parse-only pass's events/s ÷ this \
             pass's (1.00 would be as fast as parsing gets).",
            self.pods, self.pods
        )?;
        for input in [Input::Watch, Input::List] {
            let row = self.row(input, "informerd, controller profile");
            let (vs_kube, _) = self.ratios(row);
            let floor = self.floor(input).events_per_sec() / self.kube(input).events_per_sec();
            writeln!(
                f,
                "{}: informerd (controller profile) {vs_kube:.2}× the kube-rs typed reflector \
                 (target ≥ 5×: {}); the parse-only floor is {floor:.2}× it.",
                input.label(),
                if vs_kube >= 5.0 { "met" } else { "not met" }
            )?;
        }
        write!(f, "{}", protobuf::conclusion(self))?;

        let b = &self.breakdown;
        let sum: f64 = b.stages.iter().map(|s| s.secs).sum();
        let whole = self
            .row(Input::Watch, "informerd, controller profile")
            .best();
        writeln!(
            f,
            "\n### Where informerd's time goes: watch input, controller profile, {} events\n",
            b.events
        )?;
        writeln!(f, "| stage | seconds | µs/event | share |")?;
        writeln!(f, "| --- | ---: | ---: | ---: |")?;
        for s in &b.stages {
            writeln!(f, "{} {:.0}% |", s.cells(b.events), 100.0 * s.secs / sum)?;
        }
        writeln!(
            f,
            "| sum of the stages (the whole pass: {whole:.3}s) | {sum:.3} | {:.1} | 100% |",
            sum * 1e6 / b.events as f64
        )?;
        writeln!(
            f,
            "\nEach event goes through the stages in turn, the clock read between them; µs/event \
             divides by all {} events, so that the rows add up. A watch line is {} bytes on \
             average; the controller profile stores {} bytes of JSON of it.",
            b.events, self.breakdown.line_bytes, self.breakdown.kept_bytes
        )?;
        writeln!(
            f,
            "\nThe same lines, decoded in ways informerd does not use (decoding only):\n"
        )?;
        writeln!(f, "| alternative | seconds | µs/event |")?;
        writeln!(f, "| --- | ---: | ---: |")?;
        for s in &b.alternatives {
            writeln!(f, "{}", s.cells(b.events))?;
        }
        Ok(())
    }
}
