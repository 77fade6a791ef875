//! deploy/monitoring names only what informerd exposes: every metric that an alerting rule's
//! expression, a dashboard panel's query or a dashboard variable's query selects is one the
//! real sidecar's `/metrics` lists, read from a sidecar that has synced against the real
//! apiserver. A rule or panel that names a metric the sidecar lacks (a typo, a metric renamed
//! or removed) could never fire or draw; this test fails instead, naming where and which.
//!
//! Decision: the metric names are read with the Prometheus project's own PromQL parser
//! (`tools/cmd/metricnames`, built by `make` from the module that pins promtool), not a scan
//! of identifiers here: functions, keywords, label names and durations are told apart from
//! metric names exactly as Prometheus does, and an expression that does not parse fails.
//!
//! A family counts as exposed when the exposition lists its `# TYPE` even without a sample yet
//! (an RPC counter before the first call): its names follow from its type (`_total` for a
//! counter, `_bucket`/`_sum`/`_count` for a histogram). The PrometheusRule is checked to hold
//! exactly the rule file, and the kustomization to render both.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use informerd_testkit::{
    documents, free_port, made_tool, metrics_text, repo_root, wait_synced, ControlPlane, Fixture,
    Kubectl, Resource, SidecarConfig,
};
use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const RULES: &str = "deploy/monitoring/informerd-rules.yaml";
const DASHBOARD: &str = "deploy/monitoring/informerd-dashboard.json";
const PROMETHEUS_RULE: &str = "deploy/monitoring/prometheusrule.yaml";

/// A PromQL expression, and where it is written.
#[derive(Debug, Clone)]
struct Query {
    place: String,
    expr: String,
}

/// The expressions of every alerting and recording rule of a rule file.
fn rule_queries(file: &str, text: &str) -> Vec<Query> {
    let rules: Yaml = serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let groups = rules["groups"].as_sequence().cloned().unwrap_or_default();
    assert!(!groups.is_empty(), "{file}: no rule groups");
    let mut out = Vec::new();
    for group in &groups {
        for rule in group["rules"].as_sequence().into_iter().flatten() {
            let name = rule["alert"].as_str().or(rule["record"].as_str());
            let expr = rule["expr"].as_str();
            let (Some(name), Some(expr)) = (name, expr) else {
                panic!("{file}: a rule without a name or an expr: {rule:?}");
            };
            out.push(Query {
                place: format!("{file}: rule {name}"),
                expr: expr.to_string(),
            });
        }
    }
    out
}

/// The queries of every panel (rows' panels included) and query variable of a dashboard,
/// with Grafana's own variables replaced so that they parse as PromQL.
fn dashboard_queries(file: &str, text: &str) -> Vec<Query> {
    let dashboard: Json = serde_json::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    let mut panels: Vec<&Json> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let Some(expr) = target["expr"].as_str() else {
                panic!("{file}: panel {title:?} has a target without an expr: {target}");
            };
            let id = target["refId"].as_str().unwrap_or("?");
            out.push(Query {
                place: format!("{file}: panel {title:?} target {id}"),
                expr: grafana_to_promql(expr),
            });
        }
    }
    let variables = dashboard["templating"]["list"].as_array();
    for variable in variables.into_iter().flatten() {
        if variable["type"] != "query" {
            continue;
        }
        let name = variable["name"].as_str().unwrap_or("?");
        let query = variable["query"]["query"]
            .as_str()
            .or(variable["query"].as_str())
            .unwrap_or_else(|| panic!("{file}: variable {name} has no query"));
        if let Some(expr) = variable_expr(query) {
            out.push(Query {
                place: format!("{file}: variable {name}"),
                expr: grafana_to_promql(&expr),
            });
        }
    }
    out
}

/// The PromQL in a Grafana query variable: `label_values(SELECTOR, LABEL)` and
/// `query_result(EXPR)` hold one; `label_values(LABEL)` none. Any other form cannot be
/// checked, and fails.
fn variable_expr(query: &str) -> Option<String> {
    let query = query.trim();
    if let Some(inner) = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
    {
        return inner
            .rsplit_once(',')
            .map(|(expr, _label)| expr.trim().to_string());
    }
    if let Some(inner) = query
        .strip_prefix("query_result(")
        .and_then(|q| q.strip_suffix(')'))
    {
        return Some(inner.to_string());
    }
    panic!("the variable query {query:?} is neither label_values(...) nor query_result(...)");
}

/// Grafana's interval variables as a duration PromQL reads; label values such as "$job" are
/// strings to PromQL already.
fn grafana_to_promql(expr: &str) -> String {
    [
        "$__rate_interval",
        "${__rate_interval}",
        "$__interval",
        "${__interval}",
        "$__range",
    ]
    .iter()
    .fold(expr.to_string(), |e, var| e.replace(var, "5m"))
}

/// The metric names each expression selects, by `metricnames` (the Prometheus parser); its
/// error names an expression that does not parse.
fn metric_names(queries: &[Query]) -> Result<Vec<Vec<String>>, String> {
    let exprs: Vec<&str> = queries.iter().map(|q| q.expr.as_str()).collect();
    let mut child = Command::new(metricnames())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run metricnames");
    let input = serde_json::to_vec(&exprs).expect("the expressions as JSON");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write the expressions");
    let out = child.wait_with_output().expect("metricnames ends");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).expect("metricnames's JSON"))
}

/// tools/cmd/metricnames, built by `make` when missing or older than its sources (unless
/// `$INFORMERD_METRICNAMES` names one).
fn metricnames() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| made_tool("INFORMERD_METRICNAMES", ".cache/bin/metricnames"))
        .clone()
}

/// Every metric name an exposition offers: its samples' names, and for each `# TYPE` the names
/// its type gives a family (which a family without samples yet has too).
fn exposed_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut words = declared.split_whitespace();
            let (Some(family), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                "gaugehistogram" => &["_bucket", "_gsum", "_gcount"],
                "summary" => &["", "_sum", "_count", "_created"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// `PLACE: METRIC` for each metric a query names that `exposition` does not offer, and
/// `PLACE: names no metric` for a query that selects none (it could not be checked); fails on
/// a query that does not parse.
fn unexposed(queries: &[Query], exposition: &str) -> Vec<String> {
    let exposed = exposed_names(exposition);
    let names = metric_names(queries).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    for (query, names) in queries.iter().zip(names) {
        if names.is_empty() {
            out.push(format!("{}: names no metric: {}", query.place, query.expr));
        }
        for name in names.iter().filter(|n| !exposed.contains(*n)) {
            out.push(format!("{}: {name}", query.place));
        }
    }
    out
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The queries deploy/monitoring ships.
fn shipped_queries() -> Vec<Query> {
    let mut queries = rule_queries(RULES, &read(RULES));
    queries.extend(dashboard_queries(DASHBOARD, &read(DASHBOARD)));
    queries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_rules_and_the_dashboard_name_is_one_informerd_exposes(
) -> anyhow::Result<()> {
    let mut fixture = Fixture::new("monitoring").await?;
    let port = free_port();
    // maxMemory set, so that informerd_limit_max_memory_bytes (absent when off) is listed.
    let config = SidecarConfig::new()
        .server(|s| s.metrics_port(port))
        .limits(|l| l.max_memory("1Gi"))
        .resource(Resource::pods().namespaces([fixture.ns().to_string()]));
    fixture.start_sidecar(Path::new(BIN), &config)?;
    wait_synced(&mut fixture.cache().await?).await?;
    let exposition = metrics_text(port).await?;

    let queries = shipped_queries();
    let missing = unexposed(&queries, &exposition);
    assert!(
        missing.is_empty(),
        "deploy/monitoring names metrics informerd does not expose:\n{}\n\nthe exposition:\n{exposition}",
        missing.join("\n")
    );
    // The first fall behind counts for the alert: its series is there, at 0, before it.
    let fell_behind = r#"informerd_watchers_ended_total{resource="pods",reason="FellBehind"} 0"#;
    assert!(
        exposition.lines().any(|l| l == fell_behind),
        "{fell_behind} in\n{exposition}"
    );
    Ok(())
}

#[test]
fn a_rule_panel_or_variable_naming_a_metric_informerd_lacks_is_named() {
    let rules = "groups:\n- name: g\n  rules:\n  - alert: MadeUp\n    expr: \
        rate(informerd_made_up_total[5m]) > 0 and on (job) informerd_watchers > 0\n  \
        - record: job:informerd_rpc:rate5m\n    expr: sum by (job) \
        (rate(informerd_rpc_handled_total[5m]))\n  - alert: Constant\n    expr: vector(1)\n";
    let dashboard = r#"{"panels": [{"type": "row", "title": "R", "panels": [
        {"title": "P", "targets": [{"refId": "A", "expr":
          "histogram_quantile(0.99, sum by (le) (rate(informerd_rpc_handling_seconds_bucket{job=~\"$job\"}[$__rate_interval])))"},
         {"refId": "B", "expr": "sum(rate(informerd_imaginary_seconds_bucket[$__rate_interval]))"}]}]}],
      "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "job", "type": "query", "query": {"query": "label_values(informerd_nowhere, job)"}},
        {"name": "instance", "type": "query", "query": "label_values(informerd_watchers{job=~\"$job\"}, instance)"}]}}"#;
    // Families without samples: listed by their # TYPE only.
    let exposition = "# HELP informerd_watchers Watch calls open now.\n\
        # TYPE informerd_watchers gauge\n\
        # HELP informerd_rpc_handled gRPC calls completed.\n\
        # TYPE informerd_rpc_handled counter\n\
        # HELP informerd_rpc_handling_seconds How long gRPC calls took.\n\
        # TYPE informerd_rpc_handling_seconds histogram\n\
        # UNIT informerd_rpc_handling_seconds seconds\n\
        # EOF\n";
    let mut queries = rule_queries("rules.yaml", rules);
    queries.extend(dashboard_queries("dashboard.json", dashboard));
    let mut missing = unexposed(&queries, exposition);
    missing.sort();
    assert_eq!(
        missing,
        [
            r#"dashboard.json: panel "P" target B: informerd_imaginary_seconds_bucket"#,
            "dashboard.json: variable job: informerd_nowhere",
            "rules.yaml: rule Constant: names no metric: vector(1)",
            "rules.yaml: rule MadeUp: informerd_made_up_total",
        ]
    );
}

#[test]
fn an_expression_that_does_not_parse_fails_the_check_naming_it() {
    let queries = [Query {
        place: "rules.yaml: rule Broken".into(),
        expr: "rate(informerd_watchers[5m]".into(),
    }];
    let message = metric_names(&queries).expect_err("a failure");
    assert!(
        message.contains("rate(informerd_watchers[5m]") && message.contains("does not parse"),
        "{message}"
    );
}

#[test]
fn the_prometheusrule_holds_exactly_the_rule_file() {
    let rules: Yaml = serde_yaml::from_str(&read(RULES)).expect("the rule file");
    let wrapped: Yaml = serde_yaml::from_str(&read(PROMETHEUS_RULE)).expect("the PrometheusRule");
    assert_eq!(wrapped["kind"], "PrometheusRule");
    assert_eq!(wrapped["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(
        wrapped["spec"], rules,
        "{PROMETHEUS_RULE} differs from {RULES}: run `make monitoring-rules`"
    );
}

#[test]
fn the_kustomization_renders_the_rules_and_the_dashboard() {
    let kubectl = Kubectl::new(ControlPlane::get());
    let rendered = documents(&kubectl.run(&["kustomize", "deploy/monitoring"], ""));
    let rule = rendered.iter().find(|d| d["kind"] == "PrometheusRule");
    let rules: Yaml = serde_yaml::from_str(&read(RULES)).expect("the rule file");
    assert_eq!(rule.map(|r| &r["spec"]), Some(&rules));
    let dashboard = rendered
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("the dashboard's ConfigMap");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        dashboard["data"]["informerd-dashboard.json"].as_str(),
        Some(read(DASHBOARD).as_str())
    );
}
