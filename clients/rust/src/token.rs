//! The bearer token a client sends when the sidecar authorizes each client
//! (`server.authorization: kubernetes`): its ServiceAccount token for the audience `informerd`,
//! usually a projected token file that the kubelet rotates.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informerd_client::{connect_with_token, ConnectOptions, Token};
//! let token = Token::file("/var/run/secrets/informerd/token")?;
//! let mut cache =
//!     connect_with_token("/run/informerd/informerd.sock", &ConnectOptions::default(), token)
//!         .await?;
//! # Ok(()) }
//! ```
//!
//! Decision: a token file is re-read when its modification time changes, checked on every
//! call (one `stat`): the kubelet replaces a projected token well before it expires (at 80% of
//! its life), so a client never sends a stale token for longer than one call, and never reads
//! the file when nothing changed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::Channel;
use tonic::{Request, Status};

use crate::proto::cache_client::CacheClient;
use crate::{channel, ClientError, ConnectOptions};

/// A cache client that sends a bearer token with every call.
pub type AuthorizedCache = CacheClient<InterceptedService<Channel, Token>>;

/// A bearer token: fixed, or read from a file (and read again when the file changes). Cheap to
/// clone; clones share the file's last reading.
#[derive(Clone, Debug)]
pub struct Token {
    source: Arc<Source>,
}

#[derive(Debug)]
enum Source {
    Fixed(MetadataValue<Ascii>),
    File {
        path: PathBuf,
        /// The file's modification time when last read, and the header made of it.
        read: Mutex<(Option<SystemTime>, MetadataValue<Ascii>)>,
    },
}

impl Token {
    /// A fixed token.
    pub fn new(token: &str) -> Result<Token, ClientError> {
        Ok(Token {
            source: Arc::new(Source::Fixed(header(token, Path::new("the token"))?)),
        })
    }

    /// The token in file `path` (a projected ServiceAccount token), read now and again
    /// whenever the file changes.
    pub fn file(path: impl Into<PathBuf>) -> Result<Token, ClientError> {
        let path = path.into();
        let (modified, value) = read_token(&path)?;
        Ok(Token {
            source: Arc::new(Source::File {
                path,
                read: Mutex::new((modified, value)),
            }),
        })
    }

    /// The `authorization` metadata value to send now: `Bearer <token>`.
    pub fn value(&self) -> Result<MetadataValue<Ascii>, ClientError> {
        match &*self.source {
            Source::Fixed(value) => Ok(value.clone()),
            Source::File { path, read } => {
                let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                let mut read = read.lock().expect("token poisoned");
                if modified.is_none() || modified != read.0 {
                    *read = read_token(path)?;
                }
                Ok(read.1.clone())
            }
        }
    }

    /// `request` with the token in its `authorization` metadata.
    pub fn authorize<T>(&self, mut request: Request<T>) -> Result<Request<T>, Status> {
        let value = self
            .value()
            .map_err(|e| Status::unauthenticated(e.to_string()))?;
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

impl Interceptor for Token {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.authorize(request)
    }
}

/// The file's modification time and its token as a header value.
fn read_token(path: &Path) -> Result<(Option<SystemTime>, MetadataValue<Ascii>), ClientError> {
    let read_error = |source| ClientError::ReadFile {
        what: "token file",
        path: path.to_path_buf(),
        source,
    };
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(read_error)?;
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    Ok((Some(modified), header(&text, path)?))
}

fn header(token: &str, origin: &Path) -> Result<MetadataValue<Ascii>, ClientError> {
    let token = token.trim();
    let invalid = |reason: &str| ClientError::InvalidToken {
        origin: origin.display().to_string(),
        reason: reason.to_string(),
    };
    if token.is_empty() {
        return Err(invalid("it is empty"));
    }
    format!("Bearer {token}")
        .parse()
        .map_err(|_| invalid("it has characters a header cannot carry"))
}

/// Connects to the sidecar at `target` with `options`, sending `token` with every call.
pub async fn connect_with_token(
    target: &str,
    options: &ConnectOptions,
    token: Token,
) -> Result<AuthorizedCache, ClientError> {
    let channel = channel(target, options).await?;
    Ok(crate::connect::limits(CacheClient::with_interceptor(
        channel, token,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_read_again_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("informerd-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first\n").unwrap();
        let token = Token::file(&path).unwrap();
        assert_eq!(token.value().unwrap(), "Bearer first");
        // The kubelet swaps in a new file; its modification time differs.
        let next = dir.join("token.new");
        std::fs::write(&next, "second").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&next)
            .unwrap()
            .set_modified(later)
            .unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_eq!(token.value().unwrap(), "Bearer second");
        let request = token.authorize(Request::new(())).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer second"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_or_missing_token_is_refused() {
        assert!(matches!(
            Token::new(" "),
            Err(ClientError::InvalidToken { .. })
        ));
        assert!(matches!(
            Token::file("/nonexistent/token"),
            Err(ClientError::ReadFile { .. })
        ));
    }
}
