//! Generates the Rust types and the gRPC client and server of `proto/redt/v1/redt.proto`
//! (prost and tonic), and the file descriptor set the server's reflection serves. Needs
//! `protoc` (Debian's `protobuf-compiler`; `PROTOC` may name another one).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/redt/v1/redt.proto"];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("redt_v1_descriptor.bin"))
        .compile_protos(&protos, &["proto"])
        .map_err(|e| {
            format!(
                "compiling {protos:?}: {e}\n(redt-api needs protoc: `apt-get install protobuf-compiler`, or set PROTOC to \
                 its path)"
            )
        })?;
    Ok(())
}
