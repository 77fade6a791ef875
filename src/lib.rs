//! informerd: one filtered, field-stripped cache of Kubernetes objects, shared over gRPC.
//!
//! The modules follow the data flow:
//! `config` → `fleet` (list/watch per scope) → `filter` (CEL, before storing) →
//! `transform` (drop/keep paths, before storing) → `store` (compact, revisioned, indexed) →
//! `api` (gRPC: Get, List, Watch, Status).

#![forbid(unsafe_code)]
#![warn(missing_docs, clippy::too_many_lines)]

pub mod api;
pub mod config;
pub mod filter;
pub mod fleet;
pub mod inject;
pub mod metrics;
pub mod proto;
pub mod rbac;
pub mod snapshot;

/// The compact store, its vocabulary and the transforms: the `informerd-store` crate (no
/// Kubernetes client, gRPC or CEL), under this crate's name so that the data flow reads in one
/// place.
pub use informerd_store::{store, transform, vocab};
