//! Where the sidecar is and how to reach it: the `--socket`/`--address` target and the TLS
//! flags every client command shares.

use std::path::PathBuf;

use clap::Args;
use informerd::proto::cache_client::CacheClient;
use informerd_client::{self as client, ConnectOptions};
use tonic::transport::Channel;

use super::CliError;

/// Where the sidecar is, and how to reach it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct Connection {
    /// The sidecar's Unix socket [default: $INFORMERD_SOCKET, else /run/informerd/informerd.sock].
    #[arg(long, value_name = "PATH", conflicts_with = "address")]
    socket: Option<PathBuf>,
    /// The sidecar's address instead of its socket: http://127.0.0.1:7070 (server.listen), or
    /// https://HOST:PORT (server.tls, or a TLS proxy in front of the sidecar).
    #[arg(long, value_name = "URL")]
    address: Option<String>,
    /// https: a PEM file of the CA(s) that sign the server's certificate (in addition to the
    /// system's roots).
    #[arg(long, value_name = "FILE")]
    certificate_authority: Option<PathBuf>,
    /// https: a PEM client certificate, for mutual TLS.
    #[arg(long, value_name = "FILE", requires = "client_key")]
    client_certificate: Option<PathBuf>,
    /// https: the PEM private key of --client-certificate.
    #[arg(long, value_name = "FILE", requires = "client_certificate")]
    client_key: Option<PathBuf>,
    /// https: the name to verify the server's certificate against, when not the host's.
    #[arg(long, value_name = "NAME")]
    tls_server_name: Option<String>,
}

impl Connection {
    fn target(&self) -> String {
        if let Some(address) = &self.address {
            return address.clone();
        }
        let path = self
            .socket
            .clone()
            .or_else(|| std::env::var_os("INFORMERD_SOCKET").map(PathBuf::from))
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from(informerd::config::DEFAULT_SOCKET));
        // A path, never a URL, whatever it looks like.
        format!("unix://{}", path.display())
    }

    /// The target, and whether a client certificate is given, for messages.
    pub fn describe(&self) -> (String, bool) {
        (self.target(), self.client_certificate.is_some())
    }

    pub async fn connect(&self) -> Result<CacheClient<Channel>, CliError> {
        let options = ConnectOptions {
            ca_file: self.certificate_authority.clone(),
            client_cert: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            server_name: self.tls_server_name.clone(),
            connect_timeout: None,
        };
        Ok(client::connect_with(&self.target(), &options).await?)
    }
}
