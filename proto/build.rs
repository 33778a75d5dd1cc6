//! Compiles `krayne/v1/*.proto` with protox (pure Rust: no `protoc` needed)
//! and writes the encoded descriptor set used by gRPC reflection.

use std::{env, fs, path::PathBuf};

use prost::Message as _;

const PROTOS: &[&str] = &[
    "krayne/v1/cluster.proto",
    "krayne/v1/identity.proto",
    "krayne/v1/audit.proto",
    "krayne/v1/version.proto",
    "krayne/v1/service.proto",
    "krayne/v1/job.proto",
    "krayne/v1/rayjob.proto",
    "krayne/v1/usage.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = protox::compile(PROTOS, ["."])?;
    // protox ignores prost-build's descriptor-set path, so write it ourselves.
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("krayne_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        // A tunnel's data is handed on without a copy.
        .bytes(".krayne.v1.TunnelRequest.data")
        .bytes(".krayne.v1.TunnelResponse.data")
        .client_mod_attribute(".", r#"#[cfg(feature = "client")]"#)
        .server_mod_attribute(".", r#"#[cfg(feature = "server")]"#)
        .compile_fds(fds)?;
    Ok(())
}
