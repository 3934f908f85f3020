//! Compiles the protos with prost-build, using protox as the parser so that no system `protoc`
//! is needed: the ConfigServer protocol v2 (`proto/agent_v2.proto`) and Prometheus remote-write
//! 1.0 (`proto/prometheus/remote.proto`). OTLP's messages come from the `opentelemetry-proto`
//! crate.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/agent_v2.proto");
    println!("cargo:rerun-if-changed=proto/prometheus/remote.proto");
    let descriptors = protox::compile(["proto/agent_v2.proto", "proto/prometheus/remote.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
