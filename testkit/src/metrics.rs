//! Reading a sidecar's `/metrics` in tests that watch its figures over time (the chaos suite's
//! memory bound and relist reasons, the soak's samples), and the one plain-HTTP call the
//! testkit makes (etcd's JSON gateway uses it too).
//!
//! Decision: a small reader of the Prometheus text format (`name{labels} value` lines, comments
//! skipped) rather than a parser library: these tests read a few counters and gauges by name
//! and label; tests/metrics.rs checks the exposition itself with the Prometheus project's own
//! parser.

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};

use crate::{Error, Result};

/// One sample: its family name with the `_total`/unit suffix as exposed, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of one scrape.
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<Sample>);

impl Samples {
    /// The sum of the samples named `name` whose labels include every pair of `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    }
}

/// GETs `http://127.0.0.1:{port}/metrics` and reads its samples.
pub async fn scrape_metrics(port: u16) -> Result<Samples> {
    Ok(parse(&metrics_text(port).await?))
}

/// GETs `http://127.0.0.1:{port}/metrics`: the exposition as served (`# TYPE` lines included,
/// which list the families that have no sample yet).
pub async fn metrics_text(port: u16) -> Result<String> {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let request = hyper::Request::get(&url)
        .body(Full::new(Bytes::new()))
        .map_err(|e| http_error(&url, e.to_string()))?;
    let body = http(&url, request).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Parses the text exposition format (label values without escaped quotes or commas, as
/// informerd's are).
pub fn parse(text: &str) -> Samples {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = match line.rsplit_once(' ') {
            Some((s, v)) => (s, v),
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim_matches('"').to_string()))
            .collect();
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Samples(out)
}

/// Sends one plain-HTTP request; returns the body of a 2xx answer, an error naming `what`
/// otherwise.
pub(crate) async fn http(what: &str, request: hyper::Request<Full<Bytes>>) -> Result<Bytes> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client
        .request(request)
        .await
        .map_err(|e| http_error(what, e.to_string()))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| http_error(what, e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(http_error(
            what,
            format!("{status}: {}", String::from_utf8_lossy(&bytes)),
        ));
    }
    Ok(bytes)
}

fn http_error(what: &str, detail: String) -> Error {
    Error::Command {
        command: format!("HTTP {what}"),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_counters_by_name_and_labels() {
        let text = "# HELP x y\n# TYPE informerd_scope_relists counter\n\
            informerd_scope_relists_total{resource=\"pods\",scope=\"a\",reason=\"expired\"} 2\n\
            informerd_scope_relists_total{resource=\"pods\",scope=\"b\",reason=\"expired\"} 3\n\
            informerd_scope_relists_total{resource=\"pods\",scope=\"b\",reason=\"reconnect\"} 7\n\
            informerd_memory_resident_bytes 1.5e6\n# EOF\n";
        let s = parse(text);
        assert_eq!(
            s.sum("informerd_scope_relists_total", &[("reason", "expired")]),
            5.0
        );
        assert_eq!(
            s.sum(
                "informerd_scope_relists_total",
                &[("scope", "b"), ("reason", "reconnect")]
            ),
            7.0
        );
        assert_eq!(s.sum("informerd_memory_resident_bytes", &[]), 1.5e6);
        assert_eq!(s.sum("absent", &[]), 0.0);
    }
}
