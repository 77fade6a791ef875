//! The `server` section: the Unix socket, the optional TCP address, the TLS that a
//! non-loopback address needs, and the address of the probes and metrics.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::Validator;
use crate::config::model::{
    ServerConfig, TlsConfig, DEFAULT_SOCKET, DEFAULT_SOCKET_HANDOVER_TIMEOUT, DEFAULT_SOCKET_MODE,
};
use crate::config::raw::{RawServer, RawTls};

impl Validator {
    pub(super) fn server(&mut self, raw: RawServer) -> ServerConfig {
        let socket = self
            .socket(raw.socket)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
        let tls = raw.tls.and_then(|t| self.tls(t));
        let has_tls = tls.is_some();
        let listen_given = raw.listen.is_some();
        let listen = raw.listen.and_then(|text| self.listen(&text, has_tls));
        if has_tls && !listen_given {
            self.error(
                "server.tls",
                "TLS applies to the TCP address: set server.listen too (the Unix socket is \
                 never encrypted)",
            );
        }
        let socket_mode = raw
            .socket_mode
            .and_then(|text| self.socket_mode(&text))
            .unwrap_or(DEFAULT_SOCKET_MODE);
        let metrics = raw.metrics.and_then(|text| self.metrics(&text));
        let authorization = self.authorization(raw.authorization);
        let socket_handover_timeout = (raw.socket_handover_timeout)
            .and_then(|t| self.duration("server.socketHandoverTimeout", &t, Duration::ZERO))
            .unwrap_or(DEFAULT_SOCKET_HANDOVER_TIMEOUT);
        ServerConfig {
            socket,
            socket_mode,
            listen,
            tls,
            metrics,
            authorization,
            socket_handover_timeout,
        }
    }

    /// `server.socket`; `None` for the default, also when it is invalid (the error recorded).
    fn socket(&mut self, raw: Option<String>) -> Option<PathBuf> {
        match raw {
            Some(s) if s.trim().is_empty() => {
                self.error("server.socket", "the socket path is empty");
                None
            }
            other => other.map(PathBuf::from),
        }
    }

    /// `server.socketMode`: octal permission bits as a quoted string ("0660").
    ///
    /// Decision: a string, not a YAML number: `0660` unquoted is octal in YAML 1.1 but decimal
    /// 660 in YAML 1.2 and JSON, a classic trap with Kubernetes' `defaultMode`; a string
    /// of octal digits means one thing everywhere.
    fn socket_mode(&mut self, text: &str) -> Option<u32> {
        let digits = text.trim();
        match u32::from_str_radix(digits, 8) {
            Ok(mode) if !digits.is_empty() && mode <= 0o777 => Some(mode),
            _ => {
                self.error(
                    "server.socketMode",
                    format!(
                        "{text:?} is not a file mode: write octal permission bits as a \
                         quoted string, e.g. \"0660\" (owner and group may connect) or \
                         \"0600\" (owner only)"
                    ),
                );
                None
            }
        }
    }

    /// `server.listen`: an address, loopback unless `has_tls`.
    fn listen(&mut self, text: &str, has_tls: bool) -> Option<SocketAddr> {
        match text.parse::<SocketAddr>() {
            Ok(addr) if addr.ip().is_loopback() || has_tls => Some(addr),
            Ok(addr) => {
                self.error(
                    "server.listen",
                    format!(
                        "{addr} is not a loopback address; informerd serves data its clients \
                         may not otherwise read, so beyond 127.0.0.0/8 and [::1] it needs \
                         server.tls (certFile, keyFile, and clientCAFile to require client \
                         certificates)"
                    ),
                );
                None
            }
            Err(_) => {
                self.error(
                    "server.listen",
                    format!("'{text}' is not an address; expected IP:PORT, e.g. 127.0.0.1:7070"),
                );
                None
            }
        }
    }

    /// `server.metrics`: any `IP:PORT`.
    ///
    /// Decision: unlike `server.listen`, any address without TLS. The port serves no cached
    /// data (probes and counts only), and the kubelet probes the pod's IP over plain HTTP.
    fn metrics(&mut self, text: &str) -> Option<SocketAddr> {
        match text.parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                self.error(
                    "server.metrics",
                    format!(
                        "'{text}' is not an address; expected IP:PORT, e.g. 0.0.0.0:9477 \
                         (every interface, as kubelet probes need) or 127.0.0.1:9477"
                    ),
                );
                None
            }
        }
    }

    /// `server.tls`: both files are required.
    fn tls(&mut self, raw: RawTls) -> Option<TlsConfig> {
        let cert_file = self.pem_file("certFile", raw.cert_file);
        let key_file = self.pem_file("keyFile", raw.key_file);
        Some(TlsConfig {
            cert_file: cert_file?,
            key_file: key_file?,
            client_ca_file: raw.client_ca_file.map(PathBuf::from),
        })
    }

    /// A required file of `server.tls`.
    fn pem_file(&mut self, field: &str, value: Option<String>) -> Option<PathBuf> {
        match value {
            Some(v) if !v.trim().is_empty() => Some(PathBuf::from(v)),
            _ => {
                self.error(
                    format!("server.tls.{field}"),
                    "is required: a PEM file path",
                );
                None
            }
        }
    }
}
