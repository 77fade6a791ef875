//! The TCP listener's TLS follows its files as cert-manager rotates them: the real binary
//! (`informerd serve`) caching pods of the real control plane, its certificate, key and client
//! CA in a directory laid out as the kubelet mounts a Secret (files reached through a `..data`
//! symlink that is swapped atomically), called with informerd's own client.

use std::path::Path;
use std::time::Duration;

use informerd::proto::StatusRequest;
use informerd_client::{self as client, ConnectOptions};
use informerd_testkit::{
    free_port, Ca, ControlPlane, Fixture, MountedSecret, Resource, Sidecar, SidecarConfig,
};
use rcgen::ExtendedKeyUsagePurpose;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");

/// How long a reload may take: the sidecar polls every few seconds; generous for a busy CI.
const RELOAD_DEADLINE: Duration = Duration::from_secs(60);

/// A client's PEM files in `dir`: the CA it trusts for the server, its certificate and key.
struct Client {
    options: ConnectOptions,
}

impl Client {
    fn new(dir: &Path, name: &str, trusts: &Ca, identity: &(String, String)) -> Client {
        let write = |suffix: &str, text: &str| {
            let path = dir.join(format!("{name}-{suffix}"));
            std::fs::write(&path, text).expect("write");
            path
        };
        Client {
            options: ConnectOptions {
                ca_file: Some(write("ca.crt", &trusts.pem())),
                client_cert: Some(write("tls.crt", &identity.0)),
                client_key: Some(write("tls.key", &identity.1)),
                ..Default::default()
            },
        }
    }

    /// A new connection to `address`, and a Status call on it.
    async fn status(&self, address: &str) -> anyhow::Result<()> {
        let mut api = client::connect_with(address, &self.options).await?;
        api.status(StatusRequest::default()).await?;
        Ok(())
    }
}

/// Waits until `check` passes, up to [`RELOAD_DEADLINE`]; the sidecar's log on failure.
async fn eventually<F, Fut>(what: &str, sidecar: &Sidecar, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + RELOAD_DEADLINE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {RELOAD_DEADLINE:?}: {what}\nsidecar log:\n{}",
            sidecar.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn rotated_certificates_and_client_cas_are_served_to_new_connections() {
    let mut fixture = Fixture::new("tls-reload").await.expect("namespace");
    let dir = std::env::temp_dir().join(format!("informerd-tls-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("directory");

    // Before: server certificate A (server CA A), client CA 1. After: B (CA B), client CA 2.
    let (server_a, server_b) = (Ca::new("server CA A"), Ca::new("server CA B"));
    let (clients_1, clients_2) = (Ca::new("client CA 1"), Ca::new("client CA 2"));
    let (cert_a, cert_b) = (
        server_a.issue(ExtendedKeyUsagePurpose::ServerAuth),
        server_b.issue(ExtendedKeyUsagePurpose::ServerAuth),
    );
    let (identity_1, identity_2) = (
        clients_1.issue(ExtendedKeyUsagePurpose::ClientAuth),
        clients_2.issue(ExtendedKeyUsagePurpose::ClientAuth),
    );
    let old = Client::new(&dir, "old", &server_a, &identity_1);
    let new = Client::new(&dir, "new", &server_b, &identity_2);
    let new_server_old_client = Client::new(&dir, "mixed", &server_b, &identity_1);

    let mut secret = MountedSecret::new(dir.join("secret"));
    secret.publish(&[
        ("tls.crt", &cert_a.0),
        ("tls.key", &cert_a.1),
        ("ca.crt", &clients_1.pem()),
    ]);
    let port = free_port();
    let config = SidecarConfig::new()
        .resource(Resource::pods().namespaces([fixture.ns()]))
        .server(|s| {
            s.listen(format!("127.0.0.1:{port}")).tls(
                secret.path("tls.crt"),
                secret.path("tls.key"),
                Some(&secret.path("ca.crt")),
            )
        });
    let sidecar = fixture
        .start_sidecar(BIN.as_ref(), &config)
        .expect("sidecar");
    let address = format!("https://127.0.0.1:{port}");

    old.status(&address)
        .await
        .expect("A is served, client CA 1 trusted");
    assert!(new.status(&address).await.is_err(), "B is not served yet");
    // A connection opened before the rotation: it must go on afterwards.
    let mut open = client::connect_with(&address, &old.options)
        .await
        .expect("connect");
    open.status(StatusRequest::default()).await.expect("status");

    secret.publish(&[
        ("tls.crt", &cert_b.0),
        ("tls.key", &cert_b.1),
        ("ca.crt", &clients_2.pem()),
    ]);
    eventually(
        "a new connection gets B and client CA 2",
        sidecar,
        || async { new.status(&address).await.is_ok() },
    )
    .await;
    assert!(old.status(&address).await.is_err(), "A is no longer served");
    let refused = new_server_old_client.status(&address).await;
    assert!(refused.is_err(), "a client of the old CA is refused");
    open.status(StatusRequest::default())
        .await
        .expect("the connection opened before the rotation goes on");

    // A garbage certificate, then a key of another pair: warned about, naming the file and
    // what is wrong; B goes on being served.
    let cert_file = secret.path("tls.crt").display().to_string();
    let key_file = secret.path("tls.key").display().to_string();
    let bad: [(&str, &str, &str); 2] = [
        ("garbage", &cert_b.1, "holds no PEM certificate"),
        (&cert_b.0, &cert_a.1, "is not the private key"),
    ];
    for (cert, key, problem) in bad {
        secret.publish(&[
            ("tls.crt", cert),
            ("tls.key", key),
            ("ca.crt", &clients_2.pem()),
        ]);
        eventually(&format!("a warning that {problem}"), sidecar, || async {
            sidecar
                .log()
                .lines()
                .any(|l| l.contains("WARN") && l.contains(&cert_file) && l.contains(problem))
        })
        .await;
        new.status(&address)
            .await
            .expect("B is still served after a bad file");
    }
    assert!(
        sidecar.log().contains(&key_file),
        "the mismatch names the key file"
    );

    drop(fixture);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Start-up is where a bad file is an error: informerd exits 1 naming the field and the file
/// (it never serves TCP without TLS, or with half of it).
#[tokio::test]
async fn a_bad_file_at_start_up_stops_it_naming_the_field() {
    let cluster = ControlPlane::get();
    let dir = std::env::temp_dir().join(format!("informerd-tls-start-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut secret = MountedSecret::new(dir.join("secret"));
    let (cert, key) = Ca::new("server CA").issue(ExtendedKeyUsagePurpose::ServerAuth);
    secret.publish(&[("tls.crt", &cert), ("tls.key", &key), ("ca.crt", "garbage")]);
    let config = dir.join("informerd.yaml");
    let text = SidecarConfig::new()
        .socket(dir.join("informerd.sock"))
        .resource(Resource::pods().namespaces(["default"]))
        .server(|s| {
            s.listen(format!("127.0.0.1:{}", free_port())).tls(
                secret.path("tls.crt"),
                secret.path("tls.key"),
                Some(&secret.path("ca.crt")),
            )
        })
        .to_yaml();
    std::fs::write(&config, text).expect("config");
    // The sidecar's own process: it must exit by itself (killed after a generous deadline).
    let mut child = std::process::Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start informerd");
    let deadline = std::time::Instant::now() + RELOAD_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert_eq!(status.and_then(|s| s.code()), Some(1), "exit 1: {stderr}");
    let expected = format!(
        "server.tls: clientCAFile {}: holds no usable PEM CA certificate",
        secret.path("ca.crt").display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
