//! hotrule: runtime hot-update of SkyWalking MAL and LAL rule files on a peer-to-peer cluster.
//!
//! Imports flow one way: `http` → `workflow` → `store` / `scan` → `runtime` → `rules`.
//! `rules` (pure decisions) and `store` (the only module that touches the key-value engine)
//! import nothing above them. Only `node` sees everything and wires it together.

pub mod agent;
pub mod bench;
pub mod bundled;
pub mod bus;
pub mod clock;
pub mod cluster;
pub mod client;
pub mod compile_pool;
pub mod config;
pub mod data;
pub mod export;
pub mod dispatch;
pub mod http;
pub mod ids;
pub mod ingest;
pub mod listen;
pub mod logs;
pub mod metrics;
pub mod node;
pub mod query;
pub mod replication;
pub mod roller;
pub mod rolling;
pub mod rules;
pub mod runtime;
pub mod scan;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod store;
pub mod workflow;
pub mod worker;

#[cfg(test)]
mod import_direction;

pub use hotrule_rule_compiler as compiler;

/// A boxed, sendable future: what the object-safe async traits between modules return (the
/// bus handler, the workflow's peers, the scan's tombstone purger).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
