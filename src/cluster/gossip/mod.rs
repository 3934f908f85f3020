//! Cluster membership (chitchat gossip) and main selection.
//!
//! Every node gossips a handful of small facts about itself (addresses, a digest of its entries,
//! readiness, its last scan) and derives the same [`ClusterView`] from what it hears: the members,
//! who is live, and the main, which is simply the live node with the smallest id. No vote and no
//! quorum: during a partition each side selects its own main, and last-write-wins replication
//! reconciles the two sides once they hear each other again.
//!
//! - [`main_select`]: pure main selection, generation deduplication, and the evidence rule that
//!   lets a refused bus connection plus a rising phi depose a member before gossip does;
//! - [`liveness`]: the heartbeat times and bus failures that evidence is built from;
//! - [`forward_wait`]: the pure decision of a forwarded write during a failover (try the next
//!   main, wait for the view, or give up);
//! - [`keys`]: the gossip keys in one place, their size cap, and [`keys::digest_of`];
//! - [`view`]: [`ClusterView`] and [`Member`], the only shapes the rest of hotrule sees;
//! - [`membership`]: [`Membership`], which owns the chitchat instance and publishes views;
//! - [`sealed`] and [`secure_udp`]: every UDP datagram sealed with an HMAC over the cluster
//!   secret; a datagram that does not prove the secret never reaches chitchat;
//! - [`roll_health`]: each node's health report for the files it rolls (issue 15), one small
//!   typed key per file, and the main's typed read of every member's report;
//! - [`heartbeats`]: the bound on heartbeats a member may claim (an absurd jump splits a cluster).
//!
//! chitchat types stay inside this module.

pub mod forward_wait;
pub mod heartbeats;
pub mod keys;
pub mod liveness;
pub mod main_select;
pub mod member;
pub mod membership;
pub mod rolling;
pub mod sealed;
pub mod secure_udp;
pub mod view;

#[cfg(test)]
mod sealed_tests;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;

pub use keys::{Fact, MAX_FACT_VALUE_BYTES, digest_of};
pub use main_select::{BusFailure, Liveness, LivenessEvidence, dedup_generations, judge_liveness, select_main};
pub use membership::{GossipNetwork, GossipTransport, Membership, MembershipSettings};
pub use sealed::GossipCounterSnapshot;
pub use rolling::{MAX_ROLL_REPORT_BYTES, RollHealth};
pub use view::{ClusterView, Member};

/// Why a membership operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("value for gossip key {fact} is {len} bytes; gossip values are capped at {max} bytes")]
    FactTooLarge {
        fact: &'static str,
        len: usize,
        max: usize,
    },
    #[error("the roll report of {key} is {len} bytes; roll reports are capped at {max} bytes")]
    RollReportTooLarge {
        key: String,
        len: usize,
        max: usize,
    },
    #[error("the roll report of {key} carries a content hash that is not 64 hex digits")]
    RollReportHash { key: String },
    #[error("the roll report of {key} could not be encoded: {reason}")]
    RollReportEncode { key: String, reason: String },
    #[error("invalid membership settings: {reason}")]
    InvalidSettings { reason: String },
    #[error("gossip did not start on {listen_addr}: {reason}")]
    Start {
        listen_addr: SocketAddr,
        reason: String,
    },
    #[error("gossip stopped with an error: {reason}")]
    Shutdown { reason: String },
}
