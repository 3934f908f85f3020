//! The iLogtail / LoongCollector ConfigServer protocol v2, served to agents.
//!
//! Every node serves log and metric agents over this protocol: agents heartbeat every ten seconds
//! with their state and receive the pipeline and instance configs, and onetime commands, assigned
//! to the groups they belong to. The module is layered like the rest of hotrule:
//!
//! - `proto`: the generated messages (from `proto/agent_v2.proto`, wire-identical to the
//!   agent's `agentV2.proto`);
//! - pure decisions: `model` (validated desired-state values), `matching` (groups),
//!   `detail` (YAML/JSON → JSON detail), `snapshot` (what one agent should hold), `protocol`
//!   (request × remembered × desired → response), `liveness`;
//! - seams: [`AgentConfigSource`] (desired state, read-only; [`MemConfigSource`] in memory) and
//!   [`AgentStateStore`] (agent state, batched; [`MemAgentStateStore`] in memory);
//! - state and IO: [`AgentRegistry`] (agents held by this node, flushed in batches),
//!   [`AgentService`] (carries out the decisions), [`router`] (HTTP);
//! - the node's side: `manage` (management operations as pure edits of stored objects) and
//!   `store_source` (the seams implemented over management storage);
//! - `sim`: a protocol client that behaves like the 3.x agent, for tests and load generation.
//!
//! The behaviour rules, and why each is as it is, are in `protocol`'s docs.

pub mod bounds;
pub mod error;
pub mod http;
pub mod liveness;
pub mod maintenance;
pub mod protocol;
pub mod registry;
pub mod service;
pub mod sim;
pub mod snapshot;
pub mod source;
pub mod state;
pub mod store_source;

#[cfg(test)]
mod tests;

pub use http::router;

/// The optional agent token header. The 3.x agent sends no headers of its own, so a token only
/// works for agents behind a proxy that adds it; with no token configured it is not checked.
pub const AGENT_TOKEN_HEADER: &str = "x-hotrule-agent-token";
pub use liveness::{Liveness, LivenessPolicy};
pub use crate::control::agents::model::{
    AgentGroup, ConfigEntry, ConfigKind, ContentFormat, GroupSelector, OnetimeCommand, TagMatch,
};
pub use protocol::DetailDelivery;
pub use registry::AgentRegistry;
pub use service::{AgentService, AgentServiceSettings};
pub use sim::{AgentBenchReport, AgentBenchSettings, run_agents};
pub use snapshot::ConfigSnapshot;
pub use source::{AgentConfigSource, MemConfigSource};
pub use state::{AgentRecord, AgentStateStore, MemAgentStateStore};
pub use store_source::{StoreAgentState, StoreConfigSource};
pub use crate::control::agents::manage::AgentOp;
