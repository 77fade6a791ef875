//! The chaos suite: informerd reaches a private control plane (its own etcd and two
//! kube-apiservers, which the suite kills) through a fault-injecting proxy, as a ServiceAccount
//! whose RBAC the suite revokes, while the seeder churns pods and 100 subscribers (one of them
//! stalled) watch through the Rust client. Each phase injects one kind of fault (the last, a
//! seeded random mix), then, with the churn stopped, waits (bounded) until the apiserver's
//! list == informerd's List == every subscriber's folded stream, by name, resourceVersion and
//! the fields the transform keeps (truth.rs: `Held`);
//! checks that revisions only grew within an epoch on every subscriber, and that informerd's
//! memory is back within a bound of its post-sync baseline.
//!
//! `cargo test --test chaos` (and so `make test`) runs one round of every fault; `make chaos`
//! runs more: CHAOS_ROUNDS (default 1), CHAOS_CHURN_SECONDS (default 4), CHAOS_PODS (default
//! 200) and CHAOS_SUBSCRIBERS (default 100) set the size; CHAOS_CONVERGE_SECONDS (default 180)
//! bounds the wait for agreement after each phase; CHAOS_SEED seeds the mixed phase (the time
//! when unset; printed). To look into one fault: CHAOS_PHASES (e.g. `CutMidList,
//! CompactKillApiserver`) runs only those phases, CHAOS_LOGS=DIR keeps informerd's log after each phase there, and
//! CHAOS_APISERVER_DOWN_SECONDS keeps
//! kube-apiserver down that much longer in CompactKillApiserver (compact.rs). With CHAOS_RESULTS=FILE the table is also written there (`make chaos`
//! writes benches/results/chaos.md). `make soak` runs the soak (soak.rs) in the same target.

mod check;
mod compact;
mod faults;
mod plot;
mod rig;
mod soak;
mod subscriber;
mod table;
mod truth;

use std::{collections::BTreeMap, sync::atomic::Ordering, time::Duration};

use rand::rngs::StdRng;

use faults::{inject, phases, undo, Fault};
use rig::Rig;
use table::{print_table, Row};
use truth::{converge, Disagreement};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const TIER: &str = "informerd.io/tier";
const NAMESPACES: usize = 2;
/// Memory after a phase may be this many times the post-sync baseline, plus [`MEMORY_SLACK`]:
/// caches, buffers and allocator arenas grow and shrink, but a leak per fault keeps growing.
const MEMORY_FACTOR: f64 = 1.5;
const MEMORY_SLACK: f64 = 64.0 * 1024.0 * 1024.0;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The last `n` lines of a log, newest first, without terminal colours.
fn log_tail(log: &str, n: usize) -> Vec<String> {
    log.lines()
        .rev()
        .take(n)
        .map(|line| {
            let mut out = String::new();
            let mut rest = line;
            while let Some(at) = rest.find('\u{1b}') {
                out += &rest[..at];
                rest = rest[at..].split_once('m').map_or("", |(_, r)| r);
            }
            out + rest
        })
        .collect()
}

/// informerd's resident and allocated bytes, from its metrics.
async fn memory(rig: &Rig) -> anyhow::Result<(f64, f64)> {
    let m = rig.metrics().await?;
    Ok((
        m.sum("informerd_memory_resident_bytes", &[]),
        m.sum("informerd_memory_allocated_bytes", &[]),
    ))
}

/// Relists after 410 Gone, by informerd's metrics (since it started).
async fn expired_relists(rig: &Rig) -> anyhow::Result<u64> {
    let m = rig.metrics().await?;
    Ok(m.sum("informerd_scope_relists_total", &[("reason", "expired")]) as u64)
}

/// Every relist, by the Status RPC (since informerd started).
async fn all_relists(rig: &Rig) -> anyhow::Result<u64> {
    truth::relists(&rig.socket).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn informerd_tells_the_truth_under_faults() -> anyhow::Result<()> {
    let rounds = env_number("CHAOS_ROUNDS", 1);
    let churn_seconds = env_number("CHAOS_CHURN_SECONDS", 4) as u32;
    let pods = env_number("CHAOS_PODS", 200) as usize;
    let phases = phases()?;
    let (mut rig, mut rng, seed) = Rig::synced("chaos", pods).await?;
    let baseline = memory(&rig).await?;
    eprintln!(
        "memory after sync: RSS {:.1} MiB, allocated {:.1} MiB",
        baseline.0 / 1048576.0,
        baseline.1 / 1048576.0
    );

    let mut table: BTreeMap<String, Row> = BTreeMap::new();
    let mut failures = Vec::new();
    // Phases in which informerd restarted: each subscriber has resumed (and synced) after
    // every such phase, so it was told EpochChanged at least once per phase; restarts close
    // together (the mixed phase) may reach a subscriber that did not read in between as one.
    let mut restarted_phases = 0;
    'rounds: for round in 0..rounds {
        for &fault in &phases {
            let row = table.entry(format!("{fault:?}")).or_default();
            let restarts = rig.restarts;
            let result = phase(&mut rig, fault, churn_seconds, &mut rng, row, baseline).await;
            restarted_phases += u64::from(rig.restarts > restarts);
            if let Err(e) = result {
                failures.push(format!(
                    "round {round} {fault:?}: {e:#}\ninformerd's log ends: {:#?}",
                    log_tail(&rig.sidecar.log(), 15)
                ));
                // The phases after a failed one start from a broken state: stop here.
                break 'rounds;
            }
        }
    }
    let events: u64 = rig
        .subscribers
        .iter()
        .map(|s| s.seen.lock().unwrap().events)
        .sum();
    print_table(
        &table,
        &format!(
            "events checked (all {} subscribers): {events}\n\
             memory after sync: RSS {:.1} MiB, jemalloc allocated {:.1} MiB; bound after each phase {MEMORY_FACTOR} x + {} MiB\n\
             mixed phase seed: {seed}\n",
            rig.subscribers.len(),
            baseline.0 / 1048576.0,
            baseline.1 / 1048576.0,
            MEMORY_SLACK / 1048576.0,
        ),
    );
    let disorder: Vec<String> = rig
        .subscribers
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            let seen = s.seen.lock().unwrap();
            seen.disorder
                .iter()
                .map(move |d| format!("subscriber {i}: {d}"))
                .collect::<Vec<_>>()
        })
        .collect();
    for (i, s) in rig.subscribers.iter().enumerate() {
        let changes = s.seen.lock().unwrap().epoch_changes;
        assert!(
            changes >= restarted_phases,
            "subscriber {i} was told EpochChanged {changes} times for {restarted_phases} phases that restarted informerd"

        );
    }
    assert!(
        rig.proxy.connections_reset() > 0 || !phases.contains(&Fault::CutAll),
        "the proxy reset no connection: informerd did not go through it"
    );
    rig.finish().await;
    assert!(failures.is_empty(), "failures: {failures:#?}");
    assert!(disorder.is_empty(), "revisions out of order: {disorder:#?}");
    assert!(events > 0, "the subscribers saw no event");
    if let Some(expired) = table.get(&format!("{:?}", Fault::CompactKillApiserver)) {
        assert!(
            expired.expired > 0,
            "compaction and an apiserver restart made no relist for 410 Gone"
        );
    }
    Ok(())
}

/// One phase: churn, the fault, the churn's end, the undo, then agreement and memory.
async fn phase(
    rig: &mut Rig,
    fault: Fault,
    churn_seconds: u32,
    rng: &mut StdRng,
    row: &mut Row,
    baseline: (f64, f64),
) -> anyhow::Result<()> {
    let churn = {
        let cp = rig.plane.control_plane().clone();
        let prefix = rig.prefix.clone();
        let n = fault.churned(rig.namespaces.len());
        tokio::task::spawn_blocking(move || cp.churn(&prefix, n, 30, churn_seconds))
    };
    rig.stall.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarts = rig.restarts;
    let relists_before = (all_relists(rig).await?, expired_relists(rig).await?);
    let injected = inject(fault, rig, rng).await;
    let summary = churn.await?;
    rig.stall.store(false, Ordering::SeqCst);
    row.faults += injected?;
    row.phases += 1;
    match summary {
        Ok(summary) => eprintln!("{fault:?}: {}", summary.trim()),
        // The seeder gives up on a connection its apiserver dropped while dying. What it
        // wrote is what the check compares against, so the phase goes on.
        Err(e) if fault.kills_apiserver() => eprintln!("{fault:?}: the churn stopped early: {e}"),
        Err(e) => return Err(e.into()),
    }
    undo(fault, rig).await?;
    let converged = converge(rig).await;
    // A restart of informerd starts its counts again.
    let relists_after = (all_relists(rig).await?, expired_relists(rig).await?);
    let since = |after: u64, before: u64| {
        if rig.restarts == restarts {
            after.saturating_sub(before)
        } else {
            after
        }
    };
    row.relists += since(relists_after.0, relists_before.0);
    row.expired += since(relists_after.1, relists_before.1);
    match converged {
        Ok(t) => row.times.push(t),
        Err(Disagreement::Diverged(d)) => {
            row.divergences += d.len() as u64;
            anyhow::bail!("divergences: {d:#?}");
        }
        Err(Disagreement::Unavailable { reason, .. }) => {
            anyhow::bail!(
                "control plane unavailable, nothing compared (not a divergence): {reason}"
            );
        }
    }
    if let Ok(dir) = std::env::var("CHAOS_LOGS") {
        // Where the time of a phase went, in informerd's own words.
        let path = std::path::Path::new(&dir).join(format!("{fault:?}-{}.log", row.phases));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(&path, rig.sidecar.plain_log())?;
        eprintln!("{fault:?}: informerd's log so far in {}", path.display());
    }
    let (rss, allocated) = memory(rig).await?;
    let ratio = rss / baseline.0;
    row.memory_ratio = row.memory_ratio.max(ratio);
    eprintln!(
        "{fault:?}: converged; RSS {:.1} MiB ({ratio:.2} x baseline), allocated {:.1} MiB",
        rss / 1048576.0,
        allocated / 1048576.0
    );
    for (what, now, base) in [
        ("RSS", rss, baseline.0),
        ("allocated", allocated, baseline.1),
    ] {
        anyhow::ensure!(
            now <= base * MEMORY_FACTOR + MEMORY_SLACK,
            "{what} {:.1} MiB after {fault:?}, over {MEMORY_FACTOR} x the baseline {:.1} MiB + {} MiB",
            now / 1048576.0,
            base / 1048576.0,
            MEMORY_SLACK / 1048576.0
        );
    }
    Ok(())
}
