//! Memory per pod: informerd's three profiles against the caches kube-rs and client-go users
//! build, over the same seeded pods of the local control plane, at several pod counts.
//!
//! `make bench` (starts the control plane, builds the peers, then `cargo bench --bench compare`).
//! Settings, all optional:
//!
//! - `BENCH_PODS`: pod counts, run in increasing order (default `10000,50000,100000,150000`);
//! - `BENCH_NAMESPACES`: namespaces the pods are spread over (default 20);
//! - `BENCH_SYSTEMS`: which systems (default all nine: `informerd:full`,
//!   `informerd:controller`, `informerd:metadata`, `kube-rs:typed`, `kube-rs:typed-strip`,
//!   `kube-rs:metadata`, `client-go:informer`, `client-go:informer-strip`, `client-go:metadata`);
//! - `BENCH_PREFIX`: namespace prefix of the pods (default `compare`: namespaces `compare-0..`);
//! - `BENCH_HOLD_SECONDS`: how long each system keeps running after sync before its steady
//!   figures are read (default 10, the peers' own default);
//! - `BENCH_RESERVE_GB`: memory left to the rest of the machine (the apiserver grows while it
//!   serves the lists) when deciding whether a system fits (default 2);
//! - `BENCH_SEED`: how missing pods are written: `apply` (default: `seed pods` through the
//!   apiserver, about 65 pods a second on two cores) or `etcd` (`seed pods --etcd`: the same
//!   pods, with the managedFields the apiserver would record, written straight into etcd, a
//!   few thousand a second; owners are not written, so only for a control plane without the
//!   garbage collector, as `make bench-large` starts);
//! - `BENCH_OUT`: base name of the result files (default `compare`; `make bench-large` writes
//!   `compare-500k`);
//! - `BENCH_PEER_KUBE`: the peer-kube binary (default: next to the informerd binary cargo built,
//!   i.e. `cargo build --release -p informerd-peers`, which `make bench` runs).
//!
//! For each pod count N: the pods of the namespaces `PREFIX-*` are topped up to N, then each
//! system runs alone, as its own process, over those namespaces (one watch stream per
//! namespace): informerd (the release binary, `informerd serve`) with the profiles "full" (drop
//! managedFields), "controller" (`transform::CONTROLLER_KEEP` / `CONTROLLER_DROP`) and
//! "metadata" (keep metadata, drop managedFields); `peer-kube` (peers/) and
//! `peer-clientgo` (tools/cmd/peer-clientgo), whose doc comments say what they hold and how they
//! measure themselves. A system is skipped at an N where its estimated peak (its previous peak
//! RSS per pod scaled to N, or a prior guess at the first N) does not fit in MemAvailable less
//! the reserve; the outputs say so.
//!
//! Topping up: the seeder (`seed pods`, server-side apply) is idempotent for the same
//! `--pods`, `--namespaces` and `--seed`, but the pods it plans for 50,000 are not a superset of
//! those it plans for 10,000, so re-running it with a larger `--pods` would leave extra pods.
//! Seeding into another prefix would add namespaces, and so watch streams, whose fixed costs
//! would then grow with N. So the difference is seeded into the same namespaces with another
//! generator `--seed` (1 + the pods present): new names, except the ordinal names of
//! StatefulSet pods, which may collide and are then replaced; the count is checked again and
//! the shortfall seeded the same way until N are there. The first seeding uses `--seed 1`, the
//! layout `make seed` writes. Namespaces of the default prefix holding more than N pods are
//! cleaned (`seed clean`) and seeded again; with `BENCH_PREFIX` set that is left to the user.
//!
//! What is measured, per system and N (figures are printed, never asserted):
//!
//! - bytes per pod by the allocator after sync: informerd: jemalloc's `stats.allocated` as
//!   `Status` reports it after the hold, less the same figure of the same profile over the same
//!   number of empty namespaces (`PREFIX-empty-*`, measured once per run: runtime, gRPC server,
//!   one idle stream per namespace), divided by the pods held; peers: what they report
//!   (`heap_bytes` over their pre-watch baseline: jemalloc for kube-rs, Go's live heap after
//!   two GCs for client-go);
//! - RSS bytes per pod: VmRSS after the hold less the same baseline's VmRSS, per pod;
//! - steady RSS (VmRSS after the hold), peak RSS (VmHWM, reached during the initial sync);
//! - sync seconds: informerd from spawning the process to the first `Status` that reports every
//!   scope synced (polled every 50 ms); peers from creating their watchers to synced;
//! - CPU seconds: user + system CPU until sync (informerd: /proc/PID/stat at sync, process
//!   start included; peers: getrusage over the sync interval).
//!
//! Output: `benches/results/compare.md` (also printed), `compare.json` (one record per system,
//! profile and N) and `compare.svg` (bytes per pod against pods, log scale), rewritten after
//! each N so that a long run that stops keeps what it measured (other names with `BENCH_OUT`).

mod common;

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    str::FromStr,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{anyhow, bail, Context, Result};
use common::cluster::{count_pods, namespaces, pods_resource};
use common::process::{clock_ticks, cpu_ticks, exited, meminfo_bytes};
use common::stats::round;
use common::{cpus, results};
use informerd::vocab::memory::status_bytes;
use informerd::{
    proto::StatusRequest,
    transform::{CONTROLLER_DROP, CONTROLLER_KEEP},
};
use informerd_client as client;
use informerd_testkit::{ControlPlane, Sidecar, SidecarConfig};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

const DEFAULT_PODS: &[usize] = &[10_000, 50_000, 100_000, 150_000];
const DEFAULT_PREFIX: &str = "compare";
const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Runner {
    Informerd,
    PeerKube,
    PeerClientGo,
}

/// One system and profile of the comparison.
struct System {
    id: &'static str,
    system: &'static str,
    profile: &'static str,
    runner: Runner,
    /// What the cache keeps, for the tables.
    keeps: &'static str,
    /// Peak RSS per pod assumed before the first measurement (for the memory check only).
    /// Decision: the peers' are their peaks per pod measured at 150,000 pods (rounded up), so
    /// that a run whose first count is large (`make bench-large`) runs a peer that fits and
    /// skips one that would not, instead of deciding on a guess.
    guess_peak_per_pod: u64,
}

const SYSTEMS: &[System] = &[
    System {
        id: "informerd:full",
        system: "informerd",
        profile: "full",
        runner: Runner::Informerd,
        keeps: "full, no managedFields",
        guess_peak_per_pod: 4_000,
    },
    System {
        id: "informerd:controller",
        system: "informerd",
        profile: "controller",
        runner: Runner::Informerd,
        keeps: "controller fields",
        guess_peak_per_pod: 2_000,
    },
    System {
        id: "informerd:metadata",
        system: "informerd",
        profile: "metadata",
        runner: Runner::Informerd,
        keeps: "metadata, no managedFields",
        guess_peak_per_pod: 2_000,
    },
    System {
        id: "kube-rs:typed",
        system: "kube-rs",
        profile: "typed",
        runner: Runner::PeerKube,
        keeps: "full, as served",
        guess_peak_per_pod: 70_000,
    },
    System {
        id: "kube-rs:typed-strip",
        system: "kube-rs",
        profile: "typed-strip",
        runner: Runner::PeerKube,
        keeps: "full, no managedFields",
        guess_peak_per_pod: 34_000,
    },
    System {
        id: "kube-rs:metadata",
        system: "kube-rs",
        profile: "metadata",
        runner: Runner::PeerKube,
        keeps: "metadata, as served",
        guess_peak_per_pod: 41_000,
    },
    System {
        id: "client-go:informer",
        system: "client-go",
        profile: "informer",
        runner: Runner::PeerClientGo,
        keeps: "full, as served",
        guess_peak_per_pod: 25_000,
    },
    System {
        id: "client-go:informer-strip",
        system: "client-go",
        profile: "informer-strip",
        runner: Runner::PeerClientGo,
        keeps: "full, no managedFields",
        guess_peak_per_pod: 23_000,
    },
    System {
        id: "client-go:metadata",
        system: "client-go",
        profile: "metadata",
        runner: Runner::PeerClientGo,
        keeps: "metadata, as served",
        guess_peak_per_pod: 9_500,
    },
];

fn system(id: &str) -> &'static System {
    SYSTEMS
        .iter()
        .find(|s| s.id == id)
        .expect("a system of the table")
}

struct Settings {
    pods: Vec<usize>,
    namespaces: usize,
    systems: Vec<&'static System>,
    prefix: String,
    own_prefix: bool,
    hold: Duration,
    reserve: u64,
    /// Pods written straight into etcd (`seed pods --etcd`) instead of through the apiserver.
    seed_etcd: bool,
    /// Base name of the result files in benches/results.
    out: String,
    /// The settings given, as `VAR=value` words for the command line in the outputs.
    given: Vec<String>,
}

/// The environment variable `name` when it is set and not blank, noted in `given` as
/// `name=value`.
fn var(given: &mut Vec<String>, name: &str) -> Option<String> {
    let v = std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if let Some(v) = &v {
        given.push(format!("{name}={v}"));
    }
    v
}

/// Like [`var`], parsed as a `T` that `valid` accepts; else an error that says what the value
/// should be.
fn parsed_var<T: FromStr>(
    given: &mut Vec<String>,
    name: &str,
    valid: impl Fn(&T) -> bool,
    should_be: &str,
) -> Result<Option<T>> {
    var(given, name)
        .map(|v| {
            v.trim()
                .parse::<T>()
                .ok()
                .filter(valid)
                .ok_or_else(|| anyhow!("{name}: {v:?} is not {should_be}"))
        })
        .transpose()
}

impl Settings {
    fn from_env() -> Result<Settings> {
        let mut given = Vec::new();
        let mut pods = match var(&mut given, "BENCH_PODS") {
            None => DEFAULT_PODS.to_vec(),
            Some(v) => v
                .split(',')
                .map(|s| {
                    s.trim()
                        .replace('_', "")
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| anyhow!("BENCH_PODS: {s:?} is not a positive pod count"))
                })
                .collect::<Result<_>>()?,
        };
        pods.sort_unstable();
        pods.dedup();
        let namespaces = parsed_var::<usize>(
            &mut given,
            "BENCH_NAMESPACES",
            |&n| n > 0,
            "a positive count",
        )?
        .unwrap_or(20);
        let systems = match var(&mut given, "BENCH_SYSTEMS") {
            None => SYSTEMS.iter().collect(),
            Some(v) => {
                let mut chosen = Vec::new();
                for id in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let s = SYSTEMS.iter().find(|s| s.id == id).ok_or_else(|| {
                        let all: Vec<_> = SYSTEMS.iter().map(|s| s.id).collect();
                        anyhow!(
                            "BENCH_SYSTEMS: unknown system {id:?}; known: {}",
                            all.join(",")
                        )
                    })?;
                    if !chosen.iter().any(|c: &&System| c.id == s.id) {
                        chosen.push(s);
                    }
                }
                // The table's order: informerd first, then the peers.
                chosen.sort_by_key(|s| SYSTEMS.iter().position(|t| t.id == s.id));
                chosen
            }
        };
        if systems.is_empty() {
            bail!("BENCH_SYSTEMS names no system");
        }
        let prefix_var = var(&mut given, "BENCH_PREFIX");
        let own_prefix = prefix_var.is_none();
        let prefix = prefix_var.unwrap_or_else(|| DEFAULT_PREFIX.to_string());
        let hold = parsed_var::<f64>(
            &mut given,
            "BENCH_HOLD_SECONDS",
            |s| *s >= 0.0,
            "a duration",
        )?
        .map_or(Duration::from_secs(10), Duration::from_secs_f64);
        let reserve = parsed_var::<f64>(
            &mut given,
            "BENCH_RESERVE_GB",
            |g| *g >= 0.0,
            "a size in GiB",
        )?
        .unwrap_or(2.0);
        let seed_etcd = match var(&mut given, "BENCH_SEED").as_deref() {
            None | Some("apply") => false,
            Some("etcd") => true,
            Some(other) => bail!("BENCH_SEED: {other:?} is neither apply nor etcd"),
        };
        let out = var(&mut given, "BENCH_OUT").unwrap_or_else(|| "compare".into());
        if out.is_empty()
            || !out
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            bail!("BENCH_OUT: {out:?} is not a file name (letters, digits, '-', '_', '.')");
        }
        Ok(Settings {
            pods,
            namespaces,
            systems,
            prefix,
            own_prefix,
            hold,
            reserve: (reserve * GIB) as u64,
            seed_etcd,
            out,
            given,
        })
    }

    fn namespaces_of(&self, prefix: &str) -> Vec<String> {
        namespaces(prefix, self.namespaces)
    }

    fn command(&self) -> String {
        let mut words = self.given.clone();
        words.push("cargo bench --bench compare".into());
        words.join(" ")
    }
}

/// One line of `compare.json`.
#[derive(Clone, Serialize)]
struct Record {
    system: &'static str,
    profile: &'static str,
    pods: usize,
    namespaces: usize,
    keeps: &'static str,
    /// Pods the system held after sync.
    objects: Option<u64>,
    /// Whose count `bytes_per_pod` is.
    allocator: Option<&'static str>,
    bytes_per_pod: Option<f64>,
    rss_bytes_per_pod: Option<f64>,
    /// informerd only: its store's encoded objects and shared atoms (`Status`), per pod.
    store_bytes_per_pod: Option<f64>,
    steady_rss_bytes: Option<u64>,
    peak_rss_bytes: Option<u64>,
    peak_over_steady: Option<f64>,
    sync_seconds: Option<f64>,
    cpu_seconds: Option<f64>,
    initial_list: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<String>,
}

impl Record {
    fn empty(s: &'static System, pods: usize, namespaces: usize) -> Record {
        Record {
            system: s.system,
            profile: s.profile,
            pods,
            namespaces,
            keeps: s.keeps,
            objects: None,
            allocator: None,
            bytes_per_pod: None,
            rss_bytes_per_pod: None,
            store_bytes_per_pod: None,
            steady_rss_bytes: None,
            peak_rss_bytes: None,
            peak_over_steady: None,
            sync_seconds: None,
            cpu_seconds: None,
            initial_list: None,
            skipped: None,
            failed: None,
        }
    }

    fn id(&self) -> String {
        format!("{}:{}", self.system, self.profile)
    }
}

/// What one run of a system measured.
struct Measured {
    objects: u64,
    allocator: &'static str,
    /// Allocator bytes above the baseline.
    heap_bytes: i64,
    /// VmRSS above the baseline.
    rss_bytes: i64,
    /// informerd's store: encoded objects and shared atoms.
    store_bytes: Option<u64>,
    steady_rss: u64,
    peak_rss: u64,
    sync_seconds: f64,
    cpu_seconds: f64,
    initial_list: String,
}

/// informerd over empty namespaces, per profile: what the process costs without pods.
#[derive(Clone, Copy)]
struct Baseline {
    allocated: u64,
    rss: u64,
}

fn main() -> Result<()> {
    let settings = Settings::from_env()?;
    let cp = ControlPlane::get();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let repo = informerd_testkit::repo_root();
    let informerd_bin = PathBuf::from(env!("CARGO_BIN_EXE_informerd"));
    let peer_kube = settings
        .systems
        .iter()
        .any(|s| s.runner == Runner::PeerKube)
        .then(|| peer_kube_bin(&repo, &informerd_bin))
        .transpose()?;
    if settings
        .systems
        .iter()
        .any(|s| s.runner == Runner::PeerClientGo)
    {
        run_quiet(
            Command::new("make")
                .args(["-s", "-C"])
                .arg(&repo)
                .arg(".cache/bin/peer-clientgo"),
        )
        .context("build peer-clientgo")?;
    }
    let peer_clientgo = cp.bin("peer-clientgo");

    eprintln!(
        "compare: pods {:?} in {} namespaces {}-*, systems {}",
        settings.pods,
        settings.namespaces,
        settings.prefix,
        settings
            .systems
            .iter()
            .map(|s| s.id)
            .collect::<Vec<_>>()
            .join(",")
    );
    let baselines = baselines(&rt, cp, &settings, &informerd_bin)?;

    let namespaces = settings.namespaces_of(&settings.prefix);
    let mut records: Vec<Record> = Vec::new();
    let started = SystemTime::now();
    for &n in &settings.pods {
        top_up(&rt, cp, &settings, &namespaces, n)?;
        for &s in &settings.systems {
            let mut record = Record::empty(s, n, settings.namespaces);
            if let Some(why) = does_not_fit(s, n, &records, settings.reserve) {
                eprintln!("compare: {n} pods, {}: skipped: {why}", s.id);
                record.skipped = Some(why);
                records.push(record);
                continue;
            }
            eprintln!("compare: {n} pods, {}: running", s.id);
            let measured = match s.runner {
                Runner::Informerd => run_informerd(
                    &rt,
                    cp,
                    &informerd_bin,
                    s.profile,
                    &namespaces,
                    settings.hold,
                    baselines.get(s.profile).copied(),
                ),
                Runner::PeerKube => run_peer(
                    peer_kube.as_deref().expect("built when selected"),
                    cp,
                    s,
                    &namespaces,
                    settings.hold,
                ),
                Runner::PeerClientGo => run_peer(&peer_clientgo, cp, s, &namespaces, settings.hold),
            };
            match measured {
                Ok(m) => {
                    fill(&mut record, &m);
                    eprintln!(
                        "compare: {n} pods, {}: {} objects, {} B/pod ({}), RSS {} B/pod, steady RSS {:.1} MiB, peak {:.1} MiB, sync {:.1}s, CPU {:.1}s",
                        s.id,
                        m.objects,
                        fmt_opt(record.bytes_per_pod, 0),
                        m.allocator,
                        fmt_opt(record.rss_bytes_per_pod, 0),
                        m.steady_rss as f64 / MIB,
                        m.peak_rss as f64 / MIB,
                        m.sync_seconds,
                        m.cpu_seconds
                    );
                }
                Err(e) => {
                    eprintln!("compare: {n} pods, {}: failed: {e:#}", s.id);
                    record.failed = Some(format!("{e:#}"));
                }
            }
            records.push(record);
        }
        write_outputs(&settings, &records, started)?;
    }
    print!("{}", markdown(&settings, &records, started));
    eprintln!(
        "compare: wrote benches/results/{0}.md, {0}.json, {0}.svg ({1} records)",
        settings.out,
        records.len()
    );
    Ok(())
}

/// informerd over as many empty namespaces (`PREFIX-empty-*`), per profile of the run: what
/// its figures are measured above.
fn baselines(
    rt: &tokio::runtime::Runtime,
    cp: &ControlPlane,
    settings: &Settings,
    informerd_bin: &Path,
) -> Result<BTreeMap<&'static str, Baseline>> {
    let mut baselines = BTreeMap::new();
    let profiles: Vec<&System> = settings
        .systems
        .iter()
        .copied()
        .filter(|s| s.runner == Runner::Informerd)
        .collect();
    if profiles.is_empty() {
        return Ok(baselines);
    }
    let empty_prefix = format!("{}-empty", settings.prefix);
    seed(cp, settings, &empty_prefix, 0, 1)?;
    let empty = settings.namespaces_of(&empty_prefix);
    for s in profiles {
        let b = run_informerd(
            rt,
            cp,
            informerd_bin,
            s.profile,
            &empty,
            settings.hold,
            None,
        )
        .with_context(|| format!("{} over empty namespaces (the baseline)", s.id))?;
        eprintln!(
            "compare: baseline {}: {:.1} MiB allocated, {:.1} MiB RSS, {} objects",
            s.id,
            b.heap_bytes as f64 / MIB,
            b.steady_rss as f64 / MIB,
            b.objects
        );
        baselines.insert(
            s.profile,
            Baseline {
                allocated: b.heap_bytes as u64,
                rss: b.steady_rss,
            },
        );
    }
    Ok(baselines)
}

/// Why the system `s` is not run at `n` pods, if it is not: its estimated peak, with a margin,
/// does not fit in the memory available less `reserve`.
fn does_not_fit(s: &System, n: usize, records: &[Record], reserve: u64) -> Option<String> {
    let needed = estimate_peak(s, n, records) as f64 * 1.2 + reserve as f64;
    let available = meminfo_bytes("MemAvailable");
    ((available as f64) < needed).then(|| {
        format!(
            "needs ~{:.1} GB, {:.1} GB available",
            needed / 1e9,
            available as f64 / 1e9
        )
    })
}

fn fill(r: &mut Record, m: &Measured) {
    let per = |b: i64| (m.objects > 0).then(|| round(b as f64 / m.objects as f64, 1));
    r.objects = Some(m.objects);
    r.allocator = Some(m.allocator);
    r.bytes_per_pod = per(m.heap_bytes);
    r.rss_bytes_per_pod = per(m.rss_bytes);
    r.store_bytes_per_pod = m.store_bytes.and_then(|b| per(b as i64));
    r.steady_rss_bytes = Some(m.steady_rss);
    r.peak_rss_bytes = Some(m.peak_rss);
    r.peak_over_steady =
        (m.steady_rss > 0).then(|| round(m.peak_rss as f64 / m.steady_rss as f64, 3));
    r.sync_seconds = Some(round(m.sync_seconds, 3));
    r.cpu_seconds = Some(round(m.cpu_seconds, 3));
    r.initial_list = Some(m.initial_list.clone());
}

/// The peak RSS a system is expected to reach at `n` pods: its last measured peak per pod
/// scaled to `n`, or the prior guess.
fn estimate_peak(s: &System, n: usize, records: &[Record]) -> u64 {
    let measured = records.iter().rev().find_map(|r| {
        (r.id() == s.id)
            .then_some(())
            .and(r.peak_rss_bytes.zip(r.objects))
            .filter(|(_, o)| *o > 0)
    });
    match measured {
        Some((peak, objects)) => (peak as f64 / objects as f64 * n as f64) as u64,
        None => s.guess_peak_per_pod * n as u64 + (64 << 20),
    }
}

// --- the pods ------------------------------------------------------------------------------

/// Brings the pods of the namespaces to `n` (see the module documentation).
fn top_up(
    rt: &tokio::runtime::Runtime,
    cp: &ControlPlane,
    settings: &Settings,
    namespaces: &[String],
    n: usize,
) -> Result<()> {
    let client = rt.block_on(cp.client())?;
    let mut present = rt.block_on(count_pods(&client, namespaces))?;
    if present > n {
        if !settings.own_prefix {
            bail!(
                "the namespaces {}-* hold {present} pods, more than {n}: remove them \
                 (.cache/bin/seed clean --prefix {}) or choose another BENCH_PREFIX",
                settings.prefix,
                settings.prefix
            );
        }
        eprintln!(
            "compare: {}-* hold {present} pods, more than {n}: cleaning them",
            settings.prefix
        );
        run_logged(&mut seeder(cp, "clean", &settings.prefix))?;
        present = rt.block_on(count_pods(&client, namespaces))?;
    }
    for round in 0..8 {
        if present >= n {
            eprintln!("compare: {present} pods in {}-*", settings.prefix);
            return Ok(());
        }
        let missing = n - present;
        let generator = if present == 0 { 1 } else { 1 + present as u64 };
        eprintln!(
            "compare: {present} pods present, seeding {missing} (generator seed {generator}, round {})",
            round + 1
        );
        seed(cp, settings, &settings.prefix, missing, generator)?;
        let now = rt.block_on(count_pods(&client, namespaces))?;
        if now <= present {
            bail!(
                "seeding {missing} pods into {}-* added none",
                settings.prefix
            );
        }
        present = now;
    }
    if present < n {
        bail!(
            "{}-* hold {present} pods after 8 rounds of seeding, not {n}",
            settings.prefix
        );
    }
    Ok(())
}

fn seed(
    cp: &ControlPlane,
    settings: &Settings,
    prefix: &str,
    pods: usize,
    generator: u64,
) -> Result<()> {
    let mut cmd = seeder(cp, "pods", prefix);
    cmd.arg("--pods")
        .arg(pods.to_string())
        .arg("--namespaces")
        .arg(settings.namespaces.to_string())
        .arg("--seed")
        .arg(generator.to_string());
    if settings.seed_etcd {
        cmd.arg("--etcd").arg(cp.etcd_url()?);
    }
    let line = run_logged(&mut cmd)?;
    eprintln!("compare: {}", line.trim());
    Ok(())
}

/// `seed SUBCOMMAND --kubeconfig .. --prefix PREFIX`: the seeder run here rather than through
/// the testkit's `ControlPlane::seed`, which can pass neither a generator seed nor the
/// seeder's progress through.
fn seeder(cp: &ControlPlane, subcommand: &str, prefix: &str) -> Command {
    let mut cmd = Command::new(cp.bin("seed"));
    cmd.arg(subcommand)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .arg("--prefix")
        .arg(prefix);
    cmd
}

// --- the systems ---------------------------------------------------------------------------

fn informerd_config(profile: &str, namespaces: &[String]) -> SidecarConfig {
    let (keep, drop): (&[&str], &[&str]) = match profile {
        "full" => (&[], &["metadata.managedFields"]),
        "controller" => (CONTROLLER_KEEP, CONTROLLER_DROP),
        "metadata" => (&["metadata"], &["metadata.managedFields"]),
        other => unreachable!("informerd profile {other}"),
    };
    SidecarConfig::new().resource(pods_resource(namespaces, keep, drop))
}

/// Runs `informerd serve` over the namespaces until synced, holds, and measures. Without a
/// baseline the figures are absolute (the baseline run itself).
fn run_informerd(
    rt: &tokio::runtime::Runtime,
    cp: &ControlPlane,
    bin: &Path,
    profile: &str,
    namespaces: &[String],
    hold: Duration,
    baseline: Option<Baseline>,
) -> Result<Measured> {
    let started = Instant::now();
    let sidecar = Sidecar::start(bin, cp, &informerd_config(profile, namespaces))?;
    let pid = sidecar.pid().context("the sidecar has no pid")?;
    let socket = sidecar
        .socket()
        .to_str()
        .context("socket path")?
        .to_string();
    let result = rt.block_on(async {
        let mut api = client::connect(&socket).await?;
        let deadline = started + Duration::from_secs(1800);
        let (sync_seconds, cpu_seconds) = loop {
            let status = api.status(StatusRequest::default()).await?.into_inner();
            if status.synced {
                break (started.elapsed().as_secs_f64(), cpu_seconds(pid)?);
            }
            if exited(pid) {
                bail!("informerd exited before it synced");
            }
            if Instant::now() > deadline {
                bail!("not synced after 30 minutes");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        tokio::time::sleep(hold).await;
        let status = api.status(StatusRequest::default()).await?.into_inner();
        let objects = status.resources.iter().map(|r| r.objects).sum::<u64>();
        let store_bytes = status
            .resources
            .iter()
            .map(|r| r.encoded_bytes + r.interned_bytes)
            .sum::<u64>();
        let steady_rss = proc_status_bytes(pid, "VmRSS")?;
        let peak_rss = proc_status_bytes(pid, "VmHWM")?;
        let base = baseline.unwrap_or(Baseline {
            allocated: 0,
            rss: 0,
        });
        Ok(Measured {
            objects,
            allocator: "jemalloc",
            heap_bytes: status.allocated_bytes as i64 - base.allocated as i64,
            rss_bytes: steady_rss as i64 - base.rss as i64,
            store_bytes: Some(store_bytes),
            steady_rss,
            peak_rss,
            sync_seconds,
            cpu_seconds,
            initial_list: "watch-list".into(),
        })
    });
    result.map_err(|e| {
        let log = sidecar.log();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        e.context(format!("informerd log: {}", tail.join(" | ")))
    })
}

fn run_peer(
    bin: &Path,
    cp: &ControlPlane,
    s: &System,
    namespaces: &[String],
    hold: Duration,
) -> Result<Measured> {
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .arg("--mode")
        .arg(s.profile)
        .arg("--namespaces")
        .arg(namespaces.join(","))
        .arg("--hold")
        .arg(format!("{}ms", hold.as_millis()))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("start {}", bin.display()))?;
    if !out.status.success() {
        bail!("{} exited with {}", bin.display(), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| anyhow!("{} printed no JSON line: {stdout}", bin.display()))?;
    let v: serde_json::Value = serde_json::from_str(line).context("the peer's JSON line")?;
    let int = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_i64())
            .ok_or_else(|| anyhow!("the peer's JSON has no integer {k:?}: {line}"))
    };
    let float = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_f64())
            .ok_or_else(|| anyhow!("the peer's JSON has no number {k:?}: {line}"))
    };
    let rss = int("rss_bytes")?;
    Ok(Measured {
        objects: int("objects")? as u64,
        allocator: match s.runner {
            Runner::PeerClientGo => "Go heap",
            _ => "jemalloc",
        },
        heap_bytes: int("heap_bytes")?,
        rss_bytes: rss - int("rss_baseline_bytes")?,
        store_bytes: None,
        steady_rss: rss as u64,
        peak_rss: int("peak_rss_bytes")? as u64,
        sync_seconds: float("sync_seconds")?,
        cpu_seconds: float("cpu_seconds")?,
        initial_list: v
            .get("initial_list")
            .and_then(|x| x.as_str())
            .unwrap_or("?")
            .to_string(),
    })
}

/// The peer-kube binary: `BENCH_PEER_KUBE`, else beside the informerd binary cargo built for
/// this bench (the same target directory and profile as `cargo build --release`).
fn peer_kube_bin(repo: &Path, informerd: &Path) -> Result<PathBuf> {
    let bin = match std::env::var_os("BENCH_PEER_KUBE") {
        Some(p) => PathBuf::from(p),
        None => informerd
            .parent()
            .context("the informerd binary's directory")?
            .join("peer-kube"),
    };
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .map_err(|_| {
            anyhow!(
                "{} not found: build it with `cargo build --release -p informerd-peers` \
                 (make bench does)",
                bin.display()
            )
        })?;
    // Cargo cannot be run from here (the bench runs under its lock): warn about a stale build.
    let sources = [
        repo.join("peers/Cargo.toml"),
        repo.join("peers/src/peer_kube.rs"),
    ];
    if sources.iter().any(|p| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > built)
    }) {
        eprintln!(
            "compare: warning: {} is older than its sources; rebuild it with \
             `cargo build --release -p informerd-peers`",
            bin.display()
        );
    }
    Ok(bin)
}

// --- the process and the machine -----------------------------------------------------------

fn proc_status_bytes(pid: u32, field: &str) -> Result<u64> {
    status_bytes(pid, field).ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
}

/// User + system CPU seconds of a process so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let ticks = cpu_ticks(pid).ok_or_else(|| anyhow!("no CPU times in /proc/{pid}/stat"))?;
    Ok(ticks as f64 / clock_ticks() as f64)
}

/// Runs a command, its stderr passed through (progress), and returns its last stdout line.
fn run_logged(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} exited with {}", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(stdout.lines().last().unwrap_or_default().to_string())
}

fn run_quiet(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} exited with {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

// --- the outputs ---------------------------------------------------------------------------

/// `YYYY-MM-DD HH:MM UTC`.
fn utc(t: SystemTime) -> String {
    Timestamp::try_from(t)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%d %H:%M UTC")
        .to_string()
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    match v {
        None => "–".into(),
        Some(v) if digits == 0 && v.abs() >= 1000.0 => {
            let s = thousands(v.abs().round() as u64);
            if v < 0.0 {
                format!("-{s}")
            } else {
                s
            }
        }
        Some(v) => format!("{v:.digits$}"),
    }
}

fn fmt_mib(v: Option<u64>) -> String {
    v.map_or("–".into(), |b| format!("{:.1} MiB", b as f64 / MIB))
}

fn pods_label(n: usize) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        thousands(n as u64)
    }
}

fn write_outputs(settings: &Settings, records: &[Record], started: SystemTime) -> Result<()> {
    let dir = results::dir()?;
    let out = &settings.out;
    std::fs::write(
        dir.join(format!("{out}.md")),
        markdown(settings, records, started),
    )?;
    results::write_json(&format!("{out}.json"), &records)?;
    std::fs::write(dir.join(format!("{out}.svg")), svg(settings, records))?;
    Ok(())
}

/// The targets of the issue; goals, never assertions.
const TARGET_CONTROLLER: f64 = 150.0;
const TARGET_METADATA: f64 = 250.0;
const TARGET_FULL: f64 = 1000.0;
const TARGET_VS_CLIENTGO: f64 = 10.0;
const TARGET_VS_KUBERS: f64 = 30.0;
const TARGET_PEAK: f64 = 1.2;

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "met",
        Some(false) => "not met",
        None => "not measured",
    }
}

fn markdown(settings: &Settings, records: &[Record], started: SystemTime) -> String {
    let mut md = String::new();
    let when = utc(started);
    let _ = writeln!(
        md,
        "# informerd against kube-rs and client-go caches: memory per pod\n"
    );
    let _ = writeln!(
        md,
        "`{}` ({}), started {when}: pods seeded in {} namespaces of \
         the local control plane, every system a process of its own, one at a time, over the same \
         pods; {} cores, {:.0} GiB of memory shared with the control plane. Each system runs {} s \
         after sync before its steady figures are read. Figures are measured, never asserted; the \
         targets are goals.\n",
        settings.command(),
        if settings.seed_etcd {
            "what `make bench-large` runs: the pods written straight into etcd, an apiserver \
             without a watch cache of pods, which serves every list from etcd"
        } else {
            "what `make bench` runs"
        },
        settings.namespaces,
        cpus(),
        meminfo_bytes("MemTotal") as f64 / GIB,
        settings.hold.as_secs_f64()
    );
    let _ = writeln!(
        md,
        "- **bytes/pod**: what the allocator holds after sync above the process's baseline, per \
         pod: jemalloc's `stats.allocated` for informerd (less the same profile over as many \
         empty namespaces) and kube-rs (less its count before the watchers exist); Go's live \
         heap after two GCs for client-go (less the same before the informers exist).\n\
         - **RSS/pod**: VmRSS after sync less the same baseline's, per pod. **steady RSS**: VmRSS \
         after sync; **peak RSS**: VmHWM, reached during the initial sync.\n\
         - **store/pod** (informerd): its store's encoded objects and the strings and structure \
         they share, per pod (`Status`); bytes/pod less this is the rest of the process: hash \
         tables, the change log (10,000 events by default), the streams' buffers grown while \
         listing, the runtime.\n\
         - **sync**: seconds to every scope synced; **CPU**: user + system seconds until then.\n\
         - informerd's profiles: full = everything but `metadata.managedFields`; controller = \
         metadata without managedFields, ownerReferences, `spec.nodeName`, `status.phase`, \
         conditions, `podIP`; metadata = metadata without managedFields. The peers' metadata \
         caches keep managedFields, as served.\n"
    );

    let measured_ns: Vec<usize> = settings
        .pods
        .iter()
        .copied()
        .filter(|n| records.iter().any(|r| r.pods == *n))
        .collect();
    if let Some(&largest) = measured_ns.last() {
        summary(&mut md, records, largest);
    }
    for &n in &measured_ns {
        let _ = writeln!(
            md,
            "## {} pods ({} namespaces)\n",
            thousands(n as u64),
            settings.namespaces
        );
        let _ = writeln!(
            md,
            "| system | profile | keeps | pods held | bytes/pod | allocator | RSS/pod | store/pod | steady RSS | peak RSS | peak/steady | sync | CPU | initial list |"
        );
        let _ = writeln!(
            md,
            "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
        );
        for r in records.iter().filter(|r| r.pods == n) {
            if let Some(why) = r.skipped.as_ref().or(r.failed.as_ref()) {
                let what = if r.skipped.is_some() {
                    "skipped"
                } else {
                    "failed"
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {what}: {} | | | | | | | | | | |",
                    r.system,
                    r.profile,
                    r.keeps,
                    why.replace('|', "/").replace('\n', " ")
                );
                continue;
            }
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} s | {} s | {} |",
                r.system,
                r.profile,
                r.keeps,
                r.objects.map_or("–".into(), thousands),
                fmt_opt(r.bytes_per_pod, 0),
                r.allocator.unwrap_or("–"),
                fmt_opt(r.rss_bytes_per_pod, 0),
                fmt_opt(r.store_bytes_per_pod, 0),
                fmt_mib(r.steady_rss_bytes),
                fmt_mib(r.peak_rss_bytes),
                fmt_opt(r.peak_over_steady, 2),
                fmt_opt(r.sync_seconds, 1),
                fmt_opt(r.cpu_seconds, 1),
                r.initial_list.as_deref().unwrap_or("–"),
            );
        }
        md.push('\n');
    }
    md
}

fn find<'a>(records: &'a [Record], id: &str, n: usize) -> Option<&'a Record> {
    records
        .iter()
        .find(|r| r.pods == n && r.id() == id && r.objects.is_some())
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(a), Some(b)) if b > 0.0 && a > 0.0 => Some(a / b),
        _ => None,
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.1}×"))
}

fn summary(md: &mut String, records: &[Record], n: usize) {
    let bpp = |id: &str| find(records, id, n).and_then(|r| r.bytes_per_pod);
    let rss = |id: &str| find(records, id, n).and_then(|r| r.rss_bytes_per_pod);
    let _ = writeln!(
        md,
        "## Targets at {} pods (goals, not assertions)\n",
        thousands(n as u64)
    );
    let _ = writeln!(md, "| goal | measured | target | |");
    let _ = writeln!(md, "| --- | ---: | ---: | --- |");
    let at_150k = if n == 150_000 {
        ""
    } else {
        " (the target is stated for 150,000 pods)"
    };
    let mut target = |goal: String, v: Option<f64>, shown: String, t: String, ok: Option<bool>| {
        let _ = writeln!(
            md,
            "| {goal} | {} | {t} | {} |",
            if v.is_some() { shown } else { "–".into() },
            verdict(ok)
        );
    };
    for (id, limit, extra) in [
        ("informerd:controller", TARGET_CONTROLLER, at_150k),
        ("informerd:metadata", TARGET_METADATA, ""),
        ("informerd:full", TARGET_FULL, ""),
    ] {
        let v = bpp(id);
        target(
            format!("{id}: bytes/pod{extra}"),
            v,
            fmt_opt(v, 0),
            format!("≤ {}", thousands(limit as u64)),
            v.map(|v| v <= limit),
        );
    }
    for (peer, limit) in [
        ("client-go:informer-strip", TARGET_VS_CLIENTGO),
        ("kube-rs:typed-strip", TARGET_VS_KUBERS),
    ] {
        let r = ratio(bpp(peer), bpp("informerd:full"));
        target(
            format!("{peer} / informerd:full, bytes/pod"),
            r,
            fmt_ratio(r),
            format!("≥ {limit:.0}×"),
            r.map(|r| r >= limit),
        );
    }
    for id in [
        "informerd:full",
        "informerd:controller",
        "informerd:metadata",
    ] {
        let v = find(records, id, n).and_then(|r| r.peak_over_steady);
        target(
            format!("{id}: peak RSS during the initial sync / steady RSS"),
            v,
            fmt_opt(v, 2),
            format!("≤ {TARGET_PEAK}"),
            v.map(|v| v <= TARGET_PEAK),
        );
    }
    md.push('\n');

    let _ = writeln!(
        md,
        "### Like for like at {} pods: how many times more the peer holds\n",
        thousands(n as u64)
    );
    let _ = writeln!(
        md,
        "| informerd | peer | the peer keeps | informerd bytes/pod | peer bytes/pod | × (allocator) | × (RSS/pod) |"
    );
    let _ = writeln!(md, "| --- | --- | --- | ---: | ---: | ---: | ---: |");
    for (ours, peers) in [
        (
            "informerd:full",
            &[
                "client-go:informer-strip",
                "client-go:informer",
                "kube-rs:typed-strip",
                "kube-rs:typed",
            ][..],
        ),
        (
            "informerd:metadata",
            &["client-go:metadata", "kube-rs:metadata"][..],
        ),
    ] {
        for peer in peers {
            let why = records
                .iter()
                .find(|r| r.pods == n && r.id() == *peer)
                .and_then(|r| r.skipped.as_ref().or(r.failed.as_ref()));
            let peer_bpp = match why {
                Some(w) => w.replace('|', "/"),
                None => fmt_opt(bpp(peer), 0),
            };
            let _ = writeln!(
                md,
                "| {ours} | {peer} | {} | {} | {peer_bpp} | {} | {} |",
                system(peer).keeps,
                fmt_opt(bpp(ours), 0),
                fmt_ratio(ratio(bpp(peer), bpp(ours))),
                fmt_ratio(ratio(rss(peer), rss(ours))),
            );
        }
    }
    let smallest_full = ["client-go:informer-strip", "kube-rs:typed-strip"]
        .iter()
        .filter_map(|id| bpp(id).map(|b| (*id, b)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let _ = writeln!(
        md,
        "\nThe full objects are compared with and without managedFields on the peers' side \
         (informerd never keeps them). The metadata peers keep managedFields, as served; \
         informerd's metadata profile drops them. No peer keeps exactly the controller profile's \
         fields: a client-go or kube-rs controller that reads `spec.nodeName` or `status` caches \
         full objects{}.\n",
        match (smallest_full, bpp("informerd:controller")) {
            (Some((id, b)), Some(c)) => format!(
                " (the smallest of those here: {id}, {} bytes/pod, {} informerd:controller)",
                fmt_opt(Some(b), 0),
                fmt_ratio(ratio(Some(b), Some(c)))
            ),
            _ => String::new(),
        }
    );
}

/// Line styles per system: informerd solid, kube-rs dashed, client-go dotted.
fn style(id: &str) -> (&'static str, &'static str, f64) {
    match id {
        "informerd:full" => ("#b2182b", "", 3.0),
        "informerd:controller" => ("#ef8a62", "", 3.0),
        "informerd:metadata" => ("#762a83", "", 3.0),
        "kube-rs:typed" => ("#2166ac", "8 4", 2.0),
        "kube-rs:typed-strip" => ("#67a9cf", "8 4", 2.0),
        "kube-rs:metadata" => ("#01665e", "8 4", 2.0),
        "client-go:informer" => ("#1b7837", "2 3", 2.0),
        "client-go:informer-strip" => ("#7fbf7b", "2 3", 2.0),
        _ => ("#8c510a", "2 3", 2.0),
    }
}

fn bytes_label(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{} MB", v / 1e6),
        v if v >= 1e3 => format!("{} kB", v / 1e3),
        v => format!("{v} B"),
    }
}

/// The chart: bytes per pod (allocator) against pod count, log scale, one line per system.
fn svg(settings: &Settings, records: &[Record]) -> String {
    let (w, h) = (1060.0, 560.0);
    let (left, right, top, bottom) = (80.0, 690.0, 56.0, 490.0);
    let series: Vec<(&System, Vec<(usize, f64)>)> = settings
        .systems
        .iter()
        .map(|s| {
            let pts = records
                .iter()
                .filter(|r| r.id() == s.id)
                .filter_map(|r| r.bytes_per_pod.filter(|b| *b > 0.0).map(|b| (r.pods, b)))
                .collect();
            (*s, pts)
        })
        .collect();
    let targets = [
        (TARGET_CONTROLLER, "controller target"),
        (TARGET_METADATA, "metadata target"),
        (TARGET_FULL, "full target"),
    ];
    let values: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, b)| *b))
        .chain(targets.iter().map(|(t, _)| *t))
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (lo_exp, hi_exp) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let hi_exp = hi_exp.max(lo_exp + 1);
    let max_n = settings.pods.iter().copied().max().unwrap_or(1) as f64;
    let x = |n: usize| left + (right - left) * n as f64 / (max_n * 1.05);
    let y =
        |b: f64| bottom - (bottom - top) * (b.log10() - lo_exp as f64) / (hi_exp - lo_exp) as f64;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="24" font-size="16" font-weight="bold">Bytes held per pod after sync (allocator), log scale</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="42" fill="#555">{} namespaces; informerd and kube-rs: jemalloc allocated; client-go: Go live heap; each above its own baseline</text>"##,
        settings.namespaces
    );
    // Decades, with 2 and 5 between them.
    for e in lo_exp..=hi_exp {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(e);
            if e == hi_exp && m > 1.0 {
                continue;
            }
            let yy = y(v);
            let major = m == 1.0;
            let _ = writeln!(
                s,
                r#"<line x1="{left}" y1="{yy:.1}" x2="{right}" y2="{yy:.1}" stroke="{}" stroke-width="1"/>"#,
                if major { "#ccc" } else { "#eee" }
            );
            if major {
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                    left - 8.0,
                    yy + 4.0,
                    bytes_label(v)
                );
            }
        }
    }
    for &n in &settings.pods {
        let xx = x(n);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{bottom}" stroke="#eee"/><text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 18.0,
            pods_label(n)
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        right - left,
        bottom - top
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">pods</text>"#,
        (left + right) / 2.0,
        bottom + 40.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(20 {}) rotate(-90)" text-anchor="middle">bytes per pod</text>"#,
        (top + bottom) / 2.0
    );
    for (t, label) in targets {
        let yy = y(t);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{right}" y2="{yy:.1}" stroke="#888" stroke-dasharray="3 5"/><text x="{}" y="{:.1}" fill="#666" font-size="10">{label} {}</text>"##,
            left + 6.0,
            yy - 4.0,
            bytes_label(t)
        );
    }
    for (sys, pts) in &series {
        let (color, dash, width) = style(sys.id);
        let dash = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        if pts.len() > 1 {
            let path: Vec<String> = pts
                .iter()
                .map(|(n, b)| format!("{:.1},{:.1}", x(*n), y(*b)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width}"{dash}/>"#,
                path.join(" ")
            );
        }
        for (n, b) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"/>"#,
                x(*n),
                y(*b)
            );
        }
    }
    // The legend, with what was not measured.
    let lx = right + 20.0;
    for (i, (sys, _)) in series.iter().enumerate() {
        let (color, dash, width) = style(sys.id);
        let ly = top + 10.0 + i as f64 * 22.0;
        let dash = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        let missing: Vec<String> = records
            .iter()
            .filter(|r| r.id() == sys.id && (r.skipped.is_some() || r.failed.is_some()))
            .map(|r| pods_label(r.pods))
            .collect();
        let note = if missing.is_empty() {
            String::new()
        } else {
            format!(" (not run at {})", missing.join(", "))
        };
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="{width}"{dash}/><circle cx="{}" cy="{ly}" r="4" fill="{color}"/><text x="{}" y="{}">{} {}{note}</text>"#,
            lx + 36.0,
            lx + 18.0,
            lx + 44.0,
            ly + 4.0,
            sys.system,
            sys.profile
        );
    }
    s.push_str("</svg>\n");
    s
}
