//! The generated types and services of `proto/informerd/v1/cache.proto`.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("informerd.v1");

/// The encoded descriptors of the API, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/informerd_descriptor.bin"));
