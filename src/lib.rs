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
pub mod config;
pub mod http;
pub mod ids;
pub mod node;
pub mod replication;
pub mod rules;
pub mod runtime;
pub mod scan;
pub mod status;
pub mod tls;
pub mod store;
pub mod workflow;
pub mod worker;

pub use hotrule_rule_compiler as compiler;
