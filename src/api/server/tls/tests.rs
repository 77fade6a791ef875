//! The reload logic in-process: what a change of the files does to the configuration served,
//! what a bad file does (nothing but a report), and which certificate a new connection gets.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};
use tonic::transport::server::TcpIncoming;

use super::files::{load, Reload, TlsError};
use super::{accept, keep_current};
use crate::config::TlsConfig;

/// A self-signed certificate for 127.0.0.1, as (certificate PEM, key PEM, certificate DER).
fn pair() -> (String, String, CertificateDer<'static>) {
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).expect("certificate");
    (
        c.cert.pem(),
        c.signing_key.serialize_pem(),
        c.cert.der().clone(),
    )
}

/// A directory with `tls.crt`, `tls.key` (and `ca.crt` when `with_ca`); removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("informerd-tls-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        Dir(dir)
    }

    fn config(&self, with_ca: bool) -> TlsConfig {
        TlsConfig {
            cert_file: self.0.join("tls.crt"),
            key_file: self.0.join("tls.key"),
            client_ca_file: with_ca.then(|| self.0.join("ca.crt")),
        }
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).expect("write");
    }

    fn write_pair(&self, (cert, key, _): &(String, String, CertificateDer<'static>)) {
        self.write("tls.crt", cert);
        self.write("tls.key", key);
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn field_of(e: &TlsError) -> (&'static str, &Path) {
    match e {
        TlsError::File { field, path, .. } => (field, path),
        other => panic!("expected a file error, got {other}"),
    }
}

#[test]
fn start_up_errors_name_the_field_and_the_file() {
    let dir = Dir::new("startup");
    let tls = dir.config(false);
    let e = load(&tls).expect_err("no files");
    assert_eq!(field_of(&e), ("certFile", tls.cert_file.as_path()));
    assert!(e.to_string().starts_with("certFile "), "{e}");

    dir.write_pair(&pair());
    dir.write("tls.crt", "not a certificate");
    let e = load(&tls).expect_err("garbage certificate");
    assert_eq!(field_of(&e).0, "certFile", "{e}");
    assert!(e.to_string().contains("no PEM certificate"), "{e}");

    dir.write_pair(&pair());
    dir.write(
        "tls.key",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let e = load(&tls).expect_err("garbage key");
    assert_eq!(field_of(&e).0, "keyFile", "{e}");

    let (a, b) = (pair(), pair());
    dir.write("tls.crt", &a.0);
    dir.write("tls.key", &b.1);
    let e = load(&tls).expect_err("mismatched pair");
    assert!(matches!(e, TlsError::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("is not the private key"), "{e}");

    dir.write_pair(&a);
    let tls = dir.config(true);
    let e = load(&tls).expect_err("no CA file");
    assert_eq!(
        field_of(&e),
        ("clientCAFile", dir.0.join("ca.crt").as_path())
    );
    dir.write("ca.crt", "garbage");
    let e = load(&tls).expect_err("garbage CA file");
    assert!(
        e.to_string().contains("no usable PEM CA certificate"),
        "{e}"
    );
    dir.write("ca.crt", &b.0);
    load(&tls).expect("a pair and a CA");
    load(&dir.config(false)).expect("a pair without client authentication");
    dir.write("ca.crt", "");
    let e = load(&tls).expect_err("empty CA file");
    assert_eq!(field_of(&e).0, "clientCAFile", "{e}");
}

#[test]
fn a_change_reloads_and_a_bad_file_keeps_the_previous_configuration() {
    let dir = Dir::new("poll");
    let tls = dir.config(false);
    dir.write_pair(&pair());
    let (mut files, _) = load(&tls).expect("load");
    assert!(matches!(files.poll(), Reload::Unchanged));

    dir.write_pair(&pair());
    assert!(matches!(files.poll(), Reload::Reloaded(_)));
    assert!(matches!(files.poll(), Reload::Unchanged));

    // A good pair; then the key goes missing: kept, and reported at every poll until back.
    let good = pair();
    dir.write_pair(&good);
    assert!(matches!(files.poll(), Reload::Reloaded(_)));
    std::fs::remove_file(&tls.key_file).expect("remove");
    let Reload::Kept(e) = files.poll() else {
        panic!("a missing key is kept")
    };
    assert_eq!(field_of(&e), ("keyFile", tls.key_file.as_path()));
    dir.write_pair(&good);
    assert!(
        matches!(files.poll(), Reload::Unchanged),
        "the same pair again"
    );

    // Garbage is reported once, then it is what was last tried.
    dir.write("tls.crt", "garbage");
    let Reload::Kept(e) = files.poll() else {
        panic!("a garbage certificate is kept")
    };
    assert_eq!(field_of(&e).0, "certFile");
    assert!(matches!(files.poll(), Reload::Unchanged));

    // A certificate with another pair's key.
    let other = pair();
    dir.write("tls.crt", &other.0);
    assert!(matches!(
        files.poll(),
        Reload::Kept(TlsError::Mismatch { .. })
    ));
    dir.write("tls.key", &other.1);
    assert!(matches!(files.poll(), Reload::Reloaded(_)));
}

#[tokio::test]
async fn the_reload_task_publishes_new_configurations_and_ends_with_its_listeners() {
    let dir = Dir::new("task");
    let tls = dir.config(false);
    dir.write_pair(&pair());
    let (files, config) = load(&tls).expect("load");
    let (current, mut configs) = watch::channel(config.clone());
    let task = tokio::spawn(keep_current(
        files,
        current,
        Duration::from_millis(20),
        "server.tls",
    ));

    dir.write("tls.crt", "garbage");
    dir.write_pair(&pair());
    tokio::time::timeout(Duration::from_secs(30), configs.changed())
        .await
        .expect("a reload within 30 s")
        .expect("the task runs");
    assert!(!Arc::ptr_eq(&config, &configs.borrow_and_update()));

    drop(configs);
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the task ends once nobody listens")
        .expect("no panic");
}

/// A client trusting `trusted` that connects to `addr`: the certificate it was shown.
async fn handshake(
    addr: std::net::SocketAddr,
    trusted: &CertificateDer<'static>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut roots = RootCertStore::empty();
    roots.add(trusted.clone()).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::IpAddress(addr.ip().into());
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

#[tokio::test]
async fn new_connections_get_the_current_certificate_and_open_ones_go_on() {
    let dir = Dir::new("accept");
    let tls = dir.config(false);
    let (a, b) = (pair(), pair());
    dir.write_pair(&a);
    let (_, config_a) = load(&tls).expect("load A");
    dir.write_pair(&b);
    let (_, config_b) = load(&tls).expect("load B");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (current, configs) = watch::channel::<Arc<ServerConfig>>(config_a);
    let mut incoming = accept::accept(TcpIncoming::from(listener), configs);

    let mut first = handshake(addr, &a.2).await.expect("A is served");
    let (_, session) = first.get_ref();
    assert_eq!(session.alpn_protocol(), Some(&b"h2"[..]), "ALPN h2");
    assert_eq!(
        session.peer_certificates().map(|c| c[0].clone()),
        Some(a.2.clone())
    );
    let mut served = incoming.next().await.expect("a connection").expect("TLS");

    current.send_replace(config_b);
    assert!(handshake(addr, &a.2).await.is_err(), "A is no longer shown");
    let second = handshake(addr, &b.2).await.expect("B is served");
    assert_eq!(
        second.get_ref().1.peer_certificates().map(|c| c[0].clone()),
        Some(b.2.clone())
    );

    // The connection made with A still carries data.
    first.write_all(b"ping").await.expect("write");
    first.flush().await.expect("flush");
    let mut buf = [0u8; 4];
    served.read_exact(&mut buf).await.expect("read");
    assert_eq!(&buf, b"ping");
}
