//! Compiles proto/ with protox, a pure-Rust protobuf compiler: no system `protoc` is needed.
//! The encoded descriptor set is also kept, for gRPC server reflection.
//!
//! Only the service trait is generated here: the messages and the client are
//! `informerd-client`'s (clients/rust), so that server and clients share one set of types.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/informerd/v1/cache.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("informerd_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(false)
        .extern_path(".informerd.v1", "::informerd_client::proto")
        .compile_fds(fds)?;
    Ok(())
}
