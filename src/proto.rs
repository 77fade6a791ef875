//! The wire vocabulary: the `informerd-proto` crate (messages, client and service stubs,
//! reasons, the descriptors for server reflection), re-exported so that `informerd::proto`
//! paths read as the API's own.

pub use informerd_proto::*;
