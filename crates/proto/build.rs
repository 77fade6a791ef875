//! Compiles the API (`proto/`, a link to the repository root's, so that a packaged crate
//! carries it) with protox, a pure-Rust protobuf
//! compiler, so that no system `protoc` is needed; also keeps the encoded descriptor set, which
//! the server hands to gRPC server reflection.
//!
//! Decision: the service trait is generated only when the `server` feature is on (a build
//! script sees a crate's features as `CARGO_FEATURE_*`), so that the client's build carries no
//! server code; the messages and the client stubs are always generated.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "proto";
    let proto = "proto/informerd/v1/cache.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], [root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("informerd_descriptor.bin"), fds.encode_to_vec())?;
    let server = std::env::var_os("CARGO_FEATURE_SERVER").is_some();
    // Object JSON is shared between the watchers of one change: `Bytes`, cloned by reference.
    tonic_prost_build::configure()
        .build_server(server)
        .build_transport(false)
        .bytes(".informerd.v1.Object.json")
        // Decision: labels as a BTreeMap, not a HashMap: the sidecar reads them sorted from the
        // store, which a BTreeMap takes in one pass, where a HashMap hashed each key with
        // SipHash (a tenth of rendering a List's objects, issue 34); clients get them sorted.
        .btree_map(".informerd.v1.Object.labels")
        .compile_fds(fds)?;
    Ok(())
}
