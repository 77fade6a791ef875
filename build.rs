//! Compiles proto/ with protox, a pure-Rust protobuf compiler: no system `protoc` is needed.
//! The encoded descriptor set is also kept, for gRPC server reflection.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/informerd/v1/cache.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("informerd_descriptor.bin"), fds.encode_to_vec())?;
    // Object JSON is shared between the watchers of one change: `Bytes`, cloned by reference.
    tonic_prost_build::configure()
        .bytes(".informerd.v1.Object.json")
        .compile_fds(fds)?;
    Ok(())
}
