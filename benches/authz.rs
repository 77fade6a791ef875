//! The cost of per-client authorization (`server.authorization: kubernetes`), on the local
//! control plane:
//!
//! 1. `Get` latency with authorization on, every decision cached, as a ratio to the same `Get`
//!    with it off: two sidecars over the same pods, called in alternating rounds over their
//!    Unix sockets (`AUTHZ_GETS` calls each, default 2000).
//! 2. How many SubjectAccessReviews 1,000 `Get`s from 10 clients (10 ServiceAccounts, each
//!    its own token, 100 concurrent calls each over 10 pods) cause, on a fresh sidecar: counted
//!    by informerd (`informerd_authz_decisions_total{check="access",cache="miss"}`) and by the
//!    apiserver (`apiserver_request_total{resource="subjectaccessreviews"}`, before and after).
//!
//! Prints a Markdown report and writes it to `benches/results/authz.md`. Fails when the two
//! counts disagree or a call fails.
//!
//! ```sh
//! cargo bench --bench authz
//! ```

#[path = "common/mod.rs"]
mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::stats::{micros, Stats};
use common::{env_or, InNamespace};
use http_body_util::BodyExt;
use informerd::proto::GetRequest;
use informerd_client::{connect_with_token, AuthorizedCache, ConnectOptions, Token};
use informerd_testkit::{
    free_port, grant_pod_readers, wait_synced, Authorization, Resource, Sidecar, SidecarConfig,
};
use kube::api::{Patch, PatchParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const CLIENTS: usize = 10;
const REQUESTS: usize = 1000;
const PODS: usize = 10;

struct Settings {
    gets: usize,
}

fn settings() -> anyhow::Result<Settings> {
    Ok(Settings {
        gets: env_or("AUTHZ_GETS", 2000)?,
    })
}

fn main() -> ExitCode {
    common::main_in_namespace(
        "authz",
        "bench-authz",
        "the SubjectAccessReview counts of informerd and of the apiserver differ",
        settings,
        bench,
    )
}

async fn bench(at: &InNamespace<'_>, s: &Settings) -> anyhow::Result<bool> {
    for i in 0..PODS {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        });
        at.pods
            .patch(
                &format!("p{i}"),
                &PatchParams::apply("bench-authz").force(),
                &Patch::Apply(pod),
            )
            .await?;
    }
    grant_clients(at).await?;
    let mut tokens = Vec::new();
    for i in 0..CLIENTS {
        tokens.push(
            at.cluster
                .service_account_token(at.ns, &format!("client-{i}"), &["informerd"], 3600)
                .await?,
        );
    }
    let off = SidecarConfig::new().resource(Resource::pods().namespaces([at.ns]));
    let on = off
        .clone()
        .server(|s| s.authorization(Authorization::kubernetes()));

    // 1. Latency, decisions cached.
    let (off_config, on_config) = (off, on);
    let off = Sidecar::start(BIN.as_ref(), at.cluster, &off_config)?;
    let on = Sidecar::start(BIN.as_ref(), at.cluster, &on_config)?;
    let mut off_client = connect(&off, None).await?;
    let mut on_client = connect(&on, Some(&tokens[0])).await?;
    wait_readable(&mut off_client, at.ns).await?;
    wait_readable(&mut on_client, at.ns).await?;
    let (mut off_us, mut on_us) = (Vec::new(), Vec::new());
    for _round in 0..10 {
        off_us.extend(gets(&mut off_client, at.ns, s.gets / 10).await?);
        on_us.extend(gets(&mut on_client, at.ns, s.gets / 10).await?);
    }
    let (off_stats, on_stats) = (Stats::of(off_us), Stats::of(on_us));
    drop((off, on));

    // 2. Reviews for 1,000 requests from 10 clients, on a fresh sidecar.
    let port = free_port();
    let counted = Sidecar::start(
        BIN.as_ref(),
        at.cluster,
        &on_config.server(|s| s.metrics_port(port)),
    )?;
    let admin = at.cluster.client().await?;
    let mut clients = Vec::new();
    for token in &tokens {
        clients.push(connect(&counted, Some(token)).await?);
    }
    let ready_client = &mut clients[0];
    wait_synced(ready_client).await?;
    let apiserver_before = apiserver_reviews(&admin).await?;
    let informerd_before = informerd_reviews(port).await?;
    let started = Instant::now();
    let calls = clients.into_iter().map(|mut client| {
        let ns = at.ns.to_string();
        tokio::spawn(async move {
            for i in 0..REQUESTS / CLIENTS {
                get(&mut client, &ns, &format!("p{}", i % PODS)).await?;
            }
            anyhow::Ok(())
        })
    });
    for call in futures::future::join_all(calls).await {
        call??;
    }
    let elapsed = started.elapsed();
    let informerd_count = informerd_reviews(port).await? - informerd_before;
    let apiserver_count = apiserver_reviews(&admin).await? - apiserver_before;

    let ratio = |a: i64, b: i64| a as f64 / b.max(1) as f64;
    let report = format!(
        "# Per-client authorization: cost\n\n\
         `cargo bench --bench authz` ({profile} build, {cpus} CPUs, control plane on the same \
         machine), pods of one namespace over the Unix socket.\n\n\
         ## Get latency, decision cached\n\n{header}\n{off_row}\n{on_row}\n\n\
         Ratio on/off: p50 {p50:.2}, p90 {p90:.2}, p99 {p99:.2}.\n\n\
         ## SubjectAccessReviews for {REQUESTS} Gets from {CLIENTS} clients\n\n\
         {CLIENTS} ServiceAccounts, each with its own token, {per} concurrent Gets each over \
         {PODS} pods, on a sidecar that had made no decision yet ({secs:.2} s in all).\n\n\
         | counted by | SubjectAccessReviews |\n|:--|---:|\n\
         | informerd (`informerd_authz_decisions_total{{check=\"access\",cache=\"miss\"}}`) | {informerd_count} |\n\
         | apiserver (`apiserver_request_total{{resource=\"subjectaccessreviews\"}}`, difference) | {apiserver_count} |\n\n\
         One review per client: a `get` allowed without a name covers every object of the \
         kind in that namespace, and concurrent calls with the same question wait for one \
         review.\n",
        profile = common::profile(),
        cpus = common::cpus(),
        header = Stats::header("Get (ms)").join("\n"),
        off_row = off_stats.row("authorization off"),
        on_row = on_stats.row("authorization on, cached"),
        p50 = ratio(on_stats.p50, off_stats.p50),
        p90 = ratio(on_stats.p90, off_stats.p90),
        p99 = ratio(on_stats.p99, off_stats.p99),
        per = REQUESTS / CLIENTS,
        secs = elapsed.as_secs_f64(),
    );
    println!("{report}");
    let path = common::results::dir()?.join("authz.md");
    std::fs::write(&path, &report)?;
    println!("written to benches/results/authz.md");
    Ok(informerd_count == apiserver_count && informerd_count > 0)
}

/// A Role that may get, list and watch the namespace's pods, bound to `client-0..9`.
async fn grant_clients(at: &InNamespace<'_>) -> anyhow::Result<()> {
    let admin = at.cluster.client().await?;
    let names: Vec<String> = (0..CLIENTS).map(|i| format!("client-{i}")).collect();
    let subjects: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), at.ns)).collect();
    grant_pod_readers(&admin, at.ns, "bench-readers", &subjects).await?;
    Ok(())
}

async fn connect(sidecar: &Sidecar, token: Option<&str>) -> anyhow::Result<AuthorizedCache> {
    let socket = sidecar.socket().display().to_string();
    // Without authorization the token is sent and ignored: both clients pay the same header.
    let token = Token::new(token.unwrap_or("unused"))?;
    Ok(connect_with_token(&socket, &ConnectOptions::default(), token).await?)
}

async fn get(client: &mut AuthorizedCache, ns: &str, name: &str) -> anyhow::Result<()> {
    let request = GetRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    };
    client.get(request).await?;
    Ok(())
}

/// `n` sequential Gets of pod p0, each in microseconds.
async fn gets(client: &mut AuthorizedCache, ns: &str, n: usize) -> anyhow::Result<Vec<i64>> {
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        get(client, ns, "p0").await?;
        took.push(micros(Instant::now(), started));
    }
    Ok(took)
}

/// Until the client may Get (synced, and RBAC has seen the binding), so that the measured
/// calls are all cached decisions.
async fn wait_readable(client: &mut AuthorizedCache, ns: &str) -> anyhow::Result<()> {
    // Status needs only a valid token.
    wait_synced(client).await?;
    for _ in 0..600 {
        if get(client, ns, "p0").await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!("the client may not Get")
}

/// The sum of the samples of `family` whose labels include every one of `labels`.
fn sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn apiserver_reviews(admin: &kube::Client) -> anyhow::Result<u64> {
    let text = admin
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await?;
    Ok(sum(
        &text,
        "apiserver_request_total",
        &["resource=\"subjectaccessreviews\""],
    ) as u64)
}

async fn informerd_reviews(port: u16) -> anyhow::Result<u64> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let response = client
        .get(format!("http://127.0.0.1:{port}/metrics").parse()?)
        .await?;
    let body = response.into_body().collect().await?.to_bytes();
    let text = String::from_utf8_lossy(&body);
    Ok(sum(
        &text,
        "informerd_authz_decisions_total",
        &["check=\"access\"", "cache=\"miss\""],
    ) as u64)
}
