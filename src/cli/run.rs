//! How a client command runs and ends: connected to the sidecar on a one-thread runtime, its
//! error printed as `informerd: ...` with a `hint:` line when the CLI knows what to do about it,
//! and exit status 1; plus the two helpers every command's call uses (stdout, a request's
//! timeout).

use std::{io::Write as _, process::ExitCode, time::Duration};

use clap::Args;
use informerd::proto::cache_client::CacheClient;
use informerd_client::{self as client, ClientError};
use tonic::transport::Channel;

use super::{CliError, Connection};

/// A client command: its own flags, then where the sidecar is.
#[derive(Debug, Args)]
pub struct Client<C: Args> {
    #[command(flatten)]
    command: C,
    #[command(flatten)]
    connection: Connection,
}

/// The sidecar's gRPC client, connected.
pub type Cache = CacheClient<Channel>;

/// What a client command does with a connection to the sidecar.
pub trait Call {
    async fn call(self, cache: Cache) -> Result<(), CliError>;
}

/// Connects and runs a client command; its error is printed, with the exit status 1.
pub fn run<C: Args + Call>(client: Client<C>) -> ExitCode {
    let Client {
        command,
        connection,
    } = client;
    let (target, client_certificate) = connection.describe();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
        .and_then(|rt| {
            rt.block_on(async {
                let cache = connection.connect().await?;
                command.call(cache).await
            })
        });
    let (result, extra_hint) = match result {
        Err(CliError::Hinted { error, hint }) => (Err(*error), Some(hint)),
        result => (result, None),
    };
    match result.map_err(|e| locate(e, &target)) {
        Ok(()) => ExitCode::SUCCESS,
        // `informerd list pods | head`: the reader has all it wants.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("informerd: {e}");
            let hint = hint(&e, &target, client_certificate);
            for hint in hint.into_iter().chain(extra_hint.as_deref()) {
                eprintln!("hint: {hint}");
            }
            ExitCode::from(1)
        }
    }
}

/// A status that is not the sidecar's answer but a failed connection says where the connection
/// was to.
fn locate(error: CliError, target: &str) -> CliError {
    match error {
        CliError::Status(status) => match client::transport_failure(&status) {
            Some(reason) => CliError::Transport {
                target: target.to_string(),
                reason,
            },
            None => CliError::Status(status),
        },
        e => e,
    }
}

/// What to do about an error of the connection, when the CLI knows.
fn hint(error: &CliError, target: &str, client_certificate: bool) -> Option<&'static str> {
    match error {
        CliError::Connect(ClientError::Socket { .. }) => Some(
            "choose the socket with --socket PATH or $INFORMERD_SOCKET, or an address \
             with --address URL",
        ),
        CliError::Connect(ClientError::Handshake { .. }) => Some(
            "--certificate-authority FILE trusts the CA that signed the server's \
             certificate; --tls-server-name NAME checks it for another name",
        ),
        // A TLS server that requires client certificates ends the connection.
        CliError::Transport { .. } if target.starts_with("https://") && !client_certificate => {
            Some(
                "if the server requires a client certificate, pass \
                 --client-certificate FILE and --client-key FILE",
            )
        }
        _ => None,
    }
}

/// Writes to standard output, flushed (watch events must show as they come).
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::Output)
}

/// A request the sidecar may spend at most `timeout` on (its own default otherwise).
pub fn with_timeout<T>(message: T, timeout: Option<Duration>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(t) = timeout {
        request.set_timeout(t);
    }
    request
}
