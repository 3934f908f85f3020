//! Compiles the protos with prost-build, using protox as the parser so that no system `protoc`
//! is needed: the ConfigServer protocol v2 (`proto/agent_v2.proto`), Prometheus remote-write
//! 1.0 (`proto/prometheus/remote.proto`), and SkyWalking's data collect protocol
//! (`proto/skywalking/`: meters, logs, management), whose services tonic-prost-build generates.
//! OTLP's messages come from the `opentelemetry-proto` crate.

/// The SkyWalking protocol files hotrule serves, relative to `proto/skywalking` (their include
/// root: they import each other as `common/Command.proto`).
const SKYWALKING: [&str; 7] = [
    "common/Common.proto",
    "common/Command.proto",
    "language-agent/Meter.proto",
    "language-agent/MeterCompat.proto",
    "logging/Logging.proto",
    "management/Management.proto",
    "management/ManagementCompat.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/agent_v2.proto");
    println!("cargo:rerun-if-changed=proto/prometheus/remote.proto");
    let descriptors = protox::compile(["proto/agent_v2.proto", "proto/prometheus/remote.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;

    for file in SKYWALKING {
        println!("cargo:rerun-if-changed=proto/skywalking/{file}");
    }
    let descriptors = protox::compile(SKYWALKING, ["proto/skywalking"])?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(descriptors)?;
    Ok(())
}
