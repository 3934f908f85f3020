//! The cluster bus: node-to-node RPC (HTTP + bincode + HMAC) and its in-memory twin.
//!
//! Gossip (`cluster`) only carries small facts; everything else between nodes goes over the bus:
//! forwarded writes, Suspend/Resume around a structural change, commit notices, and anti-entropy
//! (digests, then full entries). One call is one `POST /bus/v1` whose body is an encoded
//! [`BusRequest`] and whose 200 answer is an encoded [`BusResponse`].
//!
//! - [`messages`]: the vocabulary and its wire encoding (version byte + bincode, bounded);
//! - [`query`]: the payloads of the metric-query messages (cluster-wide metric reads);
//! - [`auth`]: the HMACs over a shared secret (calls and answers), or an explicitly insecure bus;
//! - [`gate`]: what a call passes before it is handled (headers, replay, length, then the MAC);
//! - [`server`]: the axum router that authenticates, decodes and hands requests to a
//!   [`BusHandler`];
//! - [`client`]: the [`BusClient`] trait, its pooled HTTP implementation and the
//!   [`DropSwitch`] used for fault injection;
//! - [`memory`]: [`MemNetwork`], the in-memory twin that encodes for real and can cut, isolate,
//!   drop and delay links.

pub mod alarm_query;
pub mod auth;
pub mod client;
pub mod gate;
pub mod log_query;
pub mod memory;
pub mod messages;
pub mod query;
pub mod server;
#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::base::ids::NodeId;

pub use auth::BusAuth;
pub use client::{BusClient, CountedBusClient, DropSwitch, HttpBusClient};
pub use memory::{MemBusClient, MemNetwork};
pub use messages::{
    BusRequest, BusResponse, EntrySummary, ForwardOp, MAX_MESSAGE_BYTES, NodeView, ReplicaAnswer,
    ReplicaItem, ResumeState, SuspendState,
};
pub use gate::{BusCounterSnapshot, BusGate};
pub use server::{BUS_PATH, BusHandler, router, router_with_gate, serve};

/// Why a bus call or a bus message failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BusError {
    #[error("call to {to} timed out after {after:?}")]
    Timeout { to: NodeId, after: Duration },
    /// Nothing listens, the connection was refused, or (in memory) the link is cut.
    #[error("{to} is unreachable: {reason}")]
    Unreachable { to: NodeId, reason: String },
    /// The connection broke after it was made.
    #[error("transport error calling {to}: {reason}")]
    Transport { to: NodeId, reason: String },
    #[error(
        "{to} refused the call as unauthenticated (is the cluster secret the same on both nodes?)"
    )]
    Unauthorized { to: NodeId },
    /// The answer did not prove the secret (or did not answer this call): not believed.
    #[error("{to} answered without proving the cluster secret ({reason}); answer refused")]
    UnauthenticatedAnswer { to: NodeId, reason: String },
    #[error("{to} answered HTTP {status}: {reason}")]
    Status {
        to: NodeId,
        status: u16,
        reason: String,
    },
    /// Fault injection ([`DropSwitch`]) swallowed the call.
    #[error("{request} to {to} dropped by fault injection")]
    Dropped { to: NodeId, request: &'static str },
    #[error("bad bus address {addr:?} for {to}: {reason}")]
    BadAddress {
        to: NodeId,
        addr: String,
        reason: String,
    },
    #[error("bus message does not decode: {0}")]
    Decode(String),
    #[error("bus message does not encode: {0}")]
    Encode(String),
    #[error("bus message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
}
