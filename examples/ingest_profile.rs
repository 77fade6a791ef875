//! The fleet's ingest path alone, once, for an instruction profiler: the watch lines of the
//! first namespaces that `cargo bench --bench ingest` recorded (an ADDED line per pod as a
//! streaming initial list, then a MODIFIED line per pod with a new resourceVersion and one more
//! label, as the bench builds them), decoded by `fleet::decode::watch_line` with the controller
//! profile and handed to `ScopeIngest`, all in one function (`run`) that the profiler can be
//! told to count alone. docs/benchmarks.md's instructions per event ("Ingest") come from it:
//!
//! ```text
//! cargo bench --bench ingest            # records benches/results/tmp/ingest-10000-pods once
//! cargo build --release --example ingest_profile
//! valgrind --tool=callgrind --toggle-collect='*ingest_profile::run' \
//!   target/release/examples/ingest_profile benches/results/tmp/ingest-10000-pods 4
//! callgrind_annotate --inclusive=yes callgrind.out.*
//! ```
//!
//! Arguments: the recording's directory, how many of its namespaces (`seed-0` on) to read
//! (default 4: 2,000 pods of the default recording), and how many times to ingest them, each
//! time into a new store (default 1; more for a sampling profiler such as `perf record -e
//! cpu-clock`, so that reading the recording is a small part of the samples). It prints the
//! fastest run's time, to compare two builds on the same machine; the bench's figures are the
//! reference.

use std::time::{Duration, Instant};
use std::{env, fs};

use anyhow::{bail, Context, Result};
use informerd::{
    config,
    fleet::{decode, Decoding, Pipeline, ScopeIngest},
    transform::{CONTROLLER_DROP, CONTROLLER_KEEP},
};
use kube::{core::WatchEvent, runtime::watcher};
use serde::Deserialize;
use serde_json::value::RawValue;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Deserialize)]
struct Items<'a> {
    #[serde(borrow)]
    items: Vec<&'a RawValue>,
}

fn main() -> Result<()> {
    let mut args = env::args().skip(1);
    let dir = args
        .next()
        .context("usage: ingest_profile RECORDING_DIR [NAMESPACES]")?;
    let count: usize = args.next().map_or(Ok(4), |n| n.parse())?;
    let repeat: usize = args.next().map_or(Ok(1), |n| n.parse())?;
    let mut namespaces = Vec::new();
    let mut lines = Vec::new();
    for i in 0..count {
        let body = fs::read_to_string(format!("{dir}/seed-{i}.json"))
            .with_context(|| format!("the recorded list seed-{i} in {dir}"))?;
        let list: Items = serde_json::from_str(&body)?;
        // As the bench builds watch lines: the item with kind and apiVersion first.
        let added = |item: &RawValue| {
            format!(
                r#"{{"type":"ADDED","object":{{"kind":"Pod","apiVersion":"v1",{}}}"#,
                &item.get()[1..]
            )
        };
        let modified = |item: &RawValue, rv: usize| -> Result<String> {
            let line = added(item).replacen(r#""type":"ADDED""#, r#""type":"MODIFIED""#, 1);
            let (head, tail) = line
                .split_once(r#""resourceVersion":""#)
                .context("a pod without resourceVersion")?;
            let (_, tail) = tail
                .split_once('"')
                .context("an unterminated resourceVersion")?;
            let line = format!(r#"{head}"resourceVersion":"{rv}"{tail}"#);
            let (head, tail) = line
                .split_once(r#""labels":{"#)
                .context("a seeded pod without labels")?;
            Ok(format!(r#"{head}"labels":{{"bench-seq":"{rv}",{tail}"#))
        };
        let added_lines: Vec<String> = list.items.iter().map(|item| added(item)).collect();
        let modified_lines = (list.items.iter().enumerate())
            .map(|(n, item)| modified(item, 1_000_000_000 + i * 100_000 + n))
            .collect::<Result<Vec<_>>>()?;
        lines.push((added_lines, modified_lines));
        namespaces.push(format!("seed-{i}"));
    }
    let yaml = format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- name: pods\n  \
         apiVersion: v1\n  kind: Pod\n  namespaces: {}\n  transform:\n    keep: {}\n    \
         drop: {}\n",
        serde_json::to_string(&namespaces)?,
        serde_json::to_string(CONTROLLER_KEEP)?,
        serde_json::to_string(CONTROLLER_DROP)?,
    );
    let config = config::parse("ingest-profile.yaml", &yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut fastest = Duration::MAX;
    for _ in 0..repeat {
        let pipeline = Pipeline::new(&config.change_log, &config.resources[0]);
        let mut scopes: Vec<ScopeIngest> = namespaces
            .iter()
            .map(|ns| ScopeIngest::new(pipeline.clone(), Some(ns.clone())))
            .collect();
        let _decoding = Decoding::enter(pipeline.decoding());
        let started = Instant::now();
        run(&lines, &mut scopes)?;
        fastest = fastest.min(started.elapsed());
        eprintln!("{} pods stored", pipeline.store.len());
    }
    eprintln!("fastest run: {fastest:?}");
    Ok(())
}

/// What the profiler counts: every line decoded and ingested.
#[inline(never)]
fn run(lines: &[(Vec<String>, Vec<String>)], scopes: &mut [ScopeIngest]) -> Result<()> {
    for ((added, modified), scope) in lines.iter().zip(scopes) {
        scope.handle(watcher::Event::Init);
        for line in added {
            let Some(Ok(WatchEvent::Added(object))) = decode::watch_line(line) else {
                bail!("a recorded line that is not an ADDED event");
            };
            scope.handle(watcher::Event::InitApply(object));
        }
        scope.handle(watcher::Event::InitDone);
        for line in modified {
            let Some(Ok(WatchEvent::Modified(object))) = decode::watch_line(line) else {
                bail!("a built line that is not a MODIFIED event");
            };
            scope.handle(watcher::Event::Apply(object));
        }
    }
    Ok(())
}
