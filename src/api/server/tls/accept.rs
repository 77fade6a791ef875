//! The TLS connections of the TCP listener. Each accepted connection is handshaken with the
//! server configuration current at that moment; handshakes run beside the accept loop, so a
//! slow or silent client holds up no one but itself.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::TcpIncoming;

/// A TLS connection over TCP, as the gRPC server serves it.
pub type TlsTcpStream = tokio_rustls::server::TlsStream<TcpStream>;

/// How long a client has to complete its handshake.
///
/// Decision: bounded, so that connections that open and say nothing do not pile up; 10 s is
/// far above a handshake's round trips, even across a busy cluster network.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections handshaken and not yet taken by the server.
const READY: usize = 64;

/// The TLS connections of `tcp`, each made with the configuration in `configs` when it was
/// accepted. Accepting stops when the returned stream is dropped (the server stops).
pub fn accept(
    tcp: TcpIncoming,
    configs: watch::Receiver<Arc<ServerConfig>>,
) -> ReceiverStream<std::io::Result<TlsTcpStream>> {
    let (ready, stream) = mpsc::channel(READY);
    tokio::spawn(accept_loop(tcp, configs, ready));
    ReceiverStream::new(stream)
}

async fn accept_loop(
    mut tcp: TcpIncoming,
    configs: watch::Receiver<Arc<ServerConfig>>,
    ready: mpsc::Sender<std::io::Result<TlsTcpStream>>,
) {
    loop {
        let next = tokio::select! {
            () = ready.closed() => return,
            next = tcp.next() => next,
        };
        let stream = match next {
            None => return,
            Some(Ok(stream)) => stream,
            // The server decides what an accept error means (it logs and goes on).
            Some(Err(e)) => {
                if ready.send(Err(e)).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let acceptor = TlsAcceptor::from(configs.borrow().clone());
        let ready = ready.clone();
        tokio::spawn(async move {
            let peer = stream.peer_addr().ok();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send(Ok(tls)).await;
                }
                // The client's problem (an untrusted certificate, plaintext, a port scan):
                // the server goes on, as tonic's own TLS does.
                Ok(Err(e)) => tracing::debug!(?peer, error = %e, "TLS handshake failed"),
                Err(_) => {
                    tracing::debug!(?peer, timeout = ?HANDSHAKE_TIMEOUT, "TLS handshake timed out")
                }
            }
        });
    }
}
