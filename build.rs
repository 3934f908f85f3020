//! Compiles the ConfigServer protocol v2 proto (`proto/agent_v2.proto`) with prost-build, using
//! protox as the parser so that no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/agent_v2.proto");
    let descriptors = protox::compile(["proto/agent_v2.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
