//! The faults, and how each is injected while the churn runs (and undone after it, for those
//! that take something away: a namespace, a Role).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::{api::DeleteParams, Api};
use rand::{rngs::StdRng, Rng};

use crate::{rig::Rig, truth::scope_states};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every apiserver connection reset.
    CutAll,
    /// Every apiserver connection stalled for 3 s (no byte through, sockets open).
    Stall,
    /// informerd's start-up list cut after 16 KiB of the response.
    CutMidList,
    /// informerd killed with SIGKILL and restarted.
    KillInformerd,
    /// kube-apiserver killed with SIGKILL; while it is down etcd is advanced by one write and
    /// compacted to it; then it is restarted on the same port: its watch cache starts after
    /// every resourceVersion informerd was told, so informerd's resume gets 410 Gone and
    /// relists (compact.rs: the fault waits for that relist in every scope).
    CompactKillApiserver,
    /// The proxy moved informerd to the second kube-apiserver of the same etcd, and back.
    SwitchApiservers,
    /// The last watched namespace deleted (its pods go with it), and recreated and seeded
    /// after the churn.
    NamespaceRecreated,
    /// informerd's RoleBinding in the last namespace deleted: that scope reports Forbidden
    /// while the others serve; restored after the churn.
    RoleRevoked,
    /// Faults drawn at random (seeded) from [`MIXABLE`], at random moments of one churn.
    Mixed,
}

/// One phase of each, in this order, per round.
pub const PHASES: [Fault; 9] = [
    Fault::CutAll,
    Fault::Stall,
    Fault::CutMidList,
    Fault::CompactKillApiserver,
    Fault::SwitchApiservers,
    Fault::KillInformerd,
    Fault::NamespaceRecreated,
    Fault::RoleRevoked,
    Fault::Mixed,
];

/// The phases of a round: CHAOS_PHASES (names of [`PHASES`], comma-separated, in their order)
/// runs only those, to look into one fault; all of them when unset.
pub fn phases() -> anyhow::Result<Vec<Fault>> {
    let Ok(wanted) = std::env::var("CHAOS_PHASES") else {
        return Ok(PHASES.to_vec());
    };
    let names: Vec<&str> = wanted.split(',').map(str::trim).collect();
    if let Some(unknown) = names
        .iter()
        .find(|n| !PHASES.iter().any(|f| format!("{f:?}") == **n))
    {
        anyhow::bail!("CHAOS_PHASES: no phase {unknown:?}; the phases are {PHASES:?}");
    }
    Ok(PHASES
        .into_iter()
        .filter(|f| names.contains(&format!("{f:?}").as_str()))
        .collect())
}

/// What the mixed phase draws from: the faults that need nothing undone after the churn.
pub const MIXABLE: [Fault; 6] = [
    Fault::CutAll,
    Fault::Stall,
    Fault::CutMidList,
    Fault::KillInformerd,
    Fault::CompactKillApiserver,
    Fault::SwitchApiservers,
];

impl Fault {
    /// Whether the fault may kill kube-apiserver (the mixed phase may draw one that does).
    pub fn kills_apiserver(self) -> bool {
        matches!(self, Fault::CompactKillApiserver | Fault::Mixed)
    }

    /// How many namespaces the churn of this phase touches (the first ones): a namespace
    /// being deleted is left alone, as its pods cannot be written.
    pub fn churned(self, namespaces: usize) -> usize {
        match self {
            Fault::NamespaceRecreated => namespaces - 1,
            _ => namespaces,
        }
    }
}

/// Injects one fault while the churn runs; returns how many faults it counted.
pub async fn inject(fault: Fault, rig: &mut Rig, rng: &mut StdRng) -> anyhow::Result<u64> {
    let last = rig.namespaces.last().expect("namespaces").clone();
    match fault {
        Fault::CutAll => Ok(rig.proxy.cut_all().max(1)),
        Fault::Stall => {
            rig.proxy.stall();
            tokio::time::sleep(Duration::from_secs(3)).await;
            rig.proxy.resume();
            Ok(1)
        }
        Fault::CutMidList => cut_mid_list(rig).await,
        Fault::KillInformerd => {
            tokio::task::block_in_place(|| rig.sidecar.restart())?;
            rig.restarts += 1;
            Ok(1)
        }
        Fault::CompactKillApiserver => crate::compact::compact_kill_apiserver(rig).await,
        Fault::SwitchApiservers => {
            rig.proxy.retarget(rig.apiservers[1]);
            tokio::time::sleep(Duration::from_secs(2)).await;
            rig.proxy.retarget(rig.apiservers[0]);
            Ok(2)
        }
        Fault::NamespaceRecreated => {
            let namespaces: Api<Namespace> = Api::all(rig.client.clone());
            namespaces.delete(&last, &DeleteParams::default()).await?;
            until("the namespace is gone", 180, async || {
                Ok(namespaces.get_opt(&last).await?.is_none())
            })
            .await?;
            Ok(1)
        }
        Fault::RoleRevoked => {
            rig.revoke(&last).await?;
            // Open watches outlive an RBAC change (as in Kubernetes): a cut makes informerd
            // ask again, and be refused.
            rig.proxy.cut_all();
            let socket = rig.socket.clone();
            until("the scope reports Forbidden", 120, async || {
                let states = scope_states(&socket).await?;
                Ok(states.get(&last).map(String::as_str) == Some("Forbidden"))
            })
            .await?;
            let states = scope_states(&rig.socket).await?;
            let others: Vec<_> = states.iter().filter(|(ns, _)| **ns != last).collect();
            anyhow::ensure!(
                others.iter().all(|(_, state)| *state == "Synced"),
                "with {last} forbidden the other scopes must serve: {states:?}"
            );
            Ok(1)
        }
        Fault::Mixed => mixed(rig, rng).await,
    }
}

/// Undoes, after the churn, what the fault took away.
pub async fn undo(fault: Fault, rig: &Rig) -> anyhow::Result<()> {
    let last = rig.namespaces.last().expect("namespaces");
    match fault {
        Fault::NamespaceRecreated => {
            let (cp, prefix, pods, n) = (
                rig.plane.control_plane(),
                &rig.prefix,
                rig.pods,
                rig.namespaces.len(),
            );
            tokio::task::block_in_place(|| cp.seed(prefix, pods, n))?;
            rig.restore(last).await
        }
        Fault::RoleRevoked => rig.restore(last).await,
        _ => Ok(()),
    }
}

/// informerd lists at start-up: restarts it with the cut armed, and waits until the cut has
/// fired (the list is cut, informerd lists again).
async fn cut_mid_list(rig: &mut Rig) -> anyhow::Result<u64> {
    let before = rig.proxy.cuts_mid_stream();
    rig.proxy.cut_after(16 << 10);
    tokio::task::block_in_place(|| rig.sidecar.restart())?;
    rig.restarts += 1;
    let proxy = &rig.proxy;
    let fired = until("the armed cut fires", 60, async || {
        Ok(proxy.cuts_mid_stream() > before)
    })
    .await;
    proxy.disarm();
    fired.map_err(|e| anyhow::anyhow!("no response of 16 KiB went through the proxy: {e}"))?;
    Ok(1)
}

/// Two to four faults from [`MIXABLE`], each after a random pause of up to 2 s.
async fn mixed(rig: &mut Rig, rng: &mut StdRng) -> anyhow::Result<u64> {
    let mut count = 0;
    let mut drawn = Vec::new();
    for _ in 0..rng.random_range(2..=4) {
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..2000))).await;
        let fault = MIXABLE[rng.random_range(0..MIXABLE.len())];
        drawn.push(fault);
        count += Box::pin(inject(fault, rig, rng)).await?;
    }
    eprintln!("mixed phase drew {drawn:?}");
    Ok(count)
}

/// Polls `check` every 100 ms until it says true; an error after `seconds`.
pub async fn until(
    what: &str,
    seconds: u64,
    check: impl AsyncFn() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut last = None;
    while Instant::now() < deadline {
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{what}: not within {seconds} s (last error: {last:?})")
}
