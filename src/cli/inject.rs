//! `informerd inject-webhook`: the sidecar injection webhook's command line (the webhook itself
//! is [`informerd::inject`]). Serves until Ctrl-C or SIGTERM.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Args;
use informerd::inject::{self, Sidecar};

use super::serve::{init_tracing, shutdown_signal};

/// `informerd inject-webhook --cert-file FILE --key-file FILE [--listen ADDR] [--image IMAGE]
/// [--cpu-request Q] [--memory-request Q] [--memory-limit Q] [--cpu-limit Q]`.
#[derive(Debug, Args)]
pub struct InjectArgs {
    /// The HTTPS address the apiserver calls (the Service's target port).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The serving certificate chain (PEM), for the Service's DNS name; read again when it
    /// changes.
    #[arg(long, value_name = "FILE")]
    cert_file: PathBuf,
    /// Its private key (PEM); read again when it changes.
    #[arg(long, value_name = "FILE")]
    key_file: PathBuf,
    /// The informerd image of the injected sidecar.
    #[arg(long, value_name = "IMAGE", default_value = concat!("informerd:", env!("CARGO_PKG_VERSION")))]
    image: String,
    /// The sidecar's CPU request.
    #[arg(long, value_name = "QUANTITY", default_value = "50m")]
    cpu_request: String,
    /// The sidecar's memory request.
    #[arg(long, value_name = "QUANTITY", default_value = "64Mi")]
    memory_request: String,
    /// The sidecar's memory limit.
    #[arg(long, value_name = "QUANTITY", default_value = "256Mi")]
    memory_limit: String,
    /// The sidecar's CPU limit (none by default, so that a sync is not throttled).
    #[arg(long, value_name = "QUANTITY")]
    cpu_limit: Option<String>,
}

/// Runs the webhook until it is told to stop; a failed start is printed, with exit status 1.
pub fn inject_webhook(args: InjectArgs) -> ExitCode {
    init_tracing();
    let sidecar = Sidecar {
        image: args.image,
        cpu_request: args.cpu_request,
        memory_request: args.memory_request,
        memory_limit: args.memory_limit,
        cpu_limit: args.cpu_limit,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        match inject::serve(args.listen, args.cert_file, args.key_file, sidecar).await {
            Ok(serving) => {
                // Decision: no drain on shutdown. A review takes microseconds; one cut off is
                // a failed pod creation the apiserver reports, and its controller retries.
                tokio::select! {
                    () = serving => {}
                    () = shutdown_signal() => tracing::info!("stopping"),
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("informerd inject-webhook: {e}");
                ExitCode::from(1)
            }
        }
    })
}
