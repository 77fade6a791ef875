//! The commands of the binary besides `serve`: the client commands, kubectl-style (`get`,
//! `list`, `watch` and `status` over the gRPC API of a running sidecar), and `bench`.
//!
//! Errors print as `informerd: CODE: message (reason: Reason)` with the gRPC status code and
//! the `informerd-reason` trailer, and exit with status 1; a sidecar that cannot be reached is
//! named by its socket or address, with what to do about it. Output formats are described in
//! [`output`].
//!
//! A file per command, and one per piece several share (the connection, flags, how a command
//! runs and ends, the output). This module only names them: no command's logic lives here.

mod args;
pub mod bench;
mod connect;
mod error;
mod get;
mod humanize;
mod list;
mod output;
mod run;
mod status;
mod watch;

pub use connect::Connection;
pub use error::CliError;
pub use get::GetArgs;
pub use list::ListArgs;
pub use run::{run, Client};
pub use status::StatusArgs;
pub use watch::WatchArgs;
