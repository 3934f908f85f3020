//! hotrule: runtime hot-update of SkyWalking MAL and LAL rule files on a peer-to-peer cluster.
//!
//! The crate is laid out by plane (see `docs/architecture.md`), and imports run one way, down
//! this line: `cli` → `bench` → `node` → `config` → `api` → `cluster` → `data` → `control` →
//! `store` → `base`, with the pure engine crates (`src/engines/`) under all of them.
//! - `control`: the rule lifecycle (pure rules, the one writer, the scan, the runtime gates,
//!   rolling changes, the agents' desired state).
//! - `data`: ingest → seam → evaluation → metric and log stores → export. It meets the control
//!   plane only at the runtime gates.
//! - `cluster`: gossip membership, the bus, replication.
//! - `api`: the admin routes, the query APIs, the agents' ConfigServer, the protocol client.
//! - `store`: management storage. `base`: what every plane stands on.
//!
//! Only `node` sees everything and wires it together. `cluster-tests/layout.rs` checks the line.

pub mod api;
pub mod base;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod control;
pub mod data;
pub mod node;
pub mod store;

pub use hotrule_rule_compiler as compiler;

/// A boxed, sendable future: what the object-safe async traits between modules return (the
/// bus handler, the workflow's peers, the scan's tombstone purger).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
