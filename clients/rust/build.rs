//! Compiles the API (`proto/` at the repository root) with protox, a pure-Rust protobuf
//! compiler, so that no system `protoc` is needed: the messages and the client, not the server.
//!
//! Decision: the messages are generated here, once, and the server crate generates only its
//! service trait against them (`extern_path`), so that server and client share one set of
//! types and the client crate carries no server code.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "../../proto";
    let proto = "../../proto/informerd/v1/cache.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], [root])?;
    // Object JSON is shared between the watchers of one change: `Bytes`, cloned by reference.
    tonic_prost_build::configure()
        .build_server(false)
        .bytes(".informerd.v1.Object.json")
        .compile_fds(fds)?;
    Ok(())
}
