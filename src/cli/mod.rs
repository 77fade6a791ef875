//! The commands of the binary: `serve` (the sidecar), the client commands, kubectl-style
//! (`get`, `list`, `watch` and `status` over the gRPC API of a running sidecar),
//! `check-config`, `rbac`, `bench`, and `inject-webhook` (the sidecar injection webhook).
//!
//! Client errors print as `informerd: CODE: message (reason: Reason)` with the gRPC status
//! code and the `informerd-reason` trailer, and exit with status 1; a sidecar that cannot be
//! reached is named by its socket or address, with what to do about it. Output formats are
//! described in [`output`].
//!
//! A file per command, and one per piece several share (the connection, flags, how a command
//! runs and ends, the output). This module only names them: no command's logic lives here.

mod args;
pub mod bench;
mod check_config;
mod connect;
mod ensure;
mod error;
mod get;
mod humanize;
mod inject;
mod list;
mod output;
mod rbac;
mod run;
mod serve;
mod status;
mod watch;

pub use check_config::check_config;
pub use connect::Connection;
pub use ensure::EnsureArgs;
pub use error::CliError;
pub use get::GetArgs;
pub use inject::{inject_webhook, InjectArgs};
pub use list::ListArgs;
pub use rbac::{rbac, RbacArgs};
pub use run::{run, Client};
pub use serve::serve;
pub use status::StatusArgs;
pub use watch::WatchArgs;
