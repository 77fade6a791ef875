//! The Rust client of informerd, the sidecar that keeps one filtered, field-stripped cache of
//! Kubernetes objects and serves it over gRPC to the controllers beside it.
//!
//! - [`connect`] and [`proto`]: the gRPC API itself (Get, List, Watch, Status);
//! - [`keys::watch_keys`]: WatchKeys, a coalescing key queue kept by the sidecar, with an
//!   acknowledge handle;
//! - [`Api`] and [`watcher()`]: the same calls in kube-rs's shapes, decoding into k8s-openapi
//!   types or [`kube::api::DynamicObject`], and a stream of [`kube::runtime::watcher::Event`]s,
//!   so that `kube::runtime::reflector` and `Controller::for_stream` run over the sidecar;
//! - [`metadata_watcher()`] and [`ReadThrough`]: the light path of a `Controller`, which keeps
//!   only its objects' metadata and reads whole objects from the sidecar when it needs them.
//!
//! What it must not do: depend on the server (its allocator, CEL, the store). The messages are
//! `informerd-proto`'s, which the server depends on too.

#![forbid(unsafe_code)]
#![warn(missing_docs, clippy::too_many_lines)]

mod api;
mod connect;
mod ensure;
mod error;
pub mod held;
pub mod keys;
mod read_through;
mod token;
pub mod watcher;

pub use api::{Api, Change, Start, CONTINUE_NOT_SUPPORTED, IDENTITY_ONLY, METADATA_FIELDS};
pub use connect::*;
pub use ensure::{ensure, ensure_in, ensure_resource, ensure_resource_in};
pub use error::Error;
pub use read_through::{ReadThrough, RefersTo};
pub use token::{connect_with_token, AuthorizedCache, Token};
pub use watcher::{metadata_watcher, watcher};

/// The gRPC API's messages, client stubs and reasons: the `informerd-proto` crate, which the
/// server shares.
pub use informerd_proto as proto;
