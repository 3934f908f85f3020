//! What every plane stands on: identifiers, the clock, background workers, listeners, TLS and
//! the node's own metrics. Nothing here imports anything above it.

pub mod base64;
pub mod entity_ids;
pub mod clock;
pub mod duration;
pub mod fast;
pub mod ids;
pub mod owner;
pub mod secret;
pub mod listen;
pub mod self_metrics;
pub mod skips;
pub mod tls;
pub mod worker;
