//! Compiles the function protocol's `.proto` files with protox (pure Rust, so building needs no
//! system `protoc`) and generates the tonic clients and servers.
//!
//! `apiextensions.fn.proto.v1beta1` is the v1 protocol under its older package name, message for
//! message and field for field; it is derived here from `proto/v1/run_function.proto` rather than
//! kept as a second copy that could drift.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let v1 = "proto/v1/run_function.proto";
    println!("cargo:rerun-if-changed={v1}");
    let source = std::fs::read_to_string(v1)?;
    let package = "package apiextensions.fn.proto.v1;";
    if !source.contains(package) {
        return Err(format!("{v1} must declare {package}").into());
    }
    let beta_root = PathBuf::from(std::env::var("OUT_DIR")?).join("proto");
    std::fs::create_dir_all(beta_root.join("v1beta1"))?;
    std::fs::write(beta_root.join("v1beta1/run_function.proto"), source.replace(package, "package apiextensions.fn.proto.v1beta1;"))?;

    let descriptors = protox::compile(["v1/run_function.proto", "v1beta1/run_function.proto"], [PathBuf::from("proto"), beta_root])?;
    // Ordered maps: prost then writes map entries sorted by key, as Go's deterministic
    // marshalling does, so a request's tag (a hash of its encoding) is stable.
    tonic_prost_build::configure().btree_map(".").build_client(true).build_server(true).compile_fds(descriptors)?;
    Ok(())
}
