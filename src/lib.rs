//! informerd: one filtered, field-stripped cache of Kubernetes objects, shared over gRPC.

pub mod config;
pub mod filter;
pub mod transform;
