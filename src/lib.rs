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
pub mod metrics;
pub mod proto;
pub mod rbac;
pub mod snapshot;
pub mod store;
pub mod transform;
pub mod vocab;
