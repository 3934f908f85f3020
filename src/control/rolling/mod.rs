//! Rolling rule changes, Exhibitor style (issue 15): one node at a time, advancing only while
//! each node is healthy. This module is the pure core: the persisted roll record and every
//! decision over it, with no IO and no clock (times are passed in, in milliseconds).
//!
//! - [`record`]: the roll record (file key, master and rolling content, ordered node list,
//!   index, per-node state, final state), how a roll starts, which content a node runs
//!   ([`content_for`]), how far it is ([`percent_done`]) and the 409 rule for a normal write to
//!   a file being rolled ([`write_conflict`]).
//! - [`order`]: the node order (new nodes first, the main last).
//! - [`health`]: the health predicate over what a node reports about itself.
//! - [`advance`]: the main's tick ([`advance::advance`]) and the operator's rollback and
//!   force-commit.
//! - [`codec`]: the record's format-versioned encoding (the store keeps the bytes opaque).
//! - [`view`]: the JSON shape of `GET /runtime/rule/rolling`, shared by the client.
//!
//! Who acts on these decisions (the workflow writing the record, the main's tick, each node's
//! scan choosing its content, health in gossip) is designed in `docs/rolling.md`.

pub mod advance;
pub mod codec;
pub mod health;
pub mod order;
pub mod record;
pub mod roller;
pub mod view;

pub use advance::{Decision, Observation, TransitionError, advance, force_commit, rollback};
pub use health::{HealthChecks, HealthFailure, HealthReport, HealthSettings, Verdict, judge};
pub use order::order_nodes;
pub use record::{
    Assignment, NodeRoll, NodeState, RollConflict, RollContent, RollRecord, RollState, StartError, StartRoll,
    StopReason, content_for, percent_done, write_conflict,
};

#[cfg(test)]
mod tests;
