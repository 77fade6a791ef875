//! The gRPC API: Get, List, Watch and Status over the caches of the fleet.
pub mod client;
pub mod proto;
