//! The wire vocabulary: the messages, client and reasons of `informerd-client` (re-exported, so
//! that `informerd::proto` paths keep working), plus what only the server has: the service
//! trait `cache_server` and the encoded descriptors for server reflection.

pub use informerd_client::proto::*;

/// The generated service trait, against the client crate's messages (see build.rs), kept
/// apart so that lints the generator does not meet stay on for the rest of this file.
mod generated {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]

    tonic::include_proto!("informerd.v1");
}

pub use generated::*;

/// The encoded descriptors of the API, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/informerd_descriptor.bin"));
