//! Compacting the control plane's etcd, for the chaos tests: after a compaction past the
//! revision a watch resumes from, the apiserver answers 410 Gone and the client must relist.
//!
//! Decision: through etcd's own JSON gateway (`/v3/kv/range` for the current revision,
//! `/v3/kv/compaction`), which the embedded etcd of tools/cmd/etcd serves on its client URL;
//! no etcd client library or extra tool. The client URL is read from the etcd process's
//! command line (`--listen-client-url`), found through the cluster's `state.json`.

use bytes::Bytes;
use http_body_util::Full;

use crate::{ControlPlane, Error, Result};

impl ControlPlane {
    /// Compacts etcd's history up to its current revision (physically), so that every watch
    /// resumed from an older resourceVersion gets 410 Gone. Returns the revision compacted to.
    pub async fn compact_etcd(&self) -> Result<u64> {
        let url = self.etcd_url()?;
        let range = etcd_call(&url, "/v3/kv/range", r#"{"key":"AA==","limit":1}"#).await?;
        let revision = range["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse::<u64>().ok())
            .ok_or_else(|| etcd_error("/v3/kv/range", format!("no header.revision in {range}")))?;
        let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        etcd_call(&url, "/v3/kv/compaction", &body).await?;
        Ok(revision)
    }

    /// Writes one key outside Kubernetes' prefix (so no apiserver has ever served its
    /// revision) and compacts etcd up to that write. Afterwards etcd's revision is above every
    /// resourceVersion any client was told, and history older than it is gone: a watch cache
    /// started now begins after every such resourceVersion, so each resume answers 410 Gone.
    /// Returns the revision compacted to.
    ///
    /// Decision: the chaos suite calls this while kube-apiserver is down. Compaction alone
    /// (`compact_etcd`) gives 410 only when the client had not yet seen the newest revision
    /// at the kill; with a quiet moment (or a bookmark) it had, and resumed without a relist,
    /// which is right but left the 410 path untested in some runs.
    pub async fn advance_and_compact_etcd(&self) -> Result<u64> {
        let url = self.etcd_url()?;
        // key "informerd-chaos/advance", value "x", base64 as the JSON gateway wants.
        let put = etcd_call(
            &url,
            "/v3/kv/put",
            r#"{"key":"aW5mb3JtZXJkLWNoYW9zL2FkdmFuY2U=","value":"eA=="}"#,
        )
        .await?;
        let revision = put["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse::<u64>().ok())
            .ok_or_else(|| etcd_error("/v3/kv/put", format!("no header.revision in {put}")))?;
        let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        etcd_call(&url, "/v3/kv/compaction", &body).await?;
        Ok(revision)
    }

    /// etcd's client URL, from the command line of the etcd process of this control plane.
    pub fn etcd_url(&self) -> Result<String> {
        let state_path = self.dir.join("state.json");
        let bad = |detail: String| Error::Command {
            command: format!("find etcd's client URL through {}", state_path.display()),
            detail,
        };
        let state: serde_json::Value = std::fs::read(&state_path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .map_err(bad)?;
        let pid = state["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "etcd")
            .and_then(|p| p["pid"].as_u64())
            .ok_or_else(|| bad("no etcd process".into()))?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map_err(|e| bad(format!("etcd process {pid}: {e}")))?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        args.iter()
            .position(|a| a == "--listen-client-url")
            .and_then(|i| args.get(i + 1))
            .cloned()
            .ok_or_else(|| bad(format!("no --listen-client-url in {args:?}")))
    }
}

async fn etcd_call(base: &str, path: &str, body: &str) -> Result<serde_json::Value> {
    let request = hyper::Request::post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| etcd_error(path, e.to_string()))?;
    let bytes = crate::metrics::http(&format!("etcd {path}"), request).await?;
    serde_json::from_slice(&bytes).map_err(|e| etcd_error(path, e.to_string()))
}

fn etcd_error(path: &str, detail: String) -> Error {
    Error::Command {
        command: format!("etcd {path}"),
        detail,
    }
}
