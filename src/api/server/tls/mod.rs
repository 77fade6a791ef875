//! TLS on the TCP listener, with the certificate, its key and the client CA bundle read again
//! when their files change: cert-manager rotates them in a Secret that the kubelet updates in
//! the pod, and a sidecar that read them once would serve an expired certificate, or refuse
//! clients whose certificates come from a new CA, until it restarts.
//!
//! - `files`: the files of `server.tls` made into a rustls server configuration, and read again
//!   to see whether they changed.
//! - `accept`: the TLS connections of the TCP listener, each made with the configuration
//!   current when it was accepted.
//!
//! The injection webhook (`crate::inject`) serves its certificate through the same code, with
//! its own ALPN and its own name in the logs ([`Served`]).
//!
//! New connections get the new certificate and CAs; connections already open go on with what
//! they were made with. At start-up a file that does not load stops informerd (the caller
//! reports the field); afterwards it only logs a warning naming the file.
//!
//! What it must NOT do: ever serve without TLS, or stop serving, because a file went bad: a
//! file that cannot be read, or a new pair that does not load or match, keeps the previous
//! good configuration.

mod accept;
mod files;

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::watch;
use tokio_rustls::rustls::ServerConfig;
use tonic::transport::server::TcpIncoming;

use crate::config::TlsConfig;
pub use accept::TlsTcpStream;
pub use files::TlsError;
use files::{Files, Reload, ALPN_H2};

/// Which server the files are for: what it offers in ALPN, and how logs name its files.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    /// The protocols offered in ALPN, most preferred first.
    pub alpn: &'static [&'static [u8]],
    /// What names the files in logs: a configuration field or command-line flags.
    pub name: &'static str,
}

/// The gRPC listener (`server.tls`): HTTP/2 only, as gRPC clients require.
const GRPC: Served = Served {
    alpn: &[ALPN_H2],
    name: "server.tls",
};

/// How often the files are read again.
///
/// Decision: poll the files' contents (see `files::Contents` for why not inotify or mtimes)
/// every few seconds, as Kubernetes components do (controller-runtime's certwatcher polls
/// too). The kubelet itself takes up to a minute to update a mounted Secret, so a few seconds
/// more is nothing, and three small reads every 5 s cost nothing.
const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// Loads the files of `tls` and returns the TLS connections of `tcp`; keeps reloading the
/// files until the stream is dropped. Call from within a Tokio runtime.
pub fn incoming(
    tls: &TlsConfig,
    tcp: TcpIncoming,
) -> Result<impl Stream<Item = std::io::Result<TlsTcpStream>>, TlsError> {
    incoming_for(GRPC, tls, tcp)
}

/// [`incoming`] for the server `served`.
pub fn incoming_for(
    served: Served,
    tls: &TlsConfig,
    tcp: TcpIncoming,
) -> Result<impl Stream<Item = std::io::Result<TlsTcpStream>>, TlsError> {
    let (files, config) = files::load_for(tls, served.alpn)?;
    let (current, configs) = watch::channel(config);
    tokio::spawn(keep_current(files, current, RELOAD_INTERVAL, served.name));
    Ok(accept::accept(tcp, configs))
}

/// Reads the files every `interval` and publishes each new good configuration to `current`,
/// until nobody accepts connections with it any more. A problem is logged once, not at every
/// poll.
async fn keep_current(
    mut files: Files,
    current: watch::Sender<Arc<ServerConfig>>,
    interval: Duration,
    name: &'static str,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: the files were read a moment ago.
    tick.tick().await;
    let mut reported: Option<TlsError> = None;
    loop {
        tokio::select! {
            () = current.closed() => return,
            _ = tick.tick() => {}
        }
        // Reading files blocks (a network file system can be slow): off the async workers.
        let polled = tokio::task::spawn_blocking(move || {
            let reload = files.poll();
            (files, reload)
        })
        .await;
        let Ok((polled_files, reload)) = polled else {
            tracing::error!("{name}: reading the files again failed; no more reloads");
            return;
        };
        files = polled_files;
        match reload {
            Reload::Unchanged => reported = None,
            Reload::Reloaded(config) => {
                reported = None;
                current.send_replace(config);
                tracing::info!("{name}: the files changed; new connections use the new certificate and client CAs");
            }
            Reload::Kept(e) if reported.as_ref() == Some(&e) => {}
            Reload::Kept(e) => {
                tracing::warn!(error = %e, "{name}: a changed file does not load; new connections keep the previous certificate and client CAs");
                reported = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests;
