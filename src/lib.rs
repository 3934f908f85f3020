//! hotrule: runtime hot-update of SkyWalking MAL and LAL rule files on a peer-to-peer cluster.
//!
//! Imports flow one way: `http` → `workflow` → `store` / `scan` → `runtime` → `rules`.
//! `rules` (pure decisions) and `store` (the only module that touches the key-value engine)
//! import nothing above them. Only `node` sees everything and wires it together.

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
