//! The kube-rs peer of informerd's memory benchmark: one process that caches the cluster's Pods
//! the way a kube-rs controller does, and reports what that costs.
//!
//! ```text
//! peer-kube --kubeconfig FILE [--mode typed|typed-strip|metadata]
//!           [--namespaces all|a,b,c] [--hold 10s] [--timeout 30m] [--initial-list list|stream]
//! ```
//!
//! Modes (each runs one `watcher` and one `reflector` store per namespace, or one cluster-wide
//! pair for `all`; a reflector's store must not be fed by several watchers):
//!
//! - `typed`: `reflector(writer, watcher(Api::<Pod>::namespaced(..), config).default_backoff())`,
//!   the stream polled with `.applied_objects().for_each(..)` as kube's documentation shows;
//!   objects are stored as they arrive (`Arc<Pod>` of k8s-openapi).
//! - `typed-strip`: the same, with `.modify(|pod| pod.managed_fields_mut().clear())`
//!   (`WatchStreamExt::modify`) between the watcher and the reflector, the trimming kube's
//!   reflector documentation recommends.
//! - `metadata`: a watcher of `Api::<PartialObjectMeta<Pod>>`, which kube 5 serves with
//!   metadata-only requests (`kube::runtime::metadata_watcher` is deprecated since kube 3.1 in
//!   favour of exactly this); objects are `PartialObjectMeta<Pod>`, managedFields included.
//!
//! Client settings are kube's defaults: `Client::try_from(Config)` built from the kubeconfig,
//! one client shared by the watchers, JSON on the wire (kube has no protobuf), and
//! `watcher::Config::default()`, whose initial list strategy is `ListWatch`: a paginated list of
//! 500 objects per page at the most recent resourceVersion (a consistent read), then a watch
//! from the list's resourceVersion. `--initial-list stream` switches to `.streaming_lists()` (a
//! watch with `sendInitialEvents`), for comparison with client-go's default.
//!
//! jemalloc (tikv-jemallocator, default settings) is the global allocator, as it is in informerd.
//! What is measured, in this order:
//!
//! 1. Baseline, after the client is built and before any watcher exists: jemalloc
//!    `stats.allocated` (after advancing its epoch); VmRSS from /proc/self/status; user+sys CPU
//!    (getrusage).
//! 2. `sync_seconds`: from creating the watchers to every store's `wait_until_ready()` (the
//!    reflector marks a store ready at the end of its initial list); `cpu_seconds`: user+sys CPU
//!    spent over the same interval.
//! 3. `objects`: the objects in the stores, summed over namespaces.
//! 4. After `--hold` (the watchers keep running, so that RSS settles): `heap_bytes` = jemalloc
//!    allocated - baseline (what the stores, watchers and connections hold); `rss_bytes` =
//!    VmRSS; `peak_rss_bytes` = VmHWM (the high-water mark of the whole run, in practice reached
//!    during the initial sync).
//!
//! The one line on stdout is JSON:
//!
//! ```text
//! {"system":"kube-rs","profile":MODE,"objects":N,"sync_seconds":S,"heap_bytes":B,
//!  "heap_bytes_per_object":B/N,"rss_bytes":R,"rss_baseline_bytes":R0,
//!  "rss_bytes_per_object":(R-R0)/N,"peak_rss_bytes":P,"cpu_seconds":C,
//!  "initial_list":"list"|"watch-list","namespaces":K}
//! ```
//!
//! `initial_list` reports the strategy configured. Logs go to stderr. The exit status is
//! non-zero when the stores are not ready in `--timeout`.

use std::{
    any::Any,
    fmt::Debug,
    future::ready,
    hash::Hash,
    path::PathBuf,
    time::{Duration, Instant},
};

use clap::{Parser, ValueEnum};
use futures::{future::join_all, Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::Api,
    config::{KubeConfigOptions, Kubeconfig},
    core::PartialObjectMeta,
    runtime::{
        reflector::{self, Lookup, Store},
        watcher, WatchStreamExt,
    },
    Client, Config, ResourceExt,
};
use serde::Serialize;
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The line printed on stdout, fields in this order.
#[derive(Serialize)]
struct Report {
    system: &'static str,
    profile: &'static str,
    objects: usize,
    sync_seconds: f64,
    heap_bytes: i64,
    heap_bytes_per_object: f64,
    rss_bytes: u64,
    rss_baseline_bytes: u64,
    rss_bytes_per_object: f64,
    peak_rss_bytes: u64,
    cpu_seconds: f64,
    initial_list: &'static str,
    namespaces: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    Typed,
    TypedStrip,
    Metadata,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum InitialList {
    /// kube's default (`InitialListStrategy::ListWatch`): paginated list, then watch
    List,
    /// `watcher::Config::streaming_lists()`: a watch with sendInitialEvents
    Stream,
}

/// Caches the cluster's Pods with a kube-rs reflector and prints one JSON line of measurements.
#[derive(Parser, Debug)]
#[command(name = "peer-kube")]
struct Args {
    /// kubeconfig file
    #[arg(long)]
    kubeconfig: PathBuf,
    #[arg(long, value_enum, default_value = "typed")]
    mode: Mode,
    /// comma-separated namespaces, or "all" for one cluster-wide watcher
    #[arg(long, default_value = "all")]
    namespaces: String,
    /// how long to keep running after sync before measuring (e.g. 10s, 500ms, 1m)
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hold: Duration,
    /// give up when not synced by then
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    timeout: Duration,
    #[arg(long, value_enum, default_value = "list")]
    initial_list: InitialList,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: not a duration (10s, 500ms, 2m, 1h)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unit must be ms, s, m or h")),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn allocated() -> u64 {
    // stats are cached until the epoch advances; without jemalloc stats the figure is 0
    match epoch::advance().and_then(|_| stats::allocated::read()) {
        Ok(n) => n as u64,
        Err(e) => {
            eprintln!("peer-kube: jemalloc stats: {e}");
            0
        }
    }
}

/// A "kB" field (VmRSS, VmHWM) of /proc/self/status, in bytes.
fn proc_status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// User + system CPU time of this process so far.
#[allow(unsafe_code)] // getrusage through libc; the workspace denies unsafe code elsewhere.
fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer it is given, which is valid and
    // zero-initialised; we read it only when the call succeeded.
    let ru = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) != 0 {
            return 0.0;
        }
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Feeds one watcher stream into a new reflector store, polls it on its own task, and returns
/// the store's reader.
fn reflect<K, S>(stream: S) -> Store<K>
where
    K: Lookup + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let (reader, writer) = reflector::store();
    let rf = reflector::reflector(writer, stream);
    tokio::spawn(rf.applied_objects().for_each(|o| {
        if let Err(e) = o {
            eprintln!("peer-kube: watch error: {e}");
        }
        ready(())
    }));
    reader
}

/// Waits until every store has finished its initial list; returns the objects they hold and
/// the stores themselves (kept alive by the caller until measured).
async fn synced<K>(stores: Vec<Store<K>>) -> Result<(usize, Box<dyn Any + Send>), BoxError>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    for r in join_all(stores.iter().map(|s| s.wait_until_ready())).await {
        r?;
    }
    let objects = stores.iter().map(Store::len).sum();
    Ok((objects, Box::new(stores)))
}

fn apis<K>(client: &Client, namespaces: &Option<Vec<String>>) -> Vec<Api<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespaces {
        None => vec![Api::all(client.clone())],
        Some(list) => list
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect(),
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}

#[tokio::main]
async fn main() {
    if let Err(e) = run(Args::parse()).await {
        eprintln!("peer-kube: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), BoxError> {
    let namespaces: Option<Vec<String>> = if args.namespaces == "all" {
        None
    } else {
        let list: Vec<String> = args
            .namespaces
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if list.is_empty() {
            return Err(format!("--namespaces {:?} names no namespace", args.namespaces).into());
        }
        Some(list)
    };
    let scopes = namespaces.as_ref().map_or(1, Vec::len);

    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;

    let mut wc = watcher::Config::default();
    let initial_list = match args.initial_list {
        InitialList::List => "list",
        InitialList::Stream => {
            wc = wc.streaming_lists();
            "watch-list"
        }
    };
    let profile = match args.mode {
        Mode::Typed => "typed",
        Mode::TypedStrip => "typed-strip",
        Mode::Metadata => "metadata",
    };
    eprintln!(
        "peer-kube: mode {profile}, {scopes} watcher(s), initial list {initial_list}, hold {:?}",
        args.hold
    );

    let heap_base = allocated();
    let rss_base = proc_status_bytes("VmRSS");
    let cpu_base = cpu_seconds();
    let started = Instant::now();

    let sync = async {
        match args.mode {
            Mode::Typed => {
                let stores = apis::<Pod>(&client, &namespaces)
                    .into_iter()
                    .map(|api| reflect(watcher(api, wc.clone()).default_backoff()))
                    .collect();
                synced(stores).await
            }
            Mode::TypedStrip => {
                let stores = apis::<Pod>(&client, &namespaces)
                    .into_iter()
                    .map(|api| {
                        reflect(
                            watcher(api, wc.clone())
                                .default_backoff()
                                .modify(|pod| pod.managed_fields_mut().clear()),
                        )
                    })
                    .collect();
                synced(stores).await
            }
            Mode::Metadata => {
                let stores = apis::<PartialObjectMeta<Pod>>(&client, &namespaces)
                    .into_iter()
                    .map(|api| reflect(watcher(api, wc.clone()).default_backoff()))
                    .collect();
                synced(stores).await
            }
        }
    };
    let (objects, stores) = tokio::time::timeout(args.timeout, sync)
        .await
        .map_err(|_| format!("not synced after {:?}", args.timeout))??;
    let sync_seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_base;
    eprintln!(
        "peer-kube: synced {objects} objects in {sync_seconds:.2}s; holding {:?}",
        args.hold
    );

    tokio::time::sleep(args.hold).await;
    let heap = allocated() as i64 - heap_base as i64;
    let rss = proc_status_bytes("VmRSS");
    let peak = proc_status_bytes("VmHWM");
    let per_object = |b: i64| {
        if objects == 0 {
            0.0
        } else {
            round(b as f64 / objects as f64, 1)
        }
    };
    let report = Report {
        system: "kube-rs",
        profile,
        objects,
        sync_seconds: round(sync_seconds, 3),
        heap_bytes: heap,
        heap_bytes_per_object: per_object(heap),
        rss_bytes: rss,
        rss_baseline_bytes: rss_base,
        rss_bytes_per_object: per_object(rss as i64 - rss_base as i64),
        peak_rss_bytes: peak,
        cpu_seconds: round(cpu, 3),
        initial_list,
        namespaces: scopes,
    };
    println!("{}", serde_json::to_string(&report)?);
    drop(stores);
    Ok(())
}
