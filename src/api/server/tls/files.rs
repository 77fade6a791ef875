//! The files of `server.tls` made into a rustls server configuration, and read again to see
//! whether they changed: [`load`] at start-up, [`Files::poll`] afterwards. Every error names
//! the field and the file, and what is wrong with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, InconsistentKeys, RootCertStore, ServerConfig};

use crate::config::TlsConfig;

/// gRPC is HTTP/2 only: offered in ALPN, as gRPC clients require.
pub const ALPN_H2: &[u8] = b"h2";

/// What is wrong with the files of `server.tls`.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TlsError {
    /// One file cannot be read, or does not hold what its field needs.
    #[error("{field} {}: {message}", path.display())]
    File {
        /// `certFile`, `keyFile` or `clientCAFile`.
        field: &'static str,
        /// The configured path.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// The TLS library refuses its own defaults (a broken build, not a configuration error).
    #[error("the TLS library's defaults do not make a configuration ({0}); rebuild informerd")]
    Library(String),
    /// The key is not the certificate's: typically one file of a pair was replaced.
    #[error(
        "keyFile {} is not the private key of the certificate in certFile {}: \
         give the key and the certificate of one pair",
        key.display(),
        cert.display()
    )]
    Mismatch {
        /// The configured certificate path.
        cert: PathBuf,
        /// The configured key path.
        key: PathBuf,
    },
}

/// The bytes of the files, as read at one moment.
///
/// Decision: changes are found by comparing contents, not modification times or inotify
/// events. A mounted Secret is updated by the kubelet swapping a `..data` symlink: the
/// configured paths keep their own mtime and inotify watches on them see nothing, while
/// reading through the path always gives the current file. The files are small; reading them
/// every few seconds costs nothing. (The bytes include the private key, which the rustls
/// configuration holds in memory anyway.)
#[derive(Debug, PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// The files of `server.tls` and the contents last tried.
#[derive(Debug)]
pub struct Files {
    tls: TlsConfig,
    alpn: &'static [&'static [u8]],
    seen: Contents,
}

/// What reading the files again found.
#[derive(Debug)]
pub enum Reload {
    /// The same contents as last time: nothing to do.
    Unchanged,
    /// New contents that make a good configuration: serve it to new connections.
    Reloaded(Arc<ServerConfig>),
    /// A file cannot be read, or the new contents do not make a configuration: keep serving
    /// the previous one.
    Kept(TlsError),
}

/// Reads the files of `tls` and builds the gRPC server's configuration (start-up: an error
/// here stops it).
#[cfg(test)]
pub fn load(tls: &TlsConfig) -> Result<(Files, Arc<ServerConfig>), TlsError> {
    load_for(tls, &[ALPN_H2])
}

/// Reads the files of `tls` and builds a server configuration offering `alpn`.
pub fn load_for(
    tls: &TlsConfig,
    alpn: &'static [&'static [u8]],
) -> Result<(Files, Arc<ServerConfig>), TlsError> {
    let seen = Contents::read(tls)?;
    let config = seen.config(tls, alpn)?;
    let files = Files {
        tls: tls.clone(),
        alpn,
        seen,
    };
    Ok((files, config))
}

impl Files {
    /// Reads the files again; builds a new configuration when they changed.
    pub fn poll(&mut self) -> Reload {
        let contents = match Contents::read(&self.tls) {
            Ok(contents) => contents,
            Err(e) => return Reload::Kept(e),
        };
        if contents == self.seen {
            return Reload::Unchanged;
        }
        match contents.config(&self.tls, self.alpn) {
            Ok(config) => {
                self.seen = contents;
                Reload::Reloaded(config)
            }
            // Decision: files being written one after the other (a certificate replaced before
            // its key) are not reported: if they changed again meanwhile, the next poll
            // decides. Only contents that stay bad are.
            Err(_) if Contents::read(&self.tls).ok().as_ref() != Some(&contents) => {
                Reload::Unchanged
            }
            Err(e) => {
                self.seen = contents;
                Reload::Kept(e)
            }
        }
    }
}

impl Contents {
    fn read(tls: &TlsConfig) -> Result<Contents, TlsError> {
        Ok(Contents {
            cert: read("certFile", &tls.cert_file)?,
            key: read("keyFile", &tls.key_file)?,
            client_ca: match &tls.client_ca_file {
                Some(path) => Some(read("clientCAFile", path)?),
                None => None,
            },
        })
    }

    /// The server configuration these contents make: the certificate chain and its key,
    /// client certificates verified against the CA bundle when there is one, and `alpn`.
    ///
    /// Decision: a new configuration each time, so its session cache starts empty: a session
    /// established under a client CA that was since replaced is not resumed.
    fn config(&self, tls: &TlsConfig, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
        // Decision: the ring provider explicitly (the one tonic's `tls-ring` compiles in),
        // rather than a process-wide default that another dependency's features could change.
        let provider = Arc::new(ring::default_provider());
        let identity = self.certified_key(tls, &provider)?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Library(e.to_string()))?;
        let builder = match (&self.client_ca, &tls.client_ca_file) {
            (Some(bundle), Some(path)) => {
                builder.with_client_cert_verifier(client_verifier(bundle, path, provider)?)
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config =
            builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(identity)));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// The certificate chain with its private key, checked to be one pair.
    fn certified_key(
        &self,
        tls: &TlsConfig,
        provider: &CryptoProvider,
    ) -> Result<CertifiedKey, TlsError> {
        let chain = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("certFile", &tls.cert_file, &e))?;
        if chain.is_empty() {
            return Err(file(
                "certFile",
                &tls.cert_file,
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| {
            file(
                "keyFile",
                &tls.key_file,
                &format!("holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
            )
        })?;
        let key = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| invalid("keyFile", &tls.key_file, &e))?;
        let identity = CertifiedKey::new(chain, key);
        match identity.keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {
                Ok(identity)
            }
            Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                Err(TlsError::Mismatch {
                    cert: tls.cert_file.clone(),
                    key: tls.key_file.clone(),
                })
            }
            Err(e) => Err(invalid("certFile", &tls.cert_file, &e)),
        }
    }
}

/// Verifies client certificates against the CA certificates of `bundle` (`clientCAFile`).
fn client_verifier(
    bundle: &[u8],
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(bundle)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("clientCAFile", path, &e))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(file(
            "clientCAFile",
            path,
            "holds no usable PEM CA certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| invalid("clientCAFile", path, &e))
}

fn read(field: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| invalid(field, path, &e))
}

fn invalid(field: &'static str, path: &Path, error: &dyn std::fmt::Display) -> TlsError {
    file(field, path, &error.to_string())
}

fn file(field: &'static str, path: &Path, message: &str) -> TlsError {
    TlsError::File {
        field,
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}
