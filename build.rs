//! Generates the gRPC code from `proto/` with protox (a pure-Rust protobuf compiler, so building
//! capot needs no `protoc`), and writes the encoded file descriptor set that server reflection
//! serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(["capot/v1/retrieval.proto"])?;
    std::fs::write(
        out_dir.join("capot_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
