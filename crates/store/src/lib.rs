//! informerd's store and what it is written in, without Kubernetes clients, gRPC or CEL:
//!
//! - [`vocab`]: words every stage shares: field paths, JSON tapes and the tree view the store
//!   encodes from, Kubernetes name rules, memory figures.
//! - [`transform`]: drop/keep paths, applied to values or while decoding: changes objects,
//!   never decides what is kept.
//! - [`store`]: the compact, revisioned, indexed cache: the fleet's `Writer`, everyone else's
//!   read-only `Store`, the change log, and the image snapshots are made of.
//!
//! The `informerd` crate re-exports the three modules under its own name (`informerd::store`,
//! ...), so that its data flow still reads config → fleet → filter → transform → store → api.

#![forbid(unsafe_code)]
#![warn(missing_docs, clippy::too_many_lines)]

pub mod store;
pub mod transform;
pub mod vocab;

#[cfg(any(test, feature = "test-fixtures"))]
pub mod fixtures;
