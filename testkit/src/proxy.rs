//! A fault-injecting TCP proxy between informerd and kube-apiserver, for the chaos tests: on
//! command it cuts every connection, stalls them (no byte goes through, sockets stay open),
//! cuts one connection in the middle of a large response (a list), and forwards normally
//! again. TLS passes through untouched: the proxy sees only TCP, and the client verifies the
//! apiserver's certificate, whose SANs include 127.0.0.1, the address the proxy listens on.
//!
//! Decision: the proxy cannot see requests inside TLS, so "cut in the middle of a list" is
//! "cut the first connection that carries N more response bytes after being armed". Watch
//! events are small and a list of a few hundred pods is hundreds of kilobytes in one burst, so
//! arming it just before informerd lists (its start-up, or a relist after 410 Gone) cuts the
//! list; [`FaultProxy::cuts_mid_stream`] says whether it fired.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};

use crate::{sidecar::io, ControlPlane, Error, Result};

/// A running proxy; dropped, it stops, and the connections through it end.
///
/// Decision: it runs on a runtime of its own (one thread), not the test's: a test that also
/// runs a hundred busy subscribers on its runtime would otherwise starve the proxy, and the
/// faults' reconvergence times would measure the test's scheduling rather than informerd.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The apiserver's control plane through the proxy; `None` for a proxy to anything else
    /// ([`FaultProxy::to`]).
    via: Option<ControlPlane>,
    runtime: Option<tokio::runtime::Runtime>,
}

#[derive(Debug)]
struct Shared {
    /// Where new connections go; [`FaultProxy::retarget`] moves it.
    upstream: Mutex<SocketAddr>,
    /// False while stalled.
    forwarding: watch::Sender<bool>,
    /// Bumped by [`FaultProxy::cut_all`]: every connection open at that moment is reset.
    cuts: watch::Sender<u64>,
    /// Armed by [`FaultProxy::cut_after`]: (arming number, bytes).
    armed: Mutex<Option<(u64, u64)>>,
    arming: AtomicU64,
    open: AtomicU64,
    accepted: AtomicU64,
    reset: AtomicU64,
    mid_stream: AtomicU64,
}

impl Shared {
    /// Forwarding to `upstream`, nothing armed, nothing counted yet.
    fn new(upstream: SocketAddr) -> Shared {
        Shared {
            upstream: Mutex::new(upstream),
            forwarding: watch::channel(true).0,
            cuts: watch::channel(0).0,
            armed: Mutex::new(None),
            arming: AtomicU64::new(0),
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            reset: AtomicU64::new(0),
            mid_stream: AtomicU64::new(0),
        }
    }
}

impl FaultProxy {
    /// Starts a proxy to the control plane's apiserver on a free port of 127.0.0.1, and writes
    /// a copy of the admin kubeconfig whose server is the proxy.
    pub async fn start(cp: &ControlPlane) -> Result<FaultProxy> {
        let dir = crate::sidecar::temp_dir()?;
        let kubeconfig = dir.join("kubeconfig");
        let (upstream, _) = rewrite_server(cp.kubeconfig(), None)?;
        let mut proxy = Self::to(upstream)?;
        let (_, text) = rewrite_server(cp.kubeconfig(), Some(proxy.addr))?;
        std::fs::write(&kubeconfig, text).map_err(|e| io("write the proxy kubeconfig", e))?;
        proxy.via = Some(ControlPlane {
            repo: cp.repo.clone(),
            dir: cp.dir.clone(),
            kubeconfig,
        });
        Ok(proxy)
    }

    /// A proxy to any TCP `upstream` on a free port of 127.0.0.1 (e.g. informerd's listener,
    /// [`FaultProxy::retarget`] then moving its clients to another replica, as a Service
    /// does when the endpoint they were on goes away).
    pub fn to(upstream: SocketAddr) -> Result<FaultProxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .map_err(|e| io("start the fault proxy's runtime", e))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| io("bind the fault proxy", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| io("read the fault proxy's address", e))?;
        let shared = Arc::new(Shared::new(upstream));
        let listener = {
            let _in = runtime.enter();
            TcpListener::from_std(listener).map_err(|e| io("listen on the fault proxy", e))?
        };
        runtime.spawn(accept_loop(listener, shared.clone()));
        Ok(FaultProxy {
            addr,
            shared,
            via: None,
            runtime: Some(runtime),
        })
    }

    /// The same control plane, reached through the proxy: give it to
    /// [`crate::Sidecar::start`] so that informerd's traffic goes through the faults.
    pub fn control_plane(&self) -> &ControlPlane {
        self.via
            .as_ref()
            .expect("a proxy to the apiserver (FaultProxy::start)")
    }

    /// Like [`FaultProxy::control_plane`], acting as `user` (e.g.
    /// `system:serviceaccount:NS:NAME`) through the admin's right to impersonate: RBAC decides
    /// what informerd may list, as in a pod, and a test can revoke it.
    pub fn control_plane_as(&self, user: &str) -> Result<ControlPlane> {
        let path = &self.control_plane().kubeconfig;
        let bad = |detail: String| Error::Command {
            command: format!("write an impersonating copy of {}", path.display()),
            detail,
        };
        let mut kubeconfig =
            kube::config::Kubeconfig::read_from(path).map_err(|e| bad(e.to_string()))?;
        for auth in kubeconfig
            .auth_infos
            .iter_mut()
            .filter_map(|u| u.auth_info.as_mut())
        {
            auth.impersonate = Some(user.to_string());
        }
        let text = serde_yaml::to_string(&kubeconfig).map_err(|e| bad(e.to_string()))?;
        let copy = path.with_file_name(format!("kubeconfig-as-{}", user.replace(':', "-")));
        std::fs::write(&copy, text).map_err(|e| bad(e.to_string()))?;
        Ok(ControlPlane {
            kubeconfig: copy,
            ..self.control_plane().clone()
        })
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Resets every open connection (the client sees ECONNRESET, as when a node or a load
    /// balancer drops them); new connections are accepted as before. Returns how many were
    /// open.
    pub fn cut_all(&self) -> u64 {
        let open = self.shared.open.load(Ordering::SeqCst);
        self.shared.cuts.send_modify(|n| *n += 1);
        open
    }

    /// Stops forwarding: no byte goes through in either direction, on open or new connections,
    /// and the sockets stay open, until [`FaultProxy::resume`].
    pub fn stall(&self) {
        self.shared.forwarding.send_replace(false);
    }

    /// Forwards normally again (what was held during a stall goes through).
    pub fn resume(&self) {
        self.shared.forwarding.send_replace(true);
    }

    /// Arms a cut: the first connection that carries `bytes` more bytes from the apiserver
    /// gets exactly those through and is then reset, in the middle of its response. Fires once.
    pub fn cut_after(&self, bytes: u64) {
        let arming = self.shared.arming.fetch_add(1, Ordering::SeqCst) + 1;
        *self.shared.armed.lock().expect("proxy lock") = Some((arming, bytes));
    }

    /// Disarms a [`FaultProxy::cut_after`] that has not fired; returns whether one was armed.
    pub fn disarm(&self) -> bool {
        self.shared
            .armed
            .lock()
            .expect("proxy lock")
            .take()
            .is_some()
    }

    /// Sends new connections to `upstream` (another kube-apiserver of the same etcd, as a load
    /// balancer moves clients between apiservers) and resets the open ones, so that every
    /// request from now on reaches `upstream`. Returns how many were open.
    pub fn retarget(&self, upstream: SocketAddr) -> u64 {
        *self.shared.upstream.lock().expect("proxy lock") = upstream;
        self.cut_all()
    }

    /// Where new connections go now.
    pub fn upstream(&self) -> SocketAddr {
        *self.shared.upstream.lock().expect("proxy lock")
    }

    /// How many connections [`FaultProxy::cut_after`] has cut so far.
    pub fn cuts_mid_stream(&self) -> u64 {
        self.shared.mid_stream.load(Ordering::SeqCst)
    }

    /// How many connections were reset by [`FaultProxy::cut_all`] so far.
    pub fn connections_reset(&self) -> u64 {
        self.shared.reset.load(Ordering::SeqCst)
    }

    /// How many connections the proxy has accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        if let Some(dir) = self.via.as_ref().and_then(|v| v.kubeconfig.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The address of the (first) cluster's server in a kubeconfig.
pub(crate) fn server_of(kubeconfig: &Path) -> Result<SocketAddr> {
    rewrite_server(kubeconfig, None).map(|(server, _)| server)
}

/// Reads a kubeconfig, returns the address of its (first) cluster's server and the kubeconfig
/// with every cluster's server replaced by `https://{server}` when given.
fn rewrite_server(path: &Path, server: Option<SocketAddr>) -> Result<(SocketAddr, String)> {
    let bad = |detail: String| Error::Command {
        command: format!("read the kubeconfig {}", path.display()),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let clusters = doc
        .get_mut("clusters")
        .and_then(|c| c.as_sequence_mut())
        .ok_or_else(|| bad("no clusters".into()))?;
    let mut upstream = None;
    for cluster in clusters {
        let Some(url) = cluster.get_mut("cluster").and_then(|c| c.get_mut("server")) else {
            continue;
        };
        let current = url.as_str().unwrap_or_default();
        let hostport = current.trim_start_matches("https://").trim_end_matches('/');
        if upstream.is_none() {
            upstream = Some(
                hostport
                    .parse::<SocketAddr>()
                    .map_err(|e| bad(format!("server {current}: {e}")))?,
            );
        }
        if let Some(server) = server {
            *url = serde_yaml::Value::String(format!("https://{server}"));
        }
    }
    let upstream = upstream.ok_or_else(|| bad("no cluster with a server".into()))?;
    let text = serde_yaml::to_string(&doc).map_err(|e| bad(e.to_string()))?;
    Ok((upstream, text))
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(serve(client, shared.clone()));
    }
}

/// How a connection ended.
enum End {
    /// Both sides closed, or one failed: the peers see what the other did.
    Closed,
    /// The proxy cut it: reset the client's socket.
    Cut,
}

async fn serve(mut client: TcpStream, shared: Arc<Shared>) {
    shared.open.fetch_add(1, Ordering::SeqCst);
    let mut cuts = shared.cuts.subscribe();
    cuts.borrow_and_update();
    let end = tokio::select! {
        _ = cuts.changed() => {
            shared.reset.fetch_add(1, Ordering::SeqCst);
            End::Cut
        }
        end = relay(&mut client, &shared) => end,
    };
    if let End::Cut = end {
        // Linger 0: close() sends a RST, as a dropped connection does.
        let _ = client.set_zero_linger();
    }
    drop(client);
    shared.open.fetch_sub(1, Ordering::SeqCst);
}

async fn relay(client: &mut TcpStream, shared: &Shared) -> End {
    if forwarding(shared).await.is_err() {
        return End::Closed;
    }
    let target = *shared.upstream.lock().expect("proxy lock");
    let Ok(mut upstream) = TcpStream::connect(target).await else {
        return End::Cut;
    };
    let (mut client_read, mut client_write) = client.split();
    let (mut up_read, mut up_write) = upstream.split();
    let up = pump(&mut client_read, &mut up_write, shared, false);
    let down = pump(&mut up_read, &mut client_write, shared, true);
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        let flow = tokio::select! {
            flow = &mut up, if !up_done => { up_done = true; flow }
            flow = &mut down, if !down_done => { down_done = true; flow }
        };
        match flow {
            Ok(Flow::Eof) => {}
            Ok(Flow::Cut) => return End::Cut,
            Err(_) => return End::Closed,
        }
    }
    End::Closed
}

enum Flow {
    Eof,
    Cut,
}

/// Copies `from` to `to` until EOF, holding bytes while stalled; `response` marks the
/// apiserver-to-client direction, the one an armed [`FaultProxy::cut_after`] counts.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    shared: &Shared,
    response: bool,
) -> std::io::Result<Flow>
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 64 << 10];
    // (arming number, bytes seen since it) for the cut this connection counts towards.
    let mut counted = (0u64, 0u64);
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            to.shutdown().await?;
            return Ok(Flow::Eof);
        }
        forwarding(shared).await?;
        if response {
            if let Some(pass) = cut_point(shared, &mut counted, n as u64) {
                to.write_all(&buf[..pass as usize]).await?;
                to.flush().await?;
                return Ok(Flow::Cut);
            }
        }
        to.write_all(&buf[..n]).await?;
    }
}

/// With a cut armed, counts `n` more response bytes on this connection; when they reach the
/// armed number, disarms and returns how many of the `n` still go through before the cut.
fn cut_point(shared: &Shared, counted: &mut (u64, u64), n: u64) -> Option<u64> {
    let mut armed = shared.armed.lock().expect("proxy lock");
    let (arming, limit) = (*armed)?;
    if counted.0 != arming {
        *counted = (arming, 0);
    }
    let before = counted.1;
    counted.1 += n;
    if counted.1 < limit {
        return None;
    }
    *armed = None;
    shared.mid_stream.fetch_add(1, Ordering::SeqCst);
    Some(limit - before)
}

/// Waits until the proxy forwards (returns at once unless stalled).
async fn forwarding(shared: &Shared) -> std::io::Result<()> {
    let mut rx = shared.forwarding.subscribe();
    rx.wait_for(|on| *on)
        .await
        .map(|_| ())
        .map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared::new("127.0.0.1:1".parse().unwrap())
    }

    #[test]
    fn an_armed_cut_lets_exactly_its_bytes_through_once() {
        let s = shared();
        let mut conn = (0, 0);
        assert_eq!(cut_point(&s, &mut conn, 1000), None, "not armed");
        *s.armed.lock().unwrap() = Some((1, 2500));
        assert_eq!(cut_point(&s, &mut conn, 1000), None);
        assert_eq!(cut_point(&s, &mut conn, 1000), None);
        // 500 of the next 1000 bytes make 2500: they go through, then the cut.
        assert_eq!(cut_point(&s, &mut conn, 1000), Some(500));
        assert_eq!(s.mid_stream.load(Ordering::SeqCst), 1);
        assert_eq!(cut_point(&s, &mut conn, 1_000_000), None, "fires once");
    }

    #[test]
    fn bytes_before_the_arming_do_not_count() {
        let s = shared();
        let mut conn = (0, 0);
        *s.armed.lock().unwrap() = Some((1, 100));
        assert_eq!(cut_point(&s, &mut conn, 60), None);
        // Armed again: the count starts over.
        *s.armed.lock().unwrap() = Some((2, 100));
        assert_eq!(cut_point(&s, &mut conn, 60), None);
        assert_eq!(cut_point(&s, &mut conn, 60), Some(40));
    }
}
