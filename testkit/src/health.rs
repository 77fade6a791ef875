//! Whether a control plane can answer at all: etcd's own `/health` and kube-apiserver's
//! `/readyz`. The soak asks it when the apiserver's list for a divergence check fails, so that
//! a control plane that is down (its etcd unready, its apiserver not answering) is reported as
//! such, not counted as informerd diverging from it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use crate::ControlPlane;

/// How long each probe waits for its answer.
const PROBE: Duration = Duration::from_secs(5);

impl ControlPlane {
    /// `Ok` when etcd says it is healthy and kube-apiserver's `/readyz` answers `ok`, each
    /// within 5 s; otherwise what is unavailable and why (both, when both are).
    pub async fn availability(&self) -> std::result::Result<(), String> {
        let mut problems = Vec::new();
        if let Err(e) = self.etcd_health().await {
            problems.push(format!("etcd unready: {e}"));
        }
        if let Err(e) = self.apiserver_readyz().await {
            problems.push(format!("kube-apiserver not ready: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// etcd's `/health` on its client URL: `{"health":"true"}` when it serves.
    async fn etcd_health(&self) -> std::result::Result<(), String> {
        let url = format!("{}/health", self.etcd_url().map_err(|e| e.to_string())?);
        let request = hyper::Request::get(&url)
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let body = tokio::time::timeout(PROBE, crate::metrics::http("etcd /health", request))
            .await
            .map_err(|_| format!("no answer within {PROBE:?}"))?
            .map_err(|e| e.to_string())?;
        let health: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        match health["health"].as_str() {
            Some("true") => Ok(()),
            _ => Err(format!("/health says {health}")),
        }
    }

    /// kube-apiserver's `/readyz`, as the admin.
    async fn apiserver_readyz(&self) -> std::result::Result<(), String> {
        let client = self.client().await.map_err(|e| e.to_string())?;
        let request = hyper::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = tokio::time::timeout(PROBE, client.request_text(request))
            .await
            .map_err(|_| format!("no answer within {PROBE:?}"))?
            .map_err(|e| e.to_string())?;
        if text.trim() == "ok" {
            Ok(())
        } else {
            Err(format!("/readyz says {}", text.trim()))
        }
    }
}
