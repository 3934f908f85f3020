//! SkyWalking's native agent protocol over gRPC: the services SkyWalking's agents (Java,
//! Python, Go, Node.js, Rust, PHP, Satellite) report to by default, on the OAP's port 11800.
//!
//! - `MeterReportService` (`collect`, `collectBatch`): the agents' meters, mapped by [`meters`]
//!   as SkyWalking's `MeterProcessor` maps them, evaluated against `meter-analyzer-config`.
//! - `LogReportService` (`collect`): logs into LAL, mapped by [`logs`] as `/v3/logs` is.
//! - `ManagementService` (`reportInstanceProperties`, `keepAlive`): the instance and its
//!   properties, recorded by [`management`] as instance traffic.
//!
//! [`grpc`] serves them (tonic) on the data listener beside HTTP/1.1 and on `ingest.grpc_listen`
//! ([`config`]). The protocol's files are under `proto/skywalking/`, with their license.

pub mod config;
pub mod grpc;
pub mod logs;
pub mod management;
pub mod meters;

/// The messages and services of `skywalking.v3`.
pub mod wire {
    include!(concat!(env!("OUT_DIR"), "/skywalking.v3.rs"));
}

/// The package-less services older agents call (`MeterCompat.proto`, `ManagementCompat.proto`).
/// The generated code names the messages as `super::skywalking::v3::…`.
pub mod compat {
    include!(concat!(env!("OUT_DIR"), "/_.rs"));

    /// The path the generated code reads the messages by.
    mod skywalking {
        pub mod v3 {
            pub use crate::data::ingest::skywalking::wire::*;
        }
    }
}

pub use config::GrpcSettings;
pub use grpc::{SkyWalkingReceiver, grpc_only_router, routes};
