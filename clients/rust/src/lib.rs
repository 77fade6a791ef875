//! The Rust client of informerd, the sidecar that keeps one filtered, field-stripped cache of
//! Kubernetes objects and serves it over gRPC to the controllers beside it.
//!
//! - [`connect`] and [`proto`]: the gRPC API itself (Get, List, Watch, Status).
//!
//! What it must not do: depend on the server (its allocator, CEL, the store). The server
//! crate depends on this one for the messages.

#![forbid(unsafe_code)]
#![warn(missing_docs, clippy::too_many_lines)]

mod connect;
pub mod proto;

pub use connect::*;
